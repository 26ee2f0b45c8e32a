/* NCHW convolutions with few multiply-adds per output (an image's first layer, see
 * SV_ROWS_MAX_K) as matrix products on the GEMM micro-kernel, writing NCHW directly: no
 * reorder of the input or of the output.
 *
 * Per output row and 16 of its pixels, an im2col panel B[k][16] (k over input channel, kh,
 * kw) is copied from a slab of the task's input rows (plain NCHW rows with zero borders),
 * with one more row of ones; the weights are rows W[cout][K + 1] whose last column is the
 * bias.  The micro-kernel then computes MR output channels x 16 pixels at a time and stores
 * them as 16 consecutive floats of each output channel's row, through the same epilogue
 * (activation, residual) as dense layers.  The panel is reused by every output channel, so
 * copying it costs 1/cout of the multiply-adds.
 */
#include "sv_internal.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define KCHUNK 256 /* k steps per micro-kernel call: a chunk of the panel stays in L1 */

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

int sv_pack_conv_rows(sv_packed_conv *p, const float *w, const int64_t ws[4],
                      const float *bias, int64_t bstride) {
    const sv_conv_shape *s = &p->s;
    int64_t k = s->cin * s->kh * s->kw, ld = k + 1;
    p->rows = sv_alloc((size_t)(s->cout * ld) * sizeof(float));
    if (!p->rows) return -1;
    for (int64_t co = 0; co < s->cout; co++) {
        float *dst = p->rows + co * ld;
        for (int64_t ci = 0; ci < s->cin; ci++)
            for (int64_t t = 0; t < s->kh * s->kw; t++)
                dst[ci * s->kh * s->kw + t] =
                    w[co * ws[0] + ci * ws[1] + t / s->kw * ws[2] + t % s->kw * ws[3]];
        dst[k] = bias ? bias[co * bstride] : 0.0f;
    }
    return 0;
}

typedef struct rows_job {
    const sv_packed_conv *p;
    const sv_isa_table *isa;
    int64_t n, h, w, oh, ow, wp, rows_per_task, tasks_per_image, slab_rows;
    int64_t col_tasks, cols_per_task; /* slices of an output row (cols: a multiple of 16) */
    const float *x, *res;
    float *y;
    int act, res_first;
    float slope; /* leaky_relu's */
    _Atomic int failed;
} rows_job;

/* Input rows [iy0, iy0 + rows) of every channel of image img, zero-bordered to wp. */
static void fill_rows(const rows_job *j, int64_t img, int64_t iy0, int64_t rows, float *slab) {
    const sv_conv_shape *s = &j->p->s;
    for (int64_t c = 0; c < s->cin; c++)
        for (int64_t r = 0; r < rows; r++) {
            float *dst = slab + (c * j->slab_rows + r) * j->wp;
            int64_t iy = iy0 + r;
            if (iy < 0 || iy >= j->h) {
                memset(dst, 0, (size_t)j->wp * sizeof(float));
                continue;
            }
            memset(dst, 0, (size_t)s->pl * sizeof(float));
            memcpy(dst + s->pl, j->x + ((img * s->cin + c) * j->h + iy) * j->w,
                   (size_t)j->w * sizeof(float));
            memset(dst + s->pl + j->w, 0, (size_t)(j->wp - s->pl - j->w) * sizeof(float));
        }
}

/* The panel of output row r (of the slab) at pixels [ox0, ox0 + nc): B[k][jj] for k =
 * (c, kh, kw), then a row of ones; columns past nc are zero. */
static void pack_panel(const rows_job *j, const float *slab, int64_t r, int64_t ox0, int nc,
                       float *panel) {
    const sv_conv_shape *s = &j->p->s;
    float *b = panel;
    for (int64_t c = 0; c < s->cin; c++)
        for (int64_t kh = 0; kh < s->kh; kh++) {
            const float *row = slab + (c * j->slab_rows + r * s->sh + kh * s->dh) * j->wp;
            for (int64_t kw = 0; kw < s->kw; kw++, b += SV_NR) {
                const float *src = row + ox0 * s->sw + kw * s->dw;
                if (s->sw == 1 && nc == SV_NR) {
                    memcpy(b, src, SV_NR * sizeof(float));
                    continue;
                }
                for (int jj = 0; jj < nc; jj++) b[jj] = src[jj * s->sw];
                for (int jj = nc; jj < SV_NR; jj++) b[jj] = 0.0f;
            }
        }
    for (int jj = 0; jj < SV_NR; jj++) b[jj] = 1.0f;
}

