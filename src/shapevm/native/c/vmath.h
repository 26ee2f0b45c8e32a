/* Vectorized float32 math for one instruction set (included by isa_<level>.c).
 *
 * Cephes' single-precision polynomials, evaluated on whole vectors: every lane computes
 * every branch and the result is selected, so there is no per-lane control flow.  Accuracy
 * against float64 (tests/native/test_vmath.py): exp, log, sigmoid within 2 ulp; tanh, erf
 * within 2 ulp or 1e-6 relative; NaN and infinities pass through as in NumPy; results that
 * are subnormal stay subnormal (exp scales by 2^n in two steps).
 */
#ifndef SV_VMATH_H
#define SV_VMATH_H
#include "simd.h"

SV_INLINE vi vnan_mask(vf x) { return x != x; }

/* 2^n for integer n in [-252, 254], as two factors each a normal float. */
SV_INLINE vf vscale2n(vf y, vi n) {
    vi n1 = n >> 1;
    vi n2 = n - n1;
    vf f1 = (vf)((n1 + 127) << 23);
    vf f2 = (vf)((n2 + 127) << 23);
    return (y * f1) * f2;
}

/* exp(x) = 2^n * e^r, |r| <= ln2 / 2: returns e^r (Cephes' polynomial) and sets *n. */
SV_INLINE vf vexp_reduced(vf x, vi *n) {
    vf nf = vround(x * vsplat(1.44269504088896341f));
    vf r = x - nf * vsplat(0.693359375f);
    r = r - nf * vsplat(-2.12194440e-4f);
    vf p = vsplat(1.9875691500E-4f);
    p = vfma(p, r, vsplat(1.3981999507E-3f));
    p = vfma(p, r, vsplat(8.3334519073E-3f));
    p = vfma(p, r, vsplat(4.1665795894E-2f));
    p = vfma(p, r, vsplat(1.6666665459E-1f));
    p = vfma(p, r, vsplat(5.0000001201E-1f));
    *n = vcvt_i(nf);
    return vfma(p, r * r, r) + vsplat(1.0f);
}

/* exp(x) for x in [-88, 88.5], scaled by 2^n in one step, so a result below 2^-126
 * flushes to 0 (harmless next to 1: GELU's 1 + e, softmax's sums). */
SV_INLINE vf vexp_1step(vf x) {
    vi n;
    vf y = vexp_reduced(x, &n);
    return y * (vf)((n + 127) << 23);
}

SV_INLINE vf vexp(vf x) {
    const vf hi = vsplat(88.72283935546875f), lo = vsplat(-103.972084045410f);
    vi n;
    vf y = vexp_reduced(vmin(vmax(x, vsplat(-104.0f)), vsplat(89.0f)), &n);
    y = vscale2n(y, n);
    y = vsel(x > hi, vsplat(__builtin_inff()), y);
    y = vsel(x < lo, vsplat(0.0f), y);
    return vsel(vnan_mask(x), x, y);
}

SV_INLINE vf vlog(vf x) {
    /* subnormal inputs: scale by 2^23 first */
    vi sub = x < vsplat(1.17549435e-38f);
    vf xs = vsel(sub, x * vsplat(8388608.0f), x);
    vi bits = (vi)xs;
    vi e = ((bits >> 23) & visplat(0xff)) - visplat(126);
    vf m = (vf)((bits & visplat(0x007fffff)) | visplat(0x3f000000)); /* [0.5, 1) */
    vf ef = vcvt_f(e) - vsel(sub, vsplat(23.0f), vsplat(0.0f));
    vi small = m < vsplat(0.707106781186547524f);
    ef = ef - vsel(small, vsplat(1.0f), vsplat(0.0f));
    m = vsel(small, m + m, m) - vsplat(1.0f);
    vf z = m * m;
    vf p = vsplat(7.0376836292E-2f);
    p = vfma(p, m, vsplat(-1.1514610310E-1f));
    p = vfma(p, m, vsplat(1.1676998740E-1f));
    p = vfma(p, m, vsplat(-1.2420140846E-1f));
    p = vfma(p, m, vsplat(1.4249322787E-1f));
    p = vfma(p, m, vsplat(-1.6668057665E-1f));
    p = vfma(p, m, vsplat(2.0000714765E-1f));
    p = vfma(p, m, vsplat(-2.4999993993E-1f));
    p = vfma(p, m, vsplat(3.3333331174E-1f));
    vf y = m * z * p;
    y = vfma(ef, vsplat(-2.12194440e-4f), y);
    y = vfma(z, vsplat(-0.5f), y);
    vf r = m + y;
    r = vfma(ef, vsplat(0.693359375f), r);
    r = vsel(x == vsplat(0.0f), vsplat(-__builtin_inff()), r);
    r = vsel(x < vsplat(0.0f), vsplat(__builtin_nanf("")), r);
    r = vsel(x == vsplat(__builtin_inff()), x, r);
    return vsel(vnan_mask(x), x, r);
}

