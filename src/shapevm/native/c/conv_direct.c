/* NCHW convolutions with few multiply-adds per output (an image's first layer, see
 * SV_ROWS_MAX_K) straight from NCHW rows into NCHW rows: no reorder of the input or of
 * the output.
 *
 * A task copies the input rows its windows read into a slab of plain rows with zero
 * borders.  For each output row, the K = cin * kh * kw taps are K pointers into the slab
 * (stride 1 along the width: the pixels of a tap are consecutive floats), and the direct
 * kernel (conv_kern.h) computes SV_DT_ROWS output channels x direct_px pixels at a time
 * from them and the weights' rows, storing each channel's pixels in order along its row.
 */
#include "sv_internal.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

int sv_pack_conv_rows(sv_packed_conv *p, const float *w, const int64_t ws[4]) {
    const sv_conv_shape *s = &p->s;
    int64_t taps = s->kh * s->kw, k = s->cin * taps;
    p->rows = sv_alloc((size_t)(s->cout * k) * sizeof(float));
    if (!p->rows) return -1;
    for (int64_t co = 0; co < s->cout; co++)
        for (int64_t ci = 0; ci < s->cin; ci++)
            for (int64_t t = 0; t < taps; t++)
                p->rows[co * k + ci * taps + t] =
                    w[co * ws[0] + ci * ws[1] + t / s->kw * ws[2] + t % s->kw * ws[3]];
    return 0;
}

typedef struct direct_job {
    const sv_packed_conv *p;
    const sv_conv_kern *k;
    int64_t n, h, w, oh, ow, wp, rows_per_task, tasks_per_image, slab_rows;
    const float *x, *res;
    float *y;
    int act;
    _Atomic int failed;
} direct_job;

/* Input rows [iy0, iy0 + rows) of every channel of image img, zero-bordered to wp. */
static void fill_rows(const direct_job *j, int64_t img, int64_t iy0, int64_t rows,
                      float *slab) {
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

static void direct_task(void *vctx, int64_t task) {
    direct_job *j = vctx;
    const sv_packed_conv *p = j->p;
    const sv_conv_shape *s = &p->s;
    int64_t img = task / j->tasks_per_image;
    int64_t oy0 = task % j->tasks_per_image * j->rows_per_task;
    int64_t oy1 = min64(oy0 + j->rows_per_task, j->oh);
    int64_t taps = s->kh * s->kw, kk = s->cin * taps, plane = j->oh * j->ow;
    size_t slab_f = (size_t)(s->cin * j->slab_rows * j->wp);
    /* slack: the last tile of a row reads whole vectors past the slab's last row */
    float *slab = sv_conv_scratch((slab_f + (size_t)j->k->direct_px) * sizeof(float));
    if (!slab) {
        atomic_store(&j->failed, 1);
        return;
    }
    fill_rows(j, img, oy0 * s->sh - s->pt, (oy1 - oy0 - 1) * s->sh + (s->kh - 1) * s->dh + 1,
              slab);
    const float *b[SV_ROWS_MAX_K];
    for (int64_t oy = oy0; oy < oy1; oy++) {
        for (int64_t k = 0; k < kk; k++) {
            int64_t c = k / taps, kh = k % taps / s->kw, kw = k % s->kw;
            b[k] = slab + (c * j->slab_rows + (oy - oy0) * s->sh + kh * s->dh) * j->wp +
                   kw * s->dw;
        }
        int64_t at = img * s->cout * plane + oy * j->ow;
        for (int64_t co = 0; co < s->cout; co += SV_DT_ROWS)
            for (int64_t ox = 0; ox < j->ow; ox += j->k->direct_px) {
                int64_t off = at + co * plane + ox;
                j->k->direct((int)min64(SV_DT_ROWS, s->cout - co),
                             (int)min64(j->k->direct_px, j->ow - ox), kk, p->rows + co * kk,
                             kk, b, ox, j->y + off, plane, p->bias + co, j->act,
                             j->res ? j->res + off : NULL, plane);
            }
    }
}

int sv_conv2d_direct(const sv_packed_conv *p, int64_t n, int64_t h, int64_t w, const float *x,
                   float *y, const float *residual, int act, int threads, int64_t oh,
                   int64_t ow) {
    const sv_conv_shape *s = &p->s;
    direct_job j = {.p = p, .k = sv_isa()->conv, .n = n, .h = h, .w = w, .oh = oh, .ow = ow,
                    .wp = w + s->pl + s->pr, .x = x, .res = residual, .y = y, .act = act};
    double macs = (double)n * (double)(oh * ow) * (double)s->cout *
                  (double)(s->cin * s->kh * s->kw);
    int t = sv_conv_threads(macs, threads);
    /* rows per task: ~512 pixels, and with threads at least four tasks per thread */
    j.rows_per_task = min64(cdiv(512, ow), oh);
    while (j.rows_per_task > 1 && t > 1 && n * cdiv(oh, j.rows_per_task) < 4 * t)
        j.rows_per_task = cdiv(j.rows_per_task, 2);
    j.tasks_per_image = cdiv(oh, j.rows_per_task);
    j.slab_rows = (j.rows_per_task - 1) * s->sh + (s->kh - 1) * s->dh + 1;
    int64_t ntasks = n * j.tasks_per_image;
    if (t <= 1)
        for (int64_t task = 0; task < ntasks; task++) direct_task(&j, task);
    else
        sv_parallel(ntasks, direct_task, &j);
    return atomic_load(&j.failed) ? -1 : 0;
}
