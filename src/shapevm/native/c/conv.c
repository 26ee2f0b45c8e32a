/* 2-D convolution on the indirect micro-kernel (conv_kern.h): packing, slabs, threads.
 *
 * The work is split by output rows: a task computes a few rows of one image for every
 * output channel.  It first copies the input rows its windows read into a slab, a small
 * zero-bordered copy in the kernel's layout (16 channels of a pixel together, or all of
 * them when there are fewer than 16), so that padding costs nothing in the kernel and the
 * slab stays in cache while every output channel block reads it; a blocked input without
 * padding is read in place.  Then, per block of 16 output channels, it runs the
 * micro-kernel over tiles of MR consecutive output pixels (a tile may span two output
 * rows: each pixel has its own pointer).  NCHW outputs are written block by block into a
 * second slab and transposed into place with the residual.
 */
#include "sv_internal.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

int sv_conv_out_hw(const sv_conv_shape *s, int64_t h, int64_t w, int64_t *oh, int64_t *ow) {
    int64_t span_h = h + s->pt + s->pb - s->dh * (s->kh - 1) - 1;
    int64_t span_w = w + s->pl + s->pr - s->dw * (s->kw - 1) - 1;
    if (span_h < 0 || span_w < 0) return -1;
    *oh = span_h / s->sh + 1;
    *ow = span_w / s->sw + 1;
    return 0;
}

/* ---- packing ---- */

static float weight_at(const sv_conv_shape *s, const float *w, const int64_t ws[4], int64_t co,
                       int64_t ci, int64_t kh, int64_t kw) {
    int64_t cpg = s->cin / s->groups, opg = s->cout / s->groups;
    if (co >= s->cout || ci >= s->cin || ci / cpg != co / opg) return 0.0f;
    return w[co * ws[0] + (ci % cpg) * ws[1] + kh * ws[2] + kw * ws[3]];
}

/* Block b's input blocks: those holding the groups of its output channels. */
static void block_inputs(const sv_packed_conv *p, int64_t b, int64_t *first, int64_t *count) {
    const sv_conv_shape *s = &p->s;
    if (p->depthwise) {
        *first = b;
        *count = 1;
        return;
    }
    int64_t cpg = s->cin / s->groups, opg = s->cout / s->groups;
    int64_t co_lo = SV_CB * b, co_hi = min64(s->cout, co_lo + SV_CB);
    int64_t ci_lo = co_lo / opg * cpg, ci_hi = ((co_hi - 1) / opg + 1) * cpg;
    *first = ci_lo / SV_CB;
    *count = cdiv(ci_hi, SV_CB) - *first;
}

int sv_pack_conv(sv_packed_conv *p, const sv_conv_shape *s, const float *w,
                 const int64_t ws[4], const float *bias, int64_t bstride) {
    memset(p, 0, sizeof *p);
    p->s = *s;
    p->depthwise = s->groups > 1 && s->groups == s->cin && s->groups == s->cout;
    p->kc = s->cin < SV_CB ? s->cin : SV_CB;
    p->cbin = cdiv(s->cin, SV_CB);
    p->cbout = cdiv(s->cout, SV_CB);
    int64_t taps = s->kh * s->kw, nb = p->cbout > 0 ? p->cbout : 1, total = 0;
    p->blk0 = calloc((size_t)nb * 3, sizeof(int64_t));
    if (!p->blk0) return -1;
    p->nblk = p->blk0 + nb;
    p->woff = p->nblk + nb;
    for (int64_t b = 0; b < p->cbout; b++) {
        block_inputs(p, b, &p->blk0[b], &p->nblk[b]);
        p->woff[b] = total;
        total += p->depthwise ? taps * SV_NR : p->nblk[b] * taps * p->kc * SV_NR;
    }
    p->w = sv_alloc((size_t)(total > 0 ? total : 1) * sizeof(float));
    p->bias = sv_alloc((size_t)nb * SV_CB * sizeof(float));
    if (!p->w || !p->bias) {
        sv_packed_conv_free(p);
        return -1;
    }
    memset(p->bias, 0, (size_t)nb * SV_CB * sizeof(float));
    for (int64_t b = 0; b < p->cbout; b++) {
        float *dst = p->w + p->woff[b];
        int64_t rows = p->depthwise ? taps : p->nblk[b] * taps * p->kc;
        for (int64_t r = 0; r < rows; r++) {
            int64_t ci, t = p->depthwise ? r : r / p->kc % taps;
            ci = p->depthwise ? 0 : (p->blk0[b] + r / (p->kc * taps)) * SV_CB + r % p->kc;
            for (int64_t j = 0; j < SV_NR; j++) {
                int64_t co = SV_CB * b + j;
                dst[r * SV_NR + j] =
                    weight_at(s, w, ws, co, p->depthwise ? co : ci, t / s->kw, t % s->kw);
            }
        }
    }
    if (bias) {
        p->has_bias = 1;
        for (int64_t co = 0; co < s->cout; co++) p->bias[co] = bias[co * bstride];
    }
    if (s->groups == 1 && s->sw == 1 && s->cin * s->kh * s->kw <= SV_ROWS_MAX_K &&
        sv_pack_conv_rows(p, w, ws, bias, bstride) != 0) {
        sv_packed_conv_free(p);
        return -1;
    }
    if (sv_wino_fits(s) && sv_pack_conv_wino(p, w, ws) != 0) {
        sv_packed_conv_free(p);
        return -1;
    }
    return 0;
}