/* 1 / (1 + exp(-x)), without cancellation for negative x. */
SV_INLINE vf vsigmoid(vf x) {
    vf e = vexp(-vabs(x));
    vf r = vsplat(1.0f) / (vsplat(1.0f) + e);
    vf y = vsel(x >= vsplat(0.0f), r, e * r);
    return vsel(vnan_mask(x), x, y);
}

/* log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), never overflowing; log1p(e) is
 * log(u) * e / (u - 1) with u = 1 + e, which keeps the digits of e that u rounds away. */
SV_INLINE vf vsoftplus(vf x) {
    vf e = vexp(-vabs(x));
    vf u = vsplat(1.0f) + e;
    vf d = u - vsplat(1.0f);
    vf lp = vsel(d == vsplat(0.0f), e, vlog(u) * (e / vsel(d == vsplat(0.0f), vsplat(1.0f), d)));
    vf y = vmax(x, vsplat(0.0f)) + lp;
    return vsel(vnan_mask(x), x, y);
}

/* log(1 + x) to a few ulp near 0, where log(u) of the rounded u = 1 + x is off by the
 * rounding: log(u) * x / (u - 1) divides it out (Goldberg's trick); u - 1 == 0 means
 * |x| is below half an ulp of 1, where log1p(x) is x. */
SV_INLINE vf vlog1p(vf x) {
    vf u = vsplat(1.0f) + x;
    vf d = u - vsplat(1.0f);
    vi same = d == vsplat(0.0f);
    vf y = vlog(u) * (x / vsel(same, vsplat(1.0f), d));
    y = vsel(same, x, y);
    y = vsel(x == vsplat(__builtin_inff()), x, y); /* inf / inf */
    return vsel(vnan_mask(x), x, y);
}

/* exp(x) - 1 to a few ulp near 0 (Kahan): (u - 1) * x / log(u) for u = exp(x) rounded; u
 * of 1 means x below half an ulp, where expm1(x) is x; u - 1 of -1 is the limit below. */
SV_INLINE vf vexpm1(vf x) {
    vf u = vexp(x);
    vf d = u - vsplat(1.0f);
    vi one = u == vsplat(1.0f);
    vi far = (d == vsplat(-1.0f)) | (u == vsplat(__builtin_inff()));
    vf y = d * (x / vlog(vsel(one | far, vsplat(2.0f), u)));
    y = vsel(far, d, y);
    y = vsel(one, x, y);
    return vsel(vnan_mask(x), x, y);
}

/* log2(x): exact at powers of two (a normal x with no mantissa bits is 2^e), else
 * log(x) / ln 2. */
SV_INLINE vf vlog2(vf x) {
    vi bits = (vi)x;
    vi e = ((bits >> 23) & visplat(0xff)) - visplat(127);
    vi pow2 = ((bits & visplat(0x007fffff)) == visplat(0)) & (x > vsplat(0.0f)) &
              (x < vsplat(__builtin_inff())) & (x >= vsplat(1.17549435e-38f));
    return vsel(pow2, vcvt_f(e), vlog(x) * vsplat(1.44269504088896341f));
}

SV_INLINE vf vlog10(vf x) { return vlog(x) * vsplat(0.434294481903251828f); }

SV_INLINE vf vtanh(vf x) {
    vf a = vabs(x);
    vf z = x * x;
    vf p = vsplat(-5.70498872745E-3f);
    p = vfma(p, z, vsplat(2.06390887954E-2f));
    p = vfma(p, z, vsplat(-5.37397155531E-2f));
    p = vfma(p, z, vsplat(1.33314422036E-1f));
    p = vfma(p, z, vsplat(-3.33332819422E-1f));
    vf small = vfma(x * z, p, x);
    /* past |x| = 10, 1 - 2 / (e + 1) rounds to 1: e^20 at most, scaled in one step (the
     * same bits as vexp there, without its range and NaN selects) */
    vf e = vexp_1step(vmin(a + a, vsplat(20.0f)));
    vf big = vsplat(1.0f) - vsplat(2.0f) / (e + vsplat(1.0f));
    big = vcopysign(big, x);
    vf y = vsel(a < vsplat(0.625f), small, big);
    return vsel(vnan_mask(x), x, y);
}

