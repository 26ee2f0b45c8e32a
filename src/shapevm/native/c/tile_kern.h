/* The tile interpreter's kernels for one instruction set (included by isa_<level>.c): one
 * vectorized loop per op over n floats (n a multiple of SV_VW, at most SV_TILE_LEN), and
 * the segment reductions.  Bools are 0.0f / 1.0f lanes.
 *
 * floordiv and mod run per element, following NumPy's npy_divmodf step by step (signs,
 * zeros, infinities and NaN as NumPy gives them); pow, the trigonometric functions and
 * hypot are vmath.h's.
 */
#include "vmath.h"

SV_INLINE vf vbool(vi m) { return vsel(m, vsplat(1.0f), vsplat(0.0f)); }
SV_INLINE vi vtrue(vf a) { return a != vsplat(0.0f); }

SV_INLINE vf vsign(vf a) {
    vf one = vsplat(1.0f), zero = vsplat(0.0f);
    return vsel(a > zero, one, vsel(a < zero, -one, vsel(a == zero, zero, a)));
}
/* NaN-propagating maximum / minimum, as np.maximum / np.minimum */
SV_INLINE vf vmaxn(vf a, vf b) { return vsel((a >= b) | vnan_mask(a), a, b); }
SV_INLINE vf vminn(vf a, vf b) { return vsel((a <= b) | vnan_mask(a), a, b); }
/* for a fold in halves: b (the upper lanes) wins a tie */
SV_INLINE vf vmaxn_hi(vf a, vf b) { return vmaxn(b, a); }
SV_INLINE vf vminn_hi(vf a, vf b) { return vminn(b, a); }

/* NumPy's npy_divmodf: the floor quotient, and the remainder with the sign of b. */
static inline float SV_FN(divmodf)(float a, float b, float *modulus) {
    float mod = __builtin_fmodf(a, b);
    if (!b) {
        *modulus = mod;
        return a / b;
    }
    float div = (a - mod) / b;
    if (mod) {
        if ((b < 0) != (mod < 0)) {
            mod += b;
            div -= 1.0f;
        }
    } else {
        mod = __builtin_copysignf(0.0f, b);
    }
    float floordiv;
    if (div) {
        floordiv = __builtin_floorf(div);
        if (div - floordiv > 0.5f) floordiv += 1.0f;
    } else {
        floordiv = __builtin_copysignf(0.0f, a / b);
    }
    *modulus = mod;
    return floordiv;
}

#define SV_TK_UNARY(NAME, EXPR)                                                            \
    static void SV_FN(tk_##NAME)(float *dst, const float *pa, const float *pb,            \
                                 const float *pc, int n) {                                 \
        (void)pb;                                                                          \
        (void)pc;                                                                          \
        for (int i = 0; i < n; i += SV_VW) {                                               \
            vf a = vload(pa + i);                                                          \
            vstore(dst + i, EXPR);                                                         \
        }                                                                                  \
    }
#define SV_TK_BINARY(NAME, EXPR)                                                           \
    static void SV_FN(tk_##NAME)(float *dst, const float *pa, const float *pb,            \
                                 const float *pc, int n) {                                 \
        (void)pc;                                                                          \
        for (int i = 0; i < n; i += SV_VW) {                                               \
            vf a = vload(pa + i), b = vload(pb + i);                                       \
            vstore(dst + i, EXPR);                                                         \
        }                                                                                  \
    }
#define SV_TK_SCALAR(NAME, EXPR)                                                           \
    static void SV_FN(tk_##NAME)(float *dst, const float *pa, const float *pb,            \
                                 const float *pc, int n) {                                 \
        (void)pc;                                                                          \
        for (int i = 0; i < n; i++) {                                                      \
            float a = pa[i], b = pb ? pb[i] : 0.0f, mod;                                   \
            (void)b;                                                                       \
            (void)mod;                                                                     \
            dst[i] = EXPR;                                                                 \
        }                                                                                  \
    }

