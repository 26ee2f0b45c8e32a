/* The tile interpreter (svtile.h): runs a checked program (tile_plan.c) over the broadcast
 * iteration space of its inputs, SV_TILE_LEN elements at a time, one kernel call
 * (tile_kern.h) per instruction and tile -- numexpr's design.
 *
 * Dims of size 1 are dropped and adjacent dims that every operand steps through evenly are
 * merged (never across the reduction's boundary), so contiguous operands become one long
 * dim; then each operand merges further the dims its own strides allow, so that a
 * contiguous input beside a broadcast one is still one long run.  A tile walks that space
 * in flat order: each input is gathered into its register (or read in place when the tile
 * is one contiguous run of float32), the instructions run, and the result is scattered to
 * the output, or folded into the trailing reduction segment by segment (flat order puts
 * the reduced dims innermost).  An input that repeats one row of at most a tile (a bias
 * over rows of 3, a scalar) is laid out repeated once per task and read at the tile's
 * place in it: gathering it row by row cost 7 ns an element on [20000, 3], now 0.3.  Big
 * jobs split tiles over the pool; a reduction with few outputs splits each output's
 * elements into chunks whose partial results are combined in order at the end.
 */
#include "sv_internal.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

#define T SV_TILE_LEN
#define NOPS (SV_TILE_MAX_INPUTS + 1) /* inputs, then the output */
#define TILE_PARALLEL_MIN 65536      /* elements below which a job stays on one thread */

#define PERIODIC_MAX 4 /* inputs read through a repeated row (a bias over rows of 3) */
#define PERIOD_LEN (2 * T + 16)

typedef struct tile_space {
    int nd, nkeep;              /* coalesced dims; the first nkeep are kept (not reduced) */
    int64_t shape[SV_TILE_MAX_DIMS];
    int64_t st[NOPS][SV_TILE_MAX_DIMS]; /* byte strides; [SV_TILE_MAX_INPUTS] is the output */
    int64_t total, outer, inner; /* elements; kept; reduced per output */
    /* each operand's own view of the flat space: the dims above merged further where its
     * strides allow (a contiguous input beside a broadcast one is one long run) */
    int ond[NOPS];
    int64_t oshape[NOPS][SV_TILE_MAX_DIMS];
    int64_t ost[NOPS][SV_TILE_MAX_DIMS];
    int periodic[SV_TILE_MAX_INPUTS]; /* slot + 1 of a repeated row, or 0 */
    int64_t out_step; /* a reduction's output o at o * out_step bytes, or -1: by its index */
} tile_space;

typedef struct tile_job {
    const sv_tile_plan *plan;
    const sv_tile_args *args;
    const sv_tile_kernels *k;
    tile_space sp;
    int64_t tiles_per_task, chunks, chunk_len; /* reductions split in chunks per output */
    double *partial;                           /* [outer * chunks] when chunks > 1 */
} tile_job;


static void shape_text(char *buf, size_t size, const int64_t *shape, int nd) {
    int n = snprintf(buf, size, "[");
    for (int i = 0; i < nd && n > 0 && (size_t)n < size; i++)
        n += snprintf(buf + n, size - (size_t)n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, "]");
}

/* The broadcast shape of the inputs (NumPy's rule) into shape[*nd]. */
static int broadcast(const sv_tile_args *a, int64_t *shape, int *nd, sv_tile_error *e) {
    *nd = 0;
    for (int i = 0; i < a->n_inputs; i++) {
        if (a->in[i].ndim < 0 || a->in[i].ndim > SV_TILE_MAX_DIMS) {
            char found[64];
            snprintf(found, sizeof found, "input %d of rank %d", i, a->in[i].ndim);
            return sv_tile_fail(e, "an input has too many dims", "ranks 0 to 8", found,
                         "reshape the operands to 8 dims or fewer");
        }
        if (a->in[i].ndim > *nd) *nd = a->in[i].ndim;
    }
    for (int d = 0; d < *nd; d++) {
        shape[d] = 1;
        for (int i = 0; i < a->n_inputs; i++) {
            int di = d - (*nd - a->in[i].ndim);
            int64_t s = di >= 0 ? a->in[i].shape[di] : 1;
            if (s == shape[d] || s == 1) continue;
            if (shape[d] != 1) {
                char found[200], one[96];
                int n = 0;
                for (int j = 0; j < a->n_inputs && n >= 0 && (size_t)n < sizeof found; j++) {
                    shape_text(one, sizeof one, a->in[j].shape, a->in[j].ndim);
                    n += snprintf(found + n, sizeof found - (size_t)n, "%s%s", j ? ", " : "", one);
                }
                return sv_tile_fail(e, "the inputs do not broadcast",
                             "shapes that are equal or 1 in each trailing dim (NumPy's rule)",
                             found, "reshape the inputs so that they broadcast");
            }
            shape[d] = s;
        }
    }
    return 0;
}

