/* The GEMM micro-kernel for one instruction set (included by isa_<level>.c).
 *
 * A tile is MR rows x 16 columns of C held in MR * 16/SV_VW vector accumulators for the whole
 * k loop: each step loads 16 floats of the packed panel and broadcasts MR scalars of A (rows
 * lda apart).  Few rows (one row: matrix-vector) take several panels at once instead, so that
 * the loop is not bound by the latency of one chain of FMAs; and where a panel row is one
 * vector (AVX-512), 8-12 rows take two panels (ukr_rows2), so that each broadcast of A feeds
 * two FMAs.  The epilogue runs on the accumulators before the store.
 *
 * Every element of C is one chain of FMAs over k in order, started from 0 (or from what C
 * holds, for the k chunks after the first), whatever the tile's row count, the number of
 * panels per call or the k chunk: a row's result does not depend on how many rows the call
 * has (a server may join requests along the rows and give each its bits back).
 */
#include "vmath.h"

#define SV_NV (SV_NR / SV_VW)
/* Panels per step for a tile of R rows (see SV_UKR_PANELS). */
#define SV_WP(R) SV_UKR_PANELS(R, SV_NV)
#define SV_ACC(u, i, j) acc[((u) * MR + (i)) * SV_NV + (j)]
#ifndef SV_PF_K
#define SV_PF_K 32 /* prefetch distance in k steps (64 bytes each) for rows that stream B */
#endif

/* The columns [col, col + 16) past n are masked: loads and stores of partial vectors. */
SV_INLINE int lanes_at(int nc, int j) {
    int left = nc - j * SV_VW;
    return left >= SV_VW ? SV_VW : (left > 0 ? left : 0);
}

SV_INLINE vf ld_cols(const float *p, int lanes) {
    return lanes == SV_VW ? vload(p) : vload_part(p, lanes, 0.0f);
}

/* The residual into a finished vector: added, or multiplied (a gated linear unit). */
SV_INLINE vf res_combine(vf v, vf r, const sv_epilogue *ep) { return ep->res_mul ? v * r : v + r; }

/* The epilogue over a finished tile (a copy the caller may overwrite) for one activation, a
 * constant after inlining.  Three passes: scale and bias; the activation over
 * the whole tile in one tight loop (its vectors are independent, so their long chains of
 * dependent operations overlap: within the row loop they did not); residual and store. */
SV_INLINE void epilogue_rows(const int ACT, float *tile, int mr, int nc, float *c,
                             int64_t ldc, const sv_epilogue *ep, int64_t row0,
                             int64_t col0) {
    vf bias[SV_NV];
    const bool has_bias = ep->bias != NULL, scale = ep->alpha != 1.0f;
    const vf alpha = vsplat(ep->alpha);
    for (int j = 0; j < SV_NV; j++)
        bias[j] = has_bias ? ld_cols(ep->bias + col0 + SV_VW * j, lanes_at(nc, j)) : vsplat(0);
    if (scale || has_bias)
        for (int i = 0; i < mr; i++)
            for (int j = 0; j < SV_NV; j++) {
                float *tp = tile + i * SV_NR + SV_VW * j;
                vf v = vload(tp);
                if (scale) v *= alpha;
                if (has_bias) v += bias[j];
                vstore(tp, v);
            }
    if (ACT != SV_ACT_NONE)
        for (int v = 0; v < mr * SV_NV; v++)
            vstore(tile + SV_VW * v, vact(vload(tile + SV_VW * v), ACT, ep->slope));
    const float *res = ep->residual ? ep->residual + row0 * ep->ldr + col0 : NULL;
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < SV_NV; j++) {
            int lanes = lanes_at(nc, j);
            if (lanes == 0) continue;
            vf v = vload(tile + i * SV_NR + SV_VW * j);
            if (res) v = res_combine(v, ld_cols(res + i * ep->ldr + SV_VW * j, lanes), ep);
            if (lanes == SV_VW)
                vstore(c + i * ldc + SV_VW * j, v);
            else
                vstore_part(c + i * ldc + SV_VW * j, v, lanes);
        }
}

/* A finished tile (rows of 16 floats, overwritten) through the epilogue into C; out of
 * line, so that the k loops stay small. */
