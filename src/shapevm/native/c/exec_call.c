/* A call of the region executor (exec_internal.h): METH_FASTCALL, any number of threads
 * at once.  It binds the dimension heap from the inputs' shapes, runs the dimension program
 * and the checks, allocates the outputs, sizes this thread's arena, resolves the views
 * (exec_resolve.c), releases the GIL and runs the instructions.  Inputs that do not match
 * (dtype, rank, a dimension, a constraint) raise ExecMismatch with a short reason: the
 * caller's binder then produces the user-facing message.  bind() and heap() share the
 * binding.
 */
#include "exec_internal.h"
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

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

static int run_instr(const Executor *e, const svx_instr *in, svx_tensor *t, const char **err) {
    switch (in->op) {
    case SVX_OP_DENSE: {
        const sv_packed_b *b;
        const float *bias;
        sv_packed_dense_unwrap(in->obj, &b, &bias);
        const svx_tensor *x = &t[in->in[0]], *y = &t[in->out[0]];
        const svx_tensor *r = in->nin > 1 ? &t[in->in[1]] : NULL;
        if ((*err = svx_dense_misfit(x, y, r, b)) != NULL) return -1;
        int64_t m = 1;
        for (int d = 0; d < x->ndim - 1; d++) m *= x->shape[d];
        /* rows: x, y (and residual) are laid out as [m, k] with unit inner stride */
        int64_t lda = x->ndim >= 2 ? x->strides[x->ndim - 2] : b->k;
        int64_t ldc = y->ndim >= 2 ? y->strides[y->ndim - 2] : b->n;
        sv_epilogue ep = {.bias = bias, .residual = r ? (const float *)r->data : NULL,
                          .ldr = r && r->ndim >= 2 ? r->strides[r->ndim - 2] : b->n,
                          .alpha = in->fattr[0], .act = in->iattr[0], .slope = in->fattr[1],
                          .res_mul = in->iattr[1]};
        sv_dense(m, (const float *)x->data, lda, b, (float *)y->data, ldc, &ep, e->threads);
        return 0;
    }
    case SVX_OP_MATMUL:
        if ((*err = svx_matmul_misfit(&t[in->in[0]], &t[in->in[1]], &t[in->out[0]])) != NULL)
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
    case SVX_OP_IOTA:
        if (svx_iota(&t[in->out[0]])) {
            *err = "iota: unsupported dtype or rank";
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
            int rc = fn(&svx_gen_env, ins, in->nin, outs, in->nout, in->iattr, in->fattr, err);
            if (rc != 1) return rc; /* 1: not for these shapes, try the next */
        }
        return in->kernel(in->kself, ins, in->nin, outs, in->nout, in->iattr, in->fattr, err);
    }
    default: *err = "unknown instruction"; return -1;
    }
}

/* A NumPy array of the resolved view t over base's memory, holding base (writeable as base
 * is, unless not `writeable`). */