void sv_packed_conv_free(sv_packed_conv *p) {
    free(p->blk0);
    sv_free(p->w);
    sv_free(p->bias);
    sv_free(p->rows);
    sv_free(p->wino);
    p->blk0 = p->nblk = p->woff = NULL;
    p->w = p->bias = p->rows = p->wino = NULL;
}

/* ---- the driver ---- */

typedef struct conv_job {
    const sv_packed_conv *p;
    const sv_conv_kern *k;
    const sv_isa_table *isa;
    int mr, act, res_first, in_blocked, out_blocked, direct, tight;
    float slope; /* leaky_relu's */
    int64_t n, h, w, oh, ow;
    int64_t yplane; /* floats between the output's channel planes (blocked: pixels): oh * ow,
                     * or a whole image's for a band of its rows */
    const float *x, *res;
    float *y;
    int64_t cs, wp, slab_rows, rs, bs; /* slab: floats per pixel, row width, rows, strides */
    int64_t rows_per_task, tasks_per_image;
    int64_t col_tasks, cols_per_task; /* columns of one output row per task (1 task: all) */
    int64_t kc, segs; /* floats per segment row; segments per input block */
    _Atomic int failed; /* a task found no memory for its scratch */
    int64_t segoff[];  /* cbin * segs offsets */
} conv_job;

/* One row of pixels from channel planes: dst[x * cs + c] = src[c * plane + x] for c < nc,
 * zero for nc <= c < cs. */
static void gather_pixels(const sv_conv_kern *k, const float *src, int64_t plane, int64_t nc,
                          int64_t w, float *dst, int64_t cs) {
    if (cs == SV_CB)
        k->gather16(src, plane, nc, w, dst);
    else
        k->gather_tight(src, plane, nc, w, dst, cs);
}

void sv_slab_row(const sv_conv_kern *k, float *dst, const float *src, int blocked,
                 int64_t plane, int64_t nc, int64_t w, int64_t cs, int64_t pl, int64_t wp) {
    if (!src) {
        memset(dst, 0, (size_t)(wp * cs) * sizeof(float));
        return;
    }
    memset(dst, 0, (size_t)(pl * cs) * sizeof(float));
    memset(dst + (pl + w) * cs, 0, (size_t)((wp - pl - w) * cs) * sizeof(float));
    if (blocked)
        memcpy(dst + pl * cs, src, (size_t)(w * SV_CB) * sizeof(float));
    else
        gather_pixels(k, src, plane, nc, w, dst + pl * cs, cs);
}

/* Copy input rows [iy0, iy0 + rows) of image img into the slab with zero borders. */
static void fill_slab(const conv_job *j, int64_t img, int64_t iy0, int64_t rows, float *slab) {
    const sv_packed_conv *p = j->p;
    const sv_conv_shape *s = &p->s;
    int64_t h = j->h, w = j->w;
    int64_t nblocks = j->tight ? 1 : p->cbin;
    for (int64_t ib = 0; ib < nblocks; ib++)
        for (int64_t r = 0; r < rows; r++) {
            int64_t iy = iy0 + r, c0 = ib * SV_CB;
            const float *src = iy < 0 || iy >= h ? NULL
                               : j->in_blocked   ? j->x + ((img * p->cbin + ib) * h + iy) * w * SV_CB
                                                 : j->x + ((img * s->cin + c0) * h + iy) * w;
            sv_slab_row(j->k, slab + ib * j->bs + r * j->rs, src, j->in_blocked, h * w,
                        j->tight ? s->cin : min64(SV_CB, s->cin - c0), w, j->cs, s->pl, j->wp);
        }
}

void sv_conv_store_nchw(const sv_isa_table *isa, const float *oslab, int64_t npix,
                        int64_t cout, float *y, const float *res, int64_t plane, int act,
                        float slope, int res_first) {
    for (int64_t b = 0; b * SV_CB < cout; b++) {
        int64_t off = SV_CB * b * plane, nc = min64(SV_CB, cout - SV_CB * b);
        isa->conv->scatter16(oslab + b * npix * SV_CB, npix, nc, y + off, plane,
                             res ? res + off : NULL);
        if (res && res_first && act) {
            sv_epilogue post = {.alpha = 1.0f, .act = act, .slope = slope};
            isa->act_rows(y + off, nc, npix, plane, &post);
        }
    }
}

/* Prefetching (for writing) the NCHW output rows of a task while its tiles compute, a few
 * cache lines after each tile, so that the transposed stores at its end find them in
 * cache (the stores otherwise wait for memory: 1/10 of 32 -> 64 channels at 112 x 112).
 * Prefetching the next task's input rows the same way measured no faster. */
