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
    uint32_t threads;   /* wanted, caller included */
    uint32_t running;   /* workers started (0 .. threads-1) */
#ifdef LIMBER_THREADS
    pthread_mutex_t lock;
    pthread_cond_t wake; /* workers wait here for a new generation or stop */
    pthread_cond_t done; /* the caller waits here for busy == 0 */
    uint32_t generation;
    uint32_t busy;       /* workers still inside the current job */
    int stop;
    int sync_ready;      /* mutex and conds initialised */
#endif
    /* current job */
    lmb_pool_fn fn;
    void *ctx;
    uint32_t items;
    uint32_t next;       /* next item to hand out (atomic) */
    lmb_worker worker[LMB_POOL_MAX_THREADS];
};

size_t lmb_pool_bytes(void) { return sizeof(struct lmb_pool); }

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

/* Hands out items until none is left. */
static void work(lmb_pool *p, uint32_t worker) {
    for (;;) {
        uint32_t i = __atomic_fetch_add(&p->next, 1u, __ATOMIC_RELAXED);
        if (i >= p->items) break;
        p->fn(p->ctx, i, worker);
    }
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

static void *worker_main(void *arg) {
    lmb_worker *w = (lmb_worker *)arg;
    lmb_pool *p = w->pool;
    uint32_t seen = w->seen;
    for (;;) {
        int spin = SPIN;
        while (spin-- > 0 && __atomic_load_n(&p->generation, __ATOMIC_ACQUIRE) == seen &&
               !__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE))
            cpu_relax();
        pthread_mutex_lock(&p->lock);
        while (!p->stop && __atomic_load_n(&p->generation, __ATOMIC_ACQUIRE) == seen)
            pthread_cond_wait(&p->wake, &p->lock);
        int stop = p->stop;
        pthread_mutex_unlock(&p->lock);
        if (stop) break;
        seen = __atomic_load_n(&p->generation, __ATOMIC_ACQUIRE);
        work(p, w->index);
        if (__atomic_sub_fetch(&p->busy, 1u, __ATOMIC_ACQ_REL) == 0) {
            pthread_mutex_lock(&p->lock);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->lock);
        }
    }
    return NULL;
}

static void start_workers(lmb_pool *p) {
    if (!p->sync_ready) return;
    while (p->running + 1 < p->threads) {
        lmb_worker *w = &p->worker[p->running];
        w->pool = p;
        w->index = p->running + 1;
        w->seen = p->generation; /* no job runs while workers start */
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
    for (uint32_t i = 0; i < p->running; i++) pthread_join(p->worker[i].thread, NULL);
    p->running = 0;
    p->stop = 0;
}

void lmb_pool_set_threads(lmb_pool *p, uint32_t threads) {
    lmb_pool_shutdown(p);
    p->threads = clamp_threads(threads);
}

void lmb_pool_run(lmb_pool *p, uint32_t items, lmb_pool_fn fn, void *ctx) {
    if (items == 0) return;
    p->fn = fn;
    p->ctx = ctx;
    p->items = items;
    p->next = 0;
    if (p->threads > 1 && items > 1 && p->running + 1 < p->threads) start_workers(p);
    if (p->running == 0 || items == 1) {
        work(p, 0);
        return;
    }
    __atomic_store_n(&p->busy, p->running, __ATOMIC_RELAXED);
    __atomic_add_fetch(&p->generation, 1u, __ATOMIC_RELEASE); /* publishes the job */
    pthread_mutex_lock(&p->lock);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    work(p, 0);
    int spin = SPIN;
    while (spin-- > 0 && __atomic_load_n(&p->busy, __ATOMIC_ACQUIRE) > 0) cpu_relax();
    if (__atomic_load_n(&p->busy, __ATOMIC_ACQUIRE) > 0) {
        pthread_mutex_lock(&p->lock);
        while (__atomic_load_n(&p->busy, __ATOMIC_ACQUIRE) > 0) pthread_cond_wait(&p->done, &p->lock);
        pthread_mutex_unlock(&p->lock);
    }
}

#else /* single-threaded build */

void lmb_pool_shutdown(lmb_pool *p) { (void)p; }

void lmb_pool_set_threads(lmb_pool *p, uint32_t threads) { p->threads = clamp_threads(threads); }

void lmb_pool_run(lmb_pool *p, uint32_t items, lmb_pool_fn fn, void *ctx) {
    p->fn = fn;
    p->ctx = ctx;
    p->items = items;
    p->next = 0;
    work(p, 0);
}

#endif
