/* The GEMM micro-kernel for one instruction set (included by isa_<level>.c).
 *
 * A tile is MR rows x 16 columns of C held in MR * 16/SV_VW vector accumulators for the whole
 * k loop: each step loads 16 floats of the packed panel and broadcasts MR scalars of A (rows
 * lda apart).  One row (matrix-vector) keeps four accumulator sets over k instead, so that
 * the loop is not bound by the latency of one chain of FMAs.  The epilogue runs on the
 * accumulators before the store.
 */
#include "vmath.h"

#define SV_NV (SV_NR / SV_VW)
/* Partial sums over k for a tile of R rows: enough for 8 independent chains of FMAs. */
#define SV_KS(R) ((R) * SV_NV >= 8 ? 1 : (8 + (R) * SV_NV - 1) / ((R) * SV_NV))
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

SV_INLINE void tile_epilogue_store(vf v, float *c, int lanes, bool accumulate, bool last,
                                   const sv_epilogue *ep, int64_t row, int64_t col) {
    if (lanes == 0) return;
    if (accumulate) v += ld_cols(c, lanes);
    if (last && ep) {
        if (ep->alpha != 1.0f) v *= vsplat(ep->alpha);
        if (ep->bias) v += ld_cols(ep->bias + col, lanes);
        if (ep->act) v = vact(v, ep->act);
        if (ep->residual) v += ld_cols(ep->residual + row * ep->ldr + col, lanes);
    }
    if (lanes == SV_VW)
        vstore(c, v);
    else
        vstore_part(c, v, lanes);
}

SV_INLINE void tile_store(vf v, float *c, int lanes, bool accumulate) {
    if (lanes == 0) return;
    if (accumulate) v += ld_cols(c, lanes);
    if (lanes == SV_VW)
        vstore(c, v);
    else
        vstore_part(c, v, lanes);
}

/* The epilogue over a finished tile (a copy the caller may overwrite) for one activation, a
 * constant after inlining.  Three passes: scale, bias and what C held; the activation over
 * the whole tile in one tight loop (its vectors are independent, so their long chains of
 * dependent operations overlap: within the row loop they did not); residual and store. */
SV_INLINE void epilogue_rows(const int ACT, float *tile, int mr, int nc, float *c,
                             int64_t ldc, bool accumulate, const sv_epilogue *ep,
                             int64_t row0, int64_t col0) {
    vf bias[SV_NV];
    const bool has_bias = ep->bias != NULL, scale = ep->alpha != 1.0f;
    const vf alpha = vsplat(ep->alpha);
    for (int j = 0; j < SV_NV; j++)
        bias[j] = has_bias ? ld_cols(ep->bias + col0 + SV_VW * j, lanes_at(nc, j)) : vsplat(0);
    if (accumulate || scale || has_bias)
        for (int i = 0; i < mr; i++)
            for (int j = 0; j < SV_NV; j++) {
                float *tp = tile + i * SV_NR + SV_VW * j;
                vf v = vload(tp);
                if (accumulate) v += ld_cols(c + i * ldc + SV_VW * j, lanes_at(nc, j));
                if (scale) v *= alpha;
                if (has_bias) v += bias[j];
                vstore(tp, v);
            }
    if (ACT != SV_ACT_NONE)
        for (int v = 0; v < mr * SV_NV; v++)
            vstore(tile + SV_VW * v, vact(vload(tile + SV_VW * v), ACT));
    const float *res = ep->residual ? ep->residual + row0 * ep->ldr + col0 : NULL;
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < SV_NV; j++) {
            int lanes = lanes_at(nc, j);
            if (lanes == 0) continue;
            vf v = vload(tile + i * SV_NR + SV_VW * j);
            if (res) v += ld_cols(res + i * ep->ldr + SV_VW * j, lanes);
            if (lanes == SV_VW)
                vstore(c + i * ldc + SV_VW * j, v);
            else
                vstore_part(c + i * ldc + SV_VW * j, v, lanes);
        }
}

