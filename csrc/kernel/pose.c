/* pose.c: pose batch storage, local pose access, local-to-model driver and
 * the portable kernel. */
#include "pose.h"

#include <math.h>
#include <string.h>

#define ALIGN 64

static size_t sizes(uint32_t joints, uint32_t instances, size_t *local, size_t *model, size_t *root,
                    size_t *dirty, size_t *scratch) {
    size_t blocks = ((size_t)instances + LMB_LANES - 1) / LMB_LANES;
    size_t lanes = blocks * LMB_LANES;
    *local = lmb_align_up(blocks * joints * LMB_TRS_FLOATS * LMB_LANES * sizeof(float), ALIGN);
    *model = lmb_align_up(lanes * joints * 16 * sizeof(float), ALIGN);
    *root = lmb_align_up(lanes * 16 * sizeof(float), ALIGN);
    *dirty = lmb_align_up(lanes * sizeof(uint32_t), ALIGN);
    *scratch = lmb_align_up((size_t)joints * 12 * LMB_LANES * sizeof(float), ALIGN);
    return lmb_align_up(sizeof(lmb_pose), ALIGN) + *local + *model + *root + 2 * *dirty + *scratch +
           lmb_align_up(joints, ALIGN) + ALIGN;
}

size_t lmb_pose_bytes(uint32_t joints, uint32_t instances) {
    size_t a, b, c, d, e;
    if (joints > LMB_MAX_JOINTS || instances > (1u << 24)) return 0;
    return sizes(joints, instances, &a, &b, &c, &d, &e);
}

lmb_pose *lmb_pose_place(void *mem, const lmb_skeleton *s, uint32_t instances) {
    size_t local, model, root, dirty, scratch;
    uint32_t J = s->joint_count;
    sizes(J, instances, &local, &model, &root, &dirty, &scratch);
    unsigned char *p = (unsigned char *)lmb_align_ptr(mem, ALIGN);
    lmb_pose *pose = (lmb_pose *)(void *)p;
    p += lmb_align_up(sizeof(lmb_pose), ALIGN);
    pose->skel = s;
    pose->joint_count = J;
    pose->instance_count = instances;
    pose->block_count = (instances + LMB_LANES - 1) / LMB_LANES;
    pose->has_root = 0;
    pose->generation = 0;
    pose->skip_model = 0;
    pose->local = (float *)(void *)p, p += local;
    pose->model = (float *)(void *)p, p += model;
    pose->root = (float *)(void *)p, p += root;
    pose->first_dirty = (uint32_t *)(void *)p, p += dirty;
    pose->inst_generation = (uint32_t *)(void *)p, p += dirty;
    pose->scratch = (float *)(void *)p, p += scratch;
    pose->loaded = p;
    uint32_t lanes = pose->block_count * LMB_LANES;
    memset(pose->model, 0, model);
    memset(pose->scratch, 0, scratch);
    memset(pose->loaded, 0, J);
    memset(pose->inst_generation, 0, dirty);
    for (uint32_t i = 0; i < lanes; i++) {
        lmb_pose_reset(pose, i);
        lmb_pose_set_root(pose, i, NULL);
    }
    /* model matrices start at the rest pose, never zero: attachments and
     * palettes read valid matrices even before the first pass */
    lmb_pose_local_to_model(pose, 0, pose->block_count, 1);
    return pose;
}

void lmb_pose_set_trs(lmb_pose *p, uint32_t i, uint32_t j, const float trs[LMB_TRS_FLOATS]) {
    float *d = p->local + lmb_pose_local_index(p, i, j);
    for (int c = 0; c < LMB_TRS_FLOATS; c++)
        d[c * LMB_LANES] = trs[c];
    lmb_pose_touch(p, i, j);
}

void lmb_pose_get_trs(const lmb_pose *p, uint32_t i, uint32_t j, float trs[LMB_TRS_FLOATS]) {
    const float *d = p->local + lmb_pose_local_index(p, i, j);
    for (int c = 0; c < LMB_TRS_FLOATS; c++)
        trs[c] = d[c * LMB_LANES];
}

