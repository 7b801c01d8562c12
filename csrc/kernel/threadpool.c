/* threadpool.c: see threadpool.h. */
#include "threadpool.h"

#include <string.h>
#include <unistd.h>

#ifdef LIMBER_THREADS
#include <pthread.h>
#endif

struct lmb_pool;

typedef struct lmb_worker {
    struct lmb_pool *pool;
    uint32_t index; /* 1 .. threads-1; the caller is worker 0 */
    uint32_t seen;  /* generation at start: only later jobs are run */
#ifdef LIMBER_THREADS
    pthread_t thread;
#endif
} lmb_worker;

struct lmb_pool {
    uint32_t threads; /* wanted, caller included */
    uint32_t running; /* workers started (0 .. LMB_POOL_MAX_THREADS) */
#ifdef LIMBER_THREADS
    pthread_mutex_t lock;
    pthread_cond_t wake; /* workers sleep here until a new job or stop */
    pthread_cond_t done; /* the caller sleeps here until every item is done */
    int stop;
    int sync_ready;      /* mutex and conds initialised */
    uint64_t ticket;     /* (job generation << 32) | next item, atomic */
    uint32_t done_items; /* items finished in the current job, atomic */
    uint32_t active;     /* workers 1 .. active take part in the current job */
#endif
    /* current job, written by the caller before the generation is published */
    lmb_pool_fn fn;
    void *ctx;
    uint32_t items;
    lmb_worker worker[LMB_POOL_MAX_THREADS];
};

size_t lmb_pool_bytes(void) {
    return sizeof(struct lmb_pool);
}

uint32_t lmb_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1u : (uint32_t)n;
}

static uint32_t clamp_threads(uint32_t t) {
    if (t < 1) return 1;
    if (t > LMB_POOL_MAX_THREADS + 1) return LMB_POOL_MAX_THREADS + 1;
    return t;
}

lmb_pool *lmb_pool_init(void *mem, uint32_t threads) {
    lmb_pool *p = (lmb_pool *)mem;
    memset(p, 0, sizeof *p);
    p->threads = clamp_threads(threads);
#ifdef LIMBER_THREADS
    if (pthread_mutex_init(&p->lock, NULL) == 0) {
        if (pthread_cond_init(&p->wake, NULL) == 0) {
            if (pthread_cond_init(&p->done, NULL) == 0)
                p->sync_ready = 1;
            else
                pthread_cond_destroy(&p->wake);
        }
        if (!p->sync_ready) pthread_mutex_destroy(&p->lock);
    }
#endif
    return p;
}

uint32_t lmb_pool_threads(const lmb_pool *p) {
#ifdef LIMBER_THREADS
    return p->threads;
#else
    (void)p;
    return 1;
#endif
}

/* Runs every item on the caller (no workers). */
static void work_alone(lmb_pool *p) {
    for (uint32_t i = 0; i < p->items; i++)
        p->fn(p->ctx, i, 0);
}

#ifdef LIMBER_THREADS

/* Spin iterations (with a pause) before sleeping on a condition variable:
 * back-to-back jobs (one per frame stage) then start without a wake-up
 * through the scheduler, which on a busy machine can take longer than the
 * job itself. About 0.1 to 0.3 ms. */
#define SPIN 4000

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Claims the next run of items of job `gen`: [*first, *first + *count) of
 * *items; 0 when that job has no item left (or a newer job was published).
 * Runs shrink as the job drains (guided scheduling: a share of what is
 * left, down to one item), so a job of hundreds of items costs a few dozen
 * atomic operations on the shared counter instead of two per item, and the
 * last items still go one at a time to whichever thread is free.
 *
 * Items are counted in the same 64-bit word as the generation, and
 * lmb_pool_run closes each job when it ends by setting the count to
 * CLOSED. So a late thread holding an old job's generation can never
 * take an item of another job: while the job runs, its generation is in
 * the word; once it ended, the count is CLOSED (which no item count
 * reaches) until the next job is published under a new generation. The
 * job fields read after a successful claim stay valid until its items are
 * reported done. */
#define CLOSED 0xFFFFFFFFu

static int grab(lmb_pool *p, uint32_t gen, uint32_t share, uint32_t *first, uint32_t *count,
                uint32_t *items) {
    uint64_t t = __atomic_load_n(&p->ticket, __ATOMIC_ACQUIRE);
    for (;;) {
        if ((uint32_t)(t >> 32) != gen) return 0;
        uint32_t n = (uint32_t)t;
        uint32_t all = __atomic_load_n(&p->items, __ATOMIC_RELAXED);
        if (n >= all) return 0; /* also when CLOSED */
        uint32_t take = (all - n) / share;
        if (take < 1) take = 1;
        if (__atomic_compare_exchange_n(&p->ticket, &t, t + take, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            *first = n;
            *count = take;
            *items = all;
            return 1;
        }
    }
}

/* Runs items of job `gen` until none is left; wakes the caller after the
 * job's last item. */
static void work(lmb_pool *p, uint32_t gen, uint32_t worker) {
    /* each claim takes 1 / (2 x threads) of what is left */
    uint32_t share = 2 * (__atomic_load_n(&p->active, __ATOMIC_RELAXED) + 1);
    uint32_t first, count, items;
    while (grab(p, gen, share, &first, &count, &items)) {
        for (uint32_t i = first; i < first + count; i++)
            p->fn(p->ctx, i, worker);
        if (__atomic_add_fetch(&p->done_items, count, __ATOMIC_ACQ_REL) == items && worker != 0) {
            pthread_mutex_lock(&p->lock);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->lock);
        }
    }
}