typedef struct out_prefetch {
    float *base;
    int64_t plane, channels, lines, per_tile, c, line;
} out_prefetch;

static out_prefetch output_rows(const conv_job *j, int64_t img, int64_t p0, int64_t npix) {
    out_prefetch pf = {.channels = 0};
    if (j->out_blocked) return pf;
    const sv_conv_shape *s = &j->p->s;
    int64_t plane = j->yplane, tiles = j->p->cbout * cdiv(npix, j->mr);
    pf.base = j->y + img * s->cout * plane + p0;
    pf.plane = plane, pf.channels = s->cout, pf.lines = cdiv(npix, 16) + 1;
    pf.per_tile = cdiv(pf.channels * pf.lines, tiles);
    return pf;
}

static void prefetch_some(out_prefetch *pf) {
    for (int64_t i = 0; i < pf->per_tile && pf->c < pf->channels; i++) {
        __builtin_prefetch(pf->base + pf->c * pf->plane + pf->line * 16, 1, 3);
        if (++pf->line == pf->lines) pf->line = 0, pf->c++;
    }
}

/* Blocks of output channels the micro-kernel takes at once from block b: 2 where the level
 * has the kernel and both read the same input blocks (every convolution without groups,
 * and grouped ones where two blocks fall in one group), else 1. */
static int conv_blocks_at_once(const conv_job *j, int64_t b) {
    const sv_packed_conv *p = j->p;
    return j->k->ukr2 && !p->depthwise && b + 1 < p->cbout && p->blk0[b + 1] == p->blk0[b] &&
                   p->nblk[b + 1] == p->nblk[b]
               ? 2
               : 1;
}

static void conv_task(void *vctx, int64_t task) {
    conv_job *j = vctx;
    const sv_packed_conv *p = j->p;
    const sv_conv_shape *s = &p->s;
    int64_t img = task / j->tasks_per_image, rt = task % j->tasks_per_image;
    int64_t ct = rt % j->col_tasks;
    rt /= j->col_tasks;
    int64_t oy0 = rt * j->rows_per_task, oy1 = min64(oy0 + j->rows_per_task, j->oh);
    /* a slice of columns only with one row per task: its pixels are then contiguous in the
     * output plane, as a task's whole rows are */
    int64_t ox0 = ct * j->cols_per_task, ox1 = min64(ox0 + j->cols_per_task, j->ow);
    int64_t npix = (oy1 - oy0) * (ox1 - ox0), p0 = oy0 * j->ow + ox0;
    /* whole cache lines each, so that the pointers after them are aligned (a tight slab of
     * 3-channel pixels is an odd number of floats) */
    size_t slab_f = j->direct ? 0 : (size_t)((j->tight ? 1 : p->cbin) * j->bs + 15) & ~(size_t)15;
    size_t out_f = j->out_blocked ? 0 : (size_t)(p->cbout * npix * SV_CB);
    size_t ptr_bytes = (size_t)npix * sizeof(float *);
    char *mem = sv_thread_scratch(SV_SCRATCH_CONV, (slab_f + out_f) * sizeof(float) + ptr_bytes);
    if (!mem) {
        atomic_store(&j->failed, 1);
        return;
    }
    float *slab = (float *)mem, *oslab = slab + slab_f;
    const float **pix = (const float **)(oslab + out_f);
    const float *base;
    int64_t row_origin;
    if (j->direct) {
        base = j->x + img * p->cbin * j->bs;
        row_origin = 0;
    } else {
        int64_t rows = (oy1 - oy0 - 1) * s->sh + (s->kh - 1) * s->dh + 1;
        fill_slab(j, img, oy0 * s->sh - s->pt, rows, slab);
        base = slab;
        row_origin = oy0 * s->sh;
    }
    for (int64_t q = 0, oy = oy0, ox = ox0; q < npix; q++) {
        pix[q] = base + (oy * s->sh - row_origin) * j->rs + ox * s->sw * j->cs;
        if (++ox == ox1) ox = ox0, oy++;
    }
    int64_t plane = j->yplane, taps = s->kh * s->kw;
    out_prefetch pf = output_rows(j, img, p0, npix);
    for (int64_t b = 0; b < p->cbout;) {
        int nb = conv_blocks_at_once(j, b);
        sv_epilogue ep[2];
        for (int u = 0; u < nb; u++) {
            /* an NCHW output gets its residual (and then the activation, with res_first)
             * as it is reordered into place */
            int late = !j->out_blocked && j->res && j->res_first;
            ep[u] = (sv_epilogue){.bias = p->bias + SV_CB * (b + u), .act = late ? 0 : j->act,
                                  .alpha = 1.0f, .slope = j->slope, .res_first = j->res_first};
            if (j->out_blocked && j->res) {
                ep[u].residual = j->res + ((img * p->cbout + b + u) * plane + p0) * SV_CB;
                ep[u].ldr = SV_CB;
            }
        }
        float *c = j->out_blocked ? j->y + ((img * p->cbout + b) * plane + p0) * SV_CB
                                  : oslab + b * npix * SV_CB;
        int64_t cstride = j->out_blocked ? plane * SV_CB : npix * SV_CB;
        int nc = (int)min64(SV_CB, s->cout - SV_CB * (b + nb - 1));
        const float *wb = p->w + p->woff[b];
        int64_t bstride = nb > 1 ? p->woff[b + 1] - p->woff[b] : 0;
        const int64_t *so = j->segoff + p->blk0[b] * j->segs;
        int64_t nseg = p->nblk[b] * j->segs;
        if (p->depthwise && s->kw == 3 && s->dw == 1 && (s->sw == 1 || s->sw == 2) &&
            s->kh <= 7) { /* a row at a time, each input vector loaded once per row */
            const float *rows[7];
            for (int64_t oy = oy0; oy < oy1; oy++) {
                for (int64_t r = 0; r < s->kh; r++)
                    rows[r] = base + b * j->bs + (oy * s->sh - row_origin + r * s->dh) * j->rs;
                int64_t q = (oy - oy0) * j->ow;
                j->k->dw3(j->ow, (int)s->sw, (int)s->kh, rows, wb, c + q * SV_CB, ep, q, nc);
                for (int u = 0; u < nb; u++) prefetch_some(&pf);
            }
            b += nb;
            continue;
        }
        for (int64_t q = 0; q < npix; q += j->mr) {
            int m = (int)min64(j->mr, npix - q);
            float *cq = c + q * SV_CB;
            if (p->depthwise)
                j->k->dw(m, taps, pix + q, so, wb, cq, SV_CB, ep, q, nc);
            else if (nb == 2)
                j->k->ukr2(m, nseg, j->kc, pix + q, so, wb, bstride, cq, cstride, ep, q, nc);
            else
                j->k->ukr(m, nseg, j->kc, pix + q, so, wb, cq, SV_CB, ep, q, nc);
            for (int u = 0; u < nb; u++) prefetch_some(&pf);
        }
        b += nb;
    }
    if (!j->out_blocked) {
        int64_t at = img * p->s.cout * plane + p0;
        sv_conv_store_nchw(j->isa, oslab, npix, p->s.cout, j->y + at, j->res ? j->res + at : NULL,
                           plane, j->act, j->slope, j->res_first);
    }
}

