/* Portable SIMD vocabulary for the per-ISA translation units.
 *
 * Included by isa_<level>.c after SV_VW (floats per vector) is defined and the target
 * pragma is in force, so that every function below is compiled for that instruction set.
 * GCC/Clang vector extensions give each ISA the same source: `vf` is SV_VW floats, `vi`
 * SV_VW int32 lanes; comparisons yield all-ones/zero int lanes.  Loads and stores go
 * through memcpy (unaligned, compiled to one vector move).
 */
#ifndef SV_SIMD_H
#define SV_SIMD_H
#include <stdint.h>
#include <string.h>

#if !defined(SV_VW)
#error "define SV_VW before including simd.h"
#endif

typedef float vf __attribute__((vector_size(SV_VW * 4)));
typedef int32_t vi __attribute__((vector_size(SV_VW * 4)));
typedef uint32_t vu __attribute__((vector_size(SV_VW * 4)));

#define SV_INLINE static inline __attribute__((always_inline))

#if SV_VW == 4
#define SV_LANES_(x) x, x, x, x
#elif SV_VW == 8
#define SV_LANES_(x) x, x, x, x, x, x, x, x
#elif SV_VW == 16
#define SV_LANES_(x) x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x
#else
#error "SV_VW must be 4, 8 or 16"
#endif
SV_INLINE vf vsplat(float x) { return (vf){SV_LANES_(x)}; }
SV_INLINE vi visplat(int32_t x) { return (vi){SV_LANES_(x)}; }
SV_INLINE vf vload(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}
SV_INLINE void vstore(float *p, vf v) { memcpy(p, &v, sizeof v); }
/* First n (< SV_VW) lanes from p, the rest `fill`; and the first n lanes stored.  At
 * AVX-512 and AVX2 one masked move (the lanes past n are neither read nor written, and
 * cannot fault); lane by lane the vector went through memory (a dense layer of 4 output
 * columns: 13 ns a row in its partial stores and residual loads). */
#if defined(__x86_64__) && SV_VW == 16
#include <immintrin.h>
SV_INLINE vf vload_part(const float *p, int n, float fill) {
    return (vf)_mm512_mask_loadu_ps((__m512)vsplat(fill), (__mmask16)((1u << n) - 1u), p);
}
SV_INLINE void vstore_part(float *p, vf v, int n) {
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1u), (__m512)v);
}
#elif defined(__x86_64__) && SV_VW == 8
#include <immintrin.h>
SV_INLINE vi vfirst_(int n) {
    const vi iota = {0, 1, 2, 3, 4, 5, 6, 7};
    return iota < (vi){n, n, n, n, n, n, n, n};
}
SV_INLINE vf vload_part(const float *p, int n, float fill) {
    vi m = vfirst_(n);
    vf v = (vf)_mm256_maskload_ps(p, (__m256i)m);
    return (vf)(((vi)v & m) | ((vi)vsplat(fill) & ~m));
}
SV_INLINE void vstore_part(float *p, vf v, int n) {
    _mm256_maskstore_ps(p, (__m256i)vfirst_(n), (__m256)v);
}
#else
SV_INLINE vf vload_part(const float *p, int n, float fill) {
    vf v = vsplat(fill);
    for (int i = 0; i < n; i++) v[i] = p[i];
    return v;
}
SV_INLINE void vstore_part(float *p, vf v, int n) {
    for (int i = 0; i < n; i++) p[i] = v[i];
}
#endif
/* All-ones in the first n lanes (n < SV_VW), zero in the rest: a vector select for a
 * row's last partial vector (writing lanes one by one makes the compiler keep the vector
 * in memory, and a sum carried through it then waits on a store each iteration). */
SV_INLINE vi vfirst(int64_t n) {
#if SV_VW == 4
    const vi iota = {0, 1, 2, 3};
#elif SV_VW == 8
    const vi iota = {0, 1, 2, 3, 4, 5, 6, 7};
#else
    const vi iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
#endif
    return iota < visplat((int32_t)n);
}
/* Whether any lane of a comparison's mask is set: a move of the sign bits and a branch on
 * x86 (the compilers' builtins: immintrin.h would add 0.25 s to each generated library's
 * compile), an OR of the lanes elsewhere. */
