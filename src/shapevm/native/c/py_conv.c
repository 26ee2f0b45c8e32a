/* Entry points of convolution and pooling: PackedConv (weights packed once), conv2d on
 * NCHW and blocked tensors, the reorders between them, max/average/global pooling.
 * Tensors are C-contiguous float32; everything is checked before any memory is read. */
#include "pyutil.h"
#include <stdatomic.h>
#include <stdio.h>

typedef struct {
    PyObject_HEAD sv_packed_conv p;
} PackedConv;

static void packed_conv_dealloc(PackedConv *self) {
    sv_packed_conv_free(&self->p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *pc_get(PackedConv *self, void *which) {
    const sv_conv_shape *s = &self->p.s;
    switch ((int)(intptr_t)which) {
    case 0: return PyLong_FromLongLong(s->cin);
    case 1: return PyLong_FromLongLong(s->cout);
    case 2: return Py_BuildValue("(LL)", (long long)s->kh, (long long)s->kw);
    case 3: return Py_BuildValue("(LL)", (long long)s->sh, (long long)s->sw);
    case 4:
        return Py_BuildValue("(LLLL)", (long long)s->pt, (long long)s->pb, (long long)s->pl,
                             (long long)s->pr);
    case 5: return Py_BuildValue("(LL)", (long long)s->dh, (long long)s->dw);
    case 6: return PyLong_FromLongLong(s->groups);
    case 7: return PyBool_FromLong(self->p.has_bias);
    case 8: return PyBool_FromLong(self->p.depthwise);
    default: {
        const sv_packed_conv *p = &self->p;
        int64_t floats = p->cbout > 0 ? p->woff[p->cbout - 1] : 0;
        if (p->cbout > 0)
            floats += (p->depthwise ? 1 : p->nblk[p->cbout - 1] * p->kc) * s->kh * s->kw * SV_NR;
        if (p->rows) floats += s->cout * (s->cin * s->kh * s->kw + 1);
        return PyLong_FromLongLong(4 * (floats + p->cbout * SV_CB));
    }
    }
}

#define PC_GET(name, i, doc) {name, (getter)pc_get, NULL, doc, (void *)(intptr_t)(i)}
static PyGetSetDef packed_conv_getset[] = {
    PC_GET("cin", 0, "input channels"),
    PC_GET("cout", 1, "output channels"),
    PC_GET("kernel", 2, "(kh, kw)"),
    PC_GET("stride", 3, "(sh, sw)"),
    PC_GET("padding", 4, "(top, bottom, left, right)"),
    PC_GET("dilation", 5, "(dh, dw)"),
    PC_GET("groups", 6, "channel groups"),
    PC_GET("has_bias", 7, "whether a bias was packed"),
    PC_GET("depthwise", 8, "whether it runs the depthwise kernel (groups == cin == cout)"),
    PC_GET("nbytes", 9, "bytes of packed weights and bias"),
    {NULL, NULL, NULL, NULL, NULL}};
#undef PC_GET

static PyObject *packed_conv_repr(PackedConv *self) {
    const sv_conv_shape *s = &self->p.s;
    char text[256];
    snprintf(text, sizeof text,
             "PackedConv(cin=%lld, cout=%lld, kernel=(%lld, %lld), stride=(%lld, %lld), "
             "padding=(%lld, %lld, %lld, %lld), dilation=(%lld, %lld), groups=%lld%s)",
             (long long)s->cin, (long long)s->cout, (long long)s->kh, (long long)s->kw,
             (long long)s->sh, (long long)s->sw, (long long)s->pt, (long long)s->pb,
             (long long)s->pl, (long long)s->pr, (long long)s->dh, (long long)s->dw,
             (long long)s->groups, self->p.has_bias ? ", bias" : "");
    return PyUnicode_FromString(text);
}

static PyTypeObject PackedConvType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shapevm.native.PackedConv",
    .tp_basicsize = sizeof(PackedConv),
    .tp_dealloc = (destructor)packed_conv_dealloc,
    .tp_repr = (reprfunc)packed_conv_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Weights of a 2-D convolution laid out once for the kernels "
              "(shapevm.native.pack_conv2d).",
    .tp_getset = packed_conv_getset,
};

int sv_conv_types(PyObject *module) {
    if (PyType_Ready(&PackedConvType) < 0) return -1;
    Py_INCREF(&PackedConvType);
    if (PyModule_AddObject(module, "PackedConv", (PyObject *)&PackedConvType) < 0) {
        Py_DECREF(&PackedConvType);
        return -1;
    }
    return 0;
}

/* ---- checks ---- */

static int64_t cblocks(int64_t c) { return (c + SV_CB - 1) / SV_CB; }

/* Whether the (C-contiguous) arrays share memory. */
static int shares_memory(PyArrayObject *a, PyArrayObject *b) {
    const char *a0 = PyArray_BYTES(a), *b0 = PyArray_BYTES(b);
    return PyArray_NBYTES(a) > 0 && PyArray_NBYTES(b) > 0 && a0 < b0 + PyArray_NBYTES(b) &&
           b0 < a0 + PyArray_NBYTES(a);
}

static void shape_text(char *buf, size_t size, int nd, const npy_intp *dims) {
    int n = snprintf(buf, size, "f32[");
    for (int i = 0; i < nd && n >= 0 && (size_t)n < size; i++)
        n += snprintf(buf + n, size - (size_t)n, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (n >= 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, "]");
}

/* A new array of `dims`, or `obj` checked to be a writable C-contiguous f32 array of
 * exactly those dims that does not share memory with `input`; a new reference. */
static PyArrayObject *output_arg(const char *kernel, PyObject *obj, int nd, npy_intp *dims,
                                 PyArrayObject *input) {
    char expected[160], found[256];
    shape_text(expected, sizeof expected, nd, dims);
    if (obj == NULL || obj == Py_None)
        return (PyArrayObject *)PyArray_SimpleNew(nd, dims, NPY_FLOAT32);
    strncat(expected, ", C-contiguous", sizeof expected - strlen(expected) - 1);
    PyArrayObject *out =
        sv_arg_f32(kernel, "out", obj, nd, nd, SV_ARG_WRITABLE | SV_ARG_CONTIG, expected);
    if (!out) return NULL;
    if (!PyArray_CompareLists(PyArray_DIMS(out), dims, nd)) {
        sv_describe(obj, found, sizeof found);
        sv_raise(kernel, "out has the wrong shape", expected, found,
                 "allocate out with the shape of the result (or pass out=None)");
        return NULL;
    }
    if (input && shares_memory(out, input)) {
        sv_raise(kernel, "out overlaps the input", "out and the input in separate memory",
                 "shared memory", "write the result to a new array");
        return NULL;
    }
    Py_INCREF(out);
    return out;
}

/* The residual: None, or a C-contiguous f32 array of out's shape that is out itself or
 * shares no memory with it. */
static int residual_arg(const char *kernel, PyObject *obj, PyArrayObject *out,
                        PyArrayObject **res) {
    *res = NULL;
    if (obj == NULL || obj == Py_None) return 0;
    char expected[200], found[256];
    shape_text(expected, sizeof expected, PyArray_NDIM(out), PyArray_DIMS(out));
    strncat(expected, ", C-contiguous (the output's shape)",
            sizeof expected - strlen(expected) - 1);
    PyArrayObject *r = sv_arg_f32(kernel, "residual", obj, PyArray_NDIM(out),
                                  PyArray_NDIM(out), SV_ARG_CONTIG, expected);
    if (!r) return -1;
    if (!PyArray_CompareLists(PyArray_DIMS(r), PyArray_DIMS(out), PyArray_NDIM(out))) {
        sv_describe(obj, found, sizeof found);
        sv_raise(kernel, "residual does not match the output", expected, found,
                 "pass a residual of the output's shape");
        return -1;
    }
    if (PyArray_DATA(r) != PyArray_DATA(out) && shares_memory(r, out)) {
        sv_raise(kernel, "residual partly overlaps out", "residual is out, or separate memory",
                 "partly shared memory", "pass out itself as the residual, or a copy");
        return -1;
    }
    *res = r;
    return 0;
}

static int int_range(const char *kernel, const char *name, const long long *v, int n,
                     long long lo, const char *fix) {
    for (int i = 0; i < n; i++)
        if (v[i] < lo) {
            char expected[96], found[160];
            snprintf(expected, sizeof expected, "%s: %d integers, each >= %lld", name, n, lo);
            int k = snprintf(found, sizeof found, "%s=(", name);
            for (int m = 0; m < n && k > 0 && (size_t)k < sizeof found; m++)
                k += snprintf(found + k, sizeof found - (size_t)k, "%s%lld", m ? ", " : "", v[m]);
            if (k > 0 && (size_t)k < sizeof found) snprintf(found + k, sizeof found - (size_t)k, ")");
            char what[96];
            snprintf(what, sizeof what, "%s out of range", name);
            sv_raise(kernel, what, expected, found, fix);
            return -1;
        }
    return 0;
}

/* ---- packing ---- */

/* pack_conv2d(w, bias, stride, padding, dilation, groups) */
static PyObject *py_pack_conv2d(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"w", "bias", "stride", "padding", "dilation", "groups", NULL};
    PyObject *wobj, *bobj = Py_None;
    long long st[2] = {1, 1}, pad[4] = {0, 0, 0, 0}, dil[2] = {1, 1}, groups = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O(LL)(LLLL)(LL)L", names, &wobj, &bobj, &st[0],
                                     &st[1], &pad[0], &pad[1], &pad[2], &pad[3], &dil[0],
                                     &dil[1], &groups))
        return NULL;
    const char *k = "pack_conv2d";
    const char *exp_w = "w: f32[cout, cin/groups, kh, kw] (PyTorch and ONNX layout)";
    PyArrayObject *w = sv_arg_f32(k, "w", wobj, 4, 4, 0, exp_w);
    if (!w) return NULL;
    if (int_range(k, "stride", st, 2, 1, "pass strides of at least 1") < 0 ||
        int_range(k, "padding", pad, 4, 0, "pass paddings (top, bottom, left, right) >= 0") < 0 ||
        int_range(k, "dilation", dil, 2, 1, "pass dilations of at least 1") < 0 ||
        int_range(k, "groups", &groups, 1, 1, "pass groups >= 1") < 0)
        return NULL;
    char found[256], expected[160];
    sv_describe(wobj, found, sizeof found);
    for (int i = 0; i < 4; i++)
        if (PyArray_DIM(w, i) == 0)
            return sv_raise(k, "w has an empty dimension", exp_w, found,
                            "a convolution needs at least one channel and one tap");
    sv_conv_shape s = {.cout = PyArray_DIM(w, 0), .cin = PyArray_DIM(w, 1) * groups,
                       .kh = PyArray_DIM(w, 2), .kw = PyArray_DIM(w, 3), .sh = st[0],
                       .sw = st[1], .dh = dil[0], .dw = dil[1], .pt = pad[0], .pb = pad[1],
                       .pl = pad[2], .pr = pad[3], .groups = groups};
    if (s.cout % groups != 0) {
        snprintf(expected, sizeof expected, "w.shape[0] divisible by groups=%lld", groups);
        return sv_raise(k, "output channels do not split into the groups", expected, found,
                        "use a number of groups that divides the output channels");
    }
    PyArrayObject *b = NULL;
    if (bobj != Py_None) {
        snprintf(expected, sizeof expected, "bias: f32[%lld]", (long long)s.cout);
        b = sv_arg_f32(k, "bias", bobj, 1, 1, 0, expected);
        if (!b) return NULL;
        if (PyArray_DIM(b, 0) != s.cout) {
            sv_describe(bobj, found, sizeof found);
            return sv_raise(k, "bias does not match the output channels", expected, found,
                            "pass one bias value per output channel");
        }
    }
    PackedConv *p = PyObject_New(PackedConv, &PackedConvType);
    if (!p) return NULL;
    memset(&p->p, 0, sizeof p->p);
    int64_t ws[4];
    for (int i = 0; i < 4; i++) ws[i] = PyArray_STRIDE(w, i) / 4;
    const float *bias = b ? PyArray_DATA(b) : NULL;
    int64_t bstride = b ? PyArray_STRIDE(b, 0) / 4 : 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = sv_pack_conv(&p->p, &s, PyArray_DATA(w), ws, bias, bstride);
    Py_END_ALLOW_THREADS if (rc != 0) {
        Py_DECREF(p);
        return PyErr_NoMemory();
    }
    return (PyObject *)p;
}

