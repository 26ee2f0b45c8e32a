/* shapevm._native.Executor: a lowered region (exec.h) and the one C call that runs it.
 *
 * The constructor takes the region as plain arrays (built by shapevm.jit.backend) and
 * checks every index in them before keeping them, so that a call can trust them.  A call
 * (METH_FASTCALL, any number of threads at once) binds the dimension heap from the inputs'
 * shapes, runs the dimension program and the checks, sizes this thread's arena, allocates
 * the outputs, releases the GIL and runs the instructions.  Inputs that do not match
 * (dtype, rank, a dimension, a constraint) raise ExecMismatch with a short reason: the
 * caller's binder then produces the user-facing message.
 */
#include "pyutil.h"
#include "exec.h"
#include "svgen_env.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

PyObject *sv_ExecMismatch;

#define SLOT_FIELDS (5 + 3 * SVX_MAXDIM)
#define INSTR_FIELDS (3 + SVX_MAXIN + SVX_MAXOUT + SVX_NIATTR)

typedef struct {
    PyObject_HEAD int nvars, nheap, nprog, nchecks, nslots, nbuffers, noutputs, ninstrs,
        ninputs;
    int64_t *heap0;    /* initial heap: constants, SVX_UNSET elsewhere */
    int64_t (*prog)[4];
    int64_t (*checks)[2];
    svx_slot *slots;
    int32_t *buffers;  /* heap cell of each buffer's byte size */
    int32_t *outputs;  /* slot of each output */
    int32_t *input_slot; /* slot of each argument */
    int32_t (*dimcells)[2]; /* each cell a computed slot's dim or a buffer's size reads, once:
                             * (cell, slot or -1 - buffer) -- checked >= 0 at each call */
    int ndimcells;
    svx_instr *instrs;
    PyObject *consts;  /* list of contiguous arrays (kept alive) */
    PyObject *keep;    /* generated kernels ever patched in (their code stays loaded) */
    char **const_data;
    int threads;
    _Atomic int64_t calls, mismatches;
} Executor;

static const int npy_of[SVX_NDTYPES] = {NPY_FLOAT32, NPY_FLOAT64, NPY_INT32, NPY_INT64,
                                        NPY_BOOL,    NPY_UINT8,   NPY_INT8,  NPY_INT16,
                                        NPY_FLOAT16};

/* -- the thread's arena ------------------------------------------------------------------ */
/* One grow-only arena per thread that ran a region; every live one is on a list that
 * arena_pools() reports (the monitor's memory table).  The list changes when a thread's
 * arena is made or freed, never per call. */
static pthread_key_t arena_key;
static pthread_once_t arena_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
typedef struct arena_t {
    char *data;
    size_t size;
    _Atomic size_t used; /* the most one call asked for */
    _Atomic int64_t grows;
    unsigned long thread;
    struct arena_t *next, *prev;
} arena_t;
static arena_t *arenas;

static void arena_free(void *p) {
    arena_t *a = p;
    if (!a) return;
    pthread_mutex_lock(&arena_lock);
    if (a->prev) a->prev->next = a->next;
    else arenas = a->next;
    if (a->next) a->next->prev = a->prev;
    pthread_mutex_unlock(&arena_lock);
    sv_scratch_free(a->data, a->size);
    free(a);
}
static void arena_init(void) { pthread_key_create(&arena_key, arena_free); }

static char *arena_get(size_t bytes) {
    pthread_once(&arena_once, arena_init);
    arena_t *a = pthread_getspecific(arena_key);
    if (!a) {
        a = calloc(1, sizeof *a);
        if (!a || pthread_setspecific(arena_key, a) != 0) {
            free(a);
            return NULL;
        }
        a->thread = (unsigned long)pthread_self();
        pthread_mutex_lock(&arena_lock);
        a->next = arenas;
        if (arenas) arenas->prev = a;
        arenas = a;
        pthread_mutex_unlock(&arena_lock);
    }
    if (a->size < bytes) {
        size_t want; /* grow-only, with room for the next shapes */
        char *p = sv_scratch_grow(a->data, a->size, bytes + bytes / 4, &want);
        if (!p) return NULL;
        pthread_mutex_lock(&arena_lock); /* arena_pools reads size under the lock */
        a->data = p;
        a->size = want;
        pthread_mutex_unlock(&arena_lock);
        atomic_fetch_add_explicit(&a->grows, 1, memory_order_relaxed);
    }
    if (atomic_load_explicit(&a->used, memory_order_relaxed) < bytes)
        atomic_store_explicit(&a->used, bytes, memory_order_relaxed);
    return a->data ? a->data : (char *)a; /* any non-NULL pointer for 0 bytes */
}