int sv_tile_out_shape(const sv_tile_plan *plan, const sv_tile_args *args, int64_t *shape,
                      int32_t *ndim, sv_tile_error *err) {
    const sv_tile_prog *p = &plan->prog;
    int nd;
    if (args->n_inputs != p->n_inputs) {
        char exp[64], found[64];
        snprintf(exp, sizeof exp, "%d inputs", p->n_inputs);
        snprintf(found, sizeof found, "%d inputs", args->n_inputs);
        return sv_tile_fail(err, "wrong number of inputs", exp, found, "pass one array per input");
    }
    if (broadcast(args, shape, &nd, err) < 0) return -1;
    if (p->reduce != SV_RED_NONE && p->reduce_axes > nd) {
        char exp[64], found[64];
        snprintf(exp, sizeof exp, "rank >= %d (the reduced axes)", p->reduce_axes);
        snprintf(found, sizeof found, "rank %d", nd);
        return sv_tile_fail(err, "the inputs have fewer dims than the reduction", exp, found,
                     "reduce fewer axes");
    }
    if (p->reduce != SV_RED_NONE) {
        int keep = nd - p->reduce_axes;
        if (p->keepdims)
            for (int d = keep; d < nd; d++) shape[d] = 1;
        else
            nd = keep;
    }
    *ndim = nd;
    return 0;
}

/* The bytes an operand spans: [lo, hi). */
static void extent(const char *base, const int64_t *shape, const int64_t *st, int nd,
                   int itemsize, const char **lo, const char **hi) {
    int64_t a = 0, b = 0;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 0) {
            *lo = *hi = base;
            return;
        }
        int64_t ext = (shape[d] - 1) * st[d];
        if (ext < 0) a += ext; else b += ext;
    }
    *lo = base + a;
    *hi = base + b + itemsize;
}

static int itemsize(int dtype) { return dtype == SV_DT_BOOL ? 1 : dtype == SV_DT_I64 ? 8 : 4; }

/* The operands' strides over the broadcast space, the output's shape checked, and no
 * partial overlap of the output with an input. */
static int bind(tile_job *j, int64_t *shape, int *nd, int *nred, sv_tile_error *e) {
    const sv_tile_prog *p = &j->plan->prog;
    const sv_tile_args *a = j->args;
    int64_t want[SV_TILE_MAX_DIMS];
    int32_t wnd;
    if (sv_tile_out_shape(j->plan, a, want, &wnd, e) < 0) return -1;
    bool same = a->out.ndim == wnd;
    for (int d = 0; d < wnd && same; d++) same = a->out.shape[d] == want[d];
    if (!same) {
        char exp[96], found[96];
        shape_text(exp, sizeof exp, want, wnd);
        shape_text(found, sizeof found, a->out.shape, a->out.ndim < 0 || a->out.ndim > 8 ? 0 : a->out.ndim);
        return sv_tile_fail(e, "the output has the wrong shape", exp, found,
                     "allocate the output with the broadcast shape (less the reduced axes)");
    }
    broadcast(a, shape, nd, e);
    *nred = p->reduce != SV_RED_NONE ? p->reduce_axes : 0;
    for (int i = 0; i < a->n_inputs; i++)
        for (int d = 0; d < *nd; d++) {
            int di = d - (*nd - a->in[i].ndim);
            bool real = di >= 0 && a->in[i].shape[di] != 1;
            j->sp.st[i][d] = real ? a->in[i].strides[di] : 0;
        }
    for (int d = 0; d < *nd; d++)
        j->sp.st[SV_TILE_MAX_INPUTS][d] =
            d < *nd - *nred && a->out.shape[d] != 1 ? a->out.strides[d] : 0;
    const char *olo, *ohi, *ilo, *ihi;
    extent(a->out.data, a->out.shape, a->out.strides, a->out.ndim,
           itemsize(j->plan->out_dtype), &olo, &ohi);
    for (int i = 0; i < a->n_inputs; i++) {
        extent(a->in[i].data, a->in[i].shape, a->in[i].strides, a->in[i].ndim,
               itemsize(p->in_dtype[i]), &ilo, &ihi);
        if (!(olo < ihi && ilo < ohi)) continue;
        bool alias = a->in[i].data == a->out.data && *nred == 0 &&
                     p->in_dtype[i] == j->plan->out_dtype;
        for (int d = 0; d < *nd && alias; d++)
            alias = shape[d] == 1 || j->sp.st[i][d] == j->sp.st[SV_TILE_MAX_INPUTS][d];
        if (!alias) {
            char found[64];
            snprintf(found, sizeof found, "the output and input %d share memory", i);
            return sv_tile_fail(e, "the output overlaps an input",
                         "an output in memory of its own, or the very same elements as an input",
                         found, "write the result to a new array");
        }
    }
    return 0;
}

