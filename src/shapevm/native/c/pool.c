/* The library's thread pool: persistent workers, no OpenMP runtime.
 *
 * A job is ntasks calls of fn(ctx, task).  The caller publishes it and works on it too.
 * The tasks are dealt out in contiguous ranges, one per thread (the caller's first), and
 * each thread claims the tasks of its own range one at a time from the front; a thread
 * whose range is done takes tasks from the back of the others'.  So a thread gets the
 * same tasks of a kernel call after call, whatever the shape (a dense layer's panels of
 * weights stay in the L2 of the core that used them last: a new batch size does not read
 * them from memory again), and a worker that the operating system has not scheduled yet
 * (a busy core, NumPy's BLAS threads spinning) costs nothing: the caller takes its share.
 * A range's word holds its next and its end task; a successful claim of an open range
 * always belongs to the job that opened it (ranges are opened after the job is set up and
 * are all spent before the next one is), so a late worker never runs a task of the wrong
 * job.  Workers spin for
 * SPIN_NS after a job (the next kernel of the same call comes within microseconds), yielding
 * the core every YIELD_NS to any other thread that wants it (NumPy's BLAS threads, the
 * neighbours), then sleep on a condition variable.
 *
 * A worker that claimed a task and then lost its core (the machine is busy, or OpenBLAS
 * spins after a NumPy product) makes the caller wait for it: milliseconds for a job of
 * microseconds.  So the caller times each job: when it waited for the workers longer than
 * half the time it worked itself, the pool is left alone (jobs run on the calling thread)
 * for the next 2^(p-1) jobs and at least 2^(p-1) * BACKOFF_MIN_NS, where the penalty p goes
 * up by one with each late job (to PENALTY_MAX) and down by one with each job that was not:
 * a late job costs milliseconds, a job kept off the pool at most the second thread's share,
 * and calls spaced out in time (a NumPy product before each) need the count as well as the
 * time.  A wait under LATE_MIN_NS is never late, and one under WAKING_LATE_MIN_NS where the
 * job woke sleeping workers or started them: a worker coming back from its sleep, or whose
 * caches are cold, is not a worker that lost its core (with 20 us as the bound, a process's
 * first call left its first calls of other shapes on one thread: W3's at 1x37 took 2.5x its
 * steady time).
 *
 * One job at a time: a second thread that calls sv_parallel while the pool is busy, or a
 * task that calls it (nested), runs its tasks itself.  After fork() the child starts with
 * no workers and makes new ones on its first parallel call.
 */
#define _GNU_SOURCE
#include "sv_internal.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define SV_MAX_THREADS 256
#define MAX_TASKS 0xffffffffu /* a range's next and end are 32 bits */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_mutex_t busy; /* held by the thread whose job the pool runs */
    _Atomic uint64_t word; /* generation << 32: a new job was opened */
    _Atomic int nranges;   /* the open job's ranges of tasks (threads, at most ntasks) */
    _Atomic int64_t done;
    sv_task_fn fn;
    void *ctx;
    int64_t ntasks;
    int nworkers;   /* started */
    int target;     /* threads wanted, caller included */
    int sleeping;
    uint32_t gen;
    int stop;
    pthread_t threads[SV_MAX_THREADS];
    _Atomic uint64_t serial_until; /* monotonic ns: jobs run serially until then, */
    _Atomic int64_t serial_jobs;   /* ... and this many more jobs */
    int penalty;                   /* late jobs not yet made up for, with P.busy held */
    _Atomic int64_t stat_parallel, stat_serial, stat_caller, stat_workers, stat_late,
        stat_backed_off;
} P = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .wake = PTHREAD_COND_INITIALIZER,
       .busy = PTHREAD_MUTEX_INITIALIZER};

/* Range r of the job's tasks: next << 32 | end, on a cache line of its own. */
static struct {
    _Alignas(64) _Atomic uint64_t word;
} ranges[SV_MAX_THREADS];

static _Thread_local int in_task;
static pthread_once_t once = PTHREAD_ONCE_INIT;

