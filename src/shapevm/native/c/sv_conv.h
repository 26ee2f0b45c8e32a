/* Convolution and pooling: the C interface of conv.c and pooling.c (included by sv_internal.h),
 * for the Python entry points and the region executor.
 *
 * Layouts.  NCHW is the API's: x[n][c][h][w], C-contiguous.  The blocked layout keeps 16
 * channels of a pixel together, NCHW16c: x[n][ceil(c/16)][h][w][16], C-contiguous, the
 * channels past c zero (every function that writes it writes those zeros; a convolution
 * reading it relies on them being finite).  Consecutive convolutions on the blocked layout
 * need no reorder between them; sv_nchw_to_blocked / sv_blocked_to_nchw convert at the
 * edges.  Blocked tensors do not depend on the instruction-set level.
 *
 * Every function here trusts its arguments (the Python entry points check them); the
 * debug build (SV_DEBUG) asserts the sizes it relies on.  Functions returning int return
 * 0, or -1 when scratch memory could not be allocated (nothing was written then).
 */
#ifndef SV_CONV_H
#define SV_CONV_H
#include "svnative.h"

#define SV_CB 16 /* channels per block of the blocked layout (= SV_NR) */

/* A 2-D convolution (cross-correlation) as ONNX and PyTorch define it. */
typedef struct sv_conv_shape {
    int64_t cin, cout, kh, kw;
    int64_t sh, sw; /* stride */
    int64_t dh, dw; /* dilation */
    int64_t pt, pb, pl, pr; /* zero padding: top, bottom, left, right */
    int64_t groups; /* cin and cout divisible by it */
} sv_conv_shape;

/* Weights packed once for the convolution kernels (sv_pack_conv).  Output channels come
 * in blocks of 16; block b reads input channel blocks [blk0[b], blk0[b] + nblk[b]) (all of
 * them without groups) and holds, for each of those blocks, each tap (kh, kw) and each of
 * kc input channels, a row of 16 weights (zero where a channel is outside the output
 * channel's group, past cin or past cout).  Depthwise convolutions (groups == cin ==
 * cout) keep one row of 16 per tap instead. */
typedef struct sv_packed_conv {
    sv_conv_shape s;
    int depthwise;
    int64_t kc;        /* input channels per block and tap: min(16, cin) */
    int64_t cbin, cbout; /* channel blocks of the input and of the output */
    int64_t *blk0, *nblk, *woff; /* per output block: first input block, count, weights */
    float *w;          /* 64-byte aligned */
    float *rows;       /* NULL, or W[cout][cin * kh * kw + 1] with the bias last (below) */
    float *bias;       /* cbout * 16 floats, zeros past cout (and without a bias) */
    int has_bias;
    float *wino;       /* NULL, or the Winograd transform of the weights (conv_wino.c) */
} sv_packed_conv;

/* Pack w[cout][cin/groups][kh][kw], read with element strides ws (any layout), and an
 * optional bias[cout] (element stride bstride). */
int sv_pack_conv(sv_packed_conv *out, const sv_conv_shape *s, const float *w,
                 const int64_t ws[4], const float *bias, int64_t bstride);
void sv_packed_conv_free(sv_packed_conv *p);

/* Output size of the convolution on an h x w input; -1 when the window is larger than
 * the padded input along an axis, else 0. */
int sv_conv_out_hw(const sv_conv_shape *s, int64_t h, int64_t w, int64_t *oh, int64_t *ow);

enum sv_layout {
    SV_LAYOUT_NCHW = 0,   /* x[n][c][h][w] */
    SV_LAYOUT_BLOCKED = 1 /* x[n][ceil(c/16)][h][w][16] */
};

/* y = act(conv(x, w) + bias) + residual on n images of h x w, for act an enum sv_act (and
 * slope, leaky_relu's), or with res_first y = act(conv(x, w) + bias + residual) (a ResNet
 * block's end); x in x_layout, y and residual in y_layout (enum sv_layout: an NCHW
 * image in and blocked out starts a chain of blocked convolutions, blocked in and NCHW out
 * ends one).
 * residual may be NULL, or equal to y (accumulate in place); y must not overlap x.
 * threads: at most this many (0: the pool's size); small convolutions run on the
 * calling thread. */
int sv_conv2d(const sv_packed_conv *p, int64_t n, int64_t h, int64_t w, const float *x,
              int x_layout, float *y, int y_layout, const float *residual, int act,
              float slope, int res_first, int threads);

/* y = act2(conv2(act1(conv1(x)))), the two convolutions' biases included, by bands of y's
 * rows: conv1's result is made a band at a time in a thread's scratch, never whole.  x in
 * x_layout, y in y_layout; p2's input channels are p1's output channels.  Returns 0, or -1
 * when scratch memory could not be allocated. */
int sv_conv2d_pair(const sv_packed_conv *p1, const sv_packed_conv *p2, int64_t n, int64_t h,
                   int64_t w, const float *x, int x_layout, float *y, int y_layout, int act1,
                   float slope1, int act2, float slope2, int threads);

