/* Matrix products on the micro-kernel (gemm_kern.h): packing, blocking, threads.
 *
 * sv_dense multiplies rows of activations by weights packed once (sv_pack_b): panels of
 * 16 columns, k-major, zero-padded, the same layout for every instruction set, packed from
 * any strides (x @ W.T with a PyTorch [out, in] weight is a pack with strides (1, K)).
 * Loops (GotoBLAS order): k in chunks of KC (a chunk of a panel, KC x 16 floats, stays in
 * L1 across the row tiles), rows in blocks of MC (MC x KC of A stays in L2 across panels),
 * then panels, then row tiles.  Threads split (row block, panel group) tasks.
 * sv_sgemm takes B from any strides too, packing it per call (batched matmul of attention).
 */
#include "sv_internal.h"
#include <stdlib.h>
#include <string.h>

#ifndef KC
/* k chunk: 256 x 16 floats of a panel (16 KiB) stay in L1 across row tiles; on AVX-512 a
 * call reads two panels (32 KiB, with 12 KiB of A), measured on a 48 KiB L1 only (a 32 KiB
 * one, Skylake-SP's, may want 128) */
#define KC 256
#endif
#ifndef MC
#define MC 96 /* rows of A per block: MC x KC floats (96 KiB) stay in L2 across panels */
#endif
#ifndef PANEL_MAJOR_A_BYTES
#define PANEL_MAJOR_A_BYTES (64 * 1024)
#endif

typedef struct pack_job {
    const float *w;
    float *data;
    int64_t k, n, sk, sn, panels, per_task;
} pack_job;

/* Panels [task * per_task, ...) of a pack. */
static void pack_task(void *vctx, int64_t task) {
    const pack_job *j = vctx;
    int64_t k = j->k, n = j->n, sk = j->sk, sn = j->sn;
    int64_t p1 = (task + 1) * j->per_task < j->panels ? (task + 1) * j->per_task : j->panels;
    for (int64_t p = task * j->per_task; p < p1; p++) {
        float *dst = j->data + p * k * SV_NR;
        int64_t c0 = p * SV_NR, nc = n - c0 < SV_NR ? n - c0 : SV_NR;
        if (sn != 1 && sk == 1) {
            /* columns contiguous along k (x @ W.T, attention's k^T): read each column
             * once, in order, and write it down the panel */
            if (nc < SV_NR) memset(dst, 0, (size_t)k * SV_NR * sizeof(float));
            for (int64_t k0 = 0; k0 < k; k0 += 64) { /* 64 x 16 floats of the panel in L1 */
                int64_t k1 = k0 + 64 < k ? k0 + 64 : k;
                for (int64_t jj = 0; jj < nc; jj++) {
                    const float *src = j->w + (c0 + jj) * sn;
                    for (int64_t kk = k0; kk < k1; kk++) dst[kk * SV_NR + jj] = src[kk];
                }
            }
            continue;
        }
        for (int64_t kk = 0; kk < k; kk++) {
            const float *src = j->w + kk * sk + c0 * sn;
            float *d = dst + kk * SV_NR;
            if (sn == 1) {
                memcpy(d, src, (size_t)nc * sizeof(float));
            } else {
                for (int64_t jj = 0; jj < nc; jj++) d[jj] = src[jj * sn];
            }
            for (int64_t jj = nc; jj < SV_NR; jj++) d[jj] = 0.0f;
        }
    }
}

/* Packs of at least this many floats (512 KiB) are shared among the pool's threads: a
 * model's weights are packed as it is compiled, and most of that time is the kernel
 * faulting in the new memory (a 1024 x 1024 weight: 1024 faults, 2.2-2.5 ms on one
 * thread), which two cores do side by side.  W1's build and first call in a fresh process,
 * ten processes each, alternated: 8.7-14.7 ms (median 9.8) -> 8.2-12.1 (9.2); W3's, with
 * four weights of 0.25-1 MiB, level (11.4-12.7 against 11.0-16.4, medians 12.0).  With
 * only packs of 2 MiB and more on the pool, W1 gained less: the one large pack was then
 * the pool's first job, and started its worker.  A pack inside a task (attention's keys
 * and values) stays on its thread. */
#define PACK_PARALLEL_MIN_FLOATS (1 << 17)

size_t sv_pack_b_floats(int64_t k, int64_t n) {
    int64_t panels = (n + SV_NR - 1) / SV_NR;
    return (size_t)(panels > 0 ? panels : 1) * (size_t)(k > 0 ? k : 1) * SV_NR;
}

