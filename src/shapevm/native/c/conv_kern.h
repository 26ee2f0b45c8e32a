/* Convolution kernels for one instruction set (included by isa_template.h after
 * gemm_kern.h).
 *
 * A tile is MR output pixels x 16 output channels, as the GEMM micro-kernel's, held in
 * vector accumulators for the whole reduction.  A convolution is an indirect GEMM: the
 * reduction runs over segments (one input channel block at one kernel tap, or a whole
 * kernel row where a row's taps and channels lie contiguous), and row i of segment s is
 * the kc floats at pix[i] + segoff[s].  The pixel pointers are computed once per tile and
 * the segment offsets once per call, so stride, dilation and the position of a tile
 * across output rows cost nothing in the loop.  Depthwise convolutions multiply the 16
 * channels lane by lane instead.
 */

/* After the bias: the residual at r (NULL: none) before the activation where
 * ep->res_first (a ResNet block's end), after it otherwise. */
SV_INLINE vf conv_act_residual(vf v, const float *r, const sv_epilogue *ep) {
    if (r && ep->res_first) v += vload(r);
    if (ep->act) v = vact(v, ep->act, ep->slope);
    if (r && !ep->res_first) v += vload(r);
    return v;
}

/* The finished tile (rows of 16 floats) through bias, activation and residual into C;
 * lanes past nc become zero (the blocked layout's padding channels).  Out of line, so
 * that the reduction loops stay small. */
__attribute__((noinline)) static void SV_FN(conv_epilogue)(const float *tile, int mr, float *c,
                                                          int64_t ldc, const sv_epilogue *ep,
                                                          int64_t row0, int nc) {
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < SV_NV; j++) {
            vf v = vload(tile + i * SV_NR + SV_VW * j);
            if (ep) {
                const float *r = ep->residual ? ep->residual + (row0 + i) * ep->ldr : NULL;
                if (ep->bias) v += vload(ep->bias + SV_VW * j);
                v = conv_act_residual(v, r ? r + SV_VW * j : NULL, ep);
            }
            int lanes = lanes_at(nc, j);
            if (lanes < SV_VW) v = vsel(vfirst(lanes), v, vsplat(0.0f));
            vstore(c + i * ldc + SV_VW * j, v);
        }
}

SV_INLINE void conv_finish(const int MR, vf acc[][SV_NV], float *c, int64_t ldc,
                           const sv_epilogue *ep, int64_t row0, int nc) {
    if (nc == SV_NR && (!ep || !ep->act || ep->act == SV_ACT_RELU || ep->act == SV_ACT_RELU6)) {
        /* a full tile with bias, relu and residual at most (nearly every convolution of a
         * CNN), in the epilogue's order, on the registers. The out-of-line path below cost
         * a first layer (27 multiply-adds per output) a third of its time. */
        vf add[SV_NV];
#pragma GCC unroll 4
        for (int j = 0; j < SV_NV; j++) /* -0.0: x + (-0.0) == x, signed zeros included */
            add[j] = ep && ep->bias ? vload(ep->bias + SV_VW * j) : vsplat(-0.0f);
        const bool relu = ep && ep->act == SV_ACT_RELU, relu6 = ep && ep->act == SV_ACT_RELU6;
        const float *res = ep && ep->residual ? ep->residual + row0 * ep->ldr : NULL;
        const bool first = res && ep->res_first;
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
            for (int j = 0; j < SV_NV; j++) {
                vf v = acc[i][j] + add[j];
                if (first) v += vload(res + i * ep->ldr + SV_VW * j);
                if (relu) v = vrelu(v);
                if (relu6) v = vrelu6(v);
                if (res && !first) v += vload(res + i * ep->ldr + SV_VW * j);
                vstore(c + i * ldc + SV_VW * j, v);
            }
        return;
    }
    float tile[SV_MR * SV_NR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < SV_NV; j++) vstore(tile + i * SV_NR + SV_VW * j, acc[i][j]);
    SV_FN(conv_epilogue)(tile, MR, c, ldc, ep, row0, nc);
}