/* Drop dims of size 1, merge dims that every operand steps through evenly. */
static void coalesce(tile_job *j, const int64_t *shape, int nd, int nred) {
    tile_space *sp = &j->sp;
    int nops = j->args->n_inputs, out = SV_TILE_MAX_INPUTS, n = 0, nkeep = 0;
    int64_t st[NOPS][SV_TILE_MAX_DIMS];
    memcpy(st, sp->st, sizeof st);
    for (int d = 0; d < nd; d++) {
        bool kept = d < nd - nred;
        if (shape[d] == 1) continue;
        bool merge = n > 0 && (kept == (n <= nkeep));
        for (int i = 0; i <= nops && merge; i++) {
            int o = i == nops ? out : i;
            merge = st[o][d - 0] * shape[d] == sp->st[o][n - 1];
        }
        if (merge) {
            sp->shape[n - 1] *= shape[d];
            for (int i = 0; i <= nops; i++) sp->st[i == nops ? out : i][n - 1] = st[i == nops ? out : i][d];
            continue;
        }
        sp->shape[n] = shape[d];
        for (int i = 0; i <= nops; i++) sp->st[i == nops ? out : i][n] = st[i == nops ? out : i][d];
        n++;
        if (kept) nkeep = n;
    }
    if (n == 0) { /* a single element */
        sp->shape[0] = 1;
        for (int i = 0; i < NOPS; i++) sp->st[i][0] = 0;
        n = nkeep = 1;
    }
    sp->nd = n;
    sp->nkeep = nkeep;
    sp->outer = sp->inner = 1;
    for (int d = 0; d < n; d++) {
        if (d < nkeep)
            sp->outer *= sp->shape[d];
        else
            sp->inner *= sp->shape[d];
    }
    sp->total = sp->outer * sp->inner;
    sp->out_step = nkeep ? sp->st[out][nkeep - 1] : 0;
    for (int d = 0; d + 1 < nkeep; d++)
        if (sp->st[out][d] != sp->st[out][d + 1] * sp->shape[d + 1]) sp->out_step = -1;
    int slots = 0;
    for (int i = 0; i <= nops; i++) {
        int o = i == nops ? out : i, m = 0;
        for (int d = 0; d < sp->nd; d++) {
            if (m > 0 && sp->ost[o][m - 1] == sp->st[o][d] * sp->shape[d]) {
                sp->oshape[o][m - 1] *= sp->shape[d];
            } else {
                sp->oshape[o][m] = sp->shape[d];
                m++;
            }
            sp->ost[o][m - 1] = sp->st[o][d];
        }
        sp->ond[o] = m;
        /* an input that repeats one row of at most a tile (broadcast over every other
         * dim, or a scalar): read from that row repeated, laid out once per task */
        if (o != out) {
            bool row = (m == 1 && sp->ost[o][0] == 0) ||
                       (m == 2 && sp->ost[o][0] == 0 && sp->oshape[o][1] <= T);
            sp->periodic[o] = row && slots < PERIODIC_MAX ? ++slots : 0;
        }
    }
}

/* The multi-index of flat index e0 and the operand's byte offset there (one long dim, the
 * common case after merging, needs no division). */
static inline void start_index(const tile_space *sp, int op, int64_t e0, int64_t *idx,
                               int64_t *off) {
    int nd = sp->ond[op];
    if (nd == 1) {
        idx[0] = e0;
        *off = e0 * sp->ost[op][0];
        return;
    }
    int64_t rest = e0, o = 0;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = rest % sp->oshape[op][d];
        rest /= sp->oshape[op][d];
        o += idx[d] * sp->ost[op][d];
    }
    *off = o;
}

/* Move the multi-index (and the operand's offset) run elements on along the last dim,
 * carrying into the dims before it. */
static inline void advance(const tile_space *sp, int op, int run, int64_t *idx, int64_t *off) {
    int nd = sp->ond[op];
    idx[nd - 1] += run;
    *off += run * sp->ost[op][nd - 1];
    for (int d = nd - 1; d > 0 && idx[d] == sp->oshape[op][d]; d--) {
        *off += sp->ost[op][d - 1] - idx[d] * sp->ost[op][d];
        idx[d] = 0;
        idx[d - 1]++;
    }
}

