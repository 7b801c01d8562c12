/* threadpool.h: a small pthread worker pool for batched kernel jobs.
 *
 * A job is `items` independent work items and a function called once per
 * item: fn(ctx, item, worker). Items are handed out dynamically (an atomic
 * counter; each claim takes a run of consecutive items, a share of what is
 * left that shrinks to one as the job drains), the calling thread works
 * too, and lmb_pool_run returns when every item is done. Results must
 * depend only on the item, never on which worker ran it or in which order:
 * then a job gives bit-identical output whatever the thread count (the
 * skinning kernel, palettes and local-to-model blocks all fit this rule).
 *
 * Memory: the pool lives in caller-provided memory (lmb_pool_bytes), so the
 * binding keeps it inside a userdata. Threads are started lazily on the
 * first job that can use them and stopped by lmb_pool_shutdown (idempotent)
 * or, for good, by lmb_pool_close (the binding calls it from __gc). No
 * allocation per job.
 *
 * Single-threaded builds (LIMBER_THREADS not defined, CMake option
 * LIMBER_THREADS=OFF) keep the same API: every job runs on the caller. */
#ifndef LIMBER_THREADPOOL_H
#define LIMBER_THREADPOOL_H

#include "limber.h"

/* Upper bound on worker threads (the caller is not counted). */
#define LMB_POOL_MAX_THREADS 64

typedef void (*lmb_pool_fn)(void *ctx, uint32_t item, uint32_t worker);

typedef struct lmb_pool lmb_pool;

size_t lmb_pool_bytes(void);

/* Initialises a pool in `mem` (lmb_pool_bytes(), 64-byte aligned) that will
 * use `threads` threads in total (the caller included; clamped to
 * [1, LMB_POOL_MAX_THREADS + 1]). Starts no thread yet. */
lmb_pool *lmb_pool_init(void *mem, uint32_t threads);

/* Threads used by jobs (the caller included). Always 1 without LIMBER_THREADS. */
uint32_t lmb_pool_threads(const lmb_pool *p);

/* Changes the thread count used by the next jobs. Workers beyond it stay
 * parked until the count rises again or the pool shuts down; missing ones
 * start with the next job. Must not be called while a job runs. */
void lmb_pool_set_threads(lmb_pool *p, uint32_t threads);

/* Runs fn for items 0 .. items-1 and waits for all of them. Not reentrant:
 * one job at a time per pool (the Lua state is single-threaded). If worker
 * threads cannot be started the job runs on the caller. */
void lmb_pool_run(lmb_pool *p, uint32_t items, lmb_pool_fn fn, void *ctx);
/* lmb_pool_run with at most `workers` threads (the caller included; 0 acts
 * as 1), so fn sees worker < workers: for jobs with scratch per worker,
 * sized for the thread count read before the binding allocated it. That
 * count can change in between: an allocation can run __gc metamethods, and
 * Lua code in them can call limber.skinning.threads. */
void lmb_pool_run_workers(lmb_pool *p, uint32_t items, uint32_t workers, lmb_pool_fn fn, void *ctx);

/* Stops and joins every worker. Idempotent; the pool stays usable (workers
 * restart on the next job). */
void lmb_pool_shutdown(lmb_pool *p);

/* Stops and joins every worker for good: later jobs still run, on the
 * caller alone, and never start a thread again; the pool's memory may be
 * freed once this returns and no job runs. Idempotent. The binding calls it
 * from the pool's __gc, so objects finalized after it (at lua_close) leave
 * no thread behind on freed memory. */
void lmb_pool_close(lmb_pool *p);

/* Number of online CPUs (at least 1). */
uint32_t lmb_cpu_count(void);

#endif
