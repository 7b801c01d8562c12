/* skeleton.h: immutable flat skeletons.
 *
 * A skeleton is arrays, not a tree: parent[i] < i for every non-root joint
 * (LMB_NO_PARENT for roots; several roots allowed), so local-to-model is one
 * forward loop. The rest pose is stored per joint as 10 floats (translation
 * xyz, rotation quaternion xyzw, scale xyz); inverse bind matrices as 16
 * floats, column-major. Names live on the Lua side (the binding keeps them
 * next to the skeleton); the kernel needs only numbers.
 *
 * Memory: the caller provides one block of lmb_skeleton_bytes(count) bytes,
 * 16-byte aligned; lmb_skeleton_place() carves the arrays out of it. Nothing
 * here allocates but lmb_skeleton_order, which the Lua binding never uses. */
#ifndef LIMBER_SKELETON_H
#define LIMBER_SKELETON_H

#include "limber.h"

typedef struct lmb_skeleton {
    uint32_t joint_count; /* 1 .. LMB_MAX_JOINTS */
    uint32_t root_count;  /* joints whose parent is LMB_NO_PARENT */
    uint16_t *parent;     /* joint_count entries, parent[i] < i or LMB_NO_PARENT */
    float *rest;          /* joint_count * LMB_TRS_FLOATS, rotations unit length */
    float *inverse_bind;  /* joint_count * 16, column-major */
} lmb_skeleton;

/* Bytes to reserve (16-byte aligned) for a skeleton of `count` joints,
 * header included. */
size_t lmb_skeleton_bytes(uint32_t count);

/* Lays out a skeleton of `count` joints in `mem` (16-byte aligned, at least
 * lmb_skeleton_bytes(count) bytes). Arrays are left uninitialised. */
lmb_skeleton *lmb_skeleton_place(void *mem, uint32_t count);

/* Computes a parent-before-child order for joints given in any order.
 *
 * in_parent[i] is the parent of input joint i (an input index) or
 * LMB_NO_PARENT. On success, order[k] is the input index of the joint stored
 * at position k and remap[i] the new position of input joint i. When the
 * input already has parent[i] < i, the order is the identity; otherwise it
 * is a depth-first preorder that keeps siblings in input order.
 *
 * Errors (nothing written to *bad on success):
 *   LMB_ERANGE: count is 0 or above LMB_MAX_JOINTS (*bad = count), or a
 *               parent index is >= count (*bad = the joint);
 *   LMB_ECYCLE: a joint is its own ancestor (*bad = a joint on the cycle).
 *
 * `scratch` is the caller's work space of lmb_skeleton_order_scratch(count)
 * entries: nothing here allocates (the binding takes it from the Lua
 * allocator, so a host's memory limit covers it). */
lmb_status lmb_skeleton_order_into(uint32_t count, const uint32_t *in_parent, uint32_t *order,
                                   uint32_t *remap, uint32_t *scratch, uint32_t *bad);

/* The same with scratch from malloc, for C programs without a Lua state
 * (the fuzz harnesses); never used by the Lua binding. Also
 * LMB_ENOMEM: the scratch allocation failed. */
lmb_status lmb_skeleton_order(uint32_t count, const uint32_t *in_parent, uint32_t *order,
                              uint32_t *remap, uint32_t *bad);

/* Entries of the scratch array lmb_skeleton_order needs for `count` joints. */
static inline size_t lmb_skeleton_order_scratch(uint32_t count) {
    return 3 * (size_t)count + 2;
}

/* Checks a filled skeleton: parent order, finite rest values and inverse
 * binds, non-zero rotations (normalised in place). *bad receives the
 * offending joint. Counts roots. */
lmb_status lmb_skeleton_validate(lmb_skeleton *s, uint32_t *bad);

/* Column-major 4x4 matrix of T * R * S from 10 floats (t xyz, q xyzw, s xyz).
 * The quaternion is used as given (callers keep it unit length). */
void lmb_trs_to_mat4(const float trs[LMB_TRS_FLOATS], float out[16]);

#endif