/* count elements of an operand from flat index e0 into dst (bool: 0.0f / 1.0f). */
static const float *gather(const tile_space *sp, int op, const char *base, int dtype,
                           int64_t e0, int count, float *dst) {
    int nd = sp->ond[op];
    int64_t idx[SV_TILE_MAX_DIMS], off = 0;
    start_index(sp, op, e0, idx, &off);
    int64_t s = sp->ost[op][nd - 1], len = sp->oshape[op][nd - 1];
    if (dtype == SV_DT_F32 && s == 4 && count == T && idx[nd - 1] + T <= len)
        return (const float *)(base + off); /* one contiguous run: read in place */
    for (int done = 0; done < count;) {
        if (nd >= 2 && idx[nd - 1] == 0 && len <= 64 && (s == 4 || s == 0) &&
            dtype == SV_DT_F32 && count - done >= 2 * len) {
            /* whole short rows, row after row, the index moved once, not once a row: rows
             * of the operand (boxes' 2 corners broadcast against another set: 3.6 ns an
             * element a row at a time), or, at stride 0, rows of one value each (x[:, :,
             * None] beside x[:, None, :], an outer product: 0.67 ns an element) */
            int64_t s2 = sp->ost[op][nd - 2], left = sp->oshape[op][nd - 2] - idx[nd - 2];
            int64_t rows = (count - done) / len < left ? (count - done) / len : left;
            const char *p = base + off;
            float *q = dst + done;
            if (s == 0) {
                for (int64_t r = 0; r < rows; r++, p += s2, q += len) {
                    float v;
                    memcpy(&v, p, 4);
                    for (int64_t i = 0; i < len; i++) q[i] = v;
                }
            } else {
                switch (len) { /* a copy of known size per row */
#define SV_ROWS_OF(L)                                                                        \
    case L:                                                                                  \
        for (int64_t r = 0; r < rows; r++, p += s2, q += L) memcpy(q, p, 4 * L);            \
        break;
                    SV_ROWS_OF(1)
                    SV_ROWS_OF(2)
                    SV_ROWS_OF(3)
                    SV_ROWS_OF(4)
#undef SV_ROWS_OF
                default:
                    for (int64_t r = 0; r < rows; r++, p += s2, q += len)
                        memcpy(q, p, 4 * (size_t)len);
                }
            }
            done += (int)(rows * len);
            idx[nd - 2] += rows;
            off += rows * s2;
            for (int d = nd - 2; d > 0 && idx[d] == sp->oshape[op][d]; d--) {
                off += sp->ost[op][d - 1] - idx[d] * sp->ost[op][d];
                idx[d] = 0;
                idx[d - 1]++;
            }
            continue;
        }
        int run = (int)(len - idx[nd - 1] < count - done ? len - idx[nd - 1] : count - done);
        const char *p = base + off;
        float *q = dst + done;
        if (dtype == SV_DT_BOOL) {
            for (int i = 0; i < run; i++) q[i] = p[i * s] ? 1.0f : 0.0f;
        } else if (dtype == SV_DT_I64) { /* rounded to nearest, as NumPy casts */
            for (int i = 0; i < run; i++) {
                int64_t v;
                memcpy(&v, p + i * s, 8);
                q[i] = (float)v;
            }
        } else if (dtype == SV_DT_I32) {
            for (int i = 0; i < run; i++) {
                int32_t v;
                memcpy(&v, p + i * s, 4);
                q[i] = (float)v;
            }
        } else if (s == 4 && run < 16) { /* a short row: a call to memcpy costs more */
            for (int i = 0; i < run; i++) memcpy(q + i, p + 4 * i, 4);
        } else if (s == 4) {
            memcpy(q, p, (size_t)run * 4);
        } else if (s == 0) {
            float v;
            memcpy(&v, p, 4);
            for (int i = 0; i < run; i++) q[i] = v;
        } else if (s == -4) { /* a row read backwards (np.flip, x[..., ::-1]): vectors */
            for (int i = 0; i < run; i++) memcpy(q + i, p - 4 * i, 4);
        } else {
            for (int i = 0; i < run; i++) memcpy(q + i, p + i * s, 4);
        }
        done += run;
        advance(sp, op, run, idx, &off);
    }
    return dst;
}

/* count results from flat index e0 into the output. */
static void scatter(const tile_space *sp, char *base, int dtype, int64_t e0, int count,
                    const float *v) {
    int op = SV_TILE_MAX_INPUTS, nd = sp->ond[op];
    int64_t idx[SV_TILE_MAX_DIMS], off = 0;
    start_index(sp, op, e0, idx, &off);
    int64_t s = sp->ost[op][nd - 1], len = sp->oshape[op][nd - 1];
    for (int done = 0; done < count;) {
        int run = (int)(len - idx[nd - 1] < count - done ? len - idx[nd - 1] : count - done);
        char *p = base + off;
        const float *q = v + done;
        if (dtype == SV_DT_BOOL)
            for (int i = 0; i < run; i++) p[i * s] = q[i] != 0.0f;
        else if (s == 4 && run < 16)
            for (int i = 0; i < run; i++) memcpy(p + 4 * i, q + i, 4);
        else if (s == 4)
            memcpy(p, q, (size_t)run * 4);
        else
            for (int i = 0; i < run; i++) memcpy(p + i * s, q + i, 4);
        done += run;
        advance(sp, op, run, idx, &off);
    }
}

