/* Row operations over the last axis (rowops_kern.h): layer norm, RMS norm, softmax,
 * log-softmax.  The driver merges leading dims that every operand steps through evenly,
 * walks the rows with one multi-index, and splits row ranges over the pool when the job is
 * large enough to pay for a launch. */
#include "sv_internal.h"
#include <string.h>

/* Below this many floats a job stays on the calling thread (a launch costs a few us). */
#define ROW_PARALLEL_MIN 32768

typedef struct row_job {
    sv_rowop op; /* leading dims merged */
    const sv_isa_table *isa;
    int64_t rows, rows_per_task;
} row_job;

/* Merge leading dim i into i + 1 where every operand's stride allows it. */
static void merge_dims(sv_rowop *o) {
    int64_t *st[5] = {o->sx, o->sr, o->sh, o->sy, NULL};
    int nd = 0;
    for (int i = 0; i < o->nd; i++) {
        if (o->lead[i] == 1) continue; /* drop dims of size 1 */
        bool merge = nd > 0;
        for (int s = 0; s < 4 && merge; s++)
            if (st[s][nd - 1] != st[s][i] * o->lead[i]) merge = false;
        if (merge) {
            o->lead[nd - 1] *= o->lead[i];
            for (int s = 0; s < 4; s++) st[s][nd - 1] = st[s][i];
            continue;
        }
        o->lead[nd] = o->lead[i];
        for (int s = 0; s < 4; s++) st[s][nd] = st[s][i];
        nd++;
    }
    o->nd = nd;
}

/* The next position from dim d outwards: dim d one step on, carrying into the dims before
 * it (the offsets of every operand moved with it). */
static void carry(const sv_rowop *o, int64_t *idx, int d, int64_t *ox, int64_t *orr,
                  int64_t *oh, int64_t *oy) {
    for (; d >= 0; d--) {
        *ox += o->sx[d];
        *orr += o->sr[d];
        *oh += o->sh[d];
        *oy += o->sy[d];
        if (++idx[d] < o->lead[d]) return;
        *ox -= o->sx[d] * o->lead[d];
        *orr -= o->sr[d] * o->lead[d];
        *oh -= o->sh[d] * o->lead[d];
        *oy -= o->sy[d] * o->lead[d];
        idx[d] = 0;
    }
}

static void row_task(void *vctx, int64_t task) {
    const row_job *j = vctx;
    const sv_rowop *o = &j->op;
    int64_t r0 = task * j->rows_per_task, r1 = r0 + j->rows_per_task;
    if (r1 > j->rows) r1 = j->rows;
    int64_t idx[SV_ROW_MAX_DIMS], rest = r0, ox = 0, orr = 0, oh = 0, oy = 0;
    for (int d = o->nd - 1; d >= 0; d--) {
        idx[d] = rest % o->lead[d];
        rest /= o->lead[d];
        ox += idx[d] * o->sx[d];
        orr += idx[d] * o->sr[d];
        oh += idx[d] * o->sh[d];
        oy += idx[d] * o->sy[d];
    }
    sv_norm_params np = {.n = o->n, .eps = o->eps, .rms = o->kind == SV_ROW_RMS_NORM,
                         .gamma = o->gamma, .beta = o->beta};
    sv_softmax_params sp = {.n = o->n, .scale = o->scale,
                            .log = o->kind == SV_ROW_LOG_SOFTMAX};
    bool norm = o->kind == SV_ROW_LAYER_NORM || o->kind == SV_ROW_RMS_NORM;
    if (!norm && o->n <= SV_SHORT_ROW) { /* runs along the last leading dim, a block a step */
        int last = o->nd - 1;
        for (int64_t row = r0; row < r1;) {
            int64_t run = last >= 0 ? o->lead[last] - idx[last] : 1;
            if (run > r1 - row) run = r1 - row;
            j->isa->softmax_rows(&sp, o->x + ox, last >= 0 ? o->sx[last] : 0,
                                 o->r ? o->r + orr : NULL, last >= 0 ? o->sr[last] : 0,
                                 o->y + oy, last >= 0 ? o->sy[last] : 0, run);
            row += run;
            if (last < 0 || row >= r1) break;
            ox -= o->sx[last] * idx[last]; /* the run ended the dim: back to its start */
            orr -= o->sr[last] * idx[last];
            oy -= o->sy[last] * idx[last];
            idx[last] = 0;
            carry(o, idx, last - 1, &ox, &orr, &oh, &oy);
        }
        return;
    }
    for (int64_t row = r0; row < r1; row++) {
        const float *r = o->r ? o->r + orr : NULL;
        if (norm)
            j->isa->norm_row(&np, o->x + ox, r, o->h ? o->h + oh : NULL, o->y + oy);
        else
            j->isa->softmax_row(&sp, o->x + ox, r, o->y + oy);
        carry(o, idx, o->nd - 1, &ox, &orr, &oh, &oy); /* the next row */
    }
}

void sv_rowop_run(const sv_rowop *op, int threads) {
    SV_ASSERT(op->nd >= 0 && op->nd <= SV_ROW_MAX_DIMS && op->n >= 1);
    row_job j = {.op = *op, .isa = sv_isa()};
    merge_dims(&j.op);
    j.rows = 1;
    for (int d = 0; d < j.op.nd; d++) j.rows *= j.op.lead[d];
    if (j.rows == 0) return;
    int t = threads > 0 ? threads : sv_pool_threads();
    double work = (double)j.rows * (double)op->n;
    if (t <= 1 || work < ROW_PARALLEL_MIN || j.rows < 2) {
        j.rows_per_task = j.rows;
        row_task(&j, 0);
        return;
    }
    /* a few tasks per thread, so a thread the OS delays does not hold up the job */
    int64_t tasks = 4 * (int64_t)t;
    if (tasks > j.rows) tasks = j.rows;
    j.rows_per_task = (j.rows + tasks - 1) / tasks;
    sv_parallel((j.rows + j.rows_per_task - 1) / j.rows_per_task, row_task, &j);
}