SV_INLINE void conv_rows(const int MR, int64_t nseg, int64_t kc, const float *const *pix,
                         const int64_t *segoff, const float *bp, float *c, int64_t ldc,
                         const sv_epilogue *ep, int64_t row0, int nc) {
    vf acc[SV_MR][SV_NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < SV_NV; j++) acc[i][j] = vsplat(0.0f);
    for (int64_t s = 0; s < nseg; s++) {
        const float *a[SV_MR];
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) a[i] = pix[i] + segoff[s];
        for (int64_t k = 0; k < kc; k++) {
            vf b[SV_NV];
#pragma GCC unroll 4
            for (int j = 0; j < SV_NV; j++) b[j] = vload(bp + SV_NR * k + SV_VW * j);
#pragma GCC unroll 16
            for (int i = 0; i < MR; i++) {
                vf av = vsplat(a[i][k]);
#pragma GCC unroll 4
                for (int j = 0; j < SV_NV; j++) acc[i][j] = vfma(av, b[j], acc[i][j]);
            }
        }
        bp += kc * SV_NR;
    }
    conv_finish(MR, acc, c, ldc, ep, row0, nc);
}

#if SV_NV == 1
/* Two consecutive blocks of 16 output channels at once, for levels whose 16 channels are
 * one vector (AVX-512): each input value broadcast feeds two multiply-adds, so that the
 * loads (one broadcast per pixel and k, one weight vector per block and k) no longer
 * outnumber the multiply-adds: 2 MR accumulators, MR + 2 loads per 2 MR multiply-adds.
 * Block 2's packed weights are bstride floats after block 1's, its output cstride floats
 * after; block 1 is full (only a convolution's last block can be partial). W2's 32 -> 64
 * channels at 112 x 112: 1.82 ms one block at a time, 1.55 ms by pairs, 1.59 ms by four
 * blocks of 6 pixels. */
SV_INLINE void conv_rows2(const int MR, int64_t nseg, int64_t kc, const float *const *pix,
                          const int64_t *segoff, const float *bp, int64_t bstride, float *c,
                          int64_t cstride, const sv_epilogue ep[2], int64_t row0, int nc_last) {
    vf acc0[SV_MR][1], acc1[SV_MR][1];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) acc0[i][0] = acc1[i][0] = vsplat(0.0f);
    for (int64_t s = 0; s < nseg; s++) {
        const float *a[SV_MR];
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) a[i] = pix[i] + segoff[s];
        const float *b1p = bp + bstride;
#define SV_CONV2_K(k)                                                                      \
    {                                                                                      \
        vf b0 = vload(bp + SV_NR * (k)), b1 = vload(b1p + SV_NR * (k));                    \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                            \
            vf av = vsplat(a[i][k]);                                                       \
            acc0[i][0] = vfma(av, b0, acc0[i][0]);                                         \
            acc1[i][0] = vfma(av, b1, acc1[i][0]);                                         \
        }                                                                                  \
    }
        if (kc == SV_CB) { /* a whole block of input channels: offsets become constants */
#pragma GCC unroll 16
            for (int k = 0; k < SV_CB; k++) SV_CONV2_K(k)
        } else {
            for (int64_t k = 0; k < kc; k++) SV_CONV2_K(k)
        }
#undef SV_CONV2_K
        bp += kc * SV_NR;
    }
    conv_finish(MR, acc0, c, SV_NR, &ep[0], row0, SV_NR);
    conv_finish(MR, acc1, c + cstride, SV_NR, &ep[1], row0, nc_last);
}
#endif

SV_INLINE void dw_rows(const int MR, int64_t ntaps, const float *const *pix,
                       const int64_t *tapoff, const float *wt, float *c, int64_t ldc,
                       const sv_epilogue *ep, int64_t row0, int nc) {
    vf acc[SV_MR][SV_NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < SV_NV; j++) acc[i][j] = vsplat(0.0f);
    for (int64_t t = 0; t < ntaps; t++) {
        vf wv[SV_NV];
#pragma GCC unroll 4
        for (int j = 0; j < SV_NV; j++) wv[j] = vload(wt + SV_NR * t + SV_VW * j);
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            const float *a = pix[i] + tapoff[t];
#pragma GCC unroll 4
            for (int j = 0; j < SV_NV; j++) acc[i][j] = vfma(vload(a + SV_VW * j), wv[j], acc[i][j]);
        }
    }
    conv_finish(MR, acc, c, ldc, ep, row0, nc);
}

