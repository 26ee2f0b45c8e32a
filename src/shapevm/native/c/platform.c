/* Instruction-set selection: the platform table is chosen once, at import, from the CPU's
 * features (as ONNX Runtime's MLAS does); SHAPEVM_ISA=avx512|avx2|generic forces a lower
 * level.  sv_set_isa switches later (tests run every level the machine has). */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* mremap, dl_iterate_phdr */
#endif
#include "sv_internal.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

static const sv_isa_table *_Atomic current;

int sv_isa_supported(int level) {
    if (level == 0) return 1;
#ifdef SV_HAVE_X86
    __builtin_cpu_init();
    /* libgcc's checks include the operating system's support (XCR0) for the registers. */
    if (level == 1) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (level == 2)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               sv_isa_supported(1);
#endif
    return 0;
}

static const sv_isa_table *table_of(int level) {
#ifdef SV_HAVE_X86
    if (level == 2) return &sv_table_avx512;
    if (level == 1) return &sv_table_avx2;
#endif
    (void)level;
    return &sv_table_generic;
}

const sv_isa_table *sv_isa_by_name(const char *name) {
    for (int level = 0; level <= 2; level++) {
        const sv_isa_table *t = table_of(level);
        if (t->level == level && strcmp(t->name, name) == 0) return t;
    }
    return NULL;
}

static char env_note[160];

const char *sv_isa_note(void) { return env_note; }

/* The best level the CPU has, or the lower one SHAPEVM_ISA asks for. */
static const sv_isa_table *best(void) {
    const sv_isa_table *top = &sv_table_generic;
    for (int level = 2; level > 0; level--)
        if (sv_isa_supported(level)) {
            top = table_of(level);
            break;
        }
    const char *env = getenv("SHAPEVM_ISA");
    if (env && *env) {
        const sv_isa_table *want = sv_isa_by_name(env);
        if (!want)
            snprintf(env_note, sizeof env_note,
                     "SHAPEVM_ISA=%.40s is not a level (avx512, avx2, generic); using %s", env,
                     top->name);
        else if (want->level > top->level)
            snprintf(env_note, sizeof env_note,
                     "SHAPEVM_ISA=%.40s is not supported by this CPU; using %s", env, top->name);
        else
            return want;
    }
    return top;
}

const sv_isa_table *sv_isa(void) {
    const sv_isa_table *t = atomic_load_explicit(&current, memory_order_acquire);
    if (!t) {
        t = best();
        atomic_store_explicit(&current, t, memory_order_release);
    }
    return t;
}

int sv_set_isa(const char *name) {
    const sv_isa_table *t = sv_isa_by_name(name);
    if (!t) return -1;
    if (!sv_isa_supported(t->level)) return -2;
    atomic_store_explicit(&current, t, memory_order_release);
    return 0;
}

size_t sv_l2_bytes(void) {
    static _Atomic size_t cached;
    size_t v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v == 0) {
        long n = -1;
#ifdef _SC_LEVEL2_CACHE_SIZE
        n = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
        v = n >= 65536 ? (size_t)n : (size_t)512 * 1024;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}

void *sv_alloc(size_t bytes) {
    void *p = NULL;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, rounded ? rounded : 64) != 0) return NULL;
    return p;
}

void sv_free(void *p) { free(p); }

/* Scratch that only grows (the executor's arena, a convolution's per-thread buffers).  On
 * Linux a large one is an anonymous mapping grown with mremap: the pages earlier calls
 * touched move with it, so a larger shape faults in only the pages it adds (freeing and
 * allocating again faulted the whole buffer in at every growth: 2-3x a shape's steady time
 * on its first call).  No transparent huge pages: with the usual defrag=madvise the kernel
 * may compact memory synchronously at the fault, a stall in a call.  Measured on W2 (2 MiB
 * aligned mappings advised MADV_HUGEPAGE): first calls on a new shape 10-30% faster, but
 * three processes of eleven had a 6-10 ms call, CPU time in the kernel at a fault (on a
 * virtual machine, a huge page drawn from guest memory the host has not backed yet costs
 * milliseconds: 2 GiB advised so took 7.3 s to touch the first time, 0.11 s after).  A
 * small buffer stays on the heap, where glibc often has resident memory that the model's
 * build freed (mapped from 64 KiB on, W1's first calls at b=8 to 64 took 2-28% longer in
 * an A/B of eight processes each).
 * Contents are not kept. */
#if defined(__linux__) && !defined(SV_DEBUG) /* the debug build keeps ASan's redzones */
#define SV_SCRATCH_MAPS
static int mapped(size_t size) { return size >= SV_SCRATCH_MAP; }
#endif

