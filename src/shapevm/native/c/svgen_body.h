/* The body of a generated chain kernel: iteration, broadcasting, loads and stores,
 * reduction, threads.  The including file defines NIN, NOUT, RANK, RED_AXES, INNER_CONST,
 * in_bool, out_bool, chain_eval, chain_store (and RED_INIT, RED_V, RED_MEAN for
 * reductions).
 *
 * chain_eval(p, st, v, ys) computes vector v of a segment: input k's elements (float32 or
 * bool) at p[k] + v * st[k] (st[k] is SV_VW, or 0 for a value broadcast along the last
 * axis, read from SV_VW copies); chain_store(q, v, ys) writes the outputs' vector v at
 * q[o].  A segment of a row is either direct (every operand of unit stride or broadcast:
 * whole vectors read and written in place) or packed (up to SVG_BLOCK elements of any
 * stride gathered into buffers, the results scattered back).  The chain is written out
 * once, with no branch per vector: the compiler's time goes to the chain, not to copies
 * of the loop for every operand's layout. */
#ifndef RED_INIT
#define RED_INIT 0.0f
#define RED_V(a, x) (a)
#define RED_MEAN 0
#endif
#define SVG_BLOCK (4 * SV_VW) /* elements of a packed segment */
#ifndef SVG_SHORT_ROW /* rows shorter than this are tier 2's: codegen.SHORT_ROW writes it */
#error "the generated source defines SVG_SHORT_ROW"
#endif

typedef struct {
    const svx_tensor *ins, *outs;
    int64_t shape[RANK];
    int64_t istr[NIN + 1][RANK];
    int64_t ostr[NOUT + 1][RANK];
    int64_t rows, n, block;
    int direct;            /* every operand allows direct segments */
    int odirect[NOUT + 1]; /* the output has unit stride */
} svg_ctx;

#define SVG_ISIZE(k) (in_bool[k] ? 1 : 4) /* bytes of an element */
#define SVG_OSIZE(o) (out_bool[o] ? 1 : 4)

/* cnt elements of an operand, `stride` elements apart from src, packed into buf (padded
 * with zeros to whole vectors), or unpacked from it */
static void svg_pack(const char *src, int64_t stride, int is_bool, int64_t cnt, char *buf) {
    if (is_bool) {
        for (int64_t i = 0; i < cnt; i++) buf[i] = src[i * stride];
        for (int64_t i = cnt; i % SV_VW; i++) buf[i] = 0;
    } else {
        const float *f = (const float *)src;
        float *b = (float *)buf;
        if (stride == -1) /* a row read backwards (np.flip): vectors reversed */
            for (int64_t i = 0; i < cnt; i++) b[i] = f[-i];
        else
            for (int64_t i = 0; i < cnt; i++) b[i] = f[i * stride];
        for (int64_t i = cnt; i % SV_VW; i++) b[i] = 0.0f;
    }
}

static void svg_unpack(char *dst, int64_t stride, int is_bool, int64_t cnt, const char *buf) {
    if (is_bool) {
        for (int64_t i = 0; i < cnt; i++) dst[i * stride] = buf[i];
    } else {
        float *f = (float *)dst;
        const float *b = (const float *)buf;
        for (int64_t i = 0; i < cnt; i++) f[i * stride] = b[i];
    }
}

/* element offsets of row r (an index over all axes but the last `tail`) */
SV_INLINE void svg_row_offsets(const svg_ctx *c, int64_t r, int tail, int64_t *ioff, int64_t *ooff) {
    for (int k = 0; k < NIN; k++) ioff[k] = 0;
    for (int o = 0; o < NOUT; o++) ooff[o] = 0;
    for (int d = RANK - tail - 1; d >= 0; d--) {
        int64_t i = d ? r % c->shape[d] : r; /* r < shape[0] by now: no division */
        r = d ? r / c->shape[d] : 0;
        for (int k = 0; k < NIN; k++) ioff[k] += i * c->istr[k][d];
        for (int o = 0; o < NOUT; o++) ooff[o] += i * c->ostr[o][d];
    }
}

