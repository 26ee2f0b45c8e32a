/* The kernel families as region-executor instructions (OP_EXTERNAL): each entry point here
 * checks its static data once and returns a capsule ("shapevm.exec_kernel") whose function
 * runs over the call's resolved tensors.  The executor checked the tensors' shapes when it
 * bound the call; these functions still check what they rely on (ranks, unit strides) and
 * fail the instruction with a message rather than touch memory they were not given. */
#include "pyutil.h"
#include "exec.h"
#include "svtile.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static void free_capsule(PyObject *cap) {
    sv_exec_kernel *k = PyCapsule_GetPointer(cap, "shapevm.exec_kernel");
    if (k) {
        PyMem_Free((void *)k->self);
        PyMem_Free(k);
    }
}

static PyObject *make_capsule(svx_kernel_fn run, void *self) {
    sv_exec_kernel *k = PyMem_Malloc(sizeof *k);
    if (!k) {
        PyMem_Free(self);
        return PyErr_NoMemory();
    }
    k->run = run;
    k->self = self;
    PyObject *cap = PyCapsule_New(k, "shapevm.exec_kernel", free_capsule);
    if (!cap) {
        PyMem_Free(self);
        PyMem_Free(k);
    }
    return cap;
}

/* the error of a kernel constructor given an axis outside [0, 8) */
static PyObject *bad_axis(const char *fn, int axis) {
    char found[32];
    snprintf(found, sizeof found, "axis %d", axis);
    return sv_raise(fn, "an axis out of range", "0 <= axis < 8 (normalized)", found,
                    "pass the axis counted from the front");
}

/* a kernel without attributes (its capsule frees a self it was given) */
static PyObject *plain_kernel(svx_kernel_fn run) {
    void *none = PyMem_Malloc(1);
    if (!none) return PyErr_NoMemory();
    return make_capsule(run, none);
}

/* The attributes of a kernel along one axis (take, take_along_axis). */
typedef struct axis_self {
    int axis;
} axis_self;

/* kernel(axis) -> a kernel `run` along the axis */
static PyObject *axis_kernel(PyObject *args, const char *fn, svx_kernel_fn run) {
    int axis;
    if (!PyArg_ParseTuple(args, "i", &axis)) return NULL;
    if (axis < 0 || axis >= SVX_MAXDIM) return bad_axis(fn, axis);
    axis_self *t = PyMem_Malloc(sizeof *t);
    if (!t) return PyErr_NoMemory();
    t->axis = axis;
    return make_capsule(run, t);
}

/* Whether every operand and result is float32 (the families below read nothing else). */
static int all_f32(const svx_tensor *ins, int nin, const svx_tensor *outs, int nout) {
    for (int k = 0; k < nin; k++)
        if (ins[k].dtype != SVX_F32) return 0;
    for (int k = 0; k < nout; k++)
        if (outs[k].dtype != SVX_F32) return 0;
    return 1;
}

static int same_shape(const svx_tensor *a, const svx_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

/* -- fused chains: one tile program per result -------------------------------------------- */
static int tile_dtype(int svx) {
    switch (svx) {
    case SVX_F32: return SV_DT_F32;
    case SVX_BOOL: return SV_DT_BOOL;
    case SVX_I32: return SV_DT_I32;
    case SVX_I64: return SV_DT_I64;
    default: return -1;
    }
}

typedef struct {
    int nprog;
    sv_tile_plan plans[SVX_MAXOUT];
} chain_self;

static void operand_of(const svx_tensor *t, sv_tile_operand *op) {
    int isz = svx_itemsize[t->dtype];
    op->data = t->data;
    op->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) {
        op->shape[d] = t->shape[d];
        op->strides[d] = t->strides[d] * isz;
    }
}

static int run_chain(const void *vself, const svx_tensor *ins, int nin, const svx_tensor *outs,
                     int nout, const int32_t *iattr, const float *fattr, const char **err) {
    (void)iattr;
    (void)fattr;
    const chain_self *c = vself;
    if (nout != c->nprog || nin > SV_TILE_MAX_INPUTS) {
        *err = "chain: operand count differs from its programs";
        return -1;
    }
    sv_tile_args args;
    args.n_inputs = nin;
    for (int k = 0; k < nin; k++) {
        for (int o = 0; o < nout; o++)
            if (tile_dtype(ins[k].dtype) != c->plans[o].prog.in_dtype[k]) {
                *err = "chain: an operand of another dtype than its program reads";
                return -1;
            }
        if (ins[k].ndim > SV_TILE_MAX_DIMS) {
            *err = "chain: an operand of too high a rank";
            return -1;
        }
        operand_of(&ins[k], &args.in[k]);
    }
    for (int o = 0; o < nout; o++) {
        if (tile_dtype(outs[o].dtype) != c->plans[o].out_dtype || outs[o].ndim > SV_TILE_MAX_DIMS) {
            *err = "chain: a result of another dtype or rank than its program writes";
            return -1;
        }
        operand_of(&outs[o], &args.out);
        sv_tile_error te;
        if (sv_tile_run(&c->plans[o], &args, 0, &te) != 0) {
            static _Thread_local char msg[200];
            snprintf(msg, sizeof msg, "chain: %s", te.what);
            *err = msg;
            return -1;
        }
    }
    return 0;
}

/* chain_kernel(programs) -> kernel: the TileProgram of each result, in order */
static PyObject *py_chain_kernel(PyObject *self, PyObject *arg) {
    (void)self;
    PyObject *seq = PySequence_Fast(arg, "chain_kernel takes a list of TileProgram");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > SVX_MAXOUT) {
        Py_DECREF(seq);
        char found[32];
        snprintf(found, sizeof found, "%zd programs", n);
        return sv_raise("chain_kernel", "wrong number of programs", "1 to 4 TileProgram",
                        found, "split the chain");
    }
    chain_self *c = PyMem_Calloc(1, sizeof *c);
    if (!c) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    c->nprog = (int)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        const sv_tile_plan *plan = sv_tile_plan_of(PySequence_Fast_GET_ITEM(seq, i));
        if (!plan) {
            PyMem_Free(c);
            Py_DECREF(seq);
            return sv_raise("chain_kernel", "not a tile program", "shapevm.native.TileProgram",
                            Py_TYPE(PySequence_Fast_GET_ITEM(seq, i))->tp_name,
                            "build it with shapevm.native.tile.Program");
        }
        c->plans[i] = *plan;
    }
    Py_DECREF(seq);
    return make_capsule(run_chain, c);
}

/* -- row ops --------------------------------------------------------------------------------- */
typedef struct {
    int kind;
    float eps, scale;
    int64_t n;
    float *gamma, *beta; /* inside this allocation, or NULL */
} rowop_self;

static int rows_of(const svx_tensor *t, sv_rowop *op, int64_t *strides) {
    (void)op;
    if (t->ndim < 1 || t->ndim - 1 > SV_ROW_MAX_DIMS) return -1;
    if (t->shape[t->ndim - 1] > 1 && t->strides[t->ndim - 1] != 1) return -1;
    for (int d = 0; d < t->ndim - 1; d++) strides[d] = t->strides[d];
    return 0;
}

static int run_rowop(const void *vself, const svx_tensor *ins, int nin, const svx_tensor *outs,
                     int nout, const int32_t *iattr, const float *fattr, const char **err) {
    (void)iattr;
    (void)fattr;
    const rowop_self *r = vself;
    if (nin != 1 || nout != 1) {
        *err = "row op: takes one operand and gives one result";
        return -1;
    }
    const svx_tensor *x = &ins[0], *y = &outs[0];
    sv_rowop op;
    memset(&op, 0, sizeof op);
    if (!all_f32(ins, nin, outs, nout) || !same_shape(x, y)) {
        *err = "row op: a float32 operand and result of one shape";
        return -1;
    }
    if (rows_of(x, &op, op.sx) || rows_of(y, &op, op.sy)) {
        *err = "row op: rows without unit stride";
        return -1;
    }
    op.kind = r->kind;
    op.nd = x->ndim - 1;
    for (int d = 0; d < op.nd; d++) op.lead[d] = x->shape[d];
    op.n = x->shape[x->ndim - 1];
    if (op.n < 1) return 0;
    if ((r->gamma || r->beta) && op.n != r->n) {
        *err = "row op: rows of another length than its weights";
        return -1;
    }
    op.x = (const float *)x->data;
    op.y = (float *)y->data;
    op.gamma = r->gamma;
    op.beta = r->beta;
    op.eps = r->eps;
    op.scale = r->scale;
    sv_rowop_run(&op, 0);
    return 0;
}

static int vector_arg(const char *name, PyObject *obj, int64_t *n, float **dst, float *buf) {
    if (obj == Py_None) return 0;
    PyArrayObject *a = sv_arg_f32("rowop_kernel", name, obj, 1, 1, 0, "f32[n]");
    if (!a) return -1;
    if (*n >= 0 && PyArray_DIM(a, 0) != *n) {
        sv_raise("rowop_kernel", "gamma and beta differ in length", "the same n", name,
                 "pass vectors of the row's length");
        return -1;
    }
    *n = PyArray_DIM(a, 0);
    int64_t s = PyArray_STRIDE(a, 0) / 4;
    const float *src = PyArray_DATA(a);
    for (int64_t i = 0; i < *n; i++) buf[i] = src[i * s];
    *dst = buf;
    return 0;
}

/* rowop_kernel(kind, eps=0.0, scale=1.0, gamma=None, beta=None) -> kernel */
static PyObject *py_rowop_kernel(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"kind", "eps", "scale", "gamma", "beta", NULL};
    const char *kind;
    float eps = 0.0f, scale = 1.0f;
    PyObject *g = Py_None, *b = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|ffOO", names, &kind, &eps, &scale, &g, &b))
        return NULL;
    int k;
    if (strcmp(kind, "layer_norm") == 0) k = SV_ROW_LAYER_NORM;
    else if (strcmp(kind, "rms_norm") == 0) k = SV_ROW_RMS_NORM;
    else if (strcmp(kind, "softmax") == 0) k = SV_ROW_SOFTMAX;
    else if (strcmp(kind, "log_softmax") == 0) k = SV_ROW_LOG_SOFTMAX;
    else
        return sv_raise("rowop_kernel", "unknown row op",
                        "layer_norm, rms_norm, softmax or log_softmax", kind,
                        "use one of the expected names");
    int64_t n = -1;
    Py_ssize_t len = 0;
    if (g != Py_None && PyArray_Check(g)) len += PyArray_SIZE((PyArrayObject *)g);
    if (b != Py_None && PyArray_Check(b)) len += PyArray_SIZE((PyArrayObject *)b);
    rowop_self *r = PyMem_Calloc(1, sizeof *r + sizeof(float) * (size_t)(len + 1));
    if (!r) return PyErr_NoMemory();
    float *buf = (float *)(r + 1);
    r->kind = k;
    r->eps = eps;
    r->scale = scale;
    if (vector_arg("gamma", g, &n, &r->gamma, buf) < 0 ||
        vector_arg("beta", b, &n, &r->beta, buf + (r->gamma ? n : 0)) < 0) {
        PyMem_Free(r);
        return NULL;
    }
    r->n = n;
    return make_capsule(run_rowop, r);
}

/* -- attention ------------------------------------------------------------------------------- */
typedef struct {
    float scale;
    int causal;
} attention_self;

static int run_attention(const void *vself, const svx_tensor *ins, int nin,
                         const svx_tensor *outs, int nout, const int32_t *iattr,
                         const float *fattr, const char **err) {
    (void)iattr;
    (void)fattr;
    const attention_self *s = vself;
    if (nin < 3 || nin > 4 || nout != 1) {
        *err = "attention: takes q, k, v (and an additive mask) and gives one result";
        return -1;
    }
    const svx_tensor *q = &ins[0], *k = &ins[1], *v = &ins[2], *o = &outs[0];
    const svx_tensor *m = nin == 4 ? &ins[3] : NULL;
    int nd = q->ndim - 2;
    if (nd < 0 || nd > SV_ATT_MAX_DIMS || k->ndim != q->ndim || v->ndim != q->ndim ||
        o->ndim != q->ndim) {
        *err = "attention: operands of different ranks";
        return -1;
    }
    for (const svx_tensor *t = q; t; t = t == q ? k : t == k ? v : t == v ? o : NULL)
        if (t->shape[t->ndim - 1] > 1 && t->strides[t->ndim - 1] != 1) {
            *err = "attention: an operand without unit stride along its last axis";
            return -1;
        }
    if (!all_f32(ins, nin, outs, nout) || k->shape[nd + 1] != q->shape[nd + 1] ||
        v->shape[nd] != k->shape[nd] || o->shape[nd] != q->shape[nd] ||
        o->shape[nd + 1] != v->shape[nd + 1]) {
        *err = "attention: float32 q [sq, d], k [sk, d], v [sk, dv] and result [sq, dv]";
        return -1;
    }
    for (int d = 0; d < nd; d++)
        for (const svx_tensor *t = q; t != o; t = t == q ? k : t == k ? v : o)
            if (t->shape[d] != 1 && t->shape[d] != o->shape[d]) {
                *err = "attention: batch dimensions that do not broadcast to the result's";
                return -1;
            }
    if (m) { /* [..., sq or 1, sk], unit stride along the keys */
        bool fits = m->ndim == q->ndim && m->shape[nd + 1] == k->shape[nd] &&
                    (m->shape[nd] == q->shape[nd] || m->shape[nd] == 1) &&
                    (m->shape[nd + 1] <= 1 || m->strides[nd + 1] == 1);
        for (int d = 0; d < nd && fits; d++)
            fits = m->shape[d] == 1 || m->shape[d] == o->shape[d];
        if (!fits) {
            *err = "attention: a mask that does not broadcast to the scores [..., sq, sk] "
                   "with unit stride along the keys";
            return -1;
        }
    }
    sv_attention a;
    memset(&a, 0, sizeof a);
    a.nd = nd;
    if (m) {
        a.mask = (const float *)m->data;
        for (int d = 0; d < nd; d++) a.sbm[d] = m->shape[d] == 1 ? 0 : m->strides[d];
        a.srm = m->shape[nd] == 1 ? 0 : m->strides[nd];
    }
    for (int d = 0; d < nd; d++) {
        a.batch[d] = o->shape[d];
        a.sbq[d] = q->shape[d] == 1 ? 0 : q->strides[d];
        a.sbk[d] = k->shape[d] == 1 ? 0 : k->strides[d];
        a.sbv[d] = v->shape[d] == 1 ? 0 : v->strides[d];
        a.sbo[d] = o->strides[d];
    }
    a.sq = q->shape[nd];
    a.d = q->shape[nd + 1];
    a.sk = k->shape[nd];
    a.dv = v->shape[nd + 1];
    a.q = (const float *)q->data;
    a.srq = q->strides[nd];
    a.k = (const float *)k->data;
    a.srk = k->strides[nd];
    a.v = (const float *)v->data;
    a.srv = v->strides[nd];
    a.o = (float *)o->data;
    a.sro = o->strides[nd];
    a.scale = s->scale;
    a.causal = s->causal;
    if (sv_attention_run(&a, 0) != 0) {
        *err = "attention: out of memory";
        return -1;
    }
    return 0;
}

/* attention_kernel(scale, causal=False) -> kernel */
static PyObject *py_attention_kernel(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"scale", "causal", NULL};
    float scale;
    int causal = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "f|p", names, &scale, &causal)) return NULL;
    attention_self *s = PyMem_Malloc(sizeof *s);
    if (!s) return PyErr_NoMemory();
    s->scale = scale;
    s->causal = causal;
    return make_capsule(run_attention, s);
}

/* -- convolution, reorders, pooling ----------------------------------------------------- */
typedef struct {
    PyObject *packed; /* the PackedConv, kept alive by the capsule */
    int act, in_blocked, out_blocked, res_first;
    float slope;       /* leaky_relu's */
    PyObject *packed2; /* NULL, or a second convolution on the first one's result */
    int act2;
    float slope2;
} conv_self;

static void free_conv_capsule(PyObject *cap) {
    sv_exec_kernel *k = PyCapsule_GetPointer(cap, "shapevm.exec_kernel");
    if (k) {
        conv_self *c = (conv_self *)k->self;
        Py_XDECREF(c->packed);
        Py_XDECREF(c->packed2);
        PyMem_Free(c);
        PyMem_Free(k);
    }
}

/* A kernel running `run` on a copy of `fields`, holding references to its PackedConvs. */
static PyObject *conv_capsule(conv_self fields, svx_kernel_fn run) {
    conv_self *c = PyMem_Malloc(sizeof *c);
    sv_exec_kernel *k = PyMem_Malloc(sizeof *k);
    if (!c || !k) {
        PyMem_Free(c);
        PyMem_Free(k);
        return PyErr_NoMemory();
    }
    *c = fields;
    Py_INCREF(c->packed);
    Py_XINCREF(c->packed2);
    k->run = run;
    k->self = c;
    PyObject *cap = PyCapsule_New(k, "shapevm.exec_kernel", free_conv_capsule);
    if (!cap) {
        Py_DECREF(c->packed);
        Py_XDECREF(c->packed2);
        PyMem_Free(c);
        PyMem_Free(k);
    }
    return cap;
}

