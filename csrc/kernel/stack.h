/* stack.h: layer stacks, the blend semantics games expect (Unity, Godot,
 * Bevy, Unreal): ordered layers folded bottom-up over the skeleton's rest
 * pose. Shared by the Stack stage (csrc/lua/lcore_plan.c) and the frame plan
 * (plan.h), so both paths compute the same bits from the same inputs.
 *
 * Per instance and joint j, P starts at the rest pose. Each layer, bottom
 * first, has 1 .. LMB_STACK_MAX_SOURCES sources with per-instance weights:
 *   A = the layer's pose: the weighted mean of the sources that play in
 *       that lane, weights normalised inside the layer (translations and
 *       scales averaged, rotations summed with each source sign-aligned to
 *       the joint's rest rotation, then normalised: sources more than 180
 *       degrees apart blend through the rest pose, with no sign flip
 *       between them as they move). No weight: the layer is skipped.
 *   f = layer weight (per instance, [0, 1]) x mask[j] ([0, 1], default 1).
 *   override: t = P.t (1 - f) + A.t f, s likewise, q = slerp(P.q, A.q, f)
 *             on the shortest path (normalised lerp when |dot| >
 *             LMB_NLERP_DOT); f = 1 gives exactly A, f = 0 exactly P.
 *   additive (reference R, default the rest pose): t = P.t + f (A.t - R.t),
 *             s = P.s (1 + f (A.s / R.s - 1)) (ratio 1 where R.s is 0),
 *             dq = conj(R.q) A.q with w >= 0,
 *             q = normalise(P.q normalise((1 - f) identity + f dq)).
 * Everything runs on one block of LMB_LANES lanes in the pose's SoA layout
 * (pose.h); inner loops run over the lanes. No allocation. */
#ifndef LIMBER_STACK_H
#define LIMBER_STACK_H

#include "pose.h"

enum { LMB_LAYER_OVERRIDE = 0, LMB_LAYER_ADDITIVE = 1 };

#define LMB_STACK_MAX_LAYERS 32
#define LMB_STACK_MAX_SOURCES 16
/* the largest source weight (a layer's sum of 16 stays far inside float range) */
#define LMB_STACK_MAX_WEIGHT 1e6

typedef struct lmb_stack_layer {
    uint32_t mode;          /* LMB_LAYER_* */
    uint32_t source_count;  /* 1 .. LMB_STACK_MAX_SOURCES */
    uint32_t first_source;  /* the layer's sources are [first_source, + source_count) */
    const float *mask;      /* joint_count values in [0, 1], or NULL (all 1) */
    const float *reference; /* additive: joint_count * LMB_TRS_FLOATS, NULL = rest pose */
} lmb_stack_layer;

/* Checks a layer description for a skeleton of `joints` joints and
 * `sources` sources in all (err->index = the layer): 1 <= layer_count <=
 * LMB_STACK_MAX_LAYERS ("layers"), each mode known ("mode"), 1 <=
 * source_count <= LMB_STACK_MAX_SOURCES and ranges consecutive within
 * `sources` ("sources"), masks in [0, 1] ("mask", index2 = the joint),
 * references finite with non-zero rotations ("reference", index2 = the
 * joint). No side effects. */
lmb_status lmb_stack_validate(const lmb_stack_layer *layers, uint32_t layer_count, uint32_t joints,
                              uint32_t sources, lmb_error *err);

/* Folds one block: src[k] is source k's block (joints x LMB_TRS_FLOATS x
 * LMB_LANES floats) or NULL when it plays in no lane; src_w[k * LMB_LANES +
 * l] its weight in lane l (0: not playing there; finite, >= 0), layer_w[n *
 * LMB_LANES + l] layer n's weight in lane l ([0, 1]). Writes every joint of
 * every lane of `out` (same layout; may not alias a source). A lane's result
 * depends only on that lane's inputs. `top` (NULL: none) may name, per
 * joint, a layer that replaces it entirely in every lane (override, weight
 * and mask 1, playing): layers below it are skipped there (the result is
 * the same; their sources need not be sampled for that joint), -1 for none.
 * first_done: layer 0 is an override without a mask at weight 1 in every
 * lane, and `out` already holds its pose (the frame plan's fused sampling,
 * lmb_sample_mean2_avx2) at every joint `top` does not name: the fold
 * starts from there. Cannot fail once lmb_stack_validate accepted the
 * layers. */
void lmb_stack_block(const lmb_skeleton *sk, const lmb_stack_layer *layers, uint32_t layer_count,
                     const float *const *src, const float *src_w, const float *layer_w,
                     const int16_t *top, int first_done, float *out);

/* The portable and AVX2 + FMA builds of the fold (lmb_stack_block picks one). */
void lmb_stack_block_portable(const lmb_skeleton *sk, const lmb_stack_layer *layers,
                              uint32_t layer_count, const float *const *src, const float *src_w,
                              const float *layer_w, const int16_t *top, int first_done, float *out);
void lmb_stack_block_avx2(const lmb_skeleton *sk, const lmb_stack_layer *layers,
                          uint32_t layer_count, const float *const *src, const float *src_w,
                          const float *layer_w, const int16_t *top, int first_done, float *out);

#endif
