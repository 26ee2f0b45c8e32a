/* AVX2 + FMA: 8-float vectors, 6 x 16 tiles (12 accumulators of 16 registers). */
#include "sv_internal.h"
#ifdef SV_HAVE_X86
SV_TARGET_PUSH("avx2,fma,bmi2")
#define SV_ISA_NAME avx2
#define SV_ISA_LEVEL 1
#define SV_VW 8
#define SV_MR 6
#include "isa_template.h"
SV_TARGET_POP
#endif