static int contiguous(const svx_tensor *t) {
    int64_t s = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->strides[d] != s) return 0;
        s *= t->shape[d];
    }
    return 1;
}

/* t in a convolution's layout: [n, c, h, w], or blocked [n, ceil(c / 16), h, w, 16], and
 * contiguous; then with c channels. */
static int conv_rank_ok(const svx_tensor *t, int blocked) {
    return t->ndim == (blocked ? 5 : 4) && contiguous(t);
}

static int conv_channels_ok(const svx_tensor *t, int blocked, int64_t c) {
    return blocked ? t->shape[1] == (c + SV_CB - 1) / SV_CB && t->shape[4] == SV_CB
                   : t->shape[1] == c;
}

static int run_conv(const void *vself, const svx_tensor *ins, int nin, const svx_tensor *outs,
                    int nout, const int32_t *iattr, const float *fattr, const char **err) {
    (void)iattr;
    (void)fattr;
    const conv_self *c = vself;
    const sv_packed_conv *p = sv_packed_conv_of(c->packed);
    if (!p || nin < 1 || nin > 2 || nout != 1) {
        *err = "conv: takes x (and a residual) and gives one result";
        return -1;
    }
    const svx_tensor *x = &ins[0], *y = &outs[0], *r = nin > 1 ? &ins[1] : NULL;
    if (!all_f32(ins, nin, outs, nout)) {
        *err = "conv: float32 operands and result";
        return -1;
    }
    if (!conv_rank_ok(x, c->in_blocked) || !conv_rank_ok(y, c->out_blocked) ||
        (r && !conv_rank_ok(r, c->out_blocked))) {
        *err = "conv: operands that are not contiguous of their layout's rank";
        return -1;
    }
    if (!conv_channels_ok(x, c->in_blocked, p->s.cin) ||
        !conv_channels_ok(y, c->out_blocked, p->s.cout)) {
        *err = "conv: channels differ from the packed weights'";
        return -1;
    }
    int64_t oh, ow;
    if (sv_conv_out_hw(&p->s, x->shape[2], x->shape[3], &oh, &ow) < 0 || y->shape[2] != oh ||
        y->shape[3] != ow || y->shape[0] != x->shape[0] ||
        (r && (r->shape[1] != y->shape[1] || r->shape[2] != oh || r->shape[3] != ow ||
               r->shape[0] != y->shape[0]))) {
        *err = "conv: the result's shape does not follow from the input's";
        return -1;
    }
    if (svx_result_overlaps(y, x, r)) {
        *err = "conv: its result in the memory of its input (or of a residual it is not "
               "exactly)";
        return -1;
    }
    int rc = sv_conv2d(p, x->shape[0], x->shape[2], x->shape[3], (const float *)x->data,
                       c->in_blocked ? SV_LAYOUT_BLOCKED : SV_LAYOUT_NCHW, (float *)y->data,
                       c->out_blocked ? SV_LAYOUT_BLOCKED : SV_LAYOUT_NCHW,
                       r ? (const float *)r->data : NULL, c->act, c->slope, c->res_first, 0);
    if (rc != 0) {
        *err = "conv: out of memory";
        return -1;
    }
    return 0;
}

/* conv_kernel(packed, activation, in_blocked, out_blocked, residual_first=False) -> kernel */
static PyObject *py_conv_kernel(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *packed, *act;
    int in_blocked, out_blocked, res_first = 0;
    if (!PyArg_ParseTuple(args, "OOpp|p", &packed, &act, &in_blocked, &out_blocked, &res_first))
        return NULL;
    if (!sv_packed_conv_of(packed)) {
        char found[128];
        sv_describe(packed, found, sizeof found);
        return sv_raise("conv_kernel", "packed must be a PackedConv",
                        "shapevm.native.pack_conv2d(w, ...)", found, "pack the weights first");
    }
    int code;
    float slope;
    if (sv_act_parse("conv_kernel", act, &code, &slope) < 0) return NULL;
    return conv_capsule((conv_self){.packed = packed, .act = code, .slope = slope,
                                    .in_blocked = in_blocked, .out_blocked = out_blocked,
                                    .res_first = res_first},
                        run_conv);
}

static int run_conv_pair(const void *vself, const svx_tensor *ins, int nin,
                         const svx_tensor *outs, int nout, const int32_t *iattr,
                         const float *fattr, const char **err) {
    (void)iattr;
    (void)fattr;
    const conv_self *c = vself;
    const sv_packed_conv *p1 = sv_packed_conv_of(c->packed), *p2 = sv_packed_conv_of(c->packed2);
    if (!p1 || !p2 || nin != 1 || nout != 1) {
        *err = "conv pair: takes x and gives one result";
        return -1;
    }
    const svx_tensor *x = &ins[0], *y = &outs[0];
    if (!all_f32(ins, nin, outs, nout)) {
        *err = "conv pair: float32 operands and result";
        return -1;
    }
    if (!conv_rank_ok(x, c->in_blocked) || !conv_rank_ok(y, c->out_blocked)) {
        *err = "conv pair: operands that are not contiguous of their layout's rank";
        return -1;
    }
    if (!conv_channels_ok(x, c->in_blocked, p1->s.cin) ||
        !conv_channels_ok(y, c->out_blocked, p2->s.cout)) {
        *err = "conv pair: channels differ from the packed weights'";
        return -1;
    }
    int64_t oh1, ow1, oh2, ow2;
    if (sv_conv_out_hw(&p1->s, x->shape[2], x->shape[3], &oh1, &ow1) < 0 ||
        sv_conv_out_hw(&p2->s, oh1, ow1, &oh2, &ow2) < 0 || y->shape[2] != oh2 ||
        y->shape[3] != ow2 || y->shape[0] != x->shape[0]) {
        *err = "conv pair: the result's shape does not follow from the input's";
        return -1;
    }
    if (svx_result_overlaps(y, x, NULL)) {
        *err = "conv pair: its result in the memory of its input";
        return -1;
    }
    if (sv_conv2d_pair(p1, p2, x->shape[0], x->shape[2], x->shape[3], (const float *)x->data,
                       c->in_blocked ? SV_LAYOUT_BLOCKED : SV_LAYOUT_NCHW, (float *)y->data,
                       c->out_blocked ? SV_LAYOUT_BLOCKED : SV_LAYOUT_NCHW, c->act, c->slope,
                       c->act2, c->slope2, 0) != 0) {
        *err = "conv pair: out of memory";
        return -1;
    }
    return 0;
}

/* Whether every band of rows of the convolution's output reads a row of its input: its
 * padding top and bottom within its window (a window of padding alone would leave a band
 * with no input rows). */
static int bands_read_rows(const sv_packed_conv *p) {
    int64_t span = p->s.dh * (p->s.kh - 1) + 1;
    return p->s.pt < span && p->s.pb < span;
}

static PyObject *band_padding_error(const char *kernel, const sv_packed_conv *p) {
    char expected[96], found[64];
    snprintf(expected, sizeof expected, "padding top and bottom under the window's %lld rows",
             (long long)(p->s.dh * (p->s.kh - 1) + 1));
    snprintf(found, sizeof found, "padding %lld, %lld", (long long)p->s.pt, (long long)p->s.pb);
    return sv_raise(kernel, "a convolution by bands of rows", expected, found,
                    "run it with conv_kernel");
}

static int run_conv_mean(const void *vself, const svx_tensor *ins, int nin,
                         const svx_tensor *outs, int nout, const int32_t *iattr,
                         const float *fattr, const char **err) {
    (void)iattr;
    (void)fattr;
    const conv_self *c = vself;
    const sv_packed_conv *p = sv_packed_conv_of(c->packed);
    if (!p || nin != 1 || nout != 1) {
        *err = "conv mean: takes x and gives one result";
        return -1;
    }
    const svx_tensor *x = &ins[0], *y = &outs[0];
    if (!all_f32(ins, nin, outs, nout)) {
        *err = "conv mean: a float32 operand and result";
        return -1;
    }
    if (!conv_rank_ok(x, c->in_blocked) || !contiguous(y)) {
        *err = "conv mean: operands that are not contiguous of their layout's rank";
        return -1;
    }
    if (!conv_channels_ok(x, c->in_blocked, p->s.cin)) {
        *err = "conv mean: channels differ from the packed weights'";
        return -1;
    }
    int64_t means = y->ndim >= 2 ? 1 : -1, oh, ow;
    for (int d = 0; d < y->ndim; d++) means *= y->shape[d];
    if (sv_conv_out_hw(&p->s, x->shape[2], x->shape[3], &oh, &ow) < 0 ||
        means != x->shape[0] * p->s.cout || y->shape[0] != x->shape[0]) {
        *err = "conv mean: a result of another size than one value per image and channel";
        return -1;
    }
    if (svx_result_overlaps(y, x, NULL)) {
        *err = "conv mean: its result in the memory of its input";
        return -1;
    }
    if (sv_conv2d_mean(p, x->shape[0], x->shape[2], x->shape[3], (const float *)x->data,
                       c->in_blocked ? SV_LAYOUT_BLOCKED : SV_LAYOUT_NCHW, (float *)y->data,
                       c->act, c->slope, 0) != 0) {
        *err = "conv mean: out of memory";
        return -1;
    }
    return 0;
}

/* conv_mean_kernel(packed, activation, in_blocked) -> kernel: the convolution's mean over
 * each image's pixels, [n, cout] (or [n, cout, 1, 1]) */
static PyObject *py_conv_mean_kernel(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *packed, *act;
    int in_blocked;
    if (!PyArg_ParseTuple(args, "OOp", &packed, &act, &in_blocked)) return NULL;
    if (!sv_packed_conv_of(packed)) {
        char found[128];
        sv_describe(packed, found, sizeof found);
        return sv_raise("conv_mean_kernel", "packed must be a PackedConv",
                        "shapevm.native.pack_conv2d(w, ...)", found, "pack the weights first");
    }
    if (!bands_read_rows(sv_packed_conv_of(packed)))
        return band_padding_error("conv_mean_kernel", sv_packed_conv_of(packed));
    int code;
    float slope;
    if (sv_act_parse("conv_mean_kernel", act, &code, &slope) < 0) return NULL;
    return conv_capsule(
        (conv_self){.packed = packed, .act = code, .slope = slope, .in_blocked = in_blocked},
        run_conv_mean);
}

/* conv_pair_kernel(packed1, activation1, packed2, activation2, in_blocked, out_blocked)
 * -> kernel */
static PyObject *py_conv_pair_kernel(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *packed1, *act1, *packed2, *act2;
    int in_blocked, out_blocked;
    if (!PyArg_ParseTuple(args, "OOOOpp", &packed1, &act1, &packed2, &act2, &in_blocked,
                          &out_blocked))
        return NULL;
    PyObject *given[2] = {packed1, packed2};
    for (int i = 0; i < 2; i++) {
        if (!sv_packed_conv_of(given[i])) {
            char found[128];
            sv_describe(given[i], found, sizeof found);
            return sv_raise("conv_pair_kernel", i ? "packed2 must be a PackedConv"
                                                  : "packed1 must be a PackedConv",
                            "shapevm.native.pack_conv2d(w, ...)", found, "pack the weights first");
        }
    }
    const sv_packed_conv *p1 = sv_packed_conv_of(packed1), *p2 = sv_packed_conv_of(packed2);
    if (p2->s.cin != p1->s.cout) {
        char expected[64], found[64];
        snprintf(expected, sizeof expected, "%lld input channels (packed1's outputs)",
                 (long long)p1->s.cout);
        snprintf(found, sizeof found, "%lld", (long long)p2->s.cin);
        return sv_raise("conv_pair_kernel", "packed2 reads packed1's result", expected, found,
                        "pair convolutions whose channels follow each other");
    }
    if (!bands_read_rows(p1)) return band_padding_error("conv_pair_kernel", p1);
    if (!bands_read_rows(p2)) return band_padding_error("conv_pair_kernel", p2);
    int code1, code2;
    float slope1, slope2;
    if (sv_act_parse("conv_pair_kernel", act1, &code1, &slope1) < 0 ||
        sv_act_parse("conv_pair_kernel", act2, &code2, &slope2) < 0)
        return NULL;
    return conv_capsule((conv_self){.packed = packed1, .act = code1, .slope = slope1,
                                    .packed2 = packed2, .act2 = code2, .slope2 = slope2,
                                    .in_blocked = in_blocked, .out_blocked = out_blocked},
                        run_conv_pair);
}

typedef struct {
    int to_blocked;
    int64_t channels;
} reorder_self;

static int run_reorder(const void *vself, const svx_tensor *ins, int nin, const svx_tensor *outs,
                       int nout, const int32_t *iattr, const float *fattr, const char **err) {
    (void)iattr;
    (void)fattr;
    const reorder_self *r = vself;
    if (nin != 1 || nout != 1) {
        *err = "reorder: one operand, one result";
        return -1;
    }
    const svx_tensor *x = &ins[0], *y = &outs[0];
    const svx_tensor *nchw = r->to_blocked ? x : y, *blk = r->to_blocked ? y : x;
    if (!all_f32(ins, nin, outs, nout) || nchw->ndim != 4 || blk->ndim != 5 || !contiguous(x) || !contiguous(y) ||
        nchw->shape[1] != r->channels || blk->shape[1] != (r->channels + SV_CB - 1) / SV_CB ||
        blk->shape[4] != SV_CB || nchw->shape[0] != blk->shape[0] ||
        nchw->shape[2] != blk->shape[2] || nchw->shape[3] != blk->shape[3]) {
        *err = "reorder: shapes that do not correspond";
        return -1;
    }
    if (r->to_blocked)
        sv_nchw_to_blocked(x->shape[0], r->channels, x->shape[2], x->shape[3],
                           (const float *)x->data, (float *)y->data, 0);
    else
        sv_blocked_to_nchw(y->shape[0], r->channels, y->shape[2], y->shape[3],
                           (const float *)x->data, (float *)y->data, 0);
    return 0;
}

/* reorder_kernel(to_blocked, channels) -> kernel */
static PyObject *py_reorder_kernel(PyObject *self, PyObject *args) {
    (void)self;
    int to_blocked;
    long long channels;
    if (!PyArg_ParseTuple(args, "pL", &to_blocked, &channels)) return NULL;
    reorder_self *r = PyMem_Malloc(sizeof *r);
    if (!r) return PyErr_NoMemory();
    r->to_blocked = to_blocked;
    r->channels = channels;
    return make_capsule(run_reorder, r);
}

typedef struct {
    int global, blocked;
    int64_t channels;
    sv_pool_shape s;
} pool_self;

static int run_pool(const void *vself, const svx_tensor *ins, int nin, const svx_tensor *outs,
                    int nout, const int32_t *iattr, const float *fattr, const char **err) {
    (void)iattr;
    (void)fattr;
    const pool_self *p = vself;
    if (nin != 1 || nout != 1 || !contiguous(&ins[0]) || !contiguous(&outs[0])) {
        *err = "pool: one contiguous operand and result";
        return -1;
    }
    const svx_tensor *x = &ins[0], *y = &outs[0];
    if (!all_f32(ins, nin, outs, nout)) {
        *err = "pool: a float32 operand and result";
        return -1;
    }
    if (p->global) {
        /* one mean per (image, channel): y is [n, c] or [n, c, 1, 1] */
        int64_t means = y->ndim >= 2 ? 1 : -1;
        for (int d = 0; d < y->ndim; d++) means *= y->shape[d];
        if (x->ndim < 2 || means != x->shape[0] * (p->blocked ? p->channels : x->shape[1]) ||
            y->shape[0] != x->shape[0]) {
            *err = "global pool: a result of another size than one value per image and channel";
            return -1;
        }
        if (p->blocked) {
            if (x->ndim != 5 || x->shape[4] != SV_CB ||
                x->shape[1] != (p->channels + SV_CB - 1) / SV_CB) {
                *err = "global pool: not the blocked layout of its channels";
                return -1;
            }
            sv_global_avg_pool_blocked(x->shape[0], p->channels, x->shape[2] * x->shape[3],
                                       (const float *)x->data, (float *)y->data, 0);
        } else {
            if (x->ndim != 4) {
                *err = "global pool: not NCHW";
                return -1;
            }
            sv_global_avg_pool_nchw(x->shape[0] * x->shape[1], x->shape[2] * x->shape[3],
                                    (const float *)x->data, (float *)y->data, 0);
        }
        return 0;
    }
    int64_t oh, ow;
    if (x->ndim != 4 || y->ndim != 4 || sv_pool_out_hw(&p->s, x->shape[2], x->shape[3], &oh, &ow) ||
        y->shape[2] != oh || y->shape[3] != ow || y->shape[0] != x->shape[0] ||
        y->shape[1] != x->shape[1]) {
        *err = "pool: the result's shape does not follow from the input's";
        return -1;
    }
    if (sv_pool2d_nchw(&p->s, x->shape[0] * x->shape[1], x->shape[2], x->shape[3],
                       (const float *)x->data, (float *)y->data, 0) != 0) {
        *err = "pool: out of memory";
        return -1;
    }
    return 0;
}

