/* Entry points of the row operations and attention: layer_norm / rms_norm, softmax /
 * log_softmax, attention.  Each checks every operand (dtype, rank, shape against x or q,
 * broadcasting, unit stride along rows, aliasing) before it touches memory. */
#include "pyutil.h"
#include <math.h>
#include <stdio.h>

/* Whether a and b are the same elements in the same order (an allowed alias). */
static int same_elements(PyArrayObject *a, PyArrayObject *b) {
    if (PyArray_DATA(a) != PyArray_DATA(b) || PyArray_NDIM(a) != PyArray_NDIM(b)) return 0;
    for (int i = 0; i < PyArray_NDIM(a); i++)
        if (PyArray_DIM(a, i) != PyArray_DIM(b, i) ||
            (PyArray_DIM(a, i) > 1 && PyArray_STRIDE(a, i) != PyArray_STRIDE(b, i)))
            return 0;
    return 1;
}

/* An output must not overlap an input unless it is the same elements. */
static int check_alias(const char *kernel, const char *oname, PyArrayObject *out,
                       const char *iname, PyArrayObject *in) {
    if (!out || !in || !sv_overlaps(out, in) || same_elements(out, in)) return 0;
    char what[160], exp[200];
    snprintf(what, sizeof what, "%s overlaps %s", oname, iname);
    snprintf(exp, sizeof exp, "%s in separate memory from %s, or the very same array", oname,
             iname);
    sv_raise(kernel, what, exp, "partly shared memory", "write the result to a new array");
    return -1;
}

/* Bind obj as rows of `n` floats indexed by the leading dims `lead[nd]` (NumPy broadcasting
 * when `exact` is 0; the very shape otherwise).  Sets *data and strides (floats). */
static PyArrayObject *bind_rows(const char *kernel, const char *name, PyObject *obj, int nd,
                                const npy_intp *lead, int64_t n, int flags, int exact,
                                const char *expected, int64_t *strides) {
    PyArrayObject *a = sv_arg_f32(kernel, name, obj, 1, nd + 1, flags | SV_ARG_INNER_UNIT,
                                  expected);
    if (!a) return NULL;
    int and_ = PyArray_NDIM(a);
    char found[256], what[200];
    int ok = PyArray_DIM(a, and_ - 1) == n && (!exact || and_ == nd + 1);
    for (int i = 0; i < nd && ok; i++) {
        int ai = i - (nd - (and_ - 1));
        npy_intp d = ai >= 0 ? PyArray_DIM(a, ai) : 1;
        if (d != lead[i] && (exact || d != 1)) ok = 0;
        strides[i] = ai >= 0 && d != 1 ? PyArray_STRIDE(a, ai) / 4 : 0;
    }
    if (!ok) {
        sv_describe(obj, found, sizeof found);
        snprintf(what, sizeof what, "%s %s", name,
                 exact ? "does not have the input's shape" : "does not broadcast to the input");
        sv_raise(kernel, what, expected, found,
                 exact ? "allocate it with the input's shape" : "reshape it to broadcast");
        return NULL;
    }
    return a;
}

static PyArrayObject *vector_arg(const char *kernel, const char *name, PyObject *obj,
                                 int64_t n) {
    char exp[96], found[256], what[160];
    snprintf(exp, sizeof exp, "%s: f32[%lld] (unit stride)", name, (long long)n);
    PyArrayObject *a = sv_arg_f32(kernel, name, obj, 1, 1, SV_ARG_OPTIONAL | SV_ARG_INNER_UNIT,
                                  exp);
    if (a && PyArray_DIM(a, 0) != n) {
        sv_describe(obj, found, sizeof found);
        snprintf(what, sizeof what, "%s does not match the rows", name);
        sv_raise(kernel, what, exp, found, "pass one value per element of a row");
        return NULL;
    }
    return a;
}