#ifndef SPIN_NS
#define SPIN_NS 200000 /* workers spin this long after a job */
#endif
#ifndef YIELD_NS
#define YIELD_NS 20000 /* ... yielding their core this often */
#endif
#define LATE_MIN_NS 200000 /* a wait for the workers shorter than this is never late (a
                              worker whose caches are cold is slower for tens of
                              microseconds; a core lost to another thread costs
                              milliseconds), */
#define WAKING_LATE_MIN_NS 500000 /* nor this, where the job woke or started them: coming
                                     back from a sleep takes tens of microseconds more (the
                                     first call of a process, of a function after a pause) */
#define BACKOFF_MIN_NS 2000000 /* no pool for 2 ms and one job after a late job, */
#define PENALTY_MAX 8           /* doubling up to 256 ms and 128 jobs while they repeat */

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

/* A task of range r: its owner takes the next one, others the last one; -1: none left. */
static int64_t claim(int r, bool own) {
    _Atomic uint64_t *word = &ranges[r].word;
    uint64_t w = atomic_load_explicit(word, memory_order_acquire);
    for (;;) {
        uint32_t next = (uint32_t)(w >> 32), end = (uint32_t)w;
        if (next >= end) return -1;
        uint64_t claimed = own ? w + ((uint64_t)1 << 32) : w - 1;
        if (atomic_compare_exchange_weak_explicit(word, &w, claimed, memory_order_acq_rel,
                                                  memory_order_acquire))
            return own ? (int64_t)next : (int64_t)end - 1;
    }
}

/* Run the tasks of thread `self`'s range, then any left in the others'; returns how many
 * ran.  A range read after its job ended is spent, so claims nothing. */
static int64_t run_tasks(int self) {
    int64_t ran = 0;
    int n = atomic_load_explicit(&P.nranges, memory_order_acquire);
    for (int k = 0; k < n; k++) {
        int r = (self + k) % n;
        for (int64_t task; (task = claim(r, r == self)) >= 0; ran++) {
            sv_task_fn fn = P.fn;
            void *ctx = P.ctx;
            in_task = 1;
            fn(ctx, task);
            in_task = 0;
            atomic_fetch_add_explicit(&P.done, 1, memory_order_acq_rel);
        }
    }
    return ran;
}

static void *worker_main(void *arg) {
    int self = (int)(intptr_t)arg;
    uint32_t seen = 0;
    pthread_mutex_lock(&P.lock);
    seen = P.gen;
    pthread_mutex_unlock(&P.lock);
    for (;;) {
        uint64_t start = now_ns(), yielded = start;
        uint32_t gen;
        for (unsigned spins = 1;; spins++) {
            uint64_t w = atomic_load_explicit(&P.word, memory_order_acquire);
            gen = (uint32_t)(w >> 32);
            if (gen != seen) break;
            cpu_relax();
            if (spins % 64) continue;
            uint64_t t = now_ns();
            if (t - yielded >= YIELD_NS) {
                sched_yield(); /* a thread waiting for this core runs now */
                yielded = t;
            }
            if (t - start < SPIN_NS) continue;
            pthread_mutex_lock(&P.lock);
            if (P.stop) {
                pthread_mutex_unlock(&P.lock);
                return NULL;
            }
            w = atomic_load_explicit(&P.word, memory_order_acquire);
            if ((uint32_t)(w >> 32) == seen) {
                P.sleeping++;
                pthread_cond_wait(&P.wake, &P.lock);
                P.sleeping--;
            }
            pthread_mutex_unlock(&P.lock);
            start = yielded = now_ns();
        }
        seen = gen;
        int64_t ran = run_tasks(self);
        atomic_fetch_add_explicit(&P.stat_workers, ran, memory_order_relaxed);
    }
}

static int default_threads(void) {
    const char *env = getenv("SHAPEVM_NUM_THREADS");
    if (env && *env) {
        long n = strtol(env, NULL, 10);
        if (n >= 1) return n > SV_MAX_THREADS ? SV_MAX_THREADS : (int)n;
    }
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n >= 1) return n > SV_MAX_THREADS ? SV_MAX_THREADS : n;
    }
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 ? (n > SV_MAX_THREADS ? SV_MAX_THREADS : (int)n) : 1;
}