SV_TK_UNARY(neg, -a)
SV_TK_UNARY(abs, vabs(a))
SV_TK_UNARY(exp, vexp(a))
SV_TK_UNARY(log, vlog(a))
SV_TK_UNARY(sqrt, vsqrt(a))
SV_TK_UNARY(tanh, vtanh(a))
SV_TK_UNARY(erf, verf(a))
SV_TK_UNARY(sigmoid, vsigmoid(a))
SV_TK_UNARY(softplus, vsoftplus(a))
SV_TK_UNARY(expm1, vexpm1(a))
SV_TK_UNARY(log1p, vlog1p(a))
SV_TK_UNARY(log2, vlog2(a))
SV_TK_UNARY(log10, vlog10(a))
SV_TK_UNARY(floor, vfloor(a))
SV_TK_UNARY(ceil, -vfloor(-a))
SV_TK_UNARY(round, vrint(a))
SV_TK_UNARY(sign, vsign(a))
SV_TK_UNARY(logical_not, vbool(a == vsplat(0.0f)))
SV_TK_UNARY(copy, a)
SV_TK_UNARY(ne0, vbool(vtrue(a)))
SV_TK_UNARY(square, a * a)
SV_TK_UNARY(sin, vsin(a))
SV_TK_UNARY(cos, vcos(a))
SV_TK_UNARY(atan, vatan(a))
SV_TK_UNARY(asin, vasin(a))
SV_TK_UNARY(acos, vacos(a))
SV_TK_SCALAR(floordiv, b ? SV_FN(divmodf)(a, b, &mod) : a / b)
SV_TK_SCALAR(mod, b ? (SV_FN(divmodf)(a, b, &mod), mod) : __builtin_fmodf(a, b))
SV_TK_BINARY(pow, vpow(a, b))
SV_TK_BINARY(atan2, vatan2(a, b))
SV_TK_BINARY(hypot, vhypot(a, b))
SV_TK_BINARY(add, a + b)
SV_TK_BINARY(sub, a - b)
SV_TK_BINARY(mul, a * b)
SV_TK_BINARY(div, a / b)
SV_TK_BINARY(maximum, vmaxn(a, b))
SV_TK_BINARY(minimum, vminn(a, b))
SV_TK_BINARY(logical_and, vbool(vtrue(a) & vtrue(b)))
SV_TK_BINARY(logical_or, vbool(vtrue(a) | vtrue(b)))
SV_TK_BINARY(logical_xor, vbool(vtrue(a) ^ vtrue(b)))
SV_TK_BINARY(less, vbool(a < b))
SV_TK_BINARY(greater, vbool(a > b))
SV_TK_BINARY(equal, vbool(a == b))
SV_TK_BINARY(less_equal, vbool(a <= b))
SV_TK_BINARY(greater_equal, vbool(a >= b))
SV_TK_BINARY(not_equal, vbool(a != b))
#undef SV_TK_UNARY
#undef SV_TK_BINARY
#undef SV_TK_SCALAR

static void SV_FN(tk_where)(float *dst, const float *pa, const float *pb, const float *pc,
                            int n) {
    for (int i = 0; i < n; i += SV_VW)
        vstore(dst + i, vsel(vtrue(vload(pa + i)), vload(pb + i), vload(pc + i)));
}

/* The reduction of n (any count) floats: sum, max, min or product (NaN propagates). */
static float SV_FN(tk_reduce)(int red, const float *v, int n) {
    int i = 0;
    if (red == SV_RED_MAX || red == SV_RED_MIN) {
        bool mx = red == SV_RED_MAX;
        vf acc = vsplat(mx ? -__builtin_inff() : __builtin_inff());
        for (; i + SV_VW <= n; i += SV_VW)
            acc = mx ? vmaxn(vload(v + i), acc) : vminn(vload(v + i), acc);
        if (i < n) { /* the rest as one partial vector, the identity in its other lanes
                      * (filled lane by lane, the vector went through memory per lane) */
            float rest[SV_VW];
            vstore(rest, vsplat(mx ? -__builtin_inff() : __builtin_inff()));
            memcpy(rest, v + i, sizeof(float) * (size_t)(n - i));
            acc = mx ? vmaxn(vload(rest), acc) : vminn(vload(rest), acc);
        }
        /* the lanes folded in halves (a compare per lane in order, its branches taken as
         * the data falls, took 21 ns a row of 16: 1.3 ns an element); a NaN anywhere wins,
         * and of equal values (0.0 and -0.0) the upper half's, as NumPy's later element */
        if (mx) {
            SV_TREE_(acc, vmaxn_hi);
        } else {
            SV_TREE_(acc, vminn_hi);
        }
        return acc[0];
    }
    if (red == SV_RED_PROD) {
        vf acc = vsplat(1.0f);
        for (; i + SV_VW <= n; i += SV_VW) acc *= vload(v + i);
        float r = 1.0f;
        for (int l = 0; l < SV_VW; l++) r *= acc[l];
        for (; i < n; i++) r *= v[i];
        return r;
    }
    vf a0 = vsplat(0.0f), a1 = vsplat(0.0f);
    for (; i + 2 * SV_VW <= n; i += 2 * SV_VW) {
        a0 += vload(v + i);
        a1 += vload(v + i + SV_VW);
    }
    float r = vhsum(a0 + a1);
    for (; i < n; i++) r += v[i];
    return r;
}