const sv_packed_conv *sv_packed_conv_of(PyObject *obj) {
    return PyObject_TypeCheck(obj, &PackedConvType) ? &((PackedConv *)obj)->p : NULL;
}

/* ---- convolution ---- */

static PackedConv *packed_arg(const char *kernel, PyObject *obj) {
    if (PyObject_TypeCheck(obj, &PackedConvType)) return (PackedConv *)obj;
    char found[128];
    sv_describe(obj, found, sizeof found);
    sv_raise(kernel, "packed must be a PackedConv", "shapevm.native.pack_conv2d(w, ...)", found,
             "pack the weights once with pack_conv2d and pass the result");
    return NULL;
}

/* conv2d(x, packed, out, residual, activation, threads, residual_first) -> NCHW,
 * conv2d_blocked(...) -> blocked; x is NCHW (rank 4) or blocked (rank 5) */
static PyObject *conv_entry(PyObject *args, PyObject *kw, int out_blocked) {
    static char *names[] = {"x",       "packed",         "out", "residual", "activation",
                            "threads", "residual_first", NULL};
    PyObject *xobj, *pobj, *oobj = Py_None, *robj = Py_None, *aobj = Py_None;
    int threads = 0, res_first = 0;
    const char *k = out_blocked ? "conv2d_blocked" : "conv2d";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OOOip", names, &xobj, &pobj, &oobj, &robj,
                                     &aobj, &threads, &res_first))
        return NULL;
    PackedConv *pc = packed_arg(k, pobj);
    if (!pc) return NULL;
    const sv_packed_conv *p = &pc->p;
    const sv_conv_shape *s = &p->s;
    char expected[200], found[256];
    snprintf(expected, sizeof expected,
             "x: f32[N, %lld, H, W] (NCHW) or f32[N, %lld, H, W, 16] (blocked), C-contiguous",
             (long long)s->cin, (long long)p->cbin);
    PyArrayObject *x = sv_arg_f32(k, "x", xobj, 4, 5, SV_ARG_CONTIG, expected);
    if (!x) return NULL;
    int in_blocked = PyArray_NDIM(x) == 5;
    sv_describe(xobj, found, sizeof found);
    if (PyArray_DIM(x, 1) != (in_blocked ? p->cbin : s->cin) ||
        (in_blocked && PyArray_DIM(x, 4) != SV_CB))
        return sv_raise(k, "x does not match the packed weights' input channels", expected,
                        found, "the weights were packed for this many input channels");
    int64_t n = PyArray_DIM(x, 0), h = PyArray_DIM(x, 2), w = PyArray_DIM(x, 3), oh, ow;
    if (sv_conv_out_hw(s, h, w, &oh, &ow) != 0) {
        snprintf(expected, sizeof expected,
                 "H + %lld >= %lld and W + %lld >= %lld (the dilated window fits the padded "
                 "input)",
                 (long long)(s->pt + s->pb), (long long)(s->dh * (s->kh - 1) + 1),
                 (long long)(s->pl + s->pr), (long long)(s->dw * (s->kw - 1) + 1));
        return sv_raise(k, "the window is larger than the padded input", expected, found,
                        "pad the input, or use a smaller kernel or dilation");
    }
    int act;
    float slope;
    if (sv_act_parse(k, aobj, &act, &slope) < 0) return NULL;
    npy_intp dims[5] = {n, out_blocked ? p->cbout : s->cout, oh, ow, SV_CB};
    PyArrayObject *out = output_arg(k, oobj, out_blocked ? 5 : 4, dims, x), *res;
    if (!out) return NULL;
    if (residual_arg(k, robj, out, &res) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    const float *xd = PyArray_DATA(x), *rd = res ? PyArray_DATA(res) : NULL;
    float *yd = PyArray_DATA(out);
    int xl = in_blocked ? SV_LAYOUT_BLOCKED : SV_LAYOUT_NCHW;
    int yl = out_blocked ? SV_LAYOUT_BLOCKED : SV_LAYOUT_NCHW, rc;
    Py_BEGIN_ALLOW_THREADS rc =
        sv_conv2d(p, n, h, w, xd, xl, yd, yl, rd, act, slope, res_first, threads);
    Py_END_ALLOW_THREADS if (rc != 0) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    return (PyObject *)out;
}

