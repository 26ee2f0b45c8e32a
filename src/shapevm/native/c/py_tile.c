/* Entry points of the tile interpreter: TileProgram (a checked program, svtile.h),
 * tile_ops() (the opcode table), tile_run(program, inputs, out=None, threads=0). */
#include "pyutil.h"
#include <stdio.h>

extern const char *const sv_tile_op_names[SV_TOP_COUNT];
extern const int sv_tile_op_arity[SV_TOP_COUNT];
extern const char *const sv_tile_red_names[SV_RED_COUNT];
extern const char *const sv_tile_dtype_names[SV_DT_COUNT];

typedef struct {
    PyObject_HEAD sv_tile_plan plan;
} TileProgram;

static PyTypeObject TileProgramType;

const sv_tile_plan *sv_tile_plan_of(PyObject *obj) {
    return PyObject_TypeCheck(obj, &TileProgramType) ? &((TileProgram *)obj)->plan : NULL;
}

static PyObject *raise_tile(const sv_tile_error *e) {
    return sv_raise("tile", e->what, e->expected, e->found, e->fix);
}

/* A sequence of small ints (each in [0, limit)) into dst[count]; -1 with an error. */
static int small_ints(PyObject *seq, const char *name, int max_count, int limit, uint8_t *dst,
                      int *count) {
    PyObject *fast = PySequence_Fast(seq, "a sequence");
    if (!fast) {
        PyErr_Clear();
        char found[128];
        sv_describe(seq, found, sizeof found);
        sv_raise("tile", "a program field must be a sequence of ints", name, found,
                 "build programs with shapevm.native.tile.Program");
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n > max_count) {
        char exp[96], found[64];
        snprintf(exp, sizeof exp, "at most %d entries in %s", max_count, name);
        snprintf(found, sizeof found, "%zd entries", n);
        Py_DECREF(fast);
        sv_raise("tile", "the program is too large", exp, found,
                 "split the chain into smaller programs");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (v == -1 && PyErr_Occurred()) PyErr_Clear(), v = -1;
        if (v < 0 || v >= limit) {
            char exp[96], found[64];
            snprintf(exp, sizeof exp, "%s: ints from 0 to %d", name, limit - 1);
            snprintf(found, sizeof found, "entry %zd is %ld", i, v);
            Py_DECREF(fast);
            sv_raise("tile", "a program field is out of range", exp, found,
                     "build programs with shapevm.native.tile.Program");
            return -1;
        }
        dst[i] = (uint8_t)v;
    }
    *count = (int)n;
    Py_DECREF(fast);
    return 0;
}

/* TileProgram(in_dtypes, consts, const_dtypes, code, out_reg, n_regs, reduce=0,
 *             reduce_axes=0, keepdims=False); dtypes and reduce as codes, code as
 *             (op, dst, a, b, c, attr) tuples of ints. */
static PyObject *program_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *names[] = {"in_dtypes", "consts", "const_dtypes", "code", "out_reg",
                            "n_regs", "reduce", "reduce_axes", "keepdims", NULL};
    PyObject *ind, *cv, *cd, *code;
    sv_tile_prog p;
    memset(&p, 0, sizeof p);
    int keep = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOii|iip", names, &ind, &cv, &cd, &code,
                                     &p.out_reg, &p.n_regs, &p.reduce, &p.reduce_axes, &keep))
        return NULL;
    p.keepdims = keep;
    int n;
    if (small_ints(ind, "in_dtypes", SV_TILE_MAX_INPUTS, SV_DT_COUNT, p.in_dtype, &n) < 0)
        return NULL;
    p.n_inputs = n;
    if (small_ints(cd, "const_dtypes", SV_TILE_MAX_CONSTS, SV_DT_COUNT, p.const_dtype, &n) < 0)
        return NULL;
    p.n_consts = n;
    PyObject *fast = PySequence_Fast(cv, "consts must be a sequence of floats");
    if (!fast) return NULL;
    int bad = PySequence_Fast_GET_SIZE(fast) != p.n_consts;
    for (int i = 0; i < p.n_consts && !bad; i++) {
        double v = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, i));
        bad = v == -1.0 && PyErr_Occurred();
        p.consts[i] = (float)v;
    }
    Py_DECREF(fast);
    if (bad) {
        PyErr_Clear();
        return sv_raise("tile", "consts do not match const_dtypes",
                        "one float per entry of const_dtypes", "another count or a non-number",
                        "pass as many constants as constant dtypes");
    }
    PyObject *cf = PySequence_Fast(code, "code must be a sequence of instructions");
    if (!cf) return NULL;
    p.n_instr = (int)PySequence_Fast_GET_SIZE(cf);
    if (p.n_instr > SV_TILE_MAX_INSTR) p.n_instr = SV_TILE_MAX_INSTR + 1; /* refused below */
    for (int i = 0; i < p.n_instr && i < SV_TILE_MAX_INSTR; i++) {
        uint8_t f[6] = {0};
        if (small_ints(PySequence_Fast_GET_ITEM(cf, i), "an instruction (op, dst, a, b, c, attr)",
                       6, 256, f, &n) < 0 || n != 6) {
            Py_DECREF(cf);
            if (!PyErr_Occurred())
                sv_raise("tile", "an instruction has the wrong length",
                         "(op, dst, a, b, c, attr)", "another length",
                         "pass six ints per instruction");
            return NULL;
        }
        p.code[i] = (sv_tile_instr){f[0], f[1], f[2], f[3], f[4], f[5]};
    }
    Py_DECREF(cf);
    TileProgram *self = (TileProgram *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    sv_tile_error err;
    if (sv_tile_plan_init(&self->plan, &p, &err) < 0) {
        Py_DECREF(self);
        return raise_tile(&err);
    }
    return (PyObject *)self;
}