/* Threads worth using for this many multiply-adds: a pool launch costs a few
 * microseconds, as much as ~2^20 multiply-adds of the micro-kernel. */
int sv_conv_threads(double macs, int threads) {
    if (threads <= 0) threads = sv_pool_threads();
    if (threads <= 1 || macs < 1048576.0) return 1;
    int t = (int)(macs / 524288.0);
    return t < threads ? t : threads;
}

int64_t sv_conv_col_tasks(int t, int64_t n, int64_t oh, int64_t ow, int64_t min_cols) {
    if (t <= 1 || n * oh >= 4 * t) return 1;
    int64_t want = cdiv(4 * t, n * oh), most = ow / min_cols;
    return want < most ? want : (most > 1 ? most : 1);
}

/* Rows of output per task: ~512 pixels, a slab under 256 KiB, and, with threads, at least
 * four tasks per thread to share unevenly. */
static int64_t task_rows(const conv_job *j, int t) {
    const sv_conv_shape *s = &j->p->s;
    int64_t rpt = min64(cdiv(512, j->ow), j->oh);
    int64_t blocks = j->tight ? 1 : j->p->cbin;
    for (;;) {
        int64_t rows = (rpt - 1) * s->sh + (s->kh - 1) * s->dh + 1;
        int64_t bytes = j->direct ? 0 : blocks * rows * j->wp * j->cs * 4;
        int64_t tasks = j->n * cdiv(j->oh, rpt);
        if (rpt <= 1 || (bytes <= 262144 && (t <= 1 || tasks >= 4 * t))) return rpt;
        rpt = cdiv(rpt, 2);
    }
}

/* The slab's geometry and the segment offsets, once the rows per task are known. */
static void plan_segments(conv_job *j) {
    const sv_packed_conv *p = j->p;
    const sv_conv_shape *s = &p->s;
    j->slab_rows = j->direct ? j->h : (j->rows_per_task - 1) * s->sh + (s->kh - 1) * s->dh + 1;
    j->bs = j->slab_rows * j->rs;
    for (int64_t ib = 0; ib < p->cbin; ib++)
        for (int64_t sg = 0; sg < j->segs; sg++) {
            int64_t kh = sg / (j->segs / s->kh), kw = j->segs == s->kh ? 0 : sg % s->kw;
            j->segoff[ib * j->segs + sg] = ib * j->bs + kh * s->dh * j->rs + kw * s->dw * j->cs;
        }
}

static int conv_general(const sv_packed_conv *p, int64_t n, int64_t h, int64_t w,
                        const float *x, int in_blocked, float *y, int out_blocked,
                        const float *residual, int act, float slope, int res_first, int threads,
                        int64_t oh, int64_t ow, int64_t yplane);

