/* pack.h: the clip compressor (packed.h gives the format) and its error
 * measurement.
 *
 * Job: a finished clip (not packed), the skeleton it animates, a tolerance
 * (model units, > 0) and a virtual distance (model units, >= 0).
 *   1. lmb_pack_scratch_bytes: scratch for the job (the caller allocates);
 *   2. lmb_pack_plan: validates, chooses every stream's step and row kinds,
 *      encodes them into the scratch and measures the result (job->stats,
 *      job->bytes = the block lmb_pack_write needs);
 *   3. lmb_pack_write: lays the packed clip out in one block of job->bytes
 *      (node tracks copied exactly; joint tracks equal to the rest pose
 *      within the budget dropped, so the sampler writes the rest pose).
 * Nothing allocates; the scratch may be freed after lmb_pack_write. */
#ifndef LIMBER_PACK_H
#define LIMBER_PACK_H

#include "clip.h"

struct lmb_pool; /* threadpool.h */

/* Error of a packed clip against its source, at every source key time and
 * at the points a quarter, half and three quarters of the way between
 * consecutive key times (so every midpoint), over every joint of the
 * skeleton: at the joint's origin and at three points `distance` from it
 * along its axes (model space). p99: 99th percentile over (joint, time) of
 * the larger of the two (within 0.5%, from a log histogram). */
typedef struct lmb_pack_stats {
    double max_joint, max_distance, p99_distance;
    uint32_t worst_joint; /* 0-based */
    float worst_time;
    uint32_t samples; /* sample times */
} lmb_pack_stats;

typedef struct lmb_pack_job {
    const lmb_clip *src;
    const lmb_skeleton *skel;
    float tolerance, distance;
    /* the most scratch bytes the source's model matrices are kept in
     * between budgets (LMB_PACK_CACHE_BYTES by default): a clip whose samples
     * need more samples the source again for each budget (the same result,
     * more time); the same value must size the scratch */
    size_t cache_bytes;
    /* 0 (the default): the candidates whose keys sit on some frames only
     * (a step, or frames of their own) are also tried with fitted values,
     * those whose interpolation best follows every frame between them
     * (least squares; the first and last keys stay the source's); 1: every
     * key keeps its source value */
    int source_keys;
    /* the workers that share each error measure (NULL: the caller alone)
     * and how many of its threads the scratch was sized for
     * (lmb_pack_workers(pool), read once: measures use at most that many,
     * whatever the pool's count when they run; 0 acts as 1). The packed
     * clip is the same byte for byte whatever the thread count */
    struct lmb_pool *pool;
    uint32_t workers;
    /* set by lmb_pack_plan */
    size_t bytes; /* block size for lmb_pack_write (any alignment) */
    lmb_pack_stats stats;
} lmb_pack_job;

/* The compressor's default cache of source samples (lmb_pack_job.cache_bytes). */
#define LMB_PACK_CACHE_BYTES ((size_t)32 << 20)

/* Workers a measure through `pool` uses (1 for NULL). */
uint32_t lmb_pack_workers(const struct lmb_pool *pool);

/* Scratch bytes for packing src for skel with a cache of at most
 * cache_bytes and `workers` workers (lmb_pack_workers; 0: too large to
 * plan). */
size_t lmb_pack_scratch_bytes(const lmb_clip *src, const lmb_skeleton *skel, size_t cache_bytes,
                              uint32_t workers);

/* Rules (err->field): "clip" (already packed; LMB_EINVAL), "skeleton" (the
 * clip animates joint {v} of a {l}-joint skeleton; LMB_EMISMATCH),
 * "tolerance" (finite, > 0), "distance" (finite, >= 0) and "tolerance"
 * again when no encoding meets it (LMB_ERANGE: value = the best error
 * reached, e.g. a STEP track resampled). */
lmb_status lmb_pack_plan(lmb_pack_job *job, void *scratch, lmb_error *err);

/* The packed clip in mem (job->bytes bytes, any alignment). */
lmb_clip *lmb_pack_write(const lmb_pack_job *job, void *scratch, void *mem);

/* Measures any clip `c` (packed or not) against `src` for skel (the same
 * sample times and points as the stats above) with at most `workers` of
 * pool's threads (pool NULL: the caller alone); scratch of
 * lmb_pack_scratch_bytes(src, skel, LMB_PACK_CACHE_BYTES, workers) bytes. */
void lmb_pack_measure(const lmb_clip *src, const lmb_clip *c, const lmb_skeleton *skel,
                      float distance, struct lmb_pool *pool, uint32_t workers, void *scratch,
                      lmb_pack_stats *out);

#endif
