/* shapevm native tier: the calling convention shared by the kernel library, the region
 * executor and generated code.  Plain C11, no Python.  Everything here is stable within one
 * SV_ABI_VERSION; generated code records the version it was built for.
 */
#ifndef SVNATIVE_H
#define SVNATIVE_H
#include <stddef.h>
#include <stdint.h>

#define SV_ABI_VERSION 1

/* Activations of fused epilogues (dense, convolution, bias+activation). */
enum sv_act {
    SV_ACT_NONE = 0,
    SV_ACT_RELU = 1,
    SV_ACT_GELU_TANH = 2,
    SV_ACT_GELU_ERF = 3,
    SV_ACT_SILU = 4,
    SV_ACT_SIGMOID = 5,
    SV_ACT_TANH = 6,
    SV_ACT_HARD_SWISH = 7, /* x * clip(x + 3, 0, 6) / 6 */
    SV_ACT_LEAKY_RELU = 8, /* x < 0 ? slope * x : x */
    SV_ACT_RELU6 = 9,      /* clip(x, 0, 6): MobileNet's */
    SV_ACT_COUNT
};

/* Columns of a packed weight panel: every instruction set reads the same packed layout. */
#define SV_NR 16

/* A fused epilogue: C = act(alpha * acc + bias[col]) + residual[row, col]. */
typedef struct sv_epilogue {
    const float *bias;     /* [N] or NULL */
    const float *residual; /* rows of ldr floats, or NULL */
    ptrdiff_t ldr;
    float alpha;
    int act;     /* enum sv_act */
    float slope; /* SV_ACT_LEAKY_RELU's slope below 0 */
    int res_first; /* convolutions only: act(x + bias + residual), as a ResNet block ends,
                    * instead of act(x + bias) + residual; the dense kernels ignore it */
    int res_mul;   /* dense kernels only: act(x + bias) * residual (a gated linear unit's
                    * product) instead of + residual; the convolutions ignore it */
} sv_epilogue;

/* Weights packed for the micro-kernel: panel p holds columns [16p, 16p + 16) of W[K, N]
 * as K rows of 16 floats (zeros past N), panels one after another. */
typedef struct sv_packed_b {
    int64_t k, n, panels;
    float *data; /* panels * k * 16 floats, 64-byte aligned */
} sv_packed_b;

/* Thread pool: run fn(ctx, task) for task in [0, ntasks) on the pool and the caller. */
typedef void (*sv_task_fn)(void *ctx, int64_t task);

/* -- the region executor's view of a tensor, and of a kernel it runs ------------------- */
#define SVX_MAXDIM 8

/* dtype codes of svx_tensor.dtype */
enum svx_dtype { SVX_F32 = 0, SVX_F64, SVX_I32, SVX_I64, SVX_BOOL, SVX_U8, SVX_I8, SVX_I16,
                 SVX_F16, SVX_NDTYPES };

/* A tensor of one call: data, shape, strides in elements (0 where broadcast). */
typedef struct svx_tensor {
    char *data;
    int32_t ndim, dtype;
    int64_t shape[SVX_MAXDIM];
    int64_t strides[SVX_MAXDIM];
} svx_tensor;

/* An instruction's kernel (a family of the library, or generated code): runs over the
 * call's tensors with the GIL released; returns 0, or with a static message in *err -1
 * (operands it cannot run: a fault of the lowering) or SVX_DATA_ERROR (the call's data:
 * an index out of range). `self` is the kernel's static data (packed weights, a tile
 * program...). */
#define SVX_DATA_ERROR (-2)
typedef int (*svx_kernel_fn)(const void *self, const svx_tensor *ins, int nin,
                             const svx_tensor *outs, int nout, const int32_t *iattr,
                             const float *fattr, const char **err);
#endif