#if SV_MR > 6
#define SV_CONV_CASES(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12)
#elif SV_MR > 3
#define SV_CONV_CASES(X) X(1) X(2) X(3) X(4) X(5) X(6)
#else
#define SV_CONV_CASES(X) X(1) X(2) X(3)
#endif

static void SV_FN(conv_ukr)(int mr, int64_t nseg, int64_t kc, const float *const *pix,
                            const int64_t *segoff, const float *bp, float *c, int64_t ldc,
                            const sv_epilogue *ep, int64_t row0, int nc) {
    SV_ASSERT(mr >= 1 && mr <= SV_MR && nc >= 1 && nc <= SV_NR && kc >= 1);
    switch (mr) {
#define SV_CASE(R)                                                                         \
    case R: conv_rows(R, nseg, kc, pix, segoff, bp, c, ldc, ep, row0, nc); break;
        SV_CONV_CASES(SV_CASE)
#undef SV_CASE
    default: break;
    }
}

#if SV_NV == 1
static void SV_FN(conv_ukr2)(int mr, int64_t nseg, int64_t kc, const float *const *pix,
                             const int64_t *segoff, const float *bp, int64_t bstride,
                             float *c, int64_t cstride, const sv_epilogue ep[2], int64_t row0,
                             int nc_last) {
    SV_ASSERT(mr >= 1 && mr <= SV_MR && nc_last >= 1 && nc_last <= SV_NR && kc >= 1);
    switch (mr) {
#define SV_CASE(R)                                                                         \
    case R:                                                                                \
        conv_rows2(R, nseg, kc, pix, segoff, bp, bstride, c, cstride, ep, row0, nc_last); \
        break;
        SV_CONV_CASES(SV_CASE)
#undef SV_CASE
    default: break;
    }
}
#endif

static void SV_FN(conv_dw)(int mr, int64_t ntaps, const float *const *pix,
                           const int64_t *tapoff, const float *wt, float *c, int64_t ldc,
                           const sv_epilogue *ep, int64_t row0, int nc) {
    SV_ASSERT(mr >= 1 && mr <= SV_MR && nc >= 1 && nc <= SV_NR);
    switch (mr) {
#define SV_CASE(R) case R: dw_rows(R, ntaps, pix, tapoff, wt, c, ldc, ep, row0, nc); break;
        SV_CONV_CASES(SV_CASE)
#undef SV_CASE
    default: break;
    }
}
#undef SV_CONV_CASES

/* Depthwise windows 3 wide (no dilation along the width) at stride SW (1 or 2): R output
 * pixels of 16 channels along a row from kh input rows (rows[r] at the first window's
 * first pixel, pixels 16 floats apart), each input vector loaded once per row and used by
 * the (up to 3) taps that read it: a third of a load per multiply-add at stride 1, where
 * the pointer per pixel of conv_dw took two (28 multiply-adds per ns on one AVX-512 core,
 * against 90-100 here).  The taps accumulate in conv_dw's order: the same bits. */
#if SV_NV == 1
#define SV_DW3_R 8
#define SV_DW3_CASES(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8)
#elif SV_MR >= 4
#define SV_DW3_R 4
#define SV_DW3_CASES(X) X(1) X(2) X(3) X(4)
#else /* conv_finish's tile holds SV_MR rows */
#define SV_DW3_R 3
#define SV_DW3_CASES(X) X(1) X(2) X(3)
#endif
SV_INLINE void dw3_rows(const int R, const int SW, int kh, const float *const *rows,
                        const float *wt, float *c, const sv_epilogue *ep, int64_t row0,
                        int nc) {
    vf acc[SV_DW3_R][SV_NV];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int j = 0; j < SV_NV; j++) acc[i][j] = vsplat(0.0f);
    for (int r = 0; r < kh; r++) {
        const float *in = rows[r], *w = wt + 3 * SV_NR * r;
#pragma GCC unroll 4
        for (int j = 0; j < SV_NV; j++) {
            vf w0 = vload(w + SV_VW * j), w1 = vload(w + SV_NR + SV_VW * j);
            vf w2 = vload(w + 2 * SV_NR + SV_VW * j);
            vf x[2 * SV_DW3_R + 1];
#pragma GCC unroll 17
            for (int m = 0; m < (R - 1) * SW + 3; m++) x[m] = vload(in + SV_NR * m + SV_VW * j);
#pragma GCC unroll 8
            for (int i = 0; i < R; i++)
                acc[i][j] = vfma(x[i * SW + 2], w2,
                                 vfma(x[i * SW + 1], w1, vfma(x[i * SW], w0, acc[i][j])));
        }
    }
    conv_finish(R, acc, c, SV_NR, ep, row0, nc);
}