static PyObject *py_conv2d(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    return conv_entry(args, kw, 0);
}

static PyObject *py_conv2d_blocked(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    return conv_entry(args, kw, 1);
}

/* to_blocked(x, out=None, threads=0): NCHW -> [N, ceil(C/16), H, W, 16] */
static PyObject *py_to_blocked(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"x", "out", "threads", NULL};
    PyObject *xobj, *oobj = Py_None;
    int threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Oi", names, &xobj, &oobj, &threads))
        return NULL;
    PyArrayObject *x = sv_arg_f32("to_blocked", "x", xobj, 4, 4, SV_ARG_CONTIG,
                                  "x: f32[N, C, H, W] C-contiguous (NCHW)");
    if (!x) return NULL;
    npy_intp *d = PyArray_DIMS(x);
    npy_intp dims[5] = {d[0], cblocks(d[1]), d[2], d[3], SV_CB};
    PyArrayObject *out = output_arg("to_blocked", oobj, 5, dims, x);
    if (!out) return NULL;
    const float *xd = PyArray_DATA(x);
    float *yd = PyArray_DATA(out);
    Py_BEGIN_ALLOW_THREADS sv_nchw_to_blocked(d[0], d[1], d[2], d[3], xd, yd, threads);
    Py_END_ALLOW_THREADS return (PyObject *)out;
}

