/* The tile interpreter's programs (svtile.h): the opcode table, and sv_tile_plan_init,
 * which checks a program (counts, register indices, definition before use, arity, opcode
 * and dtype ranges, typing) and resolves each instruction to a kernel for its dtypes. */
#include "sv_internal.h"
#include <stdio.h>
#include <string.h>

#define SV_NAME_(id, name, arity) name,
#define SV_ARITY_(id, name, arity) arity,
const char *const sv_tile_op_names[SV_TOP_COUNT] = {SV_TILE_OPS(SV_NAME_)};
const int sv_tile_op_arity[SV_TOP_COUNT] = {SV_TILE_OPS(SV_ARITY_)};
#undef SV_NAME_
#undef SV_ARITY_
#define SV_RNAME_(id, name) name,
const char *const sv_tile_red_names[SV_RED_COUNT] = {SV_TILE_REDUCTIONS(SV_RNAME_)};
#undef SV_RNAME_
const char *const sv_tile_dtype_names[SV_DT_COUNT] = {"f32", "bool", "i32", "i64"};

/* Typing classes of the opcodes (the op table's dtype rules, restricted to f32 / bool
 * registers; int32/int64 inputs only as `result_dtype` allows them). */
enum { T_F32, T_SAME, T_LOGIC, T_CMP, T_WHERE, T_CAST };

static int op_class(int op) {
    switch (op) {
    case SV_TOP_ABS:
    case SV_TOP_ADD:
    case SV_TOP_MUL:
    case SV_TOP_MAXIMUM:
    case SV_TOP_MINIMUM: return T_SAME;
    case SV_TOP_LOGICAL_NOT:
    case SV_TOP_LOGICAL_AND:
    case SV_TOP_LOGICAL_OR:
    case SV_TOP_LOGICAL_XOR: return T_LOGIC;
    case SV_TOP_LESS:
    case SV_TOP_GREATER:
    case SV_TOP_EQUAL:
    case SV_TOP_LESS_EQUAL:
    case SV_TOP_GREATER_EQUAL:
    case SV_TOP_NOT_EQUAL: return T_CMP;
    case SV_TOP_WHERE: return T_WHERE;
    case SV_TOP_CAST: return T_CAST;
    default: return T_F32;
    }
}

/* NumPy's meaning of the same-dtype ops on bool: or, and, identity. */
static int bool_kernel(int op) {
    switch (op) {
    case SV_TOP_ADD:
    case SV_TOP_MAXIMUM: return SV_TOP_LOGICAL_OR;
    case SV_TOP_MUL:
    case SV_TOP_MINIMUM: return SV_TOP_LOGICAL_AND;
    default: return SV_TK_COPY;
    }
}

int sv_tile_fail(sv_tile_error *e, const char *what, const char *expected, const char *found,
                 const char *fix) {
    snprintf(e->what, sizeof e->what, "%s", what);
    snprintf(e->expected, sizeof e->expected, "%s", expected);
    snprintf(e->found, sizeof e->found, "%s", found);
    snprintf(e->fix, sizeof e->fix, "%s", fix);
    return -1;
}

static int fail(sv_tile_error *e, const char *expected, const char *fix, const char *what,
                const char *found) {
    return sv_tile_fail(e, what, expected, found, fix);
}

static bool is_int(int dt) { return dt == SV_DT_I32 || dt == SV_DT_I64; }

static int check_counts(const sv_tile_prog *p, sv_tile_error *e) {
    char found[200];
    snprintf(found, sizeof found, "%d inputs, %d constants, %d registers, %d instructions",
             p->n_inputs, p->n_consts, p->n_regs, p->n_instr);
    char exp[200];
    snprintf(exp, sizeof exp, "at most %d inputs, %d constants, %d registers (inputs and "
             "constants included) and %d instructions", SV_TILE_MAX_INPUTS,
             SV_TILE_MAX_CONSTS, SV_TILE_MAX_REGS, SV_TILE_MAX_INSTR);
    if (p->n_inputs < 0 || p->n_inputs > SV_TILE_MAX_INPUTS || p->n_consts < 0 ||
        p->n_consts > SV_TILE_MAX_CONSTS || p->n_instr < 0 || p->n_instr > SV_TILE_MAX_INSTR ||
        p->n_regs < p->n_inputs + p->n_consts || p->n_regs > SV_TILE_MAX_REGS || p->n_regs < 1)
        return fail(e, exp, "split the chain into smaller programs", "the program is too large",
                    found);
    for (int i = 0; i < p->n_inputs + p->n_consts; i++) {
        int dt = i < p->n_inputs ? p->in_dtype[i] : p->const_dtype[i - p->n_inputs];
        if (dt >= SV_DT_COUNT || (i >= p->n_inputs && is_int(dt))) {
            snprintf(found, sizeof found, "dtype code %d for %s %d", dt,
                     i < p->n_inputs ? "input" : "constant", i);
            return fail(e, "0 (f32), 1 (bool), or for inputs 2 (i32) and 3 (i64)",
                        "give constants as f32 or bool; run other dtypes elsewhere",
                        dt >= SV_DT_COUNT ? "unknown dtype" : "an integer constant", found);
        }
    }
    return 0;
}