/* pool_kernel(kind, kernel, stride, padding) -> kernel; kind "max", "avg",
 * "avg_exclude_pad"; global_pool_kernel(blocked, channels) -> kernel */
static PyObject *py_pool_kernel(PyObject *self, PyObject *args) {
    (void)self;
    const char *kind;
    long long kh, kw, sh, sw, pt, pb, pl, pr;
    if (!PyArg_ParseTuple(args, "s(LL)(LL)(LLLL)", &kind, &kh, &kw, &sh, &sw, &pt, &pb, &pl,
                          &pr))
        return NULL;
    pool_self *p = PyMem_Calloc(1, sizeof *p);
    if (!p) return PyErr_NoMemory();
    p->s.kind = strcmp(kind, "max") == 0 ? SV_POOL_MAX
                : strcmp(kind, "avg") == 0 ? SV_POOL_AVG
                                           : SV_POOL_AVG_EXCL_PAD;
    p->s.kh = kh;
    p->s.kw = kw;
    p->s.sh = sh;
    p->s.sw = sw;
    p->s.pt = pt;
    p->s.pb = pb;
    p->s.pl = pl;
    p->s.pr = pr;
    if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || pt < 0 || pb < 0 || pl < 0 || pr < 0 ||
        2 * pt > kh || 2 * pb > kh || 2 * pl > kw || 2 * pr > kw) {
        PyMem_Free(p);
        return sv_raise("pool_kernel", "a window the pooling kernels do not take",
                        "kernel, stride >= 1, 0 <= padding <= kernel/2", kind,
                        "keep this pool interpreted");
    }
    return make_capsule(run_pool, p);
}

static PyObject *py_global_pool_kernel(PyObject *self, PyObject *args) {
    (void)self;
    int blocked;
    long long channels;
    if (!PyArg_ParseTuple(args, "pL", &blocked, &channels)) return NULL;
    pool_self *p = PyMem_Calloc(1, sizeof *p);
    if (!p) return PyErr_NoMemory();
    p->global = 1;
    p->blocked = blocked;
    p->channels = channels;
    return make_capsule(run_pool, p);
}

/* -- take: rows picked by a tensor of indices (an embedding lookup) ------------------------ */

/* The error of an index out of its axis (take, take_along_axis), as NumPy words it. */
static int take_out_of_range(const char *kernel, int64_t v, int axis, int64_t n,
                             const char **err) {
    static _Thread_local char msg[176];
    snprintf(msg, sizeof msg,
             "%s: index %lld is out of bounds for axis %d with size %lld "
             "(expected %lld <= index < %lld)",
             kernel, (long long)v, axis, (long long)n, (long long)-n, (long long)n);
    *err = msg;
    return SVX_DATA_ERROR;
}

/* y = numpy.take(x, idx, axis): y's shape is x's with the axis replaced by idx's shape.
 * An index below -n or from n on (n: x's extent along the axis) fails the call, naming
 * it; a negative one counts from the end, as in NumPy and ONNX. */
static int run_take(const void *vself, const svx_tensor *ins, int nin, const svx_tensor *outs,
                    int nout, const int32_t *iattr, const float *fattr, const char **err) {
    (void)iattr;
    (void)fattr;
    int axis = ((const axis_self *)vself)->axis;
    if (nin != 2 || nout != 1) {
        *err = "take: takes x and the indices and gives one result";
        return -1;
    }
    const svx_tensor *x = &ins[0], *ix = &ins[1], *y = &outs[0];
    int inner = x->ndim - axis - 1;
    bool fits = axis >= 0 && axis < x->ndim && (ix->dtype == SVX_I32 || ix->dtype == SVX_I64) &&
                y->dtype == x->dtype && y->ndim == x->ndim - 1 + ix->ndim;
    for (int d = 0; fits && d < axis; d++) fits = y->shape[d] == x->shape[d];
    for (int d = 0; fits && d < ix->ndim; d++) fits = y->shape[axis + d] == ix->shape[d];
    for (int d = 0; fits && d < inner; d++)
        fits = y->shape[axis + ix->ndim + d] == x->shape[axis + 1 + d];
    if (!fits) {
        *err = "take: a result that is not x's shape with the axis replaced by the indices'";
        return -1;
    }
    int64_t n = x->shape[axis], nouter = 1, nidx = 1;
    for (int d = 0; d < axis; d++) nouter *= x->shape[d];
    for (int d = 0; d < ix->ndim; d++) nidx *= ix->shape[d];
    size_t isz = (size_t)svx_itemsize[x->dtype];
    svx_tensor src = {.ndim = inner, .dtype = x->dtype}, dst = {.ndim = inner, .dtype = y->dtype};
    for (int d = 0; d < inner; d++) {
        src.shape[d] = dst.shape[d] = x->shape[axis + 1 + d];
        src.strides[d] = x->strides[axis + 1 + d];
        dst.strides[d] = y->strides[axis + ix->ndim + d];
    }
    /* the rows taken (the axes after `axis`): one block of memory in x and in y (an
     * embedding table's rows), copied whole; otherwise element by element (svx_copy) */
    int64_t row = 1;
    bool whole_rows = true;
    for (int d = inner - 1; d >= 0; d--) {
        if (src.shape[d] != 1 && (src.strides[d] != row || dst.strides[d] != row))
            whole_rows = false;
        row *= src.shape[d];
    }
    /* contiguous indices and result, whole rows: the j-th index's row is the j-th of y's
     * block (a bilinear lookup's corners, a table of scalars: a division per index and a
     * memmove per element took 3.7 ns an index) */
    bool flat = whole_rows && contiguous(ix) && contiguous(y);
    size_t rb = (size_t)row * isz;
    /* the indices checked once, then every outer row gathered without a check (np.roll
     * along the last axis of [4, 3, 64, 64] as a take: 32 us, a check per element) */
    if (flat && nouter > 1 && rb == 4) {
        for (int64_t j = 0; j < nidx; j++) {
            int64_t v = ix->dtype == SVX_I64 ? ((const int64_t *)ix->data)[j]
                                              : ((const int32_t *)ix->data)[j];
            if (v < -n || v >= n) return take_out_of_range("take", v, axis, n, err);
        }
    }
    int64_t oidx[SVX_MAXDIM] = {0}, xo = 0, yo = 0, rest;
    for (int64_t o = 0; o < nouter; o++) {
        if (o > 0) /* the next outer position: carried, no division per row */
            for (int d = axis - 1; d >= 0; d--) {
                xo += x->strides[d];
                yo += y->strides[d];
                if (++oidx[d] < x->shape[d]) break;
                xo -= x->strides[d] * x->shape[d];
                yo -= y->strides[d] * y->shape[d];
                oidx[d] = 0;
            }
        if (flat) {
            const char *xs = x->data + (int64_t)isz * xo;
            char *yd = y->data + (int64_t)isz * yo;
            int64_t step = (int64_t)isz * x->strides[axis];
#define TAKE_RUN(I, SIZE)                                                                    \
    for (int64_t j = 0; j < nidx; j++) {                                                     \
        int64_t v = ((const I *)ix->data)[j];                                                \
        if (v < -n || v >= n) return take_out_of_range("take", v, axis, n, err);            \
        memcpy(yd + (int64_t)(SIZE) * j, xs + (v < 0 ? v + n : v) * step, (SIZE));          \
    }
            if (nouter > 1 && rb == 4) { /* checked above */
                if (ix->dtype == SVX_I64) {
                    const int64_t *iv = (const int64_t *)ix->data;
                    for (int64_t j = 0; j < nidx; j++)
                        memcpy(yd + 4 * j, xs + (iv[j] + (iv[j] < 0 ? n : 0)) * step, 4);
                } else {
                    const int32_t *iv = (const int32_t *)ix->data;
                    for (int64_t j = 0; j < nidx; j++)
                        memcpy(yd + 4 * j, xs + (iv[j] + (iv[j] < 0 ? n : 0)) * step, 4);
                }
                continue;
            }
            /* rows of a size known here are copied by moves, not a call of memcpy per
             * index (a relative position bias, rows of 4 float32 for 16384 indices: 48 us
             * against NumPy's 9) */
#define TAKE_SIZES(I)                                                                        \
    switch (rb) {                                                                            \
    case 4: TAKE_RUN(I, 4) break;                                                            \
    case 8: TAKE_RUN(I, 8) break;                                                            \
    case 16: TAKE_RUN(I, 16) break;                                                          \
    case 32: TAKE_RUN(I, 32) break;                                                          \
    default: TAKE_RUN(I, rb)                                                                 \
    }
            if (ix->dtype == SVX_I64) TAKE_SIZES(int64_t)
            else TAKE_SIZES(int32_t)
#undef TAKE_SIZES
#undef TAKE_RUN
            continue;
        }
        for (int64_t j = 0; j < nidx; j++) {
            int64_t io = 0, yj = yo;
            rest = j;
            for (int d = ix->ndim - 1; d >= 0; d--) {
                int64_t i = rest % ix->shape[d];
                rest /= ix->shape[d];
                io += i * ix->strides[d];
                yj += i * y->strides[axis + d];
            }
            int64_t v = ix->dtype == SVX_I64 ? ((const int64_t *)ix->data)[io]
                                              : ((const int32_t *)ix->data)[io];
            if (v < -n || v >= n) return take_out_of_range("take", v, axis, n, err);
            if (v < 0) v += n;
            src.data = x->data + (int64_t)isz * (xo + v * x->strides[axis]);
            dst.data = y->data + (int64_t)isz * yj;
            if (whole_rows)
                memmove(dst.data, src.data, (size_t)row * isz);
            else
                svx_copy(&src, &dst);
        }
    }
    return 0;
}

/* take_kernel(axis) -> kernel */
static PyObject *py_take_kernel(PyObject *self, PyObject *args) {
    (void)self;
    return axis_kernel(args, "take_kernel", run_take);
}

/* ---- a reduction over middle axes, the trailing ones kept (mean pooling: x.mean(axis=1)
 * of [b, s, d]) ----
 * y[a, i] = reduce over r of x[a, r, i], with a the leading kept axes, r the reduced axes
 * [r0, r1) and i the trailing kept axes.  A task takes a leading index and a block of the
 * trailing ones and adds whole rows of x into accumulators (double for sum, mean and prod;
 * float for max and min): the rows are read in memory order, where a reduction moved last
 * read x along a strided axis (a 32 x 128 x 256 mean: 890 us against NumPy's 127).  A sum
 * or mean may take weights w of x's shape and reduce x * w in the same pass (masked mean
 * pooling: sum(x * mask[..., None], axis=1), the product never written). */
typedef struct redmid_self {
    int kind; /* SV_RED_SUM, _MAX, _MIN, _PROD, _MEAN */
    int r0, r1;
} redmid_self;

#define REDMID_BLOCK 128 /* trailing elements per task */

typedef struct redmid_job {
    const redmid_self *r;
    const svx_tensor *x, *w, *y; /* w: NULL, or weights of x's shape (a view) */
    int64_t outer, rows, inner, blocks;
    int64_t splits; /* parts of the rows, each a task of its own (few outputs, many rows) */
    double *part;   /* splits > 1: each part's result, [split][outer][inner] */
} redmid_job;

/* offset of flat index `flat` over axes [lo, hi) of a shape, with the given strides */
static int64_t offset_of(int64_t flat, const int64_t *shape, const int64_t *strides, int lo,
                         int hi) {
    int64_t off = 0;
    for (int d = hi - 1; d >= lo; d--) {
        int64_t i = flat % shape[d];
        flat /= shape[d];
        off += i * strides[d];
    }
    return off;
}

/* whether axes [lo, hi) of a tensor are one run of memory, row-major with unit stride */
static bool one_run(const svx_tensor *t, int lo, int hi) {
    int64_t run = 1;
    for (int d = hi - 1; d >= lo; d--) {
        if (t->shape[d] != 1 && t->strides[d] != run) return false;
        run *= t->shape[d];
    }
    return true;
}

/* ---- the lines of a tensor along one axis (argmax, cumsum, argsort read x line by line) ----
 * Line f of x is the run of n elements along `axis` at the f-th position of the other axes
 * (o, the position before the axis; i, after it).  y's line f starts at the same o and i;
 * `y_after` is y's first axis after the line's: axis + 1, or axis where y drops the axis. */
typedef struct lines {
    const svx_tensor *x, *y;
    const void *self; /* the kernel's attributes */
    int axis, y_after;
    int64_t n, inner, total, per_task;
    _Atomic int failed; /* a task that could not get its buffers */
} lines;

static void lines_init(lines *l, const svx_tensor *x, const svx_tensor *y, int axis,
                       bool y_keeps_axis, const void *self) {
    l->x = x;
    l->y = y;
    l->self = self;
    l->axis = axis;
    l->y_after = y_keeps_axis ? axis + 1 : axis;
    l->n = x->shape[axis];
    l->inner = l->total = 1;
    for (int d = 0; d < x->ndim; d++)
        if (d != axis) l->total *= x->shape[d];
    for (int d = axis + 1; d < x->ndim; d++) l->inner *= x->shape[d];
    atomic_store(&l->failed, 0);
}

/* where line f starts in x and in y (in elements) */
static void line_at(const lines *l, int64_t f, int64_t *xo, int64_t *yo) {
    const svx_tensor *x = l->x, *y = l->y;
    int64_t o = f / l->inner, i = f % l->inner;
    *xo = offset_of(o, x->shape, x->strides, 0, l->axis) +
          offset_of(i, x->shape, x->strides, l->axis + 1, x->ndim);
    *yo = offset_of(o, y->shape, y->strides, 0, l->axis) +
          offset_of(i, y->shape, y->strides, l->y_after, y->ndim);
}

/* the lines of task `task`: [*f0, return) */
static int64_t task_lines(const lines *l, int64_t task, int64_t *f0) {
    *f0 = task * l->per_task;
    return (task + 1) * l->per_task < l->total ? (task + 1) * l->per_task : l->total;
}

/* fn over every line: on the calling thread below min_work elements, else tasks of
 * consecutive lines over the pool */
/* `units` tasks' worth of `fn(ctx, task)`, each task [task, task + 1) * *per_task of them:
 * on this thread alone below `min_work` (a pool launch costs what it saves), else a few
 * tasks per thread, so that a busy core's share goes to the others. */
static void run_units(int64_t units, double work, double min_work, int64_t *per_task,
                      sv_task_fn fn, void *ctx) {
    int threads = sv_pool_threads();
    if (threads <= 1 || work < min_work || units < 2) {
        *per_task = units;
        fn(ctx, 0);
        return;
    }
    int64_t tasks = 4 * (int64_t)threads < units ? 4 * (int64_t)threads : units;
    *per_task = (units + tasks - 1) / tasks;
    sv_parallel((units + *per_task - 1) / *per_task, fn, ctx);
}

static void run_lines(lines *l, double min_work, sv_task_fn fn) {
    run_units(l->total, (double)l->total * (double)l->n, min_work, &l->per_task, fn, l);
}

/* max and min as NumPy's: a NaN wins */
static double redmid_pick(int kind, double best, double v) {
    if (best != best) return best;
    if (v != v) return v;
    return kind == SV_RED_MAX ? (v > best ? v : best) : (v < best ? v : best);
}

static double redmid_start(int kind) {
    return kind == SV_RED_PROD ? 1.0 : 0.0;
}

static void redmid_store(const redmid_job *j, int64_t a, int64_t i0, int64_t n,
                         const double *acc) {
    const svx_tensor *y = j->y;
    int r0 = j->r->r0, kind = j->r->kind;
    float *out = (float *)y->data + offset_of(a, y->shape, y->strides, 0, r0);
    double scale = kind == SV_RED_MEAN ? 1.0 / (double)j->rows : 1.0;
    bool run = one_run(y, r0, y->ndim);
    for (int64_t k = 0; k < n; k++) {
        int64_t yo = run ? i0 + k : offset_of(i0 + k, y->shape, y->strides, r0, y->ndim);
        out[yo] = (float)(kind == SV_RED_MAX || kind == SV_RED_MIN ? acc[k] : acc[k] * scale);
    }
}

