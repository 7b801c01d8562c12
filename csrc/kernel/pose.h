/* pose.h: pose batches (N instances x J joints of one skeleton) and the
 * batched local-to-model pass.
 *
 * Local poses are stored as structure of arrays in blocks of LMB_LANES
 * instances: component c (0..9: t xyz, q xyzw, s xyz) of joint j for
 * instance i is at
 *     local[((i / LMB_LANES) * J + j) * LMB_TRS_FLOATS * LMB_LANES + c * LMB_LANES + i % LMB_LANES]
 * so one SIMD register holds the same component of one joint for 8
 * instances, which share the skeleton: the pass runs 8 instances in
 * lockstep with no shuffles. Padding instances (up to the next multiple of
 * LMB_LANES) hold the rest pose and are never visible.
 *
 * Model matrices are 4x4 column-major floats per joint, instance-major:
 *     model[(i * J + j) * 16]
 * 64-byte aligned, ready to hand to a GPU or to other C code.
 *
 * Dirty tracking: first_dirty[i] is the first joint of instance i whose
 * local transform changed since the last pass (J when clean). The pass
 * starts each block at the smallest first_dirty of its lanes and skips
 * clean blocks. Writers (set_trs, samplers, blenders, root changes) lower it. */
#ifndef LIMBER_POSE_H
#define LIMBER_POSE_H

#include "skeleton.h"

typedef struct lmb_pose {
    const lmb_skeleton *skel; /* borrowed; the binding keeps it alive */
    uint32_t joint_count;
    uint32_t instance_count;
    uint32_t block_count;      /* ceil(instance_count / LMB_LANES) */
    uint32_t has_root;         /* 0: every root matrix is identity */
    float *local;              /* block_count * J * LMB_TRS_FLOATS * LMB_LANES */
    float *model;              /* block_count * LMB_LANES * J * 16 */
    float *root;               /* block_count * LMB_LANES * 16, affine, column-major */
    uint32_t *first_dirty;     /* block_count * LMB_LANES */
    float *scratch;            /* J * 12 * LMB_LANES: one block's model matrices, SoA */
    uint8_t *loaded;           /* J flags used by partial updates */
    uint32_t generation;       /* bumped whenever model matrices change (read by scenes) */
    uint32_t *inst_generation; /* block_count * LMB_LANES: bumped when that instance's
                                * model matrices change (scene followers of that
                                * instance look at it) */
    uint32_t skip_model;       /* 1: local-to-model fills only `scratch` (the 3x4 model
                                * matrices of the last block, SoA), never `model` (the
                                * frame plan's worker poses, which read the scratch) */
} lmb_pose;

/* Bytes to reserve for a pose of `instances` x `joints` (any alignment;
 * lmb_pose_place aligns internally). 0 if the size overflows. */
size_t lmb_pose_bytes(uint32_t joints, uint32_t instances);

/* Lays out and initialises a pose in `mem`: every instance at the rest
 * pose, identity roots, everything dirty. */
lmb_pose *lmb_pose_place(void *mem, const lmb_skeleton *s, uint32_t instances);

/* Index of component 0 of joint j of instance i in pose->local; the other
 * components follow LMB_LANES floats apart. */
static inline size_t lmb_pose_local_index(const lmb_pose *p, uint32_t i, uint32_t j) {
    return ((size_t)(i / LMB_LANES) * p->joint_count + j) * (LMB_TRS_FLOATS * LMB_LANES) +
           (i % LMB_LANES);
}

/* Marks joints >= j of instance i as changed. */
static inline void lmb_pose_touch(lmb_pose *p, uint32_t i, uint32_t j) {
    if (p->first_dirty[i] > j) p->first_dirty[i] = j;
}

void lmb_pose_set_trs(lmb_pose *p, uint32_t i, uint32_t j, const float trs[LMB_TRS_FLOATS]);
void lmb_pose_get_trs(const lmb_pose *p, uint32_t i, uint32_t j, float trs[LMB_TRS_FLOATS]);

/* Resets instance i to the skeleton's rest pose. */
void lmb_pose_reset(lmb_pose *p, uint32_t i);

/* Checks a root matrix: finite floats ("root", index = the element) and
 * affine, bottom row 0 0 0 1 within 1e-4 ("root", index = the element). */
lmb_status lmb_pose_root_validate(const float m[16], lmb_error *err);

/* Sets the root matrix of instance i (NULL: identity) from a matrix
 * lmb_pose_root_validate accepted; the bottom row is stored exactly. */
void lmb_pose_set_root(lmb_pose *p, uint32_t i, const float m[16]);

/* Checks a local-to-model job: blocks [first_block, first_block +
 * block_count) exist in the pose ("blocks"). The pose's own contents are
 * valid by construction (lmb_pose_place, the setters). No side effects. */
lmb_status lmb_pose_l2m_validate(const lmb_pose *p, uint32_t first_block, uint32_t block_count,
                                 lmb_error *err);

/* model[j] = model[parent[j]] * TRS(local[j]) (root * TRS for roots) for
 * the instances of blocks [first_block, first_block + block_count), from
 * each block's first dirty joint; with force, every joint. Cannot fail
 * once lmb_pose_l2m_validate accepted the blocks. */
void lmb_pose_local_to_model(lmb_pose *p, uint32_t first_block, uint32_t block_count, int force);

/* The portable and AVX2 kernels for one block, starting at joint `start`
 * with scratch entries of joints < start already valid where needed. */
void lmb_l2m_block_portable(lmb_pose *p, uint32_t block, uint32_t start);
void lmb_l2m_block_avx2(lmb_pose *p, uint32_t block, uint32_t start);

#endif
