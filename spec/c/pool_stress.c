/* pool_stress.c: hammers the worker pool (csrc/threadpool.c) with jobs of
 * changing sizes, switching between threaded and single-threaded runs, and
 * checks every job: each item run exactly once, by a call that saw that
 * job's own context, with no item index past the job's end. Each job's
 * context lives on the heap and is poisoned and freed when the job
 * returns, so a late worker that runs an item of a finished job is seen
 * (and, under AddressSanitizer, reported).
 *
 * Usage: pool_stress [rounds] [threads]; prints one line of counts and
 * exits 1 when any is not zero. Run by spec/pool_spec.lua. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "threadpool.h"

#define MAX_ITEMS 3000u

typedef struct stress_job {
    unsigned magic; /* JOB_LIVE while the job runs */
    unsigned round;
    unsigned items;
    unsigned *hits; /* one counter per item, updated atomically */
} stress_job;

#define JOB_LIVE 0x600DF00Du

static unsigned current_round;
static long stale_calls, out_of_range;

static void run_item(void *ctx, uint32_t item, uint32_t worker) {
    (void)worker;
    const stress_job *j = ctx;
    if (j->magic != JOB_LIVE ||
        j->round != __atomic_load_n(&current_round, __ATOMIC_ACQUIRE)) {
        __atomic_add_fetch(&stale_calls, 1, __ATOMIC_RELAXED);
        return;
    }
    if (item >= j->items) {
        __atomic_add_fetch(&out_of_range, 1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_add_fetch(&j->hits[item], 1u, __ATOMIC_RELAXED);
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 20000;
    uint32_t threads = argc > 2 ? (uint32_t)atoi(argv[2]) : 4;
    /* job sizes that grow and shrink: a late claim on a small job's ticket
     * would find a bigger job's item count */
    static const unsigned sizes[] = {3, 50, MAX_ITEMS, 1, 7, 400, 2, 1000};
    size_t bytes = (lmb_pool_bytes() + 63) / 64 * 64;
    void *mem = aligned_alloc(64, bytes);
    unsigned *hits = calloc(MAX_ITEMS, sizeof *hits);
    if (!mem || !hits) return 2;
    lmb_pool *pool = lmb_pool_init(mem, threads);
    long missed = 0, repeated = 0;
    for (long r = 0; r < rounds; r++) {
        stress_job *j = malloc(sizeof *j);
        if (!j) return 2;
        j->magic = JOB_LIVE;
        j->round = (unsigned)r;
        j->items = sizes[r % (long)(sizeof sizes / sizeof sizes[0])];
        j->hits = hits;
        memset(hits, 0, MAX_ITEMS * sizeof *hits);
        __atomic_store_n(&current_round, (unsigned)r, __ATOMIC_RELEASE);
        /* every fifth job on the caller alone, the others on all threads */
        lmb_pool_set_threads(pool, r % 5 == 4 ? 1 : threads);
        lmb_pool_run(pool, j->items, run_item, j);
        for (unsigned i = 0; i < j->items; i++) {
            unsigned h = __atomic_load_n(&hits[i], __ATOMIC_RELAXED);
            if (h == 0) missed++;
            if (h > 1) repeated++;
        }
        memset(j, 0xAB, sizeof *j);
        free(j);
    }
    lmb_pool_shutdown(pool);
    free(mem);
    free(hits);
    printf("pool_stress: %ld rounds, %u threads: missed %ld, repeated %ld, stale %ld, "
           "out of range %ld\n",
           rounds, threads, missed, repeated, stale_calls, out_of_range);
    return missed || repeated || stale_calls || out_of_range ? 1 : 0;
}