/* from_blocked(x, channels, out=None, threads=0): [N, CB, H, W, 16] -> NCHW */
static PyObject *py_from_blocked(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"x", "channels", "out", "threads", NULL};
    PyObject *xobj, *oobj = Py_None;
    long long c;
    int threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OL|Oi", names, &xobj, &c, &oobj, &threads))
        return NULL;
    const char *k = "from_blocked";
    char expected[160], found[256];
    snprintf(expected, sizeof expected, "x: f32[N, %lld, H, W, 16] C-contiguous (blocked)",
             c >= 0 ? (long long)cblocks(c) : 0LL);
    PyArrayObject *x = sv_arg_f32(k, "x", xobj, 5, 5, SV_ARG_CONTIG, expected);
    if (!x) return NULL;
    npy_intp *d = PyArray_DIMS(x);
    if (c < 1 || cblocks(c) != d[1] || d[4] != SV_CB) {
        sv_describe(xobj, found, sizeof found);
        size_t len = strlen(found);
        snprintf(found + len, sizeof found - len, ", channels=%lld", c);
        return sv_raise(k, "channels do not match the blocks of x", expected, found,
                        "pass the channel count of the NCHW tensor x was made from");
    }
    npy_intp dims[4] = {d[0], (npy_intp)c, d[2], d[3]};
    PyArrayObject *out = output_arg(k, oobj, 4, dims, x);
    if (!out) return NULL;
    const float *xd = PyArray_DATA(x);
    float *yd = PyArray_DATA(out);
    Py_BEGIN_ALLOW_THREADS sv_blocked_to_nchw(d[0], c, d[2], d[3], xd, yd, threads);
    Py_END_ALLOW_THREADS return (PyObject *)out;
}

