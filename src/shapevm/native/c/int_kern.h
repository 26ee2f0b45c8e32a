/* Integer elementwise rows for one instruction set (included by isa_<level>.c): the
 * executor's integer kernel (exec_kernels.c, run_int_binary) hands over each row whose
 * operands share one integer type and whose result is of unit stride.
 *
 * Rows of n elements of type T (its unsigned UT for wrapping arithmetic, as NumPy wraps),
 * one after another (sv_int_rows): operands a and b at any stride (in elements; 0
 * broadcasts), where's bool condition c likewise, a unary kind reading a only; the rows'
 * loop is here too, so that short rows ([3000, 7] of a one-hot compare) do not each cost a
 * call and a choice of loop.  Each kind and each pair of strides (both unit,
 * one broadcast, both broadcast, any) is a loop of its own, so that the compiler
 * vectorizes the unit ones at this level's width: 64-bit comparisons, maxima and selects
 * need AVX2 or AVX-512 (at the baseline they took a jump or a conditional move an
 * element: int64 abs of 100000 random values 435 us, a maximum of 16384 6.5 us).  abs is
 * branch-free and where a mask wherever the condition is a row of its own.
 */
#define SV_IROW_PAIR(T, EXPR)                                                                \
    do {                                                                                     \
        if (as == 1 && bs == 1)                                                              \
            for (int64_t k = 0; k < n; k++) {                                                \
                const T u = ra[k], v = rb[k];                                                \
                ry[k] = (EXPR);                                                              \
            }                                                                                \
        else if (as == 1 && bs == 0) {                                                       \
            const T v = rb[0];                                                               \
            for (int64_t k = 0; k < n; k++) {                                                \
                const T u = ra[k];                                                           \
                ry[k] = (EXPR);                                                              \
            }                                                                                \
        } else if (as == 0 && bs == 1) {                                                     \
            const T u = ra[0];                                                               \
            for (int64_t k = 0; k < n; k++) {                                                \
                const T v = rb[k];                                                           \
                ry[k] = (EXPR);                                                              \
            }                                                                                \
        } else if (as == 0 && bs == 0) {                                                     \
            const T u = ra[0], v = rb[0];                                                    \
            for (int64_t k = 0; k < n; k++) ry[k] = (EXPR);                                  \
        } else                                                                               \
            for (int64_t k = 0; k < n; k++) {                                                \
                const T u = ra[k * as], v = rb[k * bs];                                      \
                ry[k] = (EXPR);                                                              \
            }                                                                                \
    } while (0)
#define SV_IROW_ONE(T, EXPR)                                                                 \
    do {                                                                                     \
        if (as == 1)                                                                         \
            for (int64_t k = 0; k < n; k++) {                                                \
                const T u = ra[k];                                                           \
                ry[k] = (EXPR);                                                              \
            }                                                                                \
        else                                                                                 \
            for (int64_t k = 0; k < n; k++) {                                                \
                const T u = ra[k * as];                                                      \
                ry[k] = (EXPR);                                                              \
            }                                                                                \
    } while (0)
/* the rows of p, BODY once for each (r, ra, rb) */
#define SV_IROWS(T, BODY)                                                                    \
    for (int64_t r = 0; r < p->rows; r++) {                                                  \
        const T *ra = pa + r * p->ars, *rb = pb + r * p->brs; /* rb: unused by a unary kind */ \
        (void)rb;                                                                            \
        BODY;                                                                                \
    }
/* BITS: the sign bit's place */
#define SV_IROW(NAME, T, UT, BITS)                                                           \
    static void SV_FN(NAME)(int kind, const sv_int_rows *p) {                                \
        const T *pa = (const T *)p->a, *pb = (const T *)p->b;                               \
        const int64_t as = p->as, bs = p->bs, cs = p->cs, n = p->n;                          \
        if (kind <= SV_ICMP_NE) {                                                            \
            uint8_t *py = (uint8_t *)p->y;                                                   \
            switch (kind) {                                                                  \
            case SV_ICMP_LT: SV_IROWS(T, uint8_t *ry = py + r * p->yrs; SV_IROW_PAIR(T, u < v)); break; \
            case SV_ICMP_LE: SV_IROWS(T, uint8_t *ry = py + r * p->yrs; SV_IROW_PAIR(T, u <= v)); break; \
            case SV_ICMP_GT: SV_IROWS(T, uint8_t *ry = py + r * p->yrs; SV_IROW_PAIR(T, u > v)); break; \
            case SV_ICMP_GE: SV_IROWS(T, uint8_t *ry = py + r * p->yrs; SV_IROW_PAIR(T, u >= v)); break; \
            case SV_ICMP_EQ: SV_IROWS(T, uint8_t *ry = py + r * p->yrs; SV_IROW_PAIR(T, u == v)); break; \
            default: SV_IROWS(T, uint8_t *ry = py + r * p->yrs; SV_IROW_PAIR(T, u != v)); break; \
            }                                                                                \
            return;                                                                          \
        }                                                                                    \
        T *py = (T *)p->y;                                                                   \
        switch (kind) {                                                                      \
        case SV_IOP_ADD: SV_IROWS(T, T *ry = py + r * p->yrs; SV_IROW_PAIR(T, (T)((UT)u + (UT)v))); break; \
        case SV_IOP_SUB: SV_IROWS(T, T *ry = py + r * p->yrs; SV_IROW_PAIR(T, (T)((UT)u - (UT)v))); break; \
        case SV_IOP_MUL: SV_IROWS(T, T *ry = py + r * p->yrs; SV_IROW_PAIR(T, (T)((UT)u * (UT)v))); break; \
        case SV_IOP_MAX: SV_IROWS(T, T *ry = py + r * p->yrs; SV_IROW_PAIR(T, u > v ? u : v)); break; \
        case SV_IOP_MIN: SV_IROWS(T, T *ry = py + r * p->yrs; SV_IROW_PAIR(T, u < v ? u : v)); break; \
        case SV_IOP_ABS:                                                                     \
            SV_IROWS(T, T *ry = py + r * p->yrs;                                             \
                     SV_IROW_ONE(T, (T)(((UT)u ^ (UT)(u >> BITS)) - (UT)(u >> BITS))));      \
            break;                                                                           \
        case SV_IOP_NEG: SV_IROWS(T, T *ry = py + r * p->yrs; SV_IROW_ONE(T, (T)(0 - (UT)u))); break; \
        case SV_IOP_WHERE:                                                                   \
            SV_IROWS(T, T *ry = py + r * p->yrs; const uint8_t *rc = p->c + r * p->crs;      \
                     if (cs == 1) SV_IROW_PAIR(T, (T)(((UT)u & -(UT)(rc[k] != 0)) |          \
                                                     ((UT)v & ~-(UT)(rc[k] != 0))));         \
                     else SV_IROW_PAIR(T, rc[k * cs] ? u : v));                              \
            break;                                                                           \
        default: SV_IROWS(T, T *ry = py + r * p->yrs; SV_IROW_ONE(T, u)); break; /* a cast to its own type */ \
        }                                                                                    \
    }
SV_IROW(int_row_i32, int32_t, uint32_t, 31)
SV_IROW(int_row_i64, int64_t, uint64_t, 63)
#undef SV_IROW
#undef SV_IROWS
#undef SV_IROW_ONE
#undef SV_IROW_PAIR
