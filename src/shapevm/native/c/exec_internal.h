/* The region executor's Python object (shapevm._native.Executor), shared by its files:
 * exec.c (the type, the threads' arenas, patching in generated kernels), exec_check.c (the
 * constructor and its checks of a region), exec_resolve.c (what a call computes before it
 * runs: the dimension program, the views, the operands' fit) and exec_call.c (a call).
 * Private to them: exec.h is the region format that generated code's headers sit beside,
 * and holds no Python types.
 */
#ifndef SV_EXEC_INTERNAL_H
#define SV_EXEC_INTERNAL_H
#include "pyutil.h"
#include "exec.h"
#include "svgen_env.h"
#include <stdatomic.h>

typedef struct {
    PyObject_HEAD int nvars, nheap, nprog, nchecks, nslots, nbuffers, noutputs, ninstrs,
        ninputs;
    int64_t *heap0;    /* initial heap: constants, SVX_UNSET elsewhere */
    int64_t (*prog)[4];
    int64_t (*checks)[2];
    svx_slot *slots;
    int32_t *buffers;  /* heap cell of each buffer's byte size */
    int32_t *outputs;  /* slot of each output */
    int32_t (*output_perm)[SVX_MAXDIM]; /* or NULL: per output, -1, or the axes of its slot
                                         * that the result's axes are (a transposed view of
                                         * it is returned, as NumPy returns x.T) */
    int32_t (*output_shape)[SVX_MAXDIM + 1]; /* or NULL: per output, -1, or a rank and the
                                              * heap cells of the shape its slot's array is
                                              * returned in (a reshaped view: y.reshape(-1)) */
    int32_t *input_slot; /* slot of each argument */
    int32_t (*dimcells)[2]; /* each cell a computed slot's dim or a buffer's size reads, once:
                             * (cell, slot or -1 - buffer) -- checked >= 0 at each call */
    int ndimcells;
    svx_instr *instrs;
    PyObject *consts;  /* list of contiguous arrays (kept alive) */
    PyObject *keep;    /* each generated kernel's capsule ever patched in, once */
    char **const_data;
    int threads;
    _Atomic int64_t calls, mismatches;
    _Atomic int64_t *prof; /* per instruction: nanoseconds, runs (while profiling is on) */
} Executor;

/* Whether calls time each instruction into their executor's `prof` (set_profiling). */
extern _Atomic int svx_profiling;

/* ExecMismatch: the arrays of a call do not fit the region (made by sv_exec_types). */
extern PyObject *sv_ExecMismatch;
/* ExecFailure (a RuntimeError): an instruction failed on the call's data; the exception's
 * `instruction` is its index in the region and `reason` what it said. */
extern PyObject *sv_ExecFailure;
/* The NumPy type number of each svx_dtype. */
extern const int svx_npy_of[SVX_NDTYPES];
extern svg_env_t svx_gen_env; /* generated kernels get its address as `self` (exec.c) */

/* exec.c: this thread's grow-only arena of at least `bytes`, or NULL out of memory. */
char *svx_arena_get(size_t bytes);

/* exec_check.c: Executor(spec), every index of the region checked. */
PyObject *sv_exec_new(PyTypeObject *type, PyObject *args, PyObject *kw);

/* exec_resolve.c: the dimension program (0, or -1 / -2: svx_dimprog_error[1 / 2]), a view
 * slot from its base, and the fit of an instruction's resolved operands. */
int svx_run_dimprog(const Executor *e, int64_t *h);
extern const char *const svx_dimprog_error[3];
int svx_resolve_view(const svx_slot *sl, const svx_tensor *base, const int64_t *h,
                     svx_tensor *t, char *msg, size_t size);
const char *svx_dense_misfit(const svx_tensor *x, const svx_tensor *y, const svx_tensor *r,
                             const sv_packed_b *b);
const char *svx_matmul_misfit(const svx_tensor *a, const svx_tensor *b, const svx_tensor *c);

/* Row-major strides of t's shape (inline: a call sets them on every slot). */
static inline void svx_contiguous_strides(svx_tensor *t) {
    int64_t s = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        t->strides[d] = s;
        s *= t->shape[d];
    }
}

/* exec_call.c: a call, bind() and heap(). */
PyObject *sv_exec_tp_call(PyObject *self, PyObject *args, PyObject *kw);
PyObject *sv_exec_bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *sv_exec_heap(Executor *e, PyObject *args);
#endif