/* exp(-a*a) for a >= 0 with a*a split so that its rounding does not reach the result. */
SV_INLINE vf vexp_negsq(vf a) {
    /* for 1 <= a <= 9.1 (erfc's tail clamps there): exp(-a^2) >= 1.0e-36 and both factors
     * are normal, so the one-step scaling is exact enough; a subnormal factor (a = 10 gave
     * exp(-100)) costs a microcode assist per lane, 3-4x the whole GELU */
    vf ah = (vf)((vi)a & visplat((int32_t)0xfffff000));
    vf al = a - ah;
    /* the small factor: |t| = al (2 ah + al) < 2^-8 * 18.2 = 0.072 (ah keeps 11 bits of
     * a < 16), where exp's Taylor series to t^5 is off by t^6 / 720 < 2e-10 */
    vf t = -(al * (ah + ah + al));
    vf e = vfma(vfma(vfma(vfma(vfma(vsplat(1.0f / 120), t, vsplat(1.0f / 24)), t,
                               vsplat(1.0f / 6)), t, vsplat(0.5f)), t, vsplat(1.0f)), t,
                vsplat(1.0f));
    return vexp_1step(-(ah * ah)) * e;
}

/* erfc(a) for a >= 1 (Cephes' erfcf tail). */
SV_INLINE vf verfc_tail(vf a) {
    vf q = vsplat(1.0f) / a;
    vf y = q * q;
    vf p1 = vsplat(2.326819970068386E-2f);
    p1 = vfma(p1, y, vsplat(-1.387039388740657E-1f));
    p1 = vfma(p1, y, vsplat(3.687424674597105E-1f));
    p1 = vfma(p1, y, vsplat(-5.824733027278666E-1f));
    p1 = vfma(p1, y, vsplat(6.210004621745983E-1f));
    p1 = vfma(p1, y, vsplat(-4.944515323274145E-1f));
    p1 = vfma(p1, y, vsplat(3.404879937665872E-1f));
    p1 = vfma(p1, y, vsplat(-2.741127028184656E-1f));
    p1 = vfma(p1, y, vsplat(5.638259427386472E-1f));
    vf p = p1;
    if (vany(a >= vsplat(2.0f))) { /* rare in an activation's input: skipped */
        vf p2 = vsplat(-1.047766399936249E+1f);
        p2 = vfma(p2, y, vsplat(1.297719955372516E+1f));
        p2 = vfma(p2, y, vsplat(-7.495518717768503E+0f));
        p2 = vfma(p2, y, vsplat(2.921019019210786E+0f));
        p2 = vfma(p2, y, vsplat(-1.015265279202700E+0f));
        p2 = vfma(p2, y, vsplat(4.218463358204948E-1f));
        p2 = vfma(p2, y, vsplat(-2.820767439740514E-1f));
        p2 = vfma(p2, y, vsplat(5.641895067754075E-1f));
        p = vsel(a < vsplat(2.0f), p1, p2);
    }
    return vexp_negsq(vmin(a, vsplat(9.1f))) * q * p; /* erfc(9.1) = 6.7e-38: normal */
}

/* erf(x) for |x| < 1 (Cephes' erff series). */
SV_INLINE vf verf_small(vf x) {
    vf z = x * x;
    vf p = vsplat(7.853861353153693E-5f);
    p = vfma(p, z, vsplat(-8.010193625184903E-4f));
    p = vfma(p, z, vsplat(5.188327685732524E-3f));
    p = vfma(p, z, vsplat(-2.685381193529856E-2f));
    p = vfma(p, z, vsplat(1.128358514861418E-1f));
    p = vfma(p, z, vsplat(-3.761262582423300E-1f));
    p = vfma(p, z, vsplat(1.128379165726710E+0f));
    return x * p;
}

SV_INLINE vf verf(vf x) {
    vf a = vabs(x);
    vf one = vsplat(1.0f);
    vf big = vcopysign(one - verfc_tail(vmax(a, one)), x);
    vf y = vsel(a < one, verf_small(vmin(a, one) * vcopysign(one, x)), big);
    return vsel(vnan_mask(x), x, y);
}

SV_INLINE vf vsqrt(vf x) {
    vf r;
    for (int i = 0; i < SV_VW; i++) r[i] = __builtin_sqrtf(x[i]);
    return r;
}

