/* Portable C: 4-float vectors (SSE2 on x86-64, NEON or scalar elsewhere). */
#include "sv_internal.h"
#define SV_ISA_NAME generic
#define SV_ISA_LEVEL 0
#define SV_VW 4
#define SV_MR 3
#include "isa_template.h"