static uint32_t generation(lmb_pool *p) {
    return (uint32_t)(__atomic_load_n(&p->ticket, __ATOMIC_ACQUIRE) >> 32);
}

static void *worker_main(void *arg) {
    lmb_worker *w = (lmb_worker *)arg;
    lmb_pool *p = w->pool;
    uint32_t seen = w->seen;
    for (;;) {
        int spin = SPIN;
        while (spin-- > 0 && generation(p) == seen && !__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE))
            cpu_relax();
        pthread_mutex_lock(&p->lock);
        while (!p->stop && generation(p) == seen)
            pthread_cond_wait(&p->wake, &p->lock);
        int stop = p->stop;
        pthread_mutex_unlock(&p->lock);
        if (stop) break;
        seen = generation(p);
        if (w->index > __atomic_load_n(&p->active, __ATOMIC_RELAXED)) continue; /* sit it out */
        work(p, seen, w->index);
    }
    return NULL;
}

static void start_workers(lmb_pool *p) {
    if (!p->sync_ready) return;
    while (p->running + 1 < p->threads) {
        lmb_worker *w = &p->worker[p->running];
        w->pool = p;
        w->index = p->running + 1;
        w->seen = generation(p); /* no job runs while workers start */
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) break;
        p->running++;
    }
}

void lmb_pool_shutdown(lmb_pool *p) {
    if (!p->sync_ready || p->running == 0) return;
    pthread_mutex_lock(&p->lock);
    __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (uint32_t i = 0; i < p->running; i++)
        pthread_join(p->worker[i].thread, NULL);
    p->running = 0;
    p->stop = 0;
}

void lmb_pool_close(lmb_pool *p) {
    lmb_pool_shutdown(p);
    if (!p->sync_ready) return;
    /* no worker is left: nobody waits on these any more. Without them
     * start_workers starts nothing, so every later job runs on its caller. */
    p->sync_ready = 0;
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
}

void lmb_pool_set_threads(lmb_pool *p, uint32_t threads) {
    /* Workers beyond the new count stay parked (they sit jobs out), so
     * switching back and forth costs nothing; more start with the next job. */
    p->threads = clamp_threads(threads);
}

void lmb_pool_run_workers(lmb_pool *p, uint32_t items, uint32_t workers, lmb_pool_fn fn,
                          void *ctx) {
    if (items == 0) return;
    p->fn = fn;
    p->ctx = ctx;
    __atomic_store_n(&p->items, items, __ATOMIC_RELAXED);
    if (p->threads > 1 && items > 1 && p->running + 1 < p->threads) start_workers(p);
    uint32_t threads = p->threads < workers ? p->threads : workers > 0 ? workers : 1u;
    uint32_t use = threads - 1 < p->running ? threads - 1 : p->running;
    if (use == 0 || items == 1) {
        work_alone(p);
        return;
    }
    __atomic_store_n(&p->active, use, __ATOMIC_RELAXED);
    __atomic_store_n(&p->done_items, 0u, __ATOMIC_RELAXED);
    uint32_t gen = generation(p) + 1;
    __atomic_store_n(&p->ticket, (uint64_t)gen << 32, __ATOMIC_RELEASE); /* publishes the job */
    pthread_mutex_lock(&p->lock);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    work(p, gen, 0);
    /* Every item is claimed; wait only for items still running elsewhere
     * (a worker that wakes up late finds nothing left and never blocks us). */
    int spin = SPIN;
    while (spin-- > 0 && __atomic_load_n(&p->done_items, __ATOMIC_ACQUIRE) < items)
        cpu_relax();
    if (__atomic_load_n(&p->done_items, __ATOMIC_ACQUIRE) < items) {
        pthread_mutex_lock(&p->lock);
        while (__atomic_load_n(&p->done_items, __ATOMIC_ACQUIRE) < items)
            pthread_cond_wait(&p->done, &p->lock);
        pthread_mutex_unlock(&p->lock);
    }
    /* Close the job (see grab): a worker that read this job's ticket late
     * must not take items of the next one, whose fields change before it
     * is published (and never are, when it runs on this thread alone). An
     * exchange rather than a store: a worker's claim CAS that comes before
     * it in the ticket's order then synchronises with it, so that worker's
     * reads of the job fields come before the next job's writes (a release
     * store alone lets those writes show first; C11, ARM, POWER). */
    (void)__atomic_exchange_n(&p->ticket, ((uint64_t)gen << 32) | CLOSED, __ATOMIC_ACQ_REL);
}

void lmb_pool_run(lmb_pool *p, uint32_t items, lmb_pool_fn fn, void *ctx) {
    lmb_pool_run_workers(p, items, UINT32_MAX, fn, ctx);
}

#else /* single-threaded build */

void lmb_pool_shutdown(lmb_pool *p) {
    (void)p;
}

void lmb_pool_close(lmb_pool *p) {
    (void)p;
}

void lmb_pool_set_threads(lmb_pool *p, uint32_t threads) {
    p->threads = clamp_threads(threads);
}

void lmb_pool_run(lmb_pool *p, uint32_t items, lmb_pool_fn fn, void *ctx) {
    p->fn = fn;
    p->ctx = ctx;
    p->items = items;
    work_alone(p);
}

void lmb_pool_run_workers(lmb_pool *p, uint32_t items, uint32_t workers, lmb_pool_fn fn,
                          void *ctx) {
    (void)workers;
    lmb_pool_run(p, items, fn, ctx);
}

#endif
