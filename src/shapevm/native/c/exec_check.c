/* Executor(spec): the constructor of the region executor (exec_internal.h).
 *
 * It takes the region as plain arrays (built by shapevm.jit.backend) and checks every index
 * in them before keeping them, so that a call can trust them: the dimension program reads
 * only cells defined before each step, every dimension is a cell that holds a value, slots,
 * views and buffers are in range, no instruction writes an input or a constant, and the
 * executor's own kernels get operands of their dtypes and ranks.  A region that fails
 * raises NativeKernelError naming the check and the step, slot or instruction.
 */
#include "exec_internal.h"
#include <stdio.h>

#define SLOT_FIELDS (5 + 3 * SVX_MAXDIM)
#define INSTR_FIELDS (3 + SVX_MAXIN + SVX_MAXOUT + SVX_NIATTR)

static PyObject *bad(const char *what, const char *found) {
    return sv_raise("Executor", what, "a region lowered by shapevm.jit.backend", found,
                    "this is a bug in the lowering: please report it");
}

/* A C-contiguous array of `type` from spec[key] with `cols` columns (0: 1-D). */
static PyArrayObject *spec_array(PyObject *spec, const char *key, int type, int cols) {
    PyObject *o = PyDict_GetItemString(spec, key);
    if (!o) {
        bad("missing field", key);
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(o, type, cols ? 2 : 1, cols ? 2 : 1,
                                                        NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED);
    if (!a) return NULL;
    if (cols && PyArray_DIM(a, 1) != cols && PyArray_DIM(a, 0) != 0) {
        Py_DECREF(a);
        bad("field has the wrong number of columns", key);
        return NULL;
    }
    return a;
}

static void *copy_out(PyArrayObject *a, size_t elem) {
    size_t n = (size_t)PyArray_SIZE(a) * elem;
    void *p = PyMem_Malloc(n ? n : 1);
    if (p && n) memcpy(p, PyArray_DATA(a), n);
    return p;
}

static int in_range(int64_t v, int64_t n) { return v >= 0 && v < n; }

/* NativeKernelError for a region whose arrays contradict themselves: `what` at `where`. */
static PyObject *bad_at(const char *what, const char *expected, const char *where) {
    return sv_raise("Executor", what, expected, where,
                    "rebuild the region with shapevm.jit.backend.plan.build_spec; a region "
                    "it builds never fails this check, so report it as a lowering bug");
}

/* Which heap cells hold a value before the instructions run: the variables, the
 * constants, and each step's result, which must read only cells defined before it and
 * write a cell nothing else defines.  The flags (PyMem_Malloc'd) or NULL with an error. */
static uint8_t *check_dimprog(Executor *e) {
    uint8_t *def = PyMem_Calloc((size_t)e->nheap + 1, 1);
    if (!def) return (uint8_t *)PyErr_NoMemory();
    char where[96];
    /* a variable's cell is bound at each call: a value in it would pass the constants'
     * checks at construction and be replaced by the caller's afterwards */
    for (int v = 0; v < e->nvars; v++)
        if (e->heap0[v] != SVX_UNSET) {
            snprintf(where, sizeof where, "heap cell %d holds %lld", v, (long long)e->heap0[v]);
            bad_at("a dimension variable's cell holds a value", "unset cells for the variables",
                   where);
            PyMem_Free(def);
            return NULL;
        }
    for (int c = 0; c < e->nheap; c++) def[c] = c < e->nvars || e->heap0[c] != SVX_UNSET;
    for (int i = 0; i < e->nprog; i++) {
        const int64_t *p = e->prog[i];
        int with_const = p[0] == SVX_D_ADDC || p[0] == SVX_D_MULC;
        snprintf(where, sizeof where, "step %d: (%lld, %lld, %lld, %lld)", i, (long long)p[0],
                 (long long)p[1], (long long)p[2], (long long)p[3]);
        if (!in_range(p[0], SVX_D_COUNT) || p[0] == 0 || !in_range(p[1], e->nheap) ||
            (!with_const && !in_range(p[2], e->nheap)) || !in_range(p[3], e->nheap)) {
            bad_at("dimension program step out of range",
                   "an opcode 1-9 and heap cells below the heap's size", where);
            break;
        }
        if (!def[p[1]] || (!with_const && !def[p[2]])) {
            bad_at("dimension program step reads a cell before it is computed",
                   "steps that read variables, constants or earlier steps' results", where);
            break;
        }
        if (def[p[3]]) {
            bad_at("dimension program step overwrites a defined cell",
                   "each step writes a cell of its own (not a variable or a constant)", where);
            break;
        }
        def[p[3]] = 1;
    }
    for (int i = 0; !PyErr_Occurred() && i < e->nchecks; i++)
        if (!in_range(e->checks[i][0], e->nheap) || !def[e->checks[i][0]] ||
            !in_range(e->checks[i][1], 2)) {
            snprintf(where, sizeof where, "check %d: (%lld, %lld)", i,
                     (long long)e->checks[i][0], (long long)e->checks[i][1]);
            bad_at("check out of range", "(a defined heap cell, 0 for >= 0 or 1 for == 0)",
                   where);
        }
    if (PyErr_Occurred()) {
        PyMem_Free(def);
        return NULL;
    }
    return def;
}

/* The cells of computed dimensions (every slot but the inputs) and of buffer sizes, each
 * once, with the first slot (or -1 - buffer) that reads it: a call checks them >= 0. */
static int collect_dimcells(Executor *e) {
    uint8_t *seen = PyMem_Calloc((size_t)e->nheap + 1, 1);
    e->dimcells = PyMem_Malloc(sizeof *e->dimcells *
                               ((size_t)e->nslots * SVX_MAXDIM + (size_t)e->nbuffers + 1));
    if (!seen || !e->dimcells) {
        PyMem_Free(seen);
        PyErr_NoMemory();
        return -1;
    }
    int n = 0;
    for (int s = 0; s < e->nslots; s++)
        for (int d = 0; e->slots[s].kind != SVX_S_INPUT && d < e->slots[s].ndim; d++) {
            int c = e->slots[s].dims[d];
            if (c < e->nvars || e->heap0[c] == SVX_UNSET) /* constants were checked */
                if (!seen[c]) {
                    seen[c] = 1;
                    e->dimcells[n][0] = c;
                    e->dimcells[n++][1] = s;
                }
        }
    for (int b = 0; b < e->nbuffers; b++)
        if (!seen[e->buffers[b]]) {
            seen[e->buffers[b]] = 1;
            e->dimcells[n][0] = e->buffers[b];
            e->dimcells[n++][1] = -1 - b;
        }
    e->ndimcells = n;
    PyMem_Free(seen);
    return 0;
}

static int check_slots(Executor *e, const uint8_t *defined) {
    char found[96];
    int seen_inputs = 0;
    for (int s = 0; s < e->nslots; s++) {
        svx_slot *sl = &e->slots[s];
        snprintf(found, sizeof found, "slot %d", s);
        if (sl->ndim < 0 || sl->ndim > SVX_MAXDIM || !in_range(sl->dtype, SVX_NDTYPES))
            return bad("slot rank or dtype out of range", found), -1;
        for (int d = 0; d < sl->ndim; d++) {
            if (!in_range(sl->dims[d], e->nheap)) return bad("slot dim out of heap", found), -1;
            if (!defined[sl->dims[d]])
                return bad_at("slot dim is a cell nothing computes",
                              "dims that are variables, constants or dimension program results",
                              found), -1;
        }
        switch (sl->kind) {
        case SVX_S_INPUT:
            if (!in_range(sl->index, e->ninputs) || e->input_slot[sl->index] != -1)
                return bad("input index out of range or repeated", found), -1;
            e->input_slot[sl->index] = s;
            seen_inputs++;
            break;
        case SVX_S_CONST:
            if (!in_range(sl->index, PyList_GET_SIZE(e->consts)))
                return bad("constant index out of range", found), -1;
            {
                PyArrayObject *c = (PyArrayObject *)PyList_GET_ITEM(e->consts, sl->index);
                if (PyArray_NDIM(c) != sl->ndim || PyArray_TYPE(c) != svx_npy_of[sl->dtype])
                    return bad("constant does not match its slot", found), -1;
                for (int d = 0; d < sl->ndim; d++)
                    if (e->heap0[sl->dims[d]] != PyArray_DIM(c, d))
                        return bad("constant's shape does not match its slot", found), -1;
            }
            break;
        case SVX_S_BUFFER:
            if (!in_range(sl->index, e->nbuffers)) return bad("buffer out of range", found), -1;
            break;
        case SVX_S_OUTPUT:
            if (!in_range(sl->index, e->noutputs) || e->outputs[sl->index] != s)
                return bad("output index does not match", found), -1;
            break;
        case SVX_S_VIEW:
            if (!in_range(sl->index, s)) return bad("view of a later slot", found), -1;
            if (e->slots[sl->index].dtype != sl->dtype)
                return bad("view changes the dtype", found), -1;
            if (sl->viewop == SVX_V_TRANSPOSE) {
                if (e->slots[sl->index].ndim != sl->ndim) return bad("bad transpose", found), -1;
                int used = 0;
                for (int d = 0; d < sl->ndim; d++) {
                    if (!in_range(sl->param[d], sl->ndim) || (used & (1 << sl->param[d])))
                        return bad("bad transpose permutation", found), -1;
                    used |= 1 << sl->param[d];
                }
            } else if (sl->viewop == SVX_V_SLICE) {
                if (e->slots[sl->index].ndim != sl->ndim) return bad("bad slice", found), -1;
                for (int d = 0; d < sl->ndim; d++)
                    if (!in_range(sl->param[d], e->nheap) || !defined[sl->param[d]] ||
                        sl->param2[d] == 0 || sl->param2[d] == INT32_MIN) /* below 0: flipped */
                        return bad("bad slice start or step", found), -1;
            } else if (sl->viewop == SVX_V_SELECT) {
                int bn = e->slots[sl->index].ndim, used = 0;
                for (int d = 0; d < sl->ndim; d++) {
                    if (sl->param[d] == -1) continue;
                    if (!in_range(sl->param[d], bn) || (used & (1 << sl->param[d])))
                        return bad("bad axis selection", found), -1;
                    used |= 1 << sl->param[d];
                }
            } else if (sl->viewop == SVX_V_BROADCAST) {
                if (e->slots[sl->index].ndim > sl->ndim) return bad("bad broadcast", found), -1;
            } else if (sl->viewop != SVX_V_RESHAPE) {
                return bad("unknown view", found), -1;
            }
            break;
        default: return bad("unknown slot kind", found), -1;
        }
    }
    if (seen_inputs != e->ninputs) return bad("an argument has no slot", "inputs"), -1;
    for (int o = 0; o < e->noutputs; o++) {
        int s = e->outputs[o];
        if (!in_range(s, e->nslots)) return bad("output slot out of range", "outputs"), -1;
        if (e->slots[s].kind == SVX_S_OUTPUT) continue;
        /* an argument or a view of one: returned as the argument or NumPy's view of it
         * (views only of earlier slots: the walk ends) */
        while (e->slots[s].kind == SVX_S_VIEW) s = e->slots[s].index;
        if (e->slots[s].kind != SVX_S_INPUT)
            return bad_at("an output that is not an output slot",
                          "an output slot, an argument's slot or a view of an argument",
                          "outputs"), -1;
    }
    for (int b = 0; b < e->nbuffers; b++)
        if (!in_range(e->buffers[b], e->nheap) || !defined[e->buffers[b]])
            return bad("buffer size out of heap", "buffers"), -1;
    return 0;
}

/* The slot whose memory slot s is (s itself, or the base at the end of its views). */
static int root_of(const Executor *e, int s) {
    while (e->slots[s].kind == SVX_S_VIEW) s = e->slots[s].index;
    return s;
}

/* What the executor's own kernels need of their operands' dtypes and ranks; NULL if met,
 * else what they expect. */
static const char *operand_rule(const Executor *e, const svx_instr *in) {
    const svx_slot *sl = e->slots;
    switch (in->op) {
    case SVX_OP_DENSE:
        for (int k = 0; k < in->nin; k++)
            if (sl[in->in[k]].dtype != SVX_F32 || sl[in->in[k]].ndim < 1)
                return "dense: float32 operands of rank >= 1";
        if (sl[in->out[0]].dtype != SVX_F32 || sl[in->out[0]].ndim != sl[in->in[0]].ndim ||
            (in->nin > 1 && sl[in->in[1]].ndim != sl[in->out[0]].ndim) || in->nin > 2)
            return "dense: x [, residual] and a float32 result, all of one rank";
        if (!in_range(in->iattr[0], SV_ACT_COUNT)) /* an unknown one would run as none */
            return "dense: an activation code below SV_ACT_COUNT";
        if (!in_range(in->iattr[1], 2) || (in->iattr[1] && in->nin != 2))
            return "dense: a residual mode of 0 (added) or 1 (multiplied, with a residual)";
        return NULL;
    case SVX_OP_MATMUL:
        for (int k = 0; k < 3; k++) {
            const svx_slot *t = &sl[k < 2 ? in->in[k] : in->out[0]];
            if (t->dtype != SVX_F32 || t->ndim < 2)
                return "matmul: float32 a, b and result of rank >= 2";
        }
        if (sl[in->out[0]].ndim < sl[in->in[0]].ndim || sl[in->out[0]].ndim < sl[in->in[1]].ndim)
            return "matmul: a result of at least the operands' rank";
        return NULL;
    case SVX_OP_COPY:
        if (sl[in->in[0]].dtype != sl[in->out[0]].dtype ||
            sl[in->in[0]].ndim != sl[in->out[0]].ndim)
            return "copy: an operand and a result of one dtype and rank";
        return NULL;
    case SVX_OP_FILL:
        if (sl[in->out[0]].dtype == SVX_F16) return "fill: a result of a dtype other than f16";
        return NULL;
    case SVX_OP_IOTA: {
        int d = sl[in->out[0]].dtype;
        if (sl[in->out[0]].ndim != 1 ||
            (d != SVX_F32 && d != SVX_F64 && d != SVX_I32 && d != SVX_I64))
            return "iota: a result of rank 1 and dtype f32, f64, i32 or i64";
        return NULL;
    }
    default: return NULL;
    }
}

static int check_instrs(Executor *e, PyArrayObject *ia, PyArrayObject *fa, PyObject *objs) {
    char found[96];
    const int32_t *iv = PyArray_DATA(ia);
    const float *fv = PyArray_DATA(fa);
    for (int i = 0; i < e->ninstrs; i++) {
        const int32_t *r = iv + (size_t)i * INSTR_FIELDS;
        svx_instr *in = &e->instrs[i];
        snprintf(found, sizeof found, "instruction %d", i);
        in->op = r[0];
        in->nin = r[1];
        in->nout = r[2];
        if (!in_range(in->op, SVX_OP_COUNT) || in->op == 0 || !in_range(in->nin, SVX_MAXIN + 1) ||
            !in_range(in->nout, SVX_MAXOUT + 1))
            return bad("opcode or operand count out of range", found), -1;
        for (int k = 0; k < SVX_MAXIN; k++) in->in[k] = r[3 + k];
        for (int k = 0; k < SVX_MAXOUT; k++) in->out[k] = r[3 + SVX_MAXIN + k];
        for (int k = 0; k < SVX_NIATTR; k++) in->iattr[k] = r[3 + SVX_MAXIN + SVX_MAXOUT + k];
        for (int k = 0; k < SVX_NFATTR; k++) in->fattr[k] = fv[(size_t)i * SVX_NFATTR + k];
        for (int k = 0; k < in->nin; k++)
            if (!in_range(in->in[k], e->nslots)) return bad("operand slot out of range", found), -1;
        for (int k = 0; k < in->nout; k++) {
            if (!in_range(in->out[k], e->nslots)) return bad("result slot out of range", found), -1;
            int kind = e->slots[root_of(e, in->out[k])].kind;
            if (kind == SVX_S_INPUT || kind == SVX_S_CONST)
                return bad_at("instruction writes an input or constant",
                              "results in buffers or outputs (or views of them): the caller's "
                              "arrays and the constants are read only",
                              found), -1;
        }
        PyObject *obj = PyList_GET_ITEM(objs, i);
        if (in->op == SVX_OP_DENSE) {
            int packed = sv_packed_dense_unwrap(obj, NULL, NULL) == 0;
            if (!packed) PyErr_Clear(); /* the error below says it, with the instruction */
            if (!packed || in->nin < 1 || in->nout != 1)
                return bad("dense needs a PackedDense, x and one result", found), -1;
            in->obj = Py_NewRef(obj);
        } else if (in->op == SVX_OP_EXTERNAL) {
            /* a family's kernel, or generated code run as tier 2 (its self is NULL) */
            const char *name = PyCapsule_IsValid(obj, SV_GEN_KERNEL) ? SV_GEN_KERNEL
                                                                      : "shapevm.exec_kernel";
            sv_exec_kernel *k =
                PyCapsule_IsValid(obj, name) ? PyCapsule_GetPointer(obj, name) : NULL;
            if (!k)
                return bad("an external instruction needs a kernel capsule of the library",
                           found), -1;
            in->kernel = k->run;
            in->kself = k->self;
            in->obj = Py_NewRef(obj);
        } else if ((in->op == SVX_OP_MATMUL && (in->nin != 2 || in->nout != 1)) ||
                   (in->op == SVX_OP_COPY && (in->nin != 1 || in->nout != 1)) ||
                   ((in->op == SVX_OP_FILL || in->op == SVX_OP_IOTA) &&
                    (in->nin != 0 || in->nout != 1))) {
            return bad("wrong operand count", found), -1;
        }
        const char *rule = operand_rule(e, in);
        if (rule) return bad_at("operands of the wrong dtype or rank", rule, found), -1;
    }
    return 0;
}

/* The optional spec array `name`, one row of `width` int32 per output, copied into *rows
 * (left NULL when the spec has none). */
static int read_output_rows(Executor *e, PyObject *spec, const char *name, int width,
                            void **rows) {
    if (!PyDict_GetItemString(spec, name)) return 0;
    PyArrayObject *a = spec_array(spec, name, NPY_INT32, width);
    if (!a) return -1;
    if (PyArray_DIM(a, 0) != e->noutputs) {
        Py_DECREF(a);
        return bad("one row per output", name), -1;
    }
    *rows = copy_out(a, 4);
    Py_DECREF(a);
    return *rows ? 0 : (PyErr_NoMemory(), -1);
}

/* The optional "output_perms": per output a row of SVX_MAXDIM, all -1 (the slot itself) or
 * a permutation of its slot's axes followed by -1s. */
static int read_output_perms(Executor *e, PyObject *spec) {
    if (read_output_rows(e, spec, "output_perms", SVX_MAXDIM, (void **)&e->output_perm) < 0)
        return -1;
    for (int o = 0; e->output_perm && o < e->noutputs; o++) {
        const int32_t *r = e->output_perm[o];
        if (r[0] != -1 && e->slots[e->outputs[o]].kind != SVX_S_OUTPUT) {
            char found[64];
            snprintf(found, sizeof found, "output_perms row %d", o);
            return bad_at("a permutation of an output that is an argument or its view",
                          "all -1 (a view of an argument is returned as it is)", found), -1;
        }
        int nd = e->slots[e->outputs[o]].ndim, seen = 0;
        bool ok = true;
        for (int d = 0; d < SVX_MAXDIM && ok; d++) {
            if (r[0] == -1) {
                ok = r[d] == -1;
                continue;
            }
            ok = d < nd ? in_range(r[d], nd) && !(seen & (1 << r[d])) : r[d] == -1;
            if (ok && d < nd) seen |= 1 << r[d];
        }
        if (ok) continue;
        char found[160];
        int at = snprintf(found, sizeof found, "output_perms row %d, for an output of rank %d:", o,
                          nd);
        for (int d = 0; d < SVX_MAXDIM && at > 0 && (size_t)at < sizeof found; d++)
            at += snprintf(found + at, sizeof found - (size_t)at, " %d", r[d]);
        return bad(r[0] == -1 ? "a row neither all -1 nor a permutation of its output's axes"
                              : "a row not a permutation of its output's axes followed by -1s",
                   found),
               -1;
    }
    return 0;
}

/* The optional "output_shapes": per output a row of 1 + SVX_MAXDIM, -1 (the slot's own
 * shape) or a rank and that many defined heap cells: the shape the output slot's array
 * is returned in, a reshaped view of it (the slot is contiguous), as NumPy returns a
 * function's last y.reshape(...).  Only for output slots without a permutation. */
static int read_output_shapes(Executor *e, PyObject *spec, const uint8_t *defined) {
    if (read_output_rows(e, spec, "output_shapes", SVX_MAXDIM + 1, (void **)&e->output_shape) <
        0)
        return -1;
    for (int o = 0; e->output_shape && o < e->noutputs; o++) {
        const int32_t *r = e->output_shape[o];
        if (r[0] == -1) continue;
        char found[64];
        snprintf(found, sizeof found, "output_shapes row %d", o);
        if (e->slots[e->outputs[o]].kind != SVX_S_OUTPUT ||
            (e->output_perm && e->output_perm[o][0] != -1))
            return bad_at("a shape for an output that is not an output slot, or is permuted",
                          "-1 in its first field", found), -1;
        if (!in_range(r[0], SVX_MAXDIM + 1))
            return bad_at("a rank out of range", "-1 or a rank of 0 to 8", found), -1;
        for (int d = 0; d < r[0]; d++)
            if (!in_range(r[1 + d], e->nheap) || !defined[r[1 + d]])
                return bad_at("a dimension that is not a defined heap cell",
                              "cells the dimension program defines", found), -1;
    }
    return 0;
}

PyObject *sv_exec_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *names[] = {"spec", NULL};
    PyObject *spec;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!", names, &PyDict_Type, &spec)) return NULL;
    Executor *e = (Executor *)type->tp_alloc(type, 0);
    if (!e) return NULL;
    PyArrayObject *heap = NULL, *prog = NULL, *checks = NULL, *slots = NULL, *bufs = NULL,
                  *outs = NULL, *ia = NULL, *fa = NULL;
    PyObject *objs = NULL;
    uint8_t *defined = NULL;
    heap = spec_array(spec, "heap", NPY_INT64, 0);
    prog = heap ? spec_array(spec, "dimprog", NPY_INT64, 4) : NULL;
    checks = prog ? spec_array(spec, "checks", NPY_INT64, 2) : NULL;
    slots = checks ? spec_array(spec, "slots", NPY_INT32, SLOT_FIELDS) : NULL;
    bufs = slots ? spec_array(spec, "buffers", NPY_INT32, 0) : NULL;
    outs = bufs ? spec_array(spec, "outputs", NPY_INT32, 0) : NULL;
    ia = outs ? spec_array(spec, "instrs", NPY_INT32, INSTR_FIELDS) : NULL;
    fa = ia ? spec_array(spec, "fattrs", NPY_FLOAT32, SVX_NFATTR) : NULL;
    if (!fa) goto fail;
    PyObject *nv = PyDict_GetItemString(spec, "nvars"), *ni = PyDict_GetItemString(spec, "ninputs");
    PyObject *cl = PyDict_GetItemString(spec, "consts");
    objs = PyDict_GetItemString(spec, "objects");
    PyObject *th = PyDict_GetItemString(spec, "threads");
    if (!nv || !ni || !cl || !objs || !PyList_Check(cl) || !PyList_Check(objs)) {
        bad("missing nvars, ninputs, consts or objects", "spec");
        goto fail;
    }
    e->nvars = (int)PyLong_AsLong(nv);
    if (PyErr_Occurred()) goto fail;
    e->ninputs = (int)PyLong_AsLong(ni);
    if (PyErr_Occurred()) goto fail;
    e->threads = th ? (int)PyLong_AsLong(th) : 0;
    if (PyErr_Occurred()) goto fail;
    e->nheap = (int)PyArray_DIM(heap, 0);
    e->nprog = (int)PyArray_DIM(prog, 0);
    e->nchecks = (int)PyArray_DIM(checks, 0);
    e->nslots = (int)PyArray_DIM(slots, 0);
    e->nbuffers = (int)PyArray_DIM(bufs, 0);
    e->noutputs = (int)PyArray_DIM(outs, 0);
    e->ninstrs = (int)PyArray_DIM(ia, 0);
    if (e->nvars < 0 || e->nvars > e->nheap || e->ninputs < 0 || e->nslots > 1 << 20 ||
        PyArray_DIM(fa, 0) != e->ninstrs || PyList_GET_SIZE(objs) != e->ninstrs) {
        bad("inconsistent sizes", "spec");
        goto fail;
    }
    e->heap0 = copy_out(heap, 8);
    e->prog = copy_out(prog, 8); /* rows of 4 int64 */
    e->checks = copy_out(checks, 8); /* rows of 2 int64 */
    e->buffers = copy_out(bufs, 4);
    e->outputs = copy_out(outs, 4);
    e->slots = PyMem_Calloc((size_t)e->nslots + 1, sizeof(svx_slot));
    e->input_slot = PyMem_Malloc(sizeof(int32_t) * ((size_t)e->ninputs + 1));
    e->instrs = PyMem_Calloc((size_t)e->ninstrs + 1, sizeof(svx_instr));
    e->prof = PyMem_Calloc(2 * (size_t)e->ninstrs + 2, sizeof(int64_t));
    e->consts = PyList_New(0);
    e->keep = PyList_New(0);
    if (!e->keep || !e->heap0 || !e->prog || !e->checks || !e->buffers || !e->outputs || !e->slots ||
        !e->input_slot || !e->instrs || !e->consts || !e->prof) {
        PyErr_NoMemory();
        goto fail;
    }
    for (int i = 0; i < e->ninputs; i++) e->input_slot[i] = -1;
    defined = check_dimprog(e);
    if (!defined) goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(cl); i++) {
        PyObject *c = PyArray_FROMANY(PyList_GET_ITEM(cl, i), NPY_NOTYPE, 0, SVX_MAXDIM,
                                      NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED);
        if (!c || PyList_Append(e->consts, c) < 0) {
            Py_XDECREF(c);
            goto fail;
        }
        Py_DECREF(c);
    }
    e->const_data = PyMem_Malloc(sizeof(char *) * ((size_t)PyList_GET_SIZE(e->consts) + 1));
    if (!e->const_data) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(e->consts); i++)
        e->const_data[i] = PyArray_BYTES((PyArrayObject *)PyList_GET_ITEM(e->consts, i));
    const int32_t *sv = PyArray_DATA(slots);
    for (int s = 0; s < e->nslots; s++) {
        const int32_t *r = sv + (size_t)s * SLOT_FIELDS;
        svx_slot *sl = &e->slots[s];
        sl->kind = r[0];
        sl->dtype = r[1];
        sl->ndim = r[2];
        sl->index = r[3];
        sl->viewop = r[4];
        for (int d = 0; d < SVX_MAXDIM; d++) {
            sl->dims[d] = r[5 + d];
            sl->param[d] = r[5 + SVX_MAXDIM + d];
            sl->param2[d] = r[5 + 2 * SVX_MAXDIM + d];
        }
    }
    if (check_slots(e, defined) < 0 || check_instrs(e, ia, fa, objs) < 0 ||
        collect_dimcells(e) < 0 || read_output_perms(e, spec) < 0 ||
        read_output_shapes(e, spec, defined) < 0)
        goto fail;
    PyMem_Free(defined);
    Py_DECREF(heap);
    Py_DECREF(prog);
    Py_DECREF(checks);
    Py_DECREF(slots);
    Py_DECREF(bufs);
    Py_DECREF(outs);
    Py_DECREF(ia);
    Py_DECREF(fa);
    sv_pool_start(); /* its first call shares its jobs with workers that are already up */
    return (PyObject *)e;
fail:
    PyMem_Free(defined);
    Py_XDECREF(heap);
    Py_XDECREF(prog);
    Py_XDECREF(checks);
    Py_XDECREF(slots);
    Py_XDECREF(bufs);
    Py_XDECREF(outs);
    Py_XDECREF(ia);
    Py_XDECREF(fa);
    Py_DECREF(e);
    return NULL;
}