/* arena_pools() -> [{thread, capacity_bytes, used_bytes, grows}] of every live arena */
static PyObject *py_arena_pools(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    pthread_mutex_lock(&arena_lock);
    for (arena_t *a = arenas; a; a = a->next) {
        PyObject *row = Py_BuildValue(
            "{s:k,s:n,s:n,s:L}", "thread", a->thread, "capacity_bytes", (Py_ssize_t)a->size,
            "used_bytes", (Py_ssize_t)atomic_load(&a->used), "grows",
            (long long)atomic_load(&a->grows));
        if (!row || PyList_Append(out, row) < 0) {
            Py_XDECREF(row);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(row);
    }
    pthread_mutex_unlock(&arena_lock);
    return out;
}

PyMethodDef sv_exec_methods[] = {
    {"arena_pools", py_arena_pools, METH_NOARGS,
     "arena_pools() -> the executor's per-thread arenas: thread, capacity, use, grows"},
    {NULL, NULL, 0, NULL}};

/* -- construction ------------------------------------------------------------------------- */
static void exec_dealloc(Executor *self) {
    for (int i = 0; self->instrs && i < self->ninstrs; i++) Py_XDECREF(self->instrs[i].obj);
    PyMem_Free(self->heap0);
    PyMem_Free(self->prog);
    PyMem_Free(self->checks);
    PyMem_Free(self->slots);
    PyMem_Free(self->buffers);
    PyMem_Free(self->outputs);
    PyMem_Free(self->input_slot);
    PyMem_Free(self->dimcells);
    PyMem_Free(self->instrs);
    PyMem_Free(self->const_data);
    Py_XDECREF(self->consts);
    Py_XDECREF(self->keep);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

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
    for (int c = 0; c < e->nheap; c++) def[c] = c < e->nvars || e->heap0[c] != SVX_UNSET;
    char where[96];
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
                if (PyArray_NDIM(c) != sl->ndim || PyArray_TYPE(c) != npy_of[sl->dtype])
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
                        sl->param2[d] < 1)
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
    for (int o = 0; o < e->noutputs; o++)
        if (!in_range(e->outputs[o], e->nslots) || e->slots[e->outputs[o]].kind != SVX_S_OUTPUT)
            return bad("output is not an output slot", "outputs"), -1;
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
            if (sv_packed_dense_unwrap(obj, NULL, NULL) < 0 || in->nin < 1 || in->nout != 1)
                return bad("dense needs a PackedDense, x and one result", found), -1;
            in->obj = Py_NewRef(obj);
        } else if (in->op == SVX_OP_EXTERNAL) {
            /* a family's kernel, or generated code run as tier 2 (its self is NULL) */
            const char *name = PyCapsule_IsValid(obj, SV_GEN_KERNEL) ? SV_GEN_KERNEL
                                                                      : "shapevm.exec_kernel";
            sv_exec_kernel *k = PyCapsule_GetPointer(obj, name);
            if (!k) return -1;
            in->kernel = k->run;
            in->kself = k->self;
            in->obj = Py_NewRef(obj);
        } else if ((in->op == SVX_OP_MATMUL && (in->nin != 2 || in->nout != 1)) ||
                   (in->op == SVX_OP_COPY && (in->nin != 1 || in->nout != 1)) ||
                   (in->op == SVX_OP_FILL && (in->nin != 0 || in->nout != 1))) {
            return bad("wrong operand count", found), -1;
        }
        const char *rule = operand_rule(e, in);
        if (rule) return bad_at("operands of the wrong dtype or rank", rule, found), -1;
    }
    return 0;
}

static PyObject *exec_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
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
    e->ninputs = (int)PyLong_AsLong(ni);
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
    e->consts = PyList_New(0);
    e->keep = PyList_New(0);
    if (!e->keep || !e->heap0 || !e->prog || !e->checks || !e->buffers || !e->outputs || !e->slots ||
        !e->input_slot || !e->instrs || !e->consts) {
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
        collect_dimcells(e) < 0)
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

/* -- a call ------------------------------------------------------------------------------- */
/* ExecMismatch with fmt's two %lld filled in (use 0 where the message has fewer). */
static PyObject *mismatch(Executor *e, const char *fmt, long long a, long long b) {
    char msg[200];
    snprintf(msg, sizeof msg, fmt, a, b);
    atomic_fetch_add_explicit(&e->mismatches, 1, memory_order_relaxed);
    PyErr_SetString(sv_ExecMismatch, msg);
    return NULL;
}

static PyObject *mismatch0(Executor *e, const char *msg) {
    atomic_fetch_add_explicit(&e->mismatches, 1, memory_order_relaxed);
    PyErr_SetString(sv_ExecMismatch, msg);
    return NULL;
}

static int64_t floordiv64(int64_t x, int64_t y) {
    int64_t q = x / y;
    return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
}