static void after_fork_child(void) {
    /* The workers do not exist in the child: forget them, keep the settings. */
    pthread_mutex_t init = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cinit = PTHREAD_COND_INITIALIZER;
    P.lock = init;
    P.busy = init;
    P.wake = cinit;
    P.nworkers = 0;
    P.sleeping = 0;
    P.stop = 0;
    atomic_store(&P.word, (uint64_t)P.gen << 32);
    for (int r = 0; r < SV_MAX_THREADS; r++) /* a job the parent was running is not ours */
        atomic_store(&ranges[r].word, 0);
    atomic_store(&P.nranges, 0);
    in_task = 0;
}

static void init_once(void) {
    P.target = default_threads();
    pthread_atfork(NULL, NULL, after_fork_child);
}

int sv_pool_threads(void) {
    pthread_once(&once, init_once);
    return P.target;
}

static void stop_workers(void) {
    pthread_mutex_lock(&P.lock);
    P.stop = 1;
    pthread_cond_broadcast(&P.wake);
    pthread_mutex_unlock(&P.lock);
    for (int i = 0; i < P.nworkers; i++) pthread_join(P.threads[i], NULL);
    P.nworkers = 0;
    P.stop = 0;
}

void sv_pool_set_threads(int n) {
    pthread_once(&once, init_once);
    if (n < 1) n = default_threads();
    if (n > SV_MAX_THREADS) n = SV_MAX_THREADS;
    pthread_mutex_lock(&P.busy);
    if (P.nworkers > n - 1) stop_workers();
    P.target = n;
    P.penalty = 0; /* a new setting: the pool is tried again */
    atomic_store_explicit(&P.serial_until, 0, memory_order_relaxed);
    atomic_store_explicit(&P.serial_jobs, 0, memory_order_relaxed);
    pthread_mutex_unlock(&P.busy);
}

/* With P.busy held: start workers up to target - 1. */
static void ensure_workers(void) {
    while (P.nworkers < P.target - 1) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 1 << 20);
        int rc = pthread_create(&P.threads[P.nworkers], &attr, worker_main,
                                (void *)(intptr_t)(P.nworkers + 1));
        pthread_attr_destroy(&attr);
        if (rc != 0) break; /* run with the workers we have */
        P.nworkers++;
    }
}

/* Started where an executor is made, as its function is lowered: a worker thread takes
 * a while to be created and scheduled, and one started by the first call of a process came
 * too late for most of its jobs, so that its core's caches were still cold in the calls
 * after it (the next shapes' first calls 1.5-2x their steady time). */
void sv_pool_start(void) {
    pthread_once(&once, init_once);
    if (P.target <= 1 || in_task || pthread_mutex_trylock(&P.busy) != 0) return;
    ensure_workers();
    pthread_mutex_unlock(&P.busy);
}

static void run_serial(int64_t ntasks, sv_task_fn fn, void *ctx) {
    for (int64_t t = 0; t < ntasks; t++) fn(ctx, t);
    atomic_fetch_add_explicit(&P.stat_serial, 1, memory_order_relaxed);
}

/* Whether a job was late: the caller worked `own` ns, then waited `wait` ns for the
 * workers; waking: the job woke sleeping workers or started them. */
bool sv_pool_late(uint64_t own, uint64_t wait, bool waking) {
    return wait >= (waking ? WAKING_LATE_MIN_NS : LATE_MIN_NS) && 2 * wait >= own;
}

/* With P.busy held, after a job (see sv_pool_late). */
static void judge_job(uint64_t own, uint64_t wait, uint64_t end, bool waking) {
    if (!sv_pool_late(own, wait, waking)) {
        if (P.penalty > 0) P.penalty--;
        return;
    }
    if (P.penalty < PENALTY_MAX) P.penalty++;
    int64_t factor = (int64_t)1 << (P.penalty - 1);
    atomic_store_explicit(&P.serial_until, end + (uint64_t)factor * BACKOFF_MIN_NS,
                          memory_order_relaxed);
    atomic_store_explicit(&P.serial_jobs, factor, memory_order_relaxed);
    atomic_fetch_add_explicit(&P.stat_late, 1, memory_order_relaxed);
}