/* The activations of fused epilogues; codes are SV_ACT_* of svnative.h. */

/* x / (1 + exp(t)): exp on t clamped to [-88, 88.5], scaled by 2^n in one step (a value
 * below 2^-126 flushes to 0, harmless next to 1), inf past the clamp. */
SV_INLINE vf vdiv_1p_exp(vf x, vf t) {
    vf e = vexp_1step(vmin(vmax(t, vsplat(-88.0f)), vsplat(88.5f)));
    e = vsel(t > vsplat(88.5f), vsplat(__builtin_inff()), e);
    return x / (vsplat(1.0f) + e);
}
SV_INLINE vf vgelu_tanh(vf x) {
    /* 0.5 x (1 + tanh(u)) == x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3):
     * fewer and shorter chains than vexp, which dominated the epilogue of dense layers.
     * x = -inf gives -inf / inf = nan, as NumPy's formula does. */
    vf t = x * vfma(vsplat(-0.0713548162726f), x * x, vsplat(-1.5957691216057308f));
    return vdiv_1p_exp(x, t);
}
/* 0.5 x erfc(-x / sqrt 2), with erfc(a) for a = |x| / sqrt 2 as t exp(-a^2 + P(t)),
 * t = 1 / (1 + a/2) (Numerical Recipes' erfcc: relative error below 1.2e-7 for every
 * a >= 0, so the tail of negative x keeps its relative accuracy), and erfc(-a) as
 * 2 - erfc(a).  One path for every lane: a division, ten FMAs and one exp, against
 * the 1 - erf of erf's two polynomials, division and split exp(-a^2) (verf). */
SV_INLINE vf vgelu_erf(vf x) {
    vf a = vabs(x) * vsplat(0.70710678118654752f);
    vf t = vsplat(1.0f) / vfma(a, vsplat(0.5f), vsplat(1.0f));
    vf p = vsplat(0.17087277f);
    p = vfma(p, t, vsplat(-0.82215223f));
    p = vfma(p, t, vsplat(1.48851587f));
    p = vfma(p, t, vsplat(-1.13520398f));
    p = vfma(p, t, vsplat(0.27886807f));
    p = vfma(p, t, vsplat(-0.18628806f));
    p = vfma(p, t, vsplat(0.09678418f));
    p = vfma(p, t, vsplat(0.37409196f));
    p = vfma(p, t, vsplat(1.00002368f));
    p = vfma(p, t, vsplat(-1.26551223f));
    vf arg = vfma(-a, a, p); /* -a^2 + p, rounded once */
    vf e = t * vexp_1step(vmax(arg, vsplat(-88.0f)));
    e = vsel(arg < vsplat(-88.0f), vsplat(0.0f), e); /* erfc below 1e-38: 0 */
    vf half_e = vsplat(0.5f) * e;
    return x * vsel(x < vsplat(0.0f), half_e, vsplat(1.0f) - half_e);
}
SV_INLINE vf vsilu(vf x) {
    /* x / (1 + exp(-x)): x = -inf gives -inf / inf = nan as x * sigmoid(x) does.  Half the
     * work of x * vsigmoid(x), whose exp keeps subnormal results and whose two selects a
     * product with x does not need. */
    return vdiv_1p_exp(x, -x);
}
SV_INLINE vf vrelu(vf x) { return vsel(x > vsplat(0.0f), x, vsel(vnan_mask(x), x, vsplat(0.0f))); }

/* np.clip(x, 0, 6): a NaN stays NaN, as in NumPy's clip (constant first: NaN passes) */
SV_INLINE vf vrelu6(vf x) { return vmin(vsplat(6.0f), vmax(vsplat(0.0f), x)); }
/* Divided by 6 (not multiplied by 1/6) and in PyTorch's order, so that the usual spelling
 * (`x * clip(x + 3, 0, 6) / 6`) gives its bits. */
