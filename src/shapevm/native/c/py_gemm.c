/* Entry points of the matrix products: PackedDense (weights packed once), dense, matmul. */
#include "pyutil.h"
#include <stdio.h>

typedef struct {
    PyObject_HEAD sv_packed_b b;
    float *bias; /* N floats or NULL */
    int transposed;
} PackedDense;

static void packed_dealloc(PackedDense *self) {
    sv_packed_b_free(&self->b);
    sv_free(self->bias);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *packed_get_k(PackedDense *self, void *c) {
    (void)c;
    return PyLong_FromLongLong(self->b.k);
}
static PyObject *packed_get_n(PackedDense *self, void *c) {
    (void)c;
    return PyLong_FromLongLong(self->b.n);
}
static PyObject *packed_get_nbytes(PackedDense *self, void *c) {
    (void)c;
    int64_t n = self->b.panels * self->b.k * SV_NR * 4 + (self->bias ? self->b.n * 4 : 0);
    return PyLong_FromLongLong(n);
}
static PyObject *packed_get_has_bias(PackedDense *self, void *c) {
    (void)c;
    return PyBool_FromLong(self->bias != NULL);
}
static PyObject *packed_repr(PackedDense *self) {
    return PyUnicode_FromFormat("PackedDense(k=%lld, n=%lld%s)", (long long)self->b.k,
                                (long long)self->b.n, self->bias ? ", bias" : "");
}

static PyGetSetDef packed_getset[] = {
    {"k", (getter)packed_get_k, NULL, "inputs per row (K)", NULL},
    {"n", (getter)packed_get_n, NULL, "outputs per row (N)", NULL},
    {"nbytes", (getter)packed_get_nbytes, NULL, "bytes of packed weights and bias", NULL},
    {"has_bias", (getter)packed_get_has_bias, NULL, "whether a bias was packed", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject PackedDenseType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shapevm.native.PackedDense",
    .tp_basicsize = sizeof(PackedDense),
    .tp_dealloc = (destructor)packed_dealloc,
    .tp_repr = (reprfunc)packed_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Weights of a dense layer laid out once for the micro-kernel "
              "(shapevm.native.pack_dense).",
    .tp_getset = packed_getset,
};

int sv_gemm_types(PyObject *module) {
    if (PyType_Ready(&PackedDenseType) < 0) return -1;
    Py_INCREF(&PackedDenseType);
    if (PyModule_AddObject(module, "PackedDense", (PyObject *)&PackedDenseType) < 0) {
        Py_DECREF(&PackedDenseType);
        return -1;
    }
    return 0;
}

int sv_packed_dense_unwrap(PyObject *obj, const sv_packed_b **b, const float **bias) {
    if (!PyObject_TypeCheck(obj, &PackedDenseType)) {
        char found[128];
        sv_describe(obj, found, sizeof found);
        sv_raise("dense", "packed must be a PackedDense", "shapevm.native.pack_dense(w)", found,
                 "pack the weights once with pack_dense and pass the result");
        return -1;
    }
    if (b) *b = &((PackedDense *)obj)->b;
    if (bias) *bias = ((PackedDense *)obj)->bias;
    return 0;
}

/* pack_dense(w, bias=None, transposed=False) */
static PyObject *py_pack_dense(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"w", "bias", "transposed", NULL};
    PyObject *wobj, *bobj = Py_None;
    int transposed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Op", names, &wobj, &bobj, &transposed))
        return NULL;
    const char *exp_w = transposed ? "w: f32[N, K] (a linear layer's [out, in] weight)"
                                   : "w: f32[K, N] (the x @ w orientation)";
    PyArrayObject *w = sv_arg_f32("pack_dense", "w", wobj, 2, 2, 0, exp_w);
    if (!w) return NULL;
    int64_t d0 = PyArray_DIM(w, 0), d1 = PyArray_DIM(w, 1);
    int64_t s0 = PyArray_STRIDE(w, 0) / 4, s1 = PyArray_STRIDE(w, 1) / 4;
    int64_t k = transposed ? d1 : d0, n = transposed ? d0 : d1;
    int64_t sk = transposed ? s1 : s0, sn = transposed ? s0 : s1;
    PyArrayObject *b = NULL;
    if (bobj != Py_None) {
        char exp_b[64];
        snprintf(exp_b, sizeof exp_b, "bias: f32[%lld]", (long long)n);
        b = sv_arg_f32("pack_dense", "bias", bobj, 1, 1, 0, exp_b);
        if (!b) return NULL;
        if (PyArray_DIM(b, 0) != n) {
            char found[128];
            sv_describe(bobj, found, sizeof found);
            return sv_raise("pack_dense", "bias does not match the weights' outputs", exp_b,
                            found, "pass one bias value per output column");
        }
    }
    PackedDense *p = PyObject_New(PackedDense, &PackedDenseType);
    if (!p) return NULL;
    p->bias = NULL;
    p->b.data = NULL;
    p->transposed = transposed;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = sv_pack_b(&p->b, PyArray_DATA(w), k, n, sk, sn);
    Py_END_ALLOW_THREADS if (rc != 0) {
        Py_DECREF(p);
        return PyErr_NoMemory();
    }
    if (b) {
        p->bias = sv_alloc((size_t)(n > 0 ? n : 1) * sizeof(float));
        if (!p->bias) {
            Py_DECREF(p);
            return PyErr_NoMemory();
        }
        int64_t sb = PyArray_STRIDE(b, 0) / 4;
        const float *src = PyArray_DATA(b);
        for (int64_t j = 0; j < n; j++) p->bias[j] = src[j * sb];
    }
    return (PyObject *)p;
}

static PyArrayObject *new_f32(int nd, npy_intp *dims) {
    return (PyArrayObject *)PyArray_SimpleNew(nd, dims, NPY_FLOAT32);
}

static int same_lead(PyArrayObject *a, PyArrayObject *b, int inner) {
    if (PyArray_NDIM(a) != PyArray_NDIM(b)) return 0;
    for (int i = 0; i < PyArray_NDIM(a) - inner; i++)
        if (PyArray_DIM(a, i) != PyArray_DIM(b, i)) return 0;
    return 1;
}

/* dense(x, packed, out=None, residual=None, activation="none", alpha=1.0, threads=0,
 *       residual_mul=False): residual_mul multiplies the result by residual instead */
static PyObject *py_dense(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"x",     "packed",  "out",          "residual", "activation",
                            "alpha", "threads", "residual_mul", NULL};
    PyObject *xobj, *pobj, *oobj = Py_None, *robj = Py_None, *aobj = Py_None;
    float alpha = 1.0f;
    int threads = 0, res_mul = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OOOfip", names, &xobj, &pobj, &oobj, &robj,
                                     &aobj, &alpha, &threads, &res_mul))
        return NULL;
    if (!PyObject_TypeCheck(pobj, &PackedDenseType)) {
        char found[128];
        sv_describe(pobj, found, sizeof found);
        return sv_raise("dense", "packed must be a PackedDense", "shapevm.native.pack_dense(w)",
                        found, "pack the weights once with pack_dense and pass the result");
    }
    PackedDense *p = (PackedDense *)pobj;
    char exp_x[96], exp_o[96], found[256];
    snprintf(exp_x, sizeof exp_x, "x: f32[..., %lld] (unit stride along the last axis)",
             (long long)p->b.k);
    PyArrayObject *x = sv_arg_f32("dense", "x", xobj, 1, NPY_MAXDIMS, SV_ARG_INNER_UNIT, exp_x);
    if (!x) return NULL;
    int nd = PyArray_NDIM(x);
    if (PyArray_DIM(x, nd - 1) != p->b.k) {
        sv_describe(xobj, found, sizeof found);
        return sv_raise("dense", "x does not match the packed weights", exp_x, found,
                        "the weights were packed for this many inputs per row");
    }
    int64_t m, lda, ldc, ldr = 0;
    if (!sv_rows_of(x, 1, &m, &lda)) {
        sv_describe(xobj, found, sizeof found);
        return sv_raise("dense", "the rows of x are not evenly spaced", exp_x, found,
                        "pass numpy.ascontiguousarray(x)");
    }
    snprintf(exp_o, sizeof exp_o, "out: f32[..., %lld], the leading shape of x",
             (long long)p->b.n);
    int act;
    float slope;
    if (sv_act_parse("dense", aobj, &act, &slope) < 0) return NULL;
    PyArrayObject *out;
    if (oobj == Py_None) {
        npy_intp dims[NPY_MAXDIMS];
        for (int i = 0; i < nd; i++) dims[i] = PyArray_DIM(x, i);
        dims[nd - 1] = (npy_intp)p->b.n;
        out = new_f32(nd, dims);
        if (!out) return NULL;
    } else {
        out = sv_arg_f32("dense", "out", oobj, nd, nd, SV_ARG_WRITABLE | SV_ARG_INNER_UNIT,
                         exp_o);
        if (!out) return NULL;
        if (!same_lead(x, out, 1) || PyArray_DIM(out, nd - 1) != p->b.n) {
            sv_describe(oobj, found, sizeof found);
            return sv_raise("dense", "out has the wrong shape", exp_o, found,
                            "allocate out with the leading shape of x and N columns");
        }
        if (sv_overlaps(out, x))
            return sv_raise("dense", "out overlaps x", "out and x in separate memory",
                            "shared memory", "write the result to a new array");
        Py_INCREF(out);
    }
    int64_t m2;
    if (!sv_rows_of(out, 1, &m2, &ldc)) {
        Py_DECREF(out);
        return sv_raise("dense", "the rows of out are not evenly spaced", exp_o, "strided rows",
                        "pass a C-contiguous out");
    }
    PyArrayObject *r = NULL;
    if (robj != Py_None) {
        const char *rname = res_mul ? "gate" : "residual"; /* the caller's name for it */
        r = sv_arg_f32("dense", rname, robj, nd, nd, SV_ARG_INNER_UNIT, exp_o);
        int64_t m3;
        if (!r || !same_lead(r, out, 0) || !sv_rows_of(r, 1, &m3, &ldr) ||
            (sv_overlaps(r, out) && (PyArray_DATA(r) != PyArray_DATA(out) || ldr != ldc))) {
            Py_DECREF(out);
            if (r) {
                sv_describe(robj, found, sizeof found);
                char what[64], fix[64];
                snprintf(what, sizeof what, "%s does not match out", rname);
                snprintf(fix, sizeof fix, "pass a %s of the output's shape", rname);
                sv_raise("dense", what, exp_o, found, fix);
            }
            return NULL;
        }
    }
    sv_epilogue ep = {.bias = p->bias, .residual = r ? PyArray_DATA(r) : NULL, .ldr = ldr,
                      .alpha = alpha, .act = act, .slope = slope, .res_mul = res_mul};
    float *c = PyArray_DATA(out);
    const float *a = PyArray_DATA(x);
    Py_BEGIN_ALLOW_THREADS sv_dense(m, a, lda, &p->b, c, ldc, &ep, threads);
    Py_END_ALLOW_THREADS return (PyObject *)out;
}

