/* shapevm._native.Executor: a lowered region (exec.h) and the one C call that runs it.
 *
 * This file holds the type: the threads' grow-only arenas (and arena_pools(), which
 * reports them), deallocation, stats(), patch()/unpatch() of generated kernels, and the type
 * object.  The constructor and its checks are in exec_check.c, a call in exec_call.c and
 * exec_resolve.c; exec_internal.h declares what they share.
 */
#include "exec_internal.h"
#include "svgen_env.h"
#include <pthread.h>
#include <stdatomic.h>

PyObject *sv_ExecMismatch;
PyObject *sv_ExecFailure;

const int svx_npy_of[SVX_NDTYPES] = {NPY_FLOAT32, NPY_FLOAT64, NPY_INT32, NPY_INT64,
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

char *svx_arena_get(size_t bytes) {
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

static PyObject *py_set_profiling(PyObject *self, PyObject *arg);

PyMethodDef sv_exec_methods[] = {
    {"arena_pools", py_arena_pools, METH_NOARGS,
     "arena_pools() -> the executor's per-thread arenas: thread, capacity, use, grows"},
    {"set_profiling", py_set_profiling, METH_O,
     "set_profiling(on) -> whether it was on: executors time each instruction"},
    {NULL, NULL, 0, NULL}};

/* -- the type ---------------------------------------------------------------------------- */
static void exec_dealloc(Executor *self) {
    for (int i = 0; self->instrs && i < self->ninstrs; i++) Py_XDECREF(self->instrs[i].obj);
    PyMem_Free(self->heap0);
    PyMem_Free(self->prog);
    PyMem_Free(self->checks);
    PyMem_Free(self->slots);
    PyMem_Free(self->buffers);
    PyMem_Free(self->outputs);
    PyMem_Free(self->output_perm);
    PyMem_Free(self->output_shape);
    PyMem_Free(self->input_slot);
    PyMem_Free(self->dimcells);
    PyMem_Free(self->instrs);
    PyMem_Free((void *)self->prof);
    PyMem_Free(self->const_data);
    Py_XDECREF(self->consts);
    Py_XDECREF(self->keep);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

_Atomic int svx_profiling = 0;

/* set_profiling(on) -> whether it was on: calls that start afterwards time each
 * instruction (two clock reads per instruction) into their executor's profile. */
static PyObject *py_set_profiling(PyObject *self, PyObject *arg) {
    (void)self;
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    return PyBool_FromLong(atomic_exchange(&svx_profiling, on));
}

/* profile(reset=False) -> [(runs, seconds)] per instruction, since the last reset. */
static PyObject *exec_profile(Executor *e, PyObject *args, PyObject *kw) {
    static char *names[] = {"reset", NULL};
    int reset = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p", names, &reset)) return NULL;
    PyObject *out = PyList_New(e->ninstrs);
    if (!out) return NULL;
    for (int i = 0; i < e->ninstrs; i++) {
        int64_t ns = reset ? atomic_exchange(&e->prof[2 * i], 0) : atomic_load(&e->prof[2 * i]);
        int64_t n = reset ? atomic_exchange(&e->prof[2 * i + 1], 0)
                          : atomic_load(&e->prof[2 * i + 1]);
        PyObject *row = Py_BuildValue("(Ld)", (long long)n, (double)ns * 1e-9);
        if (!row) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, row);
    }
    return out;
}

static PyObject *exec_stats(Executor *e, PyObject *unused) {
    (void)unused;
    return Py_BuildValue("{s:L,s:L}", "calls", (long long)atomic_load(&e->calls), "mismatches",
                         (long long)atomic_load(&e->mismatches));
}

/* The helpers generated code calls back (its `self`). */
static void env_parallel(int64_t n, sv_task_fn fn, void *ctx) { sv_parallel(n, fn, ctx); }
svg_env_t svx_gen_env = {env_parallel, 1, SVG_ENV_MAGIC}; /* every generated kernel's `self` */

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
    /* generated kernels of other executors may be reading it right now, without the GIL:
     * an atomic store (they load it atomically too), not a plain one */
    __atomic_store_n(&svx_gen_env.threads, sv_pool_threads(), __ATOMIC_RELAXED);
    /* kept once each before it is installed: a failure leaves nothing installed (the
     * library itself is never unloaded, so an unpatched kernel's code stays valid for calls
     * that started with it) */
    int kept = PySequence_Contains(e->keep, cap);
    if (kept < 0 || (!kept && PyList_Append(e->keep, cap) < 0)) return NULL;
    for (int g = 0; g < SVX_MAXGEN; g++) {
        svx_kernel_fn expected = NULL;
        if (atomic_compare_exchange_strong(&in->gen[g], &expected, k->run))
            return PyLong_FromLong(g);
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
    {"bind", (PyCFunction)(void (*)(void))sv_exec_bind, METH_FASTCALL,
     "bind(*arrays) -> the variables' values (ExecMismatch as a call would)"},
    {"patch", (PyCFunction)exec_patch, METH_VARARGS, "patch(index, kernel) -> slot"},
    {"unpatch", (PyCFunction)exec_unpatch, METH_VARARGS, "unpatch(index, slot)"},
    {"stats", (PyCFunction)exec_stats, METH_NOARGS, "stats() -> {'calls', 'mismatches'}"},
    {"profile", (PyCFunction)(void (*)(void))exec_profile, METH_VARARGS | METH_KEYWORDS,
     "profile(reset=False) -> [(runs, seconds)] of each instruction while profiling was on"},
    {"heap", (PyCFunction)sv_exec_heap, METH_VARARGS, "heap(*arrays) -> the bound heap"},
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
    .tp_new = sv_exec_new,
    .tp_call = sv_exec_tp_call,
    .tp_methods = exec_methods,
    .tp_getset = exec_getset,
};

/* shapevm.native.<name>, a new exception class deriving from `base`, added to `module`. */
static PyObject *add_exception(PyObject *module, const char *name, PyObject *base,
                               const char *doc) {
    char full[64];
    snprintf(full, sizeof full, "shapevm.native.%s", name);
    PyObject *type = PyErr_NewExceptionWithDoc(full, doc, base, NULL);
    if (!type) return NULL;
    if (PyModule_AddObject(module, name, Py_NewRef(type)) < 0) {
        Py_DECREF(type); /* the reference AddObject did not take */
        Py_DECREF(type);
        return NULL;
    }
    return type;
}

int sv_exec_types(PyObject *module) {
    if (PyType_Ready(&ExecutorType) < 0) return -1;
    Py_INCREF(&ExecutorType);
    if (PyModule_AddObject(module, "Executor", (PyObject *)&ExecutorType) < 0) {
        Py_DECREF(&ExecutorType);
        return -1;
    }
    sv_ExecMismatch = add_exception(
        module, "ExecMismatch", PyExc_ValueError,
        "The arrays of a call do not fit the lowered region (dtype, rank, a dimension or a "
        "constraint); the caller's binder says how.");
    if (!sv_ExecMismatch) return -1;
    sv_ExecFailure = add_exception(
        module, "ExecFailure", PyExc_RuntimeError,
        "An instruction of a region failed: `instruction` is its index in the region, "
        "`reason` what it said, `data` whether the call's data caused it (an index out of "
        "range) rather than operands the instruction cannot run (a fault of the lowering).");
    return sv_ExecFailure ? 0 : -1;
}
