/* The environment generated kernels receive as `self` (svgen.h's svg_env, the same
 * layout): the library's pool, and its size. */
#ifndef SV_SVGEN_ENV_H
#define SV_SVGEN_ENV_H
#include "svnative.h"
#define SVG_ENV_MAGIC 0x31677673u /* "svg1": a kernel given anything else refuses to run */
typedef struct svg_env_t {
    void (*parallel)(int64_t ntasks, sv_task_fn fn, void *ctx);
    int threads;
    uint32_t magic; /* SVG_ENV_MAGIC */
} svg_env_t;
#endif
