/* Pooling over the last two axes (max, average with or without the padding, global
 * average) on the row kernels of pool_kern.h, split over threads by planes and rows. */
#include "sv_internal.h"
#include <stdatomic.h>
#include <stdlib.h>

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Below this many input reads a pool launch costs more than it saves. */
#define POOL_SERIAL_READS 131072.0

static int pool_threads(double reads, int threads) {
    if (threads <= 0) threads = sv_pool_threads();
    return reads < POOL_SERIAL_READS ? 1 : threads;
}

int sv_pool_out_hw(const sv_pool_shape *s, int64_t h, int64_t w, int64_t *oh, int64_t *ow) {
    int64_t span_h = h + s->pt + s->pb - s->kh, span_w = w + s->pl + s->pr - s->kw;
    if (span_h < 0 || span_w < 0) return -1;
    *oh = span_h / s->sh + 1;
    *ow = span_w / s->sw + 1;
    return 0;
}

typedef struct pool_job {
    const sv_pool_shape *s;
    const sv_conv_kern *k;
    int64_t h, w, oh, ow, rows; /* output rows per task */
    const float *x;
    float *y;
    const float *colscale; /* 1 / real columns of each output column (excluding padding) */
    _Atomic int failed;
} pool_job;

static void pool_task(void *vctx, int64_t task) {
    pool_job *j = vctx;
    const sv_pool_shape *s = j->s;
    int64_t per_plane = cdiv(j->oh, j->rows);
    int64_t plane = task / per_plane, oy0 = task % per_plane * j->rows;
    int64_t oy1 = min64(oy0 + j->rows, j->oh);
    float *tmp = malloc((size_t)(s->pl + j->w + s->pr + SV_POOL_SLACK) * sizeof(float));
    const float **rows = malloc((size_t)s->kh * sizeof(float *));
    if (!tmp || !rows) {
        atomic_store(&j->failed, 1);
        free(tmp);
        free(rows);
        return;
    }
    const float *xp = j->x + plane * j->h * j->w;
    for (int64_t oy = oy0; oy < oy1; oy++) {
        int64_t iy0 = max64(oy * s->sh - s->pt, 0);
        int64_t iy1 = min64(oy * s->sh - s->pt + s->kh, j->h);
        int nrows = 0;
        for (int64_t iy = iy0; iy < iy1; iy++) rows[nrows++] = xp + iy * j->w;
        float *y = j->y + (plane * j->oh + oy) * j->ow;
        if (nrows == 0) { /* a window inside the padding (the entry points refuse these) */
            for (int64_t ox = 0; ox < j->ow; ox++)
                y[ox] = s->kind == SV_POOL_MAX ? -__builtin_inff() : 0.0f;
            continue;
        }
        float scale = s->kind == SV_POOL_AVG          ? 1.0f / (float)(s->kh * s->kw)
                      : s->kind == SV_POOL_AVG_EXCL_PAD ? 1.0f / (float)nrows
                                                        : 1.0f;
        j->k->pool_row(s, rows, nrows, j->w, tmp, y, j->ow, scale, j->colscale);
    }
    free(tmp);
    free(rows);
}

int sv_pool2d_nchw(const sv_pool_shape *s, int64_t planes, int64_t h, int64_t w,
                   const float *x, float *y, int threads) {
    int64_t oh, ow;
    if (planes <= 0 || sv_pool_out_hw(s, h, w, &oh, &ow) != 0 || oh * ow == 0) return 0;
    float *colscale = NULL;
    if (s->kind == SV_POOL_AVG_EXCL_PAD) {
        colscale = calloc((size_t)(ow + SV_POOL_SLACK), sizeof(float));
        if (!colscale) return -1;
        for (int64_t ox = 0; ox < ow; ox++) {
            int64_t x0 = ox * s->sw - s->pl;
            int64_t cols = min64(x0 + s->kw, w) - max64(x0, 0);
            colscale[ox] = cols > 0 ? 1.0f / (float)cols : 0.0f;
        }
    }
    pool_job j = {.s = s, .k = sv_isa()->conv, .h = h, .w = w, .oh = oh, .ow = ow, .x = x,
                  .y = y, .colscale = colscale};
    j.rows = min64(oh, cdiv(2048, ow)); /* ~2k outputs per task */
    int t = pool_threads((double)planes * (double)(oh * ow) * (double)(s->kh * s->kw), threads);
    sv_run_tasks(planes * cdiv(oh, j.rows), pool_task, &j, t);
    free(colscale);
    return atomic_load(&j.failed) ? -1 : 0;
}

typedef struct gap_job {
    const sv_conv_kern *k;
    int64_t hw, c, cb, per_task; /* planes (NCHW) or blocks (blocked) per task */
    const float *x;
    float *y;
} gap_job;

static void gap_nchw_task(void *vctx, int64_t task) {
    const gap_job *j = vctx;
    float inv = 1.0f / (float)j->hw;
    for (int64_t p = task * j->per_task, end = p + j->per_task; p < end && p < j->c; p++)
        j->y[p] = j->k->sum(j->x + p * j->hw, j->hw) * inv;
}

void sv_global_avg_pool_nchw(int64_t planes, int64_t hw, const float *x, float *y,
                             int threads) {
    if (planes <= 0) return;
    if (hw <= 0) {
        for (int64_t p = 0; p < planes; p++) y[p] = __builtin_nanf("");
        return;
    }
    gap_job j = {.k = sv_isa()->conv, .hw = hw, .c = planes, .x = x, .y = y};
    int t = pool_threads((double)planes * (double)hw, threads);
    j.per_task = t <= 1 ? planes : max64(1, planes / (8 * (int64_t)t));
    sv_run_tasks(cdiv(planes, j.per_task), gap_nchw_task, &j, t);
}

/* task: one block of 16 channels of one image */
static void gap_blocked_task(void *vctx, int64_t task) {
    const gap_job *j = vctx;
    int64_t img = task / j->cb, b = task % j->cb;
    float acc[SV_CB] = {0};
    j->k->sum16(j->x + task * j->hw * SV_CB, j->hw, acc);
    float inv = 1.0f / (float)j->hw;
    for (int64_t c = 0; c < SV_CB && SV_CB * b + c < j->c; c++)
        j->y[img * j->c + SV_CB * b + c] = acc[c] * inv;
}

void sv_global_avg_pool_blocked(int64_t n, int64_t c, int64_t hw, const float *x, float *y,
                                int threads) {
    if (n <= 0 || c <= 0) return;
    if (hw <= 0) {
        for (int64_t p = 0; p < n * c; p++) y[p] = __builtin_nanf("");
        return;
    }
    gap_job j = {.k = sv_isa()->conv, .hw = hw, .c = c, .cb = cdiv(c, SV_CB), .x = x, .y = y};
    int t = pool_threads((double)n * (double)(j.cb * SV_CB) * (double)hw, threads);
    sv_run_tasks(n * j.cb, gap_blocked_task, &j, t);
}
