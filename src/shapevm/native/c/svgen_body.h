/* The body of a generated chain kernel: iteration, broadcasting, loads and stores,
 * reduction, threads.  The including file defines NIN, NOUT, RANK, RED_AXES, INNER_CONST,
 * in_bool, out_bool, chain_eval (and RED_INIT, RED_V, RED_S, RED_MEAN for reductions). */
#ifndef RED_INIT
#define RED_INIT 0.0f
#define RED_V(a, x) (a)
#define RED_S(a, x) (a)
#define RED_MEAN 0
#endif

typedef struct {
    const svx_tensor *ins, *outs;
    int64_t shape[RANK];
    int64_t istr[NIN + 1][RANK];
    int64_t ostr[NOUT + 1][RANK];
    int64_t rows, n, block;
} svg_ctx;

SV_INLINE float svg_load1(const svx_tensor *t, int is_bool, int64_t off) {
    return is_bool ? (float)(((const uint8_t *)t->data)[off] != 0) : ((const float *)t->data)[off];
}
SV_INLINE void svg_store1(const svx_tensor *t, int is_bool, int64_t off, float v) {
    if (is_bool)
        ((uint8_t *)t->data)[off] = v != 0.0f;
    else
        ((float *)t->data)[off] = v;
}

/* lanes [j, j + cnt) of input k along the last axis from element offset base */
SV_INLINE vf svg_loadv(const svg_ctx *c, int k, int64_t base, int64_t j, int cnt) {
    const svx_tensor *t = &c->ins[k];
    int64_t s = c->istr[k][RANK - 1];
    if (s == 0) return vsplat(svg_load1(t, in_bool[k], base));
    if (s == 1 && !in_bool[k] && cnt == SV_VW) return vload((const float *)t->data + base + j);
    vf v = vsplat(0.0f);
    for (int l = 0; l < cnt; l++) v[l] = svg_load1(t, in_bool[k], base + (j + l) * s);
    return v;
}

SV_INLINE void svg_storev(const svg_ctx *c, int o, int64_t base, int64_t j, int cnt, vf v) {
    const svx_tensor *t = &c->outs[o];
    int64_t s = c->ostr[o][RANK - 1];
    if (s == 1 && !out_bool[o] && cnt == SV_VW) {
        vstore((float *)t->data + base + j, v);
        return;
    }
    for (int l = 0; l < cnt; l++) svg_store1(t, out_bool[o], base + (j + l) * s, v[l]);
}

/* element offsets of row r (an index over all axes but the last `tail`) */
SV_INLINE void svg_row_offsets(const svg_ctx *c, int64_t r, int tail, int64_t *ioff, int64_t *ooff) {
    for (int k = 0; k < NIN; k++) ioff[k] = 0;
    for (int o = 0; o < NOUT; o++) ooff[o] = 0;
    for (int d = RANK - tail - 1; d >= 0; d--) {
        int64_t i = r % c->shape[d];
        r /= c->shape[d];
        for (int k = 0; k < NIN; k++) ioff[k] += i * c->istr[k][d];
        for (int o = 0; o < NOUT; o++) ooff[o] += i * c->ostr[o][d];
    }
}

#if RED_AXES == 0
static void svg_rows(void *vctx, int64_t task) {
    const svg_ctx *c = vctx;
    int64_t r0 = task * c->block, r1 = r0 + c->block < c->rows ? r0 + c->block : c->rows;
    int64_t n = INNER_CONST >= 0 ? INNER_CONST : c->n;
    int64_t ioff[NIN + 1], ooff[NOUT + 1];
    vf xs[NIN + 1], ys[NOUT + 1];
    for (int64_t r = r0; r < r1; r++) {
        svg_row_offsets(c, r, 1, ioff, ooff);
        for (int64_t j = 0; j < n; j += SV_VW) {
            int cnt = n - j >= SV_VW ? SV_VW : (int)(n - j);
            for (int k = 0; k < NIN; k++) xs[k] = svg_loadv(c, k, ioff[k], j, cnt);
            chain_eval(xs, ys);
            for (int o = 0; o < NOUT; o++) svg_storev(c, o, ooff[o], j, cnt, ys[o]);
        }
    }
}
#else
/* one output element per row: the reduction over the last RED_AXES axes */
static void svg_rows(void *vctx, int64_t task) {
    const svg_ctx *c = vctx;
    int64_t r0 = task * c->block, r1 = r0 + c->block < c->rows ? r0 + c->block : c->rows;
    int64_t n = c->shape[RANK - 1];
    int64_t inner_rows = 1;
    for (int d = RANK - RED_AXES; d < RANK - 1; d++) inner_rows *= c->shape[d];
    int64_t ioff[NIN + 1], ooff[NOUT + 1], joff[NIN + 1];
    vf xs[NIN + 1], ys[NOUT + 1];
    for (int64_t r = r0; r < r1; r++) {
        svg_row_offsets(c, r, RED_AXES, ioff, ooff);
        vf acc = vsplat(RED_INIT);
        float sacc = RED_INIT;
        for (int64_t q = 0; q < inner_rows; q++) {
            int64_t rest = q;
            for (int k = 0; k < NIN; k++) joff[k] = ioff[k];
            for (int d = RANK - 2; d >= RANK - RED_AXES; d--) {
                int64_t i = rest % c->shape[d];
                rest /= c->shape[d];
                for (int k = 0; k < NIN; k++) joff[k] += i * c->istr[k][d];
            }
            int64_t j = 0;
            for (; j + SV_VW <= n; j += SV_VW) {
                for (int k = 0; k < NIN; k++) xs[k] = svg_loadv(c, k, joff[k], j, SV_VW);
                chain_eval(xs, ys);
                acc = RED_V(acc, ys[0]);
            }
            if (j < n) {
                int cnt = (int)(n - j);
                for (int k = 0; k < NIN; k++) xs[k] = svg_loadv(c, k, joff[k], j, cnt);
                chain_eval(xs, ys);
                for (int l = 0; l < cnt; l++) sacc = RED_S(sacc, ys[0][l]);
            }
        }
        for (int l = 0; l < SV_VW; l++) sacc = RED_S(sacc, acc[l]);
        if (RED_MEAN) sacc /= (float)(inner_rows * n);
        svg_store1(&c->outs[0], out_bool[0], ooff[0], sacc);
    }
}
#endif

#define SVG_DEFINE(symbol)                                                                 \
    __attribute__((visibility("default"))) int symbol(                                     \
        const void *self, const svx_tensor *ins, int nin, const svx_tensor *outs, int nout, \
        const int32_t *iattr, const float *fattr, const char **err) {                      \
        (void)iattr;                                                                       \
        (void)fattr;                                                                       \
        if (nin != NIN || nout != NOUT) {                                                  \
            *err = "generated chain: wrong operand count";                                 \
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
        int tail = RED_AXES == 0 ? 1 : RED_AXES;                                           \
        c.rows = 1;                                                                        \
        for (int d = 0; d < RANK - tail; d++) c.rows *= c.shape[d];                        \
        c.n = c.shape[RANK - 1];                                                           \
        if (INNER_CONST >= 0 && c.n != INNER_CONST)                                        \
            return 1; /* not this specialization's shape: the executor runs tier 2 */      \
        int64_t total = c.rows * c.n;                                                      \
        const svg_env *env = self;                                                         \
        int64_t tasks = env && env->parallel && total >= (1 << 16) ? 4 * env->threads : 1; \
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