/* Run the dimension program: 0, -1 on a division by zero, -2 when a result does not fit
 * in int64 (hostile dimension values must not wrap into small sizes). */
static int run_dimprog(const Executor *e, int64_t *h) {
    for (int i = 0; i < e->nprog; i++) {
        const int64_t *p = e->prog[i];
        int64_t a = h[p[1]], b = (p[0] == SVX_D_ADDC || p[0] == SVX_D_MULC) ? p[2] : h[p[2]];
        int64_t r;
        switch (p[0]) {
        case SVX_D_ADD: case SVX_D_ADDC:
            if (__builtin_add_overflow(a, b, &r)) return -2;
            break;
        case SVX_D_SUB:
            if (__builtin_sub_overflow(a, b, &r)) return -2;
            break;
        case SVX_D_MUL: case SVX_D_MULC:
            if (__builtin_mul_overflow(a, b, &r)) return -2;
            break;
        case SVX_D_FLOORDIV: case SVX_D_MOD:
            if (b == 0) return -1;
            if (a == INT64_MIN && b == -1) return -2;
            if (p[0] == SVX_D_FLOORDIV) {
                r = floordiv64(a, b);
            } else { /* Python's sign: that of b */
                r = a % b;
                if (r != 0 && ((r < 0) != (b < 0))) r += b;
            }
            break;
        case SVX_D_MAX: r = a > b ? a : b; break;
        default: r = a < b ? a : b; break;
        }
        h[p[3]] = r;
    }
    return 0;
}

static const char *const dimprog_error[] = {
    "", "division by zero in a dimension",
    "a dimension does not fit in int64 (a variable's value is far too large)"};

static void contiguous_strides(svx_tensor *t) {
    int64_t s = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        t->strides[d] = s;
        s *= t->shape[d];
    }
}

/* Resolve a view slot from its (already resolved) base, checking that every element it
 * reaches lies in the base for these dimension values: 0, or -1 with msg filled in. */
static int resolve_view(const svx_slot *sl, const svx_tensor *base, const int64_t *h,
                        svx_tensor *t, char *msg, size_t size) {
    size_t isz = (size_t)svx_itemsize[sl->dtype];
    t->data = base->data;
    switch (sl->viewop) {
    case SVX_V_TRANSPOSE:
        for (int d = 0; d < sl->ndim; d++) {
            if (t->shape[d] != base->shape[sl->param[d]]) {
                snprintf(msg, size, "transpose: axis %d has %lld elements, its base axis %d "
                         "has %lld", d, (long long)t->shape[d], sl->param[d],
                         (long long)base->shape[sl->param[d]]);
                return -1;
            }
            t->strides[d] = base->strides[sl->param[d]];
        }
        break;
    case SVX_V_SLICE: {
        int64_t off = 0;
        for (int d = 0; d < sl->ndim; d++) {
            int64_t start = h[sl->param[d]], step = sl->param2[d], n = t->shape[d];
            /* the last element taken, start + (n - 1) * step, lies in [0, base) */
            if (n > 0 && (start < 0 || start >= base->shape[d] ||
                          (n - 1) > (base->shape[d] - 1 - start) / step)) {
                snprintf(msg, size, "slice: axis %d takes %lld elements from %lld by %lld of "
                         "a base of %lld", d, (long long)n, (long long)start, (long long)step,
                         (long long)base->shape[d]);
                return -1;
            }
            if (n > 0) off += start * base->strides[d];
            t->strides[d] = base->strides[d] * step;
        }
        t->data = base->data + off * (int64_t)isz;
        break;
    }
    case SVX_V_RESHAPE: {
        int64_t expect = 1, count = 1;
        for (int d = base->ndim - 1; d >= 0; d--) { /* the base must be contiguous */
            if (base->shape[d] != 1 && base->strides[d] != expect) {
                snprintf(msg, size, "reshape of a base that is not contiguous");
                return -1;
            }
            expect *= base->shape[d];
        }
        for (int d = 0; d < sl->ndim; d++) count *= t->shape[d]; /* dims checked >= 0 */
        if (count != expect && count != 0) {
            snprintf(msg, size, "reshape: %lld elements from a base of %lld", (long long)count,
                     (long long)expect);
            return -1;
        }
        contiguous_strides(t);
        break;
    }
    case SVX_V_SELECT: {
        int used = 0;
        for (int d = 0; d < sl->ndim; d++) {
            if (sl->param[d] < 0) {
                if (t->shape[d] != 1) goto select_bad;
                t->strides[d] = 0;
            } else {
                if (base->shape[sl->param[d]] != t->shape[d]) goto select_bad;
                t->strides[d] = base->strides[sl->param[d]];
                used |= 1 << sl->param[d];
            }
        }
        for (int d = 0; d < base->ndim; d++)
            if (!(used & (1 << d)) && base->shape[d] != 1) goto select_bad;
        break;
    select_bad:
        snprintf(msg, size, "select: axes that differ from their base's");
        return -1;
    }
    default: { /* broadcast: right-aligned */
        int lead = sl->ndim - base->ndim;
        for (int d = 0; d < sl->ndim; d++) {
            int bd = d - lead;
            if (bd >= 0 && base->shape[bd] != 1 && base->shape[bd] != t->shape[d]) {
                snprintf(msg, size, "broadcast: axis %d of %lld elements from a base axis of "
                         "%lld", d, (long long)t->shape[d], (long long)base->shape[bd]);
                return -1;
            }
            t->strides[d] = (bd < 0 || base->shape[bd] == 1) ? 0 : base->strides[bd];
        }
        break;
    }
    }
    return 0;
}