int sv_conv2d(const sv_packed_conv *p, int64_t n, int64_t h, int64_t w, const float *x,
              int x_layout, float *y, int y_layout, const float *residual, int act,
              float slope, int res_first, int threads) {
    const sv_conv_shape *s = &p->s;
    int64_t oh, ow;
    if (n <= 0 || p->cbout == 0 || sv_conv_out_hw(s, h, w, &oh, &ow) != 0 || oh * ow == 0)
        return 0;
    res_first = res_first && residual; /* without a residual the order is moot */
    int in_blocked = x_layout == SV_LAYOUT_BLOCKED;
    if (!in_blocked && y_layout == SV_LAYOUT_NCHW && p->rows)
        return sv_conv2d_rows(p, n, h, w, x, y, residual, act, slope, res_first, threads, oh,
                              ow);
    if (p->wino && sv_winograd_on())
        return sv_conv2d_wino(p, n, h, w, x, x_layout, y, y_layout, residual, act, slope,
                              res_first, threads, oh, ow);
    return conv_general(p, n, h, w, x, in_blocked, y, y_layout == SV_LAYOUT_BLOCKED, residual,
                        act, slope, res_first, threads, oh, ow, oh * ow);
}

/* The indirect micro-kernel's path of sv_conv2d, writing output planes yplane floats (or
 * pixels, blocked) apart: a band of an image's rows written in place. */
static int conv_general(const sv_packed_conv *p, int64_t n, int64_t h, int64_t w,
                        const float *x, int in_blocked, float *y, int out_blocked,
                        const float *residual, int act, float slope, int res_first, int threads,
                        int64_t oh, int64_t ow, int64_t yplane) {
    const sv_conv_shape *s = &p->s;
    int tight = !in_blocked && s->cin < SV_CB && !p->depthwise;
    int64_t segs = tight && s->dw == 1 ? s->kh : s->kh * s->kw;
    conv_job *j = calloc(1, sizeof *j + (size_t)(p->cbin * segs) * sizeof(int64_t));
    if (!j) return -1;
    const sv_isa_table *isa = sv_isa();
    j->p = p, j->k = isa->conv, j->isa = isa, j->mr = isa->mr, j->act = act, j->slope = slope;
    j->res_first = res_first;
    j->n = n, j->h = h, j->w = w, j->oh = oh, j->ow = ow, j->yplane = yplane;
    j->x = x, j->y = y, j->res = residual;
    j->in_blocked = in_blocked, j->out_blocked = out_blocked;
    j->tight = tight, j->segs = segs;
    j->direct = in_blocked && !(s->pt | s->pb | s->pl | s->pr);
    j->cs = tight ? s->cin : SV_CB;
    j->wp = j->direct ? w : w + s->pl + s->pr;
    j->rs = j->wp * j->cs;
    j->kc = tight && s->dw == 1 ? s->kw * s->cin : p->kc;
    double macs = (double)n * (double)(oh * ow) * (double)s->cout * (double)(s->kh * s->kw) *
                  (double)(p->depthwise ? 1 : s->cin / s->groups);
    /* a depthwise multiply-add costs 3-4 of the dense kernel's (a load each, or a third of
     * one on the row path, against a broadcast for a whole tile) */
    int t = sv_conv_threads(p->depthwise ? 4.0 * macs : macs, threads);
    j->rows_per_task = task_rows(j, t);
    /* Images of a row or two (a 1-D convolution is one of a row: ONNX's Conv on [b, c, t])
     * give too few row tasks for the threads: each row is then cut into slices of columns
     * (of at least four tiles).  With one image of one row, all of it ran on one thread. */
    j->col_tasks = j->rows_per_task == 1 && !p->depthwise
                       ? sv_conv_col_tasks(t, n, oh, ow, 4 * (int64_t)j->mr)
                       : 1;
    j->cols_per_task = cdiv(ow, j->col_tasks);
    j->col_tasks = cdiv(ow, j->cols_per_task);
    j->tasks_per_image = cdiv(oh, j->rows_per_task) * j->col_tasks;
    plan_segments(j);
    int64_t ntasks = n * j->tasks_per_image;
    sv_run_tasks(ntasks, conv_task, j, t);
    int failed = atomic_load(&j->failed);
    free(j);
    return failed ? -1 : 0;
}

/* ---- two convolutions in a row, by bands of the second one's output rows ----
 *
 * A task makes a band of the second convolution's output rows of one image: it copies the
 * input rows the band needs (its windows through both convolutions), runs the first
 * convolution on them into a band of its result (blocked), and the second on that band,
 * writing its rows in place.  The first result is never written whole: a CNN's first
 * convolution at full resolution (32 channels of 96 x 128: 1.5 MiB) becomes a band in a
 * thread's cache, and a larger image touches only a band's worth of new memory for it
 * (a band's scratch grows with the image's width).  Each band recomputes
 * the rows of the first result its neighbour needs too (kh2 - sh2 rows a band).  Each
 * convolution of a band is the whole convolution of a shorter image, its padding top and
 * bottom kept only where the band meets the image's edge. */
/* A band's first result (or a mean's band of the result): within a core's L2 beside the
 * weights.  Larger bands recompute fewer rows (a 3x3 of stride 2: one in 2 * band + 1) but
 * touch more scratch at a new image width: on W2 at 224 x 224, 128 KiB (bands of one row)
 * cost 8% of the steady time on one thread; the first call's page faults were 194, 338 and
 * 546 with 128, 192 and 384 KiB. */
