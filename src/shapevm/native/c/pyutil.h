/* Helpers of the Python entry points: argument checks that raise NativeKernelError with
 * what was expected, what was found and how to fix it, before any memory is touched. */
#ifndef SV_PYUTIL_H
#define SV_PYUTIL_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL shapevm_native_ARRAY_API
#ifndef SV_PYUTIL_MAIN
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>
#include "sv_internal.h"

extern PyObject *sv_NativeKernelError;

/* Raise NativeKernelError("<kernel>: <what>") with expected/found/fix lines; returns NULL. */
PyObject *sv_raise(const char *kernel, const char *what, const char *expected,
                   const char *found, const char *fix);

/* "f32[3, 256]" (or "i64[2] (not C-contiguous)") for an array, "list" for another object. */
void sv_describe(PyObject *obj, char *buf, size_t size);

enum { SV_ARG_WRITABLE = 1, SV_ARG_OPTIONAL = 2, SV_ARG_CONTIG = 4, SV_ARG_INNER_UNIT = 8 };

/* Check that obj is a float32 ndarray with ndim in [min_ndim, max_ndim] and the flags;
 * returns the array (borrowed) or NULL with NativeKernelError set.  An optional argument
 * given as None returns NULL without an error (check PyErr_Occurred). */
PyArrayObject *sv_arg_f32(const char *kernel, const char *name, PyObject *obj, int min_ndim,
                          int max_ndim, int flags, const char *expected);

/* Whether the leading dims of a (all but the last `inner`) fold into one row index with a
 * single stride; sets *rows and *row_stride (elements). */
int sv_rows_of(PyArrayObject *a, int inner, int64_t *rows, int64_t *row_stride);

/* Whether the memory a and b span overlaps (a == b, or either NULL: no). */
int sv_overlaps(PyArrayObject *a, PyArrayObject *b);

/* Activation names of fused epilogues: "none", "relu", "gelu_tanh", "gelu_erf", "silu",
 * "sigmoid", "tanh", "hard_swish", "leaky_relu", "relu6" (`sv_act_names`); -1 with
 * NativeKernelError set for another name. */
int sv_act_code(const char *kernel, PyObject *name);
/* An activation given by name, or as ("leaky_relu", slope): its code and slope (0.01 by
 * the name alone); -1 with NativeKernelError set for anything else. */
int sv_act_parse(const char *kernel, PyObject *obj, int *code, float *slope);
extern const char *const sv_act_names[SV_ACT_COUNT];

/* Method tables of each family's entry points, joined by module.c. */
extern PyMethodDef sv_gemm_methods[];
extern PyMethodDef sv_misc_methods[];
extern PyMethodDef sv_conv_methods[];
extern PyMethodDef sv_rowops_methods[];
extern PyMethodDef sv_tile_methods[];
int sv_tile_types(PyObject *module);
/* The checked program of a shapevm.native.TileProgram, or NULL for another object. */
const sv_tile_plan *sv_tile_plan_of(PyObject *obj);

extern PyMethodDef sv_dl_methods[];
extern PyMethodDef sv_exec_kernel_methods[];
extern PyMethodDef sv_exec_methods[];
int sv_gemm_types(PyObject *module);
int sv_conv_types(PyObject *module);
/* The packed convolution of a shapevm.native.PackedConv, or NULL for another object. */
const sv_packed_conv *sv_packed_conv_of(PyObject *obj);
int sv_exec_types(PyObject *module);
/* The packed weights and bias of a PackedDense (either pointer may be NULL to just check
 * the type); -1 with NativeKernelError set for another object. */
int sv_packed_dense_unwrap(PyObject *obj, const sv_packed_b **b, const float **bias);
#endif
