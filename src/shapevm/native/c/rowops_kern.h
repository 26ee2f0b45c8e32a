/* Row operations over the last axis for one instruction set (included by isa_<level>.c):
 * one row of layer norm / RMS norm (residual input, affine output), one row of softmax /
 * log-softmax (scale, additive mask), and the online-softmax step of attention.
 *
 * Rows are unit-stride.  Aliasing is allowed only between operands that are the same
 * memory element for element (y == x, h == r...): every pass reads an element before it
 * writes the same element.  Sums run in several vector accumulators; the variance is the
 * corrected two-pass one (sum of d^2 minus (sum of d)^2 / n around the first mean), which
 * stays within float32's rounding of the float64 result even for rows with a large mean.
 */
#include "vmath.h"

SV_INLINE vf ld_n(const float *p, int64_t left, float fill) {
    return left >= SV_VW ? vload(p) : vload_part(p, (int)left, fill);
}
SV_INLINE void st_n(float *p, vf v, int64_t left) {
    if (left >= SV_VW)
        vstore(p, v);
    else
        vstore_part(p, v, (int)left);
}

/* Pass 1 of a norm: h = x (+ r) stored to dst when r is given; returns the sum. */
SV_INLINE float norm_gather(int64_t n, const float *x, const float *r, float *dst) {
    vf s0 = vsplat(0.0f), s1 = vsplat(0.0f);
    int64_t i = 0;
    for (; i + 2 * SV_VW <= n; i += 2 * SV_VW) {
        vf a = vload(x + i), b = vload(x + i + SV_VW);
        if (r) {
            a += vload(r + i);
            b += vload(r + i + SV_VW);
            vstore(dst + i, a);
            vstore(dst + i + SV_VW, b);
        }
        s0 += a;
        s1 += b;
    }
    for (; i < n; i += SV_VW) {
        vf a = ld_n(x + i, n - i, 0.0f);
        if (r) {
            a += ld_n(r + i, n - i, 0.0f);
            st_n(dst + i, a, n - i);
        }
        s0 += a;
    }
    return vhsum(s0 + s1);
}

static void SV_FN(norm_row)(const sv_norm_params *p, const float *x, const float *r, float *h,
                            float *y) {
    int64_t n = p->n;
    const float *src = x;
    if (r) src = h ? h : y;
    float total = norm_gather(n, x, r, (float *)src);
    float mean = p->rms ? 0.0f : total / (float)n;
    vf vm = vsplat(mean), sd = vsplat(0.0f), sq0 = vsplat(0.0f), sq1 = vsplat(0.0f);
    int64_t i = 0;
    for (; i + 2 * SV_VW <= n; i += 2 * SV_VW) {
        vf d0 = vload(src + i) - vm, d1 = vload(src + i + SV_VW) - vm;
        sd += d0 + d1;
        sq0 = vfma(d0, d0, sq0);
        sq1 = vfma(d1, d1, sq1);
    }
    for (; i < n; i += SV_VW) {
        vf d = ld_n(src + i, n - i, mean) - vm;
        sd += d;
        sq0 = vfma(d, d, sq0);
    }
    float dsum = vhsum(sd) / (float)n, var = vhsum(sq0 + sq1) / (float)n;
    if (!p->rms) {
        var -= dsum * dsum;
        if (var < 0.0f) var = 0.0f;
    }
    float rstd = 1.0f / __builtin_sqrtf(var + p->eps);
    /* (x - mean) as (x - first mean) - correction: no rounding at the mean's magnitude */
    vf vd = vsplat(p->rms ? 0.0f : dsum), vr = vsplat(rstd);
    for (i = 0; i < n; i += SV_VW) {
        int64_t left = n - i;
        vf v = ((ld_n(src + i, left, 0.0f) - vm) - vd) * vr;
        if (p->gamma) v *= ld_n(p->gamma + i, left, 0.0f);
        if (p->beta) v += ld_n(p->beta + i, left, 0.0f);
        st_n(y + i, v, left);
    }
}

/* exp(x) for x <= 0 (softmax after subtracting the row's max): no overflow branch and one
 * scaling step (vexp_1step); NaN passes through. */
SV_INLINE vf vexp_le0(vf x) {
    vf y = vexp_1step(vmax(x, vsplat(-87.0f)));
    y = vsel(x < vsplat(-87.0f), vsplat(0.0f), y);
    return vsel(vnan_mask(x), x, y);
}

/* max over the row of t = x * scale + mask (stored to y when scaled or masked). */
SV_INLINE float softmax_prepare(int64_t n, const float *x, float scale, const float *mask,
                                float *y) {
    const float ninf = -__builtin_inff();
    vf m0 = vsplat(ninf), vs = vsplat(scale);
    bool transform = scale != 1.0f || mask;
    for (int64_t i = 0; i < n; i += SV_VW) {
        int64_t left = n - i;
        vf t = ld_n(x + i, left, ninf);
        if (transform) {
            t *= vs;
            if (mask) t += ld_n(mask + i, left, 0.0f);
            st_n(y + i, t, left);
        }
        if (left < SV_VW)
            t = vsel(vfirst(left), t, vsplat(ninf));
        m0 = vsel((t > m0) | vnan_mask(t), t, m0);
    }
    return vhmax(m0);
}

