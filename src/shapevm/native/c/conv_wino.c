/* 3x3 convolutions of stride 1 by Winograd's minimal filtering, F(2x2, 3x3).
 *
 * Each 2x2 block of output pixels (a tile) is A^T [(G g G^T) . (B^T d B)] A, for d the
 * 4x4 input pixels under it and g the 3x3 filter (Lavin and Gray, "Fast Algorithms for
 * Convolutional Neural Networks", 2016).  Summed over input channels, the 16 products of
 * the brackets are 16 matrix products, [tiles x cin] @ [cin x cout], one per position xi
 * of the 4x4 transform: 16 multiply-adds per tile and channel pair where the direct
 * convolution takes 36 (2.25x fewer).  Transforming the filter (G, factors 1/2) happens once,
 * at packing; the input's (B) and the output's (A) transforms are additions only.
 *
 * The work is split like conv.c's: a task takes a few rows of tiles of one image, copies
 * the input rows they read into a zero-bordered slab, then, T tiles at a time, transforms
 * them into V[16][T][cin] (conv_kern.h, wino_in), runs the 16 products on the
 * convolution micro-kernel into M[16][cout / 16][T][16] and transforms M back into the
 * output with the epilogue (wino_out).  V and M of T tiles stay in the core's L2 cache;
 * each product's weights and rows in L1.
 *
 * Either layout in and out: a blocked input (NCHW16c) is copied into the slab, an NCHW one
 * reordered into it; an NCHW output is written blocked per task and reordered into place
 * with the residual, as conv.c does.
 * Rounding: the filter transform's halves and the sums of the transforms make results
 * differ from the direct convolution's by a few float32 ulps of the largest terms
 * (tests/native/test_conv.py holds both within 1e-5 of float64).
 */
#include "sv_internal.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

_Atomic int sv_conv_winograd = -1; /* -1: not yet read from the environment */