/* SV_VW copies of each input broadcast along the last axis, at its offset */
SV_INLINE void svg_splats(const svg_ctx *c, const int64_t *ioff, char (*splat)[4 * SV_VW]) {
    for (int k = 0; k < NIN; k++)
        if (c->istr[k][RANK - 1] == 0)
            for (int l = 0; l < SV_VW; l++)
                memcpy(splat[k] + l * SVG_ISIZE(k), c->ins[k].data + ioff[k] * SVG_ISIZE(k),
                       SVG_ISIZE(k));
}

/* The segment of a row starting at j0: its length, and the inputs' pointers and steps
 * (in place, a broadcast value's copies, or packed into buf). */
SV_INLINE int64_t svg_segment(const svg_ctx *c, const int64_t *ioff, int64_t j0, int64_t n,
                              char (*splat)[4 * SV_VW], char (*buf)[4 * SVG_BLOCK],
                              const char **p, int64_t *st, int *direct) {
    *direct = c->direct && n - j0 >= SV_VW;
    int64_t cnt = *direct ? (n - j0) / SV_VW * SV_VW : (n - j0 < SVG_BLOCK ? n - j0 : SVG_BLOCK);
    for (int k = 0; k < NIN; k++) {
        int64_t s = c->istr[k][RANK - 1];
        const char *at = c->ins[k].data + (ioff[k] + j0 * s) * SVG_ISIZE(k);
        st[k] = s == 0 ? 0 : SV_VW;
        if (s == 0) {
            p[k] = splat[k];
        } else if (*direct) {
            p[k] = at;
        } else {
            svg_pack(at, s, in_bool[k], cnt, buf[k]);
            p[k] = buf[k];
        }
    }
    return cnt;
}

/* An elementwise chain's axes before the last that every operand steps through as a
 * continuation of the last (a contiguous [b, h, w] beside a per-image [b, 1, 1]) join the
 * row, while enough rows are left for the tasks: each row pays its offsets and its
 * broadcast values' copies (rows of 96: 60 ns a row, 46 us for (y - lo) / (hi - lo) on
 * [8, 96, 96] against tier 2's 48).  Not for a specialization of the row's length. */
static void svg_merge_rows(svg_ctx *c, int threads) {
    if (RED_AXES != 0 || INNER_CONST >= 0) return;
    int64_t rows = 1;
    for (int d = 0; d < RANK - 1; d++) rows *= c->shape[d];
    for (int d = RANK - 2; d >= 0; d--) {
        int64_t m = c->shape[d], n = c->shape[RANK - 1];
        if (m == 1) continue;
        if (rows / m < 4 * (int64_t)(threads > 0 ? threads : 1) && rows * n >= (1 << 16)) return;
        for (int k = 0; k < NIN; k++)
            if (c->istr[k][d] != c->istr[k][RANK - 1] * n) return;
        for (int o = 0; o < NOUT; o++)
            if (c->ostr[o][d] != c->ostr[o][RANK - 1] * n) return;
        c->shape[RANK - 1] = n * m;
        c->shape[d] = 1;
        for (int k = 0; k < NIN; k++) c->istr[k][d] = 0;
        for (int o = 0; o < NOUT; o++) c->ostr[o][d] = 0;
        rows /= m;
    }
}