void lmb_pose_reset(lmb_pose *p, uint32_t i) {
    for (uint32_t j = 0; j < p->joint_count; j++) {
        float *d = p->local + lmb_pose_local_index(p, i, j);
        const float *r = p->skel->rest + (size_t)j * LMB_TRS_FLOATS;
        for (int c = 0; c < LMB_TRS_FLOATS; c++)
            d[c * LMB_LANES] = r[c];
    }
    p->first_dirty[i] = 0;
}

void lmb_pose_set_root(lmb_pose *p, uint32_t i, const float m[16]) {
    float *r = p->root + (size_t)i * 16;
    if (m) {
        memcpy(r, m, 16 * sizeof(float));
        r[3] = r[7] = r[11] = 0.0f; /* affine within 1e-4 (validated): exactly */
        r[15] = 1.0f;
        p->has_root = 1;
    } else {
        memset(r, 0, 16 * sizeof(float));
        r[0] = r[5] = r[10] = r[15] = 1.0f;
    }
    p->first_dirty[i] = 0;
}

/* Scratch layout: joint j's 3x4 model matrix for the block's 8 lanes,
 * element (row r, column c) at scratch[(j * 12 + c * 3 + r) * LMB_LANES + lane]. */
static void load_scratch(lmb_pose *p, uint32_t block, uint32_t j) {
    float *d = p->scratch + (size_t)j * 12 * LMB_LANES;
    for (uint32_t l = 0; l < LMB_LANES; l++) {
        const float *m = p->model + ((size_t)(block * LMB_LANES + l) * p->joint_count + j) * 16;
        for (uint32_t c = 0; c < 4; c++)
            for (uint32_t r = 0; r < 3; r++)
                d[(c * 3 + r) * LMB_LANES + l] = m[c * 4 + r];
    }
}

/* The same arithmetic as the AVX2 kernel, written as loops over the 8
 * lanes so compilers can vectorise it with whatever the target offers. */
void lmb_l2m_block_portable(lmb_pose *p, uint32_t block, uint32_t start) {
    const uint32_t J = p->joint_count;
    const uint16_t *parent = p->skel->parent;
    enum { W = LMB_LANES };
    float rootf[12 * W];
    for (uint32_t l = 0; l < W; l++) {
        const float *R = p->root + (size_t)(block * W + l) * 16;
        for (uint32_t c = 0; c < 4; c++)
            for (uint32_t r = 0; r < 3; r++)
                rootf[(c * 3 + r) * W + l] = R[c * 4 + r];
    }
    float *model0 = p->model + (size_t)block * W * J * 16;
    for (uint32_t j = start; j < J; j++) {
        const float *L = p->local + ((size_t)block * J + j) * (LMB_TRS_FLOATS * W);
        float *S = p->scratch + (size_t)j * 12 * W;
        uint32_t pj = parent[j];
        const float *P = pj == LMB_NO_PARENT ? rootf : p->scratch + (size_t)pj * 12 * W;
        float a[12][W]; /* local 3x4, column-major: a[c * 3 + r] */
        for (int l = 0; l < W; l++) {
            float x = L[3 * W + l], y = L[4 * W + l], z = L[5 * W + l], w = L[6 * W + l];
            float sx = L[7 * W + l], sy = L[8 * W + l], sz = L[9 * W + l];
            float x2 = x + x, y2 = y + y, z2 = z + z;
            float xx = x * x2, yy = y * y2, zz = z * z2, xy = x * y2, xz = x * z2, yz = y * z2;
            float wx = w * x2, wy = w * y2, wz = w * z2;
            a[0][l] = (1.0f - (yy + zz)) * sx;
            a[1][l] = (xy + wz) * sx;
            a[2][l] = (xz - wy) * sx;
            a[3][l] = (xy - wz) * sy;
            a[4][l] = (1.0f - (xx + zz)) * sy;
            a[5][l] = (yz + wx) * sy;
            a[6][l] = (xz + wy) * sz;
            a[7][l] = (yz - wx) * sz;
            a[8][l] = (1.0f - (xx + yy)) * sz;
            a[9][l] = L[0 * W + l];
            a[10][l] = L[1 * W + l];
            a[11][l] = L[2 * W + l];
        }
        for (int c = 0; c < 4; c++)
            for (int r = 0; r < 3; r++)
                for (int l = 0; l < W; l++) {
                    float v = P[r * W + l] * a[c * 3][l] + P[(3 + r) * W + l] * a[c * 3 + 1][l] +
                              P[(6 + r) * W + l] * a[c * 3 + 2][l];
                    if (c == 3) v += P[(9 + r) * W + l];
                    S[(c * 3 + r) * W + l] = v;
                }
        for (int l = 0; l < W && !p->skip_model; l++) {
            float *out = model0 + ((size_t)l * J + j) * 16;
            for (int c = 0; c < 4; c++) {
                for (int r = 0; r < 3; r++)
                    out[c * 4 + r] = S[(c * 3 + r) * W + l];
                out[c * 4 + 3] = c == 3 ? 1.0f : 0.0f;
            }
        }
    }
}

