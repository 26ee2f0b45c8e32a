/* Helpers of generated chains (shapevm.jit.backend.codegen): booleans as 0/1 floats, the
 * NaN rules of NumPy's maximum/minimum, and per-lane calls of scalar libm functions. */
#ifndef SV_SVGEN_H
#define SV_SVGEN_H
#include <math.h>
#include "vmath.h"

SV_INLINE vf svg_b(vi m) { return vsel(m, vsplat(1.0f), vsplat(0.0f)); }
/* SV_VW bools (one byte each, any non-zero is true) to and from 0/1 float lanes */
typedef uint8_t svg_vb __attribute__((vector_size(SV_VW)));
SV_INLINE vf svg_vload_b(const void *p) {
    svg_vb b;
    memcpy(&b, p, sizeof b);
    return svg_b(__builtin_convertvector(b, vi) != visplat(0));
}
SV_INLINE void svg_vstore_b(void *p, vf v) {
    svg_vb b = __builtin_convertvector((v != vsplat(0.0f)) & visplat(1), svg_vb);
    memcpy(p, &b, sizeof b);
}
/* NumPy: a NaN in either operand is the result */
SV_INLINE vf svg_max(vf a, vf b) {
    vf r = vsel(a >= b, a, b);
    return vsel(a != a, a, vsel(b != b, b, r));
}
SV_INLINE vf svg_min(vf a, vf b) {
    vf r = vsel(a <= b, a, b);
    return vsel(a != a, a, vsel(b != b, b, r));
}
SV_INLINE vf svg_sign(vf a) {
    vf r = vsel(a > vsplat(0.0f), vsplat(1.0f), vsel(a < vsplat(0.0f), vsplat(-1.0f), a));
    return r; /* 0 -> 0 (signed), NaN -> NaN */
}
SV_INLINE vf svg_map2(float (*f)(float, float), vf a, vf b) {
    vf r;
    for (int i = 0; i < SV_VW; i++) r[i] = f(a[i], b[i]);
    return r;
}
/* NumPy's floor_divide and remainder for floats (npy_divmodf) */
static inline float svg_mod(float a, float b) {
    if (b == 0.0f) return fmodf(a, b);
    float m = fmodf(a, b);
    if (m != 0.0f) {
        if ((b < 0) != (m < 0)) m += b;
    } else {
        m = copysignf(0.0f, b);
    }
    return m;
}
static inline float svg_floordiv(float a, float b) {
    if (b == 0.0f) return a / b;
    float m = fmodf(a, b);
    float div = (a - m) / b;
    if (m != 0.0f && ((b < 0) != (m < 0))) div -= 1.0f;
    float fd;
    if (div != 0.0f) {
        fd = floorf(div);
        if (div - fd > 0.5f) fd += 1.0f;
    } else {
        fd = copysignf(0.0f, a / b);
    }
    return fd;
}

#include "svgen_env.h"
typedef svg_env_t svg_env; /* the executor's helpers passed to generated code (`self`) */
#endif
