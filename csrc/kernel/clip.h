/* clip.h: immutable animation clips, keyframe sampling and batched
 * sampling of pose batches.
 *
 * A clip is a set of tracks. Each track animates one property (translation,
 * rotation or scale) of one target: a skeleton joint (0-based index) or a
 * node that is not a joint (kept for Lua to sample, e.g. glTF scene nodes).
 * Each track has its own key times and values and its own interpolation
 * (glTF 2.0: STEP, LINEAR, CUBICSPLINE). Values are `width` floats per key
 * (3 for translation/scale, 4 for rotation xyzw); CUBICSPLINE keys hold
 * in-tangent, value, out-tangent (3 * width floats, glTF order).
 *
 * Keys are stored as records of `stride` floats: the key time followed by
 * the key's values (stride = 1 + width, or 1 + 3 * width for CUBICSPLINE),
 * so interpolating between keys k and k+1 touches one or two cache lines.
 * The times are also kept densely in `times` for binary searches.
 *
 * Memory: one block of lmb_clip_bytes() bytes owned by the caller (the Lua
 * userdata). Build: place, fill tracks[] and the key arrays, then
 * lmb_clip_finish(), which validates every key once (finite, strictly
 * increasing times, non-zero rotations), normalises rotation keys, sorts
 * the tracks (joint tracks first, by joint then path; node tracks after, in
 * input order) and computes the duration. Afterwards the clip is read-only
 * and sampling cannot fail.
 *
 * Key lookup: every sampler keeps a cursor per (instance, track): the key
 * interval used last time and its two times. A time inside it needs no key
 * data; forward playback walks a few key records (O(1) amortised); any
 * other jump (seek, backward play, loop wrap) is a branch-free binary search
 * over the track's dense key times, shared by tracks with identical times.
 * No lookup is linear in the key count. Clips whose joint tracks share one
 * uniform key grid also get a dense frame-major form (lmb_dense, built by
 * the binding after lmb_clip_finish) that the sampler uses instead: O(1)
 * per instance, no cursors. */
#ifndef LIMBER_CLIP_H
#define LIMBER_CLIP_H

#include "packed.h"
#include "pose.h"

/* LMB_PATH_F: a float track of 1 .. LMB_FLOAT_WIDTH values per key (e.g. morph
 * weights), only on node (non-joint) targets: kept and sampled for Lua. */
enum { LMB_PATH_T = 0, LMB_PATH_R = 1, LMB_PATH_S = 2, LMB_PATH_F = 3 };
#define LMB_FLOAT_WIDTH 16
enum { LMB_STEP = 0, LMB_LINEAR = 1, LMB_CUBIC = 2 };

/* Quaternion keys whose dot product is above this are interpolated with
 * lerp + normalise (keys less than about 3.6 degrees apart); otherwise slerp. */
#define LMB_NLERP_DOT 0.9995f

typedef struct lmb_track {
    uint32_t target;    /* joint index (0-based) or node id, as given */
    uint8_t path;       /* LMB_PATH_* */
    uint8_t interp;     /* LMB_STEP / LMB_LINEAR / LMB_CUBIC */
    uint8_t width;      /* floats per value: 3 (T, S), 4 (R), 1 .. LMB_FLOAT_WIDTH (F) */
    uint8_t is_node;    /* 1: not a skeleton joint */
    uint8_t shared;     /* LMB_SHARE_*: ranges of an earlier track (input order) */
    uint32_t stride;    /* floats per key record: 1 + width (CUBICSPLINE 1 + 3 width) */
    uint32_t key_count; /* >= 1 */
    uint32_t times;     /* index of the first key time in clip->times */
    uint32_t values;    /* index of the first record float in clip->values */
    uint32_t input;     /* position of the track in the description (0-based) */
    float first, last;  /* first and last key time (set by lmb_clip_finish) */
} lmb_track;

/* lmb_track.shared: LMB_SHARE_TIMES, the key times are exactly those
 * (offset and count) of an earlier track in input order, validated there;
 * LMB_SHARE_RECORDS (with LMB_SHARE_TIMES), so are the key records (same
 * values, interpolation, path and width), filled, validated and normalised
 * once, with their first track. Tracks that use the very same key arrays
 * (e.g. glTF channels of one sampler) so store their keys once. */
enum { LMB_SHARE_TIMES = 1, LMB_SHARE_RECORDS = 2 };