/* x and out of a row op: x: f32[..., n]; out (or a new array) of x's shape. */
static PyArrayObject *rows_in_out(const char *kernel, PyObject *xobj, PyObject *oobj,
                                  sv_rowop *op, PyArrayObject **xp) {
    char exp[160];
    snprintf(exp, sizeof exp, "x: f32[..., n] with at most %d leading dims, unit stride "
             "along the last axis", SV_ROW_MAX_DIMS);
    PyArrayObject *x = sv_arg_f32(kernel, "x", xobj, 1, SV_ROW_MAX_DIMS + 1, SV_ARG_INNER_UNIT,
                                  exp);
    if (!x) return NULL;
    int nd = PyArray_NDIM(x) - 1;
    op->nd = nd;
    op->n = PyArray_DIM(x, nd);
    for (int i = 0; i < nd; i++) {
        op->lead[i] = PyArray_DIM(x, i);
        op->sx[i] = PyArray_DIM(x, i) != 1 ? PyArray_STRIDE(x, i) / 4 : 0;
    }
    op->x = PyArray_DATA(x);
    *xp = x;
    PyArrayObject *out;
    if (oobj == Py_None) {
        out = (PyArrayObject *)PyArray_SimpleNew(nd + 1, PyArray_DIMS(x), NPY_FLOAT32);
        if (!out) return NULL;
    } else {
        out = bind_rows(kernel, "out", oobj, nd, PyArray_DIMS(x), op->n, SV_ARG_WRITABLE, 1,
                        "out: f32 of x's shape, unit stride along the last axis", op->sy);
        if (!out || check_alias(kernel, "out", out, "x", x) < 0) return NULL;
        Py_INCREF(out);
    }
    op->y = PyArray_DATA(out);
    if (oobj == Py_None)
        for (int i = 0; i < nd; i++)
            op->sy[i] = PyArray_DIM(out, i) != 1 ? PyArray_STRIDE(out, i) / 4 : 0;
    return out;
}

/* layer_norm / rms_norm(x, gamma, beta, eps, residual, out, sum_out, threads, rms) */
static PyObject *py_norm(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"x", "gamma", "beta", "eps", "residual", "out", "sum_out",
                            "threads", "rms", NULL};
    PyObject *xobj, *gobj = Py_None, *bobj = Py_None, *robj = Py_None, *oobj = Py_None,
                    *hobj = Py_None;
    float eps = 1e-5f;
    int threads = 0, rms = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOfOOOip", names, &xobj, &gobj, &bobj, &eps,
                                     &robj, &oobj, &hobj, &threads, &rms))
        return NULL;
    const char *kernel = rms ? "rms_norm" : "layer_norm";
    sv_rowop op = {.kind = rms ? SV_ROW_RMS_NORM : SV_ROW_LAYER_NORM, .eps = eps, .scale = 1};
    if (!(eps >= 0.0f)) {
        char found[64];
        snprintf(found, sizeof found, "eps=%g", (double)eps);
        return sv_raise(kernel, "eps must be a non-negative number", "eps >= 0", found,
                        "pass a small positive eps such as 1e-5");
    }
    PyArrayObject *x, *out = rows_in_out(kernel, xobj, oobj, &op, &x);
    if (!out) return NULL;
    PyArrayObject *g = vector_arg(kernel, "gamma", gobj, op.n), *b = NULL, *r = NULL, *h = NULL;
    if (!g && PyErr_Occurred()) goto fail;
    b = vector_arg(kernel, "beta", bobj, op.n);
    if (!b && PyErr_Occurred()) goto fail;
    if (robj != Py_None) {
        r = bind_rows(kernel, "residual", robj, op.nd, PyArray_DIMS(x), op.n, 0, 0,
                      "residual: f32 broadcasting to x's shape, unit stride along the last axis",
                      op.sr);
        if (!r || check_alias(kernel, "out", out, "residual", r) < 0) goto fail;
        op.r = PyArray_DATA(r);
    }
    if (hobj != Py_None) {
        if (!r) {
            sv_raise(kernel, "sum_out needs a residual", "residual given with sum_out",
                     "sum_out without residual", "pass residual=..., or drop sum_out");
            goto fail;
        }
        h = bind_rows(kernel, "sum_out", hobj, op.nd, PyArray_DIMS(x), op.n, SV_ARG_WRITABLE, 1,
                      "sum_out: f32 of x's shape, unit stride along the last axis", op.sh);
        if (!h || check_alias(kernel, "sum_out", h, "x", x) < 0 ||
            check_alias(kernel, "sum_out", h, "residual", r) < 0 ||
            check_alias(kernel, "sum_out", h, "out", out) < 0)
            goto fail;
        op.h = PyArray_DATA(h);
    }
    op.gamma = g ? PyArray_DATA(g) : NULL;
    op.beta = b ? PyArray_DATA(b) : NULL;
    if (PyArray_SIZE(out) == 0) return (PyObject *)out;
    Py_BEGIN_ALLOW_THREADS sv_rowop_run(&op, threads < 0 ? 1 : threads);
    Py_END_ALLOW_THREADS return (PyObject *)out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* softmax(x, scale, mask, out, threads, log) */