/* The dtype an instruction gives for its operands' dtypes, or -1. */
static int result_dtype(const sv_tile_prog *p, const sv_tile_instr *in, const uint8_t *dt,
                        int arity) {
    int a = dt[in->a], b = arity > 1 ? dt[in->b] : a, c = arity > 2 ? dt[in->c] : a;
    if (is_int(a) || is_int(b) || is_int(c)) { /* read as floats: only what stays exact */
        if (op_class(in->op) == T_CAST)
            return in->attr == SV_DT_F32 || in->attr == SV_DT_BOOL ? in->attr : -1;
        if (op_class(in->op) != T_CMP || is_int(a) == is_int(b)) return -1;
        int k = is_int(a) ? in->b : in->a, fixed = p->n_inputs + p->n_consts;
        if (k < p->n_inputs || k >= fixed || dt[k] != SV_DT_F32) return -1;
        float v = p->consts[k - p->n_inputs];
        return v > -16777216.0f && v < 16777216.0f ? SV_DT_BOOL : -1; /* NaN fails too */
    }
    switch (op_class(in->op)) {
    case T_F32: return a == SV_DT_F32 && b == SV_DT_F32 ? SV_DT_F32 : -1;
    case T_SAME: return a == b ? a : -1;
    case T_LOGIC: return a == SV_DT_BOOL && b == SV_DT_BOOL ? SV_DT_BOOL : -1;
    case T_CMP: return a == b ? SV_DT_BOOL : -1;
    case T_WHERE: return a == SV_DT_BOOL && b == c ? b : -1;
    default: return in->attr < SV_DT_COUNT && !is_int(in->attr) ? in->attr : -1; /* cast */
    }
}

static int check_instr(sv_tile_plan *plan, int i, bool *defined, sv_tile_error *e) {
    const sv_tile_prog *p = &plan->prog;
    const sv_tile_instr *in = &p->code[i];
    char what[160], found[200];
    if (in->op >= SV_TOP_COUNT) {
        snprintf(what, sizeof what, "instruction %d has an unknown opcode", i);
        snprintf(found, sizeof found, "opcode %d", in->op);
        return fail(e, "an opcode below SV_TOP_COUNT (shapevm.native.tile.OPS)",
                    "build programs with shapevm.native.tile.Program", what, found);
    }
    const char *name = sv_tile_op_names[in->op];
    int arity = sv_tile_op_arity[in->op], fixed = p->n_inputs + p->n_consts;
    const uint8_t regs[3] = {in->a, in->b, in->c};
    for (int k = 0; k < 3; k++) {
        bool used = k < arity;
        if (used ? (regs[k] < p->n_regs && defined[regs[k]]) : regs[k] == 0) continue;
        snprintf(what, sizeof what, "instruction %d (%s) %s operand %d", i, name,
                 used ? "reads an unwritten register as" : "has an extra", k);
        snprintf(found, sizeof found, "r%d of %d registers", regs[k], p->n_regs);
        return fail(e, used ? "inputs, constants, or registers written earlier"
                            : "unused operands 0",
                    "write every register before reading it", what, found);
    }
    if (in->dst < fixed || in->dst >= p->n_regs) {
        snprintf(what, sizeof what, "instruction %d (%s) writes outside the temporaries", i,
                 name);
        snprintf(found, sizeof found, "r%d (inputs and constants: r0..r%d, registers: %d)",
                 in->dst, fixed - 1, p->n_regs);
        return fail(e, "a destination register after the inputs and constants",
                    "write to a fresh register", what, found);
    }
    if (in->attr != 0 && in->op != SV_TOP_CAST) {
        snprintf(what, sizeof what, "instruction %d (%s) has an attribute", i, name);
        snprintf(found, sizeof found, "attr=%d", in->attr);
        return fail(e, "attr 0 (only cast has one)", "clear attr", what, found);
    }
    int dt = result_dtype(p, in, plan->reg_dtype, arity);
    if (dt < 0) {
        snprintf(what, sizeof what, "instruction %d (%s) does not take these dtypes", i, name);
        int n = snprintf(found, sizeof found, "%s", name);
        for (int k = 0; k < arity && n > 0 && (size_t)n < sizeof found; k++)
            n += snprintf(found + n, sizeof found - (size_t)n, "%s%s", k ? ", " : "(",
                          sv_tile_dtype_names[plan->reg_dtype[regs[k]]]);
        if (n > 0 && (size_t)n < sizeof found)
            snprintf(found + n, sizeof found - (size_t)n, ")%s%s",
                     in->op == SV_TOP_CAST ? " to " : "",
                     in->op != SV_TOP_CAST ? ""
                     : in->attr < SV_DT_COUNT ? sv_tile_dtype_names[in->attr]
                                              : "an unknown dtype");
        return fail(e, "the op table's dtypes, restricted to f32 and bool; an i32 or i64 input "
                       "only cast to f32 or bool, or compared with a constant below 2^24",
                    "cast the operands first, or run the chain elsewhere", what, found);
    }
    int k = in->op;
    if (op_class(k) == T_SAME && dt == SV_DT_BOOL) k = bool_kernel(k);
    if (k == SV_TOP_CAST)
        k = plan->reg_dtype[in->a] != SV_DT_BOOL && dt == SV_DT_BOOL ? SV_TK_NE0 : SV_TK_COPY;
    if (k == SV_TOP_POW && in->b >= p->n_inputs && in->b < fixed &&
        p->consts[in->b - p->n_inputs] == 2.0f)
        k = SV_TK_SQUARE; /* powf(x, 2) is x * x correctly rounded, as is x * x */
    plan->kernel[i] = (uint8_t)k;
    plan->reg_dtype[in->dst] = (uint8_t)dt;
    defined[in->dst] = true;
    return 0;
}