/* y[n][cout] = the mean over each image's pixels of act(conv(x, w) + bias), by bands of
 * the convolution's rows: its result is never written whole.  x in x_layout.  Returns 0,
 * or -1 when memory could not be allocated. */
int sv_conv2d_mean(const sv_packed_conv *p, int64_t n, int64_t h, int64_t w, const float *x,
                   int x_layout, float *y, int act, float slope, int threads);

/* Reorders between NCHW (x[n][c][h][w]) and blocked (y[n][ceil(c/16)][h][w][16]). */
void sv_nchw_to_blocked(int64_t n, int64_t c, int64_t h, int64_t w, const float *x, float *y,
                        int threads);
void sv_blocked_to_nchw(int64_t n, int64_t c, int64_t h, int64_t w, const float *x, float *y,
                        int threads);

/* Pooling over the last two axes of planes of h x w floats (NCHW: n * c planes). */
enum sv_pool_kind {
    SV_POOL_MAX = 0,         /* padding never wins (PyTorch's -inf) */
    SV_POOL_AVG = 1,         /* divided by the whole window, padding included */
    SV_POOL_AVG_EXCL_PAD = 2 /* divided by the window's elements inside the input */
};
#define SV_POOL_SLACK 48 /* floats of scratch past a pooled row (whole vectors at its end) */

typedef struct sv_pool_shape {
    int kind; /* enum sv_pool_kind */
    int64_t kh, kw, sh, sw;
    int64_t pt, pb, pl, pr; /* each at most half its axis' window */
} sv_pool_shape;

/* -1 when the window is larger than the padded input, else 0 with the output size. */
int sv_pool_out_hw(const sv_pool_shape *s, int64_t h, int64_t w, int64_t *oh, int64_t *ow);
/* y[plane][oh][ow] from x[plane][h][w] for `planes` planes. */
int sv_pool2d_nchw(const sv_pool_shape *s, int64_t planes, int64_t h, int64_t w,
                    const float *x, float *y, int threads);
/* y[plane] = mean of the hw floats of x[plane] (NCHW: planes = n * c). */
void sv_global_avg_pool_nchw(int64_t planes, int64_t hw, const float *x, float *y, int threads);
/* y[n][c] = mean over the pixels of the blocked x[n][ceil(c/16)][hw][16]. */
void sv_global_avg_pool_blocked(int64_t n, int64_t c, int64_t hw, const float *x, float *y,
                                int threads);

/* Shared by conv.c and conv_gemm.c.  NCHW to NCHW on the GEMM micro-kernel (conv_gemm.c),
 * which sv_conv2d picks for what it is faster at: without groups, stride 1 along the width
 * and at most SV_ROWS_MAX_K multiply-adds per output (an image's first layer: 3x3 over 3
 * channels took 0.8-0.9x the time of the blocked kernel there; 8 channels 1.25x, stride 2
 * 1.1-1.3x); packing its weight rows; the threads a convolution is worth; each thread's
 * scratch memory (kept between calls, freed when the thread ends). */
#define SV_ROWS_MAX_K 32
int sv_conv2d_rows(const sv_packed_conv *p, int64_t n, int64_t h, int64_t w, const float *x,
                   float *y, const float *residual, int act, float slope, int res_first,
                   int threads, int64_t oh, int64_t ow);
int sv_pack_conv_rows(sv_packed_conv *p, const float *w, const int64_t ws[4],
                      const float *bias, int64_t bstride);
int sv_conv_threads(double macs, int threads);
/* Slices to cut each output row into, for t threads over n images of oh rows taken a row per
 * task: enough for four tasks a thread, each slice at least min_cols wide; 1 when the rows
 * are enough (images of a row or two, a 1-D convolution's, are not). */
int64_t sv_conv_col_tasks(int t, int64_t n, int64_t oh, int64_t ow, int64_t min_cols);
/* One row of a zero-bordered slab (wp pixels of cs floats): pl pixels of zeros, the w
 * pixels of src (a blocked row, or NCHW channel rows plane floats apart, nc of them,
 * reordered into pixels), zeros to the end; all zeros where src is NULL. */
void sv_slab_row(const struct sv_conv_kern *k, float *dst, const float *src, int blocked,
                 int64_t plane, int64_t nc, int64_t w, int64_t cs, int64_t pl, int64_t wp);
/* A task's NCHW output from its blocked rows (oslab: cout / 16 blocks of npix pixels):
 * into the channel planes at y (plane floats apart), plus the residual at the same
 * offsets, then with res_first the activation (whose tiles were written without it). */
void sv_conv_store_nchw(const struct sv_isa_table *isa, const float *oslab, int64_t npix,
                        int64_t cout, float *y, const float *res, int64_t plane, int act,
                        float slope, int res_first);

/* conv_wino.c: 3x3 convolutions of stride 1 without groups, at least 16 input channels,
 * in either layout, by Winograd's F(2x2, 3x3); sv_conv2d takes it where the packed
 * convolution has `wino` and sv_winograd_on() (yes unless SHAPEVM_WINOGRAD=0|off|no; the
 * tests and benchmarks compare both ways through shapevm._native._set_conv_winograd,
 * which sets sv_conv_winograd). */
