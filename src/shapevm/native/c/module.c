/* shapevm._native: the module object, its exception, and the checks every entry point
 * shares.  Each kernel family has its own file of entry points (py_<family>.c) whose
 * method table is joined here. */
#define SV_PYUTIL_MAIN
#include "pyutil.h"
#include <stdio.h>

PyObject *sv_NativeKernelError;

const char *const sv_act_names[SV_ACT_COUNT] = {
    "none", "relu", "gelu_tanh", "gelu_erf", "silu", "sigmoid", "tanh", "hard_swish",
    "leaky_relu", "relu6"};

PyObject *sv_raise(const char *kernel, const char *what, const char *expected,
                   const char *found, const char *fix) {
    char msg[2048];
    int n = snprintf(msg, sizeof msg, "%s: %s", kernel, what);
    const char *labels[3] = {"expected:", "found:", "fix:"};
    const char *texts[3] = {expected, found, fix};
    for (int i = 0; i < 3 && n >= 0 && (size_t)n < sizeof msg; i++)
        if (texts[i] && *texts[i])
            n += snprintf(msg + n, sizeof msg - (size_t)n, "\n  %-10s%s", labels[i], texts[i]);
    PyObject *exc = PyObject_CallFunction(sv_NativeKernelError, "s", msg);
    if (!exc) return NULL;
    const char *names[5] = {"kernel", "what", "expected", "found", "fix"};
    const char *values[5] = {kernel, what, expected ? expected : "", found ? found : "",
                             fix ? fix : ""};
    for (int i = 0; i < 5; i++) {
        PyObject *v = PyUnicode_FromString(values[i]);
        if (!v || PyObject_SetAttrString(exc, names[i], v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(exc);
            return NULL;
        }
        Py_DECREF(v);
    }
    PyErr_SetObject(sv_NativeKernelError, exc);
    Py_DECREF(exc);
    return NULL;
}

static const char *dtype_short(int type_num) {
    switch (type_num) {
    case NPY_FLOAT32: return "f32";
    case NPY_FLOAT64: return "f64";
    case NPY_FLOAT16: return "f16";
    case NPY_INT64: return "i64";
    case NPY_INT32: return "i32";
    case NPY_INT16: return "i16";
    case NPY_INT8: return "i8";
    case NPY_UINT8: return "u8";
    case NPY_BOOL: return "bool";
    default: return "?";
    }
}

void sv_describe(PyObject *obj, char *buf, size_t size) {
    if (obj == NULL || obj == Py_None) {
        snprintf(buf, size, "None");
        return;
    }
    if (!PyArray_Check(obj)) {
        snprintf(buf, size, "%s (not a NumPy array)", Py_TYPE(obj)->tp_name);
        return;
    }
    PyArrayObject *a = (PyArrayObject *)obj;
    int n = snprintf(buf, size, "%s[", dtype_short(PyArray_TYPE(a)));
    for (int i = 0; i < PyArray_NDIM(a) && n >= 0 && (size_t)n < size; i++)
        n += snprintf(buf + n, size - (size_t)n, "%s%lld", i ? ", " : "",
                      (long long)PyArray_DIM(a, i));
    if (n >= 0 && (size_t)n < size) n += snprintf(buf + n, size - (size_t)n, "]");
    if (n >= 0 && (size_t)n < size && !PyArray_IS_C_CONTIGUOUS(a))
        snprintf(buf + n, size - (size_t)n, " (not C-contiguous)");
}

PyArrayObject *sv_arg_f32(const char *kernel, const char *name, PyObject *obj, int min_ndim,
                          int max_ndim, int flags, const char *expected) {
    char found[256], what[160];
    if (obj == NULL || obj == Py_None) {
        if (flags & SV_ARG_OPTIONAL) return NULL;
        snprintf(what, sizeof what, "%s is missing", name);
        sv_raise(kernel, what, expected, "None", "pass a float32 NumPy array");
        return NULL;
    }
    sv_describe(obj, found, sizeof found);
    if (!PyArray_Check(obj)) {
        snprintf(what, sizeof what, "%s must be a NumPy array", name);
        sv_raise(kernel, what, expected, found, "convert it with numpy.asarray(..., np.float32)");
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)obj;
    if (PyArray_TYPE(a) != NPY_FLOAT32 || !PyArray_ISNOTSWAPPED(a)) {
        snprintf(what, sizeof what, "%s must be float32", name);
        sv_raise(kernel, what, expected, found, "cast it with .astype(numpy.float32)");
        return NULL;
    }
    int nd = PyArray_NDIM(a);
    if (nd < min_ndim || nd > max_ndim) {
        snprintf(what, sizeof what, "%s has the wrong rank %d", name, nd);
        sv_raise(kernel, what, expected, found, "reshape it to the rank the kernel takes");
        return NULL;
    }
    if ((flags & SV_ARG_WRITABLE) && !PyArray_ISWRITEABLE(a)) {
        snprintf(what, sizeof what, "%s is read-only", name);
        sv_raise(kernel, what, expected, found, "pass a writable array (e.g. numpy.empty)");
        return NULL;
    }
    if ((flags & SV_ARG_CONTIG) && !PyArray_IS_C_CONTIGUOUS(a)) {
        snprintf(what, sizeof what, "%s must be C-contiguous", name);
        sv_raise(kernel, what, expected, found, "pass numpy.ascontiguousarray(...) of it");
        return NULL;
    }
    if ((flags & SV_ARG_INNER_UNIT) && nd > 0 && PyArray_DIM(a, nd - 1) > 1 && PyArray_SIZE(a) > 0 &&
        PyArray_STRIDE(a, nd - 1) != (npy_intp)sizeof(float)) {
        snprintf(what, sizeof what, "%s must have unit stride along its last axis", name);
        sv_raise(kernel, what, expected, found, "pass numpy.ascontiguousarray(...) of it");
        return NULL;
    }
    for (int i = 0; i < nd; i++)
        if (PyArray_STRIDE(a, i) % (npy_intp)sizeof(float) != 0) {
            snprintf(what, sizeof what, "%s is not aligned to its elements", name);
            sv_raise(kernel, what, expected, found, "pass numpy.ascontiguousarray(...) of it");
            return NULL;
        }
    return a;
}

int sv_rows_of(PyArrayObject *a, int inner, int64_t *rows, int64_t *row_stride) {
    int nd = PyArray_NDIM(a);
    int64_t r = 1, stride = 0, span = 0; /* span: elements one step of the outer dims moves */
    for (int i = nd - inner - 1; i >= 0; i--) {
        int64_t d = PyArray_DIM(a, i), s = PyArray_STRIDE(a, i) / (int64_t)sizeof(float);
        if (d == 1) continue;
        if (span == 0)
            stride = s;
        else if (s != span)
            return 0;
        span = s * d;
        r *= d;
    }
    for (int i = 0; i < nd - inner; i++)
        if (PyArray_DIM(a, i) == 0) r = 0;
    if (span == 0) { /* at most one row: any stride will do */
        stride = 1;
        for (int i = nd - inner; i < nd; i++) stride *= PyArray_DIM(a, i);
    }
    *rows = r;
    *row_stride = stride;
    return 1;
}

int sv_overlaps(PyArrayObject *a, PyArrayObject *b) {
    if (!a || !b || a == b) return 0;
    char *alo, *ahi, *blo, *bhi;
    npy_intp lo = 0, hi = 0;
    for (int i = 0; i < PyArray_NDIM(a); i++) {
        npy_intp ext = (PyArray_DIM(a, i) - 1) * PyArray_STRIDE(a, i);
        if (PyArray_DIM(a, i) == 0) return 0;
        if (ext < 0) lo += ext; else hi += ext;
    }
    alo = PyArray_BYTES(a) + lo;
    ahi = PyArray_BYTES(a) + hi + 4;
    lo = hi = 0;
    for (int i = 0; i < PyArray_NDIM(b); i++) {
        npy_intp ext = (PyArray_DIM(b, i) - 1) * PyArray_STRIDE(b, i);
        if (PyArray_DIM(b, i) == 0) return 0;
        if (ext < 0) lo += ext; else hi += ext;
    }
    blo = PyArray_BYTES(b) + lo;
    bhi = PyArray_BYTES(b) + hi + 4;
    return alo < bhi && blo < ahi;
}

int sv_act_code(const char *kernel, PyObject *name) {
    if (name == NULL || name == Py_None) return SV_ACT_NONE;
    const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (s)
        for (int i = 0; i < SV_ACT_COUNT; i++)
            if (strcmp(s, sv_act_names[i]) == 0) return i;
    char found[200], expected[256] = "one of";
    snprintf(found, sizeof found, "%s", s ? s : Py_TYPE(name)->tp_name);
    for (int i = 0; i < SV_ACT_COUNT; i++) {
        size_t used = strlen(expected);
        snprintf(expected + used, sizeof expected - used, "%s %s", i ? "," : "", sv_act_names[i]);
    }
    sv_raise(kernel, "unknown activation", expected, found, "use one of the expected names");
    return -1;
}

int sv_act_parse(const char *kernel, PyObject *obj, int *code, float *slope) {
    *slope = 0.01f; /* leaky_relu's by name alone, as PyTorch's LeakyReLU */
    if (obj && PyTuple_Check(obj)) {
        double v = PyTuple_GET_SIZE(obj) == 2 ? PyFloat_AsDouble(PyTuple_GET_ITEM(obj, 1)) : NAN;
        if (v == -1.0 && PyErr_Occurred()) { /* not a number: refused below */
            PyErr_Clear();
            v = NAN;
        }
        int c = PyTuple_GET_SIZE(obj) == 2 ? sv_act_code(kernel, PyTuple_GET_ITEM(obj, 0)) : -2;
        if (c == -1) return -1;
        if (c != SV_ACT_LEAKY_RELU || !isfinite((float)v)) { /* finite in float32 too */
            char found[200];
            PyObject *text = PyObject_Repr(obj);
            const char *s = text ? PyUnicode_AsUTF8(text) : NULL;
            snprintf(found, sizeof found, "%s", s ? s : "a tuple");
            Py_XDECREF(text);
            PyErr_Clear();
            sv_raise(kernel, "an activation with a parameter must be ('leaky_relu', slope)",
                     "a name, or ('leaky_relu', a finite slope)", found,
                     "pass the name alone for the other activations");
            return -1;
        }
        *code = c;
        *slope = (float)v;
        return 0;
    }
    *code = sv_act_code(kernel, obj);
    return *code < 0 ? -1 : 0;
}

static PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "shapevm._native",
                             "The C kernel library of shapevm (see shapevm.native).", -1,
                             NULL};