#define SV_BAND_BYTES ((int64_t)196608)

typedef struct pair_job {
    const sv_packed_conv *p1, *p2;
    int64_t n, h, w, oh1, ow1, oh2, ow2, band, bands;
    const float *x;
    float *y;
    int in_blocked, out_blocked, act1, act2;
    float slope1, slope2;
    atomic_int failed;
} pair_job;

/* Rows [*lo, *hi) of the input that output rows [o0, o1) read; *pt and *pb: how far the
 * windows reach past the input's edges (the band's own padding). */
static void rows_read(const sv_conv_shape *s, int64_t in_h, int64_t o0, int64_t o1, int64_t *lo,
                      int64_t *hi, int64_t *pt, int64_t *pb) {
    int64_t r0 = o0 * s->sh - s->pt, r1 = (o1 - 1) * s->sh - s->pt + s->dh * (s->kh - 1) + 1;
    *lo = r0 > 0 ? r0 : 0;
    *hi = r1 < in_h ? r1 : in_h;
    *pt = *lo - r0;
    *pb = r1 - *hi;
}

/* Rows [r0, r1) of each of `planes` planes of `row` floats a row and `h` rows, to a
 * contiguous band (or back: to_band 0). */
static void copy_rows(float *band, float *t, int64_t planes, int64_t h, int64_t r0, int64_t r1,
                      int64_t row, int to_band) {
    size_t bytes = (size_t)((r1 - r0) * row) * sizeof(float);
    for (int64_t c = 0; c < planes; c++) {
        float *b = band + c * (r1 - r0) * row, *full = t + (c * h + r0) * row;
        if (to_band) memcpy(b, full, bytes);
        else memcpy(full, b, bytes);
    }
}

/* Output rows per band: the scratch of a band (blocks of 16 channels, `pixels` a row, the
 * band's rows times `step` plus `extra` rows) within SV_BAND_BYTES, and at least four bands
 * a thread where the n images of `rows` rows allow. */
static int64_t band_rows(int64_t pixels, int64_t extra, int64_t step, int64_t n, int64_t rows,
                         int t) {
    int64_t row_bytes = pixels * SV_CB * (int64_t)sizeof(float);
    int64_t fit = (SV_BAND_BYTES / row_bytes - extra) / step;
    int64_t share = cdiv(n * rows, 4 * (int64_t)t); /* >= 1 */
    return min64(fit > 1 ? fit : 1, cdiv(share, n));
}

/* Rows [r0, r1) of image img of x (NCHW, or blocked) into a contiguous band at xb; the
 * floats it takes. */
static size_t input_band(const sv_packed_conv *p, int in_blocked, const float *x, int64_t img,
                         int64_t h, int64_t w, int64_t r0, int64_t r1, float *xb) {
    int64_t planes = in_blocked ? p->cbin : p->s.cin, row = in_blocked ? w * SV_CB : w;
    if (xb)
        copy_rows(xb, (float *)x + img * planes * h * row, planes, h, r0, r1, row, 1);
    return (size_t)(planes * (r1 - r0) * row);
}

static void pair_task(void *vctx, int64_t task) {
    pair_job *j = vctx;
    const sv_conv_shape *s1 = &j->p1->s, *s2 = &j->p2->s;
    int64_t img = task / j->bands, o0 = task % j->bands * j->band;
    int64_t o1 = min64(o0 + j->band, j->oh2);
    int64_t m0, m1, pt2, pb2, i0, i1, pt1, pb1;
    rows_read(s2, j->oh1, o0, o1, &m0, &m1, &pt2, &pb2);
    rows_read(s1, j->h, m0, m1, &i0, &i1, &pt1, &pb1);
    int64_t out_planes = j->out_blocked ? j->p2->cbout : s2->cout;
    int64_t out_row = j->out_blocked ? j->ow2 * SV_CB : j->ow2;
    size_t in_f = input_band(j->p1, j->in_blocked, j->x, img, j->h, j->w, i0, i1, NULL);
    size_t mid_f = (size_t)(j->p1->cbout * (m1 - m0) * j->ow1 * SV_CB);
    size_t out_f = j->p2->wino ? (size_t)(out_planes * (o1 - o0) * out_row) : 0;
    float *mem = sv_thread_scratch(SV_SCRATCH_CONV_PAIR, (in_f + mid_f + out_f) * sizeof(float));
    if (!mem) {
        atomic_store(&j->failed, 1);
        return;
    }
    float *xb = mem, *mid = mem + in_f, *yb = mem + in_f + mid_f;
    input_band(j->p1, j->in_blocked, j->x, img, j->h, j->w, i0, i1, xb);
    sv_packed_conv b1 = *j->p1, b2 = *j->p2; /* the weights shared, the padding the band's */
    b1.s.pt = pt1, b1.s.pb = pb1;
    b2.s.pt = pt2, b2.s.pb = pb2;
    int in_layout = j->in_blocked ? SV_LAYOUT_BLOCKED : SV_LAYOUT_NCHW;
    int out_layout = j->out_blocked ? SV_LAYOUT_BLOCKED : SV_LAYOUT_NCHW;
    if (sv_conv2d(&b1, 1, i1 - i0, j->w, xb, in_layout, mid, SV_LAYOUT_BLOCKED, NULL, j->act1,
                  j->slope1, 0, 1) != 0) {
        atomic_store(&j->failed, 1);
        return;
    }
    float *y = j->y + img * out_planes * j->oh2 * out_row;
    if (!b2.wino) { /* the band's rows written in place: planes a whole image's rows apart */
        if (conv_general(&b2, 1, m1 - m0, j->ow1, mid, 1, y + o0 * out_row, j->out_blocked, NULL,
                         j->act2, j->slope2, 0, 1, o1 - o0, j->ow2, j->oh2 * j->ow2) != 0)
            atomic_store(&j->failed, 1);
        return;
    }
    if (sv_conv2d(&b2, 1, m1 - m0, j->ow1, mid, SV_LAYOUT_BLOCKED, yb, out_layout, NULL, j->act2,
                  j->slope2, 0, 1) != 0) {
        atomic_store(&j->failed, 1);
        return;
    }
    copy_rows(yb, y, out_planes, j->oh2, o0, o1, out_row, 0);
}