void lmb_pose_local_to_model(lmb_pose *p, uint32_t first_block, uint32_t block_count, int force) {
    const uint32_t J = p->joint_count;
    const uint16_t *parent = p->skel->parent;
    int simd = lmb_simd_active();
    for (uint32_t b = first_block; b < first_block + block_count; b++) {
        uint32_t *fd = p->first_dirty + (size_t)b * LMB_LANES;
        uint32_t start = J;
        if (force) {
            start = 0;
        } else {
            for (int l = 0; l < LMB_LANES; l++)
                if (fd[l] < start) start = fd[l];
        }
        if (start >= J) continue;
        p->generation++;
        for (int l = 0; l < LMB_LANES; l++)
            if (force || fd[l] < J) p->inst_generation[(size_t)b * LMB_LANES + (size_t)l]++;
        if (start > 0) {
            /* Partial update: parents above `start` were not computed in this
             * call; bring their stored model matrices back into the scratch. */
            for (uint32_t j = start; j < J; j++) {
                uint32_t pj = parent[j];
                if (pj != LMB_NO_PARENT && pj < start && !p->loaded[pj]) {
                    load_scratch(p, b, pj);
                    p->loaded[pj] = 1;
                }
            }
            for (uint32_t j = start; j < J; j++) {
                uint32_t pj = parent[j];
                if (pj != LMB_NO_PARENT && pj < start) p->loaded[pj] = 0;
            }
        }
        if (simd)
            lmb_l2m_block_avx2(p, b, start);
        else
            lmb_l2m_block_portable(p, b, start);
        for (int l = 0; l < LMB_LANES; l++)
            fd[l] = J;
    }
}

lmb_status lmb_pose_l2m_validate(const lmb_pose *p, uint32_t first_block, uint32_t block_count,
                                 lmb_error *err) {
    lmb_error_clear(err);
    if ((uint64_t)first_block + block_count > p->block_count)
        return lmb_error_set(err, LMB_ERANGE, "blocks", "blocks {i} .. {v} out of range [1, {l}]",
                             first_block, 0, (double)first_block + (double)block_count,
                             (double)p->block_count);
    return LMB_OK;
}

lmb_status lmb_pose_root_validate(const float m[16], lmb_error *err) {
    static const float bottom[4] = {0.0f, 0.0f, 0.0f, 1.0f};
    lmb_error_clear(err);
    for (uint32_t k = 0; k < 16; k++)
        if (!isfinite(m[k]))
            return lmb_error_set(err, LMB_ENAN, "root", "root matrix m[{i}] ({v}) is not finite", k,
                                 0, (double)m[k], 0);
    for (uint32_t r = 0; r < 4; r++)
        if (fabsf(m[r * 4 + 3] - bottom[r]) > 1e-4f)
            return lmb_error_set(err, LMB_EINVAL, "root",
                                 "root matrix must be affine (bottom row 0 0 0 1: m[4], m[8], "
                                 "m[12] = 0 and m[16] = 1; m[{i}] is {v})",
                                 r * 4 + 3, 0, (double)m[r * 4 + 3], (double)bottom[r]);
    return LMB_OK;
}