typedef struct matmul_job {
    int64_t m, n, k, nbatch, bnd;
    const char *a, *b;
    char *c;
    npy_intp sa[NPY_MAXDIMS], sb[NPY_MAXDIMS], bdims[NPY_MAXDIMS]; /* batch strides (bytes) */
    int64_t sam, sak, sbk, sbn, ldc;
    float alpha;
} matmul_job;

static void matmul_batch(void *vctx, int64_t t) {
    const matmul_job *j = vctx;
    int64_t rest = t, offa = 0, offb = 0;
    for (int d = (int)j->bnd - 1; d >= 0; d--) {
        int64_t i = rest % j->bdims[d];
        rest /= j->bdims[d];
        offa += i * j->sa[d];
        offb += i * j->sb[d];
    }
    sv_epilogue ep = {.alpha = j->alpha};
    sv_sgemm(j->m, j->n, j->k, (const float *)(j->a + offa), j->sam, j->sak,
             (const float *)(j->b + offb), j->sbk, j->sbn, (float *)j->c + t * j->m * j->n,
             j->ldc, j->alpha != 1.0f ? &ep : NULL, j->nbatch > 1 ? 1 : 0);
}

/* matmul(a, b, alpha=1.0): a[..., M, K] @ b[..., K, N], batch dims broadcast, any strides. */
static PyObject *py_matmul(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"a", "b", "alpha", NULL};
    PyObject *aobj, *bobj;
    float alpha = 1.0f;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|f", names, &aobj, &bobj, &alpha)) return NULL;
    const char *exp = "a: f32[..., M, K] and b: f32[..., K, N] with broadcastable batch dims";
    PyArrayObject *a = sv_arg_f32("matmul", "a", aobj, 2, NPY_MAXDIMS, 0, exp);
    if (!a) return NULL;
    PyArrayObject *b = sv_arg_f32("matmul", "b", bobj, 2, NPY_MAXDIMS, 0, exp);
    if (!b) return NULL;
    int na = PyArray_NDIM(a), nb = PyArray_NDIM(b);
    char fa[200], fb[200], found[420];
    sv_describe(aobj, fa, sizeof fa);
    sv_describe(bobj, fb, sizeof fb);
    snprintf(found, sizeof found, "a: %s, b: %s", fa, fb);
    matmul_job j = {.m = PyArray_DIM(a, na - 2), .k = PyArray_DIM(a, na - 1),
                    .n = PyArray_DIM(b, nb - 1), .alpha = alpha};
    if (PyArray_DIM(b, nb - 2) != j.k)
        return sv_raise("matmul", "inner dimensions differ", "a.shape[-1] == b.shape[-2]", found,
                        "transpose or reshape one operand");
    int bnd = (na > nb ? na : nb) - 2;
    npy_intp dims[NPY_MAXDIMS];
    j.nbatch = 1;
    for (int d = 0; d < bnd; d++) {
        int ia = d - (bnd - (na - 2)), ib = d - (bnd - (nb - 2));
        npy_intp da = ia >= 0 ? PyArray_DIM(a, ia) : 1, db = ib >= 0 ? PyArray_DIM(b, ib) : 1;
        if (da != db && da != 1 && db != 1)
            return sv_raise("matmul", "batch dimensions do not broadcast",
                            "equal batch dimensions, or 1", found, "reshape one operand");
        dims[d] = da > db ? da : db;
        if (da == 0 || db == 0) dims[d] = 0;
        j.bdims[d] = dims[d];
        j.sa[d] = ia >= 0 && da != 1 ? PyArray_STRIDE(a, ia) : 0;
        j.sb[d] = ib >= 0 && db != 1 ? PyArray_STRIDE(b, ib) : 0;
        j.nbatch *= dims[d];
    }
    dims[bnd] = j.m;
    dims[bnd + 1] = j.n;
    PyArrayObject *out = new_f32(bnd + 2, dims);
    if (!out) return NULL;
    j.bnd = bnd;
    j.a = PyArray_BYTES(a);
    j.b = PyArray_BYTES(b);
    j.c = PyArray_BYTES(out);
    j.sam = PyArray_STRIDE(a, na - 2) / 4;
    j.sak = PyArray_STRIDE(a, na - 1) / 4;
    j.sbk = PyArray_STRIDE(b, nb - 2) / 4;
    j.sbn = PyArray_STRIDE(b, nb - 1) / 4;
    j.ldc = j.n;
    if (j.nbatch == 0 || j.m == 0 || j.n == 0) return (PyObject *)out;
    if (j.k == 0) {
        memset(PyArray_DATA(out), 0, (size_t)PyArray_NBYTES(out));
        return (PyObject *)out;
    }
    /* batches split over the pool, except a product too small to pay for it (sv_dense's
     * rule); one batch uses the pool inside */
    double work = (double)j.nbatch * (double)j.m * (double)j.n * (double)j.k;
    Py_BEGIN_ALLOW_THREADS if (j.nbatch == 1) matmul_batch(&j, 0);
    else if (work < SV_PARALLEL_MIN_MACS) for (int64_t t = 0; t < j.nbatch; t++)
        matmul_batch(&j, t);
    else sv_parallel(j.nbatch, matmul_batch, &j);
    Py_END_ALLOW_THREADS return (PyObject *)out;
}

PyMethodDef sv_gemm_methods[] = {
    {"pack_dense", (PyCFunction)(void (*)(void))py_pack_dense, METH_VARARGS | METH_KEYWORDS,
     "pack_dense(w, bias=None, transposed=False) -> PackedDense"},
    {"dense", (PyCFunction)(void (*)(void))py_dense, METH_VARARGS | METH_KEYWORDS,
     "dense(x, packed, out=None, residual=None, activation='none', alpha=1.0, threads=0, "
     "residual_mul=False)"},
    {"matmul", (PyCFunction)(void (*)(void))py_matmul, METH_VARARGS | METH_KEYWORDS,
     "matmul(a, b, alpha=1.0) -> a @ b (batched, broadcast)"},
    {NULL, NULL, 0, NULL}};
