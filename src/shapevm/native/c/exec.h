/* The one-call region executor: a lowered region as plain data, run by one C call.
 *
 * A region is lowered once per program (not per shape) into:
 *  - a dimension heap: int64 cells; cells [0, nvars) are the dimension variables, bound
 *    from the inputs' shapes (TVM Relax's match_shape); the others are constants or are
 *    computed by the dimension program (SVX_D_* steps) from earlier cells;
 *  - checks: cells that must be >= 0 (constraints) or == 0 (equalities);
 *  - tensor slots: inputs, constants, arena buffers, outputs, and views of other slots
 *    (transpose, slice, reshape, broadcast), every dimension a heap cell;
 *  - buffers: arena blocks whose byte size is a heap cell (the symbolic memory plan);
 *  - instructions: a kernel of the library (dense, matmul, convolution, row op, tile
 *    program, copy, fill) over slots, with static attributes.
 * A call binds the heap, runs the dimension program and the checks, sizes the thread's
 * grow-only arena, allocates the outputs, releases the GIL and runs the instructions.
 */
#ifndef SV_EXEC_H
#define SV_EXEC_H
#include "sv_internal.h"
#include <stdatomic.h>

#define SVX_MAXIN 8
#define SVX_MAXOUT 4
#define SVX_NIATTR 12
#define SVX_NFATTR 4
#define SVX_MAXGEN 8
#define SVX_UNSET INT64_MIN

/* dimension program steps: heap[out] = f(heap[a], heap[b] or the constant b) */
enum svx_dimop {
    SVX_D_ADD = 1,
    SVX_D_SUB,
    SVX_D_MUL,
    SVX_D_FLOORDIV,
    SVX_D_MOD,
    SVX_D_MAX,
    SVX_D_MIN,
    SVX_D_ADDC, /* heap[a] + b */
    SVX_D_MULC, /* heap[a] * b */
    SVX_D_COUNT
};

enum svx_slotkind { SVX_S_INPUT = 1, SVX_S_CONST, SVX_S_BUFFER, SVX_S_OUTPUT, SVX_S_VIEW };

enum svx_viewop {
    SVX_V_TRANSPOSE = 1, /* param[i] = the base axis of axis i */
    SVX_V_SLICE,         /* param[i] = heap cell of start; param2[i] = step (constant) */
    SVX_V_RESHAPE,       /* the base is contiguous: new dims, contiguous strides */
    SVX_V_BROADCAST,     /* the base's dims right-aligned; a 1 against a larger dim -> 0 */
    SVX_V_SELECT,        /* param[i] = the base axis of axis i, or -1 for a new axis of size
                          * 1; base axes left out must have size 1 (a reshape that adds or
                          * drops unit axes of any base, strided or not) */
};

extern const int svx_itemsize[SVX_NDTYPES];
/* whether two tensors' memory meets; whether a result y meets its input x or a residual r
 * it is not exactly (exec_resolve.c) */
int svx_overlaps(const svx_tensor *a, const svx_tensor *b);
int svx_result_overlaps(const svx_tensor *y, const svx_tensor *x, const svx_tensor *r);

typedef struct svx_slot {
    int32_t kind, dtype, ndim, index; /* index: arg / const / buffer / output / base slot */
    int32_t dims[SVX_MAXDIM];         /* heap cells */
    int32_t viewop;
    int32_t param[SVX_MAXDIM], param2[SVX_MAXDIM];
} svx_slot;

enum svx_op {
    SVX_OP_DENSE = 1, /* in: x [, residual]; out: y; obj: PackedDense;
                       * i: act, residual multiplied (1) or added (0); f: alpha, slope */
    SVX_OP_MATMUL,    /* in: a, b; out: c; f: alpha */
    SVX_OP_COPY,      /* in: x; out: y (same shape, any strides, same dtype) */
    SVX_OP_FILL,      /* out: y; f[0]: value (cast to y's dtype) */
    SVX_OP_EXTERNAL,  /* obj: a capsule of sv_exec_kernel (another kernel family) */
    SVX_OP_IOTA,      /* out: y of rank 1: 0, 1, ..., n - 1 (f32, f64, i32 or i64) */
    SVX_OP_COUNT
};

struct svx_call;

typedef struct svx_instr {
    int32_t op, nin, nout;
    int32_t in[SVX_MAXIN], out[SVX_MAXOUT];
    int32_t iattr[SVX_NIATTR];
    float fattr[SVX_NFATTR];
    void *obj;             /* PyObject* (owned) for DENSE / EXTERNAL, NULL otherwise */
    /* tier 3: generated kernels tried first (a kernel returns 1 for shapes it does not
     * cover); published one by one with release stores, never freed while it runs */
    _Atomic(svx_kernel_fn) gen[SVX_MAXGEN];

    svx_kernel_fn kernel;  /* EXTERNAL: the family's entry */
    const void *kself;     /* EXTERNAL: its static data */
} svx_instr;

/* Generated code's capsule (load_kernel); the only kind Executor.patch takes. */
#define SV_GEN_KERNEL "shapevm.gen_kernel"

/* The capsule an EXTERNAL instruction's object carries (name "shapevm.exec_kernel", or
 * SV_GEN_KERNEL). */
typedef struct sv_exec_kernel {
    svx_kernel_fn run;
    const void *self;
} sv_exec_kernel;

int svx_copy(const svx_tensor *src, const svx_tensor *dst);
int svx_fill(const svx_tensor *dst, double value);
int svx_iota(const svx_tensor *dst);
int svx_matmul(const svx_tensor *a, const svx_tensor *b, const svx_tensor *c, float alpha,
               int threads);
#endif
