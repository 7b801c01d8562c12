/* blend.c: the portable blend kernel (loops over the 8 lanes of a block). */
#include "blend.h"

#include <math.h>

#define L LMB_LANES

/* Pointer to joint j of block b (component 0, lane 0). */
static inline const float *block_joint(const lmb_pose *p, uint32_t b, uint32_t j) {
    return p->local + ((size_t)b * p->joint_count + j) * (LMB_TRS_FLOATS * L);
}

static void blend_normal(lmb_pose *out, const lmb_blend_layer *layers, uint32_t n, uint32_t b,
                         uint32_t j, float *d) {
    float acc[LMB_TRS_FLOATS * L] = {0};
    float wsum[L] = {0};
    for (uint32_t l = 0; l < n; l++) {
        const lmb_blend_layer *ly = layers + l;
        if (ly->additive) continue;
        float m = ly->mask ? ly->mask[j] : 1.0f;
        if (m == 0.0f) continue;
        const float *src = block_joint(ly->pose, b, j);
        const float *wt = ly->weight + (size_t)b * L;
        for (int k = 0; k < L; k++) {
            float w = wt[k] * m;
            float dot = acc[3 * L + k] * src[3 * L + k] + acc[4 * L + k] * src[4 * L + k] +
                        acc[5 * L + k] * src[5 * L + k] + acc[6 * L + k] * src[6 * L + k];
            float wq = dot < 0.0f ? -w : w;
            wsum[k] += w;
            for (int c = 0; c < 3; c++)
                acc[c * L + k] += w * src[c * L + k];
            for (int c = 3; c < 7; c++)
                acc[c * L + k] += wq * src[c * L + k];
            for (int c = 7; c < 10; c++)
                acc[c * L + k] += w * src[c * L + k];
        }
    }
    const float *rest = out->skel->rest + (size_t)j * LMB_TRS_FLOATS;
    for (int k = 0; k < L; k++) {
        if (wsum[k] > 0.0f) {
            float inv = 1.0f / wsum[k];
            for (int c = 0; c < 3; c++)
                d[c * L + k] = acc[c * L + k] * inv;
            for (int c = 7; c < 10; c++)
                d[c * L + k] = acc[c * L + k] * inv;
            float q2 = acc[3 * L + k] * acc[3 * L + k] + acc[4 * L + k] * acc[4 * L + k] +
                       acc[5 * L + k] * acc[5 * L + k] + acc[6 * L + k] * acc[6 * L + k];
            if (q2 > 1e-20f) {
                float qi = 1.0f / sqrtf(q2);
                for (int c = 3; c < 7; c++)
                    d[c * L + k] = acc[c * L + k] * qi;
            } else {
                for (int c = 3; c < 7; c++)
                    d[c * L + k] = rest[c];
            }
        } else {
            for (int c = 0; c < LMB_TRS_FLOATS; c++)
                d[c * L + k] = rest[c];
        }
    }
}

static void apply_additive(const lmb_blend_layer *ly, uint32_t b, uint32_t j, float *d) {
    float m = ly->mask ? ly->mask[j] : 1.0f;
    if (m == 0.0f) return;
    const float *src = block_joint(ly->pose, b, j);
    const float *wt = ly->weight + (size_t)b * L;
    int shared = ly->reference->instance_count == 1;
    const float *ref = shared ? block_joint(ly->reference, 0, j) : block_joint(ly->reference, b, j);
    for (int k = 0; k < L; k++) {
        float w = wt[k] * m;
        if (w == 0.0f) continue;
        int rk = shared ? 0 : k;
        for (int c = 0; c < 3; c++)
            d[c * L + k] += w * (src[c * L + k] - ref[c * L + rk]);
        for (int c = 7; c < 10; c++) {
            float rs = ref[c * L + rk];
            float ds = rs != 0.0f ? src[c * L + k] / rs : 1.0f;
            d[c * L + k] *= 1.0f + w * (ds - 1.0f);
        }
        /* dq = conj(r) * q */
        float rx = -ref[3 * L + rk], ry = -ref[4 * L + rk], rz = -ref[5 * L + rk],
              rw = ref[6 * L + rk];
        float qx = src[3 * L + k], qy = src[4 * L + k], qz = src[5 * L + k], qw = src[6 * L + k];
        float dx = rw * qx + rx * qw + ry * qz - rz * qy;
        float dy = rw * qy - rx * qz + ry * qw + rz * qx;
        float dz = rw * qz + rx * qy - ry * qx + rz * qw;
        float dw = rw * qw - rx * qx - ry * qy - rz * qz;
        if (dw < 0.0f) dx = -dx, dy = -dy, dz = -dz, dw = -dw;
        /* nlerp(identity, dq, w) */
        dx *= w, dy *= w, dz *= w, dw = 1.0f - w + w * dw;
        float n2 = dx * dx + dy * dy + dz * dz + dw * dw;
        float inv = n2 > 1e-20f ? 1.0f / sqrtf(n2) : 0.0f;
        if (inv == 0.0f) continue;
        dx *= inv, dy *= inv, dz *= inv, dw *= inv;
        /* q = q * dq */
        float ax = d[3 * L + k], ay = d[4 * L + k], az = d[5 * L + k], aw = d[6 * L + k];
        float ox = aw * dx + ax * dw + ay * dz - az * dy;
        float oy = aw * dy - ax * dz + ay * dw + az * dx;
        float oz = aw * dz + ax * dy - ay * dx + az * dw;
        float ow = aw * dw - ax * dx - ay * dy - az * dz;
        float o2 = ox * ox + oy * oy + oz * oz + ow * ow;
        float oi = 1.0f / sqrtf(o2);
        d[3 * L + k] = ox * oi, d[4 * L + k] = oy * oi, d[5 * L + k] = oz * oi,
                  d[6 * L + k] = ow * oi;
    }
}