#if RED_AXES == 0
static void svg_rows(void *vctx, int64_t task) {
    const svg_ctx *c = vctx;
    int64_t r0 = task * c->block, r1 = r0 + c->block < c->rows ? r0 + c->block : c->rows;
    int64_t n = INNER_CONST >= 0 ? INNER_CONST : c->n;
    int64_t ioff[NIN + 1], ooff[NOUT + 1], st[NIN + 1];
    const char *p[NIN + 1];
    char *q[NOUT + 1];
    char splat[NIN + 1][4 * SV_VW], buf[NIN + 1][4 * SVG_BLOCK], obuf[NOUT + 1][4 * SVG_BLOCK];
    vf ys[NOUT + 1];
    for (int64_t r = r0; r < r1; r++) {
        svg_row_offsets(c, r, 1, ioff, ooff);
        svg_splats(c, ioff, splat);
        for (int64_t j0 = 0, cnt; j0 < n; j0 += cnt) {
            int direct;
            cnt = svg_segment(c, ioff, j0, n, splat, buf, p, st, &direct);
            for (int o = 0; o < NOUT; o++) /* whole vectors of unit stride: in place */
                q[o] = direct || (c->odirect[o] && cnt % SV_VW == 0)
                           ? c->outs[o].data + (ooff[o] + j0) * SVG_OSIZE(o) : obuf[o];
            for (int64_t v = 0; v * SV_VW < cnt; v++) {
                chain_eval(p, st, v, ys);
                chain_store(q, v, ys);
            }
            for (int o = 0; o < NOUT; o++)
                if (q[o] == obuf[o]) {
                    int64_t s = c->ostr[o][RANK - 1];
                    char *at = c->outs[o].data + (ooff[o] + j0 * s) * SVG_OSIZE(o);
                    svg_unpack(at, s, out_bool[o], cnt, obuf[o]);
                }
        }
    }
}
#else
static const int32_t svg_swap[4][16] = { /* lane l ^ 8, l ^ 4, l ^ 2, l ^ 1 */
    {8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7},
    {4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11},
    {2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13},
    {1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14},
};
/* one output element per row: the reduction over the last RED_AXES axes */
static void svg_rows(void *vctx, int64_t task) {
    const svg_ctx *c = vctx;
    int64_t r0 = task * c->block, r1 = r0 + c->block < c->rows ? r0 + c->block : c->rows;
    int64_t n = INNER_CONST >= 0 ? INNER_CONST : c->shape[RANK - 1];
    int64_t inner_rows = 1;
    for (int d = RANK - RED_AXES; d < RANK - 1; d++) inner_rows *= c->shape[d];
    int64_t ioff[NIN + 1], ooff[NOUT + 1], joff[NIN + 1], st[NIN + 1];
    const char *p[NIN + 1];
    char splat[NIN + 1][4 * SV_VW], buf[NIN + 1][4 * SVG_BLOCK];
    vf ys[NOUT + 1];
    vi lane;
    for (int l = 0; l < SV_VW; l++) lane[l] = l;
    for (int64_t r = r0; r < r1; r++) {
        svg_row_offsets(c, r, RED_AXES, ioff, ooff);
        vf acc = vsplat(RED_INIT);
        for (int64_t q = 0; q < inner_rows; q++) {
            int64_t rest = q;
            for (int k = 0; k < NIN; k++) joff[k] = ioff[k];
            for (int d = RANK - 2; d >= RANK - RED_AXES; d--) {
                int64_t i = rest % c->shape[d];
                rest /= c->shape[d];
                for (int k = 0; k < NIN; k++) joff[k] += i * c->istr[k][d];
            }
            svg_splats(c, joff, splat);
            for (int64_t j0 = 0, cnt; j0 < n; j0 += cnt) {
                int direct;
                cnt = svg_segment(c, joff, j0, n, splat, buf, p, st, &direct);
                int64_t nv = (cnt + SV_VW - 1) / SV_VW;
                for (int64_t v = 0; v < nv; v++) {
                    chain_eval(p, st, v, ys);
                    vf y = ys[0];
                    if (v == nv - 1 && cnt % SV_VW) /* lanes past the end: the identity */
                        y = vsel(lane < visplat((int32_t)(cnt % SV_VW)), y, vsplat(RED_INIT));
                    acc = RED_V(acc, y);
                }
            }
        }
#pragma GCC unroll 4
        for (int b = SV_VW == 16 ? 0 : SV_VW == 8 ? 1 : 2; b < 4; b++) { /* pairwise, a tree */
            vi swap;
            memcpy(&swap, svg_swap[b], sizeof swap);
            acc = RED_V(acc, __builtin_shuffle(acc, swap));
        }
        float sacc = acc[0];
        if (RED_MEAN) sacc /= (float)(inner_rows * n);
        if (out_bool[0])
            ((uint8_t *)c->outs[0].data)[ooff[0]] = sacc != 0.0f;
        else
            ((float *)c->outs[0].data)[ooff[0]] = sacc;
    }
}
#endif