/* A finished tile (rows of 16 floats, overwritten) through the epilogue into C (or only
 * stored, when ep is NULL); out of line, so that the k loops stay small. */
__attribute__((noinline)) static void SV_FN(epilogue_tile)(float *tile, int mr, int nc,
                                                          float *c, int64_t ldc,
                                                          bool accumulate,
                                                          const sv_epilogue *ep, int64_t row0,
                                                          int64_t col0) {
    if (!ep) {
        for (int i = 0; i < mr; i++)
            for (int j = 0; j < SV_NV; j++)
                tile_store(vload(tile + i * SV_NR + SV_VW * j), c + i * ldc + SV_VW * j,
                           lanes_at(nc, j), accumulate);
        return;
    }
    switch (ep->act) {
#define SV_EPI_CASE(A)                                                                     \
    case A: epilogue_rows(A, tile, mr, nc, c, ldc, accumulate, ep, row0, col0); break;
    SV_EPI_CASE(SV_ACT_RELU)
    SV_EPI_CASE(SV_ACT_GELU_TANH)
    SV_EPI_CASE(SV_ACT_GELU_ERF)
    SV_EPI_CASE(SV_ACT_SILU)
    SV_EPI_CASE(SV_ACT_SIGMOID)
    SV_EPI_CASE(SV_ACT_TANH)
    default: epilogue_rows(SV_ACT_NONE, tile, mr, nc, c, ldc, accumulate, ep, row0, col0);
#undef SV_EPI_CASE
    }
}

/* MR rows, KS partial sums over k (k mod KS) added at the end: with few rows, MR * 16/SV_VW
 * accumulators are too few to hide the latency of the FMAs, so KS sets of them take turns
 * (KS * MR * SV_NV >= 8 chains).  PF: prefetch the panel a few cache lines ahead (few
 * rows read each panel once, from L3 or memory: the loop is bound by that stream). */
SV_INLINE void ukr_rows(vf *acc, const int MR, const int KS, const bool PF, int nc, int64_t kc,
                        const float *a, int64_t lda, const float *bp, float *c, int64_t ldc,
                        bool accumulate, bool last, const sv_epilogue *ep, int64_t row0,
                        int64_t col0) {
#pragma GCC unroll 8
    for (int u = 0; u < KS; u++)
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
            for (int j = 0; j < SV_NV; j++) SV_ACC(u, i, j) = vsplat(0.0f);
    /* pointers stepped per iteration: index arithmetic (with -fwrapv, which Python's
     * build flags add) cost the 12-accumulator loop registers */
    const float *ak = a, *bk = bp;
    for (int64_t n = kc / KS; n > 0; n--, ak += KS, bk += KS * SV_NR) {
#pragma GCC unroll 8
        for (int u = 0; u < KS; u++) {
            if (PF) __builtin_prefetch(bk + SV_NR * (u + SV_PF_K), 0, 3);
            vf b[SV_NV];
#pragma GCC unroll 4
            for (int j = 0; j < SV_NV; j++) b[j] = vload(bk + SV_NR * u + SV_VW * j);
#pragma GCC unroll 16
            for (int i = 0; i < MR; i++) {
                vf av = vsplat(ak[i * lda + u]);
#pragma GCC unroll 4
                for (int j = 0; j < SV_NV; j++) SV_ACC(u, i, j) = vfma(av, b[j], SV_ACC(u, i, j));
            }
        }
    }
    if (KS > 1) { /* (without code for one set: it costs the 12 x 16 loop its registers) */
        for (int64_t n = kc % KS; n > 0; n--, ak++, bk += SV_NR) {
            vf b[SV_NV];
#pragma GCC unroll 4
            for (int j = 0; j < SV_NV; j++) b[j] = vload(bk + SV_VW * j);
#pragma GCC unroll 16
            for (int i = 0; i < MR; i++) {
                vf av = vsplat(ak[i * lda]);
#pragma GCC unroll 4
                for (int j = 0; j < SV_NV; j++) SV_ACC(0, i, j) = vfma(av, b[j], SV_ACC(0, i, j));
            }
        }
#pragma GCC unroll 8
        for (int u = 1; u < KS; u++)
#pragma GCC unroll 16
            for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
                for (int j = 0; j < SV_NV; j++) SV_ACC(0, i, j) += SV_ACC(u, i, j);
    }
    if (last && ep && ep->act != SV_ACT_NONE && ep->act != SV_ACT_RELU) {
        /* a long activation: out of line, over the whole tile at once */
        float tile[SV_MR * SV_NR];
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
            for (int j = 0; j < SV_NV; j++) vstore(tile + i * SV_NR + SV_VW * j, SV_ACC(0, i, j));
        SV_FN(epilogue_tile)(tile, MR, nc, c, ldc, accumulate, ep, row0, col0);
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
        if (accumulate)
#pragma GCC unroll 16
            for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
                for (int j = 0; j < SV_NV; j++) SV_ACC(0, i, j) += vload(c + i * ldc + SV_VW * j);
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
            if (accumulate) v += ld_cols(cp, lanes);
            if (scale) v *= alpha;
            if (e && e->bias) v += bias[j];
            if (relu) v = vrelu(v);
            if (res) v += ld_cols(res + i * e->ldr + SV_VW * j, lanes);
            if (lanes == SV_VW)
                vstore(cp, v);
            else
                vstore_part(cp, v, lanes);
        }
}