void *sv_scratch_grow(void *old, size_t old_size, size_t bytes, size_t *size) {
#ifdef SV_SCRATCH_MAPS
    size_t want = (bytes + ((size_t)1 << 16) - 1) & ~(((size_t)1 << 16) - 1); /* pages */
    if (mapped(bytes)) {
        int remap = old && mapped(old_size);
        void *p = remap ? mremap(old, old_size, want, MREMAP_MAYMOVE)
                        : mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                               -1, 0);
        if (p == MAP_FAILED) return NULL; /* the old buffer is still there */
        if (!remap) sv_free(old);
        *size = want;
        return p;
    }
#endif
    void *p = sv_alloc(bytes);
    if (!p) return NULL;
    sv_free(old);
    (void)old_size;
    *size = bytes;
    return p;
}

void sv_scratch_free(void *p, size_t size) {
#ifdef SV_SCRATCH_MAPS
    if (p && mapped(size)) {
        munmap(p, size);
        return;
    }
#endif
    (void)size;
    sv_free(p);
}

/* Per-thread scratch slots (sv_thread_scratch): one block of pointers per thread, made at
 * its first request and freed with the thread.  Allocating and freeing a kernel's scratch
 * in every task cost a worker thread page faults on every call: glibc gives the top of a
 * thread's heap back to the kernel when a free leaves more than its trim threshold there
 * (W3 at 1 x 37: ten faults a call, at about 1.4 us each on the machine measured, from
 * attention's per-head scores and packs). */
typedef struct thread_scratch {
    void *data[SV_SCRATCH_SLOTS];
    size_t size[SV_SCRATCH_SLOTS];
} thread_scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void thread_scratch_free(void *v) {
    thread_scratch *t = v;
    for (int i = 0; i < SV_SCRATCH_SLOTS; i++) sv_scratch_free(t->data[i], t->size[i]);
    free(t);
}

static void scratch_init(void) { pthread_key_create(&scratch_key, thread_scratch_free); }

void *sv_thread_scratch(int slot, size_t bytes) {
    if (slot < 0 || slot >= SV_SCRATCH_SLOTS) return NULL;
    pthread_once(&scratch_once, scratch_init);
    thread_scratch *t = pthread_getspecific(scratch_key);
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t || pthread_setspecific(scratch_key, t) != 0) {
            free(t);
            return NULL;
        }
    }
    if (t->size[slot] < bytes || !t->data[slot]) {
        size_t size;
        void *p = sv_scratch_grow(t->data[slot], t->size[slot], bytes ? bytes : 64, &size);
        if (!p) return NULL;
        t->data[slot] = p;
        t->size[slot] = size;
    }
    return t->data[slot];
}

/* The code of a loaded object mapped in ahead (Linux 5.14+, MADV_POPULATE_READ): the first
 * time a kernel's code path runs (a dense layer at a new tile height, a convolution's edge
 * case), its page of machine code was not yet mapped into the process: a page fault of
 * 15-25 us on the virtual machine measured, the whole of a dense layer's first call at a
 * new batch size (1 -> 3 rows: 25-46 us, then 10-21; mapped ahead: 18-26).  Mapping the
 * extension's 1 MiB of code took 0.2 ms at import.  The pages are the object file's, in
 * the page cache, shared with every process: nothing is allocated.  Returns the bytes
 * mapped; 0 where the system cannot (another OS, an older kernel). */
#if defined(__linux__)
#include <link.h>
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
typedef struct {
    uintptr_t addr;
    size_t bytes;
} code_walk;

static int map_code_of(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    code_walk *w = data;
    bool ours = false; /* the object whose segments hold the address */
    for (int i = 0; i < info->dlpi_phnum && !ours; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t at = info->dlpi_addr + ph->p_vaddr;
        ours = ph->p_type == PT_LOAD && w->addr >= at && w->addr - at < ph->p_memsz;
    }
    if (!ours) return 0;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || ph->p_memsz == 0) continue;
        uintptr_t start = (info->dlpi_addr + ph->p_vaddr) & ~(page - 1);
        uintptr_t end = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + page - 1) & ~(page - 1);
        if (madvise((void *)start, end - start, MADV_POPULATE_READ) == 0) w->bytes += end - start;
    }
    return 1;
}

size_t sv_map_code(const void *addr) {
    code_walk w = {(uintptr_t)addr, 0};
    if (addr) dl_iterate_phdr(map_code_of, &w);
    return w.bytes;
}
#else
size_t sv_map_code(const void *addr) {
    (void)addr;
    return 0;
}
#endif