extern _Atomic int sv_conv_winograd;
int sv_winograd_on(void);
int sv_wino_fits(const sv_conv_shape *s);
int sv_pack_conv_wino(sv_packed_conv *p, const float *w, const int64_t ws[4]);
int sv_conv2d_wino(const sv_packed_conv *p, int64_t n, int64_t h, int64_t w, const float *x,
                   int x_layout, float *y, int y_layout, const float *residual, int act,
                   float slope, int res_first, int threads, int64_t oh, int64_t ow);

/* The kernels of one instruction set (conv_kern.h, pool_kern.h), in sv_isa_table.conv. */
typedef struct sv_conv_kern {
    /* C[mr pixels][16 channels] = sum over segments s of A_s[mr][kc] @ Bp_s[kc][16], where
     * row i of A_s is the kc floats at pix[i] + segoff[s] and Bp_s the kc rows of 16 at
     * bp + 16 kc s; then the epilogue (bias of the 16 channels, activation, residual rows
     * ldr apart at row0 + i), lanes past nc set to zero, rows of C ldc apart. */
    void (*ukr)(int mr, int64_t nseg, int64_t kc, const float *const *pix,
                const int64_t *segoff, const float *bp, float *c, int64_t ldc,
                const sv_epilogue *ep, int64_t row0, int nc);
    /* Two consecutive blocks of output channels reading the same input blocks, on levels
     * where that is faster (else NULL): block u's packed weights at bp + u bstride, its
     * output at c + u cstride (rows SV_NR apart), its epilogue ep[u]; the first block is
     * full, the second has nc_last channels. */
    void (*ukr2)(int mr, int64_t nseg, int64_t kc, const float *const *pix,
                 const int64_t *segoff, const float *bp, int64_t bstride, float *c,
                 int64_t cstride, const sv_epilogue ep[2], int64_t row0, int nc_last);
    /* Depthwise: C[i][j] = sum over taps t of (pix[i] + tapoff[t])[j] * wt[16 t + j],
     * then the same epilogue. */
    void (*dw)(int mr, int64_t ntaps, const float *const *pix, const int64_t *tapoff,
               const float *wt, float *c, int64_t ldc, const sv_epilogue *ep, int64_t row0,
               int nc);
    /* Depthwise, windows 3 wide without dilation along the width, stride sw (1 or 2),
     * kh <= 7 rows: n output pixels of one row, C[i][j] = sum over r < kh, k < 3 of
     * (rows[r] + 16 (sw i + k))[j] * wt[16 (3 r + k) + j], the same sums as dw's; rows of C
     * 16 floats apart, then the epilogue (residual rows from row0). */
    void (*dw3)(int64_t n, int sw, int kh, const float *const *rows, const float *wt, float *c,
                const sv_epilogue *ep, int64_t row0, int nc);
    /* Pooling, one output row of one plane: the nrows input rows of its windows (clipped
     * to the input, w floats each) are combined into tmp[pl + x] (tmp holds pl + w + pr +
     * SV_POOL_SLACK floats; its borders are set here), then y[ox] combines tmp[ox * sw +
     * kx] for kx < kw; averages multiply by scale, times colscale[ox] when colscale is not
     * NULL (colscale holds ow + SV_POOL_SLACK floats). */
    void (*pool_row)(const sv_pool_shape *s, const float *const *rows, int nrows, int64_t w,
                     float *tmp, float *y, int64_t ow, float scale, const float *colscale);
    /* The sum of x[0..n). */
    float (*sum)(const float *x, int64_t n);
    /* acc[j] += sum over pixels p < n of x[16 p + j], for j < 16. */
    void (*sum16)(const float *x, int64_t n, float *acc);
    /* Reorders: dst[16 x + c] = src[c * plane + x] (zero for nc <= c < 16), x < w; and
     * dst[c * plane + q] = src[16 q + c] (+ res[c * plane + q] unless NULL), c < nc. */
    void (*gather16)(const float *src, int64_t plane, int64_t nc, int64_t w, float *dst);
    /* The same for cs < 16 floats per pixel (a first layer's tight slab): dst[cs x + c] =
     * src[c * plane + x] for c < nc, zero for nc <= c < cs. */
    void (*gather_tight)(const float *src, int64_t plane, int64_t nc, int64_t w, float *dst,
                         int64_t cs);
    void (*scatter16)(const float *src, int64_t npix, int64_t nc, float *dst, int64_t plane,
                      const float *res);
    /* Winograd F(2x2, 3x3) input and output transforms (conv_wino.c; conv_kern.h says
     * what they compute). */
    void (*wino_in)(int ntiles, const float *const *tp, int64_t rs, int64_t cbin, int64_t bs,
                    float *v, int64_t vstride, int64_t ldv);
    void (*wino_out)(int ntiles, const float *m, int64_t mstride, const int64_t *off,
                     const unsigned char *edge, float *y, int64_t ldy, const float *res,
                     const sv_epilogue *ep, int nc);
} sv_conv_kern;
#endif