static PyObject *py_softmax(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"x", "scale", "mask", "out", "threads", "log", NULL};
    PyObject *xobj, *mobj = Py_None, *oobj = Py_None;
    float scale = 1.0f;
    int threads = 0, log = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|fOOip", names, &xobj, &scale, &mobj, &oobj,
                                     &threads, &log))
        return NULL;
    const char *kernel = log ? "log_softmax" : "softmax";
    sv_rowop op = {.kind = log ? SV_ROW_LOG_SOFTMAX : SV_ROW_SOFTMAX, .scale = scale};
    PyArrayObject *x, *out = rows_in_out(kernel, xobj, oobj, &op, &x);
    if (!out) return NULL;
    if (mobj != Py_None) {
        PyArrayObject *m = bind_rows(
            kernel, "mask", mobj, op.nd, PyArray_DIMS(x), op.n, 0, 0,
            "mask: f32 broadcasting to x's shape, unit stride along the last axis", op.sr);
        if (!m || check_alias(kernel, "out", out, "mask", m) < 0) {
            Py_DECREF(out);
            return NULL;
        }
        op.r = PyArray_DATA(m);
    }
    if (PyArray_SIZE(out) == 0) return (PyObject *)out;
    Py_BEGIN_ALLOW_THREADS sv_rowop_run(&op, threads < 0 ? 1 : threads);
    Py_END_ALLOW_THREADS return (PyObject *)out;
}

/* Strides (floats) of a's batch dims (all but the last `inner`) against the broadcast
 * batch shape batch[nd]; 0 where a broadcasts.  Returns 0 when a does not broadcast. */
static int batch_strides(PyArrayObject *a, int inner, int nd, const npy_intp *batch,
                         int64_t *strides) {
    int an = PyArray_NDIM(a) - inner;
    for (int i = 0; i < nd; i++) {
        int ai = i - (nd - an);
        npy_intp d = ai >= 0 ? PyArray_DIM(a, ai) : 1;
        if (d != batch[i] && d != 1) return 0;
        strides[i] = ai >= 0 && d != 1 ? PyArray_STRIDE(a, ai) / 4 : 0;
    }
    return 1;
}

/* The broadcast batch shape of q, k, v into batch[]; -1 when they do not broadcast. */
static int broadcast_batch(PyArrayObject **ops, int nops, npy_intp *batch) {
    int nd = 0;
    for (int o = 0; o < nops; o++)
        if (PyArray_NDIM(ops[o]) - 2 > nd) nd = PyArray_NDIM(ops[o]) - 2;
    for (int i = 0; i < nd; i++) {
        batch[i] = 1;
        for (int o = 0; o < nops; o++) {
            int ai = i - (nd - (PyArray_NDIM(ops[o]) - 2));
            npy_intp d = ai >= 0 ? PyArray_DIM(ops[o], ai) : 1;
            if (d == batch[i] || d == 1) continue;
            if (batch[i] != 1) return -1;
            batch[i] = d;
        }
    }
    return nd;
}