/* ---- pooling ---- */

static const char *const pool_kinds[3] = {"max", "avg", "avg_exclude_pad"};

/* pool2d(x, kind, kernel, stride, padding, out=None, threads=0); x [..., H, W] rank 3/4 */
static PyObject *py_pool2d(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"x", "kind", "kernel", "stride", "padding", "out", "threads", NULL};
    PyObject *xobj, *oobj = Py_None;
    const char *kind;
    long long ker[2], st[2], pad[4];
    int threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Os(LL)(LL)(LLLL)|Oi", names, &xobj, &kind,
                                     &ker[0], &ker[1], &st[0], &st[1], &pad[0], &pad[1],
                                     &pad[2], &pad[3], &oobj, &threads))
        return NULL;
    const char *k = "pool2d";
    sv_pool_shape s = {.kind = -1};
    for (int i = 0; i < 3; i++)
        if (strcmp(kind, pool_kinds[i]) == 0) s.kind = i;
    if (s.kind < 0)
        return sv_raise(k, "unknown pooling", "max, avg or avg_exclude_pad", kind,
                        "use one of the expected names");
    if (int_range(k, "kernel", ker, 2, 1, "pass window sizes of at least 1") < 0 ||
        int_range(k, "stride", st, 2, 1, "pass strides of at least 1") < 0 ||
        int_range(k, "padding", pad, 4, 0, "pass paddings (top, bottom, left, right) >= 0") < 0)
        return NULL;
    char expected[200], found[256];
    for (int i = 0; i < 4; i++)
        if (pad[i] > ker[i / 2] / 2) {
            snprintf(expected, sizeof expected, "each padding <= kernel // 2 on its axis");
            snprintf(found, sizeof found, "kernel=(%lld, %lld), padding=(%lld, %lld, %lld, %lld)",
                     ker[0], ker[1], pad[0], pad[1], pad[2], pad[3]);
            return sv_raise(k, "padding is more than half the kernel", expected, found,
                            "a window must not lie in the padding only; pad explicitly");
        }
    s.kh = ker[0], s.kw = ker[1], s.sh = st[0], s.sw = st[1];
    s.pt = pad[0], s.pb = pad[1], s.pl = pad[2], s.pr = pad[3];
    PyArrayObject *x = sv_arg_f32(k, "x", xobj, 3, 4, SV_ARG_CONTIG,
                                  "x: f32[N, C, H, W] or f32[C, H, W], C-contiguous");
    if (!x) return NULL;
    int nd = PyArray_NDIM(x);
    int64_t h = PyArray_DIM(x, nd - 2), w = PyArray_DIM(x, nd - 1), oh, ow;
    if (h == 0 || w == 0) {
        sv_describe(xobj, found, sizeof found);
        return sv_raise(k, "x has no pixels to pool", "H >= 1 and W >= 1", found,
                        "pool a non-empty image");
    }
    if (sv_pool_out_hw(&s, h, w, &oh, &ow) != 0) {
        sv_describe(xobj, found, sizeof found);
        snprintf(expected, sizeof expected, "H + %lld >= %lld and W + %lld >= %lld",
                 (long long)(s.pt + s.pb), (long long)s.kh, (long long)(s.pl + s.pr),
                 (long long)s.kw);
        return sv_raise(k, "the window is larger than the padded input", expected, found,
                        "pad the input or use a smaller window");
    }
    npy_intp dims[4];
    for (int i = 0; i < nd - 2; i++) dims[i] = PyArray_DIM(x, i);
    dims[nd - 2] = oh;
    dims[nd - 1] = ow;
    PyArrayObject *out = output_arg(k, oobj, nd, dims, x);
    if (!out) return NULL;
    int64_t planes = PyArray_SIZE(x) / (h * w);
    const float *xd = PyArray_DATA(x);
    float *yd = PyArray_DATA(out);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = sv_pool2d_nchw(&s, planes, h, w, xd, yd, threads);
    Py_END_ALLOW_THREADS if (rc != 0) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    return (PyObject *)out;
}

