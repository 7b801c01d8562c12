/* blend.h: weighted blending of local poses for every instance of a pose
 * batch in one call (before local-to-model).
 *
 * Normal layers are blended with weights normalised per joint: for joint j
 * of instance i, layer l contributes w = weight_l[i] * mask_l[j];
 * translations and scales are the weighted mean, rotations are summed along
 * the shortest path (each sign-aligned with the running sum) and
 * normalised. A joint whose total weight is 0 gets the skeleton's rest
 * pose. Additive layers are then applied in order with their weight w:
 * the layer stores a pose, the delta is taken against a reference pose
 * (dt = t - t_ref, dq = conj(q_ref) * q, ds = s / s_ref) and applied as
 * t += w dt, q = q * nlerp(identity, dq, w), s *= 1 + w (ds - 1). A layer
 * equal to its reference changes nothing.
 *
 * Everything is SoA in blocks of LMB_LANES instances (see pose.h); inner
 * loops run over the lanes so compilers vectorise them. No allocation. */
#ifndef LIMBER_BLEND_H
#define LIMBER_BLEND_H

#include "pose.h"

/* At most this many layers, each weight in [0, LMB_BLEND_MAX_WEIGHT]:
 * the sum of every layer's weights stays far inside float range (3e38 +
 * 3e38 would overflow to infinity and blend to 0). */
#define LMB_BLEND_MAX_LAYERS 64
#define LMB_BLEND_MAX_WEIGHT 1e6

typedef struct lmb_blend_layer {
    const lmb_pose *pose;      /* same skeleton and instance count as the output */
    const float *weight;       /* per instance weights in [0, LMB_BLEND_MAX_WEIGHT], lanes
                                * padded (block_count * 8) */
    const float *mask;         /* joint_count weights in [0, 1], or NULL (all 1) */
    const lmb_pose *reference; /* additive: 1 instance (shared) or the same count */
    uint32_t additive;
} lmb_blend_layer;

/* Checks a blend job (err->index = the layer, 0-based):
 *   1 <= layer_count <= LMB_BLEND_MAX_LAYERS ("layers");
 *   each layer has a pose ("pose") that is not `out`, with out's skeleton
 *   and instance count;
 *   an additive layer has a reference ("reference") with out's skeleton
 *   and 1 or out's instance count; a normal layer has none;
 *   every weight of a real instance is in [0, LMB_BLEND_MAX_WEIGHT]
 *   ("weight", index2 = the instance, value = the weight);
 *   every mask value is in [0, 1] ("mask", index2 = the joint);
 *   blocks [first_block, first_block + block_count) exist in out
 *   ("blocks").
 * No side effects. */
lmb_status lmb_blend_validate(const lmb_pose *out, const lmb_blend_layer *layers,
                              uint32_t layer_count, uint32_t first_block, uint32_t block_count,
                              lmb_error *err);

/* The mask rule alone, for a mask about to replace layer `layer`'s. */
lmb_status lmb_blend_mask_validate(const float *mask, uint32_t joints, uint32_t layer,
                                   lmb_error *err);

/* Blends blocks [first_block, first_block + block_count) of `out`.
 * Cannot fail once lmb_blend_validate accepted the job (the weights and
 * masks it read must not have been set outside the rules since). */
void lmb_blend_run(lmb_pose *out, const lmb_blend_layer *layers, uint32_t layer_count,
                   uint32_t first_block, uint32_t block_count);

#endif
