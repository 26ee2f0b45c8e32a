/* The body of one isa_<level>.c: every templated kernel family for SV_ISA_NAME, and its
 * function table.  Before including: SV_ISA_NAME (token), SV_ISA_LEVEL, SV_VW, SV_MR, and
 * the target pragma in force. */
#define SV_CAT_(a, b) a##_##b
#define SV_CAT(a, b) SV_CAT_(a, b)
#define SV_FN(name) SV_CAT(name, SV_ISA_NAME)

#include "gemm_kern.h"
#include "vmath_kern.h"
#include "conv_kern.h"
#include "rowops_kern.h"
#include "tile_kern.h"
#include "int_kern.h"

#define SV_STRX_(x) #x
#define SV_STRX(x) SV_STRX_(x)

const sv_isa_table SV_CAT(sv_table, SV_ISA_NAME) = {
    .name = SV_STRX(SV_ISA_NAME),
    .level = SV_ISA_LEVEL,
    .vw = SV_VW,
    .mr = SV_MR,
    .ukr = SV_FN(ukr),
    .vmath =
        {
            [SV_VM_EXP] = SV_FN(vm_exp),
            [SV_VM_LOG] = SV_FN(vm_log),
            [SV_VM_TANH] = SV_FN(vm_tanh),
            [SV_VM_ERF] = SV_FN(vm_erf),
            [SV_VM_SIGMOID] = SV_FN(vm_sigmoid),
            [SV_VM_SQRT] = SV_FN(vm_sqrt),
            [SV_VM_GELU_TANH] = SV_FN(vm_gelu_tanh),
            [SV_VM_GELU_ERF] = SV_FN(vm_gelu_erf),
            [SV_VM_SILU] = SV_FN(vm_silu),
        },
    .act_rows = SV_FN(act_rows),
    .conv = &SV_FN(conv_kern),
    .norm_row = SV_FN(norm_row),
    .softmax_row = SV_FN(softmax_row),
    .softmax_rows = SV_FN(softmax_rows),
    .attn_softmax = SV_FN(attn_softmax),
    .tile = &SV_FN(tile_kernels),
    .int_row = {SV_FN(int_row_i32), SV_FN(int_row_i64)},
};