SV_INLINE vf vhard_swish(vf x) { return x * vrelu6(x + vsplat(3.0f)) / vsplat(6.0f); }
/* x < 0 ? slope * x : x (a NaN stays NaN, -0.0 stays -0.0) */
SV_INLINE vf vleaky(vf x, float slope) { return vsel(x < vsplat(0.0f), x * vsplat(slope), x); }
SV_INLINE vf vact(vf x, int act, float slope) {
    switch (act) {
    case SV_ACT_RELU: return vrelu(x);
    case SV_ACT_GELU_TANH: return vgelu_tanh(x);
    case SV_ACT_GELU_ERF: return vgelu_erf(x);
    case SV_ACT_SILU: return vsilu(x);
    case SV_ACT_SIGMOID: return vsigmoid(x);
    case SV_ACT_TANH: return vtanh(x);
    case SV_ACT_HARD_SWISH: return vhard_swish(x);
    case SV_ACT_LEAKY_RELU: return vleaky(x, slope);
    case SV_ACT_RELU6: return vrelu6(x);
    default: return x;
    }
}
/* sin and cos (Cephes' sinf and cosf): |x| less the nearest even multiple of pi/4 below
 * it, in three parts (the first two exact), then the sine or cosine polynomial of the rest
 * on [-pi/4, pi/4] by the octant, and the octant's sign.  For |x| <= 8192 within 2 ulp or
 * 1e-6 relative, except next to a zero of the function, where the reduction's error stays
 * below 1e-10 absolute (measured: 9e-8 at most anywhere, 5e-12 where the ulps are many);
 * a vector with a lane past 8192 (or an infinity, a NaN) is the C library's, lane by lane,
 * which reduces exactly.  libm per element took 4 ns an element, this 0.4. */
#define SV_TRIG_MAX 8192.0f
SV_INLINE vf vtrig_reduced(vf ax, vi *octant) {
    vf y = vfloor(ax * vsplat(1.27323954473516f)); /* 4 / pi */
    vi j = vcvt_i(y);
    vi odd = j & visplat(1);
    j = j + odd;
    y = y + vcvt_f(odd);
    *octant = j & visplat(7);
    vf r = vfma(y, vsplat(-0.78515625f), ax);
    r = vfma(y, vsplat(-2.4187564849853515625e-4f), r);
    return vfma(y, vsplat(-3.77489497744594108e-8f), r);
}

SV_INLINE vf vsin_poly(vf r, vf z) {
    vf p = vfma(vsplat(-1.9515295891E-4f), z, vsplat(8.3321608736E-3f));
    p = vfma(p, z, vsplat(-1.6666654611E-1f));
    return vfma(p * z, r, r);
}

SV_INLINE vf vcos_poly(vf z) {
    vf p = vfma(vsplat(2.443315711809948E-5f), z, vsplat(-1.388731625493765E-3f));
    p = vfma(p, z, vsplat(4.166664568298827E-2f));
    return vfma(p * z, z, vfma(z, vsplat(-0.5f), vsplat(1.0f)));
}

/* cosine: 1 (sine of the rest on octants 2 and 6); sine: 0 */
SV_INLINE vf vsincos(vf x, int cosine) {
    vf ax = vabs(x);
    vi j;
    vf r = vtrig_reduced(ax, &j);
    vf z = r * r;
    vi swap = (j & visplat(2)) != visplat(0); /* the other function's polynomial */
    vi neg = (j & visplat(4)) != visplat(0);
    vf s = vsin_poly(r, z), c = vcos_poly(z);
    vf y = cosine ? vsel(swap, s, c) : vsel(swap, c, s);
    neg = cosine ? neg ^ swap : neg ^ ((vi)x < visplat(0)); /* sin is odd: x's sign bit */
    return (vf)((vi)y ^ (neg & visplat((int32_t)0x80000000)));
}

SV_INLINE vf vtrig(vf x, int cosine) {
    if (vany(~(vabs(x) <= vsplat(SV_TRIG_MAX)))) { /* libm, lane by lane */
        float a[SV_VW];
        memcpy(a, &x, sizeof a);
        for (int i = 0; i < SV_VW; i++) a[i] = cosine ? __builtin_cosf(a[i]) : __builtin_sinf(a[i]);
        return vload(a);
    }
    return vsincos(x, cosine);
}

SV_INLINE vf vsin(vf x) { return vtrig(x, 0); }
SV_INLINE vf vcos(vf x) { return vtrig(x, 1); }


/* The inverse trigonometric functions (Cephes' atanf and asinf polynomials).  atan of
 * t >= 0 (an infinity too): t, (t - 1) / (t + 1) past tan(pi/8) or -1 / t past tan(3pi/8),
 * one division either way, then the polynomial and pi/4 or pi/2 added.  asin, acos, atan
 * and atan2 within 2.5 ulp of float64 (tests/native/test_tile.py; the worst just past the
 * polynomials' switch points, where pi/2 - 2 asin(s) or pi/4 + atan(x) doubles an error:
 * NumPy's own float32 arcsin is 2.8 ulp away at worst, its arctan 1.8); NaN passes
 * through. */