static const sv_tile_kernels SV_FN(tile_kernels) = {
    .op =
        {
            [SV_TOP_NEG] = SV_FN(tk_neg),
            [SV_TOP_ABS] = SV_FN(tk_abs),
            [SV_TOP_EXP] = SV_FN(tk_exp),
            [SV_TOP_LOG] = SV_FN(tk_log),
            [SV_TOP_SQRT] = SV_FN(tk_sqrt),
            [SV_TOP_TANH] = SV_FN(tk_tanh),
            [SV_TOP_SIN] = SV_FN(tk_sin),
            [SV_TOP_COS] = SV_FN(tk_cos),
            [SV_TOP_ERF] = SV_FN(tk_erf),
            [SV_TOP_SIGMOID] = SV_FN(tk_sigmoid),
            [SV_TOP_FLOOR] = SV_FN(tk_floor),
            [SV_TOP_CEIL] = SV_FN(tk_ceil),
            [SV_TOP_ROUND] = SV_FN(tk_round),
            [SV_TOP_SIGN] = SV_FN(tk_sign),
            [SV_TOP_LOGICAL_NOT] = SV_FN(tk_logical_not),
            [SV_TOP_ADD] = SV_FN(tk_add),
            [SV_TOP_SUB] = SV_FN(tk_sub),
            [SV_TOP_MUL] = SV_FN(tk_mul),
            [SV_TOP_DIV] = SV_FN(tk_div),
            [SV_TOP_MAXIMUM] = SV_FN(tk_maximum),
            [SV_TOP_MINIMUM] = SV_FN(tk_minimum),
            [SV_TOP_POW] = SV_FN(tk_pow),
            [SV_TOP_FLOORDIV] = SV_FN(tk_floordiv),
            [SV_TOP_MOD] = SV_FN(tk_mod),
            [SV_TOP_LOGICAL_AND] = SV_FN(tk_logical_and),
            [SV_TOP_LOGICAL_OR] = SV_FN(tk_logical_or),
            [SV_TOP_LOGICAL_XOR] = SV_FN(tk_logical_xor),
            [SV_TOP_LESS] = SV_FN(tk_less),
            [SV_TOP_GREATER] = SV_FN(tk_greater),
            [SV_TOP_EQUAL] = SV_FN(tk_equal),
            [SV_TOP_LESS_EQUAL] = SV_FN(tk_less_equal),
            [SV_TOP_GREATER_EQUAL] = SV_FN(tk_greater_equal),
            [SV_TOP_NOT_EQUAL] = SV_FN(tk_not_equal),
            [SV_TOP_WHERE] = SV_FN(tk_where),
            [SV_TOP_SOFTPLUS] = SV_FN(tk_softplus),
            [SV_TOP_EXPM1] = SV_FN(tk_expm1),
            [SV_TOP_LOG1P] = SV_FN(tk_log1p),
            [SV_TOP_LOG2] = SV_FN(tk_log2),
            [SV_TOP_LOG10] = SV_FN(tk_log10),
            [SV_TOP_ATAN] = SV_FN(tk_atan),
            [SV_TOP_ASIN] = SV_FN(tk_asin),
            [SV_TOP_ACOS] = SV_FN(tk_acos),
            [SV_TOP_ATAN2] = SV_FN(tk_atan2),
            [SV_TOP_HYPOT] = SV_FN(tk_hypot),
            [SV_TK_COPY] = SV_FN(tk_copy),
            [SV_TK_NE0] = SV_FN(tk_ne0),
            [SV_TK_SQUARE] = SV_FN(tk_square),
        },
    .reduce = SV_FN(tk_reduce),
};
