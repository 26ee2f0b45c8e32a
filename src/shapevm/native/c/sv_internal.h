/* Internal declarations of the kernel library: the per-ISA function table, the pool,
 * memory helpers.  Not part of the calling convention (svnative.h is). */
#ifndef SV_INTERNAL_H
#define SV_INTERNAL_H
#include "svnative.h"
#include "svtile.h"
#include <stdbool.h>

#if defined(__clang__)
#define SV_TARGET_PUSH(t) _Pragma("clang attribute push (__attribute__((target(" #t "))), apply_to = function)")
#define SV_TARGET_POP _Pragma("clang attribute pop")
#else
#define SV_STR_(x) #x
#define SV_PRAGMA_(x) _Pragma(SV_STR_(x))
#define SV_TARGET_PUSH(t) SV_PRAGMA_(GCC push_options) SV_PRAGMA_(GCC target(t))
#define SV_TARGET_POP SV_PRAGMA_(GCC pop_options)
#endif

#ifdef SV_DEBUG
#include <stdio.h>
#include <stdlib.h>
/* Bounds checks of the debug build (SHAPEVM_NATIVE_DEBUG=1 pip install -e .). */
#define SV_ASSERT(c)                                                                   \
    do {                                                                               \
        if (!(c)) {                                                                    \
            fprintf(stderr, "shapevm native: check failed at %s:%d: %s\n", __FILE__,   \
                    __LINE__, #c);                                                     \
            abort();                                                                   \
        }                                                                              \
    } while (0)
#else
#define SV_ASSERT(c) ((void)0)
#endif

/* One micro-kernel call: C[mr, nc] (+)= A[mr, kc] @ Bp[kc, nc], then the epilogue when
 * `last`.  A rows are lda apart (unit stride along k); C rows ldc apart; the columns are
 * ceil(nc / 16) packed panels of kc x 16 floats, pstride floats apart (unused for nc <= 16);
 * only the first `nc` columns of C are written.  accumulate: C holds the sum over the k
 * chunks before and each element's chain of FMAs goes on from it, so a row's result is the
 * same for any row count, panel count or k chunk (see gemm_kern.h). */
typedef void (*sv_ukr_fn)(int mr, int nc, int64_t kc, const float *a, int64_t lda,
                          const float *bp, int64_t pstride, float *c, int64_t ldc,
                          bool accumulate, bool last, const sv_epilogue *ep, int64_t row0,
                          int64_t col0);

/* Panels a micro-kernel call of R rows takes at a time (vectors of 16 / NV floats): enough
 * for 8 independent chains of FMAs, and two from 2 rows up where a panel row is one vector
 * (AVX-512), so that each broadcast of A feeds two FMAs (gemm_kern.h, ukr_rows2).  From 2
 * to 7 rows that kernel replaced ukr_rows with 2 to 4 panels, whose accumulators GCC kept
 * in memory: 1024 x 1024 weights at 4 rows took 142 us on one thread, now 55 (8 rows: 80).
 * Callers give it that many panels per call. */
#define SV_UKR_PANELS(R, NV)                                                               \
    ((NV) == 1 && (R) >= 2 ? 2 : (R) * (NV) >= 8 ? 1 : (8 + (R) * (NV) - 1) / ((R) * (NV)))
static inline int sv_ukr_panels(int vw, int rows) {
    return SV_UKR_PANELS(rows, SV_NR / vw);
}

/* Element-wise vector math over n floats (dst may equal src). */
typedef void (*sv_vmath_fn)(float *dst, const float *src, int64_t n);

enum sv_vmath_op {
    SV_VM_EXP,
    SV_VM_LOG,
    SV_VM_TANH,
    SV_VM_ERF,
    SV_VM_SIGMOID,
    SV_VM_SQRT,
    SV_VM_GELU_TANH,
    SV_VM_GELU_ERF,
    SV_VM_SILU,
    SV_VM_COUNT
};

struct sv_conv_kern; /* conv_kern.h, pool_kern.h: convolution and pooling kernels */
/* One row of a norm (rowops_kern.h): n floats, eps, RMS instead of layer norm, the affine
 * gamma and beta ([n] or NULL). */
typedef struct sv_norm_params {
    int64_t n;
    float eps;
    int rms;
    const float *gamma, *beta;
} sv_norm_params;

/* One row of softmax: n floats, the scale of the scores, log-softmax instead. */
/* Softmax rows up to this long go SV_VW rows at a time (softmax_rows). */
#define SV_SHORT_ROW 8
typedef struct sv_softmax_params {
    int64_t n;
    float scale;
    int log;
} sv_softmax_params;

/* The tile interpreter's kernels (tile_kern.h): one per opcode, plus the bool and
 * constant-exponent variants that sv_tile_plan_init resolves instructions to. */
enum { SV_TK_COPY = SV_TOP_COUNT, SV_TK_NE0, SV_TK_SQUARE, SV_TK_COUNT };
typedef void (*sv_tile_fn)(float *dst, const float *a, const float *b, const float *c, int n);
typedef struct sv_tile_kernels {
    sv_tile_fn op[SV_TK_COUNT];
    float (*reduce)(int red, const float *v, int n);
} sv_tile_kernels;
/* Fill a tile error's fields; returns -1 (tile_plan.c). */
int sv_tile_fail(sv_tile_error *e, const char *what, const char *expected, const char *found,
                 const char *fix);

/* The integer kernel's kinds (exec_kernels.c), comparisons first; int_kern.h's rows. */
enum {
    SV_ICMP_LT, SV_ICMP_LE, SV_ICMP_GT, SV_ICMP_GE, SV_ICMP_EQ, SV_ICMP_NE, SV_IOP_ADD,
    SV_IOP_SUB, SV_IOP_MUL, SV_IOP_MAX, SV_IOP_MIN, SV_IOP_CAST, SV_IOP_FLOORDIV, SV_IOP_MOD,
    SV_IOP_WHERE, SV_IOP_ABS, SV_IOP_NEG
};
/* Rows of n integers of one type: y[r * yrs + k] = kind(a[r * ars + k * as], b[r * brs +
 * k * bs]) (where: of c[r * crs + k * cs]) for r < rows, strides in elements, y of unit
 * stride along a row (bool for a comparison); a unary kind reads a only. */
typedef struct sv_int_rows {
    const void *a, *b;
    const uint8_t *c;
    void *y;
    int64_t as, bs, cs, ars, brs, crs, yrs, n, rows;
} sv_int_rows;
typedef void (*sv_int_row_fn)(int kind, const sv_int_rows *p);

/* What one instruction set provides; chosen once at import (platform.c). */
typedef struct sv_isa_table {
    const char *name;
    int level;  /* 0 generic, 1 avx2, 2 avx512 */
    int vw;     /* floats per vector */
    int mr;     /* rows per micro-kernel tile */
    sv_ukr_fn ukr;
    sv_vmath_fn vmath[SV_VM_COUNT];
    void (*act_rows)(float *x, int64_t rows, int64_t cols, int64_t ld, const sv_epilogue *ep);
    const struct sv_conv_kern *conv;
    /* rowops_kern.h: y = norm(x + r), with x + r stored to h when h is given */
    void (*norm_row)(const sv_norm_params *p, const float *x, const float *r, float *h,
                     float *y);
    void (*softmax_row)(const sv_softmax_params *p, const float *x, const float *mask,
                        float *y);
    void (*softmax_rows)(const sv_softmax_params *p, const float *x, int64_t sx,
                         const float *mask, int64_t sm, float *y, int64_t sy, int64_t rows);
    void (*attn_softmax)(float *s, int rows, int64_t ld, int64_t cols, float scale,
                         const float *mask, int64_t ldm, const int64_t *lim, float *m,
                         float *l, float *alpha);
    const sv_tile_kernels *tile; /* tile_kern.h */
    sv_int_row_fn int_row[2];    /* int_kern.h: of int32, of int64 */
} sv_isa_table;

extern const sv_isa_table sv_table_generic;
#if defined(__x86_64__) || defined(_M_X64)
#define SV_HAVE_X86 1
extern const sv_isa_table sv_table_avx2;
extern const sv_isa_table sv_table_avx512;
#endif

/* platform.c */
const sv_isa_table *sv_isa(void);
int sv_isa_supported(int level);
const sv_isa_table *sv_isa_by_name(const char *name);
int sv_set_isa(const char *name); /* 0 ok, -1 unknown, -2 not supported here */
const char *sv_isa_note(void); /* why SHAPEVM_ISA was not followed, or "" */
size_t sv_l2_bytes(void);      /* a core's L2 cache (sysconf), else 512 KiB */

/* pool.c */
#ifndef SV_PARALLEL_MIN_MACS
#define SV_PARALLEL_MIN_MACS 262144.0 /* products smaller than this stay on the caller */
#endif
int sv_pool_threads(void);
void sv_pool_set_threads(int n);
void sv_pool_start(void); /* start the workers now, not at the first parallel job */
void sv_parallel(int64_t ntasks, sv_task_fn fn, void *ctx);
/* The tasks on the calling thread where threads <= 1 (a kernel judged its work too small
 * for the pool), else sv_parallel. */
void sv_run_tasks(int64_t ntasks, sv_task_fn fn, void *ctx, int threads);
typedef struct sv_pool_stats {
    int64_t parallel_calls, serial_calls, tasks_by_caller, tasks_by_workers;
    int64_t late_jobs;        /* jobs whose caller waited long for a worker */
    int64_t backed_off_calls; /* parallel calls run serially after a late job */
    int64_t serial_jobs_left; /* parallel calls still to run serially (the backoff) */
} sv_pool_stats;
sv_pool_stats sv_pool_get_stats(void);
bool sv_pool_late(uint64_t own_ns, uint64_t wait_ns, bool waking); /* the rule for a late job */

/* memory */
void *sv_alloc(size_t bytes); /* 64-byte aligned, NULL on failure */
void sv_free(void *p);
/* grow-only scratch: at least `bytes` (64-byte aligned) in place of `old` (whose size was
 * `old_size`), its size in *size; NULL on failure, `old` then still valid.  Not copied. */
#define SV_SCRATCH_MAP ((size_t)1 << 20) /* from this size on, a growing mapping */
void *sv_scratch_grow(void *old, size_t old_size, size_t bytes, size_t *size);
void sv_scratch_free(void *p, size_t size);
size_t sv_map_code(const void *addr); /* the loaded object's code mapped in now: bytes */
extern size_t sv_code_mapped;        /* sv_map_code of the extension, at import */
/* This thread's grow-only scratch of one kind (a slot): at least `bytes` of 64-byte aligned
 * memory, kept between calls and freed when the thread ends; NULL on failure.  A kernel
 * asks for its slot once per task and does not call another user of the same slot while
 * it holds it. */
enum {
    SV_SCRATCH_CONV,      /* a convolution task's slabs */
    SV_SCRATCH_ATT_S,     /* an attention head's block of scores */
    SV_SCRATCH_ATT_K,     /* ... its keys, packed */
    SV_SCRATCH_ATT_V,     /* ... its values, packed */
    SV_SCRATCH_GEMM_A,    /* sv_sgemm's copy of a strided left operand */
    SV_SCRATCH_GEMM_B,    /* ... and its packed right operand */
    SV_SCRATCH_REDUCE,    /* a reduction's partial results (the calling thread's) */
    SV_SCRATCH_CONV_PAIR, /* a band of two convolutions in a row: input, middle, result */
    SV_SCRATCH_SLOTS
};
void *sv_thread_scratch(int slot, size_t bytes);

/* gemm.c */
int sv_pack_b(sv_packed_b *out, const float *w, int64_t k, int64_t n, int64_t sk, int64_t sn);
void sv_packed_b_free(sv_packed_b *p);
/* The floats a pack of W[k, n] takes, and the pack into memory the caller owns (`data`,
 * 64-byte aligned, at least that many floats; sv_packed_b_free must not be called on it). */
size_t sv_pack_b_floats(int64_t k, int64_t n);
void sv_pack_b_into(sv_packed_b *out, float *data, const float *w, int64_t k, int64_t n,
                    int64_t sk, int64_t sn);
void sv_dense(int64_t m, const float *a, int64_t lda, const sv_packed_b *b, float *c,
              int64_t ldc, const sv_epilogue *ep, int threads);
void sv_sgemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t sam, int64_t sak,
              const float *b, int64_t sbk, int64_t sbn, float *c, int64_t ldc,
              const sv_epilogue *ep, int threads);