SV_INLINE vf vatan_pos(vf t) {
    const vf one = vsplat(1.0f);
    vi big = t > vsplat(2.414213562373095f), mid = t > vsplat(0.4142135623730950f);
    vf num = vsel(big, -one, vsel(mid, t - one, t));
    vf den = vsel(big, t, vsel(mid, t + one, one));
    vf x = num / den, z = x * x;
    vf y0 = vsel(big, vsplat(1.57079637f), vsel(mid, vsplat(0.785398185f), vsplat(0.0f)));
    vf p = vfma(vsplat(8.05374449538e-2f), z, vsplat(-1.38776856032e-1f));
    p = vfma(p, z, vsplat(1.99777106478e-1f));
    p = vfma(p, z, vsplat(-3.33329491539e-1f));
    vf lo = vsel(big, vsplat(-4.37113883e-8f), vsel(mid, vsplat(-2.18556941e-8f), vsplat(0.0f)));
    return y0 + (vfma(p * z, x, x) + lo); /* pi/2 and pi/4 in two parts */
}
SV_INLINE vf vatan(vf x) { return vcopysign(vatan_pos(vabs(x)), x); }

/* asin of s, |s| <= 1/2, with z = s * s (Cephes' asinf polynomial) */
SV_INLINE vf vasin_small(vf s, vf z) {
    vf p = vfma(vsplat(4.2163199048e-2f), z, vsplat(2.4181311049e-2f));
    p = vfma(p, z, vsplat(4.5470025998e-2f));
    p = vfma(p, z, vsplat(7.4953002686e-2f));
    p = vfma(p, z, vsplat(1.6666752422e-1f));
    return vfma(p * z, s, s);
}
/* asin(near) up to |x| = 1/2 (near: x or |x|), asin(sqrt((1 - |x|) / 2)) past it, where
 * *hi is set */
SV_INLINE vf vasin_halves(vf x, vf near, vi *hi) {
    const vf half = vsplat(0.5f);
    vf a = vabs(x);
    *hi = a > half;
    vf z = vsel(*hi, half * (vsplat(1.0f) - a), near * near);
    return vasin_small(vsel(*hi, vsqrt(z), near), z);
}
/* asin: past 1/2, pi/2 - 2 asin(sqrt((1 - |x|) / 2)); NaN outside [-1, 1] */
SV_INLINE vf vasin(vf x) {
    vi hi;
    vf a = vabs(x), r = vasin_halves(x, a, &hi);
    r = vsel(hi, vsplat(1.57079637f) + (vsplat(-4.37113883e-8f) - (r + r)), r);
    r = vsel(a > vsplat(1.0f), vsplat(__builtin_nanf("")), r);
    return vcopysign(r, x);
}
/* acos: pi/2 - asin(x) up to |x| = 1/2; past it 2 asin(sqrt((1 - |x|) / 2)), from pi for
 * a negative x */
SV_INLINE vf vacos(vf x) {
    vi hi;
    vf r = vasin_halves(x, x, &hi), twice = r + r;
    vf far = vsel(x > vsplat(0.0f), twice, vsplat(3.14159274f) + (vsplat(-8.74227766e-8f) - twice));
    vf y = vsel(hi, far, vsplat(1.57079637f) + (vsplat(-4.37113883e-8f) - r));
    return vsel(vabs(x) > vsplat(1.0f), vsplat(__builtin_nanf("")), y);
}
/* atan2(y, x), NumPy's (C99's) angle of the point (x, y): atan of the smaller of |x|, |y|
 * over the larger (0 where both are 0, 1 where both are infinite), from pi/2 where |y| is
 * the larger, from pi where x's sign bit is set (-0.0 too), then y's sign; NaN if either */