static void redmid_task(void *vctx, int64_t task) {
    const redmid_job *j = vctx;
    const svx_tensor *x = j->x;
    int r0 = j->r->r0, r1 = j->r->r1, nd = x->ndim, kind = j->r->kind;
    int64_t split = task % j->splits, blk = task / j->splits;
    int64_t a = blk / j->blocks, i0 = blk % j->blocks * REDMID_BLOCK;
    int64_t n = j->inner - i0 < REDMID_BLOCK ? j->inner - i0 : REDMID_BLOCK;
    int64_t lo = j->rows * split / j->splits, hi = j->rows * (split + 1) / j->splits;
    int64_t xa = offset_of(a, x->shape, x->strides, 0, r0);
    bool run = one_run(x, r1, nd);
    int64_t xo[REDMID_BLOCK];
    for (int64_t k = 0; k < n; k++)
        xo[k] = run ? i0 + k : offset_of(i0 + k, x->shape, x->strides, r1, nd);
    const svx_tensor *w = j->w;
    int64_t wa = 0, wo[REDMID_BLOCK];
    bool wflat = true; /* one weight per row: the trailing axes broadcast */
    if (w) {
        wa = offset_of(a, w->shape, w->strides, 0, r0);
        for (int d = r1; d < nd; d++) wflat = wflat && (w->shape[d] == 1 || w->strides[d] == 0);
        for (int64_t k = 0; !wflat && k < n; k++)
            wo[k] = offset_of(i0 + k, w->shape, w->strides, r1, nd);
    }
    double acc[REDMID_BLOCK];
    float ext[REDMID_BLOCK]; /* max and min: float, compared without branches */
    bool extreme = kind == SV_RED_MAX || kind == SV_RED_MIN;
    for (int64_t r = lo; r < hi; r++) {
        const float *row =
            (const float *)x->data + xa + offset_of(r, x->shape, x->strides, r0, r1);
        if (r == lo) {
            if (extreme) {
                for (int64_t k = 0; k < n; k++) ext[k] = row[xo[k]];
                continue;
            }
            for (int64_t k = 0; k < n; k++) acc[k] = redmid_start(kind);
        }
        if (w) { /* sum or mean of x * w: masked mean pooling, one pass */
            const float *wrow =
                (const float *)w->data + wa + offset_of(r, w->shape, w->strides, r0, r1);
            if (wflat) {
                double v = wrow[0];
                for (int64_t k = 0; k < n; k++) acc[k] += row[xo[k]] * v;
            } else {
                for (int64_t k = 0; k < n; k++) acc[k] += (double)row[xo[k]] * wrow[wo[k]];
            }
        } else if (extreme) { /* a NaN wins (v != v), and stays (v > NaN is false) */
            if (run && kind == SV_RED_MAX)
                for (int64_t k = 0; k < n; k++) {
                    float v = row[i0 + k], b = ext[k];
                    ext[k] = (v > b) | (v != v) ? v : b;
                }
            else if (run)
                for (int64_t k = 0; k < n; k++) {
                    float v = row[i0 + k], b = ext[k];
                    ext[k] = (v < b) | (v != v) ? v : b;
                }
            else
                for (int64_t k = 0; k < n; k++)
                    ext[k] = (float)redmid_pick(kind, ext[k], row[xo[k]]);
        } else if (kind == SV_RED_PROD)
            for (int64_t k = 0; k < n; k++) acc[k] *= row[xo[k]];
        else if (run)
            for (int64_t k = 0; k < n; k++) acc[k] += row[i0 + k];
        else
            for (int64_t k = 0; k < n; k++) acc[k] += row[xo[k]];
    }
    if (extreme)
        for (int64_t k = 0; k < n; k++) acc[k] = ext[k];
    if (j->splits == 1) {
        redmid_store(j, a, i0, n, acc);
        return;
    }
    size_t at = ((size_t)split * (size_t)j->outer + (size_t)a) * (size_t)j->inner;
    double *p = j->part + at + (size_t)i0;
    memcpy(p, acc, (size_t)n * sizeof(double));
}

/* the parts of split rows into the result (splits > 1) */
static void redmid_combine(const redmid_job *j) {
    int kind = j->r->kind;
    bool extreme = kind == SV_RED_MAX || kind == SV_RED_MIN;
    double acc[REDMID_BLOCK];
    size_t plane = (size_t)j->outer * (size_t)j->inner;
    for (int64_t a = 0; a < j->outer; a++)
        for (int64_t i0 = 0; i0 < j->inner; i0 += REDMID_BLOCK) {
            int64_t n = j->inner - i0 < REDMID_BLOCK ? j->inner - i0 : REDMID_BLOCK;
            const double *p = j->part + (size_t)a * (size_t)j->inner + (size_t)i0;
            memcpy(acc, p, (size_t)n * sizeof(double));
            for (int64_t sp = 1; sp < j->splits; sp++)
                for (int64_t k = 0; k < n; k++) {
                    double v = p[(size_t)sp * plane + (size_t)k];
                    acc[k] = extreme            ? redmid_pick(kind, acc[k], v)
                             : kind == SV_RED_PROD ? acc[k] * v
                                                   : acc[k] + v;
                }
            redmid_store(j, a, i0, n, acc);
        }
}

static int run_redmid(const void *vself, const svx_tensor *ins, int nin, const svx_tensor *outs,
                      int nout, const int32_t *iattr, const float *fattr, const char **err) {
    (void)iattr;
    (void)fattr;
    const redmid_self *r = vself;
    bool weighted = nin == 2 && (r->kind == SV_RED_SUM || r->kind == SV_RED_MEAN);
    if ((nin != 1 && !weighted) || nout != 1) {
        *err = "reduce: takes x (and weights, for a sum or mean) and gives one result";
        return -1;
    }
    const svx_tensor *x = &ins[0], *w = weighted ? &ins[1] : NULL, *y = &outs[0];
    int nr = r->r1 - r->r0;
    bool fits = x->dtype == SVX_F32 && y->dtype == SVX_F32 && r->r0 >= 0 && nr >= 1 &&
                r->r1 < x->ndim && y->ndim == x->ndim - nr;
    if (w) {
        fits = fits && w->dtype == SVX_F32 && w->ndim == x->ndim;
        for (int d = 0; fits && d < x->ndim; d++) fits = w->shape[d] == x->shape[d];
    }
    for (int d = 0; fits && d < x->ndim; d++)
        if (d < r->r0 || d >= r->r1) fits = y->shape[d < r->r0 ? d : d - nr] == x->shape[d];
    if (!fits) {
        *err = "reduce: float32 x (and weights of its shape) and a result of x's shape less "
               "its middle reduced axes";
        return -1;
    }
    redmid_job j = {.r = r, .x = x, .w = w, .y = y, .outer = 1, .rows = 1, .inner = 1,
                    .splits = 1};
    for (int d = 0; d < r->r0; d++) j.outer *= x->shape[d];
    for (int d = r->r0; d < r->r1; d++) j.rows *= x->shape[d];
    for (int d = r->r1; d < x->ndim; d++) j.inner *= x->shape[d];
    if (j.outer == 0 || j.inner == 0) return 0;
    if (j.rows == 0) {
        if (r->kind == SV_RED_MAX || r->kind == SV_RED_MIN) {
            *err = "reduce: max or min over an axis of length 0 (it has no identity)";
            return SVX_DATA_ERROR;
        }
        double acc[REDMID_BLOCK];
        for (int k = 0; k < REDMID_BLOCK; k++)
            acc[k] = r->kind == SV_RED_MEAN ? NAN : redmid_start(r->kind);
        j.rows = 1; /* a mean's NaN stays NaN */
        for (int64_t a = 0; a < j.outer; a++)
            for (int64_t i0 = 0; i0 < j.inner; i0 += REDMID_BLOCK)
                redmid_store(&j, a, i0, j.inner - i0 < REDMID_BLOCK ? j.inner - i0 : REDMID_BLOCK,
                             acc);
        return 0;
    }
    j.blocks = (j.inner + REDMID_BLOCK - 1) / REDMID_BLOCK;
    int64_t tasks = j.outer * j.blocks;
    double work = (double)j.outer * (double)j.rows * (double)j.inner;
    int threads = sv_pool_threads();
    if (threads <= 1 || work < 32768.0) {
        for (int64_t t = 0; t < tasks; t++) redmid_task(&j, t);
        return 0;
    }
    /* few outputs over many rows (a mean over a batch of 4096): the rows in parts too, a
     * few tasks per thread, each part at least 64 rows */
    if (tasks < 4 * (int64_t)threads) {
        int64_t want = (4 * (int64_t)threads + tasks - 1) / tasks, most = j.rows / 64;
        j.splits = want < most ? want : most > 1 ? most : 1;
    }
    if (j.splits > 1) {
        j.part = sv_thread_scratch(SV_SCRATCH_REDUCE, (size_t)j.splits * (size_t)j.outer *
                                                          (size_t)j.inner * sizeof(double));
        if (!j.part) j.splits = 1;
    }
    sv_parallel(tasks * j.splits, redmid_task, &j);
    if (j.splits > 1) redmid_combine(&j);
    return 0;
}

/* ---- integer binary ops: comparisons (a length mask: arange(s) < lengths[:, None]) and
 * arithmetic (positions: ids + offset), and where (padding ids masked: where(ids >= 0, ids, 0))
 * ----
 * The tile interpreter reads integers as float32 lanes, exact only below 2^24; these compute
 * on int32 and int64 values exactly.  The operands come as views of the result's shape
 * (broadcast axes of stride 0).  Arithmetic wraps around in the result's type, as NumPy's
 * does (computed on unsigned 64-bit values, whose low bits are the two's complement
 * result). */

typedef struct int_binary_self {
    int kind;
} int_binary_self;

static int64_t int_at(const svx_tensor *t, int64_t off) {
    return t->dtype == SVX_I64 ? ((const int64_t *)t->data)[off]
                               : ((const int32_t *)t->data)[off];
}

/* The kinds without a loop of their own in run_int_binary. */
static int64_t int_binary(int kind, int64_t u, int64_t v) {
    switch (kind) {
    case SV_IOP_SUB: return (int64_t)((uint64_t)u - (uint64_t)v);
    case SV_IOP_MUL: return (int64_t)((uint64_t)u * (uint64_t)v);
    case SV_IOP_MAX: return u > v ? u : v;
    case SV_IOP_MIN: return u < v ? u : v;
    /* NumPy's: rounded down, the remainder with the divisor's sign; x // 0 and x % 0 are 0,
     * and INT64_MIN // -1 wraps around to itself (C would trap) */
    case SV_IOP_FLOORDIV: {
        if (v == 0) return 0;
        if (v == -1) return (int64_t)(0 - (uint64_t)u);
        int64_t q = u / v;
        return (u % v != 0 && (u < 0) != (v < 0)) ? q - 1 : q;
    }
    case SV_IOP_MOD: {
        if (v == 0 || v == -1) return 0;
        int64_t r = u % v;
        return (r != 0 && (r < 0) != (v < 0)) ? r + v : r;
    }
    /* of one operand (read twice, as a cast's), wrapping: abs and - of the type's smallest
     * value are that value, as NumPy's */
    case SV_IOP_ABS: return u < 0 ? (int64_t)(0 - (uint64_t)u) : u;
    case SV_IOP_NEG: return (int64_t)(0 - (uint64_t)u);
    default: return u; /* SV_IOP_CAST */
    }
}


/* The offsets (in elements) of index f of y's first `upto` axes, in a, b, c (or NULL) and y. */
static void outer_offsets(int64_t f, int upto, const svx_tensor *a, const svx_tensor *b,
                          const svx_tensor *c, const svx_tensor *y, int64_t *ao, int64_t *bo,
                          int64_t *co, int64_t *yo) {
    int64_t rest = f;
    *ao = *bo = *co = *yo = 0;
    for (int d = upto - 1; d >= 0; d--) {
        int64_t i = rest % y->shape[d];
        rest /= y->shape[d];
        *ao += i * a->strides[d];
        *bo += i * b->strides[d];
        if (c) *co += i * c->strides[d];
        *yo += i * y->strides[d];
    }
}

static int run_int_binary(const void *vself, const svx_tensor *ins, int nin,
                          const svx_tensor *outs, int nout, const int32_t *iattr,
                          const float *fattr, const char **err) {
    (void)iattr;
    (void)fattr;
    int kind = ((const int_binary_self *)vself)->kind;
    bool compare = kind <= SV_ICMP_NE, where = kind == SV_IOP_WHERE;
    bool unary = kind == SV_IOP_CAST || kind == SV_IOP_ABS || kind == SV_IOP_NEG;
    if (nin != (unary ? 1 : where ? 3 : 2) || nout != 1) {
        *err = compare ? "compare: takes two tensors and gives one result"
               : unary ? "int cast, abs or negative: takes one tensor and gives one result"
               : where            ? "int where: takes a condition and two tensors and gives "
                                    "one result"
                                  : "int arithmetic: takes two tensors and gives one result";
        return -1;
    }
    /* a cast reads its one operand twice; where's condition comes first */
    const svx_tensor *c = where ? &ins[0] : NULL;
    const svx_tensor *a = &ins[where ? 1 : 0], *b = &ins[nin - 1], *y = &outs[0];
    bool fits = (a->dtype == SVX_I32 || a->dtype == SVX_I64) &&
                (b->dtype == SVX_I32 || b->dtype == SVX_I64) &&
                (compare ? y->dtype == SVX_BOOL : y->dtype == SVX_I32 || y->dtype == SVX_I64) &&
                a->ndim == y->ndim && b->ndim == y->ndim &&
                (!c || (c->dtype == SVX_BOOL && c->ndim == y->ndim));
    for (int d = 0; fits && d < y->ndim; d++)
        fits = a->shape[d] == y->shape[d] && b->shape[d] == y->shape[d] &&
               (!c || c->shape[d] == y->shape[d]);
    if (!fits) {
        *err = compare ? "compare: int32 or int64 operands of the bool result's shape"
               : where ? "int where: a bool condition and int32 or int64 operands of the int32 "
                         "or int64 result's shape"
                       : "int arithmetic: int32 or int64 operands of the int32 or int64 "
                         "result's shape";
        return -1;
    }
    /* row by row along the last axis (the offsets of a row's start from its index) */
    int last = y->ndim - 1;
    int64_t n = last >= 0 ? y->shape[last] : 1, rows = 1;
    for (int d = 0; d < last; d++) rows *= y->shape[d];
    int64_t as = last >= 0 ? a->strides[last] : 0, bs = last >= 0 ? b->strides[last] : 0,
            cs = c && last >= 0 ? c->strides[last] : 0, ys = last >= 0 ? y->strides[last] : 0;
    /* operands of one integer type, y of unit stride along its rows: the instruction set's
     * typed loops (int_kern.h), given the rows of the last two axes at once (through
     * int_at, an element took a nanosecond or two: 2 us a kernel on 1000 int32, twice
     * NumPy's whole `a * 3 - b`) */
    if (n > 0 && ys == 1 && a->dtype == b->dtype && (compare || a->dtype == y->dtype) &&
        kind != SV_IOP_FLOORDIV && kind != SV_IOP_MOD) {
        int two = last >= 1 ? last - 1 : -1; /* the axis of the rows given at once */
        int64_t size = a->dtype == SVX_I64 ? 8 : 4, ysize = compare ? 1 : size;
        sv_int_rows r = {
            .as = as, .bs = bs, .cs = cs, .n = n,
            .ars = two >= 0 ? a->strides[two] : 0, .brs = two >= 0 ? b->strides[two] : 0,
            .crs = c && two >= 0 ? c->strides[two] : 0, .yrs = two >= 0 ? y->strides[two] : 0,
            .rows = two >= 0 ? y->shape[two] : 1,
        };
        int64_t blocks = r.rows > 0 ? rows / r.rows : 0;
        sv_int_row_fn run = sv_isa()->int_row[a->dtype == SVX_I64];
        for (int64_t f = 0; f < blocks; f++) {
            int64_t ao, bo, co, yo;
            outer_offsets(f, two, a, b, c, y, &ao, &bo, &co, &yo);
            r.a = (const char *)a->data + ao * size;
            r.b = (const char *)b->data + bo * size;
            r.c = c ? (const uint8_t *)c->data + co : NULL;
            r.y = (char *)y->data + yo * ysize;
            run(kind, &r);
        }
        return 0;
    }
    for (int64_t f = 0; n > 0 && f < rows; f++) {
        int64_t ao, bo, co, yo;
        outer_offsets(f, last, a, b, c, y, &ao, &bo, &co, &yo);
        /* the casts between the two types (NumPy's promotion of int32 with int64) */
        if (ys == 1 && kind == SV_IOP_CAST) {
            if (a->dtype == SVX_I32 && y->dtype == SVX_I64) {
                const int32_t *pa = (const int32_t *)a->data + ao;
                int64_t *py = (int64_t *)y->data + yo;
                for (int64_t k = 0; k < n; k++) py[k] = pa[k * as];
                continue;
            }
            if (a->dtype == SVX_I64 && y->dtype == SVX_I32) {
                const int64_t *pa = (const int64_t *)a->data + ao;
                int32_t *py = (int32_t *)y->data + yo;
                for (int64_t k = 0; k < n; k++) py[k] = (int32_t)(uint32_t)(uint64_t)pa[k * as];
                continue;
            }
        }
        /* floor division and remainder by one positive divisor, y of unit stride (hours from seconds: t // 3600 % 24): for a value u from 0 to 2^63, u // v is the
         * high bits of u * m with m = ceil(2^(63 + l) / v), l = ceil(log2 v) (m fits 64 bits,
         * m * v - 2^(63 + l) < 2^l: Granlund and Montgomery's condition); a negative value
         * divides as integers.  An integer division a step took about 2 ns an element
         * (NumPy divides by a scalar with libdivide) */
        if (ys == 1 && bs == 0 && (kind == SV_IOP_FLOORDIV || kind == SV_IOP_MOD) &&
            a->dtype == y->dtype && int_at(b, bo) > 0) {
            uint64_t v = (uint64_t)int_at(b, bo);
            int l = v > 1 ? 64 - __builtin_clzll(v - 1) : 0;
            uint64_t m = (uint64_t)((((unsigned __int128)1 << (63 + l)) + v - 1) / v);
            const bool div = kind == SV_IOP_FLOORDIV;
            /* a negative u rounds down as ~(~u // v): ~u is from 0 to 2^63 - 1 */
#define DIV_ROW(T, EXPR)                                                                       \
    {                                                                                          \
        const T *pa = (const T *)a->data + ao;                                                 \
        T *py = (T *)y->data + yo;                                                             \
        for (int64_t k = 0; k < n; k++) {                                                      \
            int64_t u = pa[k * as];                                                            \
            uint64_t s = (uint64_t)(u >> 63), x = (uint64_t)u ^ s;                             \
            uint64_t q = (uint64_t)(((unsigned __int128)x * m) >> (63 + l)) ^ s;               \
            py[k] = (T)(EXPR);                                                                 \
        }                                                                                      \
    }
            if (a->dtype == SVX_I64) {
                if (div)
                    DIV_ROW(int64_t, (int64_t)q)
                else
                    DIV_ROW(int64_t, (int64_t)((uint64_t)u - q * v))
            } else if (v > INT32_MAX) { /* an int32 value over it: 0, or ~0 = -1 */
                if (div)
                    DIV_ROW(int32_t, (int64_t)q)
                else
                    DIV_ROW(int32_t, (int64_t)((uint64_t)u - q * v))
            } else {
                /* int32 values below 2^31 in 64 bits: m = ceil(2^(31 + l) / v) < 2^32 */
                const uint32_t v32 = (uint32_t)v;
                const uint64_t m32 = (((uint64_t)1 << (31 + l)) + v - 1) / v;
                const int32_t *pa = (const int32_t *)a->data + ao;
                int32_t *py = (int32_t *)y->data + yo;
                for (int64_t k = 0; k < n; k++) {
                    int32_t w = pa[k * as];
                    uint32_t u = (uint32_t)w, s = (uint32_t)(w >> 31), x = u ^ s;
                    uint32_t q = (uint32_t)(((uint64_t)x * m32) >> (31 + l)) ^ s;
                    py[k] = (int32_t)(div ? q : u - q * v32);
                }
            }
#undef DIV_ROW
            continue;
        }
        /* int32 by int32, y of unit stride: the quotient of the two as doubles, cut
         * towards zero, is exact (the error of the division is below 2^-22 / |v|, a
         * fraction's distance from an integer at least 1 / |v|), then rounded down; an
         * integer division took about 2.5 ns an element */
        if (ys == 1 && (kind == SV_IOP_FLOORDIV || kind == SV_IOP_MOD) && a->dtype == SVX_I32 &&
            b->dtype == SVX_I32 && y->dtype == SVX_I32) {
            const int32_t *pa = (const int32_t *)a->data + ao, *pb = (const int32_t *)b->data + bo;
            int32_t *py = (int32_t *)y->data + yo;
            const bool div = kind == SV_IOP_FLOORDIV;
            for (int64_t k = 0; k < n; k++) {
                int64_t u = pa[k * as], v = pb[k * bs];
                int64_t t = (int64_t)((double)u / (double)(v ? v : 1));
                t -= (t * v != u) & ((u ^ v) < 0);
                int64_t r = div ? t : u - t * v; /* INT32_MIN // -1 wraps around below */
                py[k] = v ? (int32_t)(uint32_t)(uint64_t)r : 0;
            }
            continue;
        }
        /* one loop per common kind, so that its operation is not a jump per element */
#define INT_ROW(EXPR)                                                                          \
    for (int64_t k = 0; k < n; k++, ao += as, bo += bs, co += cs, yo += ys) {                  \
        int64_t u = int_at(a, ao), v = int_at(b, bo), r = (EXPR);                              \
        if (y->dtype == SVX_BOOL) ((uint8_t *)y->data)[yo] = (uint8_t)r;                       \
        else if (y->dtype == SVX_I64) ((int64_t *)y->data)[yo] = r;                            \
        else ((int32_t *)y->data)[yo] = (int32_t)(uint32_t)(uint64_t)r;                        \
    }
        switch (kind) {
        case SV_ICMP_LT: INT_ROW(u < v) break;
        case SV_ICMP_LE: INT_ROW(u <= v) break;
        case SV_ICMP_GT: INT_ROW(u > v) break;
        case SV_ICMP_GE: INT_ROW(u >= v) break;
        case SV_ICMP_EQ: INT_ROW(u == v) break;
        case SV_ICMP_NE: INT_ROW(u != v) break;
        case SV_IOP_ADD: INT_ROW((int64_t)((uint64_t)u + (uint64_t)v)) break;
        case SV_IOP_WHERE: INT_ROW(((const uint8_t *)c->data)[co] ? u : v) break;
        default: INT_ROW(int_binary(kind, u, v)) break;
        }
#undef INT_ROW
    }
    return 0;
}