int sv_conv2d_pair(const sv_packed_conv *p1, const sv_packed_conv *p2, int64_t n, int64_t h,
                   int64_t w, const float *x, int x_layout, float *y, int y_layout, int act1,
                   float slope1, int act2, float slope2, int threads) {
    pair_job j = {.p1 = p1, .p2 = p2, .n = n, .h = h, .w = w, .x = x, .y = y,
                  .in_blocked = x_layout == SV_LAYOUT_BLOCKED,
                  .out_blocked = y_layout == SV_LAYOUT_BLOCKED, .act1 = act1, .act2 = act2,
                  .slope1 = slope1, .slope2 = slope2};
    if (n <= 0 || sv_conv_out_hw(&p1->s, h, w, &j.oh1, &j.ow1) != 0 ||
        sv_conv_out_hw(&p2->s, j.oh1, j.ow1, &j.oh2, &j.ow2) != 0 || j.oh2 * j.ow2 == 0)
        return 0;
    double macs = (double)n * (double)(j.oh1 * j.ow1) * (double)(p1->s.cout * p1->s.kh * p1->s.kw) *
                      (double)(p1->s.cin / p1->s.groups) +
                  (double)n * (double)(j.oh2 * j.ow2) * (double)(p2->s.cout * p2->s.kh * p2->s.kw) *
                      (double)(p2->s.cin / p2->s.groups);
    int t = sv_conv_threads(macs, threads);
    /* the first result's band: (band - 1) * sh2 + the window's rows */
    int64_t halo = p2->s.dh * (p2->s.kh - 1) + 1 - p2->s.sh;
    j.band = band_rows(p1->cbout * j.ow1, halo > 0 ? halo : 0, p2->s.sh, n, j.oh2, t);
    j.bands = cdiv(j.oh2, j.band);
    sv_run_tasks(n * j.bands, pair_task, &j, t);
    return atomic_load(&j.failed) ? -1 : 0;
}

/* ---- a convolution's global average, by bands of its rows ----
 *
 * A task makes a band of the convolution's output rows of one image in its scratch and sums
 * each channel over it; the band sums are added in band order (the same result whatever
 * the threads) and divided by the pixels.  The convolution's result (64 channels of
 * 48 x 64 before a CNN's classifier: 768 KiB) is never written whole. */
typedef struct mean_job {
    const sv_packed_conv *p;
    const sv_conv_kern *k;
    int64_t h, w, oh, ow, band, bands;
    const float *x;
    float *sums; /* [task][cbout * 16] */
    int in_blocked, act;
    float slope;
    atomic_int failed;
} mean_job;

static void mean_task(void *vctx, int64_t task) {
    mean_job *j = vctx;
    const sv_conv_shape *s = &j->p->s;
    int64_t img = task / j->bands, o0 = task % j->bands * j->band;
    int64_t o1 = min64(o0 + j->band, j->oh);
    int64_t i0, i1, pt, pb;
    rows_read(s, j->h, o0, o1, &i0, &i1, &pt, &pb);
    int64_t pix = (o1 - o0) * j->ow;
    size_t in_f = input_band(j->p, j->in_blocked, j->x, img, j->h, j->w, i0, i1, NULL);
    size_t out_f = (size_t)(j->p->cbout * pix * SV_CB);
    float *mem = sv_thread_scratch(SV_SCRATCH_CONV_PAIR, (in_f + out_f) * sizeof(float));
    if (!mem) {
        atomic_store(&j->failed, 1);
        return;
    }
    float *xb = mem, *yb = mem + in_f;
    input_band(j->p, j->in_blocked, j->x, img, j->h, j->w, i0, i1, xb);
    sv_packed_conv b = *j->p;
    b.s.pt = pt, b.s.pb = pb;
    if (sv_conv2d(&b, 1, i1 - i0, j->w, xb,
                  j->in_blocked ? SV_LAYOUT_BLOCKED : SV_LAYOUT_NCHW, yb, SV_LAYOUT_BLOCKED,
                  NULL, j->act, j->slope, 0, 1) != 0) {
        atomic_store(&j->failed, 1);
        return;
    }
    float *acc = j->sums + task * j->p->cbout * SV_CB;
    for (int64_t cb = 0; cb < j->p->cbout; cb++) {
        memset(acc + cb * SV_CB, 0, SV_CB * sizeof(float));
        j->k->sum16(yb + cb * pix * SV_CB, pix, acc + cb * SV_CB);
    }
}

