/* Internal declarations of the kernel library: the per-ISA function table, the pool,
 * memory helpers.  Not part of the calling convention (svnative.h is). */
#ifndef SV_INTERNAL_H
#define SV_INTERNAL_H
#include "svnative.h"
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

/* One micro-kernel call: C[mr, 16] (+)= A[mr, kc] @ Bp[kc, 16], then the epilogue when
 * `last`.  A rows are lda apart (unit stride along k); C rows ldc apart; only the first
 * `nc` (<= 16) columns of C are written. */
typedef void (*sv_ukr_fn)(int mr, int nc, int64_t kc, const float *a, int64_t lda,
                          const float *bp, float *c, int64_t ldc, bool accumulate, bool last,
                          const sv_epilogue *ep, int64_t row0, int64_t col0);

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

/* pool.c */
int sv_pool_threads(void);
void sv_pool_set_threads(int n);
void sv_parallel(int64_t ntasks, sv_task_fn fn, void *ctx);
typedef struct sv_pool_stats {
    int64_t parallel_calls, serial_calls, tasks_by_caller, tasks_by_workers;
} sv_pool_stats;
sv_pool_stats sv_pool_get_stats(void);

/* memory */
void *sv_alloc(size_t bytes); /* 64-byte aligned, NULL on failure */
void sv_free(void *p);

/* gemm.c */
int sv_pack_b(sv_packed_b *out, const float *w, int64_t k, int64_t n, int64_t sk, int64_t sn);
void sv_packed_b_free(sv_packed_b *p);
void sv_dense(int64_t m, const float *a, int64_t lda, const sv_packed_b *b, float *c,
              int64_t ldc, const sv_epilogue *ep, int threads);
void sv_sgemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t sam, int64_t sak,
              const float *b, int64_t sbk, int64_t sbn, float *c, int64_t ldc,
              const sv_epilogue *ep, int threads);
#include "sv_conv.h"
#endif