__attribute__((noinline)) static void SV_FN(epilogue_tile)(float *tile, int mr, int nc,
                                                          float *c, int64_t ldc,
                                                          const sv_epilogue *ep, int64_t row0,
                                                          int64_t col0) {
    switch (ep->act) {
#define SV_EPI_CASE(A)                                                                     \
    case A: epilogue_rows(A, tile, mr, nc, c, ldc, ep, row0, col0); break;
    SV_EPI_CASE(SV_ACT_RELU)
    SV_EPI_CASE(SV_ACT_GELU_TANH)
    SV_EPI_CASE(SV_ACT_GELU_ERF)
    SV_EPI_CASE(SV_ACT_SILU)
    SV_EPI_CASE(SV_ACT_SIGMOID)
    SV_EPI_CASE(SV_ACT_TANH)
    SV_EPI_CASE(SV_ACT_HARD_SWISH)
    SV_EPI_CASE(SV_ACT_LEAKY_RELU)
    SV_EPI_CASE(SV_ACT_RELU6)
    default: epilogue_rows(SV_ACT_NONE, tile, mr, nc, c, ldc, ep, row0, col0);
#undef SV_EPI_CASE
    }
}

/* One panel's finished accumulators (C's k chunks before included) into C: scale, bias,
 * relu and residual on the registers, a long activation out of line. */
SV_INLINE void tile_finish(const vf *acc, const int MR, int nc, float *c, int64_t ldc,
                           bool last, const sv_epilogue *ep, int64_t row0, int64_t col0) {
    if (last && ep && ep->act != SV_ACT_NONE && ep->act != SV_ACT_RELU) {
        /* a long activation: out of line, over the whole tile at once */
        float tile[SV_MR * SV_NR];
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
            for (int j = 0; j < SV_NV; j++) vstore(tile + i * SV_NR + SV_VW * j, SV_ACC(0, i, j));
        SV_FN(epilogue_tile)(tile, MR, nc, c, ldc, ep, row0, col0);
        return;
    }
    /* scale, bias, relu and residual on the registers, then the store */
    const sv_epilogue *e = last ? ep : NULL;
    if (nc == SV_NR && !(e && e->residual)) {
        /* the common case, without a branch per vector: a full tile */
        const bool affine = e && (e->alpha != 1.0f || e->bias), relu = e && e->act;
        vf mul = vsplat(affine ? e->alpha : 1.0f), add[SV_NV];
#pragma GCC unroll 4
        for (int j = 0; j < SV_NV; j++) /* -0.0: x + (-0.0) == x, signed zeros included */
            add[j] = affine && e->bias ? vload(e->bias + col0 + SV_VW * j) : vsplat(-0.0f);
        if (!affine && !relu) {
#pragma GCC unroll 16
            for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
                for (int j = 0; j < SV_NV; j++) vstore(c + i * ldc + SV_VW * j, SV_ACC(0, i, j));
        } else if (!relu) {
#pragma GCC unroll 16
            for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
                for (int j = 0; j < SV_NV; j++)
                    vstore(c + i * ldc + SV_VW * j, vfma(SV_ACC(0, i, j), mul, add[j]));
        } else {
#pragma GCC unroll 16
            for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
                for (int j = 0; j < SV_NV; j++)
                    vstore(c + i * ldc + SV_VW * j, vrelu(vfma(SV_ACC(0, i, j), mul, add[j])));
        }
        return;
    }
    const bool scale = e && e->alpha != 1.0f, relu = e && e->act == SV_ACT_RELU;
    const vf alpha = vsplat(e ? e->alpha : 1.0f);
    const float *res = e && e->residual ? e->residual + row0 * e->ldr + col0 : NULL;
    vf bias[SV_NV];
#pragma GCC unroll 4
    for (int j = 0; j < SV_NV; j++)
        bias[j] = e && e->bias ? ld_cols(e->bias + col0 + SV_VW * j, lanes_at(nc, j)) : vsplat(0);
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < SV_NV; j++) {
            int lanes = lanes_at(nc, j);
            if (lanes == 0) continue;
            float *cp = c + i * ldc + SV_VW * j;
            vf v = SV_ACC(0, i, j);
            if (scale) v *= alpha;
            if (e && e->bias) v += bias[j];
            if (relu) v = vrelu(v);
            if (res) v = res_combine(v, ld_cols(res + i * e->ldr + SV_VW * j, lanes), e);
            if (lanes == SV_VW)
                vstore(cp, v);
            else
                vstore_part(cp, v, lanes);
        }
}