SV_INLINE vf vatan2(vf y, vf x) {
    const vf inf = vsplat(__builtin_inff()), zero = vsplat(0.0f);
    vf ax = vabs(x), ay = vabs(y);
    vi swap = ay > ax;
    vf num = vsel(swap, ax, ay), den = vsel(swap, ay, ax);
    vf r = vsel(den == zero, zero, num / den);
    r = vsel((ax == inf) & (ay == inf), vsplat(1.0f), r);
    vf a = vatan_pos(r);
    /* pi/2 -+ a where |y| is the larger (x's sign bit: +), else pi - a or a; in two parts */
    vi xneg = (vi)x < visplat(0);
    vf hi = vsel(swap, vsplat(1.57079637f), vsel(xneg, vsplat(3.14159274f), zero));
    vf lo = vsel(swap, vsplat(-4.37113883e-8f), vsel(xneg, vsplat(-8.74227766e-8f), zero));
    a = vsel(swap ^ xneg, -a, a);
    a = hi + (a + lo);
    return vsel(vnan_mask(x) | vnan_mask(y), x + y, vcopysign(a, y));
}
/* hypot: sqrt(x^2 + y^2) in double, rounded once to float (as the C library's hypotf), so
 * no square overflows; an infinity wins over a NaN, as in C99 */
SV_INLINE vf vhypot(vf x, vf y) {
    vf r;
    for (int i = 0; i < SV_VW; i++) {
        double a = x[i], b = y[i];
        r[i] = (float)__builtin_sqrt(a * a + b * b);
    }
    const vf inf = vsplat(__builtin_inff());
    return vsel((vabs(x) == inf) | (vabs(y) == inf), inf, r);
}

/* pow(x, y) for float32 lanes, computed in double (vpow_half_, vexp2_d_): y log2|x| within
 * about 1e-13 and 2^z within 3e-13, so that the one rounding to float gives the correctly
 * rounded power but next to a halfway point (over 50000 bases and exponents of every
 * magnitude, within half an ulp of float64's power); the C99 cases last, by selects: x =
 * +-0 or +-inf, |x| = 1 (also for y = +-inf), y = +-0 (1 even for a NaN x), x = 1 (1 even
 * for a NaN y), a negative x (odd integer y: negative; not an integer: NaN), NaN operands.
 * On 19200 elements, one thread: 45 us at avx512 and 91 at avx2, where the C library's
 * powf per element takes 98 (NumPy 2.4's, vectorized: 8).  With four lanes a vector
 * (generic) the double halves cost more than powf (247 us), which that level keeps. */
#if SV_VW == 4 /* two double lanes a half: the C library's powf per element is faster */
SV_INLINE vf vpow(vf x, vf y) {
    vf r;
    for (int i = 0; i < SV_VW; i++) r[i] = __builtin_powf(x[i], y[i]);
    return r;
}
#else
typedef double sv_vd_ __attribute__((vector_size(SV_VW * 4)));
typedef int64_t sv_vl_ __attribute__((vector_size(SV_VW * 4)));
typedef float sv_vh_ __attribute__((vector_size(SV_VW * 2)));
#if SV_VW == 8
#define SV_LO_(v) __builtin_shufflevector(v, v, 0, 1, 2, 3)
#define SV_HI_(v) __builtin_shufflevector(v, v, 4, 5, 6, 7)
#define SV_JOIN_(a, b) __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7)
#else
#define SV_LO_(v) __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7)
#define SV_HI_(v) __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15)
#define SV_JOIN_(a, b)                                                                     \
    __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#endif
SV_INLINE sv_vd_ sv_dsplat_(double v) {
    sv_vd_ r;
    for (int i = 0; i < SV_VW / 2; i++) r[i] = v;
    return r;
}
SV_INLINE sv_vd_ sv_dsel_(sv_vl_ m, sv_vd_ a, sv_vd_ b) {
    return (sv_vd_)(((sv_vl_)a & m) | ((sv_vl_)b & ~m));
}
/* the polynomial of coefficients c[0..n) (highest power first) at x, by Horner's rule
 * (n is a constant where it is called: the loop unrolls) */
SV_INLINE sv_vd_ sv_dhorner_(sv_vd_ x, const double *c, int n) {
    sv_vd_ p = sv_dsplat_(c[0]);
    for (int i = 1; i < n; i++) p = p * x + sv_dsplat_(c[i]);
    return p;
}
/* 2^z for z within +-400 (y log2|x|, clamped), in double: 2^round(z) times the Taylor
 * series of e^r, |r| < 0.35, to r^10 (within 3e-13) */