static PyObject *svx_view_of(const svx_tensor *t, PyObject *base, int writeable) {
    npy_intp shape[SVX_MAXDIM], strides[SVX_MAXDIM];
    npy_intp isz = (npy_intp)svx_itemsize[t->dtype];
    for (int d = 0; d < t->ndim; d++) {
        shape[d] = (npy_intp)t->shape[d];
        strides[d] = (npy_intp)t->strides[d] * isz;
    }
    int flags = writeable && PyArray_ISWRITEABLE((PyArrayObject *)base) ? NPY_ARRAY_WRITEABLE : 0;
    PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, PyArray_DescrFromType(svx_npy_of[t->dtype]),
                                         t->ndim, shape, strides, t->data, flags, NULL);
    if (arr && PyArray_SetBaseObject((PyArrayObject *)arr, Py_NewRef(base)) < 0) Py_CLEAR(arr);
    return arr;
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
    /* held[i]: the contiguous copy argument i was read from, if it was not contiguous */
    PyObject *keep[SVX_MAXIN * 4];
    PyObject **held = e->ninputs <= SVX_MAXIN * 4 ? keep
                                                  : PyMem_Malloc(sizeof(PyObject *) * (size_t)e->ninputs);
    PyObject *result = NULL;
    if (held) memset(held, 0, sizeof(PyObject *) * (size_t)e->ninputs); /* before any exit */
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
        if (PyArray_TYPE(a) != svx_npy_of[sl->dtype] || PyArray_NDIM(a) != sl->ndim ||
            !PyArray_ISNOTSWAPPED(a)) {
            mismatch(e, "argument %lld has another dtype or rank (%lld)", i, PyArray_NDIM(a));
            goto done;
        }
        if (!PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a)) {
            a = (PyArrayObject *)PyArray_FROMANY(o, PyArray_TYPE(a), 0, 0,
                                                 NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED);
            if (!a) goto done;
            held[i] = (PyObject *)a;
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
        svx_contiguous_strides(ti);
    }
    for (int v = 0; v < e->nvars; v++)
        if (h[v] == SVX_UNSET) {
            mismatch(e, "dimension variable %lld is not bound by any input (%lld)", v, 0);
            goto done;
        }
    int rc = svx_run_dimprog(e, h);
    if (rc < 0) {
        mismatch0(e, svx_dimprog_error[-rc]);
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
    if (bind_only) { /* the variables' values, for the caller's bookkeeping */
        result = PyTuple_New(e->nvars);
        for (int v = 0; result && v < e->nvars; v++) {
            PyObject *val = PyLong_FromLongLong(h[v]);
            if (!val) Py_CLEAR(result);
            else PyTuple_SET_ITEM(result, v, val);
        }
        goto done;
    }
    /* the outputs, then the arena: allocating an array may run Python code (a collection
     * calls finalizers), which may run a region on this thread and grow its arena */
    result = PyTuple_New(e->noutputs);
    if (!result) goto done;
    for (int o = 0; o < e->noutputs; o++) {
        const svx_slot *sl = &e->slots[e->outputs[o]];
        if (sl->kind != SVX_S_OUTPUT) continue; /* an argument or its view: after the run */
        npy_intp shape[SVX_MAXDIM];
        for (int d = 0; d < sl->ndim; d++) shape[d] = (npy_intp)h[sl->dims[d]];
        PyObject *arr = PyArray_SimpleNew(sl->ndim, shape, svx_npy_of[sl->dtype]);
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
    char *arena = svx_arena_get(total);
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
            svx_contiguous_strides(ts);
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
            svx_contiguous_strides(ts);
            break;
        }
        case SVX_S_OUTPUT:
            ts->data = PyArray_BYTES((PyArrayObject *)PyTuple_GET_ITEM(result, sl->index));
            svx_contiguous_strides(ts);
            break;
        default: {
            char why[160], msg[224];
            if (svx_resolve_view(sl, &t[sl->index], h, ts, why, sizeof why) < 0) {
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
        int failed = -1, rc = 0;
        int prof = atomic_load_explicit(&svx_profiling, memory_order_relaxed);
        Py_BEGIN_ALLOW_THREADS for (int i = 0; i < e->ninstrs; i++) {
            struct timespec t0, t1;
            if (prof) clock_gettime(CLOCK_MONOTONIC, &t0);
            if ((rc = run_instr(e, &e->instrs[i], t, &err)) < 0) {
                failed = i;
                break;
            }
            if (prof) {
                clock_gettime(CLOCK_MONOTONIC, &t1);
                int64_t ns = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 +
                             (t1.tv_nsec - t0.tv_nsec);
                atomic_fetch_add_explicit(&e->prof[2 * i], ns, memory_order_relaxed);
                atomic_fetch_add_explicit(&e->prof[2 * i + 1], 1, memory_order_relaxed);
            }
        }
        Py_END_ALLOW_THREADS if (failed >= 0) {
            Py_CLEAR(result);
            const char *why = err ? err : "error";
            PyObject *exc = PyObject_CallFunction(
                sv_ExecFailure, "N",
                PyUnicode_FromFormat("native region: instruction %d failed: %s", failed, why));
            if (exc) {
                PyObject *index = PyLong_FromLong(failed), *reason = PyUnicode_FromString(why);
                if (index && reason && PyObject_SetAttrString(exc, "instruction", index) == 0 &&
                    PyObject_SetAttrString(exc, "reason", reason) == 0 &&
                    PyObject_SetAttrString(exc, "data",
                                           rc == SVX_DATA_ERROR ? Py_True : Py_False) == 0)
                    PyErr_SetObject(sv_ExecFailure, exc);
                Py_XDECREF(index);
                Py_XDECREF(reason);
                Py_DECREF(exc);
            }
        }
    }
    /* results that are not their slot's array as allocated: an argument or NumPy's view of
     * it (x.T, x[1:], a reshape), as the interpreter returns them (a view of an argument that
     * was not contiguous is one of the contiguous copy the region read); or NumPy's
     * transposed (a function's last x.T) or reshaped (its last y.reshape(-1)) view of the
     * slot's array, not a copy */
    for (int o = 0; result && o < e->noutputs; o++) {
        int s = e->outputs[o];
        const int32_t *perm = e->output_perm ? e->output_perm[o] : NULL;
        const int32_t *shape = e->output_shape ? e->output_shape[o] : NULL;
        PyObject *view = NULL, *arr = PyTuple_GET_ITEM(result, o); /* NULL for an argument's */
        if (e->slots[s].kind != SVX_S_OUTPUT) {
            int root = s, writeable = 1;
            for (; e->slots[root].kind == SVX_S_VIEW; root = e->slots[root].index)
                if (e->slots[root].viewop == SVX_V_BROADCAST) writeable = 0; /* as NumPy's */
            int i = e->slots[root].index;
            view = e->slots[s].kind == SVX_S_INPUT
                       ? Py_NewRef(args[i])
                       : svx_view_of(&t[s], held[i] ? held[i] : args[i], writeable);
        } else if (perm && perm[0] >= 0) {
            npy_intp axes[SVX_MAXDIM];
            int nd = e->slots[s].ndim;
            for (int d = 0; d < nd; d++) axes[d] = perm[d];
            PyArray_Dims dims = {axes, nd};
            view = PyArray_Transpose((PyArrayObject *)arr, &dims);
        } else if (shape && shape[0] >= 0) {
            npy_intp dims[SVX_MAXDIM];
            int64_t count = 1;
            bool ok = true;
            for (int d = 0; d < shape[0]; d++) {
                int64_t v = h[shape[1 + d]];
                ok = ok && v >= 0 && !__builtin_mul_overflow(count, v, &count);
                dims[d] = (npy_intp)v;
            }
            if (!ok || count != (int64_t)PyArray_SIZE((PyArrayObject *)arr)) {
                Py_CLEAR(result);
                mismatch(e, "output %lld is returned in a shape of another size (%lld elements)",
                         o, ok ? count : -1);
                break;
            }
            PyArray_Dims newshape = {dims, shape[0]};
            view = PyArray_Newshape((PyArrayObject *)arr, &newshape, NPY_CORDER);
        } else {
            continue;
        }
        if (!view) {
            Py_CLEAR(result);
            break;
        }
        PyTuple_SET_ITEM(result, o, view);
        Py_XDECREF(arr);
    }
    atomic_fetch_add_explicit(&((Executor *)e)->calls, 1, memory_order_relaxed);
offsets_done:
    if (offsets != offsets_stack) PyMem_Free(offsets);
done:
    for (int i = 0; held && i < e->ninputs; i++) Py_XDECREF(held[i]);
    if (held && held != keep) PyMem_Free(held);
    if (h && h != hstack) PyMem_Free(h);
    if (t && t != tstack) PyMem_Free(t);
    return result;
}

PyObject *sv_exec_tp_call(PyObject *self, PyObject *args, PyObject *kw) {
    return exec_call((Executor *)self, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), kw,
                     0);
}

/* bind(*arrays) -> the dimension variables' values, with every check of a call */
PyObject *sv_exec_bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return exec_call((Executor *)self, args, nargs, NULL, 1);
}

/* heap(*arrays) -> the dimension heap after binding (for tests and the planner) */
PyObject *sv_exec_heap(Executor *e, PyObject *args) {
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
    int rc = svx_run_dimprog(e, h);
    if (rc == 0) {
        out = PyTuple_New(e->nheap);
        for (int i = 0; out && i < e->nheap; i++) {
            PyObject *v = h[i] == SVX_UNSET ? Py_NewRef(Py_None) : PyLong_FromLongLong(h[i]);
            if (!v) Py_CLEAR(out);
            else PyTuple_SET_ITEM(out, i, v);
        }
    } else {
        mismatch0(e, svx_dimprog_error[-rc]);
    }
    PyMem_Free(h);
    return out;
}