/* MR rows x P panels (pstride floats apart; nc <= 16 P columns, only the last panel partial).
 * P panels at a time: with few rows, MR * 16/SV_VW accumulators are too few to hide the
 * latency of the FMAs (P * MR * SV_NV >= 8 chains), and more panels keep each element one
 * chain over k.  accumulate: C holds the sum of the k chunks before (the chains go on from
 * it).  PF: prefetch the panels a few cache lines ahead (few rows read each panel once,
 * from L3 or memory: the loop is bound by that stream). */
SV_INLINE void ukr_rows(vf *acc, const int MR, const int P, const bool PF, int nc, int64_t kc,
                        const float *a, int64_t lda, const float *bp, int64_t pstride,
                        float *c, int64_t ldc, bool accumulate, bool last,
                        const sv_epilogue *ep, int64_t row0, int64_t col0) {
#pragma GCC unroll 8
    for (int u = 0; u < P; u++)
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
            for (int j = 0; j < SV_NV; j++) SV_ACC(u, i, j) = vsplat(0.0f);
    if (accumulate)
#pragma GCC unroll 8
        for (int u = 0; u < P; u++)
#pragma GCC unroll 16
            for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
                for (int j = 0; j < SV_NV; j++)
                    SV_ACC(u, i, j) = ld_cols(c + i * ldc + SV_NR * u + SV_VW * j,
                                              lanes_at(nc - SV_NR * u, j));
    /* pointers stepped per iteration: index arithmetic (with -fwrapv, which Python's
     * build flags add) cost the 12-accumulator loop registers */
    const float *ak = a, *bk = bp;
    for (int64_t n = kc; n > 0; n--, ak++, bk += SV_NR) {
#pragma GCC unroll 8
        for (int u = 0; u < P; u++) {
            const float *bu = bk + u * pstride;
            if (PF) __builtin_prefetch(bu + SV_NR * SV_PF_K, 0, 3);
            vf b[SV_NV];
#pragma GCC unroll 4
            for (int j = 0; j < SV_NV; j++) b[j] = vload(bu + SV_VW * j);
            /* one broadcast of A live at a time: the 12-accumulator tile has no register
             * left for more */
#pragma GCC unroll 16
            for (int i = 0; i < MR; i++) {
                vf av = vsplat(ak[i * lda]);
#pragma GCC unroll 4
                for (int j = 0; j < SV_NV; j++) SV_ACC(u, i, j) = vfma(av, b[j], SV_ACC(u, i, j));
            }
        }
    }
#pragma GCC unroll 8
    for (int u = 0; u < P; u++) {
        int ncu = nc - SV_NR * u < SV_NR ? nc - SV_NR * u : SV_NR;
        tile_finish(acc + u * MR * SV_NV, MR, ncu, c + SV_NR * u, ldc, last, ep, row0,
                    col0 + SV_NR * u);
    }
}

#if SV_NV == 1
/* Two panels of MR >= 2 rows where a panel row is one vector (AVX-512): each broadcast of
 * A feeds both panels' multiply-adds, so that the loads (MR broadcasts and a row of each
 * panel per k) no longer outnumber them, as they did at one panel (13 loads per 12).
 * Two arrays of accumulators, not one of 2 MR: GCC kept the single array of 24 in memory.
 * The chains over k are those of ukr_rows, element by element. */