static PyObject *program_out_dtype(TileProgram *self, void *c) {
    (void)c;
    return PyUnicode_FromString(sv_tile_dtype_names[self->plan.out_dtype]);
}
static PyObject *program_n_inputs(TileProgram *self, void *c) {
    (void)c;
    return PyLong_FromLong(self->plan.prog.n_inputs);
}
static PyObject *program_kernels(TileProgram *self, void *c) {
    (void)c;
    PyObject *t = PyTuple_New(self->plan.prog.n_instr);
    for (int i = 0; t && i < self->plan.prog.n_instr; i++) {
        int k = self->plan.kernel[i];
        const char *name = k < SV_TOP_COUNT ? sv_tile_op_names[k]
                           : k == SV_TK_COPY ? "copy" : k == SV_TK_NE0 ? "ne0" : "square";
        PyTuple_SET_ITEM(t, i, PyUnicode_FromString(name));
    }
    return t;
}

static PyGetSetDef program_getset[] = {
    {"out_dtype", (getter)program_out_dtype, NULL, "dtype of the result: 'f32' or 'bool'", NULL},
    {"n_inputs", (getter)program_n_inputs, NULL, "arrays the program reads", NULL},
    {"kernels", (getter)program_kernels, NULL, "the kernel each instruction resolved to", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject TileProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shapevm.native.TileProgram",
    .tp_basicsize = sizeof(TileProgram),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A checked program of the tile interpreter (shapevm.native.tile.Program.build).",
    .tp_new = program_new,
    .tp_getset = program_getset,
};

int sv_tile_types(PyObject *module) {
    if (PyType_Ready(&TileProgramType) < 0) return -1;
    Py_INCREF(&TileProgramType);
    if (PyModule_AddObject(module, "TileProgram", (PyObject *)&TileProgramType) < 0) {
        Py_DECREF(&TileProgramType);
        return -1;
    }
    return 0;
}

static int operand(PyObject *obj, int dtype, const char *name, int writable,
                   sv_tile_operand *o) {
    char found[256], what[96], exp[96];
    sv_describe(obj, found, sizeof found);
    int want = dtype == SV_DT_BOOL  ? NPY_BOOL
               : dtype == SV_DT_I32 ? NPY_INT32
               : dtype == SV_DT_I64 ? NPY_INT64
                                    : NPY_FLOAT32;
    snprintf(exp, sizeof exp, "%s: a NumPy %s array of rank 0 to %d", name,
             sv_tile_dtype_names[dtype], SV_TILE_MAX_DIMS);
    if (!PyArray_Check(obj)) {
        snprintf(what, sizeof what, "%s must be a NumPy array", name);
        sv_raise("tile", what, exp, found, "convert it with numpy.asarray");
        return -1;
    }
    PyArrayObject *a = (PyArrayObject *)obj;
    if (PyArray_TYPE(a) != want || !PyArray_ISNOTSWAPPED(a)) {
        snprintf(what, sizeof what, "%s has the wrong dtype", name);
        sv_raise("tile", what, exp, found, "cast it, or build the program for its dtype");
        return -1;
    }
    if (PyArray_NDIM(a) > SV_TILE_MAX_DIMS) {
        snprintf(what, sizeof what, "%s has too many dims", name);
        sv_raise("tile", what, exp, found, "reshape it to 8 dims or fewer");
        return -1;
    }
    if (writable && !PyArray_ISWRITEABLE(a)) {
        sv_raise("tile", "out is read-only", exp, found, "pass a writable array");
        return -1;
    }
    o->data = PyArray_BYTES(a);
    o->ndim = PyArray_NDIM(a);
    for (int d = 0; d < o->ndim; d++) {
        o->shape[d] = PyArray_DIM(a, d);
        o->strides[d] = PyArray_STRIDE(a, d);
    }
    return 0;
}

/* tile_run(program, inputs, out=None, threads=0) */
static PyObject *py_tile_run(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"program", "inputs", "out", "threads", NULL};
    PyObject *pobj, *iobj, *oobj = Py_None;
    int threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|Oi", names, &pobj, &iobj, &oobj, &threads))
        return NULL;
    const sv_tile_plan *plan = sv_tile_plan_of(pobj);
    if (!plan) {
        char found[128];
        sv_describe(pobj, found, sizeof found);
        return sv_raise("tile", "program must be a TileProgram", "shapevm.native.TileProgram",
                        found, "build it with shapevm.native.tile.Program");
    }
    PyObject *fast = PySequence_Fast(iobj, "inputs must be a sequence of arrays");
    if (!fast) return NULL;
    sv_tile_args a;
    memset(&a, 0, sizeof a);
    a.n_inputs = (int)PySequence_Fast_GET_SIZE(fast);
    if (a.n_inputs != plan->prog.n_inputs) {
        char exp[64], found[64];
        snprintf(exp, sizeof exp, "%d inputs", plan->prog.n_inputs);
        snprintf(found, sizeof found, "%d inputs", a.n_inputs);
        Py_DECREF(fast);
        return sv_raise("tile", "wrong number of inputs", exp, found, "pass one array per input");
    }
    for (int i = 0; i < a.n_inputs; i++) {
        char name[32];
        snprintf(name, sizeof name, "input %d", i);
        if (operand(PySequence_Fast_GET_ITEM(fast, i), plan->prog.in_dtype[i], name, 0,
                    &a.in[i]) < 0) {
            Py_DECREF(fast);
            return NULL;
        }
    }
    sv_tile_error err;
    PyObject *out = oobj;
    if (oobj == Py_None) {
        int64_t shape[SV_TILE_MAX_DIMS];
        int32_t nd;
        if (sv_tile_out_shape(plan, &a, shape, &nd, &err) < 0) {
            Py_DECREF(fast);
            return raise_tile(&err);
        }
        npy_intp dims[SV_TILE_MAX_DIMS];
        for (int d = 0; d < nd; d++) dims[d] = (npy_intp)shape[d];
        out = PyArray_SimpleNew(nd, dims, plan->out_dtype == SV_DT_BOOL ? NPY_BOOL : NPY_FLOAT32);
        if (!out) {
            Py_DECREF(fast);
            return NULL;
        }
    } else {
        Py_INCREF(out);
    }
    int rc = operand(out, plan->out_dtype, "out", 1, &a.out);
    if (rc == 0) {
        Py_BEGIN_ALLOW_THREADS rc = sv_tile_run(plan, &a, threads < 0 ? 1 : threads, &err);
        Py_END_ALLOW_THREADS if (rc < 0) raise_tile(&err);
    }
    Py_DECREF(fast);
    if (rc < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* tile_ops() -> (opcode names with arities, reduction names, dtype names) */
static PyObject *py_tile_ops(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    PyObject *ops = PyTuple_New(SV_TOP_COUNT), *reds = PyTuple_New(SV_RED_COUNT),
             *dts = PyTuple_New(SV_DT_COUNT);
    if (!ops || !reds || !dts) goto fail;
    for (int i = 0; i < SV_TOP_COUNT; i++) {
        PyObject *row = Py_BuildValue("(si)", sv_tile_op_names[i], sv_tile_op_arity[i]);
        if (!row) goto fail;
        PyTuple_SET_ITEM(ops, i, row);
    }
    for (int i = 0; i < SV_RED_COUNT; i++) {
        PyObject *s = PyUnicode_FromString(sv_tile_red_names[i]);
        if (!s) goto fail;
        PyTuple_SET_ITEM(reds, i, s);
    }
    for (int i = 0; i < SV_DT_COUNT; i++) {
        PyObject *s = PyUnicode_FromString(sv_tile_dtype_names[i]);
        if (!s) goto fail;
        PyTuple_SET_ITEM(dts, i, s);
    }
    return Py_BuildValue("(NNN)", ops, reds, dts);
fail:
    Py_XDECREF(ops);
    Py_XDECREF(reds);
    Py_XDECREF(dts);
    return NULL;
}

PyMethodDef sv_tile_methods[] = {
    {"tile_run", (PyCFunction)(void (*)(void))py_tile_run, METH_VARARGS | METH_KEYWORDS,
     "tile_run(program, inputs, out=None, threads=0) -> the program's result"},
    {"tile_ops", py_tile_ops, METH_NOARGS,
     "tile_ops() -> ((name, arity) per opcode, reduction names, dtype names)"},
    {NULL, NULL, 0, NULL}};