void lmb_blend_run(lmb_pose *out, const lmb_blend_layer *layers, uint32_t layer_count,
                   uint32_t first_block, uint32_t block_count) {
    uint32_t J = out->joint_count;
    for (uint32_t b = first_block; b < first_block + block_count; b++) {
        for (uint32_t j = 0; j < J; j++) {
            float *d = out->local + ((size_t)b * J + j) * (LMB_TRS_FLOATS * L);
            blend_normal(out, layers, layer_count, b, j, d);
            for (uint32_t l = 0; l < layer_count; l++)
                if (layers[l].additive) apply_additive(layers + l, b, j, d);
        }
        for (uint32_t k = 0; k < L; k++) {
            uint32_t i = b * L + k;
            if (i < out->instance_count) lmb_pose_touch(out, i, 0);
        }
    }
}

lmb_status lmb_blend_mask_validate(const float *mask, uint32_t joints, uint32_t layer,
                                   lmb_error *err) {
    lmb_error_clear(err);
    for (uint32_t j = 0; j < joints; j++)
        if (!(mask[j] >= 0.0f && mask[j] <= 1.0f))
            return lmb_error_set(err, LMB_ERANGE, "mask",
                                 "layers[{i}].mask[{j}] ({v}) must be a number in [0, 1]", layer, j,
                                 (double)mask[j], 1.0);
    return LMB_OK;
}

lmb_status lmb_blend_validate(const lmb_pose *out, const lmb_blend_layer *layers,
                              uint32_t layer_count, uint32_t first_block, uint32_t block_count,
                              lmb_error *err) {
    lmb_error_clear(err);
    if (layer_count < 1 || layer_count > LMB_BLEND_MAX_LAYERS)
        return lmb_error_set(err, LMB_ERANGE, "layers", "layer count {v} out of range [1, {l}]", 0,
                             0, (double)layer_count, LMB_BLEND_MAX_LAYERS);
    if ((uint64_t)first_block + block_count > out->block_count)
        return lmb_error_set(err, LMB_ERANGE, "blocks", "blocks {i} .. {v} out of range [1, {l}]",
                             first_block, 0, (double)first_block + (double)block_count,
                             (double)out->block_count);
    for (uint32_t l = 0; l < layer_count; l++) {
        const lmb_blend_layer *ly = layers + l;
        const lmb_pose *p = ly->pose, *r = ly->reference;
        if (!p)
            return lmb_error_set(err, LMB_EINVAL, "pose", "layers[{i}].pose is missing", l, 0, 0,
                                 0);
        if (p == out)
            return lmb_error_set(err, LMB_EINVAL, "pose", "layers[{i}].pose is the output pose", l,
                                 0, 0, 0);
        if (p->skel != out->skel || p->instance_count != out->instance_count)
            return lmb_error_set(err, LMB_EMISMATCH, "pose",
                                 "layers[{i}].pose must have the output's skeleton and {l} "
                                 "instances (it has {v})",
                                 l, 0, (double)p->instance_count, (double)out->instance_count);
        if (ly->additive && !r)
            return lmb_error_set(err, LMB_EINVAL, "reference",
                                 "layers[{i}] is additive and needs a reference Pose", l, 0, 0, 0);
        if (!ly->additive && r)
            return lmb_error_set(err, LMB_EINVAL, "reference",
                                 "layers[{i}].reference is only for additive layers", l, 0, 0, 0);
        if (r && (r->skel != out->skel ||
                  (r->instance_count != 1 && r->instance_count != out->instance_count)))
            return lmb_error_set(err, LMB_EMISMATCH, "reference",
                                 "layers[{i}].reference must have the output's skeleton and 1 or "
                                 "{l} instances (it has {v})",
                                 l, 0, (double)r->instance_count, (double)out->instance_count);
        if (!ly->weight)
            return lmb_error_set(err, LMB_EINVAL, "weight", "layers[{i}] has no weights", l, 0, 0,
                                 0);
        for (uint32_t i = 0; i < out->instance_count; i++)
            if (!(ly->weight[i] >= 0.0f && ly->weight[i] <= (float)LMB_BLEND_MAX_WEIGHT))
                return lmb_error_set(err, LMB_ERANGE, "weight",
                                     "layers[{i}]: the weight of instance {j} ({v}) is out of "
                                     "range [0, {l}]",
                                     l, i, (double)ly->weight[i], LMB_BLEND_MAX_WEIGHT);
        if (ly->mask && lmb_blend_mask_validate(ly->mask, out->joint_count, l, err) != LMB_OK)
            return err->code;
    }
    return LMB_OK;
}