/* Dense form of a clip whose joint tracks all share one uniform key grid
 * (same key times, every time within a small tolerance of t0 + k dt, all
 * LINEAR or all STEP; single-key tracks are constant and always fit): frame-major, frame k holds
 * every joint's values laid out as blocks of 8 joints, component-major inside a block: data[k *
 * frame_floats + (j / 8) * 80 + c * 8 + j % 8] (c 0..9: t xyz, q xyzw, s xyz; components without a
 * track hold 0, the identity or 1; the sampler writes the rest pose over them). Sampling an
 * instance is O(1): key k from (t - t0) / dt, checked against the real key
 * times (so results equal the cursor path's), then one pass over two
 * contiguous frames. data NULL: the clip uses the per-track cursor path. */
typedef struct lmb_dense {
    float *data;           /* frames * frame_floats, 64-byte aligned */
    const float *times;    /* the shared key times (frames) */
    uint32_t frames;       /* keys per track (>= 2) */
    uint32_t chunks;       /* ceil(joint_span / 8) */
    uint32_t frame_floats; /* chunks * 80 */
    uint32_t interp;       /* LMB_STEP or LMB_LINEAR */
    float t0, inv_dt;      /* first key time, 1 / key interval */
} lmb_dense;

typedef struct lmb_clip {
    float duration; /* largest key time (0 for a clip of single keys) */
    uint32_t track_count;
    uint32_t joint_track_count; /* tracks[0 .. joint_track_count) target joints */
    uint32_t joint_span;        /* largest joint target + 1 (0: no joint track) */
    uint32_t key_total;         /* floats in times (shared keys stored once) */
    uint32_t value_total;       /* floats in values (key records) */
    lmb_track *tracks;
    float *times;
    float *values;
    lmb_dense dense;   /* dense.data NULL: no dense form */
    lmb_packed packed; /* packed.streams NULL: not packed (pack.h builds packed clips:
                        * their joint tracks are the bits of packed.tracked, not
                        * entries of tracks[], which holds their node tracks) */
} lmb_clip;

/* Number of joint tracks of clip c (a packed clip's are bits of packed.tracked). */
static inline uint32_t lmb_clip_joint_track_count(const lmb_clip *c) {
    return c->packed.streams ? c->packed.tracked_count : c->joint_track_count;
}

/* Whether a packed clip animates (joint, path) (LMB_PATH_T, R or S). */
static inline int lmb_packed_tracks(const lmb_packed *p, uint32_t joint, uint32_t path) {
    return joint < p->chunks * 8u && (p->tracked[joint] >> path & 1u);
}

/* Lookup state a sampler keeps per instance for clip c, in lmb_cursor
 * units: a cursor per joint track, or for a packed clip its decoded-key
 * cache (LMB_PK_CACHE_FLOATS per chunk of 8 joints). */
uint32_t lmb_clip_cursor_count(const lmb_clip *c);

/* The joint properties a sampler must write with the rest pose for clip c
 * on a skeleton of J joints, as (joint << 2 | path) into out (NULL: only
 * counted); returns the count. An exact clip: every (joint, path) it has no
 * track for. A packed clip writes every joint below its span itself (the
 * rest pose where it has no track), except the streams it skips entirely. */
uint32_t lmb_clip_untracked(const lmb_clip *c, uint32_t J, uint32_t *out);

/* Whether the packed stream of chunk q and path holds nothing (every row
 * skipped): the sampler writes the rest pose there. */
int lmb_packed_skipped(const lmb_packed *p, uint32_t q, uint32_t path);

/* Bytes for a clip (header included, any alignment; 0 on overflow). */
size_t lmb_clip_bytes(uint32_t tracks, uint32_t keys, uint32_t values);

/* Lays out an empty clip in `mem`. The caller fills, per track, target,
 * path, interp, width, is_node, key_count, times, values (record offset,
 * records of 1 + width floats, 1 + 3 width for CUBICSPLINE) and input, the
 * dense key times, and the values part (record[1 ..]) of every record;
 * lmb_clip_finish copies the times into the records and sets `stride`.
 * `shared` (LMB_SHARE_*) marks tracks that reuse an earlier track's ranges:
 * their arrays are neither filled nor validated again. Tracks that
 * introduce ranges should do so in increasing offsets (a shared range must
 * lie inside the ranges introduced before it, else lmb_clip_finish fails
 * with field "tracks", LMB_ERANGE). */
lmb_clip *lmb_clip_place(void *mem, uint32_t tracks, uint32_t keys, uint32_t values);