/* Whether the leading dims of t (all but the last) fold into rows of one stride. */
static int rows_fold(const svx_tensor *t) {
    for (int d = 0; d + 2 < t->ndim; d++)
        if (t->shape[d] > 1 && t->strides[d] != t->strides[d + 1] * t->shape[d + 1]) return 0;
    return 1;
}

/* A dense layer's operands against its packed weights: NULL if they fit, else why. */
static const char *dense_misfit(const svx_tensor *x, const svx_tensor *y, const svx_tensor *r,
                                const sv_packed_b *b) {
    static _Thread_local char msg[160];
    if (x->shape[x->ndim - 1] != b->k || y->shape[y->ndim - 1] != b->n) {
        snprintf(msg, sizeof msg, "dense: x [..., %lld] -> y [..., %lld] against weights packed "
                 "for %lld -> %lld", (long long)x->shape[x->ndim - 1],
                 (long long)y->shape[y->ndim - 1], (long long)b->k, (long long)b->n);
        return msg;
    }
    for (int d = 0; d < x->ndim - 1; d++)
        if (x->shape[d] != y->shape[d] || (r && r->shape[d] != y->shape[d]))
            return "dense: x, its result and residual differ in a leading dimension";
    if (r && r->shape[r->ndim - 1] != b->n) return "dense: a residual of another width";
    if (!rows_fold(x) || !rows_fold(y) || (r && !rows_fold(r)))
        return "dense: operands whose rows are not evenly spaced";
    return NULL;
}

/* A batched product's shapes: a [..., m, k] @ b [..., k, n] -> c [..., m, n], the batch
 * dims of a and b 1 or c's. */
static const char *matmul_misfit(const svx_tensor *a, const svx_tensor *b, const svx_tensor *c) {
    int64_t m = c->shape[c->ndim - 2], n = c->shape[c->ndim - 1];
    if (a->shape[a->ndim - 2] != m || b->shape[b->ndim - 1] != n ||
        a->shape[a->ndim - 1] != b->shape[b->ndim - 2])
        return "matmul: a [m, k] @ b [k, n] -> c [m, n] with other m, k or n";
    for (int d = 0; d < c->ndim - 2; d++) {
        int da = d - (c->ndim - a->ndim), db = d - (c->ndim - b->ndim);
        if ((da >= 0 && a->shape[da] != 1 && a->shape[da] != c->shape[d]) ||
            (db >= 0 && b->shape[db] != 1 && b->shape[db] != c->shape[d]))
            return "matmul: batch dimensions that do not broadcast to the result's";
    }
    return NULL;
}

