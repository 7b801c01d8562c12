/* palette.c: skins and skin palettes (portable kernel and dispatch). */
#include "palette.h"

#include <math.h>
#include <string.h>

#include <cglm/cglm.h>

#define ALIGN 32

size_t lmb_skin_bytes(uint32_t joints) {
    size_t n = joints;
    return lmb_align_up(sizeof(lmb_skin), ALIGN) + lmb_align_up(n * sizeof(uint16_t), ALIGN) +
           n * (16 + 64 + 32) * sizeof(float) + ALIGN;
}

lmb_skin *lmb_skin_place(void *mem, const lmb_skeleton *s, uint32_t joints) {
    size_t n = joints;
    unsigned char *p = (unsigned char *)lmb_align_ptr(mem, ALIGN);
    lmb_skin *k = (lmb_skin *)(void *)p;
    p += lmb_align_up(sizeof(lmb_skin), ALIGN);
    k->skel = s;
    k->joint_count = joints;
    k->joint = (uint16_t *)(void *)p, p += lmb_align_up(n * sizeof(uint16_t), ALIGN);
    k->prep4 = (float *)(void *)p, p += n * 64 * sizeof(float);
    k->prep3 = (float *)(void *)p, p += n * 32 * sizeof(float);
    k->inverse_bind = (float *)(void *)p;
    return k;
}

lmb_status lmb_skin_prepare(lmb_skin *k, uint32_t *bad) {
    for (uint32_t i = 0; i < k->joint_count; i++) {
        if (k->joint[i] >= k->skel->joint_count) {
            *bad = i;
            return LMB_ERANGE;
        }
        const float *B = k->inverse_bind + (size_t)i * 16;
        for (int e = 0; e < 16; e++)
            if (!isfinite(B[e])) {
                *bad = i;
                return LMB_ENAN;
            }
        /* prep4: for column pairs (0,1) and (2,3) and each row r, eight floats
         * [B[c][r] x4, B[c+1][r] x4] */
        float *P4 = k->prep4 + (size_t)i * 64;
        for (int pair = 0; pair < 2; pair++)
            for (int r = 0; r < 4; r++)
                for (int e = 0; e < 8; e++)
                    P4[(pair * 4 + r) * 8 + e] = B[(pair * 2 + e / 4) * 4 + r];
        /* prep3: row k of B, twice: [B[0][k] B[1][k] B[2][k] B[3][k]] x2 */
        float *P3 = k->prep3 + (size_t)i * 32;
        for (int r = 0; r < 4; r++)
            for (int e = 0; e < 8; e++)
                P3[r * 8 + e] = B[(e % 4) * 4 + r];
    }
    return LMB_OK;
}

void lmb_mat4_mul(const float a[16], const float b[16], float out[16]) {
    mat4 ma, mb, mo;
    memcpy(ma, a, sizeof ma);
    memcpy(mb, b, sizeof mb);
    glm_mat4_mul(ma, mb, mo);
    memcpy(out, mo, sizeof mo);
}

void lmb_palette_run_portable(const lmb_pose *pose, const lmb_skin *skin, int layout, float *out,
                              uint32_t first, uint32_t count) {
    const uint32_t J = pose->joint_count, K = skin->joint_count;
    const uint32_t width = lmb_palette_width(layout);
    for (uint32_t i = first; i < first + count; i++) {
        const float *model = pose->model + (size_t)i * J * 16;
        for (uint32_t k = 0; k < K; k++) {
            float m[16];
            lmb_mat4_mul(model + (size_t)skin->joint[k] * 16, skin->inverse_bind + (size_t)k * 16,
                         m);
            float *o = out + ((size_t)(i - first) * K + k) * width;
            if (layout == LMB_PALETTE_MAT4) {
                memcpy(o, m, sizeof m);
            } else {
                for (int r = 0; r < 3; r++)
                    for (int c = 0; c < 4; c++)
                        o[r * 4 + c] = m[c * 4 + r];
            }
        }
    }
}

void lmb_palette_block_portable(const lmb_skin *skin, int layout, const float *soa,
                                float *const out[LMB_LANES]) {
    const uint32_t K = skin->joint_count, width = lmb_palette_width(layout);
    for (uint32_t k = 0; k < K; k++) {
        const float *S = soa + (size_t)skin->joint[k] * 12 * LMB_LANES;
        const float *ib = skin->inverse_bind + (size_t)k * 16;
        /* o[c][r] = sum_i M[r][i] IB[i][c], all lanes at once (M's column 3
         * is the translation, its bottom row 0 0 0 1) */
        float o[16][LMB_LANES];
        for (int c = 0; c < 4; c++) {
            const float *b = ib + c * 4;
            for (int r = 0; r < 3; r++)
                for (int l = 0; l < LMB_LANES; l++)
                    o[c * 4 + r][l] = S[(size_t)r * LMB_LANES + (size_t)l] * b[0] +
                                      S[(size_t)(3 + r) * LMB_LANES + (size_t)l] * b[1] +
                                      S[(size_t)(6 + r) * LMB_LANES + (size_t)l] * b[2] +
                                      S[(size_t)(9 + r) * LMB_LANES + (size_t)l] * b[3];
            for (int l = 0; l < LMB_LANES; l++)
                o[c * 4 + 3][l] = b[3];
        }
        for (uint32_t l = 0; l < LMB_LANES; l++) {
            if (!out[l]) continue;
            float *d = out[l] + (size_t)k * width;
            if (layout == LMB_PALETTE_MAT4) {
                for (int q = 0; q < 16; q++)
                    d[q] = o[q][l];
            } else {
                for (int r = 0; r < 3; r++)
                    for (int c = 0; c < 4; c++)
                        d[r * 4 + c] = o[c * 4 + r][l];
            }
        }
    }
}

void lmb_palette_block(const lmb_skin *skin, int layout, const float *soa,
                       float *const out[LMB_LANES]) {
    if (lmb_simd_active())
        lmb_palette_block_avx2(skin, layout, soa, out);
    else
        lmb_palette_block_portable(skin, layout, soa, out);
}

void lmb_palette_run(const lmb_pose *pose, const lmb_skin *skin, int layout, float *out,
                     uint32_t first, uint32_t count) {
    if (lmb_simd_active())
        lmb_palette_run_avx2(pose, skin, layout, out, first, count);
    else
        lmb_palette_run_portable(pose, skin, layout, out, first, count);
}

lmb_status lmb_palette_validate(const lmb_pose *pose, const lmb_skin *skin, int layout,
                                uint32_t first, uint32_t count, lmb_error *err) {
    lmb_error_clear(err);
    if (skin->skel != pose->skel)
        return lmb_error_set(err, LMB_EMISMATCH, "skin",
                             "skin belongs to another skeleton than the pose", 0, 0, 0, 0);
    if (layout != LMB_PALETTE_MAT4 && layout != LMB_PALETTE_MAT3X4)
        return lmb_error_set(err, LMB_EINVAL, "layout", "unknown palette layout {v}", 0, 0,
                             (double)layout, 0);
    if ((uint64_t)first + count > pose->instance_count)
        return lmb_error_set(err, LMB_ERANGE, "count", "instances {i} .. {v} out of range [1, {l}]",
                             first, 0, (double)first + (double)count, (double)pose->instance_count);
    return LMB_OK;
}
