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

typedef struct lmb_blend_layer {
    const lmb_pose *pose;      /* same skeleton and instance count as the output */
    const float *weight;       /* per instance weights in [0, 1e6] (the binding's bound: 64
                                * layers' sums stay finite), lanes padded (block_count * 8) */
    const float *mask;         /* joint_count weights in [0, 1], or NULL (all 1) */
    const lmb_pose *reference; /* additive: 1 instance (shared) or the same count */
    uint32_t additive;
} lmb_blend_layer;

/* Blends blocks [first_block, first_block + block_count) of `out`. The
 * binding checked skeletons, counts and that `out` is not a layer pose. */
void lmb_blend_run(lmb_pose *out, const lmb_blend_layer *layers, uint32_t layer_count,
                   uint32_t first_block, uint32_t block_count);

#endif