/* ---- running sums along one axis (positions from a mask: ``cumsum(mask, 1) - 1``) ----
 * y[o, r, i] = x[o, 0, i] + ... + x[o, r, i], added in that order as NumPy's cumsum (so
 * float32 sums round as its do); exclusive: without x[o, r, i]; reverse: from the last
 * element.  Integers wrap around in their type. */
typedef struct scan_self {
    int axis, exclusive, reverse;
} scan_self;

#define SCAN_LINE(T, ACC, CONV)                                                                \
    do {                                                                                       \
        const T *p = (const T *)x->data + xo;                                                  \
        T *q = (T *)y->data + yo;                                                              \
        ACC acc = 0;                                                                           \
        for (int64_t k = 0; k < n; k++) {                                                      \
            int64_t r = a->reverse ? n - 1 - k : k;                                            \
            if (a->exclusive) {                                                                \
                q[r * ys] = (T)(CONV(acc));                                                    \
                acc = (ACC)(acc + (ACC)p[r * xs]);                                             \
            } else {                                                                           \
                acc = (ACC)(acc + (ACC)p[r * xs]);                                             \
                q[r * ys] = (T)(CONV(acc));                                                    \
            }                                                                                  \
        }                                                                                      \
    } while (0)
#define SCAN_SAME(v) (v)

static void scan_task(void *vctx, int64_t task) {
    const lines *j = vctx;
    const scan_self *a = j->self;
    const svx_tensor *x = j->x, *y = j->y;
    int64_t n = j->n, xs = x->strides[j->axis], ys = y->strides[j->axis], f, f1, xo, yo;
    for (f1 = task_lines(j, task, &f); f < f1; f++) {
        line_at(j, f, &xo, &yo);
        switch (x->dtype) {
        case SVX_F32: SCAN_LINE(float, float, SCAN_SAME); break;
        case SVX_F64: SCAN_LINE(double, double, SCAN_SAME); break;
        /* unsigned sums: the two's complement result, no signed overflow */
        case SVX_I32: SCAN_LINE(int32_t, uint32_t, SCAN_SAME); break;
        default: SCAN_LINE(int64_t, uint64_t, SCAN_SAME); break;
        }
    }
}

static int run_scan(const void *vself, const svx_tensor *ins, int nin, const svx_tensor *outs,
                    int nout, const int32_t *iattr, const float *fattr, const char **err) {
    (void)iattr;
    (void)fattr;
    const scan_self *a = vself;
    if (nin != 1 || nout != 1) {
        *err = "cumsum: takes x and gives one result";
        return -1;
    }
    const svx_tensor *x = &ins[0], *y = &outs[0];
    bool fits = (x->dtype == SVX_F32 || x->dtype == SVX_F64 || x->dtype == SVX_I32 ||
                 x->dtype == SVX_I64) &&
                y->dtype == x->dtype && a->axis < x->ndim && y->ndim == x->ndim;
    for (int d = 0; fits && d < x->ndim; d++) fits = y->shape[d] == x->shape[d];
    if (!fits) {
        *err = "cumsum: x of float32, float64, int32 or int64 with the axis, and a result of "
               "its shape and dtype";
        return -1;
    }
    lines j;
    lines_init(&j, x, y, a->axis, true, a);
    if (j.total == 0 || j.n == 0) return 0;
    run_lines(&j, 65536.0, scan_task);
    return 0;
}

/* scan_kernel(axis, exclusive, reverse) -> kernel */
static PyObject *py_scan_kernel(PyObject *self, PyObject *args) {
    (void)self;
    int axis, exclusive, reverse;
    if (!PyArg_ParseTuple(args, "ipp", &axis, &exclusive, &reverse)) return NULL;
    if (axis < 0 || axis >= SVX_MAXDIM) return bad_axis("scan_kernel", axis);
    scan_self *a = PyMem_Malloc(sizeof *a);
    if (!a) return PyErr_NoMemory();
    a->axis = axis;
    a->exclusive = exclusive;
    a->reverse = reverse;
    return make_capsule(run_scan, a);
}

/* ---- argsort along one axis (a router's or a beam's top k: argsort(-p)[..., :k]) ----
 * y[o, :, i] = the indices that sort x[o, :, i]: stable (equal values by lower index first),
 * NaN last ascending and first descending, as the op's reference.  Each value becomes an
 * unsigned key in the order wanted (the float bits with negatives inverted, -0.0 as 0.0,
 * every NaN one key past +inf; all inverted for descending), and a least-significant-digit
 * radix sort, stable, orders the line's indices by it: 8-bit digits, a pass skipped where
 * every key has the same digit (a line of 2000 float32 in four passes or fewer).  A line of
 * ARGSORT_SHORT or fewer (a router's 8 experts) is sorted by insertion instead: each radix
 * pass clears and sums 256 counters, 10x the work of the line itself (300 lines of 16:
 * 208 us against NumPy's 24).  A line of at most ARGSORT_MERGED keys of 32 bits (float32,
 * int32 and narrower) sorts each key with its index in the low 32 bits, so that all differ
 * and any order of them is the stable one: runs of 16 by insertion, then merges.  Counted
 * by callgrind, instructions a line against insertion or radix passes: 16 keys 1598 (1718),
 * 48: 5313 (8927), 64: 7158 (13265), 128: 15963 (19810); from 256 on the passes take
 * fewer (256: 32951 against 35188). */
#define ARGSORT_SHORT 48
#define ARGSORT_MERGED 192
/* With `first` > 0 (every reader takes the first `first` of each line: argsort(-p)[:, :k])
 * and a longer line, only those are found: the line's keys in order, each kept in a sorted
 * buffer of `first` while it is below the buffer's last (stable: an equal key later in the
 * line ranks after).  The top 5 of lines of 50 float32: a sort of each line took 5313
 * instructions, the selection a tenth of that. */
#define ARGSORT_SELECT_MAX 64
typedef struct argsort_self {
    int axis, descending, first;
} argsort_self;

/* Without a branch on the sign (a jump an element, mispredicted on half of random
 * values, was most of a line's time): -0.0 as 0.0, then negatives inverted and the sign
 * bit set on the rest; every NaN the largest key. */
static uint64_t sort_key(const svx_tensor *x, int64_t off, bool *wide) {
    switch (x->dtype) {
    case SVX_F32: {
        float v = ((const float *)x->data)[off];
        uint32_t u;
        memcpy(&u, &v, sizeof u);
        u = u == 0x80000000u ? 0 : u;
        u ^= (uint32_t)((int32_t)u >> 31) | 0x80000000u;
        return v != v ? 0xffffffffu : u;
    }
    case SVX_F64: {
        double v = ((const double *)x->data)[off];
        *wide = true;
        uint64_t u, top = (uint64_t)1 << 63;
        memcpy(&u, &v, sizeof u);
        u = u == top ? 0 : u;
        u ^= (uint64_t)((int64_t)u >> 63) | top;
        return v != v ? ~(uint64_t)0 : u;
    }
    case SVX_I64:
        *wide = true;
        return (uint64_t)((const int64_t *)x->data)[off] ^ ((uint64_t)1 << 63);
    case SVX_I32: return (uint32_t)((const int32_t *)x->data)[off] ^ 0x80000000u;
    case SVX_I16: return (uint32_t)(int32_t)((const int16_t *)x->data)[off] ^ 0x80000000u;
    case SVX_I8: return (uint32_t)(int32_t)((const int8_t *)x->data)[off] ^ 0x80000000u;
    case SVX_U8: return ((const uint8_t *)x->data)[off];
    default: return ((const uint8_t *)x->data)[off] != 0; /* SVX_BOOL */
    }
}

/* n distinct keys sorted ascending: runs of 16 by insertion, then merged pairwise (the
 * merge chooses without a branch), tmp of n keys the other side of each merge. */