static int64_t row_stride(PyArrayObject *a) {
    int r = PyArray_NDIM(a) - 2;
    return PyArray_DIM(a, r) > 1 ? PyArray_STRIDE(a, r) / 4 : 0;
}

/* attention(q, k, v, scale=None, mask=None, causal=False, out=None, threads=0) */
static PyObject *py_attention(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"q", "k", "v", "scale", "mask", "causal", "out", "threads", NULL};
    PyObject *qobj, *kobj, *vobj, *sobj = Py_None, *mobj = Py_None, *oobj = Py_None;
    int causal = 0, threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|OOpOi", names, &qobj, &kobj, &vobj, &sobj,
                                     &mobj, &causal, &oobj, &threads))
        return NULL;
    const char *K = "attention";
    char exp[200], found[800], fq[200], fk[200], fv[200];
    snprintf(exp, sizeof exp, "q: f32[..., s_q, d], k: f32[..., s_k, d], v: f32[..., s_k, d_v] "
             "with at most %d broadcasting batch dims, unit stride along the last axis",
             SV_ATT_MAX_DIMS);
    int fl = SV_ARG_INNER_UNIT;
    PyArrayObject *ops[4];
    ops[0] = sv_arg_f32(K, "q", qobj, 2, SV_ATT_MAX_DIMS + 2, fl, exp);
    if (!ops[0]) return NULL;
    ops[1] = sv_arg_f32(K, "k", kobj, 2, SV_ATT_MAX_DIMS + 2, fl, exp);
    if (!ops[1]) return NULL;
    ops[2] = sv_arg_f32(K, "v", vobj, 2, SV_ATT_MAX_DIMS + 2, fl, exp);
    if (!ops[2]) return NULL;
    PyArrayObject *q = ops[0], *k = ops[1], *v = ops[2];
    sv_describe(qobj, fq, sizeof fq);
    sv_describe(kobj, fk, sizeof fk);
    sv_describe(vobj, fv, sizeof fv);
    snprintf(found, sizeof found, "q: %s, k: %s, v: %s", fq, fk, fv);
    int nq = PyArray_NDIM(q), nk = PyArray_NDIM(k), nv = PyArray_NDIM(v);
    sv_attention a = {.sq = PyArray_DIM(q, nq - 2), .d = PyArray_DIM(q, nq - 1),
                      .sk = PyArray_DIM(k, nk - 2), .dv = PyArray_DIM(v, nv - 1),
                      .causal = causal};
    if (PyArray_DIM(k, nk - 1) != a.d)
        return sv_raise(K, "q and k have different head sizes", "k.shape[-1] == q.shape[-1]",
                        found, "pass k with the same last dimension as q");
    if (PyArray_DIM(v, nv - 2) != a.sk)
        return sv_raise(K, "k and v have different key counts", "v.shape[-2] == k.shape[-2]",
                        found, "pass one row of v per row of k");
    npy_intp dims[SV_ATT_MAX_DIMS + 2];
    int nd = broadcast_batch(ops, 3, dims);
    if (nd < 0)
        return sv_raise(K, "batch dimensions do not broadcast",
                        "equal batch dimensions of q, k and v, or 1", found,
                        "reshape one operand");
    a.nd = nd;
    for (int i = 0; i < nd; i++) a.batch[i] = dims[i];
    batch_strides(q, 2, nd, dims, a.sbq);
    batch_strides(k, 2, nd, dims, a.sbk);
    batch_strides(v, 2, nd, dims, a.sbv);
    a.srq = row_stride(q);
    a.srk = row_stride(k);
    a.srv = row_stride(v);
    a.q = PyArray_DATA(q);
    a.k = PyArray_DATA(k);
    a.v = PyArray_DATA(v);
    a.scale = a.d > 0 ? 1.0f / sqrtf((float)a.d) : 1.0f;
    if (sobj != Py_None) {
        double sc = PyFloat_AsDouble(sobj);
        if (sc == -1.0 && PyErr_Occurred()) return NULL;
        a.scale = (float)sc;
    }
    PyArrayObject *m = NULL;
    if (mobj != Py_None) {
        char expm[160];
        snprintf(expm, sizeof expm, "mask: f32[..., %lld, %lld] broadcasting to the scores, "
                 "unit stride along the last axis", (long long)a.sq, (long long)a.sk);
        m = sv_arg_f32(K, "mask", mobj, 1, nd + 2, fl, expm);
        if (!m) return NULL;
        int mn = PyArray_NDIM(m);
        npy_intp mq = mn >= 2 ? PyArray_DIM(m, mn - 2) : 1;
        int ok = PyArray_DIM(m, mn - 1) == a.sk && (mq == a.sq || mq == 1);
        if (ok && mn >= 2) ok = batch_strides(m, 2, nd, dims, a.sbm);
        if (!ok) {
            sv_describe(mobj, found, sizeof found);
            return sv_raise(K, "mask does not broadcast to the scores", expm, found,
                            "pass an additive mask of shape [..., s_q, s_k] (or 1 for s_q)");
        }
        a.srm = mn >= 2 && mq > 1 ? PyArray_STRIDE(m, mn - 2) / 4 : 0;
        a.mask = PyArray_DATA(m);
    }
    dims[nd] = a.sq;
    dims[nd + 1] = a.dv;
    PyArrayObject *out;
    if (oobj == Py_None) {
        out = (PyArrayObject *)PyArray_SimpleNew(nd + 2, dims, NPY_FLOAT32);
        if (!out) return NULL;
    } else {
        snprintf(exp, sizeof exp, "out: f32[..., s_q, d_v] of the broadcast batch shape, unit "
                 "stride along the last axis");
        out = sv_arg_f32(K, "out", oobj, nd + 2, nd + 2, fl | SV_ARG_WRITABLE, exp);
        if (!out) return NULL;
        for (int i = 0; i < nd + 2; i++)
            if (PyArray_DIM(out, i) != dims[i]) {
                sv_describe(oobj, found, sizeof found);
                return sv_raise(K, "out has the wrong shape", exp, found,
                                "allocate out as numpy.empty of the result's shape");
            }
        const char *inames[4] = {"q", "k", "v", "mask"};
        ops[3] = m;
        for (int i = 0; i < 4; i++)
            if (ops[i] && sv_overlaps(out, ops[i])) {
                char what[64];
                snprintf(what, sizeof what, "out overlaps %s", inames[i]);
                return sv_raise(K, what, "out in memory of its own", "shared memory",
                                "write the result to a new array");
            }
        Py_INCREF(out);
    }
    batch_strides(out, 2, nd, dims, a.sbo);
    a.sro = row_stride(out);
    a.o = PyArray_DATA(out);
    if (PyArray_SIZE(out) == 0) return (PyObject *)out;
    if (a.sk == 0) { /* every softmax row is empty and the weighted sum is 0, as NumPy's */
        PyObject *zero = PyFloat_FromDouble(0.0);
        int bad = !zero || PyArray_FillWithScalar(out, zero) < 0;
        Py_XDECREF(zero);
        if (bad) {
            Py_DECREF(out);
            return NULL;
        }
        return (PyObject *)out;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = sv_attention_run(&a, threads < 0 ? 1 : threads);
    Py_END_ALLOW_THREADS if (rc != 0) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    return (PyObject *)out;
}

PyMethodDef sv_rowops_methods[] = {
    {"layer_norm", (PyCFunction)(void (*)(void))py_norm, METH_VARARGS | METH_KEYWORDS,
     "layer_norm(x, gamma=None, beta=None, eps=1e-5, residual=None, out=None, sum_out=None, "
     "threads=0, rms=False)"},
    {"softmax", (PyCFunction)(void (*)(void))py_softmax, METH_VARARGS | METH_KEYWORDS,
     "softmax(x, scale=1.0, mask=None, out=None, threads=0, log=False)"},
    {"attention", (PyCFunction)(void (*)(void))py_attention, METH_VARARGS | METH_KEYWORDS,
     "attention(q, k, v, scale=None, mask=None, causal=False, out=None, threads=0)"},
    {NULL, NULL, 0, NULL}};