SV_INLINE void ukr_rows2(const int MR, int nc, int64_t kc, const float *a, int64_t lda,
                         const float *bp, int64_t pstride, float *c, int64_t ldc,
                         bool accumulate, bool last, const sv_epilogue *ep, int64_t row0,
                         int64_t col0) {
    vf acc0[SV_MR], acc1[SV_MR];
    const int nc1 = nc - SV_NR; /* columns of the second panel, 1..16 */
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
        acc0[i] = accumulate ? vload(c + i * ldc) : vsplat(0.0f);
        acc1[i] = accumulate ? ld_cols(c + i * ldc + SV_NR, nc1) : vsplat(0.0f);
    }
    const float *ak = a, *bk = bp;
    for (int64_t n = kc; n > 0; n--, ak++, bk += SV_NR) {
        vf b0 = vload(bk), b1 = vload(bk + pstride);
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            vf av = vsplat(ak[i * lda]);
            acc0[i] = vfma(av, b0, acc0[i]);
            acc1[i] = vfma(av, b1, acc1[i]);
        }
    }
    tile_finish(acc0, MR, SV_NR, c, ldc, last, ep, row0, col0);
    tile_finish(acc1, MR, nc1, c + SV_NR, ldc, last, ep, row0, col0 + SV_NR);
}
#define SV_ROWS2(R, P) (SV_NV == 1 && (P) == 2 && (R) >= 2)
#else
#define SV_ROWS2(R, P) 0
#define ukr_rows2(...) ((void)0)
#endif

/* One function per row count (and panel count), each with exactly the accumulators it uses:
 * compiled together in one function, the register allocator spilled those of the larger
 * tiles.  ukr_rowsR takes any number of panels: SV_WP(R) at a time, the rest one by one. */
#define SV_UKR_ROWS_P(R, P, NAME)                                                          \
    __attribute__((noinline)) static void SV_CAT(NAME, SV_ISA_NAME)(                       \
        int nc, int64_t kc, const float *a, int64_t lda, const float *bp, int64_t pstride, \
        float *c, int64_t ldc, bool accumulate, bool last, const sv_epilogue *ep,          \
        int64_t row0, int64_t col0) {                                                      \
        if (SV_ROWS2(R, P)) {                                                              \
            ukr_rows2(R, nc, kc, a, lda, bp, pstride, c, ldc, accumulate, last, ep, row0,  \
                      col0);                                                               \
            return;                                                                        \
        }                                                                                  \
        vf acc[(P) * (R) * SV_NV];                                                         \
        ukr_rows(acc, R, P, (R) <= 3, nc, kc, a, lda, bp, pstride, c, ldc, accumulate,     \
                 last, ep, row0, col0);                                                    \
    }
