/* The environment generated kernels receive as `self` (svgen.h's svg_env, the same
 * layout): the library's pool, and its size. */
#ifndef SV_SVGEN_ENV_H
#define SV_SVGEN_ENV_H
#include "svnative.h"
typedef struct svg_env_t {
    void (*parallel)(int64_t ntasks, sv_task_fn fn, void *ctx);
    int threads;
} svg_env_t;
#endif