static void SV_FN(softmax_row)(const sv_softmax_params *p, const float *x, const float *mask,
                               float *y) {
    int64_t n = p->n;
    float m = softmax_prepare(n, x, p->scale, mask, y);
    const float *src = (p->scale != 1.0f || mask) ? y : x;
    vf vm = vsplat(m), s = vsplat(0.0f);
    for (int64_t i = 0; i < n; i += SV_VW) {
        int64_t left = n - i;
        vf e = vexp_le0(ld_n(src + i, left, -__builtin_inff()) - vm);
        if (left < SV_VW)
            e = vsel(vfirst(left), e, vsplat(0.0f));
        s += e;
        if (!p->log) st_n(y + i, e, left);
    }
    float total = vhsum(s);
    if (p->log) {
        vf shift = vsplat(m + __builtin_logf(total));
        for (int64_t i = 0; i < n; i += SV_VW) st_n(y + i, ld_n(src + i, n - i, 0.0f) - shift, n - i);
    } else {
        vf inv = vsplat(1.0f / total);
        for (int64_t i = 0; i < n; i += SV_VW) st_n(y + i, ld_n(y + i, n - i, 0.0f) * inv, n - i);
    }
}

/* Softmax / log-softmax of `rows` short rows (n <= SV_SHORT_ROW: a classifier's few
 * classes), SV_VW rows at a time with a row in each lane: the block moved into columns,
 * each column's exp one vector for all its rows.  Row by row, a row of 5 took 80 ns (its
 * loads, maximum and sum each a partial vector and a horizontal step); a block of 16,
 * about 6 ns a row.  The same values as softmax_row but for the sum's order (the columns
 * in order, as NumPy sums fewer than 8 elements).  Rows at x + i * sx (mask + i * sm, 0 for
 * one mask row for all), results at y + i * sy; y may be x. */
static void SV_FN(softmax_rows)(const sv_softmax_params *p, const float *x, int64_t sx,
                                const float *mask, int64_t sm, float *y, int64_t sy,
                                int64_t rows) {
    const int n = (int)p->n;
    const float ninf = -__builtin_inff();
    const bool transform = p->scale != 1.0f || mask;
    const vf vs = vsplat(p->scale);
    float t[SV_SHORT_ROW][SV_VW], mk[SV_SHORT_ROW][SV_VW];
    for (int64_t r0 = 0; r0 < rows; r0 += SV_VW) {
        const int nr = rows - r0 < SV_VW ? (int)(rows - r0) : SV_VW;
        for (int l = 0; l < SV_VW; l++) {
            const float *xr = x + (r0 + (l < nr ? l : 0)) * sx; /* spare lanes: row r0 again */
            for (int j = 0; j < n; j++) t[j][l] = xr[j];
            if (mask) {
                const float *mr = mask + (r0 + (l < nr ? l : 0)) * sm;
                for (int j = 0; j < n; j++) mk[j][l] = mr[j];
            }
        }
        vf v[SV_SHORT_ROW], m = vsplat(ninf), s = vsplat(0.0f);
        for (int j = 0; j < n; j++) {
            v[j] = vload(t[j]);
            if (transform) {
                v[j] *= vs;
                if (mask) v[j] += vload(mk[j]);
            }
            m = vsel((v[j] > m) | vnan_mask(v[j]), v[j], m);
        }
        for (int j = 0; j < n; j++) {
            vf e = vexp_le0(v[j] - m);
            s += e;
            if (!p->log) v[j] = e;
        }
        if (p->log) {
            float sh[SV_VW];
            for (int l = 0; l < SV_VW; l++) sh[l] = m[l] + __builtin_logf(s[l]);
            vf shift = vload(sh);
            for (int j = 0; j < n; j++) vstore(t[j], v[j] - shift);
        } else {
            vf inv = vsplat(1.0f) / s;
            for (int j = 0; j < n; j++) vstore(t[j], v[j] * inv);
        }
        for (int l = 0; l < nr; l++) {
            float *yr = y + (r0 + l) * sy;
            for (int j = 0; j < n; j++) yr[j] = t[j][l];
        }
    }
}

/* One step of attention's online softmax over a block of scores s[rows][ld] (cols valid
 * columns; row i keeps only its first lim[i] columns, the rest become 0): t = s * scale +
 * mask, m' = max(m, max t), s <- exp(t - m'), l <- l * exp(m - m') + sum, and alpha[i] =
 * exp(m - m') is the factor for the output rows accumulated so far. */
static void SV_FN(attn_softmax)(float *s, int rows, int64_t ld, int64_t cols, float scale,
                                const float *mask, int64_t ldm, const int64_t *lim, float *m,
                                float *l, float *alpha) {
    const float ninf = -__builtin_inff();
    for (int i = 0; i < rows; i++) {
        float *row = s + i * ld;
        int64_t n = lim ? (lim[i] < cols ? lim[i] : cols) : cols;
        if (n < 0) n = 0;
        float mx = n > 0 ? softmax_prepare(n, row, scale, mask ? mask + i * ldm : NULL, row)
                         : ninf;
        const float *src = row;
        float mnew = (mx > m[i] || mx != mx) ? mx : m[i];
        /* every key so far masked to -inf: this block's weights are 0, not exp(-inf + inf);
         * a later block with a key left lifts m (and the row's l stays 0 if none does:
         * 0 / 0, NaN, as NumPy's softmax of a row of -inf) */
        vf vm = vsplat(mnew == ninf ? 0.0f : mnew), acc = vsplat(0.0f);
        for (int64_t j = 0; j < n; j += SV_VW) {
            int64_t left = n - j;
            vf e = vexp_le0(ld_n(src + j, left, ninf) - vm);
            if (left < SV_VW)
                e = vsel(vfirst(left), e, vsplat(0.0f));
            acc += e;
            st_n(row + j, e, left);
        }
        for (int64_t j = n; j < cols; j++) row[j] = 0.0f;
        float a = m[i] == ninf ? 0.0f : __builtin_expf(m[i] - mnew);
        alpha[i] = a;
        l[i] = l[i] * a + vhsum(acc);
        m[i] = mnew;
    }
}