#define SV_UKR_ROWS(R)                                                                     \
    SV_UKR_ROWS_P(R, SV_WP(R), ukr_wide##R)                                                \
    SV_UKR_ROWS_P(R, 1, ukr_one##R)                                                        \
    static void SV_CAT(ukr_rows##R, SV_ISA_NAME)(                                          \
        int nc, int64_t kc, const float *a, int64_t lda, const float *bp, int64_t pstride, \
        float *c, int64_t ldc, bool accumulate, bool last, const sv_epilogue *ep,          \
        int64_t row0, int64_t col0) {                                                      \
        int np = (nc + SV_NR - 1) / SV_NR, q = 0;                                          \
        if (SV_WP(R) > 1)                                                                  \
            for (; q + SV_WP(R) <= np; q += SV_WP(R)) {                                    \
                int left = nc - SV_NR * q;                                                 \
                SV_CAT(ukr_wide##R, SV_ISA_NAME)(                                          \
                    left < SV_NR * SV_WP(R) ? left : SV_NR * SV_WP(R), kc, a, lda,         \
                    bp + q * pstride, pstride, c + SV_NR * q, ldc, accumulate, last, ep,   \
                    row0, col0 + SV_NR * q);                                               \
            }                                                                              \
        for (; q < np; q++) {                                                              \
            int left = nc - SV_NR * q;                                                     \
            SV_CAT(ukr_one##R, SV_ISA_NAME)(left < SV_NR ? left : SV_NR, kc, a, lda,       \
                                            bp + q * pstride, pstride, c + SV_NR * q, ldc, \
                                            accumulate, last, ep, row0, col0 + SV_NR * q); \
        }                                                                                  \
    }

SV_UKR_ROWS(1)
SV_UKR_ROWS(2)
SV_UKR_ROWS(3)
#if SV_MR > 3
SV_UKR_ROWS(4)
SV_UKR_ROWS(5)
SV_UKR_ROWS(6)
#endif
#if SV_MR > 6
SV_UKR_ROWS(7)
SV_UKR_ROWS(8)
SV_UKR_ROWS(9)
SV_UKR_ROWS(10)
SV_UKR_ROWS(11)
SV_UKR_ROWS(12)
#endif
#undef SV_UKR_ROWS
#undef SV_UKR_ROWS_P

static void SV_FN(ukr)(int mr, int nc, int64_t kc, const float *a, int64_t lda,
                       const float *bp, int64_t pstride, float *c, int64_t ldc,
                       bool accumulate, bool last, const sv_epilogue *ep, int64_t row0,
                       int64_t col0) {
    SV_ASSERT(mr >= 1 && mr <= SV_MR && nc >= 1 && kc >= 0);
    SV_ASSERT(nc <= SV_NR || pstride >= kc * SV_NR);
    switch (mr) {
#define SV_UKR_CASE(R)                                                                     \
    case R:                                                                                \
        SV_CAT(ukr_rows##R, SV_ISA_NAME)(nc, kc, a, lda, bp, pstride, c, ldc, accumulate,  \
                                          last, ep, row0, col0);                           \
        break;
    SV_UKR_CASE(1)
    SV_UKR_CASE(2)
    SV_UKR_CASE(3)
#if SV_MR > 3
    SV_UKR_CASE(4)
    SV_UKR_CASE(5)
    SV_UKR_CASE(6)
#endif
#if SV_MR > 6
    SV_UKR_CASE(7)
    SV_UKR_CASE(8)
    SV_UKR_CASE(9)
    SV_UKR_CASE(10)
    SV_UKR_CASE(11)
    SV_UKR_CASE(12)
#endif
#undef SV_UKR_CASE
    default: break;
    }
}

/* The epilogue alone, over rows of a matrix in place (scale, bias, activation, residual),
 * for one activation: a loop whose vectors are independent, so that the long chains of an
 * activation overlap; its other conditions are the same for every vector. */
SV_INLINE void act_rows_for(const int ACT, float *x, int64_t rows, int64_t cols, int64_t ld,
                            const sv_epilogue *ep) {
    const bool scale = ep->alpha != 1.0f;
    const vf alpha = vsplat(ep->alpha);
    if (!ep->bias && !ep->residual && ld == cols) { /* rows end to end: one long row (8
                                                      * columns were half a vector a row,
                                                      * tanh 5x slower than at 16) */
        cols *= rows;
        rows = 1;
    }
    for (int64_t r = 0; r < rows; r++) {
        float *row = x + r * ld;
        const float *res = ep->residual ? ep->residual + r * ep->ldr : NULL;
        int64_t c0 = 0;
        for (; c0 + SV_VW <= cols; c0 += SV_VW) {
            vf v = vload(row + c0);
            if (scale) v *= alpha;
            if (ep->bias) v += vload(ep->bias + c0);
            v = vact(v, ACT, ep->slope);
            if (res) v = res_combine(v, vload(res + c0), ep);
            vstore(row + c0, v);
        }
        if (c0 < cols) {
            int lanes = (int)(cols - c0);
            vf v = ld_cols(row + c0, lanes);
            if (scale) v *= alpha;
            if (ep->bias) v += ld_cols(ep->bias + c0, lanes);
            v = vact(v, ACT, ep->slope);
            if (res) v = res_combine(v, ld_cols(res + c0, lanes), ep);
            vstore_part(row + c0, v, lanes);
        }
    }
}

static void SV_FN(act_rows)(float *x, int64_t rows, int64_t cols, int64_t ld,
                            const sv_epilogue *ep) {
    switch (ep->act) {
#define SV_ACT_CASE(A)                                                                     \
    case A: act_rows_for(A, x, rows, cols, ld, ep); break;
    SV_ACT_CASE(SV_ACT_RELU)
    SV_ACT_CASE(SV_ACT_GELU_TANH)
    SV_ACT_CASE(SV_ACT_GELU_ERF)
    SV_ACT_CASE(SV_ACT_SILU)
    SV_ACT_CASE(SV_ACT_SIGMOID)
    SV_ACT_CASE(SV_ACT_TANH)
    SV_ACT_CASE(SV_ACT_HARD_SWISH)
    SV_ACT_CASE(SV_ACT_LEAKY_RELU)
    SV_ACT_CASE(SV_ACT_RELU6)
#undef SV_ACT_CASE
    default: act_rows_for(SV_ACT_NONE, x, rows, cols, ld, ep);
    }
}