int sv_winograd_on(void) {
    int on = atomic_load(&sv_conv_winograd);
    if (on < 0) {
        const char *env = getenv("SHAPEVM_WINOGRAD");
        on = !(env && (!strcmp(env, "0") || !strcmp(env, "off") || !strcmp(env, "no")));
        int unset = -1;
        if (!atomic_compare_exchange_strong(&sv_conv_winograd, &unset, on))
            on = atomic_load(&sv_conv_winograd);
    }
    return on;
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

int sv_wino_fits(const sv_conv_shape *s) {
    return s->groups == 1 && s->kh == 3 && s->kw == 3 && s->sh == 1 && s->sw == 1 &&
           s->dh == 1 && s->dw == 1 && s->cin >= SV_CB;
}

/* U[xi][b][k][16] = (G g G^T)[xi] for output channel 16 b + lane and input channel k,
 * zero past cin and cout; G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]. */
int sv_pack_conv_wino(sv_packed_conv *p, const float *w, const int64_t ws[4]) {
    static const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    const sv_conv_shape *s = &p->s;
    int64_t k = p->cbin * SV_CB;
    p->wino = sv_alloc((size_t)(16 * p->cbout * k * SV_NR) * sizeof(float));
    if (!p->wino) return -1;
    memset(p->wino, 0, (size_t)(16 * p->cbout * k * SV_NR) * sizeof(float));
    for (int64_t co = 0; co < s->cout; co++)
        for (int64_t ci = 0; ci < s->cin; ci++) {
            const float *g = w + co * ws[0] + ci * ws[1];
            double gg[3][3], t[4][3];
            for (int a = 0; a < 3; a++)
                for (int c = 0; c < 3; c++) gg[a][c] = g[a * ws[2] + c * ws[3]];
            for (int i = 0; i < 4; i++) /* G g */
                for (int c = 0; c < 3; c++)
                    t[i][c] = G[i][0] * gg[0][c] + G[i][1] * gg[1][c] + G[i][2] * gg[2][c];
            for (int i = 0; i < 4; i++) /* (G g) G^T */
                for (int jj = 0; jj < 4; jj++) {
                    double u = t[i][0] * G[jj][0] + t[i][1] * G[jj][1] + t[i][2] * G[jj][2];
                    int64_t xi = 4 * i + jj, b = co / SV_CB;
                    p->wino[((xi * p->cbout + b) * k + ci) * SV_NR + co % SV_CB] = (float)u;
                }
        }
    return 0;
}

enum { WINO_TILES = 24 }; /* tiles transformed at a time (rounded up to whole micro-tiles) */

typedef struct wino_job {
    const sv_packed_conv *p;
    const sv_conv_kern *k;
    const sv_isa_table *isa;
    int mr, act, res_first, in_blocked, out_blocked;
    float slope;
    int64_t n, h, w, oh, ow, ntw, nth; /* tiles per row and per column */
    int64_t rows_per_task, tasks_per_image, T, K, wsl, rs, bs;
    const float *x, *res;
    float *y;
    _Atomic int failed;
} wino_job;

/* The input rows [iy0, iy0 + rows) of image img, every block, with zero borders (an NCHW
 * input reordered into pixels of 16 channels on the way). */
static void wino_slab(const wino_job *j, int64_t img, int64_t iy0, int64_t rows, float *slab) {
    const sv_packed_conv *p = j->p;
    int64_t w = j->w, h = j->h;
    for (int64_t ib = 0; ib < p->cbin; ib++)
        for (int64_t r = 0; r < rows; r++) {
            int64_t iy = iy0 + r, c0 = ib * SV_CB;
            const float *src = iy < 0 || iy >= h ? NULL
                               : j->in_blocked   ? j->x + ((img * p->cbin + ib) * h + iy) * w * SV_CB
                                                 : j->x + ((img * p->s.cin + c0) * h + iy) * w;
            sv_slab_row(j->k, slab + ib * j->bs + r * j->rs, src, j->in_blocked, h * w,
                        min64(SV_CB, p->s.cin - c0), w, SV_CB, p->s.pl, j->wsl);
        }
}

static void wino_task(void *vctx, int64_t task) {
    wino_job *j = vctx;
    const sv_packed_conv *p = j->p;
    const sv_conv_kern *k = j->k;
    int64_t img = task / j->tasks_per_image, rt = task % j->tasks_per_image;
    int64_t ty0 = rt * j->rows_per_task, ty1 = min64(ty0 + j->rows_per_task, j->nth);
    int64_t T = j->T, K = j->K, cbout = p->cbout, plane = j->oh * j->ow;
    int64_t slab_rows = 2 * (ty1 - ty0) + 2;
    size_t slab_f = (size_t)(p->cbin * j->bs), v_f = (size_t)(16 * T * K);
    size_t m_f = (size_t)(16 * cbout * T * SV_CB);
    int64_t oy0 = 2 * ty0, npix = (min64(2 * ty1, j->oh) - oy0) * j->ow;
    size_t out_f = j->out_blocked ? 0 : (size_t)(cbout * npix * SV_CB); /* NCHW: blocked first */
    size_t bytes = (slab_f + v_f + m_f + out_f) * sizeof(float) +
                   (size_t)T * (2 * sizeof(float *) + sizeof(int64_t) + 1) +
                   (size_t)(16 * p->cbin) * sizeof(int64_t);
    char *mem = sv_thread_scratch(SV_SCRATCH_CONV, bytes);
    if (!mem) {
        atomic_store(&j->failed, 1);
        return;
    }
    float *slab = (float *)mem, *v = slab + slab_f, *m = v + v_f, *oslab = m + m_f;
    const float **tp = (const float **)(oslab + out_f), **pix = tp + T;
    int64_t *off = (int64_t *)(pix + T), *segoff = off + T;
    unsigned char *edge = (unsigned char *)(segoff + 16 * p->cbin);
    for (int xi = 0; xi < 16; xi++)
        for (int64_t ib = 0; ib < p->cbin; ib++) segoff[xi * p->cbin + ib] = xi * T * K + ib * SV_CB;
    for (int64_t i = 0; i < T; i++) pix[i] = v + i * K;
    wino_slab(j, img, 2 * ty0 - p->s.pt, slab_rows, slab);
    const sv_epilogue none[2] = {{.alpha = 1.0f}, {.alpha = 1.0f}};
    int64_t ntiles = (ty1 - ty0) * j->ntw;
    for (int64_t q0 = 0; q0 < ntiles; q0 += T) {
        int nt = (int)min64(T, ntiles - q0);
        for (int i = 0; i < nt; i++) {
            int64_t ty = ty0 + (q0 + i) / j->ntw, tx = (q0 + i) % j->ntw;
            int64_t oy = 2 * ty, ox = 2 * tx;
            tp[i] = slab + 2 * (ty - ty0) * j->rs + ox * SV_CB;
            off[i] = ((j->out_blocked ? oy : oy - oy0) * j->ow + ox) * SV_CB;
            edge[i] = (unsigned char)((ox + 1 >= j->ow) | (oy + 1 >= j->oh) << 1);
        }
        k->wino_in(nt, tp, j->rs, p->cbin, j->bs, v, T * K, K);
        for (int xi = 0; xi < 16; xi++)
            for (int64_t b = 0; b < cbout;) {
                int nb = k->ukr2 && b + 1 < cbout ? 2 : 1;
                const float *bp = p->wino + (xi * cbout + b) * K * SV_NR;
                float *c = m + (xi * cbout + b) * T * SV_CB;
                const int64_t *so = segoff + xi * p->cbin;
                for (int r0 = 0; r0 < nt; r0 += j->mr) {
                    int mm = (int)min64(j->mr, nt - r0);
                    if (nb == 2)
                        k->ukr2(mm, p->cbin, SV_CB, pix + r0, so, bp, K * SV_NR,
                                c + r0 * SV_CB, T * SV_CB, none, r0, SV_NR);
                    else
                        k->ukr(mm, p->cbin, SV_CB, pix + r0, so, bp, c + r0 * SV_CB, SV_CB,
                               none, r0, SV_NR);
                }
                b += nb;
            }
        for (int64_t b = 0; b < cbout; b++) {
            /* an NCHW output gets its residual (and then the activation, with res_first)
             * as it is reordered into place */
            int late = !j->out_blocked && j->res && j->res_first;
            sv_epilogue ep = {.bias = p->bias + SV_CB * b, .act = late ? 0 : j->act,
                              .alpha = 1.0f, .slope = j->slope, .res_first = j->res_first};
            int nc = (int)min64(SV_CB, p->s.cout - SV_CB * b);
            if (j->out_blocked) {
                int64_t base = (img * cbout + b) * plane * SV_CB;
                k->wino_out(nt, m + b * T * SV_CB, cbout * T * SV_CB, off, edge, j->y + base,
                            j->ow * SV_CB, j->res ? j->res + base : NULL, &ep, nc);
            } else /* the residual comes with the reorder below, after the activation */
                k->wino_out(nt, m + b * T * SV_CB, cbout * T * SV_CB, off, edge,
                            oslab + b * npix * SV_CB, j->ow * SV_CB, NULL, &ep, nc);
        }
    }
    if (!j->out_blocked) {
        int64_t at = img * p->s.cout * plane + oy0 * j->ow;
        sv_conv_store_nchw(j->isa, oslab, npix, p->s.cout, j->y + at,
                           j->res ? j->res + at : NULL, plane, j->act, j->slope, j->res_first);
    }
}

int sv_conv2d_wino(const sv_packed_conv *p, int64_t n, int64_t h, int64_t w, const float *x,
                   int x_layout, float *y, int y_layout, const float *residual, int act,
                   float slope, int res_first, int threads, int64_t oh, int64_t ow) {
    const sv_isa_table *isa = sv_isa();
    wino_job *j = calloc(1, sizeof *j);
    if (!j) return -1;
    j->p = p, j->k = isa->conv, j->isa = isa, j->mr = isa->mr, j->act = act, j->slope = slope;
    j->res_first = res_first;
    j->n = n, j->h = h, j->w = w, j->oh = oh, j->ow = ow, j->x = x, j->y = y, j->res = residual;
    j->in_blocked = x_layout == SV_LAYOUT_BLOCKED, j->out_blocked = y_layout == SV_LAYOUT_BLOCKED;
    j->ntw = cdiv(ow, 2), j->nth = cdiv(oh, 2);
    j->T = cdiv(WINO_TILES, j->mr) * j->mr;
    j->K = p->cbin * SV_CB;
    j->wsl = 2 * j->ntw + 2; /* >= w + pl + pr: every tile's 4 columns inside */
    j->rs = j->wsl * SV_CB;
    /* the direct convolution's multiply-adds over 2: the products and the transforms */
    double macs = (double)n * (double)(oh * ow) * (double)(p->s.cout * p->s.cin) * 4.5;
    int t = sv_conv_threads(macs, threads);
    int64_t rpt = min64(cdiv(128, j->ntw), j->nth); /* about 512 output pixels a task */
    while (rpt > 1 && t > 1 && n * cdiv(j->nth, rpt) < 4 * t) rpt = cdiv(rpt, 2);
    j->rows_per_task = rpt;
    j->tasks_per_image = cdiv(j->nth, rpt);
    j->bs = (2 * rpt + 2) * j->rs;
    int64_t ntasks = n * j->tasks_per_image;
    sv_run_tasks(ntasks, wino_task, j, t);
    int failed = atomic_load(&j->failed);
    free(j);
    return failed ? -1 : 0;
}