void sv_run_tasks(int64_t ntasks, sv_task_fn fn, void *ctx, int threads) {
    if (threads <= 1)
        for (int64_t t = 0; t < ntasks; t++) fn(ctx, t);
    else
        sv_parallel(ntasks, fn, ctx);
}

void sv_parallel(int64_t ntasks, sv_task_fn fn, void *ctx) {
    if (ntasks <= 0) return;
    pthread_once(&once, init_once);
    if (ntasks == 1 || in_task || P.target <= 1 || ntasks >= (int64_t)MAX_TASKS) {
        run_serial(ntasks, fn, ctx);
        return;
    }
    uint64_t t0 = now_ns();
    bool jobs_left = atomic_load_explicit(&P.serial_jobs, memory_order_relaxed) > 0 &&
                     atomic_fetch_sub_explicit(&P.serial_jobs, 1, memory_order_relaxed) > 0;
    if (jobs_left || t0 < atomic_load_explicit(&P.serial_until, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&P.stat_backed_off, 1, memory_order_relaxed);
        run_serial(ntasks, fn, ctx);
        return;
    }
    if (pthread_mutex_trylock(&P.busy) != 0) {
        run_serial(ntasks, fn, ctx);
        return;
    }
    int had = P.nworkers;
    ensure_workers();
    if (P.nworkers == 0) {
        pthread_mutex_unlock(&P.busy);
        run_serial(ntasks, fn, ctx);
        return;
    }
    uint32_t gen = P.gen + 1;
    /* set the job up, open its ranges (every range of the last job is spent), then tell
     * the workers */
    P.fn = fn;
    P.ctx = ctx;
    P.ntasks = ntasks;
    atomic_store_explicit(&P.done, 0, memory_order_relaxed);
    int n = P.nworkers + 1 < ntasks ? P.nworkers + 1 : (int)ntasks;
    for (int r = 0; r < n; r++) {
        uint64_t lo = (uint64_t)(ntasks * r / n), hi = (uint64_t)(ntasks * (r + 1) / n);
        atomic_store_explicit(&ranges[r].word, lo << 32 | hi, memory_order_release);
    }
    atomic_store_explicit(&P.nranges, n, memory_order_release);
    pthread_mutex_lock(&P.lock);
    P.gen = gen;
    atomic_store_explicit(&P.word, (uint64_t)gen << 32, memory_order_release);
    /* a worker woken from its sleep, or just started, takes tens of microseconds to come */
    bool waking = P.sleeping > 0 || P.nworkers > had;
    if (P.sleeping) pthread_cond_broadcast(&P.wake);
    pthread_mutex_unlock(&P.lock);

    int64_t ran = run_tasks(0);
    atomic_fetch_add_explicit(&P.stat_caller, ran, memory_order_relaxed);
    uint64_t t1 = now_ns();
    for (unsigned spins = 1; atomic_load_explicit(&P.done, memory_order_acquire) < ntasks;
         spins++) {
        cpu_relax();
        if (spins % 64 == 0 && now_ns() - t1 >= YIELD_NS)
            sched_yield(); /* a worker holding a task may share this core */
    }
    uint64_t t2 = now_ns();
    judge_job(t1 - t0, t2 - t1, t2, waking);
    atomic_fetch_add_explicit(&P.stat_parallel, 1, memory_order_relaxed);
    pthread_mutex_unlock(&P.busy);
}

sv_pool_stats sv_pool_get_stats(void) {
    sv_pool_stats s = {
        .parallel_calls = atomic_load(&P.stat_parallel),
        .serial_calls = atomic_load(&P.stat_serial),
        .tasks_by_caller = atomic_load(&P.stat_caller),
        .tasks_by_workers = atomic_load(&P.stat_workers),
        .late_jobs = atomic_load(&P.stat_late),
        .backed_off_calls = atomic_load(&P.stat_backed_off),
        .serial_jobs_left = atomic_load(&P.serial_jobs) > 0 ? atomic_load(&P.serial_jobs) : 0,
    };
    return s;
}