#include "sv_conv.h"

/* rowops.c: row operations over the last axis of float32 tensors.  Every operand is rows
 * of n unit-stride floats indexed by the same leading dims `lead`; its leading strides are
 * in floats (0 where it broadcasts).  Operands may alias only element for element. */
#define SV_ROW_MAX_DIMS 8
enum sv_row_kind { SV_ROW_LAYER_NORM, SV_ROW_RMS_NORM, SV_ROW_SOFTMAX, SV_ROW_LOG_SOFTMAX };
typedef struct sv_rowop {
    int kind; /* enum sv_row_kind */
    int nd;   /* leading dims, <= SV_ROW_MAX_DIMS */
    int64_t lead[SV_ROW_MAX_DIMS];
    int64_t n; /* row length, >= 1 */
    const float *x;
    int64_t sx[SV_ROW_MAX_DIMS];
    const float *r; /* norms: the residual added to x; softmax: the additive mask; or NULL */
    int64_t sr[SV_ROW_MAX_DIMS];
    float *h; /* norms: x + r written out (the next residual), or NULL */
    int64_t sh[SV_ROW_MAX_DIMS];
    float *y;
    int64_t sy[SV_ROW_MAX_DIMS];
    const float *gamma, *beta; /* norms: [n] unit-stride, or NULL */
    float eps;                 /* norms */
    float scale;               /* softmax: scores are x * scale (+ mask) */
} sv_rowop;
void sv_rowop_run(const sv_rowop *op, int threads);

/* attention.c: softmax(q @ k^T * scale + mask) @ v per head, scores a tile at a time. */
#define SV_ATT_MAX_DIMS 6
typedef struct sv_attention {
    int nd; /* batch dims (heads included), <= SV_ATT_MAX_DIMS */
    int64_t batch[SV_ATT_MAX_DIMS];
    int64_t sq, sk, d, dv;
    /* strides in floats: batch dims (0 where broadcast), then rows; unit along d / dv */
    const float *q;
    int64_t sbq[SV_ATT_MAX_DIMS], srq;
    const float *k;
    int64_t sbk[SV_ATT_MAX_DIMS], srk;
    const float *v;
    int64_t sbv[SV_ATT_MAX_DIMS], srv;
    const float *mask; /* additive [.., sq, sk] unit along keys, or NULL */
    int64_t sbm[SV_ATT_MAX_DIMS], srm;
    float *o;
    int64_t sbo[SV_ATT_MAX_DIMS], sro;
    float scale;
    int causal; /* query i sees keys j <= i (top-left aligned, as torch's is_causal) */
} sv_attention;
int sv_attention_run(const sv_attention *a, int threads); /* 0, or -1 out of memory */
#endif