/* Registers of one task: constants splatted once, inputs per tile. */
typedef struct tile_regs {
    const float *ptr[SV_TILE_MAX_REGS];
    float (*scratch)[T];
    float (*rows)[PERIOD_LEN]; /* repeated rows, by slot - 1 */
} tile_regs;

static void regs_init(const tile_job *j, tile_regs *r, float (*scratch)[T],
                      float (*rows)[PERIOD_LEN]) {
    const sv_tile_prog *p = &j->plan->prog;
    r->scratch = scratch;
    r->rows = rows;
    memset(scratch, 0, sizeof(float[T]) * (size_t)p->n_regs);
    for (int c = 0; c < p->n_consts; c++) {
        float *reg = scratch[p->n_inputs + c];
        for (int i = 0; i < T; i++) reg[i] = p->consts[c];
        r->ptr[p->n_inputs + c] = reg;
    }
    for (int i = 0; i < p->n_inputs; i++) { /* the row, then copies of it */
        int slot = j->sp.periodic[i];
        if (!slot) continue;
        const tile_space *sp = &j->sp;
        int64_t len = sp->ond[i] == 2 ? sp->oshape[i][1] : 1;
        float *row = rows[slot - 1];
        const float *got = gather(sp, i, j->args->in[i].data, p->in_dtype[i], 0, (int)len, row);
        if (got != row) memcpy(row, got, (size_t)len * 4); /* it was read in place */
        /* as far as a tile reads: its place in the row, its elements, a vector's rounding
         * (a job of 16 elements fills 33 for a scalar input, not the buffer's 528) */
        int64_t reach = len + (sp->total < T ? sp->total : T) + 16;
        for (int64_t k = len; k < reach && k < PERIOD_LEN; k++) row[k] = row[k - len];
    }
}

/* The program on the count elements from flat index e0; returns the result register.
 * With `out` (whole vectors of float32 output, one contiguous run), the last instruction
 * writes there (the caller then has nothing to scatter). */
static const float *run_tile(const tile_job *j, tile_regs *r, int64_t e0, int count,
                             float *out) {
    const sv_tile_prog *p = &j->plan->prog;
    const tile_space *sp = &j->sp;
    for (int i = 0; i < p->n_inputs; i++) {
        int slot = sp->periodic[i];
        if (slot) { /* where the tile starts along the repeated row */
            int64_t len = sp->ond[i] == 2 ? sp->oshape[i][1] : 1;
            r->ptr[i] = r->rows[slot - 1] + e0 % len;
            continue;
        }
        r->ptr[i] = gather(sp, i, j->args->in[i].data, p->in_dtype[i], e0, count,
                           r->scratch[i]);
    }
    int n = (count + 15) & ~15; /* whole vectors of every level; the tile has room */
    for (int i = 0; i < p->n_instr; i++) {
        const sv_tile_instr *in = &p->code[i];
        float *dst = out && i == p->n_instr - 1 ? out : r->scratch[in->dst];
        j->k->op[j->plan->kernel[i]](dst, r->ptr[in->a], r->ptr[in->b], r->ptr[in->c], n);
        r->ptr[in->dst] = dst;
    }
    return r->ptr[p->out_reg];
}

static void elementwise_task(void *vctx, int64_t task) {
    const tile_job *j = vctx;
    float scratch[SV_TILE_MAX_REGS][T] __attribute__((aligned(64)));
    float rows[PERIODIC_MAX][PERIOD_LEN] __attribute__((aligned(64)));
    tile_regs r;
    regs_init(j, &r, scratch, rows);
    int64_t t0 = task * j->tiles_per_task, t1 = t0 + j->tiles_per_task;
    const tile_space *sp = &j->sp;
    const sv_tile_prog *p = &j->plan->prog;
    const int out = SV_TILE_MAX_INPUTS, ond = sp->ond[out];
    /* where a whole tile's results are one run of float32 in the output, the last
     * instruction (when it writes the result register) writes them there: the scatter's
     * copy was about a third of x * 2 + 1's time */
    bool direct = p->n_instr > 0 && p->code[p->n_instr - 1].dst == p->out_reg &&
                  j->plan->out_dtype == SV_DT_F32 && sp->ost[out][ond - 1] == 4;
    for (int64_t t = t0; t < t1 && t * T < sp->total; t++) {
        int64_t e0 = t * T;
        int count = (int)(sp->total - e0 < T ? sp->total - e0 : T);
        if (direct && count == T) {
            int64_t idx[SV_TILE_MAX_DIMS], off;
            start_index(sp, out, e0, idx, &off);
            if (idx[ond - 1] + T <= sp->oshape[out][ond - 1]) {
                run_tile(j, &r, e0, count, (float *)(j->args->out.data + off));
                continue;
            }
        }
        scatter(sp, j->args->out.data, j->plan->out_dtype, e0, count,
                run_tile(j, &r, e0, count, NULL));
    }
}

