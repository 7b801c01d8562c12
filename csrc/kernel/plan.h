/* plan.h: the frame plan. One object evaluates a whole crowd per frame:
 * per block of LMB_LANES instances, sample every source clip -> fold the
 * layer stack (stack.h) -> local-to-model -> palettes, all in one worker's
 * cache-sized scratch, writing to memory only what someone reads: palette
 * entries and the model matrices of slot joints (or of every joint).
 *
 * State per instance: for every source (layer l's sources are consecutive,
 * see lmb_stack_layer) a sampler entry (clip, time, rate, loop, cursors:
 * the plan holds one lmb_sampler per source over the crowd pose, never run
 * directly) and a weight with an optional linear fade; per layer a weight
 * with a fade; a LOD rate `every` (1 .. 255 runs) and phase; a dirty flag.
 *
 * A run: lmb_plan_advance (one thread) moves times and fades by dt, marks
 * the instances whose inputs changed, and lists the instances due this run
 * ((run + phase) % every == 0, or never evaluated) that changed; then
 * lmb_plan_block evaluates block b of that list (lanes = list entries b * 8
 * .. b * 8 + 7), spread over the worker pool; every block writes only its
 * own instances' outputs and its worker's scratch, and a lane's result
 * depends only on that instance's inputs, so the output is the same bytes
 * for any thread count and any LOD setting; lmb_plan_finish bumps the
 * pose's generation when anything was evaluated (scene attachments).
 *
 * IK (lmb_plan_ik) runs per block between local-to-model and the outputs,
 * on the worker pose: in a block where some lane has a constraint on,
 * local-to-model also fills the worker pose's model matrices, each
 * constraint solves the lanes whose weight is above 0 (ik.h) and brings the
 * matrices below its joints up to date; palettes, slots and locals are then
 * written from the solved pose. */
#ifndef LIMBER_PLAN_H
#define LIMBER_PLAN_H

#include "clip.h"
#include "ik.h"
#include "palette.h"
#include "stack.h"

enum { LMB_PLAN_IK_TWO_BONE = 0, LMB_PLAN_IK_AIM = 1 };

/* An IK constraint run per block after local-to-model, in the plan's
 * order (a chain of aims: root first). The job holds the joints and
 * settings (pose, first, count and the per-instance arrays are set per
 * block); per instance: a target and pole in the pose's model space, a
 * pole flag and a weight in [0, 1] (0: off, the default). */
typedef struct lmb_plan_ik {
    int kind;
    lmb_ik_two_bone two_bone; /* kind LMB_PLAN_IK_TWO_BONE */
    lmb_ik_aim aim;           /* kind LMB_PLAN_IK_AIM */
    float *target;            /* instance_count * 3 */
    float *pole;              /* instance_count * 3 */
    uint8_t *has_pole;        /* instance_count */
    float *weight;            /* instance_count */
} lmb_plan_ik;

typedef struct lmb_plan_palette {
    const lmb_skin *skin; /* of the pose's skeleton */
    int layout;           /* LMB_PALETTE_* */
    float *out;           /* instance_count * joints * width floats */
} lmb_plan_palette;

/* One worker's scratch (64-byte aligned, no sharing between workers). */
typedef struct lmb_plan_worker {
    lmb_pose *pose; /* LMB_LANES instances: folded locals, roots, model matrices */
    float *src;     /* source_count blocks of joints x LMB_TRS_FLOATS x LMB_LANES floats */
    float *rest_q;  /* per chunk of 8 joints, the rest rotations' x, y, z, w rows (32 floats) */
    int16_t *top;   /* joints: the highest layer covering the joint in the block, or -1 */
    uint8_t *need;  /* layers x chunks of 8 joints: the chunks a layer's sources must sample */
    /* The layers' masks as joint patterns (bit n: layer n's mask > 0 at the
     * joint, bit 32 + n: == 1), so a block finds need and top per distinct
     * pattern instead of per joint and layer. Made on a worker's first
     * block of a run (masks change only between runs): */
    uint8_t *pid;         /* joints: the joint's pattern (an index into pat) */
    uint32_t *chunk_pids; /* chunks: bit k set when pattern k occurs in the chunk */
    uint64_t pat[32];
    uint32_t pat_count;          /* patterns; 33: more than 32, the block works joint by joint */
    uint32_t pat_run, pat_valid; /* the run they were made for; 0: not made yet */
    double sample, blend, model, ik, output; /* seconds spent in the current run */
} lmb_plan_worker;

/* Bytes of one worker's scratch (any alignment). */
size_t lmb_plan_worker_bytes(uint32_t joints, uint32_t sources, uint32_t layers);
/* Lays out worker scratch in `mem` (all sources at the rest pose). */
void lmb_plan_worker_place(lmb_plan_worker *w, void *mem, const lmb_skeleton *s, uint32_t sources);

