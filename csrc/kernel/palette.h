/* palette.h: skins (joint maps + inverse bind matrices) and skin palettes.
 *
 * A skin names K joints of a skeleton (a glTF skin may use a subset, in
 * any order) and one inverse bind matrix each. The palette of an instance
 * is, for k in 0..K-1,
 *     palette[k] = model[joint[k]] * inverse_bind[k]
 * written straight into one of two GPU-ready layouts:
 *   LMB_PALETTE_MAT4:   16 floats per joint, column-major (uniform arrays);
 *   LMB_PALETTE_MAT3X4: 12 floats per joint, the first three rows of the
 *                       matrix, one row per RGBA32F texel (float textures).
 * Instances follow each other: instance i starts at i * K * (16 or 12). */
#ifndef LIMBER_PALETTE_H
#define LIMBER_PALETTE_H

#include "pose.h"

enum { LMB_PALETTE_MAT4 = 0, LMB_PALETTE_MAT3X4 = 1 };

typedef struct lmb_skin {
    const lmb_skeleton *skel; /* borrowed; the binding keeps it alive */
    uint32_t joint_count;     /* K, 1 .. LMB_MAX_JOINTS */
    uint16_t *joint;          /* K skeleton joint indices */
    float *inverse_bind;      /* K * 16, column-major */
    float *prep4;             /* K * 64: inverse binds arranged for the AVX2 mat4 kernel */
    float *prep3;             /* K * 32: transposed rows for the AVX2 mat3x4 kernel */
} lmb_skin;

size_t lmb_skin_bytes(uint32_t joints);

/* Lays out a skin in `mem` (any alignment, lmb_skin_bytes() bytes). The
 * caller fills joint[] and inverse_bind[] and then calls lmb_skin_prepare. */
lmb_skin *lmb_skin_place(void *mem, const lmb_skeleton *s, uint32_t joints);

/* Checks joint indices (< skeleton joint count) and finite matrices, then
 * builds the prepared copies. *bad receives the offending skin joint. */
lmb_status lmb_skin_prepare(lmb_skin *k, uint32_t *bad);

/* Floats per palette entry for a layout (16 or 12). */
static inline uint32_t lmb_palette_width(int layout) {
    return layout == LMB_PALETTE_MAT4 ? 16 : 12;
}

/* Checks a palette job: the skin belongs to the pose's skeleton ("skin",
 * LMB_EMISMATCH), layout is a palette layout ("layout"), instances
 * [first, first + count) exist in the pose ("count"). No side effects. */
lmb_status lmb_palette_validate(const lmb_pose *pose, const lmb_skin *skin, int layout,
                                uint32_t first, uint32_t count, lmb_error *err);

/* Writes palettes of instances [first, first + count) of `pose` into out,
 * where out points at instance `first`'s entry. Cannot fail once
 * lmb_palette_validate accepted the job. */
void lmb_palette_run(const lmb_pose *pose, const lmb_skin *skin, int layout, float *out,
                     uint32_t first, uint32_t count);

void lmb_palette_run_portable(const lmb_pose *pose, const lmb_skin *skin, int layout, float *out,
                              uint32_t first, uint32_t count);
void lmb_palette_run_avx2(const lmb_pose *pose, const lmb_skin *skin, int layout, float *out,
                          uint32_t first, uint32_t count);

/* Palettes of one block of LMB_LANES instances straight from the 3x4 model
 * matrices of local-to-model's scratch (pose.h: soa[(j * 12 + c * 3 + r) *
 * LMB_LANES + l] is row r, column c of joint j's matrix in lane l): the
 * entries of lane l go to out[l] (K entries of the layout's width; NULL:
 * lane skipped). The same products as lmb_palette_run, within float
 * rounding (the frame plan, which never writes the block's model matrices). */
void lmb_palette_block(const lmb_skin *skin, int layout, const float *soa,
                       float *const out[LMB_LANES]);
void lmb_palette_block_portable(const lmb_skin *skin, int layout, const float *soa,
                                float *const out[LMB_LANES]);
void lmb_palette_block_avx2(const lmb_skin *skin, int layout, const float *soa,
                            float *const out[LMB_LANES]);

/* Column-major 4x4 product out = a * b (out may not alias). */
void lmb_mat4_mul(const float a[16], const float b[16], float out[16]);

#endif