void sv_pack_b_into(sv_packed_b *out, float *data, const float *w, int64_t k, int64_t n,
                    int64_t sk, int64_t sn) {
    int64_t panels = (n + SV_NR - 1) / SV_NR;
    size_t count = sv_pack_b_floats(k, n);
    pack_job j = {.w = w, .data = data, .k = k, .n = n, .sk = sk, .sn = sn, .panels = panels};
    int t = count >= PACK_PARALLEL_MIN_FLOATS ? sv_pool_threads() : 1;
    int64_t ntasks = t > 1 ? 4 * (int64_t)t : 1;
    if (ntasks > panels) ntasks = panels > 0 ? panels : 1;
    j.per_task = (panels + ntasks - 1) / ntasks;
    ntasks = j.per_task > 0 ? (panels + j.per_task - 1) / j.per_task : 0;
    sv_run_tasks(ntasks, pack_task, &j, t);
    out->k = k;
    out->n = n;
    out->panels = panels;
    out->data = data;
}

int sv_pack_b(sv_packed_b *out, const float *w, int64_t k, int64_t n, int64_t sk, int64_t sn) {
    float *data = sv_alloc(sv_pack_b_floats(k, n) * sizeof(float));
    if (!data) return -1;
    sv_pack_b_into(out, data, w, k, n, sk, sn);
    return 0;
}

void sv_packed_b_free(sv_packed_b *p) {
    sv_free(p->data);
    p->data = NULL;
}

typedef struct dense_job {
    const sv_isa_table *isa;
    int64_t m, k, n;
    const float *a;
    int64_t lda;
    const float *bp; /* panels, each k * 16 */
    float *c;
    int64_t ldc;
    const sv_epilogue *ep;
    int64_t kc;              /* k chunk */
    int64_t ntiles;          /* row tiles of C; their sizes differ by at most one row */
    int64_t tile_base, tile_extra; /* m / ntiles, m % ntiles */
    /* tasks: row block x panel group; block b has row tiles [b * ntiles / row_blocks,
     * (b + 1) * ntiles / row_blocks), group g the micro-kernel calls [g * calls /
     * panel_groups, ...) of panels_per_call panels each; rows_outer: task = b * groups + g,
     * else g * row_blocks + b */
    int64_t row_blocks, panel_groups, calls;
    bool rows_outer;
    bool panel_major; /* loop order: panels outside k chunks (few rows) */
    int64_t slice;    /* GotoBLAS order: panels of B kept in L2 while row tiles pass */
    int64_t panels_per_call; /* panels per micro-kernel call (SV_UKR_PANELS) */
    int post_act;     /* a long activation applied per finished block of C, or 0 */
    float post_slope; /* its slope (leaky_relu) */
} dense_job;

/* First row and row count of tile t: the first m % ntiles tiles have one row more. */
static inline int64_t tile_start(const dense_job *j, int64_t t) {
    return t * j->tile_base + (t < j->tile_extra ? t : j->tile_extra);
}

/* Row tiles [t0, t1) of panels [p, p + np) times the k chunk at k0. */
static inline void chunk_tiles(const dense_job *j, int64_t p, int64_t np, int64_t k0,
                               int64_t t0, int64_t t1) {
    int64_t kc = j->k - k0 < j->kc ? j->k - k0 : j->kc;
    bool first = k0 == 0, last = k0 + j->kc >= j->k;
    int64_t col = p * SV_NR;
    int nc = (int)(j->n - col < np * SV_NR ? j->n - col : np * SV_NR);
    const float *bp = j->bp + p * j->k * SV_NR + k0 * SV_NR;
    for (int64_t t = t0, r = tile_start(j, t0); t < t1; t++) {
        int rows = (int)(j->tile_base + (t < j->tile_extra));
        j->isa->ukr(rows, nc, kc, j->a + r * j->lda + k0, j->lda, bp, j->k * SV_NR,
                    j->c + r * j->ldc + col, j->ldc, !first, last, j->ep, r, col);
        r += rows;
    }
}

