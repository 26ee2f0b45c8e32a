/* AVX-512 (F, DQ, BW, VL): 16-float vectors, tiles of 12 rows by two 16-column panels (24
 * accumulators of 32 registers; ukr_rows2, conv_rows2). */
#include "sv_internal.h"
#ifdef SV_HAVE_X86
SV_TARGET_PUSH("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,bmi2")
#define SV_ISA_NAME avx512
#define SV_ISA_LEVEL 2
#define SV_VW 16
#define SV_MR 12
#include "isa_template.h"
SV_TARGET_POP
#endif