/* Validates, normalises and sorts a filled clip (see above). Rules, each
 * reported in *err with the track's input position as index and "joint j
 * path" or "node n path" as context:
 *   field "times"  (index2 = key): every key time finite and >= 0
 *                  (LMB_ENAN / LMB_ERANGE), strictly increasing (LMB_EINVAL,
 *                  limit = the key time before);
 *   field "values" (index2 = float or key): every value finite (LMB_ENAN),
 *                  rotation keys of length > 1e-6 (LMB_EINVAL);
 *   field "tracks": no two joint tracks animate the same joint and path
 *                  (LMB_EINVAL, index2 = the earlier track); track ranges
 *                  and widths fit the arrays (LMB_ERANGE: a caller bug).
 * Returns LMB_OK or err->code. */
lmb_status lmb_clip_finish(lmb_clip *c, lmb_error *err);

/* Checks, without changing anything, a clip laid out by lmb_clip_place (or
 * lmb_packed_clip_place) whose arrays came from elsewhere (a snapshot):
 * what lmb_clip_finish guarantees. Tracks in the finished order, each
 * layout within the arrays, strides set, key times finite, >= 0 and
 * strictly increasing, every record's time its key time, values finite,
 * rotation keys unit length, first / last / joint_track_count /
 * joint_span consistent (a packed clip holds node tracks only), duration
 * finite and at least the last key. The dense form is not checked (build
 * it after: lmb_clip_dense_build); nor the packed streams (lmb_packed_check). */
lmb_status lmb_clip_check(const lmb_clip *c, lmb_error *err);

/* Bytes for the dense form of a finished clip (any alignment), or 0 when
 * the clip does not qualify (see lmb_dense) or would hold more than 32
 * times its joint tracks' floats per frame (a few joints of a wide span). */
size_t lmb_clip_dense_bytes(const lmb_clip *c);

/* Whether the joint tracks of a finished clip share one uniform key grid
 * (the dense form's rule): its first time, interval, key count and
 * interpolation (LMB_LINEAR or LMB_STEP). */
int lmb_clip_grid(const lmb_clip *c, double *t0, double *dt, uint32_t *frames, uint32_t *interp);

/* Builds the dense form in `mem` (lmb_clip_dense_bytes(c) bytes, owned by
 * the caller and kept alive as long as the clip). */
void lmb_clip_dense_build(lmb_clip *c, void *mem);

/* A track's lookup state for one instance: the key interval used last and
 * its times, so the common case (same interval) reads no key data at all.
 * All zero = nothing known. Reset it when the instance changes clips. */
typedef struct lmb_cursor {
    uint32_t key;
    float lo, hi;
} lmb_cursor;

/* Samples one track at clip time t (already wrapped or clamped) into out
 * (width floats), using and updating `cursor` (zeroed: no history). */
void lmb_track_sample(const lmb_clip *c, const lmb_track *tr, float t, lmb_cursor *cursor,
                      float *out);

/* Wraps (loop) or clamps a time into [0, duration]: loop uses
 * t - d * floor(t / d) (exact fmod where that rounds outside [0, d)), so
 * t = d gives 0 and negative times wrap. t must not be NaN; an infinite t
 * gives 0 (loop) or an end (clamp). */
float lmb_clip_time(const lmb_clip *c, double t, int loop);

/* A whole pose of skeleton `s` from clip c at clip time t (wrapped or
 * clamped already): the rest pose with the clip's joint tracks (joints <
 * s->joint_count) sampled over it; trs holds joint_count * LMB_TRS_FLOATS. */
void lmb_clip_sample_pose(const lmb_clip *c, float t, const lmb_skeleton *s, float *trs);
/* The same for an exact clip through one cursor per joint track (cur:
 * joint_track_count, zeroed before the first call; NULL: a fresh cursor
 * per track): the same pose, found in O(1) per track when t moves forward
 * from call to call. only: NULL, or the joints to sample (only[j] != 0;
 * the others keep their rest values). */
void lmb_clip_sample_pose_cursors(const lmb_clip *c, float t, const lmb_skeleton *s, float *trs,
                                  lmb_cursor *cur, const uint8_t *only);

/* lmb_clip_time in double (the sampler's and the plan's stored times). */
double lmb_clip_time_d(const lmb_clip *c, double t, int loop);

/* ---- batched sampling -------------------------------------------------- */

/* A sampler plays one clip (from a set of clips for one skeleton) per
 * instance of a pose batch. The binding places it inside a userdata with
 * every array; nothing is allocated per frame.
 *
 * untracked[untracked_first[k] .. untracked_first[k+1]) lists, for clip k,
 * (joint << 2 | path) for every joint property the clip has no track for:
 * those are written with the rest pose, so every local the sampler touches
 * is defined whatever ran before. */