/* n output pixels of a row (see dw3_rows), kh <= 7 rows of windows, stride sw 1 or 2. */
static void SV_FN(conv_dw3)(int64_t n, int sw, int kh, const float *const *rows,
                            const float *wt, float *c, const sv_epilogue *ep, int64_t row0,
                            int nc) {
    SV_ASSERT(kh >= 1 && kh <= 7 && (sw == 1 || sw == 2) && nc >= 1 && nc <= SV_NR);
    const float *at[7];
    for (int64_t p = 0; p < n; p += SV_DW3_R) {
        int r = (int)(n - p < SV_DW3_R ? n - p : SV_DW3_R);
        for (int k = 0; k < kh; k++) at[k] = rows[k] + SV_NR * sw * p;
        float *cp = c + SV_NR * p;
        if (sw == 1) switch (r) {
#define SV_CASE(R) case R: dw3_rows(R, 1, kh, at, wt, cp, ep, row0 + p, nc); break;
                SV_DW3_CASES(SV_CASE)
#undef SV_CASE
            default: break;
            }
        else switch (r) {
#define SV_CASE(R) case R: dw3_rows(R, 2, kh, at, wt, cp, ep, row0 + p, nc); break;
                SV_DW3_CASES(SV_CASE)
#undef SV_CASE
            default: break;
            }
    }
}
#undef SV_DW3_CASES

/* ---- reorders: SV_VW x SV_VW transposes in registers ---- */

/* One stage of the transpose swaps bit B of the row and the column index: rows i and i + B
 * (bit B of i clear) become lo[c] = bit B of c ? b[c - B] : a[c] and hi[c] = bit B of c ?
 * b[c] : a[c + B]; log2(SV_VW) stages transpose the whole square. */
#if SV_VW == 4
#define SV_TR_STAGES(X) X(1, LO1, HI1) X(2, LO2, HI2)
#define LO1 0, 4, 2, 6
#define HI1 1, 5, 3, 7
#define LO2 0, 1, 4, 5
#define HI2 2, 3, 6, 7
#elif SV_VW == 8
#define SV_TR_STAGES(X) X(1, LO1, HI1) X(2, LO2, HI2) X(4, LO4, HI4)
#define LO1 0, 8, 2, 10, 4, 12, 6, 14
#define HI1 1, 9, 3, 11, 5, 13, 7, 15
#define LO2 0, 1, 8, 9, 4, 5, 12, 13
#define HI2 2, 3, 10, 11, 6, 7, 14, 15
#define LO4 0, 1, 2, 3, 8, 9, 10, 11
#define HI4 4, 5, 6, 7, 12, 13, 14, 15
#else
#define SV_TR_STAGES(X) X(1, LO1, HI1) X(2, LO2, HI2) X(4, LO4, HI4) X(8, LO8, HI8)
#define LO1 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30
#define HI1 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31
#define LO2 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define HI2 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define LO4 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27
#define HI4 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
#define LO8 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define HI8 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
#endif

SV_INLINE void transpose_sq(vf r[SV_VW]) {
#define SV_TR_STAGE(B, LO, HI)                                                             \
    for (int i = 0; i < SV_VW; i++)                                                        \
        if (!(i & B)) {                                                                    \
            vf a = r[i], b = r[i + B];                                                     \
            r[i] = __builtin_shufflevector(a, b, LO);                                      \
            r[i + B] = __builtin_shufflevector(a, b, HI);                                  \
        }
    SV_TR_STAGES(SV_TR_STAGE)
#undef SV_TR_STAGE
}
#undef SV_TR_STAGES
#undef LO1
#undef HI1
#undef LO2
#undef HI2
#undef LO4
#undef HI4
#undef LO8
#undef HI8

