/* pool_stress.c: hammers the worker pool (csrc/kernel/threadpool.c) with jobs of
 * changing sizes and thread counts (some on the caller alone, some with
 * workers sitting out) and checks every job: each item run exactly once,
 * by a call that saw that job's own context, with a worker index below
 * the job's thread count (or below the cap of lmb_pool_run_workers, which
 * every third job passes: from 1 to the count, and past it) and no item
 * index past the job's end.
 *
 * Each job's context lives on the heap; when the job returns it is
 * poisoned and kept in a ring of retired jobs that are freed only several
 * rounds later, so a late call on a finished job reads defined (poisoned)
 * memory and is counted as stale, and the allocator cannot hand the same
 * address to the next job.
 *
 * Usage: pool_stress [rounds] [threads]; prints one line of counts and
 * exits 1 when any is not zero. Run by spec/pool_spec.lua. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "threadpool.h"

#define MAX_ITEMS 3000u
#define RETIRED 8

typedef struct stress_job {
    unsigned magic; /* JOB_LIVE while the job runs */
    unsigned round;
    unsigned items;
    unsigned threads; /* the pool's thread count for this job, or the job's cap below it */
    unsigned *hits;   /* one counter per item, updated atomically */
} stress_job;

#define JOB_LIVE 0x600DF00Du

static unsigned current_round;
static long stale_calls, out_of_range, bad_worker;

static void run_item(void *ctx, uint32_t item, uint32_t worker) {
    const stress_job *j = ctx;
    if (__atomic_load_n(&j->magic, __ATOMIC_RELAXED) != JOB_LIVE ||
        j->round != __atomic_load_n(&current_round, __ATOMIC_ACQUIRE)) {
        __atomic_add_fetch(&stale_calls, 1, __ATOMIC_RELAXED);
        return;
    }
    if (worker >= j->threads) __atomic_add_fetch(&bad_worker, 1, __ATOMIC_RELAXED);
    if (item >= j->items) {
        __atomic_add_fetch(&out_of_range, 1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_add_fetch(&j->hits[item], 1u, __ATOMIC_RELAXED);
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 20000;
    unsigned threads = argc > 2 ? (unsigned)atoi(argv[2]) : 4;
    if (threads < 1) threads = 1;
    /* job sizes that grow and shrink: a late claim on a small job's ticket
     * would find a bigger job's item count */
    static const unsigned sizes[] = {3, 50, MAX_ITEMS, 1, 7, 400, 2, 1000, 31};
    /* thread counts: all, fewer (workers beyond sit out), the caller alone */
    const unsigned counts[] = {threads, 2, 1, 3, threads, 1, 2};
    size_t bytes = (lmb_pool_bytes() + 63) / 64 * 64;
    void *mem = aligned_alloc(64, bytes);
    unsigned *hits = calloc(MAX_ITEMS, sizeof *hits);
    stress_job *retired[RETIRED] = {NULL};
    if (!mem || !hits) return 2;
    lmb_pool *pool = lmb_pool_init(mem, threads);
    long missed = 0, repeated = 0;
    for (long r = 0; r < rounds; r++) {
        stress_job *j = malloc(sizeof *j);
        if (!j) return 2;
        unsigned t = counts[r % (long)(sizeof counts / sizeof counts[0])];
        if (t > threads) t = threads;
        lmb_pool_set_threads(pool, t);
        j->round = (unsigned)r;
        j->items = sizes[r % (long)(sizeof sizes / sizeof sizes[0])];
        j->threads = lmb_pool_threads(pool);
        j->hits = hits;
        __atomic_store_n(&j->magic, JOB_LIVE, __ATOMIC_RELAXED);
        memset(hits, 0, MAX_ITEMS * sizeof *hits);
        __atomic_store_n(&current_round, (unsigned)r, __ATOMIC_RELEASE);
        if (r % 3 == 2) { /* capped: worker indices below cap (0 acts as 1) */
            unsigned cap = (unsigned)(r / 3 % (threads + 2));
            if (cap < j->threads) j->threads = cap > 0 ? cap : 1;
            lmb_pool_run_workers(pool, j->items, cap, run_item, j);
        } else {
            lmb_pool_run(pool, j->items, run_item, j);
        }
        for (unsigned i = 0; i < j->items; i++) {
            unsigned h = __atomic_load_n(&hits[i], __ATOMIC_RELAXED);
            if (h == 0) missed++;
            if (h > 1) repeated++;
        }
        __atomic_store_n(&j->magic, 0xDEADDEADu, __ATOMIC_RELAXED);
        free(retired[r % RETIRED]);
        retired[r % RETIRED] = j;
    }
    lmb_pool_shutdown(pool);
    for (int i = 0; i < RETIRED; i++)
        free(retired[i]);
    free(mem);
    free(hits);
    printf("pool_stress: %ld rounds, %u threads: missed %ld, repeated %ld, stale %ld, "
           "out of range %ld, bad worker %ld\n",
           rounds, threads, missed, repeated, stale_calls, out_of_range, bad_worker);
    return missed || repeated || stale_calls || out_of_range || bad_worker ? 1 : 0;
}
