/* Attention per head: out = softmax(q @ k^T * scale + mask) @ v, with no more than a block
 * of scores in memory (flash-attention's online softmax over key blocks).
 *
 * A task is one head (batch index) and a group of query blocks.  It packs k^T and v of its
 * head once into the micro-kernel's panels (gemm.c's sv_pack_b: 16 keys, or 16 output
 * columns, per panel), then for each block of QB queries and each block of KB keys runs
 *   S = q_blk @ k_blk^T            (micro-kernel tiles, S: QB x KB floats)
 *   P = exp(S * scale + mask - m)  (rowops_kern.h attn_softmax: running max m and sum l)
 *   O = O * alpha + P @ v_blk      (micro-kernel, accumulating into the output rows)
 * and divides each output row by its l at the end.  With s_k <= KB (every W3 shape) there
 * is one key block and no rescaling.  Causal attention skips key blocks past a query
 * block's last row and masks the rest per row.
 */
#include "sv_internal.h"
#include <stdatomic.h>

#define QB 48  /* queries per block: a multiple of every level's tile rows (3, 6, 12) */
#define KB 256 /* keys per block: a multiple of 16 */

/* Below this many multiply-adds the whole call stays on the calling thread. */
#define ATT_PARALLEL_MIN 262144.0

typedef struct att_job {
    const sv_attention *a;
    const sv_isa_table *isa;
    int64_t nbatch, qblocks, groups, blocks_per_group;
    _Atomic int failed;
} att_job;

typedef struct att_head {
    const float *q, *mask;
    float *o;
    sv_packed_b kt, v;
    float *s; /* QB x KB scores */
} att_head;

/* S[rows, cols] = q rows @ k^T columns [kb0, kb0 + cols) */
static void scores(const att_job *j, const att_head *h, int64_t r0, int rows, int64_t kb0,
                   int64_t cols) {
    const sv_attention *a = j->a;
    int mr = j->isa->mr;
    int64_t w = SV_NR * sv_ukr_panels(j->isa->vw, rows % mr ? rows % mr : mr);
    for (int64_t c = 0; c < cols; c += w) {
        int nc = (int)(cols - c < w ? cols - c : w);
        const float *bp = h->kt.data + ((kb0 + c) / SV_NR) * a->d * SV_NR;
        for (int r = 0; r < rows; r += mr) {
            int rr = rows - r < mr ? rows - r : mr;
            j->isa->ukr(rr, nc, a->d, h->q + (r0 + r) * a->srq, a->srq, bp, h->kt.k * SV_NR,
                        h->s + r * KB + c, KB, false, false, NULL, 0, 0);
        }
    }
}

/* O[rows, :] (+)= P[rows, cols] @ v rows [kb0, kb0 + cols) */
static void weighted(const att_job *j, const att_head *h, int64_t r0, int rows, int64_t kb0,
                     int64_t cols, bool accumulate) {
    const sv_attention *a = j->a;
    int mr = j->isa->mr;
    int64_t w = SV_NR * sv_ukr_panels(j->isa->vw, rows % mr ? rows % mr : mr);
    for (int64_t c = 0; c < a->dv; c += w) {
        int nc = (int)(a->dv - c < w ? a->dv - c : w);
        const float *bp = h->v.data + (c / SV_NR) * a->sk * SV_NR + kb0 * SV_NR;
        for (int r = 0; r < rows; r += mr) {
            int rr = rows - r < mr ? rows - r : mr;
            j->isa->ukr(rr, nc, cols, h->s + r * KB, KB, bp, h->v.k * SV_NR,
                        h->o + (r0 + r) * a->sro + c, a->sro, accumulate, false, NULL, 0, 0);
        }
    }
}