typedef struct lmb_plan {
    lmb_pose *pose; /* the crowd (borrowed): skeleton, instances, roots, model matrices */
    uint32_t layer_count, source_count;
    lmb_stack_layer *layers; /* layer_count */
    uint32_t *layer_of;      /* source_count: the layer of each source */
    lmb_sampler *src;        /* source_count samplers over `pose` */
    double *prev_time;       /* source_count * N: each source's time before the last
                              * advance (set with the time by play and set_time) */
    float *weight;           /* source_count * N: source weights */
    float *weight_to;        /* fade targets */
    float *weight_speed;     /* fade speed (weight units per second; 0: no fade) */
    float *layer_weight;     /* layer_count * N, [0, 1] */
    float *layer_to, *layer_speed;
    uint8_t *every, *phase; /* per instance: LOD */
    uint8_t *dirty;         /* per instance: 0 clean, 1 changed, 2 never evaluated */
    uint32_t *active;       /* the instances of the current run */
    uint32_t active_count;
    uint32_t run; /* runs so far */
    uint32_t palette_count;
    const lmb_plan_palette *palettes;
    uint32_t slot_count; /* joints whose model matrices are written (all_models: every joint) */
    const uint16_t *slots;
    uint32_t all_models;
    uint32_t write_locals; /* 1: the folded local transforms go to pose->local too */
    uint32_t ik_count;
    lmb_plan_ik *ik; /* ik_count constraints */
    uint32_t worker_count;
    lmb_plan_worker *workers;
    double advance; /* seconds of the last lmb_plan_advance */
    double last_dt; /* dt of the last lmb_plan_advance (0 before the first) */
} lmb_plan;

/* Checks a plan before its first run (err->index = the source, palette,
 * slot or constraint): a pose; the layers (lmb_stack_validate); every
 * source's sampler (lmb_sampler_validate over every instance) and the same
 * clip set in all; palettes of the pose's skeleton with a known layout
 * ("palettes"); slot joints inside the skeleton ("slots"); IK constraints
 * of a known kind whose job (with no instances) validates ("ik"); at least
 * one worker ("workers").
 * Per-instance values are kept valid by the setters. No side effects. */
lmb_status lmb_plan_validate(const lmb_plan *p, lmb_error *err);

/* Advances times (rate * dt, wrapped or clamped) and fades (by |dt|),
 * counts the run and lists the instances to evaluate (p->active). dt must be
 * finite. Returns the number of blocks to evaluate. */
uint32_t lmb_plan_advance(lmb_plan *p, double dt);

/* Evaluates block b of the current run's list on worker `worker`'s scratch
 * (worker < p->worker_count). */
void lmb_plan_block(lmb_plan *p, uint32_t b, uint32_t worker);

/* Blended values of a float track (LMB_PATH_F on node `node`, `width`
 * values: e.g. a mesh's morph weights) for every instance, through the
 * layer stack as it stands (after a run): per instance, starting from
 * `base` (width values, one row for all), each layer bottom-up with weight
 * lw > 0 takes its sources' values normalised by their weights (sources
 * whose clip has no such track give `base`); an override layer moves the
 * result toward that by lw, an additive layer adds lw times its difference
 * from `base`. Values are at the sources' current times: an instance LOD
 * skipped this run gets weights its pose has not caught up with. `track`
 * maps each clip of the plan's set (p->src[0].clips) to its track index
 * (in clip->tracks) or -1. out: instance_count * width floats. Cannot fail. */
void lmb_plan_float_track(const lmb_plan *p, const int32_t *track, uint32_t width,
                          const float *base, float *out);

/* The instances (ascending, 0-based, into out: instance_count entries)
 * having a source with weight > 0 whose last step (as lmb_plan_advance made
 * it: rate * last_dt from the time before for a looping clip, that time to
 * the time now otherwise) passed an end of its clip (a lap of a looping
 * clip, a clip that does not loop reaching its end or, backward, its
 * start), or moved at all on a clip whose flags[c] is nonzero (flags: one
 * byte per clip of the set, or NULL: none), e.g. the clips with events.
 * What an event, loop or finished notification needs, as a superset: the
 * caller checks each. Returns the count. Cannot fail. */
uint32_t lmb_plan_stepped(const lmb_plan *p, const uint8_t *flags, uint32_t *out);

/* Ends a run (generation of the pose). */
void lmb_plan_finish(lmb_plan *p);

/* Marks instance i changed (any setter) / every instance. */
static inline void lmb_plan_touch(lmb_plan *p, uint32_t i) {
    if (p->dirty[i] == 0) p->dirty[i] = 1;
}
void lmb_plan_touch_all(lmb_plan *p);

#endif
