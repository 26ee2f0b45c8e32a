/* Array entry points of the vector math, for one instruction set (isa_<level>.c). */
#include "vmath.h"

#define SV_VMATH_LOOP(NAME, F)                                                             \
    static void SV_FN(NAME)(float *dst, const float *src, int64_t n) {                       \
        int64_t i = 0;                                                                     \
        for (; i + SV_VW <= n; i += SV_VW) vstore(dst + i, F(vload(src + i)));             \
        if (i < n) {                                                                       \
            int left = (int)(n - i);                                                       \
            vstore_part(dst + i, F(vload_part(src + i, left, 0.0f)), left);                \
        }                                                                                  \
    }

SV_VMATH_LOOP(vm_exp, vexp)
SV_VMATH_LOOP(vm_log, vlog)
SV_VMATH_LOOP(vm_tanh, vtanh)
SV_VMATH_LOOP(vm_erf, verf)
SV_VMATH_LOOP(vm_sigmoid, vsigmoid)
SV_VMATH_LOOP(vm_sqrt, vsqrt)
SV_VMATH_LOOP(vm_gelu_tanh, vgelu_tanh)
SV_VMATH_LOOP(vm_gelu_erf, vgelu_erf)
SV_VMATH_LOOP(vm_silu, vsilu)
#undef SV_VMATH_LOOP