int sv_conv2d_mean(const sv_packed_conv *p, int64_t n, int64_t h, int64_t w, const float *x,
                   int x_layout, float *y, int act, float slope, int threads) {
    mean_job j = {.p = p, .k = sv_isa()->conv, .h = h, .w = w, .x = x,
                  .in_blocked = x_layout == SV_LAYOUT_BLOCKED, .act = act, .slope = slope};
    if (n <= 0) return 0;
    if (sv_conv_out_hw(&p->s, h, w, &j.oh, &j.ow) != 0 || j.oh * j.ow == 0) {
        for (int64_t i = 0; i < n * p->s.cout; i++) y[i] = __builtin_nanf(""); /* mean of none */
        return 0;
    }
    double macs = (double)n * (double)(j.oh * j.ow) * (double)(p->s.cout * p->s.kh * p->s.kw) *
                  (double)(p->s.cin / p->s.groups);
    int t = sv_conv_threads(macs, threads);
    j.band = band_rows(p->cbout * j.ow, 0, 1, n, j.oh, t);
    j.bands = cdiv(j.oh, j.band);
    int64_t width = p->cbout * SV_CB;
    j.sums = malloc((size_t)(n * j.bands * width) * sizeof(float));
    if (!j.sums) return -1;
    sv_run_tasks(n * j.bands, mean_task, &j, t);
    if (atomic_load(&j.failed)) {
        free(j.sums);
        return -1;
    }
    float inv = 1.0f / (float)(j.oh * j.ow);
    for (int64_t img = 0; img < n; img++) {
        const float *part = j.sums + img * j.bands * width;
        for (int64_t c = 0; c < p->s.cout; c++) {
            float total = 0.0f;
            for (int64_t b = 0; b < j.bands; b++) total += part[b * width + c];
            y[img * p->s.cout + c] = total * inv;
        }
    }
    free(j.sums);
    return 0;
}

/* ---- reorders between NCHW and blocked ---- */

typedef struct reorder_job {
    int64_t n, c, h, w, cb, rows; /* rows of a plane per task */
    const float *x;
    float *y;
    int to_blocked;
    const sv_conv_kern *k;
} reorder_job;

static void reorder_task(void *vctx, int64_t task) {
    const reorder_job *j = vctx;
    int64_t per_plane = cdiv(j->h, j->rows);
    int64_t plane_idx = task / per_plane, y0 = task % per_plane * j->rows;
    int64_t img = plane_idx / j->cb, ib = plane_idx % j->cb, c0 = ib * SV_CB;
    int64_t nc = min64(SV_CB, j->c - c0), hw = j->h * j->w;
    int64_t npix = (min64(y0 + j->rows, j->h) - y0) * j->w;
    float *blk = (j->to_blocked ? j->y : (float *)j->x) + (plane_idx * hw + y0 * j->w) * SV_CB;
    float *nchw = (j->to_blocked ? (float *)j->x : j->y) + (img * j->c + c0) * hw + y0 * j->w;
    if (j->to_blocked)
        j->k->gather16(nchw, hw, nc, npix, blk);
    else
        j->k->scatter16(blk, npix, nc, nchw, hw, NULL);
}

static void reorder(int64_t n, int64_t c, int64_t h, int64_t w, const float *x, float *y,
                    int threads, int to_blocked) {
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0) return;
    reorder_job j = {.n = n, .c = c, .h = h, .w = w, .cb = cdiv(c, SV_CB), .x = x, .y = y,
                     .to_blocked = to_blocked, .k = sv_isa()->conv};
    j.rows = min64(h, cdiv(4096, w)); /* 64 KiB of blocked floats per task */
    int64_t ntasks = n * j.cb * cdiv(h, j.rows);
    if (threads <= 0) threads = sv_pool_threads();
    int small = (double)n * (double)(j.cb * SV_CB) * (double)(h * w) < 262144.0;
    sv_run_tasks(ntasks, reorder_task, &j, small ? 1 : threads);
}

void sv_nchw_to_blocked(int64_t n, int64_t c, int64_t h, int64_t w, const float *x, float *y,
                        int threads) {
    reorder(n, c, h, w, x, y, threads, 1);
}

void sv_blocked_to_nchw(int64_t n, int64_t c, int64_t h, int64_t w, const float *x, float *y,
                        int threads) {
    reorder(n, c, h, w, x, y, threads, 0);
}