static int add_methods(PyObject *m, PyMethodDef *defs) {
    PyObject *name = PyModule_GetNameObject(m);
    if (!name) return -1;
    for (PyMethodDef *d = defs; d->ml_name; d++) {
        PyObject *f = PyCFunction_NewEx(d, NULL, name);
        if (!f || PyModule_AddObject(m, d->ml_name, f) < 0) {
            Py_XDECREF(f);
            Py_DECREF(name);
            return -1;
        }
    }
    Py_DECREF(name);
    return 0;
}

PyMODINIT_FUNC PyInit__native(void) {
    import_array();
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    sv_NativeKernelError = PyErr_NewExceptionWithDoc(
        "shapevm.native.NativeKernelError",
        "A native kernel refused its arguments (dtype, rank, layout or sizes): the message "
        "says what it expected, what it found and how to fix it.",
        PyExc_ValueError, NULL);
    if (!sv_NativeKernelError || PyModule_AddObject(m, "NativeKernelError",
                                                    Py_NewRef(sv_NativeKernelError)) < 0)
        goto fail;
    if (add_methods(m, sv_misc_methods) < 0 || add_methods(m, sv_gemm_methods) < 0 ||
        add_methods(m, sv_rowops_methods) < 0 || add_methods(m, sv_tile_methods) < 0 ||
        add_methods(m, sv_dl_methods) < 0 || add_methods(m, sv_exec_kernel_methods) < 0 ||
        add_methods(m, sv_exec_methods) < 0)
        goto fail;
    if (sv_gemm_types(m) < 0 || sv_tile_types(m) < 0 || sv_exec_types(m) < 0) goto fail;
    if (add_methods(m, sv_conv_methods) < 0 || sv_conv_types(m) < 0) goto fail;
    if (PyModule_AddIntConstant(m, "ABI_VERSION", SV_ABI_VERSION) < 0) goto fail;
    sv_code_mapped = sv_map_code((const void *)(uintptr_t)&PyInit__native);
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