static int run_instr(const Executor *e, const svx_instr *in, svx_tensor *t, const char **err) {
    switch (in->op) {
    case SVX_OP_DENSE: {
        const sv_packed_b *b;
        const float *bias;
        sv_packed_dense_unwrap(in->obj, &b, &bias);
        const svx_tensor *x = &t[in->in[0]], *y = &t[in->out[0]];
        const svx_tensor *r = in->nin > 1 ? &t[in->in[1]] : NULL;
        if ((*err = dense_misfit(x, y, r, b)) != NULL) return -1;
        int64_t m = 1;
        for (int d = 0; d < x->ndim - 1; d++) m *= x->shape[d];
        /* rows: x, y (and residual) are laid out as [m, k] with unit inner stride */
        int64_t lda = x->ndim >= 2 ? x->strides[x->ndim - 2] : b->k;
        int64_t ldc = y->ndim >= 2 ? y->strides[y->ndim - 2] : b->n;
        if ((x->ndim && x->strides[x->ndim - 1] != 1 && b->k > 1) ||
            (y->ndim && y->strides[y->ndim - 1] != 1 && b->n > 1)) {
            *err = "dense: operands without unit inner stride";
            return -1;
        }
        sv_epilogue ep = {.bias = bias, .residual = r ? (const float *)r->data : NULL,
                          .ldr = r && r->ndim >= 2 ? r->strides[r->ndim - 2] : b->n,
                          .alpha = in->fattr[0], .act = in->iattr[0]};
        sv_dense(m, (const float *)x->data, lda, b, (float *)y->data, ldc, &ep, e->threads);
        return 0;
    }
    case SVX_OP_MATMUL:
        if ((*err = matmul_misfit(&t[in->in[0]], &t[in->in[1]], &t[in->out[0]])) != NULL)
            return -1;
        if (svx_matmul(&t[in->in[0]], &t[in->in[1]], &t[in->out[0]], in->fattr[0], e->threads)) {
            *err = "matmul: operands that do not fit";
            return -1;
        }
        return 0;
    case SVX_OP_COPY:
        if (svx_copy(&t[in->in[0]], &t[in->out[0]])) {
            *err = "copy: shapes or dtypes differ";
            return -1;
        }
        return 0;
    case SVX_OP_FILL:
        if (svx_fill(&t[in->out[0]], in->fattr[0])) {
            *err = "fill: unsupported dtype";
            return -1;
        }
        return 0;
    case SVX_OP_EXTERNAL: {
        svx_tensor ins[SVX_MAXIN], outs[SVX_MAXOUT];
        for (int k = 0; k < in->nin; k++) ins[k] = t[in->in[k]];
        for (int k = 0; k < in->nout; k++) outs[k] = t[in->out[k]];
        for (int g = 0; g < SVX_MAXGEN; g++) {
            svx_kernel_fn fn = atomic_load_explicit(&((svx_instr *)in)->gen[g],
                                                    memory_order_acquire);
            if (!fn) continue;
            int rc = fn(in->gen_self, ins, in->nin, outs, in->nout, in->iattr, in->fattr, err);
            if (rc != 1) return rc; /* 1: not for these shapes, try the next */
        }
        return in->kernel(in->kself, ins, in->nin, outs, in->nout, in->iattr, in->fattr, err);
    }
    default: *err = "unknown instruction"; return -1;
    }
}