/* global_avg_pool(x, out=None, threads=0, channels=0): NCHW x -> [N, C] (or into an out of
 * [N, C, 1, 1]); with channels > 0, x is blocked [N, CB, H, W, 16] */
static PyObject *py_global_avg_pool(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"x", "out", "threads", "channels", NULL};
    PyObject *xobj, *oobj = Py_None;
    int threads = 0;
    long long c = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OiL", names, &xobj, &oobj, &threads, &c))
        return NULL;
    const char *k = "global_avg_pool";
    int blocked = c > 0;
    char expected[160], found[256];
    if (blocked)
        snprintf(expected, sizeof expected, "x: f32[N, %lld, H, W, 16] C-contiguous (blocked)",
                 (long long)cblocks(c));
    else
        snprintf(expected, sizeof expected, "x: f32[N, C, H, W] C-contiguous (NCHW)");
    PyArrayObject *x = sv_arg_f32(k, "x", xobj, blocked ? 5 : 4, blocked ? 5 : 4,
                                  SV_ARG_CONTIG, expected);
    if (!x) return NULL;
    npy_intp *d = PyArray_DIMS(x);
    if (blocked && (d[1] != cblocks(c) || d[4] != SV_CB)) {
        sv_describe(xobj, found, sizeof found);
        return sv_raise(k, "channels do not match the blocks of x", expected, found,
                        "pass the channel count of the NCHW tensor x was made from");
    }
    if (d[2] * d[3] == 0) {
        sv_describe(xobj, found, sizeof found);
        return sv_raise(k, "x has no pixels to average", "H >= 1 and W >= 1", found,
                        "pool a non-empty image");
    }
    npy_intp dims[4] = {d[0], blocked ? (npy_intp)c : d[1], 1, 1};
    int ond = oobj != Py_None && PyArray_Check(oobj) && PyArray_NDIM((PyArrayObject *)oobj) == 4
                  ? 4
                  : 2; /* out may keep the pooled axes: [N, C, 1, 1] */
    PyArrayObject *out = output_arg(k, oobj, ond, dims, x);
    if (!out) return NULL;
    const float *xd = PyArray_DATA(x);
    float *yd = PyArray_DATA(out);
    Py_BEGIN_ALLOW_THREADS if (blocked)
        sv_global_avg_pool_blocked(d[0], c, d[2] * d[3], xd, yd, threads);
    else sv_global_avg_pool_nchw(d[0] * d[1], d[2] * d[3], xd, yd, threads);
    Py_END_ALLOW_THREADS return (PyObject *)out;
}

