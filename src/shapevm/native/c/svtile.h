/* The tile interpreter's calling convention: a fused elementwise program as plain data, and
 * the operands of one run.  Shared by the Python entry points (py_tile.c), the region
 * executor and anything else that runs fused chains without generating code.
 *
 * A program is a short list of instructions over virtual registers.  Registers
 * [0, n_inputs) hold the inputs, [n_inputs, n_inputs + n_consts) the constants, the rest
 * are written by instructions (each before it is read).  Every register holds one tile of
 * SV_TILE_LEN elements as float32 lanes; a bool is 0.0f or 1.0f (any non-zero reads as
 * true).  The interpreter runs the instructions one vectorized loop each over a tile of
 * the broadcast iteration space, then stores register `out_reg` or folds it into a
 * trailing reduction over the last `reduce_axes` axes.
 *
 * Opcodes are the op table's names (shapevm.ops, OpFlag.FUSIBLE) in the order of
 * SV_TILE_OPS; tests check that every fusible op of the table is here.  Dtypes: f32 and
 * bool only (programs over other dtypes are refused by sv_tile_plan_init, so the caller
 * falls back).  Typing follows the op table: arithmetic and math take f32; add, mul,
 * maximum, minimum and abs also take bool (or, and, or, and, identity, as NumPy);
 * comparisons take two f32 or two bool and give bool; logical ops take bool; where takes
 * a bool condition; cast converts between f32 and bool.
 *
 * Integer inputs (i32, i64: token ids, masks) are read as float32 lanes (rounded to
 * nearest, as NumPy casts) and only by what that keeps exact: cast to f32 (NumPy's
 * rounding) or to bool (v != 0), and comparisons with a constant c, |c| < 2^24 (a value
 * past 2^24 still rounds to a float past c, with its sign). Anything else reading an
 * integer register, an integer constant, or an integer result is refused.
 */
#ifndef SVTILE_H
#define SVTILE_H
#include <stddef.h>
#include <stdint.h>

#define SV_TILE_ABI 1
#define SV_TILE_LEN 256 /* elements per tile */
#define SV_TILE_MAX_INPUTS 16
#define SV_TILE_MAX_CONSTS 32
#define SV_TILE_MAX_REGS 64
#define SV_TILE_MAX_INSTR 128
#define SV_TILE_MAX_DIMS 8

/* X(ID, name, arity): the opcodes, keyed by the op table's names. */
#define SV_TILE_OPS(X)                                                                     \
    X(NEG, "neg", 1)                                                                       \
    X(ABS, "abs", 1)                                                                       \
    X(EXP, "exp", 1)                                                                       \
    X(LOG, "log", 1)                                                                       \
    X(SQRT, "sqrt", 1)                                                                     \
    X(TANH, "tanh", 1)                                                                     \
    X(SIN, "sin", 1)                                                                       \
    X(COS, "cos", 1)                                                                       \
    X(ERF, "erf", 1)                                                                       \
    X(SIGMOID, "sigmoid", 1)                                                               \
    X(FLOOR, "floor", 1)                                                                   \
    X(CEIL, "ceil", 1)                                                                     \
    X(SIGN, "sign", 1)                                                                     \
    X(LOGICAL_NOT, "logical_not", 1)                                                       \
    X(ADD, "add", 2)                                                                       \
    X(SUB, "sub", 2)                                                                       \
    X(MUL, "mul", 2)                                                                       \
    X(DIV, "div", 2)                                                                       \
    X(MAXIMUM, "maximum", 2)                                                               \
    X(MINIMUM, "minimum", 2)                                                               \
    X(POW, "pow", 2)                                                                       \
    X(FLOORDIV, "floordiv", 2)                                                             \
    X(MOD, "mod", 2)                                                                       \
    X(LOGICAL_AND, "logical_and", 2)                                                       \
    X(LOGICAL_OR, "logical_or", 2)                                                         \
    X(LOGICAL_XOR, "logical_xor", 2)                                                       \
    X(LESS, "less", 2)                                                                     \
    X(GREATER, "greater", 2)                                                               \
    X(EQUAL, "equal", 2)                                                                   \
    X(LESS_EQUAL, "less_equal", 2)                                                         \
    X(GREATER_EQUAL, "greater_equal", 2)                                                   \
    X(NOT_EQUAL, "not_equal", 2)                                                           \
    X(CAST, "cast", 1)                                                                     \
    X(WHERE, "where", 3)                                                                   \
    X(SOFTPLUS, "softplus", 1)                                                             \
    X(EXPM1, "expm1", 1)                                                                   \
    X(LOG1P, "log1p", 1)                                                                   \
    X(LOG2, "log2", 1)                                                                     \
    X(LOG10, "log10", 1)                                                                   \
    X(ROUND, "round", 1)                                                                   \
    X(ATAN, "atan", 1)                                                                     \
    X(ASIN, "asin", 1)                                                                     \
    X(ACOS, "acos", 1)                                                                     \
    X(ATAN2, "atan2", 2)                                                                   \
    X(HYPOT, "hypot", 2)