static PyObject *exec_call(Executor *e, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                           int bind_only) {
    if (kw && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Executor takes positional arrays only");
        return NULL;
    }
    /* the variables' values may come first, as a tuple, for regions whose variables are
     * not all plain dimensions of inputs */
    PyObject *dims = NULL;
    if (nargs == e->ninputs + 1 && PyTuple_Check(args[0])) {
        dims = args[0];
        args++;
        nargs--;
    }
    if (nargs != e->ninputs)
        return mismatch(e, "expected %lld arrays, found %lld", e->ninputs, (long long)nargs);
    int64_t hstack[256];
    svx_tensor tstack[64];
    int64_t *h = e->nheap <= 256 ? hstack : PyMem_Malloc(sizeof(int64_t) * (size_t)e->nheap);
    svx_tensor *t = e->nslots <= 64 ? tstack : PyMem_Malloc(sizeof(svx_tensor) * (size_t)e->nslots);
    PyObject *keep[SVX_MAXIN * 4];
    PyObject **held = e->ninputs <= SVX_MAXIN * 4 ? keep
                                                  : PyMem_Malloc(sizeof(PyObject *) * (size_t)e->ninputs);
    PyObject *result = NULL;
    int nheld = 0;
    if (!h || !t || !held) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(h, e->heap0, sizeof(int64_t) * (size_t)e->nheap);
    if (dims) {
        if (PyTuple_GET_SIZE(dims) != e->nvars) {
            mismatch(e, "expected %lld dimension values, found %lld", e->nvars,
                     (long long)PyTuple_GET_SIZE(dims));
            goto done;
        }
        for (int v = 0; v < e->nvars; v++) {
            h[v] = PyLong_AsLongLong(PyTuple_GET_ITEM(dims, v));
            if (h[v] == -1 && PyErr_Occurred()) goto done;
        }
    }
    /* inputs: type, rank, contiguity; bind the variables */
    for (int i = 0; i < e->ninputs; i++) {
        const svx_slot *sl = &e->slots[e->input_slot[i]];
        PyObject *o = args[i];
        if (!PyArray_Check(o)) {
            mismatch(e, "argument %lld is not an array (%lld)", i, 0);
            goto done;
        }
        PyArrayObject *a = (PyArrayObject *)o;
        if (PyArray_TYPE(a) != npy_of[sl->dtype] || PyArray_NDIM(a) != sl->ndim ||
            !PyArray_ISNOTSWAPPED(a)) {
            mismatch(e, "argument %lld has another dtype or rank (%lld)", i, PyArray_NDIM(a));
            goto done;
        }
        if (!PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a)) {
            a = (PyArrayObject *)PyArray_FROMANY(o, PyArray_TYPE(a), 0, 0,
                                                 NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED);
            if (!a) goto done;
            held[nheld++] = (PyObject *)a;
        }
        svx_tensor *ti = &t[e->input_slot[i]];
        ti->data = PyArray_BYTES(a);
        ti->ndim = sl->ndim;
        ti->dtype = sl->dtype;
        for (int d = 0; d < sl->ndim; d++) {
            ti->shape[d] = PyArray_DIM(a, d);
            int c = sl->dims[d];
            if (c < e->nvars && h[c] == SVX_UNSET) h[c] = ti->shape[d];
        }
        contiguous_strides(ti);
    }
    for (int v = 0; v < e->nvars; v++)
        if (h[v] == SVX_UNSET) {
            mismatch(e, "dimension variable %lld is not bound by any input (%lld)", v, 0);
            goto done;
        }
    int rc = run_dimprog(e, h);
    if (rc < 0) {
        mismatch0(e, dimprog_error[-rc]);
        goto done;
    }
    for (int i = 0; i < e->ninputs; i++) {
        const svx_slot *sl = &e->slots[e->input_slot[i]];
        const svx_tensor *ti = &t[e->input_slot[i]];
        for (int d = 0; d < sl->ndim; d++)
            if (h[sl->dims[d]] != ti->shape[d]) {
                mismatch(e, "argument %lld: dimension %lld does not match", i, d);
                goto done;
            }
    }
    for (int c = 0; c < e->nchecks; c++) {
        int64_t v = h[e->checks[c][0]];
        if (e->checks[c][1] == 0 ? v < 0 : v != 0) {
            mismatch(e, "constraint %lld does not hold (%lld)", c, 0);
            goto done;
        }
    }
    if (bind_only) { /* the variables' values, for the caller's bookkeeping */
        result = PyTuple_New(e->nvars);
        for (int v = 0; result && v < e->nvars; v++) {
            PyObject *val = PyLong_FromLongLong(h[v]);
            if (!val) Py_CLEAR(result);
            else PyTuple_SET_ITEM(result, v, val);
        }
        goto done;
    }
    for (int i = 0; i < e->ndimcells; i++) { /* sizes first: nothing below wraps */
        int64_t v = h[e->dimcells[i][0]];
        if (v < 0) {
            int s = e->dimcells[i][1];
            if (s >= 0)
                mismatch(e, "slot %lld has a negative dimension (%lld)", s, v);
            else
                mismatch(e, "buffer %lld has a negative size (%lld)", -1 - s, v);
            goto done;
        }
    }
    /* the outputs, then the arena: allocating an array may run Python code (a collection
     * calls finalizers), which may run a region on this thread and grow its arena */
    result = PyTuple_New(e->noutputs);
    if (!result) goto done;
    for (int o = 0; o < e->noutputs; o++) {
        const svx_slot *sl = &e->slots[e->outputs[o]];
        npy_intp shape[SVX_MAXDIM];
        for (int d = 0; d < sl->ndim; d++) shape[d] = (npy_intp)h[sl->dims[d]];
        PyObject *arr = PyArray_SimpleNew(sl->ndim, shape, npy_of[sl->dtype]);
        if (!arr) {
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SET_ITEM(result, o, arr);
    }
    /* the arena: each buffer 64-byte aligned; from here to the run no Python code runs */
    size_t total = 0, offsets_stack[64];
    size_t *offsets = e->nbuffers <= 64 ? offsets_stack
                                        : PyMem_Malloc(sizeof(size_t) * (size_t)e->nbuffers);
    if (!offsets) {
        Py_CLEAR(result);
        PyErr_NoMemory();
        goto done;
    }
    for (int b = 0; b < e->nbuffers; b++) {
        offsets[b] = total;
        if (__builtin_add_overflow(total, ((size_t)h[e->buffers[b]] + 63) & ~(size_t)63,
                                   &total) ||
            total > (size_t)PTRDIFF_MAX) {
            Py_CLEAR(result);
            mismatch(e, "the arena would exceed the address space (buffer %lld) %lld", b, 0);
            goto offsets_done;
        }
    }
    char *arena = arena_get(total);
    if (!arena) {
        Py_CLEAR(result);
        PyErr_NoMemory();
        goto offsets_done;
    }
    for (int s = 0; s < e->nslots; s++) {
        const svx_slot *sl = &e->slots[s];
        svx_tensor *ts = &t[s];
        if (sl->kind == SVX_S_INPUT) continue;
        ts->ndim = sl->ndim;
        ts->dtype = sl->dtype;
        for (int d = 0; d < sl->ndim; d++) ts->shape[d] = h[sl->dims[d]];
        switch (sl->kind) {
        case SVX_S_CONST:
            ts->data = e->const_data[sl->index];
            contiguous_strides(ts);
            break;
        case SVX_S_BUFFER: {
            uint64_t bytes = (uint64_t)svx_itemsize[sl->dtype];
            for (int d = 0; d < sl->ndim; d++)
                if (__builtin_mul_overflow(bytes, (uint64_t)ts->shape[d], &bytes))
                    bytes = UINT64_MAX;
            if (bytes > (uint64_t)h[e->buffers[sl->index]]) {
                Py_CLEAR(result);
                mismatch(e, "slot %lld does not fit its buffer (%lld bytes)", s,
                         h[e->buffers[sl->index]]);
                goto offsets_done;
            }
            ts->data = arena + offsets[sl->index];
            contiguous_strides(ts);
            break;
        }
        case SVX_S_OUTPUT:
            ts->data = PyArray_BYTES((PyArrayObject *)PyTuple_GET_ITEM(result, sl->index));
            contiguous_strides(ts);
            break;
        default: {
            char why[160], msg[224];
            if (resolve_view(sl, &t[sl->index], h, ts, why, sizeof why) < 0) {
                Py_CLEAR(result);
                snprintf(msg, sizeof msg, "slot %d: a view that does not fit its base: %s", s,
                         why);
                mismatch0(e, msg);
                goto offsets_done;
            }
        }
        }
    }
    {
        const char *err = NULL;
        int failed = -1;
        Py_BEGIN_ALLOW_THREADS for (int i = 0; i < e->ninstrs; i++) {
            if (run_instr(e, &e->instrs[i], t, &err) < 0) {
                failed = i;
                break;
            }
        }
        Py_END_ALLOW_THREADS if (failed >= 0) {
            Py_CLEAR(result);
            PyErr_Format(PyExc_RuntimeError, "native region: instruction %d failed: %s", failed,
                         err ? err : "error");
        }
    }
    atomic_fetch_add_explicit(&((Executor *)e)->calls, 1, memory_order_relaxed);
offsets_done:
    if (offsets != offsets_stack) PyMem_Free(offsets);
done:
    for (int i = 0; i < nheld; i++) Py_DECREF(held[i]);
    if (held && held != keep) PyMem_Free(held);
    if (h && h != hstack) PyMem_Free(h);
    if (t && t != tstack) PyMem_Free(t);
    return result;
}

