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

/* A finished tile (rows of 16 floats) through the epilogue into C; out of line, so that
 * the k loops stay small. */
__attribute__((noinline)) static void SV_FN(epilogue_tile)(const float *tile, int mr, int nc,
                                                          float *c, int64_t ldc,
                                                          bool accumulate,
                                                          const sv_epilogue *ep, int64_t row0,
                                                          int64_t col0) {
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < SV_NV; j++)
            tile_epilogue_store(vload(tile + i * SV_NR + SV_VW * j), c + i * ldc + SV_VW * j,
                                lanes_at(nc, j), accumulate, ep != NULL, ep, row0 + i,
                                col0 + SV_VW * j);
}

SV_INLINE void ukr_rows(const int MR, int nc, int64_t kc, const float *a, int64_t lda,
                        const float *bp, float *c, int64_t ldc, bool accumulate, bool last,
                        const sv_epilogue *ep, int64_t row0, int64_t col0) {
    vf acc[SV_MR][SV_NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < SV_NV; j++) acc[i][j] = vsplat(0.0f);
    for (int64_t k = 0; k < kc; k++) {
        vf b[SV_NV];
#pragma GCC unroll 4
        for (int j = 0; j < SV_NV; j++) b[j] = vload(bp + SV_NR * k + SV_VW * j);
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            vf av = vsplat(a[i * lda + k]);
#pragma GCC unroll 4
            for (int j = 0; j < SV_NV; j++) acc[i][j] = vfma(av, b[j], acc[i][j]);
        }
    }
    if (last && ep && (ep->act || ep->bias || ep->residual || ep->alpha != 1.0f)) {
        float tile[SV_MR * SV_NR];
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
            for (int j = 0; j < SV_NV; j++) vstore(tile + i * SV_NR + SV_VW * j, acc[i][j]);
        SV_FN(epilogue_tile)(tile, MR, nc, c, ldc, accumulate, ep, row0, col0);
        return;
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < SV_NV; j++)
            tile_store(acc[i][j], c + i * ldc + SV_VW * j, lanes_at(nc, j), accumulate);
}

/* One row: four partial sums over k (k, k+1, k+2, k+3), added at the end. */
SV_INLINE void ukr_row1(int nc, int64_t kc, const float *a, const float *bp, float *c,
                        bool accumulate, bool last, const sv_epilogue *ep, int64_t row0,
                        int64_t col0) {
    vf acc[4][SV_NV];
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++)
#pragma GCC unroll 4
        for (int j = 0; j < SV_NV; j++) acc[u][j] = vsplat(0.0f);
    int64_t k = 0;
    for (; k + 4 <= kc; k += 4) {
#pragma GCC unroll 4
        for (int u = 0; u < 4; u++) {
            vf av = vsplat(a[k + u]);
#pragma GCC unroll 4
            for (int j = 0; j < SV_NV; j++)
                acc[u][j] = vfma(av, vload(bp + SV_NR * (k + u) + SV_VW * j), acc[u][j]);
        }
    }
    for (; k < kc; k++) {
        vf av = vsplat(a[k]);
#pragma GCC unroll 4
        for (int j = 0; j < SV_NV; j++)
            acc[0][j] = vfma(av, vload(bp + SV_NR * k + SV_VW * j), acc[0][j]);
    }
    float tile[SV_NR];
#pragma GCC unroll 4
    for (int j = 0; j < SV_NV; j++)
        vstore(tile + SV_VW * j, (acc[0][j] + acc[1][j]) + (acc[2][j] + acc[3][j]));
    SV_FN(epilogue_tile)(tile, 1, nc, c, 0, accumulate, last ? ep : NULL, row0, col0);
}

static void SV_FN(ukr)(int mr, int nc, int64_t kc, const float *a, int64_t lda,
                       const float *bp, float *c, int64_t ldc, bool accumulate, bool last,
                       const sv_epilogue *ep, int64_t row0, int64_t col0) {
    SV_ASSERT(mr >= 1 && mr <= SV_MR && nc >= 1 && nc <= SV_NR && kc >= 0);
    switch (mr) {
    case 1: ukr_row1(nc, kc, a, bp, c, accumulate, last, ep, row0, col0); break;
#define SV_UKR_CASE(R)                                                                     \
    case R: ukr_rows(R, nc, kc, a, lda, bp, c, ldc, accumulate, last, ep, row0, col0); break;
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

/* The epilogue alone, over rows of a matrix in place (bias + activation + residual). */
static void SV_FN(act_rows)(float *x, int64_t rows, int64_t cols, int64_t ld,
                            const sv_epilogue *ep) {
    for (int64_t r = 0; r < rows; r++) {
        float *row = x + r * ld;
        for (int64_t c0 = 0; c0 < cols; c0 += SV_VW) {
            int lanes = cols - c0 >= SV_VW ? SV_VW : (int)(cols - c0);
            vf v = ld_cols(row + c0, lanes);
            tile_epilogue_store(v, row + c0, lanes, false, true, ep, r, c0);
        }
    }
}