SV_INLINE sv_vd_ vexp2_d_(sv_vd_ z) {
    const sv_vd_ magic = sv_dsplat_(6755399441055744.0); /* 1.5 * 2^52 */
    sv_vd_ n = (z + magic) - magic;
    sv_vd_ r = (z - n) * sv_dsplat_(0.69314718055994531);
    static const double taylor[] = {1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040,
                                    1.0 / 720,     1.0 / 120,    1.0 / 24,    1.0 / 6,
                                    0.5,           1.0,          1.0};
    sv_vd_ q = sv_dhorner_(r, taylor, sizeof taylor / sizeof *taylor);
    sv_vl_ ni = __builtin_convertvector(n, sv_vl_);
    return q * (sv_vd_)((ni + 1023) << 52);
}
/* |x|^y for half a vector, from |x| = 2^e m: log2|x| = e + 2 atanh(t) / ln 2, t = (m - 1) /
 * (m + 1), with 1 / (m + 1) from float (inv) refined once in double (t within 1e-14) and
 * the series to t^15 (within 1e-14) */
SV_INLINE sv_vd_ vpow_half_(sv_vh_ mf, sv_vh_ ef, sv_vh_ invf, sv_vh_ yf) {
    sv_vd_ m = __builtin_convertvector(mf, sv_vd_), inv = __builtin_convertvector(invf, sv_vd_);
    sv_vd_ num = m - sv_dsplat_(1.0), den = m + sv_dsplat_(1.0); /* both exact */
    sv_vd_ t = num * inv;
    t = t + (num - t * den) * inv;
    sv_vd_ t2 = t * t;
    static const double atanh_series[] = {1.0 / 15, 1.0 / 13, 1.0 / 11, 1.0 / 9,
                                          1.0 / 7,  1.0 / 5,  1.0 / 3,  1.0};
    sv_vd_ p = sv_dhorner_(t2, atanh_series, sizeof atanh_series / sizeof *atanh_series);
    sv_vd_ l2 = __builtin_convertvector(ef, sv_vd_) + (t * p) * sv_dsplat_(2.8853900817779268);
    sv_vd_ z = __builtin_convertvector(yf, sv_vd_) * l2;
    z = sv_dsel_(z < sv_dsplat_(-400.0), sv_dsplat_(-400.0), z); /* -inf too */
    z = sv_dsel_(z > sv_dsplat_(400.0), sv_dsplat_(400.0), z);
    return vexp2_d_(z);
}
SV_INLINE vf vpow(vf x, vf y) {
    const vf inf = vsplat(__builtin_inff()), zero = vsplat(0.0f), one = vsplat(1.0f);
    vf ax = vabs(x);
    /* |x| = 2^e m, m in [sqrt(1/2), sqrt(2)), exactly in float (subnormals scaled first) */
    vi sub = ax < vsplat(1.17549435e-38f);
    vf xs = vsel(sub, ax * vsplat(8388608.0f), ax);
    vi bits = (vi)xs;
    vi e = ((bits >> 23) & visplat(0xff)) - visplat(127) - (sub & visplat(23));
    vf m = (vf)((bits & visplat(0x007fffff)) | visplat(0x3f800000)); /* [1, 2) */
    vi big = m > vsplat(1.41421356f);
    m = vsel(big, m * vsplat(0.5f), m);
    vf ef = vcvt_f(e - big); /* big is -1 where set */
    vf inv = one / (m + one);
    sv_vh_ rl = __builtin_convertvector(vpow_half_(SV_LO_(m), SV_LO_(ef), SV_LO_(inv), SV_LO_(y)),
                                        sv_vh_);
    sv_vh_ rh = __builtin_convertvector(vpow_half_(SV_HI_(m), SV_HI_(ef), SV_HI_(inv), SV_HI_(y)),
                                        sv_vh_);
    vf r = SV_JOIN_(rl, rh);
    vi yneg = y < zero;
    r = vsel(ax == zero, vsel(yneg, inf, zero), r);
    r = vsel(ax == inf, vsel(yneg, zero, inf), r);
    r = vsel(ax == one, one, r); /* (-1)^+-inf too; (-1)^y's sign and NaN below */
    vi yint = vfloor(y) == y; /* infinities are (even) integers; NaN is not */
    vf ay = vmin(vabs(y), vsplat(16777216.0f)); /* past 2^24 every float is even */
    vi yodd = yint & ((vcvt_i(ay) & visplat(1)) != visplat(0));
    vi xneg = (vi)x < visplat(0); /* the sign bit: -0.0 too */
    r = vsel(xneg & yodd, -r, r);
    r = vsel((x < zero) & (x > -inf) & ~yint, vsplat(__builtin_nanf("")), r);
    r = vsel(vnan_mask(x) | vnan_mask(y), x + y, r);
    r = vsel(y == zero, one, r);
    return vsel(x == one, one, r);
}
#undef SV_LO_
#undef SV_HI_
#undef SV_JOIN_
#endif
#endif