static PyObject *exec_tp_call(PyObject *self, PyObject *args, PyObject *kw) {
    return exec_call((Executor *)self, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), kw,
                     0);
}

/* bind(*arrays) -> the dimension variables' values, with every check of a call */
static PyObject *exec_bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return exec_call((Executor *)self, args, nargs, NULL, 1);
}

static PyObject *exec_stats(Executor *e, PyObject *unused) {
    (void)unused;
    return Py_BuildValue("{s:L,s:L}", "calls", (long long)atomic_load(&e->calls), "mismatches",
                         (long long)atomic_load(&e->mismatches));
}

/* heap(*arrays) -> the dimension heap after binding (for tests and the planner) */
static PyObject *exec_heap(Executor *e, PyObject *args) {
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n != e->ninputs) return mismatch(e, "expected %lld arrays, found %lld", e->ninputs, n);
    int64_t *h = PyMem_Malloc(sizeof(int64_t) * (size_t)e->nheap);
    if (!h) return PyErr_NoMemory();
    memcpy(h, e->heap0, sizeof(int64_t) * (size_t)e->nheap);
    for (int i = 0; i < e->ninputs; i++) {
        const svx_slot *sl = &e->slots[e->input_slot[i]];
        PyObject *o = PyTuple_GET_ITEM(args, i);
        if (!PyArray_Check(o) || PyArray_NDIM((PyArrayObject *)o) != sl->ndim) {
            PyMem_Free(h);
            return mismatch(e, "argument %lld is not an array of rank %lld", i, sl->ndim);
        }
        for (int d = 0; d < sl->ndim; d++)
            if (sl->dims[d] < e->nvars && h[sl->dims[d]] == SVX_UNSET)
                h[sl->dims[d]] = PyArray_DIM((PyArrayObject *)o, d);
    }
    PyObject *out = NULL;
    int rc = run_dimprog(e, h);
    if (rc == 0) {
        out = PyTuple_New(e->nheap);
        for (int i = 0; out && i < e->nheap; i++) {
            PyObject *v = h[i] == SVX_UNSET ? Py_NewRef(Py_None) : PyLong_FromLongLong(h[i]);
            if (!v) Py_CLEAR(out);
            else PyTuple_SET_ITEM(out, i, v);
        }
    } else {
        mismatch0(e, dimprog_error[-rc]);
    }
    PyMem_Free(h);
    return out;
}

/* The helpers generated code calls back (its `self`). */
static void env_parallel(int64_t n, sv_task_fn fn, void *ctx) { sv_parallel(n, fn, ctx); }
static svg_env_t gen_env = {env_parallel, 1};

/* patch(index, capsule) -> slot: install a generated kernel in front of instruction
 * `index`'s own; calls that start after this see it. */