static void rows_task(void *vctx, int64_t task) {
    rows_job *j = vctx;
    const sv_packed_conv *p = j->p;
    const sv_conv_shape *s = &p->s;
    int64_t img = task / j->tasks_per_image, rt = task % j->tasks_per_image;
    int64_t c0 = rt % j->col_tasks * j->cols_per_task, c1 = min64(c0 + j->cols_per_task, j->ow);
    int64_t oy0 = rt / j->col_tasks * j->rows_per_task;
    int64_t oy1 = min64(oy0 + j->rows_per_task, j->oh);
    int64_t k1 = s->cin * s->kh * s->kw + 1, plane = j->oh * j->ow;
    size_t slab_f = (size_t)(s->cin * j->slab_rows * j->wp);
    float *slab =
        sv_thread_scratch(SV_SCRATCH_CONV, (slab_f + (size_t)(k1 * SV_NR)) * sizeof(float));
    if (!slab) {
        atomic_store(&j->failed, 1);
        return;
    }
    float *panel = slab + slab_f;
    fill_rows(j, img, oy0 * s->sh - s->pt, (oy1 - oy0 - 1) * s->sh + (s->kh - 1) * s->dh + 1,
              slab);
    int mr = j->isa->mr;
    for (int64_t oy = oy0; oy < oy1; oy++)
        for (int64_t ox0 = c0; ox0 < c1; ox0 += SV_NR) {
            int nc = (int)min64(SV_NR, c1 - ox0);
            pack_panel(j, slab, oy - oy0, ox0, nc, panel);
            int64_t at = img * s->cout * plane + oy * j->ow;
            /* with res_first the dense epilogue adds the residual, the activation follows */
            sv_epilogue ep = {.act = j->res_first ? 0 : j->act, .alpha = 1.0f,
                              .slope = j->slope};
            if (j->res) ep.residual = j->res + at, ep.ldr = plane;
            for (int64_t k0 = 0; k0 < k1; k0 += KCHUNK) {
                int64_t kc = min64(KCHUNK, k1 - k0);
                for (int64_t co = 0; co < s->cout; co += mr)
                    j->isa->ukr((int)min64(mr, s->cout - co), nc, kc, p->rows + co * k1 + k0,
                                k1, panel + k0 * SV_NR, 0, j->y + at + co * plane + ox0, plane,
                                k0 > 0, k0 + kc >= k1, &ep, co, ox0);
            }
            if (j->res_first && j->act) {
                sv_epilogue post = {.alpha = 1.0f, .act = j->act, .slope = j->slope};
                j->isa->act_rows(j->y + at + ox0, s->cout, nc, plane, &post);
            }
        }
}

int sv_conv2d_rows(const sv_packed_conv *p, int64_t n, int64_t h, int64_t w, const float *x,
                   float *y, const float *residual, int act, float slope, int res_first,
                   int threads, int64_t oh, int64_t ow) {
    const sv_conv_shape *s = &p->s;
    rows_job j = {.p = p, .isa = sv_isa(), .n = n, .h = h, .w = w, .oh = oh, .ow = ow,
                  .wp = w + s->pl + s->pr, .x = x, .res = residual, .y = y, .act = act,
                  .slope = slope, .res_first = res_first};
    double macs = (double)n * (double)(oh * ow) * (double)s->cout *
                  (double)(s->cin * s->kh * s->kw);
    int t = sv_conv_threads(macs, threads);
    /* rows per task: ~512 pixels, and with threads at least four tasks per thread */
    j.rows_per_task = min64(cdiv(512, ow), oh);
    while (j.rows_per_task > 1 && t > 1 && n * cdiv(oh, j.rows_per_task) < 4 * t)
        j.rows_per_task = cdiv(j.rows_per_task, 2);
    /* images of a row or two (a 1-D convolution's) cut their rows into slices of columns,
     * as the blocked path does (`conv.c`) */
    j.col_tasks = j.rows_per_task == 1 ? sv_conv_col_tasks(t, n, oh, ow, 4 * SV_NR) : 1;
    j.cols_per_task = cdiv(cdiv(ow, j.col_tasks), SV_NR) * SV_NR;
    j.col_tasks = cdiv(ow, j.cols_per_task);
    j.tasks_per_image = cdiv(oh, j.rows_per_task) * j.col_tasks;
    j.slab_rows = (j.rows_per_task - 1) * s->sh + (s->kh - 1) * s->dh + 1;
    int64_t ntasks = n * j.tasks_per_image;
    sv_run_tasks(ntasks, rows_task, &j, t);
    return atomic_load(&j.failed) ? -1 : 0;
}