#if defined(__x86_64__) && SV_VW == 16
typedef float sv_half_f_ __attribute__((vector_size(32)));
typedef int32_t sv_half_i_ __attribute__((vector_size(32)));
#endif
SV_INLINE int vany(vi m) {
#if defined(__x86_64__) && SV_VW == 16
    sv_half_i_ lo = __builtin_shufflevector(m, m, 0, 1, 2, 3, 4, 5, 6, 7);
    sv_half_i_ hi = __builtin_shufflevector(m, m, 8, 9, 10, 11, 12, 13, 14, 15);
    return __builtin_ia32_movmskps256((sv_half_f_)(lo | hi)) != 0;
#elif defined(__x86_64__) && SV_VW == 8
    return __builtin_ia32_movmskps256((vf)m) != 0;
#elif defined(__x86_64__) && SV_VW == 4
    return __builtin_ia32_movmskps((vf)m) != 0;
#else
    int32_t any = 0;
    for (int i = 0; i < SV_VW; i++) any |= m[i];
    return any != 0;
#endif
}
SV_INLINE vi vasi(vf v) { return (vi)v; }
SV_INLINE vf vasf(vi v) { return (vf)v; }
/* m ? a : b, lane by lane, for a mask from a comparison. */
SV_INLINE vf vsel(vi m, vf a, vf b) { return (vf)((m & (vi)a) | (~m & (vi)b)); }
SV_INLINE vf vmax(vf a, vf b) { return vsel(a > b, a, b); }
SV_INLINE vf vmin(vf a, vf b) { return vsel(a < b, a, b); }
SV_INLINE vf vabs(vf a) { return (vf)((vi)a & visplat(0x7fffffff)); }
SV_INLINE vf vcopysign(vf mag, vf sign) {
    return (vf)(((vi)mag & visplat(0x7fffffff)) | ((vi)sign & visplat((int32_t)0x80000000)));
}
SV_INLINE vf vfma(vf a, vf b, vf c) { return a * b + c; } /* contracted under -ffp-contract=fast */
SV_INLINE vi vcvt_i(vf a) { return __builtin_convertvector(a, vi); } /* truncates */
SV_INLINE vf vcvt_f(vi a) { return __builtin_convertvector(a, vf); }
/* Round to nearest integer (|a| < 2^22), as a float. */
SV_INLINE vf vround(vf a) {
    const vf magic = vsplat(12582912.0f); /* 1.5 * 2^23 */
    return (a + magic) - magic;
}
SV_INLINE vf vfloor(vf a) {
    vf big = vsplat(8388608.0f);
    vf t = vcvt_f(vcvt_i(a));
    t = vsel(t > a, t - vsplat(1.0f), t);
    /* large values (and nan/inf) are already integral, and so is a zero, whose sign the
     * conversion loses (floor(-0.0) is -0.0; ceil(0.0), as -floor(-0.0), is 0.0) */
    return vsel((vabs(a) < big) & (a != vsplat(0.0f)), t, a);
}

/* np.rint: to the nearest integer, halves to even, a zero keeping a's sign, any magnitude
 * (vround's is below 2^22): a plus and minus 2^23 of its sign, where the sum's spacing is
 * 1, so the addition rounds it as rint does (the default rounding, ties to even); past
 * 2^23 every float is an integer.  Half the operations of rounding from two floors. */
SV_INLINE vf vrint(vf a) {
    const vf big = vsplat(8388608.0f);
    vf m = vcopysign(big, a);
    vf r = vcopysign((a + m) - m, a);
    return vsel(vabs(a) < big, r, a);
}
/* Horizontal sum and max as trees of shuffles, not chains of SV_VW dependent scalar
 * operations: a row op calls them once or twice per row (with the tail selects below, one
 * thread, AVX-512: layer norm of 512 rows of 256 35-38 -> 34-35 us, softmax of 64 rows of
 * 128 7.2-7.4 -> 6.7-6.8 us). */
#if SV_VW == 16
#define SV_SWAP8_ 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7
#define SV_SWAP4_ 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11
#define SV_SWAP2_ 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13
#define SV_SWAP1_ 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14
#define SV_TREE_(v, op)                                                                      \
    v = op(v, __builtin_shufflevector(v, v, SV_SWAP8_));                                     \
    v = op(v, __builtin_shufflevector(v, v, SV_SWAP4_));                                     \
    v = op(v, __builtin_shufflevector(v, v, SV_SWAP2_));                                     \
    v = op(v, __builtin_shufflevector(v, v, SV_SWAP1_))
#elif SV_VW == 8
#define SV_TREE_(v, op)                                                                      \
    v = op(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3));                        \
    v = op(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5));                        \
    v = op(v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6))
#else
#define SV_TREE_(v, op)                                                                      \
    v = op(v, __builtin_shufflevector(v, v, 2, 3, 0, 1));                                    \
    v = op(v, __builtin_shufflevector(v, v, 1, 0, 3, 2))
#endif
SV_INLINE vf vadd_(vf a, vf b) { return a + b; }
/* a NaN in either operand wins, so a NaN anywhere in the vector comes out */
SV_INLINE vf vmaxnan_(vf a, vf b) { return vsel((b > a) | (b != b), b, a); }
SV_INLINE float vhsum(vf v) {
    SV_TREE_(v, vadd_);
    return v[0];
}
/* the largest lane, NaN if a lane is NaN */
SV_INLINE float vhmax(vf v) {
    SV_TREE_(v, vmaxnan_);
    return v[0];
}
#endif