static double combine(int red, double acc, double v) {
    switch (red) {
    case SV_RED_MAX: return (v >= acc || v != v) ? v : acc;
    case SV_RED_MIN: return (v <= acc || v != v) ? v : acc;
    case SV_RED_PROD: return acc * v;
    default: return acc + v;
    }
}

static double identity(int red) {
    switch (red) {
    case SV_RED_MAX: return -HUGE_VAL;
    case SV_RED_MIN: return HUGE_VAL;
    case SV_RED_PROD: return 1.0;
    default: return 0.0;
    }
}

/* The reduction of fewer than 4 floats (a point's 3 coordinates) in order, as the vector
 * kernel reduces fewer than a vector; its call and horizontal fold cost more than the work
 * (squared distances over rows of 3: 11% fewer instructions a call, counted by callgrind;
 * from 4 on the vector kernel takes fewer). */
static float short_reduce(int red, const float *v, int n) {
    float r = red == SV_RED_MAX ? -HUGE_VALF : red == SV_RED_MIN ? HUGE_VALF
              : red == SV_RED_PROD ? 1.0f : 0.0f;
    for (int i = 0; i < n; i++) {
        float x = v[i];
        switch (red) {
        case SV_RED_MAX: r = (x >= r || x != x) ? x : r; break;
        case SV_RED_MIN: r = (x <= r || x != x) ? x : r; break;
        case SV_RED_PROD: r *= x; break;
        default: r += x;
        }
    }
    return r;
}

/* Store the finished reduction of output o. */
static void store_reduced(const tile_job *j, int64_t o, double acc) {
    const tile_space *sp = &j->sp;
    if (j->plan->prog.reduce == SV_RED_MEAN) acc /= (double)sp->inner;
    int64_t off = sp->out_step >= 0 ? o * sp->out_step : 0, rest = o;
    for (int d = sp->nkeep - 1; d >= 0 && sp->out_step < 0; d--) {
        off += (rest % sp->shape[d]) * sp->st[SV_TILE_MAX_INPUTS][d];
        rest /= sp->shape[d];
    }
    char *p = j->args->out.data + off;
    float v = (float)acc;
    if (j->plan->out_dtype == SV_DT_BOOL)
        *p = v != 0.0f;
    else
        memcpy(p, &v, 4);
}

/* nseg whole segments of R floats at v, the outputs at out, step bytes apart: what the
 * loop below does segment by segment, without working out each output's place (rows of
 * 1 to 8 floats took 2-4 ns an output through it) */
static void reduce_whole(const tile_job *j, const float *v, int64_t nseg, int64_t R, int red,
                         char *out, int64_t step) {
    bool mean = j->plan->prog.reduce == SV_RED_MEAN;
    double id = identity(red);
    if (R < 16 && (red == SV_RED_MAX || red == SV_RED_MIN)) {
        /* rows side by side, a column at a time: the compares of different rows do not wait
         * on each other (a row at a time, each compare waited on the one before, and a row
         * of 4 to 12 took 5-11 ns); a NaN wins, and of equal values the later one, as in
         * NumPy's loop */
        bool mx = red == SV_RED_MAX;
        for (int64_t s0 = 0; s0 < nseg; s0 += 64) {
            int nb = nseg - s0 < 64 ? (int)(nseg - s0) : 64;
            const float *b = v + s0 * R;
            float acc[64];
            for (int l = 0; l < nb; l++) acc[l] = b[l * R];
            for (int64_t c = 1; c < R; c++) {
                if (mx)
                    for (int l = 0; l < nb; l++) {
                        float x = b[l * R + c], a = acc[l];
                        acc[l] = ((x >= a) | (x != x)) ? x : a;
                    }
                else
                    for (int l = 0; l < nb; l++) {
                        float x = b[l * R + c], a = acc[l];
                        acc[l] = ((x <= a) | (x != x)) ? x : a;
                    }
            }
            for (int l = 0; l < nb; l++) memcpy(out + (s0 + l) * step, &acc[l], 4);
        }
        return;
    }
    if (R >= 4 && R < 8 && red == SV_RED_SUM) { /* the same, in order from the first element, as
                                       * NumPy sums fewer than 8 */
        for (int64_t s0 = 0; s0 < nseg; s0 += 64) {
            int nb = nseg - s0 < 64 ? (int)(nseg - s0) : 64;
            const float *b = v + s0 * R;
            float acc[64];
            for (int l = 0; l < nb; l++) acc[l] = b[l * R];
            for (int64_t c = 1; c < R; c++)
                for (int l = 0; l < nb; l++) acc[l] += b[l * R + c];
            for (int l = 0; l < nb; l++) {
                float f = mean ? (float)((double)acc[l] / (double)R) : acc[l];
                memcpy(out + (s0 + l) * step, &f, 4);
            }
        }
        return;
    }
    if (R < 4 && (red == SV_RED_SUM || red == SV_RED_MAX)) { /* short_reduce's, unswitched */
        for (int64_t s = 0; s < nseg; s++, v += R) {
            float r = red == SV_RED_SUM ? 0.0f : -HUGE_VALF;
            if (red == SV_RED_SUM)
                for (int i = 0; i < R; i++) r += v[i];
            else /* without branches: where they fall is data */
                for (int i = 0; i < R; i++) r = ((v[i] >= r) | (v[i] != v[i])) ? v[i] : r;
            double acc = combine(red, id, r);
            if (mean) acc /= (double)R;
            float f = (float)acc;
            memcpy(out + s * step, &f, 4);
        }
        return;
    }
    for (int64_t s = 0; s < nseg; s++, v += R) {
        double acc = combine(red, id, R < 4 ? short_reduce(red, v, (int)R)
                                            : j->k->reduce(red, v, (int)R));
        if (mean) acc /= (double)R;
        float f = (float)acc;
        memcpy(out + s * step, &f, 4);
    }
}