#define SV_TILE_OP_ENUM_(id, name, arity) SV_TOP_##id,
enum sv_tile_op { SV_TILE_OPS(SV_TILE_OP_ENUM_) SV_TOP_COUNT };
#undef SV_TILE_OP_ENUM_

/* Trailing reductions, by the op table's names. */
#define SV_TILE_REDUCTIONS(X) X(NONE, "none") X(SUM, "sum") X(MAX, "max") X(MIN, "min") \
    X(PROD, "prod") X(MEAN, "mean")
#define SV_TILE_RED_ENUM_(id, name) SV_RED_##id,
enum sv_tile_red { SV_TILE_REDUCTIONS(SV_TILE_RED_ENUM_) SV_RED_COUNT };
#undef SV_TILE_RED_ENUM_

enum sv_tile_dtype { SV_DT_F32 = 0, SV_DT_BOOL = 1, SV_DT_I32 = 2, SV_DT_I64 = 3, SV_DT_COUNT };

/* One instruction: dst = op(a, b, c); unused operands are 0.  `attr` is cast's target
 * dtype (enum sv_tile_dtype), 0 for every other op. */
typedef struct sv_tile_instr {
    uint8_t op, dst, a, b, c, attr;
} sv_tile_instr;

/* A program, plain data: fill it, then sv_tile_plan_init checks and resolves it. */
typedef struct sv_tile_prog {
    int32_t n_inputs, n_consts, n_regs, n_instr;
    uint8_t in_dtype[SV_TILE_MAX_INPUTS];
    uint8_t const_dtype[SV_TILE_MAX_CONSTS];
    float consts[SV_TILE_MAX_CONSTS];
    sv_tile_instr code[SV_TILE_MAX_INSTR];
    int32_t out_reg;
    int32_t reduce;      /* enum sv_tile_red */
    int32_t reduce_axes; /* trailing axes of the iteration space reduced (with reduce) */
    int32_t keepdims;    /* reduced axes stay in the output with size 1 */
} sv_tile_prog;

/* A checked program with each instruction resolved to a kernel for its operand dtypes. */
typedef struct sv_tile_plan {
    sv_tile_prog prog;
    uint8_t kernel[SV_TILE_MAX_INSTR];
    uint8_t reg_dtype[SV_TILE_MAX_REGS];
    uint8_t out_dtype; /* of the result, after the reduction */
} sv_tile_plan;

/* Why a program or a run was refused, in the library's message fields. */
typedef struct sv_tile_error {
    char what[160], expected[200], found[200], fix[160];
} sv_tile_error;

/* An array operand: `ndim` dims, byte strides (any sign; 0 broadcasts), dtype given by the
 * program (f32, i32: 4 bytes, i64: 8 bytes, bool: 1 byte). */
typedef struct sv_tile_operand {
    char *data;
    int32_t ndim;
    int64_t shape[SV_TILE_MAX_DIMS];
    int64_t strides[SV_TILE_MAX_DIMS];
} sv_tile_operand;

/* One run: inputs broadcast against each other as in NumPy; `out` has the broadcast shape,
 * or that shape less (keepdims: with size 1 in) the reduced axes. */
typedef struct sv_tile_args {
    int32_t n_inputs;
    sv_tile_operand in[SV_TILE_MAX_INPUTS];
    sv_tile_operand out;
} sv_tile_args;

/* Check and resolve a program (0), or fill err (-1). */
int sv_tile_plan_init(sv_tile_plan *plan, const sv_tile_prog *prog, sv_tile_error *err);
/* The result's shape for these inputs (0), or err (-1) when they do not broadcast. */
int sv_tile_out_shape(const sv_tile_plan *plan, const sv_tile_args *args, int64_t *shape,
                      int32_t *ndim, sv_tile_error *err);
/* Check the operands (shapes, broadcasting, the output's shape, no partial overlap of the
 * output with an input) and run on up to `threads` threads (0: the pool's size). */
int sv_tile_run(const sv_tile_plan *plan, const sv_tile_args *args, int threads,
                sv_tile_error *err);
#endif