static PyObject *exec_patch(Executor *e, PyObject *args) {
    int index;
    PyObject *cap;
    if (!PyArg_ParseTuple(args, "iO", &index, &cap)) return NULL;
    if (index < 0 || index >= e->ninstrs || e->instrs[index].op != SVX_OP_EXTERNAL)
        return sv_raise("Executor.patch", "no such chain instruction",
                        "the index of an instruction that runs a chain", "another index",
                        "patch the chain instructions only");
    /* only generated code: it is called with the generated code's environment as self,
     * which a family's kernel (its own static data as self) would misread */
    if (!PyCapsule_IsValid(cap, SV_GEN_KERNEL))
        return sv_raise("Executor.patch", "not generated code",
                        "a generated kernel (shapevm.jit.backend.toolchain.load)", Py_TYPE(cap)->tp_name,
                        "patch in generated kernels only; a family's kernel is an instruction");
    sv_exec_kernel *k = PyCapsule_GetPointer(cap, SV_GEN_KERNEL);
    if (!k) return NULL;
    svx_instr *in = &e->instrs[index];
    gen_env.threads = sv_pool_threads();
    in->gen_self = &gen_env;
    for (int g = 0; g < SVX_MAXGEN; g++) {
        svx_kernel_fn expected = NULL;
        if (atomic_compare_exchange_strong(&in->gen[g], &expected, k->run)) {
            if (PyList_Append(e->keep, cap) < 0) return NULL; /* the code stays loaded */
            return PyLong_FromLong(g);
        }
    }
    return PyLong_FromLong(-1); /* full: the caller evicts one first */
}

/* unpatch(index, slot): calls that start after this no longer use that kernel. */
static PyObject *exec_unpatch(Executor *e, PyObject *args) {
    int index, slot;
    if (!PyArg_ParseTuple(args, "ii", &index, &slot)) return NULL;
    if (index < 0 || index >= e->ninstrs || slot < 0 || slot >= SVX_MAXGEN)
        return sv_raise("Executor.unpatch", "no such instruction or slot",
                        "an index and slot that patch() returned", "out of range",
                        "pass what patch() returned");
    atomic_store_explicit(&e->instrs[index].gen[slot], NULL, memory_order_release);
    Py_RETURN_NONE;
}

static PyMethodDef exec_methods[] = {
    {"bind", (PyCFunction)(void (*)(void))exec_bind, METH_FASTCALL,
     "bind(*arrays) -> the variables' values (ExecMismatch as a call would)"},
    {"patch", (PyCFunction)exec_patch, METH_VARARGS, "patch(index, kernel) -> slot"},
    {"unpatch", (PyCFunction)exec_unpatch, METH_VARARGS, "unpatch(index, slot)"},
    {"stats", (PyCFunction)exec_stats, METH_NOARGS, "stats() -> {'calls', 'mismatches'}"},
    {"heap", (PyCFunction)exec_heap, METH_VARARGS, "heap(*arrays) -> the bound heap"},
    {NULL, NULL, 0, NULL}};

static PyObject *exec_get_ninputs(Executor *e, void *c) {
    (void)c;
    return PyLong_FromLong(e->ninputs);
}
static PyObject *exec_get_ninstrs(Executor *e, void *c) {
    (void)c;
    return PyLong_FromLong(e->ninstrs);
}

static PyGetSetDef exec_getset[] = {
    {"ninputs", (getter)exec_get_ninputs, NULL, "arrays a call takes", NULL},
    {"ninstrs", (getter)exec_get_ninstrs, NULL, "instructions of the region", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject ExecutorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shapevm.native.Executor",
    .tp_basicsize = sizeof(Executor),
    .tp_dealloc = (destructor)exec_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A region lowered to the executor's instructions; call it with the arrays.",
    .tp_new = exec_new,
    .tp_call = exec_tp_call,
    .tp_methods = exec_methods,
    .tp_getset = exec_getset,
};

int sv_exec_types(PyObject *module) {
    if (PyType_Ready(&ExecutorType) < 0) return -1;
    Py_INCREF(&ExecutorType);
    if (PyModule_AddObject(module, "Executor", (PyObject *)&ExecutorType) < 0) {
        Py_DECREF(&ExecutorType);
        return -1;
    }
    sv_ExecMismatch = PyErr_NewExceptionWithDoc(
        "shapevm.native.ExecMismatch",
        "The arrays of a call do not fit the lowered region (dtype, rank, a dimension or a "
        "constraint); the caller's binder says how.",
        PyExc_ValueError, NULL);
    if (!sv_ExecMismatch ||
        PyModule_AddObject(module, "ExecMismatch", Py_NewRef(sv_ExecMismatch)) < 0)
        return -1;
    return 0;
}
