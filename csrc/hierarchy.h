/* hierarchy.h: matrix storage and the world-matrix pass of a scene tree.
 *
 * The scene tree itself (parent ids, slots by name, the update order) is
 * managed in Lua (lua/limber/scene.lua); this kernel owns the per-node
 * numbers and does the math in batches. Nodes are 0-based indices here
 * (scene id - 1); LMB_HIER_NONE marks "no parent".
 *
 * Per node n:
 *   parent[n]  parent index or LMB_HIER_NONE
 *   slot[n]    borrowed pointer to the slot matrix on the parent (16 floats,
 *              column-major): a static slot table, a prefab, or a joint's
 *              model matrix in a pose batch; NULL = identity. The binding
 *              keeps the owner alive.
 *   flags[n]   LMB_HIER_* bits: follow mode (how much of the slot matrix is
 *              used), base dirty, animated slot (base recomputed every pass)
 *   srt[n]     10 floats: translation xyz, rotation xyzw (unit), scale xyz
 *   base[n]    parent world x filter(slot)          (16 floats)
 *   world[n]   base x T*R*S                         (16 floats)
 *   stamp[n]   the pass number that last computed world[n]
 *
 * Memory: one caller block of lmb_hier_bytes(capacity) bytes; nothing here
 * allocates or frees. */
#ifndef LIMBER_HIERARCHY_H
#define LIMBER_HIERARCHY_H

#include "limber.h"

#define LMB_HIER_NONE 0xFFFFFFFFu

/* Follow modes: which part of the slot matrix a child takes. */
enum {
    LMB_FOLLOW_FULL = 0,        /* the whole matrix */
    LMB_FOLLOW_RIGID = 1,       /* rotation + translation (scale and shear removed) */
    LMB_FOLLOW_TRANSLATION = 2  /* translation only */
};

#define LMB_HIER_MODE_MASK 0x03u
#define LMB_HIER_BASE_DIRTY 0x04u  /* parent or slot changed: recompute base */
#define LMB_HIER_ANIMATED 0x08u    /* slot matrix changes by itself (pose joint) */
#define LMB_HIER_HAS_SRT 0x10u     /* srt differs from identity */

typedef struct lmb_hier {
    uint32_t capacity;
    uint32_t *parent;
    const float **slot;
    uint8_t *flags;
    uint32_t *stamp;
    uint32_t *order;    /* capacity entries of scratch for the binding's pass */
    float *srt;
    float *base;
    float *world;
} lmb_hier;

/* Bytes for a hierarchy of `capacity` nodes; 0 when it would overflow. */
size_t lmb_hier_bytes(uint32_t capacity);

/* Lays out a hierarchy in `mem` (any alignment) with every node reset. */
lmb_hier *lmb_hier_place(void *mem, uint32_t capacity);

/* Resets node n: no parent, no slot, identity SRT, base and world. */
void lmb_hier_reset(lmb_hier *h, uint32_t n);

/* Copies every node of src (src->capacity <= dst->capacity). */
void lmb_hier_copy(lmb_hier *dst, const lmb_hier *src);

/* Sets the parent, slot matrix (NULL: identity), follow mode and the
 * animated flag of node n and marks its base dirty. */
void lmb_hier_link(lmb_hier *h, uint32_t n, uint32_t parent, const float *slot, int mode,
                   int animated);

/* Sets translation (3), rotation (4, normalised here; must be non-zero)
 * and scale (3); NULL keeps a component. Values must be finite (the binding
 * checks). Returns LMB_EINVAL for a zero quaternion, changing nothing. */
lmb_status lmb_hier_set_srt(lmb_hier *h, uint32_t n, const float *t, const float *r,
                            const float *s);

/* The world pass: for k in [0, count), node = ids[k] (parents before
 * children, every parent either earlier in ids or not changed):
 *   base  = world[parent] x filter(slot)  if the base is dirty, animated, or
 *           the parent was computed in this same pass (stamp == pass);
 *           otherwise the stored base is kept
 *   world = base x T*R*S; stamp = pass.
 * Cannot fail; ids must be valid indices. */
void lmb_hier_update(lmb_hier *h, const uint32_t *ids, uint32_t count, uint32_t pass);

/* Recomputes base and world of one node from its parent's stored world
 * (the on-demand path for leaves). Sets stamp to `pass`. */
void lmb_hier_compute(lmb_hier *h, uint32_t n, uint32_t pass);

/* out = filter(m, mode): see LMB_FOLLOW_*. The rigid filter orthonormalises
 * the first two columns (Gram-Schmidt) and takes the third as their cross
 * product, so out is a proper rotation + translation even with shear. */
void lmb_follow_filter(const float m[16], int mode, float out[16]);

#endif