/* One function per row count, each with exactly the accumulators it uses: compiled
 * together in one function, the register allocator spilled those of the larger tiles. */
#define SV_UKR_ROWS(R)                                                                     \
    __attribute__((noinline)) static void SV_CAT(ukr_rows##R, SV_ISA_NAME)(                \
        int nc, int64_t kc, const float *a, int64_t lda, const float *bp, float *c,        \
        int64_t ldc, bool accumulate, bool last, const sv_epilogue *ep, int64_t row0,      \
        int64_t col0) {                                                                    \
        vf acc[SV_KS(R) * (R) * SV_NV];                                                    \
        ukr_rows(acc, R, SV_KS(R), (R) <= 3, nc, kc, a, lda, bp, c, ldc, accumulate, last, \
                 ep, row0, col0);                                                          \
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

static void SV_FN(ukr)(int mr, int nc, int64_t kc, const float *a, int64_t lda,
                       const float *bp, float *c, int64_t ldc, bool accumulate, bool last,
                       const sv_epilogue *ep, int64_t row0, int64_t col0) {
    SV_ASSERT(mr >= 1 && mr <= SV_MR && nc >= 1 && nc <= SV_NR && kc >= 0);
    switch (mr) {
#define SV_UKR_CASE(R)                                                                     \
    case R:                                                                                \
        SV_CAT(ukr_rows##R, SV_ISA_NAME)(nc, kc, a, lda, bp, c, ldc, accumulate, last, ep, \
                                          row0, col0);                                     \
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
    for (int64_t r = 0; r < rows; r++) {
        float *row = x + r * ld;
        const float *res = ep->residual ? ep->residual + r * ep->ldr : NULL;
        int64_t c0 = 0;
        for (; c0 + SV_VW <= cols; c0 += SV_VW) {
            vf v = vload(row + c0);
            if (scale) v *= alpha;
            if (ep->bias) v += vload(ep->bias + c0);
            v = vact(v, ACT);
            if (res) v += vload(res + c0);
            vstore(row + c0, v);
        }
        if (c0 < cols) {
            int lanes = (int)(cols - c0);
            vf v = ld_cols(row + c0, lanes);
            if (scale) v *= alpha;
            if (ep->bias) v += ld_cols(ep->bias + c0, lanes);
            v = vact(v, ACT);
            if (res) v += ld_cols(res + c0, lanes);
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
#undef SV_ACT_CASE
    default: act_rows_for(SV_ACT_NONE, x, rows, cols, ld, ep);
    }
}