static void query_block(const att_job *j, const att_head *h, int64_t r0) {
    const sv_attention *a = j->a;
    int rows = (int)(a->sq - r0 < QB ? a->sq - r0 : QB);
    float m[QB], l[QB], alpha[QB];
    int64_t lim[QB];
    for (int i = 0; i < rows; i++) {
        m[i] = -__builtin_inff();
        l[i] = 0.0f;
    }
    int64_t kend = a->causal && r0 + rows < a->sk ? r0 + rows : a->sk;
    for (int64_t kb0 = 0; kb0 < kend; kb0 += KB) {
        int64_t cols = kend - kb0 < KB ? kend - kb0 : KB;
        scores(j, h, r0, rows, kb0, cols);
        if (a->causal)
            for (int i = 0; i < rows; i++) lim[i] = r0 + i + 1 - kb0;
        j->isa->attn_softmax(h->s, rows, KB, cols, a->scale,
                             h->mask ? h->mask + r0 * a->srm + kb0 : NULL, a->srm,
                             a->causal ? lim : NULL, m, l, alpha);
        if (kb0 > 0)
            for (int i = 0; i < rows; i++) {
                float *orow = h->o + (r0 + i) * a->sro;
                if (alpha[i] != 1.0f)
                    for (int64_t c = 0; c < a->dv; c++) orow[c] *= alpha[i];
            }
        weighted(j, h, r0, rows, kb0, cols, kb0 > 0);
    }
    for (int i = 0; i < rows; i++) {
        float *orow = h->o + (r0 + i) * a->sro, inv = 1.0f / l[i];
        for (int64_t c = 0; c < a->dv; c++) orow[c] *= inv;
    }
}

static void att_task(void *vctx, int64_t task) {
    att_job *j = vctx;
    const sv_attention *a = j->a;
    int64_t b = task / j->groups, g = task % j->groups;
    int64_t oq = 0, ok = 0, ov = 0, om = 0, oo = 0, rest = b;
    for (int d = a->nd - 1; d >= 0; d--) {
        int64_t i = rest % a->batch[d];
        rest /= a->batch[d];
        oq += i * a->sbq[d];
        ok += i * a->sbk[d];
        ov += i * a->sbv[d];
        om += i * a->sbm[d];
        oo += i * a->sbo[d];
    }
    att_head h = {.q = a->q + oq, .mask = a->mask ? a->mask + om : NULL, .o = a->o + oo};
    /* this thread's scratch, kept between tasks and calls (sv_thread_scratch) */
    h.s = sv_thread_scratch(SV_SCRATCH_ATT_S, (size_t)QB * KB * sizeof(float));
    float *kt = sv_thread_scratch(SV_SCRATCH_ATT_K, sv_pack_b_floats(a->d, a->sk) * sizeof(float));
    float *v = sv_thread_scratch(SV_SCRATCH_ATT_V, sv_pack_b_floats(a->sk, a->dv) * sizeof(float));
    if (!h.s || !kt || !v) {
        atomic_store(&j->failed, 1);
        return;
    }
    sv_pack_b_into(&h.kt, kt, a->k + ok, a->d, a->sk, 1, a->srk);
    sv_pack_b_into(&h.v, v, a->v + ov, a->sk, a->dv, a->srv, 1);
    int64_t qb1 = (g + 1) * j->blocks_per_group;
    if (qb1 > j->qblocks) qb1 = j->qblocks;
    for (int64_t qb = g * j->blocks_per_group; qb < qb1; qb++) query_block(j, &h, qb * QB);
}

int sv_attention_run(const sv_attention *a, int threads) {
    SV_ASSERT(a->nd >= 0 && a->nd <= SV_ATT_MAX_DIMS && a->sk >= 1);
    att_job j = {.a = a, .isa = sv_isa(), .nbatch = 1};
    for (int d = 0; d < a->nd; d++) j.nbatch *= a->batch[d];
    j.qblocks = (a->sq + QB - 1) / QB;
    if (j.nbatch == 0 || j.qblocks == 0) return 0;
    int t = threads > 0 ? threads : sv_pool_threads();
    double work = (double)j.nbatch * (double)a->sq * (double)a->sk * (double)(a->d + a->dv);
    if (work < ATT_PARALLEL_MIN) t = 1;
    /* heads first; query blocks of one head split only when there are too few heads */
    int64_t want = t > 1 ? 4 * (int64_t)t : 1;
    int64_t groups = (want + j.nbatch - 1) / j.nbatch;
    if (groups > j.qblocks) groups = j.qblocks;
    j.blocks_per_group = (j.qblocks + groups - 1) / groups;
    j.groups = (j.qblocks + j.blocks_per_group - 1) / j.blocks_per_group;
    int64_t ntasks = j.nbatch * j.groups;
    sv_run_tasks(ntasks, att_task, &j, t);
    return atomic_load(&j.failed) ? -1 : 0;
}