/* Pixels of 16 channels from channel planes: dst[16 x + c] = src[c * plane + x] for
 * c < nc, zero for nc <= c < 16, x < w. */
static void SV_FN(conv_gather16)(const float *src, int64_t plane, int64_t nc, int64_t w,
                                 float *dst) {
    int64_t x = 0;
    for (; x + SV_VW <= w; x += SV_VW)
        for (int c0 = 0; c0 < SV_NR; c0 += SV_VW) {
            vf r[SV_VW];
#pragma GCC unroll 16
            for (int i = 0; i < SV_VW; i++)
                r[i] = c0 + i < nc ? vload(src + (c0 + i) * plane + x) : vsplat(0.0f);
            transpose_sq(r);
#pragma GCC unroll 16
            for (int i = 0; i < SV_VW; i++) vstore(dst + (x + i) * SV_NR + c0, r[i]);
        }
    for (; x < w; x++)
        for (int c = 0; c < SV_NR; c++) dst[x * SV_NR + c] = c < nc ? src[c * plane + x] : 0.0f;
}

/* Pixels of cs < 16 channels from channel planes (see sv_conv.h); three channels, an RGB
 * image, as a loop the compiler vectorizes at this level: 224 pixels in 54 ns against 130
 * for the loop over channels, strided stores, that serves the others. */
static void SV_FN(conv_gather_tight)(const float *src, int64_t plane, int64_t nc, int64_t w,
                                     float *dst, int64_t cs) {
    if (cs == 3 && nc == 3) {
        const float *restrict r = src, *restrict g = src + plane, *restrict b = src + 2 * plane;
        float *restrict d = dst;
        for (int64_t x = 0; x < w; x++) {
            d[3 * x] = r[x];
            d[3 * x + 1] = g[x];
            d[3 * x + 2] = b[x];
        }
        return;
    }
    for (int64_t c = 0; c < cs; c++) /* long inner loops: a few channels, many pixels */
        if (c < nc)
            for (int64_t x = 0; x < w; x++) dst[x * cs + c] = src[c * plane + x];
        else
            for (int64_t x = 0; x < w; x++) dst[x * cs + c] = 0.0f;
}

/* Channel planes from pixels of 16: dst[c * plane + q] = src[16 q + c] (+ res[c * plane +
 * q]) for c < nc, q < npix. */
static void SV_FN(conv_scatter16)(const float *src, int64_t npix, int64_t nc, float *dst,
                                  int64_t plane, const float *res) {
    int64_t q = 0;
    for (; q + SV_VW <= npix; q += SV_VW)
        for (int c0 = 0; c0 < nc; c0 += SV_VW) {
            vf r[SV_VW];
#pragma GCC unroll 16
            for (int i = 0; i < SV_VW; i++) r[i] = vload(src + (q + i) * SV_NR + c0);
            transpose_sq(r);
            for (int i = 0; i < SV_VW && c0 + i < nc; i++) {
                int64_t off = (c0 + i) * plane + q;
                vstore(dst + off, res ? r[i] + vload(res + off) : r[i]);
            }
        }
    for (; q < npix; q++)
        for (int64_t c = 0; c < nc; c++)
            dst[c * plane + q] = src[q * SV_NR + c] + (res ? res[c * plane + q] : 0.0f);
}

/* ---- Winograd F(2x2, 3x3) transforms (conv_wino.c) ----
 *
 * Input: for each tile t, the 4x4 pixels of 16 channels at tp[t] (rows rs floats apart,
 * pixels 16 floats apart), for each of cbin input blocks (bs floats apart), become
 * V = B^T d B, stored at v + xi vstride + t ldv + 16 ib for xi = 4 i + j < 16.
 * B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]: additions only. */
