/* Loading generated code (tier 3): a shared library the JIT compiled from C it wrote,
 * from its own cache directory (shapevm.jit.backend.toolchain checks the directory's owner
 * and permissions and each file's hash before this is called). */
#include "pyutil.h"
#include "exec.h"
#include <dlfcn.h>
#include <stdio.h>

static void kernel_capsule_free(PyObject *cap) {
    PyMem_Free(PyCapsule_GetPointer(cap, SV_GEN_KERNEL));
    /* the library stays loaded: an executor may still hold the function */
}

/* load_kernel(path, symbol) -> capsule of the function, for Executor.patch */
static PyObject *py_load_kernel(PyObject *self, PyObject *args) {
    (void)self;
    const char *path, *symbol;
    if (!PyArg_ParseTuple(args, "ss", &path, &symbol)) return NULL;
    void *handle;
    Py_BEGIN_ALLOW_THREADS handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    Py_END_ALLOW_THREADS if (!handle) {
        const char *why = dlerror();
        return sv_raise("load_kernel", "cannot load the generated library", "a shared library",
                        why ? why : path, "delete it from the cache directory; it is rebuilt");
    }
    void *fn = dlsym(handle, symbol);
    if (!fn) {
        char found[256];
        snprintf(found, sizeof found, "no symbol %.100s in %.120s", symbol, path);
        return sv_raise("load_kernel", "the generated library lacks its function",
                        "the symbol the generator named", found,
                        "delete it from the cache directory; it is rebuilt");
    }
    sv_map_code(fn); /* its first call does not fault its code in (see sv_map_code) */
    sv_exec_kernel *k = PyMem_Malloc(sizeof *k);
    if (!k) return PyErr_NoMemory();
    k->self = NULL;
    *(void **)&k->run = fn;
    PyObject *cap = PyCapsule_New(k, SV_GEN_KERNEL, kernel_capsule_free);
    if (!cap) PyMem_Free(k);
    return cap;
}

PyMethodDef sv_dl_methods[] = {
    {"load_kernel", py_load_kernel, METH_VARARGS,
     "load_kernel(path, symbol) -> a generated kernel for Executor.patch"},
    {NULL, NULL, 0, NULL}};