/* n floats at v folded into output *o's accumulator; where they end it (`ends`, with the
 * outputs not split in chunks), it is stored and the next output begun. */
static void fold_run(const tile_job *j, int red, const float *v, int n, bool ends, double *acc,
                     int64_t *o) {
    *acc = combine(red, *acc, n < 4 ? short_reduce(red, v, n) : j->k->reduce(red, v, n));
    if (ends && j->chunks == 1) {
        store_reduced(j, *o, *acc);
        *acc = identity(red);
        (*o)++;
    }
}

/* Elements [f0, f1) of the flat space (segment boundaries of whole outputs, or one chunk
 * of one output), folded per output. */
static void reduce_range(const tile_job *j, int64_t f0, int64_t f1, int64_t chunk) {
    int red = j->plan->prog.reduce == SV_RED_MEAN ? SV_RED_SUM : j->plan->prog.reduce;
    int64_t R = j->sp.inner, o = f0 / R;
    double acc = identity(red);
    const sv_tile_prog *p = &j->plan->prog;
    if (p->n_instr == 0 && p->out_reg == 0 && p->in_dtype[0] == SV_DT_F32 && R >= 16 &&
        j->sp.ond[0] == 1 && j->sp.ost[0][0] == 4 && !j->sp.periodic[0]) {
        /* a reduction of an input that lies in memory in the order of the space (x.min(axis=
         * (1, 2)) of a contiguous x): the vector kernel over runs of the input itself, not a
         * tile's copy of it with a call and a fold per tile (the min over [8, 96, 96]: 18.7
         * us against NumPy's 4); a max or min in one run per output, a sum or product in
         * runs of 4 tiles folded in double, as the tiles' are; rows under 16 keep
         * reduce_whole's order, NumPy's) */
        const float *x = (const float *)j->args->in[0].data;
        int64_t most = red == SV_RED_MAX || red == SV_RED_MIN ? (int64_t)1 << 30 : 4 * T;
        for (int64_t e = f0; e < f1;) {
            int64_t rr = e - o * R, seg = R - rr < f1 - e ? R - rr : f1 - e;
            int n = (int)(seg < most ? seg : most);
            fold_run(j, red, x + e, n, rr + n == R, &acc, &o);
            e += n;
        }
        if (j->chunks > 1) j->partial[o * j->chunks + chunk] = acc;
        return;
    }
    float scratch[SV_TILE_MAX_REGS][T] __attribute__((aligned(64)));
    float rows[PERIODIC_MAX][PERIOD_LEN] __attribute__((aligned(64)));
    tile_regs r;
    regs_init(j, &r, scratch, rows);
    for (int64_t e0 = f0; e0 < f1; e0 += T) {
        int count = (int)(f1 - e0 < T ? f1 - e0 : T);
        const float *v = run_tile(j, &r, e0, count, NULL);
        for (int pos = 0; pos < count;) {
            int64_t e = e0 + pos, rr = e - o * R;
            if (rr == 0 && j->chunks == 1 && j->sp.out_step >= 0 && count - pos >= R &&
                j->plan->out_dtype != SV_DT_BOOL) { /* whole segments in this tile */
                int64_t nseg = (count - pos) / R;
                reduce_whole(j, v + pos, nseg, R, red, j->args->out.data + o * j->sp.out_step,
                             j->sp.out_step);
                pos += (int)(nseg * R);
                o += nseg;
                continue;
            }
            int seg = (int)(R - rr < count - pos ? R - rr : count - pos);
            fold_run(j, red, v + pos, seg, rr + seg == R, &acc, &o);
            pos += seg;
        }
    }
    if (j->chunks > 1) j->partial[o * j->chunks + chunk] = acc;
}