#define SV_KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS
/* _set_conv_winograd(on) -> whether it was on: 3x3 convolutions of stride 1 by Winograd's
 * F(2x2, 3x3) (conv_wino.c) or directly; for the tests and benchmarks that compare both. */
static PyObject *py_set_conv_winograd(PyObject *self, PyObject *arg) {
    (void)self;
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    int was = sv_winograd_on();
    atomic_store(&sv_conv_winograd, on);
    return PyBool_FromLong(was);
}

PyMethodDef sv_conv_methods[] = {
    {"_set_conv_winograd", py_set_conv_winograd, METH_O,
     "_set_conv_winograd(on) -> previous: Winograd for 3x3 convolutions (tests, benchmarks)"},
    {"pack_conv2d", SV_KW(py_pack_conv2d),
     "pack_conv2d(w, bias=None, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), "
     "groups=1) -> PackedConv"},
    {"conv2d", SV_KW(py_conv2d),
     "conv2d(x, packed, out=None, residual=None, activation='none', threads=0, "
     "residual_first=False) -> NCHW"},
    {"conv2d_blocked", SV_KW(py_conv2d_blocked),
     "conv2d_blocked(x, packed, out=None, residual=None, activation='none', threads=0, "
     "residual_first=False) -> "
     "blocked"},
    {"to_blocked", SV_KW(py_to_blocked), "to_blocked(x, out=None, threads=0)"},
    {"from_blocked", SV_KW(py_from_blocked), "from_blocked(x, channels, out=None, threads=0)"},
    {"pool2d", SV_KW(py_pool2d),
     "pool2d(x, kind, kernel, stride, padding, out=None, threads=0): max / avg pooling"},
    {"global_avg_pool", SV_KW(py_global_avg_pool),
     "global_avg_pool(x, out=None, threads=0, channels=0) -> [N, C]"},
    {NULL, NULL, 0, NULL}};
#undef SV_KW