static int check_result(sv_tile_plan *plan, const bool *defined, sv_tile_error *e) {
    const sv_tile_prog *p = &plan->prog;
    char found[200];
    if (p->out_reg < 0 || p->out_reg >= p->n_regs || !defined[p->out_reg]) {
        snprintf(found, sizeof found, "out_reg r%d", p->out_reg);
        return fail(e, "an input, a constant or a register an instruction writes",
                    "point out_reg at the result", "the result register is never written",
                    found);
    }
    if (p->reduce < 0 || p->reduce >= SV_RED_COUNT || p->reduce_axes < 0 ||
        p->reduce_axes > SV_TILE_MAX_DIMS || (p->keepdims != 0 && p->keepdims != 1) ||
        (p->reduce == SV_RED_NONE && (p->reduce_axes || p->keepdims))) {
        snprintf(found, sizeof found, "reduce=%d, reduce_axes=%d, keepdims=%d", p->reduce,
                 p->reduce_axes, p->keepdims);
        return fail(e, "reduce in 0..5 (none, sum, max, min, prod, mean); 0..8 axes; keepdims 0 or 1",
                    "use shapevm.native.tile.REDUCTIONS", "bad trailing reduction", found);
    }
    int dt = plan->reg_dtype[p->out_reg];
    if (is_int(dt)) {
        snprintf(found, sizeof found, "r%d of dtype %s", p->out_reg, sv_tile_dtype_names[dt]);
        return fail(e, "a result of dtype f32 or bool", "cast the result to f32 first",
                    "the result is an integer input", found);
    }
    if (p->reduce == SV_RED_MEAN) dt = SV_DT_F32;
    if (dt == SV_DT_BOOL && (p->reduce == SV_RED_SUM || p->reduce == SV_RED_PROD)) {
        snprintf(found, sizeof found, "%s of bool", sv_tile_red_names[p->reduce]);
        return fail(e, "sum and prod of f32 (NumPy sums bools into i64)",
                    "cast to f32 first, or run the reduction elsewhere",
                    "the reduction's result is not f32 or bool", found);
    }
    plan->out_dtype = (uint8_t)dt;
    return 0;
}

int sv_tile_plan_init(sv_tile_plan *plan, const sv_tile_prog *prog, sv_tile_error *err) {
    memset(plan, 0, sizeof *plan);
    plan->prog = *prog;
    if (check_counts(prog, err) < 0) return -1;
    bool defined[SV_TILE_MAX_REGS] = {false};
    for (int i = 0; i < prog->n_inputs + prog->n_consts; i++) {
        defined[i] = true;
        plan->reg_dtype[i] = i < prog->n_inputs ? prog->in_dtype[i]
                                                : prog->const_dtype[i - prog->n_inputs];
    }
    for (int i = 0; i < prog->n_instr; i++)
        if (check_instr(plan, i, defined, err) < 0) return -1;
    return check_result(plan, defined, err);
}
