/* Entry points for the library's settings and state: instruction set, threads, info, and
 * the vector math functions on arrays (for tests and benchmarks). */
#include "pyutil.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

static const char *const level_names[3] = {"generic", "avx2", "avx512"};

size_t sv_code_mapped; /* the extension's code mapped in at import (sv_map_code) */

static PyObject *py_info(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    PyObject *levels = PyList_New(0);
    if (!levels) return NULL;
    for (int l = 0; l <= 2; l++)
        if (sv_isa_supported(l)) {
            PyObject *s = PyUnicode_FromString(level_names[l]);
            if (!s || PyList_Append(levels, s) < 0) {
                Py_XDECREF(s);
                Py_DECREF(levels);
                return NULL;
            }
            Py_DECREF(s);
        }
#ifdef SV_DEBUG
    int debug = 1;
#else
    int debug = 0;
#endif
    const sv_isa_table *t = sv_isa();
    sv_pool_stats st = sv_pool_get_stats();
    return Py_BuildValue(
        "{s:s,s:s,s:N,s:i,s:i,s:i,s:i,s:s,s:O,s:i,s:n,s:{s:L,s:L,s:L,s:L,s:L,s:L,s:L}}", "isa", t->name,
        "isa_note", sv_isa_note(),
        "isa_levels", levels, "vector_floats", t->vw, "tile_rows", t->mr, "tile_cols", SV_NR,
        "num_threads", sv_pool_threads(), "compiler",
#ifdef __VERSION__
        __VERSION__,
#else
        "unknown",
#endif
        "debug", debug ? Py_True : Py_False, "abi_version", SV_ABI_VERSION, "code_mapped_bytes",
        (Py_ssize_t)sv_code_mapped, "pool",
        "parallel_calls", (long long)st.parallel_calls, "serial_calls",
        (long long)st.serial_calls, "tasks_by_caller", (long long)st.tasks_by_caller,
        "tasks_by_workers", (long long)st.tasks_by_workers, "late_jobs",
        (long long)st.late_jobs, "backed_off_calls", (long long)st.backed_off_calls,
        "serial_jobs_left", (long long)st.serial_jobs_left);
}

static PyObject *py_set_isa(PyObject *self, PyObject *arg) {
    (void)self;
    const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!name) {
        PyErr_Clear();
        return sv_raise("set_isa", "the level must be a string", "avx512, avx2 or generic",
                        Py_TYPE(arg)->tp_name, "pass the level's name");
    }
    int rc = sv_set_isa(name);
    if (rc == -1)
        return sv_raise("set_isa", "unknown instruction-set level", "avx512, avx2 or generic",
                        name, "use one of the expected names");
    if (rc == -2) {
        char exp[96] = "";
        int n = 0;
        for (int l = 0; l <= 2; l++)
            if (sv_isa_supported(l))
                n += snprintf(exp + n, sizeof exp - (size_t)n, "%s%s", n ? ", " : "",
                              level_names[l]);
        return sv_raise("set_isa", "this CPU does not support that level", exp, name,
                        "choose a level from shapevm.native.info()['isa_levels']");
    }
    Py_RETURN_NONE;
}

static PyObject *py_set_num_threads(PyObject *self, PyObject *arg) {
    (void)self;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0 || n > 256) {
        char found[32];
        snprintf(found, sizeof found, "%ld", n);
        return sv_raise("set_num_threads", "thread count out of range",
                        "0 (the CPUs this process may use) to 256", found,
                        "pass a count in range");
    }
    sv_pool_set_threads((int)n);
    Py_RETURN_NONE;
}

typedef struct probe_job {
    pthread_t caller;
    long caller_us, worker_us;
    _Atomic int64_t by_caller, by_workers, worker_started;
} probe_job;