typedef struct lmb_sampler {
    lmb_pose *pose; /* borrowed, anchored by the binding */
    uint32_t clip_count;
    uint32_t cursor_stride;          /* largest joint_track_count of the set */
    const lmb_clip **clips;          /* clip_count, borrowed */
    const uint32_t *untracked_first; /* clip_count + 1 */
    const uint32_t *untracked;
    lmb_cursor *cursors; /* instance_count * cursor_stride */
    int32_t *clip;       /* per instance: clip index, -1 = not sampled */
    double *time;        /* per instance: clip time (before wrapping) */
    float *rate;         /* per instance: rate used by lmb_sampler_advance */
    uint8_t *loop;       /* per instance: 1 loop, 0 clamp */
    int32_t root_joint;  /* root motion removal: joint, or -1 for none */
    uint32_t root_flags; /* LMB_ROOT_* */
} lmb_sampler;

/* Root motion removal after sampling: the root joint's translation x and z
 * are replaced by the clip's value at time 0 (y kept), and its rotation
 * loses the yaw (rotation about +Y) it gained since time 0. */
enum { LMB_ROOT_XZ = 1, LMB_ROOT_YAW = 2 };

/* Yaw angle (about +Y) of a unit quaternion xyzw, in radians. */
float lmb_quat_yaw(const float q[4]);

/* Every instance: time += rate * dt in double (wrapped into [0, d) when
 * looping, clamped otherwise), so finite floats always give a finite time. */
void lmb_sampler_advance(lmb_sampler *s, double dt);

/* Checks a sampler and the instances [first, first + count) a run would
 * sample (err->index = the clip or instance, 0-based):
 *   a pose ("pose"); 1 <= clip_count <= 65535 and every clip present
 *   ("clips"); no clip animates a joint the skeleton lacks ("clips",
 *   value = the clip's joint span, limit = the joint count);
 *   cursor_stride >= every clip's joint track count ("cursor_stride");
 *   root_joint -1 or a joint ("root_joint");
 *   the range inside the pose ("count");
 *   when the per-instance arrays are set: each clip index -1 or a clip
 *   ("clip", index = the instance), each time finite ("time").
 * No side effects. */
lmb_status lmb_sampler_validate(const lmb_sampler *s, uint32_t first, uint32_t count,
                                lmb_error *err);

/* Samples instances [first, first + count) into the pose's locals and marks
 * them changed. Cannot fail once lmb_sampler_validate accepted them. With
 * lmb_simd_active(), lanes of a block that play the same clip are sampled
 * together by the AVX2 kernel (same results within float rounding). */
void lmb_sampler_run(lmb_sampler *s, uint32_t first, uint32_t count);

/* ---- internal: shared by clip.c and clip_avx2.c ------------------------ */

/* The key interval k of `times` (n >= 2 keys) with times[k] <= t <
 * times[k+1], given times[0] <= t < times[n-1]: a few steps forward from
 * *cursor, else a binary search on the side of the cursor holding t. */
uint32_t lmb_key_find_slow(const float *times, uint32_t n, float t, uint32_t *cursor);

/* Key interval k of a track with first < t < last (so n >= 2): the
 * cursor's interval, a few records forward, or a binary search. */
static inline uint32_t lmb_find_key(const lmb_clip *c, const lmb_track *tr, float t,
                                    lmb_cursor *cur) {
    const float *rec = c->values + tr->values;
    uint32_t n = tr->key_count, st = tr->stride, k = cur->key;
    if (t >= cur->lo && t < cur->hi) return k;
    if (t >= cur->hi && k + 1 < n && t - cur->hi < 3.0f * (cur->hi - cur->lo)) {
        /* a few keys forward: walk the records (the lines needed next anyway) */
        const float *r = rec + (size_t)(k + 1) * st;
        for (int step = 0; step < 4 && k + 2 < n; step++, r += st) {
            k++;
            if (t < r[st]) {
                cur->key = k, cur->lo = r[0], cur->hi = r[st];
                return k;
            }
        }
    }
    /* seek: binary search on the dense times, which also give the interval
     * bounds, so the (likely uncached) record is not touched here and the
     * caller's loads of several lanes' records overlap */
    const float *times = c->times + tr->times;
    uint32_t guess = k;
    k = lmb_key_find_slow(times, n, t, &guess);
    cur->key = k, cur->lo = times[k], cur->hi = times[k + 1];
    return k;
}