static void SV_FN(wino_in)(int ntiles, const float *const *tp, int64_t rs, int64_t cbin,
                           int64_t bs, float *v, int64_t vstride, int64_t ldv) {
    for (int t = 0; t < ntiles; t++)
        for (int64_t ib = 0; ib < cbin; ib++)
#pragma GCC unroll 4
            for (int q = 0; q < SV_NV; q++) {
                const float *d = tp[t] + ib * bs + SV_VW * q;
                vf e[4][4];
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++) { /* rows: B^T d */
                    vf d0 = vload(d + c * SV_CB), d1 = vload(d + rs + c * SV_CB);
                    vf d2 = vload(d + 2 * rs + c * SV_CB), d3 = vload(d + 3 * rs + c * SV_CB);
                    e[0][c] = d0 - d2, e[1][c] = d1 + d2, e[2][c] = d2 - d1, e[3][c] = d1 - d3;
                }
                float *o = v + t * ldv + ib * SV_CB + SV_VW * q;
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++) { /* columns: (B^T d) B */
                    vstore(o + (4 * i + 0) * vstride, e[i][0] - e[i][2]);
                    vstore(o + (4 * i + 1) * vstride, e[i][1] + e[i][2]);
                    vstore(o + (4 * i + 2) * vstride, e[i][2] - e[i][1]);
                    vstore(o + (4 * i + 3) * vstride, e[i][1] - e[i][3]);
                }
            }
}

/* Output: for each tile t, the 16 products m[xi] at m + xi mstride + 16 t (16 channels of
 * one output block) become Y = A^T m A, A^T = [1 1 1 0; 0 1 -1 -1], then the epilogue (bias,
 * activation, residual at the same offsets as the output), lanes past nc zero; Y's 2x2
 * pixels go to y + off[t] (+16 to the right, +ldy below; the residual before the activation
 * where ep->res_first), the right column left out where
 * edge[t] has bit 0, the lower row where it has bit 1. */
static void SV_FN(wino_out)(int ntiles, const float *m, int64_t mstride, const int64_t *off,
                            const unsigned char *edge, float *y, int64_t ldy, const float *res,
                            const sv_epilogue *ep, int nc) {
    for (int t = 0; t < ntiles; t++)
#pragma GCC unroll 4
        for (int q = 0; q < SV_NV; q++) {
            const float *mt = m + t * SV_CB + SV_VW * q;
            vf r[2][4];
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                vf m0 = vload(mt + c * mstride), m1 = vload(mt + (4 + c) * mstride);
                vf m2 = vload(mt + (8 + c) * mstride), m3 = vload(mt + (12 + c) * mstride);
                r[0][c] = m0 + m1 + m2, r[1][c] = m1 - m2 - m3;
            }
            vf bias = ep->bias ? vload(ep->bias + SV_VW * q) : vsplat(0.0f);
            int lanes = lanes_at(nc, q);
#pragma GCC unroll 2
            for (int i = 0; i < 2; i++) {
                if (i == 1 && (edge[t] & 2)) break;
#pragma GCC unroll 2
                for (int j = 0; j < 2; j++) {
                    if (j == 1 && (edge[t] & 1)) break;
                    vf o = j == 0 ? r[i][0] + r[i][1] + r[i][2] : r[i][1] - r[i][2] - r[i][3];
                    int64_t at = off[t] + i * ldy + j * SV_CB + SV_VW * q;
                    o = conv_act_residual(o + bias, res ? res + at : NULL, ep);
                    if (lanes < SV_VW) o = vsel(vfirst(lanes), o, vsplat(0.0f));
                    vstore(y + at, o);
                }
            }
        }
}

#include "pool_kern.h"

/* This level's entries of sv_isa_table.conv. */
static const sv_conv_kern SV_FN(conv_kern) = {
    .ukr = SV_FN(conv_ukr),
#if SV_NV == 1
    .ukr2 = SV_FN(conv_ukr2),
#endif
    .dw = SV_FN(conv_dw),
    .dw3 = SV_FN(conv_dw3),
    .pool_row = SV_FN(pool_row),
    .sum = SV_FN(pool_sum),
    .sum16 = SV_FN(pool_sum16),
    .gather16 = SV_FN(conv_gather16),
    .gather_tight = SV_FN(conv_gather_tight),
    .scatter16 = SV_FN(conv_scatter16),
    .wino_in = SV_FN(wino_in),
    .wino_out = SV_FN(wino_out),
};