static void probe_task(void *vctx, int64_t task) {
    (void)task;
    probe_job *j = vctx;
    if (pthread_equal(pthread_self(), j->caller)) {
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        long us = 0;
        /* busy, as a kernel is, at least until a worker took a task (at most 2 s) */
        do {
            clock_gettime(CLOCK_MONOTONIC, &t);
            us = (t.tv_sec - t0.tv_sec) * 1000000 + (t.tv_nsec - t0.tv_nsec) / 1000;
        } while (us < j->caller_us ||
                 (j->worker_us && !atomic_load(&j->worker_started) && us < 2000000));
        atomic_fetch_add(&j->by_caller, 1);
        return;
    }
    atomic_store(&j->worker_started, 1);
    struct timespec ts = {j->worker_us / 1000000, (j->worker_us % 1000000) * 1000};
    if (j->worker_us) nanosleep(&ts, NULL); /* a worker that lost its core for a while */
    atomic_fetch_add(&j->by_workers, 1);
}

/* _pool_probe(ntasks, caller_us, worker_us) -> (tasks run by the caller, by workers): one
 * job on the pool whose tasks keep the calling thread busy for caller_us and a worker asleep
 * for worker_us (a worker that lost its core; then the caller's tasks also last until a
 * worker took one, at most 2 s); for the tests of the pool's rules. */
static PyObject *py_pool_probe(PyObject *self, PyObject *args) {
    (void)self;
    long ntasks, caller_us, worker_us;
    if (!PyArg_ParseTuple(args, "lll", &ntasks, &caller_us, &worker_us)) return NULL;
    if (ntasks < 0 || ntasks > 1000000 || caller_us < 0 || caller_us > 1000000 ||
        worker_us < 0 || worker_us > 1000000)
        return sv_raise("_pool_probe", "argument out of range",
                        "0 <= ntasks <= 1e6, times 0 to 1e6 microseconds", "", "");
    probe_job j = {.caller = pthread_self(), .caller_us = caller_us, .worker_us = worker_us};
    Py_BEGIN_ALLOW_THREADS sv_parallel(ntasks, probe_task, &j);
    Py_END_ALLOW_THREADS return Py_BuildValue("LL", (long long)atomic_load(&j.by_caller),
                                              (long long)atomic_load(&j.by_workers));
}

/* _pool_trace(ntasks, task_us) -> (tasks the caller ran, tasks the workers ran), each in
 * the order they ran: one job whose tasks each keep their thread busy for task_us; for the
 * tests of how the pool deals tasks out. */
typedef struct trace_job {
    pthread_t caller;
    long task_us;
    int64_t *order;          /* ntasks slots: task, + ntasks when a worker ran it */
    _Atomic int64_t next;
} trace_job;

static void trace_task(void *vctx, int64_t task) {
    trace_job *j = vctx;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t slot = atomic_fetch_add(&j->next, 1);
    j->order[slot] = pthread_equal(pthread_self(), j->caller) ? task : -1 - task;
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000 + (t.tv_nsec - t0.tv_nsec) / 1000 < j->task_us);
}

static PyObject *py_pool_trace(PyObject *self, PyObject *args) {
    (void)self;
    long ntasks, task_us;
    if (!PyArg_ParseTuple(args, "ll", &ntasks, &task_us)) return NULL;
    if (ntasks < 0 || ntasks > 100000 || task_us < 0 || task_us > 100000)
        return sv_raise("_pool_trace", "argument out of range",
                        "0 <= ntasks <= 1e5, 0 to 1e5 microseconds a task", "", "");
    int64_t *order = calloc((size_t)(ntasks > 0 ? ntasks : 1), sizeof(int64_t));
    if (!order) return PyErr_NoMemory();
    trace_job j = {.caller = pthread_self(), .task_us = task_us, .order = order};
    Py_BEGIN_ALLOW_THREADS sv_parallel(ntasks, trace_task, &j);
    Py_END_ALLOW_THREADS PyObject *mine = PyList_New(0), *theirs = PyList_New(0);
    for (long i = 0; mine && theirs && i < ntasks; i++) {
        PyObject *v = PyLong_FromLongLong(order[i] >= 0 ? order[i] : -1 - order[i]);
        if (!v || PyList_Append(order[i] >= 0 ? mine : theirs, v) != 0) {
            Py_XDECREF(v);
            Py_CLEAR(mine);
            break;
        }
        Py_DECREF(v);
    }
    free(order);
    if (!mine || !theirs) {
        Py_XDECREF(mine);
        Py_XDECREF(theirs);
        return NULL;
    }
    return Py_BuildValue("NN", mine, theirs);
}