#if defined(__GNUC__) && !defined(__clang__) /* the entry only sets a call up: -O1 will do */
#define SVG_ENTRY __attribute__((visibility("default"), optimize("O1")))
#else
#define SVG_ENTRY __attribute__((visibility("default")))
#endif
#define SVG_DEFINE(symbol)                                                                 \
    SVG_ENTRY int symbol(                                                                  \
        const void *self, const svx_tensor *ins, int nin, const svx_tensor *outs, int nout, \
        const int32_t *iattr, const float *fattr, const char **err) {                      \
        (void)iattr;                                                                       \
        (void)fattr;                                                                       \
        if (nin != NIN || nout != NOUT) {                                                  \
            *err = "generated chain: wrong operand count";                                 \
            return -1;                                                                     \
        }                                                                                  \
        const svg_env *env = self;                                                         \
        if (!env || env->magic != SVG_ENV_MAGIC) {                                         \
            *err = "generated chain: not given the executor's environment as self";        \
            return -1;                                                                     \
        }                                                                                  \
        svg_ctx c;                                                                         \
        c.ins = ins;                                                                       \
        c.outs = outs;                                                                     \
        for (int d = 0; d < RANK; d++) c.shape[d] = 1;                                     \
        for (int k = 0; k < NIN; k++) {                                                    \
            int lead = RANK - ins[k].ndim;                                                 \
            if (lead < 0) {                                                                \
                *err = "generated chain: an input of a higher rank";                       \
                return -1;                                                                 \
            }                                                                              \
            for (int d = 0; d < ins[k].ndim; d++)                                          \
                if (ins[k].shape[d] != 1) c.shape[lead + d] = ins[k].shape[d];             \
        }                                                                                  \
        for (int o = 0; o < NOUT && RED_AXES == 0; o++)                                    \
            for (int d = 0; d < outs[o].ndim && outs[o].ndim == RANK; d++)                 \
                if (outs[o].shape[d] != 1) c.shape[d] = outs[o].shape[d];                  \
        for (int k = 0; k < NIN; k++) {                                                    \
            int lead = RANK - ins[k].ndim;                                                 \
            for (int d = 0; d < RANK; d++) {                                               \
                int bd = d - lead;                                                         \
                c.istr[k][d] = (bd < 0 || ins[k].shape[bd] == 1) ? 0 : ins[k].strides[bd]; \
                if (bd >= 0 && ins[k].shape[bd] != 1 && ins[k].shape[bd] != c.shape[d]) {  \
                    *err = "generated chain: an input that does not broadcast";            \
                    return -1;                                                             \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
        for (int o = 0; o < NOUT; o++)                                                     \
            for (int d = 0; d < RANK; d++)                                                 \
                c.ostr[o][d] = d < outs[o].ndim && outs[o].shape[d] != 1                   \
                                   ? outs[o].strides[d] : 0;                               \
        c.direct = 1;                                                                      \
        for (int k = 0; k < NIN; k++)                                                      \
            if (c.istr[k][RANK - 1] != 0 && c.istr[k][RANK - 1] != 1) c.direct = 0;        \
        for (int o = 0; o < NOUT; o++) {                                                   \
            c.odirect[o] = c.ostr[o][RANK - 1] == 1;                                       \
            if (!c.odirect[o] && RED_AXES == 0) c.direct = 0;                              \
        }                                                                                  \
        int tail = RED_AXES == 0 ? 1 : RED_AXES;                                           \
        svg_merge_rows(&c, __atomic_load_n(&env->threads, __ATOMIC_RELAXED));             \
        c.rows = 1;                                                                        \
        for (int d = 0; d < RANK - tail; d++) c.rows *= c.shape[d];                        \
        c.n = c.shape[RANK - 1];                                                           \
        if (INNER_CONST >= 0 && c.n != INNER_CONST)                                        \
            return 1; /* not this specialization's shape: the executor runs tier 2 */      \
        if (c.n < SVG_SHORT_ROW && c.rows > 1)                                             \
            return 1; /* short rows: tier 2 reads across them (see SVG_SHORT_ROW) */       \
        int64_t total = c.rows * c.n;                                                      \
        int64_t tasks = 1; /* the pool's size is stored atomically (Executor.patch) */     \
        if (env->parallel && total >= (1 << 16))                                           \
            tasks = 4 * __atomic_load_n(&env->threads, __ATOMIC_RELAXED);                  \
        if (tasks > c.rows) tasks = c.rows;                                                \
        if (tasks < 1) tasks = 1;                                                          \
        c.block = (c.rows + tasks - 1) / tasks;                                            \
        if (c.rows == 0) return 0;                                                         \
        tasks = (c.rows + c.block - 1) / c.block;                                          \
        if (tasks > 1)                                                                     \
            env->parallel(tasks, svg_rows, &c);                                            \
        else                                                                               \
            svg_rows(&c, 0);                                                               \
        return 0;                                                                          \
    }
