/* Pooling kernels for one instruction set (included by isa_template.h).
 *
 * One output row at a time: the window's input rows are combined vertically into a
 * bordered row buffer (contiguous vector loads), then each output column combines kw
 * neighbours of that buffer, so the padding costs no test in the loops.
 */

/* max propagates NaN from either side, as numpy.maximum */
SV_INLINE vf pool_comb(int kind, vf a, vf b) {
    return kind == SV_POOL_MAX ? vsel((b > a) | (b != b), b, a) : a + b;
}
SV_INLINE float pool_comb1(int kind, float a, float b) {
    return kind == SV_POOL_MAX ? (b > a || b != b ? b : a) : a + b;
}

static void SV_FN(pool_vertical)(int kind, const float *const *rows, int nrows, int64_t w,
                                 float *dst) {
    int64_t x = 0;
    for (; x + SV_VW <= w; x += SV_VW) {
        vf v = vload(rows[0] + x);
        for (int r = 1; r < nrows; r++) v = pool_comb(kind, v, vload(rows[r] + x));
        vstore(dst + x, v);
    }
    for (; x < w; x++) {
        float v = rows[0][x];
        for (int r = 1; r < nrows; r++) v = pool_comb1(kind, v, rows[r][x]);
        dst[x] = v;
    }
}

#if SV_VW == 4
#define SV_EVEN_LANES 0, 2, 4, 6
#elif SV_VW == 8
#define SV_EVEN_LANES 0, 2, 4, 6, 8, 10, 12, 14
#else
#define SV_EVEN_LANES 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30
#endif

/* t[0], t[2], ..., t[2 SV_VW - 2] */
SV_INLINE vf load_even(const float *t) {
    return __builtin_shufflevector(vload(t), vload(t + SV_VW), SV_EVEN_LANES);
}
#undef SV_EVEN_LANES

static void SV_FN(pool_row)(const sv_pool_shape *s, const float *const *rows, int nrows,
                            int64_t w, float *tmp, float *y, int64_t ow, float scale,
                            const float *colscale) {
    int kind = s->kind;
    float border = kind == SV_POOL_MAX ? -__builtin_inff() : 0.0f;
    int64_t kw = s->kw, sw = s->sw, ox = 0, len = s->pl + w + s->pr;
    for (int64_t x = 0; x < s->pl; x++) tmp[x] = border;
    for (int64_t x = s->pl + w; x < len + SV_POOL_SLACK; x++) tmp[x] = border;
    SV_FN(pool_vertical)(kind, rows, nrows, w, tmp + s->pl);
    if (sw <= 2) { /* vectors along the row (the slack past len absorbs the last one) */
        for (; ox < ow; ox += SV_VW) {
            const float *t = tmp + sw * ox;
            vf v = sw == 1 ? vload(t) : load_even(t);
            for (int64_t k = 1; k < kw; k++)
                v = pool_comb(kind, v, sw == 1 ? vload(t + k) : load_even(t + k));
            if (kind != SV_POOL_MAX) {
                v *= vsplat(scale);
                if (colscale) v *= vload(colscale + ox);
            }
            if (ox + SV_VW <= ow)
                vstore(y + ox, v);
            else
                vstore_part(y + ox, v, (int)(ow - ox));
        }
        return;
    }
    for (; ox < ow; ox++) {
        const float *t = tmp + ox * sw;
        float v = t[0];
        for (int64_t k = 1; k < kw; k++) v = pool_comb1(kind, v, t[k]);
        if (kind != SV_POOL_MAX) {
            v *= scale;
            if (colscale) v *= colscale[ox];
        }
        y[ox] = v;
    }
}

static float SV_FN(pool_sum)(const float *x, int64_t n) {
    vf a0 = vsplat(0.0f), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 4 * SV_VW <= n; i += 4 * SV_VW) {
        a0 += vload(x + i);
        a1 += vload(x + i + SV_VW);
        a2 += vload(x + i + 2 * SV_VW);
        a3 += vload(x + i + 3 * SV_VW);
    }
    for (; i + SV_VW <= n; i += SV_VW) a0 += vload(x + i);
    float s = vhsum((a0 + a1) + (a2 + a3));
    for (; i < n; i++) s += x[i];
    return s;
}

static void SV_FN(pool_sum16)(const float *x, int64_t n, float *acc) {
    vf a[2][SV_NV];
    for (int u = 0; u < 2; u++)
        for (int j = 0; j < SV_NV; j++) a[u][j] = vsplat(0.0f);
    int64_t p = 0;
    for (; p + 2 <= n; p += 2)
        for (int u = 0; u < 2; u++)
            for (int j = 0; j < SV_NV; j++) a[u][j] += vload(x + (p + u) * SV_NR + SV_VW * j);
    if (p < n)
        for (int j = 0; j < SV_NV; j++) a[0][j] += vload(x + p * SV_NR + SV_VW * j);
    for (int j = 0; j < SV_NV; j++) vstore(acc + SV_VW * j, vload(acc + SV_VW * j) + a[0][j] + a[1][j]);
}