static void dense_task(void *vctx, int64_t task) {
    const dense_job *j = vctx;
    int64_t ib = j->rows_outer ? task / j->panel_groups : task % j->row_blocks;
    int64_t pg = j->rows_outer ? task % j->panel_groups : task / j->row_blocks;
    int64_t t0 = ib * j->ntiles / j->row_blocks, t1 = (ib + 1) * j->ntiles / j->row_blocks;
    int64_t w = j->panels_per_call, npanels = (j->n + SV_NR - 1) / SV_NR;
    int64_t p0 = pg * j->calls / j->panel_groups * w;
    int64_t p1 = (pg + 1) * j->calls / j->panel_groups * w;
    if (p1 > npanels) p1 = npanels;
    int64_t kend = j->k > 0 ? j->k : 1;
    if (j->panel_major) /* B read once, in memory order; the rows of A stay in L2 */
        for (int64_t p = p0; p < p1; p += w)
            for (int64_t k0 = 0; k0 < kend; k0 += j->kc)
                chunk_tiles(j, p, p1 - p < w ? p1 - p : w, k0, t0, t1);
    else /* GotoBLAS: a k chunk of a slice of panels in L2, each row tile's k chunk in L1
          * while it goes across the slice's panels */
        for (int64_t s0 = p0; s0 < p1; s0 += j->slice) {
            int64_t s1 = s0 + j->slice < p1 ? s0 + j->slice : p1;
            for (int64_t k0 = 0; k0 < kend; k0 += j->kc)
                for (int64_t t = t0; t < t1; t++)
                    for (int64_t p = s0; p < s1; p += w)
                        chunk_tiles(j, p, s1 - p < w ? s1 - p : w, k0, t, t + 1);
        }
    if (j->post_act && p1 > p0) { /* the task's block of C is finished (and in L2) */
        int64_t r0 = tile_start(j, t0), r1 = tile_start(j, t1);
        int64_t c1 = p1 * SV_NR < j->n ? p1 * SV_NR : j->n;
        sv_epilogue post = {.alpha = 1.0f, .act = j->post_act, .slope = j->post_slope};
        j->isa->act_rows(j->c + r0 * j->ldc + p0 * SV_NR, r1 - r0, c1 - p0 * SV_NR, j->ldc,
                         &post);
    }
}

/* How many threads a product of this size is worth: below SV_PARALLEL_MIN_MACS
 * multiply-adds (a few microseconds) a pool launch costs about what it saves. */
static int threads_for(int64_t m, int64_t n, int64_t k, int threads) {
    double work = (double)m * (double)n * (double)(k > 0 ? k : 1);
    if (threads <= 1 || work < SV_PARALLEL_MIN_MACS) return 1;
    int t = (int)(work / (SV_PARALLEL_MIN_MACS / 2));
    return t < threads ? (t < 1 ? 1 : t) : threads;
}