static void reduce_task(void *vctx, int64_t task) {
    const tile_job *j = vctx;
    int64_t R = j->sp.inner;
    if (j->chunks > 1) {
        int64_t o = task / j->chunks, c = task % j->chunks;
        int64_t r0 = c * j->chunk_len, r1 = r0 + j->chunk_len < R ? r0 + j->chunk_len : R;
        reduce_range(j, o * R + r0, o * R + r1, c);
        return;
    }
    int64_t o0 = task * j->tiles_per_task, o1 = o0 + j->tiles_per_task; /* outputs here */
    if (o1 > j->sp.outer) o1 = j->sp.outer;
    if (o0 < o1) reduce_range(j, o0 * R, o1 * R, 0);
}

/* Empty reductions: sum 0, prod 1, mean NaN (as NumPy); max and min have no identity. */
static int reduce_empty(const tile_job *j, sv_tile_error *e) {
    int red = j->plan->prog.reduce;
    if (red == SV_RED_MAX || red == SV_RED_MIN)
        return sv_tile_fail(e, "max and min of no elements have no value",
                     "at least one element per output", "a reduced axis of length 0",
                     "reduce a non-empty axis");
    for (int64_t o = 0; o < j->sp.outer; o++)
        store_reduced(j, o, red == SV_RED_MEAN ? (double)NAN : identity(red));
    return 0;
}

static void plan_threads(tile_job *j, int threads) {
    const tile_space *sp = &j->sp;
    int t = threads > 0 ? threads : sv_pool_threads();
    if (sp->total < TILE_PARALLEL_MIN) t = 1;
    int64_t want = 4 * (int64_t)t;
    j->chunks = 1;
    if (j->plan->prog.reduce == SV_RED_NONE) {
        int64_t tiles = (sp->total + T - 1) / T;
        j->tiles_per_task = (tiles + (t > 1 ? want : 1) - 1) / (t > 1 ? want : 1);
        return;
    }
    if (t > 1 && sp->outer < want) { /* few outputs: chunks of each output's elements */
        int64_t per = (want + sp->outer - 1) / sp->outer;
        j->chunk_len = ((sp->inner + per - 1) / per + T - 1) / T * T;
        j->chunks = (sp->inner + j->chunk_len - 1) / j->chunk_len;
    }
    int64_t tasks = t > 1 ? want : 1;
    j->tiles_per_task = (sp->outer + tasks - 1) / tasks; /* outputs per task */
}

int sv_tile_run(const sv_tile_plan *plan, const sv_tile_args *args, int threads,
                sv_tile_error *err) {
    tile_job j = {.plan = plan, .args = args, .k = sv_isa()->tile};
    int64_t shape[SV_TILE_MAX_DIMS];
    int nd = 0, nred = 0;
    if (bind(&j, shape, &nd, &nred, err) < 0) return -1;
    coalesce(&j, shape, nd, nred);
    bool reducing = plan->prog.reduce != SV_RED_NONE;
    if (reducing && j.sp.inner == 0) return j.sp.outer ? reduce_empty(&j, err) : 0;
    if (j.sp.total == 0) return 0;
    plan_threads(&j, threads);
    if (!reducing) {
        int64_t ntasks = ((j.sp.total + T - 1) / T + j.tiles_per_task - 1) / j.tiles_per_task;
        sv_parallel(ntasks, elementwise_task, &j);
        return 0;
    }
    if (j.chunks > 1) {
        j.partial = sv_alloc((size_t)(j.sp.outer * j.chunks) * sizeof(double));
        if (!j.partial) j.chunks = 1, j.tiles_per_task = j.sp.outer;
    }
    int64_t ntasks = j.chunks > 1 ? j.sp.outer * j.chunks
                                  : (j.sp.outer + j.tiles_per_task - 1) / j.tiles_per_task;
    sv_parallel(ntasks, reduce_task, &j);
    if (j.chunks > 1) {
        int red = plan->prog.reduce == SV_RED_MEAN ? SV_RED_SUM : plan->prog.reduce;
        for (int64_t o = 0; o < j.sp.outer; o++) {
            double acc = identity(red);
            for (int64_t c = 0; c < j.chunks; c++) acc = combine(red, acc, j.partial[o * j.chunks + c]);
            store_reduced(&j, o, acc);
        }
        sv_free(j.partial);
    }
    return 0;
}