/* Dense sampling plan for the lanes of one pose block: each lane's two
 * frames and interpolation factor. chunks[l] = 0: lane not dense-sampled. */
typedef struct lmb_dense_plan {
    const float *a[LMB_LANES], *b[LMB_LANES];
    float alpha[LMB_LANES];
    uint32_t chunks[LMB_LANES];
    const lmb_packed *pk[LMB_LANES]; /* packed lanes: decoded at frame position pos[l] */
    float pos[LMB_LANES];
    float *cache[LMB_LANES]; /* packed lanes: the instance's decoded-key cache */
    uint32_t max_chunks;
    unsigned lanes;      /* bit l: lane l is dense-sampled */
    const uint8_t *need; /* per chunk of 8 joints, the lanes (bit l) that need it
                          * (NULL: every lane needs every chunk) */
} lmb_dense_plan;

/* Samples the dense lanes of `plan` into the pose block at `blk` (J joints,
 * LMB_TRS_FLOATS * LMB_LANES floats each: every component of joints < 8
 * chunks[l] of lane l); prefetches the frames of `next` (may be NULL). */
void lmb_sample_dense_avx2(float *blk, uint32_t J, const lmb_dense_plan *plan,
                           const lmb_dense_plan *next);

/* The frame plan's fused first layer (an override of two sources, weight 1
 * in every lane, no mask): samples the sources of plans p0 and p1 chunk by
 * chunk and writes their weighted mean (weights w0, w1 per lane; a lane
 * where one source plays gets that source) straight into the pose block at
 * `blk`: the values the fold (stack_fold.h) gives from the sources sampled
 * apart, bit for bit. Both plans' lanes must be dense or packed lanes of
 * clips that track every property of every joint (nothing to finish: no
 * rest values, no root motion). rest_q: the skeleton's rest rotations,
 * 32 floats per chunk of 8 joints (the x row of the 8 joints, then y, z,
 * w; the identity past the last joint); need (NULL: all): the lanes each
 * chunk is read in; next: a plan whose chunks are asked for ahead (may be
 * NULL). */
void lmb_sample_mean2_avx2(float *blk, uint32_t J, const lmb_dense_plan *p0,
                           const lmb_dense_plan *p1, const float w0[LMB_LANES],
                           const float w1[LMB_LANES], const float *rest_q, const uint8_t *need,
                           const lmb_dense_plan *next);

/* Joint tracks of clip `c` for the lanes of the block at `blk` set in
 * `lanes` (bit l = lane l), all playing that clip; `t` holds their clip
 * times (wrapped), cur[l] their cursors. Each lane's result depends only on
 * its own inputs. */
void lmb_sample_lanes_avx2(const lmb_clip *c, float *blk, lmb_cursor *const cur[LMB_LANES],
                           unsigned lanes, const float t[LMB_LANES]);

/* ---- sampling of arbitrary lanes (the sampler and the frame plan) ------ */

/* The dense lanes of a block whose lane l holds instance inst[l] of the
 * sampler's state (lanes not in `valid` are left out). */
void lmb_sampler_dense_plan(const lmb_sampler *s, const uint32_t inst[LMB_LANES], unsigned valid,
                            lmb_dense_plan *pl);

/* Samples instance inst[l] of the sampler's state (clip, time, loop,
 * cursors) into lane l of the pose block at `blk` (J joints x LMB_TRS_FLOATS x
 * LMB_LANES floats, the pose's SoA layout) for every lane in `valid` whose
 * instance plays a clip; other lanes are not written. Returns the lanes
 * written. With lmb_simd_active(), lanes sharing a clip go through the
 * AVX2 kernel together when at least `group_min` of them do (1: every lane
 * always takes the same path, so a lane's result never depends on its
 * neighbours); `plan` (NULL: computed here) and `next` (NULL: none) are
 * dense plans of this block and of the one sampled next. `need` (NULL:
 * every joint of every lane) gives per chunk of 8 joints (j / 8) the lanes
 * (bit l) whose values someone reads: dense clips skip the others, which
 * keep what they held (the frame plan passes what a higher override layer
 * does not replace). Dirty marks are the caller's. */
unsigned lmb_sampler_lanes(lmb_sampler *s, const uint32_t inst[LMB_LANES], unsigned valid,
                           float *blk, unsigned group_min, const lmb_dense_plan *plan,
                           const lmb_dense_plan *next, const uint8_t *need);

#endif