void sv_dense(int64_t m, const float *a, int64_t lda, const sv_packed_b *b, float *c,
              int64_t ldc, const sv_epilogue *ep, int threads) {
    if (m <= 0 || b->n <= 0) return;
    const sv_isa_table *isa = sv_isa();
    dense_job j = {.isa = isa, .m = m, .k = b->k, .n = b->n, .a = a, .lda = lda,
                   .bp = b->data, .c = c, .ldc = ldc, .ep = ep};
    sv_epilogue inner;
    if (ep && ep->act != SV_ACT_NONE && ep->act != SV_ACT_RELU && ep->act != SV_ACT_RELU6 &&
        ep->act != SV_ACT_LEAKY_RELU && !ep->residual) {
        /* A long activation (GELU...) runs over each task's finished block of C in one loop,
         * not per tile: 12 vectors at a time are too few for its chains of dependent
         * operations to overlap (2-3x slower). */
        inner = *ep;
        inner.act = SV_ACT_NONE;
        j.ep = &inner;
        j.post_act = ep->act;
        j.post_slope = ep->slope;
    }
    int t = threads_for(m, b->n, b->k, threads > 0 ? threads : sv_pool_threads());
    /* How the threads share the product.  The pool deals each thread a contiguous range of the
     * tasks, and the ranges should hold the same work.  With at least a row block per thread,
     * each thread takes whole row blocks, its own rows: the tile and block counts are rounded
     * up to multiples of the threads (more tiles of 11 rows than 12), and a thread then reads
     * the rows it wrote in the layer before, from its own L2 (with the columns split instead,
     * each layer read half of its input from the other core's cache: W3 at 4 x 128 took 11%
     * longer).  With fewer rows, the threads split the columns, so each reads only its share of
     * the weights, the same share whatever the rows (it stays in its L2 from one call to the
     * next).  Blocks of uneven tiles dealt out unevenly (43 tiles in blocks of 8, 8, 8, 8, 8
     * and 3; 11 in blocks of 5 and 6) left a thread waiting for the other (perf: 7% of a
     * LLaMA-like block's time at 2 x 64 tokens in the pool's waits).  Against the split before,
     * in one process, alternated: W3 and the LLaMA-like block 4-5% faster at 2 x 64 and 1 x
     * 200 tokens, 2% slower at 4 x 128. */
    int64_t tiles_per_block = MC / isa->mr > 0 ? MC / isa->mr : 1;
    j.ntiles = (m + isa->mr - 1) / isa->mr;
    j.row_blocks = (j.ntiles + tiles_per_block - 1) / tiles_per_block;
    j.rows_outer = t > 1 && j.row_blocks >= t;
    if (j.rows_outer) {
        j.ntiles = (j.ntiles + t - 1) / t * t;
        if (j.ntiles > m) j.ntiles = m;
        j.row_blocks = ((j.ntiles + tiles_per_block - 1) / tiles_per_block + t - 1) / t * t;
        if (j.row_blocks > j.ntiles) j.row_blocks = j.ntiles;
    }
    j.tile_base = m / j.ntiles;
    j.tile_extra = m % j.ntiles;
    j.panels_per_call = sv_ukr_panels(isa->vw, (int)j.tile_base);
    /* One row tile reads each chunk of B once: chunks of k would only break its stream.
     * And C may be the residual itself (the executor computes x @ W + r in r's memory): a
     * chunk of k would write its partial sums over the residual before the last chunk
     * adds it, so then the whole of k is one chunk. */
    /* (the kernel API refuses any other overlap; the executor's memory plan shares a
     * buffer only whole) */
    bool residual_in_c = ep && ep->residual == c && ep->ldr == ldc;
    j.kc = (j.ntiles == 1 || residual_in_c) && b->k > 0 ? b->k : KC;
    int64_t block_rows = m < tiles_per_block * isa->mr ? m : tiles_per_block * isa->mr;
    j.panel_major = block_rows * b->k * (int64_t)sizeof(float) <= PANEL_MAJOR_A_BYTES;
    /* Row tiles outside the panels: a tile's 12 x KC of A stays in L1 while it crosses a
     * slice of panels read from L2, as MLAS's loop does (the panels outside, B's chunk in
     * L1 and the tiles' A from L2, was 2-4% slower on two threads at k = 384 or n = 384,
     * in one process alternated; level at W3's k and n).  A slice's k chunk fills at most
     * half of L2. */
    int64_t chunk_bytes = j.kc * SV_NR * (int64_t)sizeof(float);
    j.slice = (int64_t)(sv_l2_bytes() / 2) / chunk_bytes;
    j.slice = j.slice / j.panels_per_call * j.panels_per_call;
    if (j.slice < j.panels_per_call) j.slice = j.panels_per_call;
    /* whole micro-kernel calls per task: a task's last call of fewer panels is slower */
    j.calls = (b->panels + j.panels_per_call - 1) / j.panels_per_call;
    /* enough tasks for the threads to share them unevenly (a busy core) */
    int64_t want = t > 1 ? 4 * (int64_t)t : 1;
    int64_t groups = (want + j.row_blocks - 1) / j.row_blocks;
    while (t > 1 && !j.rows_outer && groups % t != 0 && groups < j.calls) groups++;
    if (groups > j.calls) groups = j.calls;
    if (groups < 1) groups = 1;
    j.panel_groups = groups;
    int64_t ntasks = j.row_blocks * j.panel_groups;
    sv_run_tasks(ntasks, dense_task, &j, t);
}

void sv_sgemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t sam, int64_t sak,
              const float *b, int64_t sbk, int64_t sbn, float *c, int64_t ldc,
              const sv_epilogue *ep, int threads) {
    if (m <= 0 || n <= 0) return;
    /* the copies live in this thread's scratch: allocated and freed in every call, they
     * were faulted in again whenever glibc had given the freed memory back */
    const float *arows = a;
    int64_t lda = sam;
    if (sak != 1 && k > 1) {
        float *acopy = sv_thread_scratch(SV_SCRATCH_GEMM_A, (size_t)m * (size_t)k * sizeof(float));
        if (!acopy) goto fallback;
        for (int64_t i = 0; i < m; i++)
            for (int64_t kk = 0; kk < k; kk++) acopy[i * k + kk] = a[i * sam + kk * sak];
        arows = acopy;
        lda = k;
    }
    float *packed = sv_thread_scratch(SV_SCRATCH_GEMM_B, sv_pack_b_floats(k, n) * sizeof(float));
    if (!packed) goto fallback;
    sv_packed_b pb;
    sv_pack_b_into(&pb, packed, b, k, n, sbk, sbn);
    sv_dense(m, arows, lda, &pb, c, ldc, ep, threads);
    return;
fallback:
    /* no memory for the packed copies: the plain triple loop, then the epilogue */
    for (int64_t i = 0; i < m; i++)
        for (int64_t jj = 0; jj < n; jj++) {
            float s = 0.0f;
            for (int64_t kk = 0; kk < k; kk++) s += a[i * sam + kk * sak] * b[kk * sbk + jj * sbn];
            c[i * ldc + jj] = s;
        }
    if (ep) sv_isa()->act_rows(c, m, n, ldc, ep);
}