static void sort_distinct(uint64_t *a, uint64_t *tmp, int64_t n) {
    for (int64_t s0 = 0; s0 < n; s0 += 16) {
        int64_t e = s0 + 16 < n ? s0 + 16 : n;
        for (int64_t k = s0 + 1; k < e; k++) {
            uint64_t u = a[k];
            int64_t m = k;
            for (; m > s0 && a[m - 1] > u; m--) a[m] = a[m - 1];
            a[m] = u;
        }
    }
    uint64_t *src = a, *dst = tmp;
    for (int64_t w = 16; w < n; w *= 2) {
        for (int64_t s0 = 0; s0 < n; s0 += 2 * w) {
            int64_t mid = s0 + w < n ? s0 + w : n, e = s0 + 2 * w < n ? s0 + 2 * w : n;
            int64_t i = s0, j = mid, k = s0;
            while (i < mid && j < e) {
                uint64_t x = src[i], z = src[j];
                int take = z < x;
                dst[k++] = take ? z : x;
                j += take;
                i += !take;
            }
            while (i < mid) dst[k++] = src[i++];
            while (j < e) dst[k++] = src[j++];
        }
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
}

static void argsort_task(void *vctx, int64_t task) {
    lines *j = vctx;
    const argsort_self *a = j->self;
    const svx_tensor *x = j->x, *y = j->y;
    int64_t n = j->n, xs = x->strides[j->axis], ys = y->strides[j->axis], f, f1, xo, yo;
    /* keys and indices, twice (radix passes go from one pair to the other) */
    uint64_t *key = malloc(2 * (size_t)n * (sizeof(uint64_t) + sizeof(int64_t)));
    if (!key) {
        atomic_store(&j->failed, 1);
        return;
    }
    uint64_t *key2 = key + n;
    int64_t *idx = (int64_t *)(key2 + n), *idx2 = idx + n;
    for (f1 = task_lines(j, task, &f); f < f1; f++) {
        line_at(j, f, &xo, &yo);
        bool wide = false;
        uint64_t all_and = ~(uint64_t)0, all_or = 0;
        for (int64_t k = 0; k < n; k++) {
            uint64_t u = sort_key(x, xo + k * xs, &wide);
            if (a->descending) u = wide ? ~u : (uint32_t)~u;
            key[k] = u;
            idx[k] = k;
            all_and &= u;
            all_or |= u;
        }
        if (a->first > 0 && a->first < n) {
            int64_t want = a->first, have = 0, *out = (int64_t *)y->data + yo;
            for (int64_t k = 0; k < n; k++) {
                uint64_t u = key[k];
                if (have == want && u >= key2[want - 1]) continue;
                int64_t m = have < want ? have++ : want - 1;
                for (; m > 0 && key2[m - 1] > u; m--) {
                    key2[m] = key2[m - 1];
                    idx2[m] = idx2[m - 1];
                }
                key2[m] = u;
                idx2[m] = k;
            }
            for (int64_t k = 0; k < want; k++) out[k * ys] = idx2[k];
            continue;
        }
        if (!wide && n <= ARGSORT_MERGED) { /* keys with their index below: all differ */
            for (int64_t k = 0; k < n; k++) key[k] = key[k] << 32 | (uint64_t)k;
            sort_distinct(key, key2, n);
            int64_t *out = (int64_t *)y->data + yo;
            for (int64_t k = 0; k < n; k++) out[k * ys] = (int64_t)(key[k] & 0xffffffffu);
            continue;
        }
        uint64_t *ks = key, *kd = key2;
        int64_t *is = idx, *id = idx2;
        if (n <= ARGSORT_SHORT) { /* insertion: a later equal key stays after (stable) */
            for (int64_t k = 1; k < n; k++) {
                uint64_t u = ks[k];
                int64_t i = is[k], m = k;
                for (; m > 0 && ks[m - 1] > u; m--) {
                    ks[m] = ks[m - 1];
                    is[m] = is[m - 1];
                }
                ks[m] = u;
                is[m] = i;
            }
        } else {
            for (int shift = 0; shift < (wide ? 64 : 32); shift += 8) {
                if ((((all_and ^ all_or) >> shift) & 0xff) == 0) continue; /* one digit */
                int64_t count[257] = {0};
                for (int64_t k = 0; k < n; k++) count[((ks[k] >> shift) & 0xff) + 1]++;
                for (int d = 0; d < 256; d++) count[d + 1] += count[d];
                for (int64_t k = 0; k < n; k++) {
                    int64_t at = count[(ks[k] >> shift) & 0xff]++;
                    kd[at] = ks[k];
                    id[at] = is[k];
                }
                uint64_t *tk = ks;
                ks = kd;
                kd = tk;
                int64_t *ti = is;
                is = id;
                id = ti;
            }
        }
        int64_t *out = (int64_t *)y->data + yo;
        for (int64_t k = 0; k < n; k++) out[k * ys] = is[k];
    }
    free(key);
}

static int run_argsort(const void *vself, const svx_tensor *ins, int nin,
                       const svx_tensor *outs, int nout, const int32_t *iattr,
                       const float *fattr, const char **err) {
    (void)iattr;
    (void)fattr;
    const argsort_self *a = vself;
    if (nin != 1 || nout != 1) {
        *err = "argsort: takes x and gives one result";
        return -1;
    }
    const svx_tensor *x = &ins[0], *y = &outs[0];
    bool fits = (x->dtype == SVX_F32 || x->dtype == SVX_F64 || x->dtype == SVX_I32 ||
                 x->dtype == SVX_I64 || x->dtype == SVX_I16 || x->dtype == SVX_I8 ||
                 x->dtype == SVX_U8 || x->dtype == SVX_BOOL) &&
                y->dtype == SVX_I64 && a->axis < x->ndim && y->ndim == x->ndim;
    for (int d = 0; fits && d < x->ndim; d++) fits = y->shape[d] == x->shape[d];
    if (!fits) {
        *err = "argsort: x of a float, integer (not unsigned past 8 bits) or bool dtype with "
               "the axis, and an int64 result of its shape";
        return -1;
    }
    lines j;
    lines_init(&j, x, y, a->axis, true, a);
    if (j.n == 0 || j.total == 0) return 0;
    run_lines(&j, 16384.0, argsort_task);
    if (atomic_load(&j.failed)) {
        *err = "argsort: out of memory for the keys of one line";
        return SVX_DATA_ERROR;
    }
    return 0;
}

/* argsort_kernel(axis, descending, first=0) -> kernel */
static PyObject *py_argsort_kernel(PyObject *self, PyObject *args) {
    (void)self;
    int axis, descending, first = 0;
    if (!PyArg_ParseTuple(args, "ip|i", &axis, &descending, &first)) return NULL;
    if (axis < 0 || axis >= SVX_MAXDIM) return bad_axis("argsort_kernel", axis);
    if (first < 0 || first > ARGSORT_SELECT_MAX) {
        char found[32];
        snprintf(found, sizeof found, "first %d", first);
        return sv_raise("argsort_kernel", "a selection out of range",
                        "0 (the whole line) or 1 to 64 positions", found,
                        "pass 0 to sort whole lines");
    }
    argsort_self *a = PyMem_Malloc(sizeof *a);
    if (!a) return PyErr_NoMemory();
    a->axis = axis;
    a->descending = descending;
    a->first = first;
    return make_capsule(run_argsort, a);
}

/* ---- casts the chains do not read (uint8 images to float32, float16, float64, int8) ----
 * y = x converted between any two of the executor's dtypes as NumPy's astype does on x86-64:
 * - into a float: rounded to nearest even (float16 and float32 from float64 or an integer in
 *   one rounding; past the type's range to inf);
 * - into an integer from an integer or bool: the low bits (wrapping, as C converts);
 * - into an integer from a float: truncated toward zero, as the processor's conversion does
 *   into 32 bits (64 for int64), then wrapped into a narrower type; a NaN or a value out of
 *   that range gives the conversion's "indefinite" value (INT32_MIN / INT64_MIN), which is
 *   what NumPy gives there (with a warning); checked in C, never the undefined C cast;
 * - into bool: x != 0 (a NaN is true). */
static double half_to_double(uint16_t h) { /* exact: every float16 is a double */
    uint64_t s = (uint64_t)(h & 0x8000) << 48, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
    if (e == 0) {
        double v = (double)m * 0x1p-24; /* zero or subnormal */
        return s ? -v : v;
    }
    bits = s | (e == 31 ? 0x7ff0000000000000ULL : (e + 1008) << 52) | (m << 42);
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* The same conversions between float16 and float32 without branches on the value, for
 * contiguous rows the compiler vectorizes (F. Giesen's half_to_float_fast5 and
 * float_to_half_fast3_rtne, with NumPy's NaN: its top payload bits kept, never 0x7c00).
 * A float16 input of 9600 elements took 10 us through half_to_double. */
static float half_bits_to_float(uint16_t h) {
    uint32_t o = (uint32_t)(h & 0x7fff) << 13, magic = (uint32_t)(254 - 15) << 23;
    float f, m;
    memcpy(&f, &o, sizeof f);
    memcpy(&m, &magic, sizeof m);
    f *= m; /* rebias the exponent; a subnormal is normalized exactly */
    memcpy(&o, &f, sizeof o);
    o |= f >= 65536.0f ? (uint32_t)255 << 23 : 0; /* inf and NaN stay so */
    o |= (uint32_t)(h & 0x8000) << 16;
    memcpy(&f, &o, sizeof f);
    return f;
}

static uint16_t float_to_half_bits(float v) {
    uint32_t u, sign;
    memcpy(&u, &v, sizeof u);
    sign = (u & 0x80000000u) >> 16;
    u &= 0x7fffffffu;
    uint32_t nan = 0x7c00u | ((u & 0x7fffffu) >> 13);
    uint32_t special = u > 0x7f800000u ? (nan == 0x7c00u ? 0x7c01u : nan) : 0x7c00u;
    /* below 2^-14: a subnormal, rounded by the addition of 0.5 (RTNE in the FPU) */
    uint32_t dm = (uint32_t)((127 - 15) + (23 - 10) + 1) << 23;
    float a, d;
    memcpy(&a, &u, sizeof a);
    memcpy(&d, &dm, sizeof d);
    a += d;
    uint32_t ab;
    memcpy(&ab, &a, sizeof ab);
    uint32_t sub = ab - dm;
    uint32_t norm = (u + ((uint32_t)(15 - 127) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
    uint32_t o = u >= (uint32_t)(127 + 16) << 23 ? special : u < (uint32_t)113 << 23 ? sub : norm;
    return (uint16_t)(o | sign);
}

/* IEEE binary16 of a double, rounded to nearest even once (NumPy's doublebits_to_halfbits) */
static uint16_t double_to_half(double d) {
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    uint16_t sign = (uint16_t)((b >> 48) & 0x8000);
    uint64_t mag = b & 0x7fffffffffffffffULL;
    if (mag >= 0x7ff0000000000000ULL) { /* inf, or a NaN keeping its top payload bits */
        if (mag == 0x7ff0000000000000ULL) return sign | 0x7c00;
        uint16_t m = (uint16_t)((mag >> 42) & 0x3ff);
        return (uint16_t)(sign | 0x7c00 | (m ? m : 1));
    }
    int e = (int)(mag >> 52) - 1023;
    if (e >= 16) return sign | 0x7c00;
    if (e < -25) return sign; /* below half the least subnormal */
    uint64_t mant = (mag & 0xfffffffffffffULL) | (1ULL << 52);
    int shift = e >= -14 ? 42 : 42 + (-14 - e); /* to 10 bits, or to units of 2^-24 */
    uint64_t q = mant >> shift, rem = mant & ((1ULL << shift) - 1), tie = 1ULL << (shift - 1);
    if (rem > tie || (rem == tie && (q & 1))) q++;
    uint64_t h = e >= -14 ? ((uint64_t)(e + 14) << 10) + q : q; /* a carry moves up */
    return (uint16_t)(sign | (h >= 0x7c00 ? 0x7c00 : h));
}

static bool cast_is_float(int dt) { return dt == SVX_F32 || dt == SVX_F64 || dt == SVX_F16; }

static double cast_in(const char *p, int dt) {
    switch (dt) {
    case SVX_F32: return *(const float *)p;
    case SVX_F64: return *(const double *)p;
    default: return half_to_double(*(const uint16_t *)p); /* SVX_F16 */
    }
}

static int64_t cast_int_in(const char *p, int dt) {
    switch (dt) {
    case SVX_I32: return *(const int32_t *)p;
    case SVX_I64: return *(const int64_t *)p;
    case SVX_U8: return *(const uint8_t *)p;
    case SVX_I8: return *(const int8_t *)p;
    case SVX_I16: return *(const int16_t *)p;
    default: return *(const uint8_t *)p != 0; /* SVX_BOOL */
    }
}

/* a float truncated into an integer as x86-64's cvtt* does: 64 bits for int64, else 32 */
static int64_t float_to_int(double v, int dt) {
    if (dt == SVX_I64)
        return v >= -0x1p63 && v < 0x1p63 ? (int64_t)v : INT64_MIN;
    return v > -2147483649.0 && v < 2147483648.0 ? (int64_t)(int32_t)v : (int64_t)INT32_MIN;
}

static void cast_int_out(char *q, int dt, int64_t v) {
    switch (dt) {
    case SVX_I64: *(int64_t *)q = v; break;
    case SVX_I32: *(int32_t *)q = (int32_t)(uint32_t)(uint64_t)v; break;
    case SVX_I16: *(int16_t *)q = (int16_t)(uint16_t)(uint64_t)v; break;
    case SVX_I8: *(int8_t *)q = (int8_t)(uint8_t)(uint64_t)v; break;
    case SVX_U8: *(uint8_t *)q = (uint8_t)(uint64_t)v; break;
    default: *(uint8_t *)q = v != 0; /* SVX_BOOL */
    }
}

static void cast_one(const char *p, int from, char *q, int to) {
    if (cast_is_float(from)) {
        double v = cast_in(p, from);
        if (to == SVX_F32) *(float *)q = (float)v;
        else if (to == SVX_F64) *(double *)q = v;
        else if (to == SVX_F16) *(uint16_t *)q = double_to_half(v);
        else if (to == SVX_BOOL) *(uint8_t *)q = v != 0.0;
        else cast_int_out(q, to, float_to_int(v, to));
        return;
    }
    int64_t v = cast_int_in(p, from); /* exact in 64 bits, then as C converts */
    if (to == SVX_F32) *(float *)q = (float)v; /* one rounding from the integer */
    else if (to == SVX_F64) *(double *)q = (double)v;
    else if (to == SVX_F16) /* |v| past 2^53 is inf in float16 however it rounds */
        *(uint16_t *)q = double_to_half((double)v);
    else cast_int_out(q, to, v);
}

static int run_cast(const void *vself, const svx_tensor *ins, int nin, const svx_tensor *outs,
                    int nout, const int32_t *iattr, const float *fattr, const char **err) {
    (void)vself;
    (void)iattr;
    (void)fattr;
    if (nin != 1 || nout != 1) {
        *err = "cast: takes one tensor and gives one result";
        return -1;
    }
    const svx_tensor *x = &ins[0], *y = &outs[0];
    bool fits = x->dtype >= 0 && x->dtype < SVX_NDTYPES && y->dtype >= 0 &&
                y->dtype < SVX_NDTYPES && x->ndim == y->ndim;
    for (int d = 0; fits && d < y->ndim; d++) fits = x->shape[d] == y->shape[d];
    if (!fits) {
        *err = "cast: a result of x's shape";
        return -1;
    }
    /* row by row along the last axis; offsets of the rows from the other axes */
    int nd = y->ndim;
    int64_t n = nd ? y->shape[nd - 1] : 1, sx = nd ? x->strides[nd - 1] : 0,
            sy = nd ? y->strides[nd - 1] : 0, rows = 1;
    for (int d = 0; d < nd - 1; d++) rows *= y->shape[d];
    if (n == 0) return 0;
    if (one_run(x, 0, nd) && one_run(y, 0, nd)) { /* one row of every element */
        n *= rows;
        rows = 1;
        sx = sy = 1;
        nd = 1;
    }
    size_t xs = (size_t)svx_itemsize[x->dtype], ys = (size_t)svx_itemsize[y->dtype];
    int from = x->dtype, to = y->dtype;
    for (int64_t r = 0; r < rows; r++) {
        const char *p = x->data;
        char *q = y->data;
        if (rows > 1) {
            p += (int64_t)xs * offset_of(r, x->shape, x->strides, 0, nd - 1);
            q += (int64_t)ys * offset_of(r, y->shape, y->strides, 0, nd - 1);
        }
        if (sx == 1 && sy == 1) { /* the common ones: loops the compiler vectorizes, each
                                   * element as cast_one converts it (a bilinear lookup's
                                   * floor(x).astype(int64): 1.5 ns an element through it) */
#define CAST_RUN(F, T, A, C, EXPR)                                                           \
    if (from == F && to == T) {                                                              \
        const A *a = (const A *)p;                                                           \
        C *c = (C *)q;                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                    \
            A v = a[i];                                                                      \
            c[i] = (EXPR);                                                                   \
        }                                                                                    \
        continue;                                                                            \
    }
            CAST_RUN(SVX_U8, SVX_F32, uint8_t, float, (float)v)
            CAST_RUN(SVX_F32, SVX_I64, float, int64_t,
                     v >= -0x1p63f && v < 0x1p63f ? (int64_t)v : INT64_MIN)
            CAST_RUN(SVX_F32, SVX_I32, float, int32_t,
                     v >= -0x1p31f && v < 0x1p31f ? (int32_t)v : INT32_MIN)
            CAST_RUN(SVX_I64, SVX_F32, int64_t, float, (float)v)
            CAST_RUN(SVX_I32, SVX_F32, int32_t, float, (float)v)
            CAST_RUN(SVX_I32, SVX_I64, int32_t, int64_t, (int64_t)v)
            CAST_RUN(SVX_I64, SVX_I32, int64_t, int32_t, (int32_t)(uint32_t)(uint64_t)v)
            CAST_RUN(SVX_BOOL, SVX_F32, uint8_t, float, v != 0 ? 1.0f : 0.0f)
            CAST_RUN(SVX_F32, SVX_BOOL, float, uint8_t, v != 0.0f)
            /* to narrow integers: truncated to 32 bits as float_to_int, then wrapped */
#define F32_I32(v) ((v) >= -0x1p31f && (v) < 0x1p31f ? (int32_t)(v) : INT32_MIN)
            CAST_RUN(SVX_F32, SVX_I8, float, int8_t, (int8_t)(uint8_t)(uint32_t)F32_I32(v))
            CAST_RUN(SVX_F32, SVX_U8, float, uint8_t, (uint8_t)(uint32_t)F32_I32(v))
            CAST_RUN(SVX_F32, SVX_I16, float, int16_t, (int16_t)(uint16_t)(uint32_t)F32_I32(v))
#undef F32_I32
            CAST_RUN(SVX_I8, SVX_F32, int8_t, float, (float)v)
            CAST_RUN(SVX_I16, SVX_F32, int16_t, float, (float)v)
            CAST_RUN(SVX_U8, SVX_I64, uint8_t, int64_t, (int64_t)v)
            CAST_RUN(SVX_I8, SVX_I64, int8_t, int64_t, (int64_t)v)
            CAST_RUN(SVX_U8, SVX_I32, uint8_t, int32_t, (int32_t)v)
            CAST_RUN(SVX_I8, SVX_I32, int8_t, int32_t, (int32_t)v)
            CAST_RUN(SVX_BOOL, SVX_I64, uint8_t, int64_t, v != 0)
            CAST_RUN(SVX_BOOL, SVX_I32, uint8_t, int32_t, v != 0)
            CAST_RUN(SVX_I64, SVX_BOOL, int64_t, uint8_t, v != 0)
            CAST_RUN(SVX_I32, SVX_BOOL, int32_t, uint8_t, v != 0)
            CAST_RUN(SVX_F32, SVX_F64, float, double, (double)v)
            CAST_RUN(SVX_F64, SVX_F32, double, float, (float)v)
            CAST_RUN(SVX_F16, SVX_F32, uint16_t, float, half_bits_to_float(v))
            CAST_RUN(SVX_F32, SVX_F16, float, uint16_t, float_to_half_bits(v))
#undef CAST_RUN
        }
        for (int64_t i = 0; i < n; i++)
            cast_one(p + (int64_t)xs * i * sx, from, q + (int64_t)ys * i * sy, to);
    }
    return 0;
}

/* cast_kernel() -> kernel */
static PyObject *py_cast_kernel(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return plain_kernel(run_cast);
}

/* ---- take_along_axis (the last real token's state: ``take_along_axis(h, last, 1)``) ----
 * y[i0, .., ik, ..] = x[i0, .., idx[i0, .., ik, ..], ..] along the axis; y has the indices'
 * shape, which off the axis selects the leading part of x's.  A negative index counts
 * from the end; one out of range fails the call naming it, as NumPy raises. */
static int run_take_along(const void *vself, const svx_tensor *ins, int nin,
                          const svx_tensor *outs, int nout, const int32_t *iattr,
                          const float *fattr, const char **err) {
    (void)iattr;
    (void)fattr;
    int axis = ((const axis_self *)vself)->axis;
    if (nin != 2 || nout != 1) {
        *err = "take_along_axis: takes x and the indices and gives one result";
        return -1;
    }
    const svx_tensor *x = &ins[0], *ix = &ins[1], *y = &outs[0];
    bool fits = axis < x->ndim && (ix->dtype == SVX_I32 || ix->dtype == SVX_I64) &&
                y->dtype == x->dtype && ix->ndim == x->ndim && y->ndim == x->ndim;
    for (int d = 0; fits && d < x->ndim; d++)
        fits = y->shape[d] == ix->shape[d] && (d == axis || ix->shape[d] <= x->shape[d]);
    if (!fits) {
        *err = "take_along_axis: indices of x's rank, within x's shape off the axis, and a "
               "result of their shape and x's dtype";
        return -1;
    }
    int64_t total = 1, n = x->shape[axis];
    for (int d = 0; d < y->ndim; d++) total *= y->shape[d];
    size_t isz = (size_t)svx_itemsize[x->dtype];
    for (int64_t f = 0; f < total; f++) {
        int64_t xo = 0, io = 0, yo = 0, rest = f;
        for (int d = y->ndim - 1; d >= 0; d--) {
            int64_t i = rest % y->shape[d];
            rest /= y->shape[d];
            io += i * ix->strides[d];
            yo += i * y->strides[d];
            if (d != axis) xo += i * x->strides[d];
        }
        int64_t v = int_at(ix, io);
        if (v < -n || v >= n) return take_out_of_range("take_along_axis", v, axis, n, err);
        if (v < 0) v += n;
        memcpy(y->data + (int64_t)isz * yo, x->data + (int64_t)isz * (xo + v * x->strides[axis]),
               isz);
    }
    return 0;
}

/* take_along_kernel(axis) -> kernel */
static PyObject *py_take_along_kernel(PyObject *self, PyObject *args) {
    (void)self;
    return axis_kernel(args, "take_along_kernel", run_take_along);
}

/* ---- integer reductions (lengths from a mask: ``mask.sum(axis=1)``) ----
 * y[o] = the sum (max, min, product) of x[o, r] over the axes [first, stop) of x, which
 * the lowering makes the last ones (a view), computed exactly in 64 bits and wrapping
 * around in y's type as NumPy's does (unsigned arithmetic: no signed overflow in C). */
enum { IRED_SUM, IRED_MAX, IRED_MIN, IRED_PROD };
typedef struct ired_self {
    int kind, r0, r1;
} ired_self;

static int run_int_reduce(const void *vself, const svx_tensor *ins, int nin,
                          const svx_tensor *outs, int nout, const int32_t *iattr,
                          const float *fattr, const char **err) {
    (void)iattr;
    (void)fattr;
    const ired_self *a = vself;
    if (nin != 1 || nout != 1) {
        *err = "int reduce: takes x and gives one result";
        return -1;
    }
    const svx_tensor *x = &ins[0], *y = &outs[0];
    bool fits = (x->dtype == SVX_I32 || x->dtype == SVX_I64 || x->dtype == SVX_BOOL) &&
                (y->dtype == SVX_I32 || y->dtype == SVX_I64) && a->r1 <= x->ndim &&
                y->ndim == x->ndim - (a->r1 - a->r0);
    for (int d = 0; fits && d < y->ndim; d++)
        fits = y->shape[d] == x->shape[d < a->r0 ? d : d + a->r1 - a->r0];
    if (!fits) {
        *err = "int reduce: int32, int64 or bool x and an int32 or int64 result of x's "
               "shape less the reduced axes";
        return -1;
    }
    int64_t total = 1, n = 1;
    for (int d = 0; d < y->ndim; d++) total *= y->shape[d];
    for (int d = a->r0; d < a->r1; d++) n *= x->shape[d];
    if (total > 0 && n == 0 && (a->kind == IRED_MAX || a->kind == IRED_MIN)) {
        *err = a->kind == IRED_MAX ? "max of an empty sequence (a reduced axis of length 0)"
                                   : "min of an empty sequence (a reduced axis of length 0)";
        return SVX_DATA_ERROR;
    }
    for (int64_t f = 0; f < total; f++) {
        int64_t xo = 0, rest = f;
        for (int d = y->ndim - 1; d >= 0; d--) {
            int xd = d < a->r0 ? d : d + a->r1 - a->r0;
            xo += (rest % y->shape[d]) * x->strides[xd];
            rest /= y->shape[d];
        }
        uint64_t acc = a->kind == IRED_PROD ? 1 : 0;
        /* the last reduced axis innermost: one offset computed per run along it */
        int64_t inner = x->shape[a->r1 - 1], step = x->strides[a->r1 - 1];
        for (int64_t g = 0; inner > 0 && g < n; g += inner) {
            int64_t ro = xo + offset_of(g, x->shape, x->strides, a->r0, a->r1);
            for (int64_t k = 0; k < inner; k++, ro += step) {
                int64_t v = x->dtype == SVX_BOOL ? ((const uint8_t *)x->data)[ro] != 0
                                                  : int_at(x, ro);
                if (a->kind == IRED_SUM) acc += (uint64_t)v;
                else if (a->kind == IRED_PROD) acc *= (uint64_t)v;
                else if ((g == 0 && k == 0) ||
                         (a->kind == IRED_MAX ? v > (int64_t)acc : v < (int64_t)acc))
                    acc = (uint64_t)v;
            }
        }
        int64_t yo = offset_of(f, y->shape, y->strides, 0, y->ndim);
        if (y->dtype == SVX_I64) ((int64_t *)y->data)[yo] = (int64_t)acc;
        else ((int32_t *)y->data)[yo] = (int32_t)(uint32_t)acc;
    }
    return 0;
}

/* ---- integer matrix products (a path count over an int adjacency: A @ A) ----
 * y[.., i, j] = sum over k of x[.., i, k] * w[.., k, j], int32/int64 operands (views of the
 * result's batch shape), added in 64 bits and wrapped into y's type, as NumPy's (its
 * int32 product wraps at each step: the same low 32 bits).  Rows of y in blocks of
 * IMM_BLOCK columns, each x value times a row of w added in place (the compiler vectorizes
 * the j loop). */
#define IMM_BLOCK 256
static int run_int_matmul(const void *vself, const svx_tensor *ins, int nin,
                          const svx_tensor *outs, int nout, const int32_t *iattr,
                          const float *fattr, const char **err) {
    (void)vself;
    (void)iattr;
    (void)fattr;
    if (nin != 2 || nout != 1) {
        *err = "int matmul: takes two tensors and gives one result";
        return -1;
    }
    const svx_tensor *x = &ins[0], *w = &ins[1], *y = &outs[0];
    int nd = y->ndim;
    bool fits = nd >= 2 && x->ndim == nd && w->ndim == nd &&
                (x->dtype == SVX_I32 || x->dtype == SVX_I64) &&
                (w->dtype == SVX_I32 || w->dtype == SVX_I64) &&
                (y->dtype == SVX_I32 || y->dtype == SVX_I64);
    for (int d = 0; fits && d < nd - 2; d++)
        fits = x->shape[d] == y->shape[d] && w->shape[d] == y->shape[d];
    fits = fits && x->shape[nd - 2] == y->shape[nd - 2] && w->shape[nd - 1] == y->shape[nd - 1] &&
           x->shape[nd - 1] == w->shape[nd - 2];
    if (!fits) {
        *err = "int matmul: int32/int64 operands [.., m, k] and [.., k, n] (views of the "
               "result's batch shape) and an int32/int64 result [.., m, n]";
        return -1;
    }
    int64_t m = y->shape[nd - 2], n = y->shape[nd - 1], kk = x->shape[nd - 1], batch = 1;
    for (int d = 0; d < nd - 2; d++) batch *= y->shape[d];
    int64_t xs_i = x->strides[nd - 2], xs_k = x->strides[nd - 1];
    int64_t ws_k = w->strides[nd - 2], ws_j = w->strides[nd - 1];
    int64_t ys_i = y->strides[nd - 2], ys_j = y->strides[nd - 1];
    uint64_t acc[IMM_BLOCK];
    for (int64_t bt = 0; bt < batch; bt++) {
        int64_t xb = offset_of(bt, x->shape, x->strides, 0, nd - 2);
        int64_t wb = offset_of(bt, w->shape, w->strides, 0, nd - 2);
        int64_t yb = offset_of(bt, y->shape, y->strides, 0, nd - 2);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j0 = 0; j0 < n; j0 += IMM_BLOCK) {
                int64_t nb = n - j0 < IMM_BLOCK ? n - j0 : IMM_BLOCK;
                for (int64_t j = 0; j < nb; j++) acc[j] = 0;
                for (int64_t k = 0; k < kk; k++) {
                    uint64_t u = (uint64_t)int_at(x, xb + i * xs_i + k * xs_k);
                    int64_t wrow = wb + k * ws_k + j0 * ws_j;
                    if (w->dtype == SVX_I32 && ws_j == 1) {
                        const int32_t *pw = (const int32_t *)w->data + wrow;
                        for (int64_t j = 0; j < nb; j++) acc[j] += u * (uint64_t)(int64_t)pw[j];
                    } else if (w->dtype == SVX_I64 && ws_j == 1) {
                        const int64_t *pw = (const int64_t *)w->data + wrow;
                        for (int64_t j = 0; j < nb; j++) acc[j] += u * (uint64_t)pw[j];
                    } else {
                        for (int64_t j = 0; j < nb; j++)
                            acc[j] += u * (uint64_t)int_at(w, wrow + j * ws_j);
                    }
                }
                int64_t yo = yb + i * ys_i + j0 * ys_j;
                if (y->dtype == SVX_I64)
                    for (int64_t j = 0; j < nb; j++)
                        ((int64_t *)y->data)[yo + j * ys_j] = (int64_t)acc[j];
                else
                    for (int64_t j = 0; j < nb; j++)
                        ((int32_t *)y->data)[yo + j * ys_j] = (int32_t)(uint32_t)acc[j];
            }
    }
    return 0;
}

/* int_matmul_kernel() -> kernel */
static PyObject *py_int_matmul_kernel(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return plain_kernel(run_int_matmul);
}

/* int_reduce_kernel(kind, first, stop) -> kernel */
static PyObject *py_int_reduce_kernel(PyObject *self, PyObject *args) {
    (void)self;
    const char *kind;
    int r0, r1;
    if (!PyArg_ParseTuple(args, "sii", &kind, &r0, &r1)) return NULL;
    int k = !strcmp(kind, "sum")    ? IRED_SUM
            : !strcmp(kind, "max")  ? IRED_MAX
            : !strcmp(kind, "min")  ? IRED_MIN
            : !strcmp(kind, "prod") ? IRED_PROD
                                    : -1;
    if (k < 0)
        return sv_raise("int_reduce_kernel", "an unknown integer reduction",
                        "sum, max, min or prod", kind, "pass one of those");
    if (r0 < 0 || r1 <= r0 || r1 > SVX_MAXDIM) {
        char found[48];
        snprintf(found, sizeof found, "axes [%d, %d)", r0, r1);
        return sv_raise("int_reduce_kernel", "reduced axes out of range",
                        "0 <= first < stop <= 8", found, "reduce a group of adjacent axes");
    }
    ired_self *r = PyMem_Malloc(sizeof *r);
    if (!r) return PyErr_NoMemory();
    r->kind = k;
    r->r0 = r0;
    r->r1 = r1;
    return make_capsule(run_int_reduce, r);
}

/* ---- the sizes of a tensor as values (``x.sum(1) / x.shape[1]``, a diagonal's stride) ----
 * y = the sizes of the one operand (a view whose shape is the dimensions asked for: the
 * executor evaluates them per call), as a vector of one value per axis, or a scalar of a
 * rank-1 operand's size. */
static int run_sizes(const void *vself, const svx_tensor *ins, int nin, const svx_tensor *outs,
                     int nout, const int32_t *iattr, const float *fattr, const char **err) {
    (void)vself;
    (void)iattr;
    (void)fattr;
    if (nin != 1 || nout != 1) {
        *err = "sizes: takes one tensor and gives one result";
        return -1;
    }
    const svx_tensor *x = &ins[0], *y = &outs[0];
    bool fits = (y->dtype == SVX_F32 || y->dtype == SVX_F64 || y->dtype == SVX_I32 ||
                 y->dtype == SVX_I64) &&
                ((y->ndim == 1 && y->shape[0] == x->ndim) || (y->ndim == 0 && x->ndim == 1));
    if (!fits) {
        *err = "sizes: a float32, float64, int32 or int64 result of one value per axis of "
               "the operand (a scalar for a rank-1 operand)";
        return -1;
    }
    int64_t step = y->ndim ? y->strides[0] : 0;
    for (int d = 0; d < x->ndim; d++) {
        int64_t v = x->shape[d], o = d * step;
        switch (y->dtype) {
        case SVX_F32: ((float *)y->data)[o] = (float)v; break;
        case SVX_F64: ((double *)y->data)[o] = (double)v; break;
        case SVX_I32: ((int32_t *)y->data)[o] = (int32_t)v; break;
        default: ((int64_t *)y->data)[o] = v; break;
        }
    }
    return 0;
}

/* sizes_kernel() -> kernel */
static PyObject *py_sizes_kernel(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return plain_kernel(run_sizes);
}

/* ---- argmax and argmin along one axis (greedy decoding's token, a router's expert) ----
 * y[o, i] = the first index r of the largest (smallest) x[o, r, i]; a NaN counts as the
 * extreme, its first index wins, as in NumPy.  float32 vectorized; integers, bool and
 * float64 one element a step. */
typedef struct arg_self {
    int max, axis;
} arg_self;

/* The first index of the largest (smallest) of n contiguous floats, a NaN's if any: the
 * extreme of each of 16 lanes first (vectors of 4, selects without branches: one running
 * extreme is a chain of dependent compares), then the first index that holds it. */
typedef float arg_v4f __attribute__((vector_size(16)));
typedef int32_t arg_v4i __attribute__((vector_size(16)));

static float row_extreme(const float *p, int64_t n, int max, bool *nan) {
    arg_v4f lane[4];
    arg_v4i bad[4];
    for (int k = 0; k < 4; k++) {
        lane[k] = (arg_v4f){p[0], p[0], p[0], p[0]};
        bad[k] = (arg_v4i){0, 0, 0, 0};
    }
    int64_t r = 0;
    for (; r + 16 <= n; r += 16)
        for (int k = 0; k < 4; k++) {
            arg_v4f v;
            memcpy(&v, p + r + 4 * k, sizeof v);
            bad[k] |= v != v;
            arg_v4i take = max ? v > lane[k] : v < lane[k];
            lane[k] = (arg_v4f)(((arg_v4i)v & take) | ((arg_v4i)lane[k] & ~take));
        }
    float best = p[0];
    int any = 0;
    for (int k = 0; k < 4; k++)
        for (int l = 0; l < 4; l++) {
            float v = lane[k][l];
            any |= bad[k][l];
            best = (max ? v > best : v < best) ? v : best;
        }
    for (; r < n; r++) {
        any |= p[r] != p[r];
        best = (max ? p[r] > best : p[r] < best) ? p[r] : best;
    }
    *nan = any || best != best;
    return best;
}

/* The first k with p[k] == value (p[k] != p[k] for a NaN), 16 at a time. */
static int64_t first_equal(const float *p, int64_t n, float value, bool nan) {
    arg_v4f want = {value, value, value, value};
    int64_t r = 0;
    for (; r + 16 <= n; r += 16) {
        arg_v4i hit = {0, 0, 0, 0};
        for (int k = 0; k < 4; k++) {
            arg_v4f v;
            memcpy(&v, p + r + 4 * k, sizeof v);
            hit |= nan ? v != v : v == want;
        }
        if (hit[0] | hit[1] | hit[2] | hit[3]) break;
    }
    for (; r < n; r++)
        if (nan ? p[r] != p[r] : p[r] == value) return r;
    return 0;
}

static int64_t arg_row(const float *p, int64_t n, int max) {
    bool nan;
    float best = row_extreme(p, n, max, &nan);
    return first_equal(p, n, best, nan);
}

static void arg_task(void *vctx, int64_t task) {
    const lines *j = vctx;
    const arg_self *a = j->self;
    int64_t step = j->x->strides[j->axis], f, f1, xo, yo;
    for (f1 = task_lines(j, task, &f); f < f1; f++) {
        line_at(j, f, &xo, &yo);
        const float *p = (const float *)j->x->data + xo;
        int64_t best = 0;
        float bv = p[0];
        if (step == 1 && j->n >= 16)
            best = arg_row(p, j->n, a->max);
        else if (bv == bv)
            for (int64_t r = 1; r < j->n; r++) {
                float v = p[r * step];
                if (v != v) {
                    best = r;
                    break;
                }
                if (a->max ? v > bv : v < bv) {
                    bv = v;
                    best = r;
                }
            }
        ((int64_t *)j->y->data)[yo] = best;
    }
}

/* any other dtype (integers, bool, float64: a vote count, a class id): one compare a step */
static void arg_any_task(void *vctx, int64_t task) {
    const lines *j = vctx;
    const arg_self *a = j->self;
    int dt = j->x->dtype;
    int64_t step = j->x->strides[j->axis] * svx_itemsize[dt], f, f1, xo, yo;
    for (f1 = task_lines(j, task, &f); f < f1; f++) {
        line_at(j, f, &xo, &yo);
        const char *p = j->x->data + xo * svx_itemsize[dt];
        int64_t best = 0;
        if (dt == SVX_F64) {
            double bv = *(const double *)p;
            for (int64_t r = 1; r < j->n && bv == bv; r++) {
                double v = *(const double *)(p + r * step);
                if (v != v || (a->max ? v > bv : v < bv)) {
                    bv = v;
                    best = r;
                }
            }
        } else {
            int64_t bv = cast_int_in(p, dt);
            for (int64_t r = 1; r < j->n; r++) {
                int64_t v = cast_int_in(p + r * step, dt);
                if (a->max ? v > bv : v < bv) {
                    bv = v;
                    best = r;
                }
            }
        }
        ((int64_t *)j->y->data)[yo] = best;
    }
}

/* float32 along an axis that is not the last, x and y contiguous (a segmentation head's
 * class per pixel, [b, classes, h, w] along 1): the lines side by side, a chunk of the
 * inner block at a time, each element compared with its line's running extreme (a
 * strided search per line took 15 ns a pixel, its offsets worked out by divisions).  The
 * same rule as arg_task: the first extreme wins, a NaN (the first) over anything. */
#define ARG_CHUNK 256
typedef struct arg_inner_job {
    const float *x;
    int64_t *y;
    int64_t n, inner, chunks, per_task, units;
    int max;
} arg_inner_job;

static void arg_inner_task(void *vctx, int64_t task) {
    const arg_inner_job *j = vctx;
    int64_t u1 = (task + 1) * j->per_task < j->units ? (task + 1) * j->per_task : j->units;
    float best[ARG_CHUNK];
    int32_t at[ARG_CHUNK];
    for (int64_t u = task * j->per_task; u < u1; u++) {
        int64_t o = u / j->chunks, i0 = (u % j->chunks) * ARG_CHUNK;
        int64_t m = j->inner - i0 < ARG_CHUNK ? j->inner - i0 : ARG_CHUNK;
        const float *base = j->x + o * j->n * j->inner + i0;
        for (int64_t k = 0; k < m; k++) {
            best[k] = base[k];
            at[k] = 0;
        }
        for (int64_t r = 1; r < j->n; r++) {
            const float *p = base + r * j->inner;
            int32_t rr = (int32_t)r;
            if (j->max)
                for (int64_t k = 0; k < m; k++) {
                    float v = p[k], b = best[k];
                    bool take = (v > b) | ((v != v) & (b == b));
                    best[k] = take ? v : b;
                    at[k] = take ? rr : at[k];
                }
            else
                for (int64_t k = 0; k < m; k++) {
                    float v = p[k], b = best[k];
                    bool take = (v < b) | ((v != v) & (b == b));
                    best[k] = take ? v : b;
                    at[k] = take ? rr : at[k];
                }
        }
        int64_t *y = j->y + o * j->inner + i0;
        for (int64_t k = 0; k < m; k++) y[k] = at[k];
    }
}

/* float32 along the last axis in short rows (n < 64: a classifier's few classes, a
 * decoder's frames of a dozen labels), x and y contiguous: 64 rows side by side, a column
 * at a time, so that the compares of different rows do not wait on each other (one row
 * at a time through the general lines: 15 ns a row of 12, 13 of 30).  The same rule as
 * arg_task: the first extreme wins, a NaN (the first) over anything. */
#define ARG_ROWS 64
typedef struct arg_short_job {
    const float *x;
    int64_t *y;
    int64_t n, rows, per_task;
    int max;
} arg_short_job;

static void arg_short_task(void *vctx, int64_t task) {
    const arg_short_job *j = vctx;
    int64_t r0 = task * j->per_task, r1 = r0 + j->per_task < j->rows ? r0 + j->per_task : j->rows;
    const int64_t n = j->n;
    float best[ARG_ROWS];
    int32_t at[ARG_ROWS];
    for (int64_t b0 = r0; b0 < r1; b0 += ARG_ROWS) {
        int nb = r1 - b0 < ARG_ROWS ? (int)(r1 - b0) : ARG_ROWS;
        const float *p = j->x + b0 * n;
        for (int l = 0; l < nb; l++) {
            best[l] = p[l * n];
            at[l] = 0;
        }
        for (int32_t c = 1; c < (int32_t)n; c++) {
            if (j->max)
                for (int l = 0; l < nb; l++) {
                    float v = p[l * n + c], b = best[l];
                    bool take = (v > b) | ((v != v) & (b == b));
                    best[l] = take ? v : b;
                    at[l] = take ? c : at[l];
                }
            else
                for (int l = 0; l < nb; l++) {
                    float v = p[l * n + c], b = best[l];
                    bool take = (v < b) | ((v != v) & (b == b));
                    best[l] = take ? v : b;
                    at[l] = take ? c : at[l];
                }
        }
        for (int l = 0; l < nb; l++) j->y[b0 + l] = at[l];
    }
}

static void run_arg_inner(const lines *l, int max) {
    arg_inner_job j = {(const float *)l->x->data, (int64_t *)l->y->data, l->n, l->inner,
                       (l->inner + ARG_CHUNK - 1) / ARG_CHUNK, 0, 0, max};
    j.units = l->total / l->inner * j.chunks;
    run_units(j.units, (double)l->total * (double)l->n, 32768.0, &j.per_task, arg_inner_task,
              &j);
}

static int run_arg(const void *vself, const svx_tensor *ins, int nin, const svx_tensor *outs,
                   int nout, const int32_t *iattr, const float *fattr, const char **err) {
    (void)iattr;
    (void)fattr;
    const arg_self *a = vself;
    if (nin != 1 || nout != 1) {
        *err = "argmax: takes x and gives one result";
        return -1;
    }
    const svx_tensor *x = &ins[0], *y = &outs[0];
    bool fits = x->dtype != SVX_F16 && y->dtype == SVX_I64 && a->axis < x->ndim &&
                y->ndim == x->ndim - 1;
    for (int d = 0; fits && d < x->ndim; d++)
        if (d != a->axis) fits = y->shape[d < a->axis ? d : d - 1] == x->shape[d];
    if (!fits) {
        *err = "argmax: x of any dtype but float16 and an int64 result of x's shape less the "
               "axis";
        return -1;
    }
    lines j;
    lines_init(&j, x, y, a->axis, false, a);
    if (j.total == 0) return 0;
    if (j.n == 0) {
        *err = a->max ? "argmax of an empty sequence (an axis of length 0)"
                      : "argmin of an empty sequence (an axis of length 0)";
        return SVX_DATA_ERROR;
    }
    if (x->dtype == SVX_F32 && j.inner > 1 && j.n < INT32_MAX && contiguous(x) &&
        contiguous(y)) {
        run_arg_inner(&j, a->max);
        return 0;
    }
    if (x->dtype == SVX_F32 && j.inner == 1 && j.n < 64 && contiguous(x) && contiguous(y)) {
        arg_short_job sj = {(const float *)x->data, (int64_t *)y->data, j.n, j.total, 0, a->max};
        run_units(sj.rows, (double)sj.rows * (double)sj.n, 32768.0, &sj.per_task, arg_short_task,
                  &sj);
        return 0;
    }
    run_lines(&j, 32768.0, x->dtype == SVX_F32 ? arg_task : arg_any_task);
    return 0;
}

/* arg_kernel(kind, axis) -> kernel */
static PyObject *py_arg_kernel(PyObject *self, PyObject *args) {
    (void)self;
    const char *kind;
    int axis;
    if (!PyArg_ParseTuple(args, "si", &kind, &axis)) return NULL;
    int max = !strcmp(kind, "argmax") ? 1 : !strcmp(kind, "argmin") ? 0 : -1;
    if (max < 0)
        return sv_raise("arg_kernel", "an unknown search", "argmax or argmin", kind,
                        "pass one of those");
    if (axis < 0 || axis >= SVX_MAXDIM) return bad_axis("arg_kernel", axis);
    arg_self *a = PyMem_Malloc(sizeof *a);
    if (!a) return PyErr_NoMemory();
    a->max = max;
    a->axis = axis;
    return make_capsule(run_arg, a);
}

/* compare_kernel(kind) and int_arith_kernel(kind) -> kernel: the names of each, in the
 * order of the kinds they start at */
static const char *compare_names[] = {"less", "less_equal", "greater", "greater_equal",
                                      "equal", "not_equal", NULL};
static const char *arith_names[] = {"add",      "sub", "mul",   "maximum", "minimum", "cast",
                                    "floordiv", "mod", "where", "abs",     "neg",     NULL};

static PyObject *int_binary_kernel(PyObject *arg, const char *fn, const char **names,
                                   int first, const char *what, const char *expected) {
    const char *kind = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!kind) {
        PyErr_Clear();
        kind = "";
    }
    int k = -1;
    for (int i = 0; names[i]; i++)
        if (!strcmp(kind, names[i])) k = first + i;
    if (k < 0)
        return sv_raise(fn, what, expected, *kind ? kind : "not a str",
                        "pass one of those names");
    int_binary_self *c = PyMem_Malloc(sizeof *c);
    if (!c) return PyErr_NoMemory();
    c->kind = k;
    return make_capsule(run_int_binary, c);
}

static PyObject *py_compare_kernel(PyObject *self, PyObject *arg) {
    (void)self;
    return int_binary_kernel(arg, "compare_kernel", compare_names, SV_ICMP_LT,
                             "an unknown comparison",
                             "less, less_equal, greater, greater_equal, equal or not_equal");
}

static PyObject *py_int_arith_kernel(PyObject *self, PyObject *arg) {
    (void)self;
    return int_binary_kernel(arg, "int_arith_kernel", arith_names, SV_IOP_ADD,
                             "an unknown integer operation",
                             "add, sub, mul, maximum, minimum, cast, floordiv, mod, where, abs "
                             "or neg");
}

/* reduce_kernel(kind, first, stop) -> kernel */
static PyObject *py_reduce_kernel(PyObject *self, PyObject *args) {
    (void)self;
    const char *kind;
    int r0, r1;
    if (!PyArg_ParseTuple(args, "sii", &kind, &r0, &r1)) return NULL;
    int k = !strcmp(kind, "sum")    ? SV_RED_SUM
            : !strcmp(kind, "mean") ? SV_RED_MEAN
            : !strcmp(kind, "max")  ? SV_RED_MAX
            : !strcmp(kind, "min")  ? SV_RED_MIN
            : !strcmp(kind, "prod") ? SV_RED_PROD
                                    : -1;
    if (k < 0)
        return sv_raise("reduce_kernel", "an unknown reduction", "sum, mean, max, min or prod",
                        kind, "pass one of those");
    if (r0 < 0 || r1 <= r0 || r1 >= SVX_MAXDIM) {
        char found[48];
        snprintf(found, sizeof found, "axes [%d, %d)", r0, r1);
        return sv_raise("reduce_kernel", "reduced axes out of range",
                        "0 <= first < stop < 8: axes before the last", found,
                        "reduce a group of middle axes");
    }
    redmid_self *r = PyMem_Malloc(sizeof *r);
    if (!r) return PyErr_NoMemory();
    r->kind = k;
    r->r0 = r0;
    r->r1 = r1;
    return make_capsule(run_redmid, r);
}

PyMethodDef sv_exec_kernel_methods[] = {
    {"conv_kernel", py_conv_kernel, METH_VARARGS,
     "conv_kernel(packed, activation, in_blocked, out_blocked, residual_first=False) -> an "
     "executor kernel"},
    {"conv_pair_kernel", py_conv_pair_kernel, METH_VARARGS,
     "conv_pair_kernel(packed1, activation1, packed2, activation2, in_blocked, out_blocked) "
     "-> an executor kernel: the second convolution on the first one's result, by bands"},
    {"conv_mean_kernel", py_conv_mean_kernel, METH_VARARGS,
     "conv_mean_kernel(packed, activation, in_blocked) -> an executor kernel: the "
     "convolution's mean over each image's pixels, by bands"},
    {"reorder_kernel", py_reorder_kernel, METH_VARARGS,
     "reorder_kernel(to_blocked, channels) -> an executor kernel"},
    {"pool_kernel", py_pool_kernel, METH_VARARGS,
     "pool_kernel(kind, (kh, kw), (sh, sw), (pt, pb, pl, pr)) -> an executor kernel"},
    {"global_pool_kernel", py_global_pool_kernel, METH_VARARGS,
     "global_pool_kernel(blocked, channels) -> an executor kernel"},
    {"chain_kernel", py_chain_kernel, METH_O,
     "chain_kernel(programs) -> an executor kernel running one tile program per result"},
    {"rowop_kernel", (PyCFunction)(void (*)(void))py_rowop_kernel, METH_VARARGS | METH_KEYWORDS,
     "rowop_kernel(kind, eps=0.0, scale=1.0, gamma=None, beta=None) -> an executor kernel"},
    {"arg_kernel", py_arg_kernel, METH_VARARGS,
     "arg_kernel(kind, axis) -> an executor kernel: argmax or argmin along the axis"},
    {"compare_kernel", py_compare_kernel, METH_O,
     "compare_kernel(kind) -> an executor kernel: an exact comparison of two int32/int64 "
     "tensors"},
    {"int_arith_kernel", py_int_arith_kernel, METH_O,
     "int_arith_kernel(kind) -> an executor kernel: add, sub, mul, maximum, minimum, floordiv "
     "or mod of two int32/int64 tensors, a cast, abs or neg of one, or where(condition, a, b) "
     "of a bool tensor and two int32/int64 ones, wrapping around in the result's type"},
    {"reduce_kernel", py_reduce_kernel, METH_VARARGS,
     "reduce_kernel(kind, first, stop) -> an executor kernel: kind ('sum', 'mean', 'max', "
     "'min', 'prod') over the axes [first, stop), the trailing axes kept; a sum or mean "
     "given a second tensor reduces their product"},
    {"scan_kernel", py_scan_kernel, METH_VARARGS,
     "scan_kernel(axis, exclusive, reverse) -> an executor kernel: cumsum along the axis of "
     "float32, float64, int32 or int64 (integers wrap around)"},
    {"int_matmul_kernel", py_int_matmul_kernel, METH_NOARGS,
     "int_matmul_kernel() -> an executor kernel: the matrix product of int32/int64 tensors "
     "[.., m, k] and [.., k, n] (views of the result's batch shape), added in 64 bits and "
     "wrapped into the int32/int64 result"},
    {"int_reduce_kernel", py_int_reduce_kernel, METH_VARARGS,
     "int_reduce_kernel(kind, first, stop) -> an executor kernel: kind ('sum', 'max', 'min', "
     "'prod') of int32/int64 over the axes [first, stop), exact, wrapping around in the "
     "result's type"},
    {"take_along_kernel", py_take_along_kernel, METH_VARARGS,
     "take_along_kernel(axis) -> an executor kernel: numpy.take_along_axis(x, indices, axis) "
     "with bounds checks"},
    {"argsort_kernel", py_argsort_kernel, METH_VARARGS,
     "argsort_kernel(axis, descending, first=0) -> an executor kernel: stable argsort along "
     "the axis (NaN last ascending, first descending); with first > 0 (at most 64) only the "
     "first `first` positions of each line are written"},
    {"cast_kernel", py_cast_kernel, METH_NOARGS,
     "cast_kernel() -> an executor kernel: its operand converted to the result's dtype "
     "(float32 or float64 of any number or bool, int32/int64 of an integer or bool)"},
    {"sizes_kernel", py_sizes_kernel, METH_NOARGS,
     "sizes_kernel() -> an executor kernel: the sizes of its operand as a vector (a scalar "
     "of a rank-1 operand's size), float32, float64, int32 or int64"},
    {"take_kernel", py_take_kernel, METH_VARARGS,
     "take_kernel(axis) -> an executor kernel: numpy.take(x, indices, axis) with bounds checks"},
    {"attention_kernel", (PyCFunction)(void (*)(void))py_attention_kernel,
     METH_VARARGS | METH_KEYWORDS, "attention_kernel(scale, causal=False) -> an executor kernel"},
    {NULL, NULL, 0, NULL}};