/* _pool_late(own_us, wait_us, waking) -> whether the pool judges such a job late */
static PyObject *py_pool_late(PyObject *self, PyObject *args) {
    (void)self;
    long long own, wait;
    int waking;
    if (!PyArg_ParseTuple(args, "LLp", &own, &wait, &waking)) return NULL;
    if (own < 0 || wait < 0 || own > 1000000000LL || wait > 1000000000LL)
        return sv_raise("_pool_late", "argument out of range", "0 to 1e9 microseconds", "", "");
    return PyBool_FromLong(
        sv_pool_late((uint64_t)own * 1000u, (uint64_t)wait * 1000u, waking != 0));
}

static const char *const vmath_names[SV_VM_COUNT] = {
    "exp", "log", "tanh", "erf", "sigmoid", "sqrt", "gelu_tanh", "gelu_erf", "silu"};

/* vmath(name, x) -> new float32 array of the function applied to each element */
static PyObject *py_vmath(PyObject *self, PyObject *args) {
    (void)self;
    const char *name;
    PyObject *xobj;
    if (!PyArg_ParseTuple(args, "sO", &name, &xobj)) return NULL;
    int op = -1;
    for (int i = 0; i < SV_VM_COUNT; i++)
        if (strcmp(name, vmath_names[i]) == 0) op = i;
    if (op < 0)
        return sv_raise("vmath", "unknown function",
                        "exp, log, tanh, erf, sigmoid, sqrt, gelu_tanh, gelu_erf, silu", name,
                        "use one of the expected names");
    PyArrayObject *x = sv_arg_f32("vmath", "x", xobj, 0, NPY_MAXDIMS, SV_ARG_CONTIG,
                                  "x: f32[...] C-contiguous");
    if (!x) return NULL;
    PyArrayObject *out = (PyArrayObject *)PyArray_NewLikeArray(x, NPY_CORDER, NULL, 0);
    if (!out) return NULL;
    const float *src = PyArray_DATA(x);
    float *dst = PyArray_DATA(out);
    int64_t n = PyArray_SIZE(x);
    sv_vmath_fn fn = sv_isa()->vmath[op];
    Py_BEGIN_ALLOW_THREADS fn(dst, src, n);
    Py_END_ALLOW_THREADS return (PyObject *)out;
}

PyMethodDef sv_misc_methods[] = {
    {"info", py_info, METH_NOARGS, "info() -> dict: instruction set, threads, build"},
    {"set_isa", py_set_isa, METH_O, "set_isa(name): use a lower instruction-set level"},
    {"set_num_threads", py_set_num_threads, METH_O,
     "set_num_threads(n): threads of the pool, the caller included (0: the default)"},
    {"vmath", py_vmath, METH_VARARGS, "vmath(name, x) -> f(x) elementwise, float32"},
    {"_pool_probe", py_pool_probe, METH_VARARGS,
     "_pool_probe(ntasks, caller_us, worker_us) -> (by_caller, by_workers): for the tests"},
    {"_pool_late", py_pool_late, METH_VARARGS,
     "_pool_late(own_us, wait_us, waking) -> whether such a job is late: for the tests"},
    {"_pool_trace", py_pool_trace, METH_VARARGS,
     "_pool_trace(ntasks, task_us) -> (caller's tasks, workers' tasks) in order: for the tests"},
    {NULL, NULL, 0, NULL}};
