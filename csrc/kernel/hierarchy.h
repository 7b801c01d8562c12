/* hierarchy.h: node storage, update scheduling and the world-matrix pass of
 * a scene tree (driven by lua/limber/scene.lua).
 *
 * Ids: nodes are ids 1 .. capacity (the same integers as in Lua); record 0
 * is the virtual root: "no parent", world = identity, never changes.
 *
 * Core data per node: parent id, slot matrix pointer (borrowed from a slot
 * table, a prefab or a pose's model matrices; NULL = identity; the binding
 * keeps its owner alive), follow mode, SRT (10 floats: t xyz, q xyzw, s xyz).
 * Derived: base = world[parent] x filter(slot), world = base x T*R*S.
 * There are no child lists; a child counter per node tells leaves apart.
 *
 * Derived index (not core data): the nodes that have children form a doubly
 * linked list in depth-first preorder with their depth, so the descendants of
 * a node in that list are the run after it with a greater depth. Structure
 * edits (lmb_hier_link, lmb_hier_destroy) keep it in O(depth + moved subtree).
 *
 * Per update (lmb_hier_update), after the changes of a frame (DESIGN §3):
 *  1. pending changed nodes: leaves are only flagged (computed on demand by
 *     lmb_hier_refresh when read); non-leaves form the update set;
 *  2. if every changed non-leaf is in last update's order and the structure
 *     did not change, that cached order is walked keeping the nodes that
 *     changed or whose parent changed (it stays topological); when more than
 *     `stale_bound` (and more than the kept count) were unchanged, the cache
 *     is rebuilt from this update's order;
 *  3. otherwise each changed non-leaf without a changed ancestor contributes
 *     its preorder run: the order is parents first, with no sort;
 *  4. one pass computes base (kept when neither the parent nor the slot
 *     changed) and world for the order.
 * Cost: O(changed + their non-leaf descendants + changed x depth); never the
 * whole scene. Memory: one caller block of lmb_hier_bytes(capacity) bytes;
 * nothing here allocates. */
#ifndef LIMBER_HIERARCHY_H
#define LIMBER_HIERARCHY_H

#include "limber.h"

/* Follow modes: which part of the slot matrix a child takes. */
enum {
    LMB_FOLLOW_FULL = 0,       /* the whole matrix */
    LMB_FOLLOW_RIGID = 1,      /* rotation + translation (scale and shear removed) */
    LMB_FOLLOW_TRANSLATION = 2 /* translation only */
};

#define LMB_HIER_MODE_MASK 0x0003u
#define LMB_HIER_BASE_DIRTY 0x0004u /* parent or slot changed: recompute base */
#define LMB_HIER_ANIMATED 0x0008u   /* slot matrix changes by itself (pose joint) */
#define LMB_HIER_HAS_SRT 0x0010u    /* srt differs from identity */
#define LMB_HIER_DIRTY 0x0020u      /* changed since the last update (in the dirty list) */
#define LMB_HIER_STALE 0x0040u      /* leaf changed at an update, not recomputed yet */
#define LMB_HIER_ALIVE 0x0080u
#define LMB_HIER_HAS_SLOT 0x0100u /* slot[id] is not NULL */
#define LMB_HIER_MARK 0x0200u     /* a changed non-leaf during an update */
#define LMB_HIER_CACHED 0x0400u   /* in the cached order */

/* One record per node, 64 bytes (one cache line): everything a leaf read,
 * a setter or the pass needs about the node itself. */
typedef struct lmb_hnode {
    uint32_t parent;           /* 0 = none */
    uint32_t nchild;           /* direct children */
    uint32_t stamp;            /* update that last computed world (0 = never) */
    uint32_t changed;          /* update in which world last changed */
    uint32_t flags;            /* LMB_HIER_* */
    float srt[LMB_TRS_FLOATS]; /* t xyz, q xyzw (unit), s xyz */
    uint32_t pad;
} lmb_hnode;

/* The derived preorder list of non-leaf nodes (0 = the sentinel). */
typedef struct lmb_hlink {
    uint32_t next, prev;
    int32_t depth; /* roots 0, sentinel -1 */
} lmb_hlink;

typedef struct lmb_hier {
    uint32_t capacity;  /* ids 1 .. capacity */
    uint32_t pass;      /* number of the last update */
    uint32_t structure; /* bumped whenever the non-leaf order changes */
    uint32_t cache_structure, cache_count;
    uint32_t stale_bound; /* unchanged nodes the cached order may keep */
    uint32_t dirty_count, dirty_cap;
    uint32_t order_count;   /* nodes in the last pass */
    uint32_t changed_count; /* entries of `changed` for the last update */
    uint32_t last_cached;   /* 1 when the last update reused the cached order */
    lmb_hnode *node;        /* capacity + 1 records, 64-byte aligned */
    lmb_hlink *link;        /* capacity + 1 */
    const float **slot;     /* capacity + 1: slot matrices (borrowed), NULL = identity */
    float *mats;            /* (capacity + 1) * 32: world (16) then base (16) per node */
    uint32_t *dirty;        /* dirty_cap = 2 * (capacity + 1) */
    uint32_t *order;        /* capacity + 1: the last pass, parents first */
    uint32_t *cache;        /* capacity + 1: the cached order */
    uint32_t *scratch;      /* capacity + 1 */
    uint32_t *changed;      /* capacity + 1: ids whose world changed in the last update */
} lmb_hier;

/* Bytes for a hierarchy of `capacity` nodes; 0 when it would overflow. */
size_t lmb_hier_bytes(uint32_t capacity);

static inline float *lmb_hier_world(const lmb_hier *h, uint32_t id) {
    return h->mats + (size_t)id * 32;
}
static inline float *lmb_hier_base(const lmb_hier *h, uint32_t id) {
    return h->mats + (size_t)id * 32 + 16;
}

/* Lays out an empty hierarchy in `mem` (any alignment). */
lmb_hier *lmb_hier_place(void *mem, uint32_t capacity, uint32_t stale_bound);

/* Copies everything from src (src->capacity <= dst->capacity). */
void lmb_hier_copy(lmb_hier *dst, const lmb_hier *src);

/* Makes `id` (a free id) a live root leaf with identity SRT, pending. */
void lmb_hier_create(lmb_hier *h, uint32_t id);

/* Hangs live node id below parent (0 = none; live, not id nor one of its
 * descendants: the binding checks) with a slot matrix (NULL = identity),
 * follow mode and animated flag. Keeps the non-leaf order. */
void lmb_hier_link(lmb_hier *h, uint32_t id, uint32_t parent, const float *slot, int mode,
                   int animated);

/* True when `a` is `b` or one of its descendants. O(depth). */
int lmb_hier_is_below(const lmb_hier *h, uint32_t a, uint32_t b);

/* Sets translation (3), rotation (4, normalised here; must be non-zero)
 * and scale (3); NULL keeps a component. Values must be finite (the binding
 * checks). Returns LMB_EINVAL for a zero quaternion, changing nothing. */
lmb_status lmb_hier_set_srt(lmb_hier *h, uint32_t id, const float *t, const float *r,
                            const float *s);

/* Marks a node changed (it is recomputed at the next update). */
void lmb_hier_touch(lmb_hier *h, uint32_t id);

/* Destroys live node id and its subtree. Writes the destroyed ids to
 * out[0 .. count) (out may be h->scratch) and returns count. A leaf costs
 * O(1); a node with children one scan of the parent ids. */
uint32_t lmb_hier_destroy(lmb_hier *h, uint32_t id, uint32_t *out);

/* How many nodes lmb_hier_destroy(h, id, ...) would destroy: 1 + the
 * child counts of id's non-leaf run (every node of the subtree but id has
 * one parent in that run). O(non-leaf descendants); changes nothing. */
uint32_t lmb_hier_subtree_size(const lmb_hier *h, uint32_t id);

/* The per-frame update (see the header comment). Returns the pass size. */
uint32_t lmb_hier_update(lmb_hier *h);

/* Brings the stored world of `id` up to date: a leaf is recomputed only if
 * it changed at an update or its parent's world changed since it was last
 * computed. Non-leaves are always current after an update. */
void lmb_hier_refresh(lmb_hier *h, uint32_t id);

/* True when the world of `id` changed in the last update (a leaf: it
 * changed itself, or its parent's world changed). */
int lmb_hier_has_changed(const lmb_hier *h, uint32_t id);

/* The raw world pass over ids[0 .. count) (parents first) at pass number
 * `pass`: base recomputed when dirty, animated or the parent was computed in
 * the same pass; then world. Used by lmb_hier_update; exposed for baselines. */
void lmb_hier_pass(lmb_hier *h, const uint32_t *ids, uint32_t count, uint32_t pass);

/* Recomputes base and world of one node from its parent's stored world. */
void lmb_hier_compute(lmb_hier *h, uint32_t id, uint32_t pass);

/* out = filter(m, mode): see LMB_FOLLOW_*. The rigid filter orthonormalises
 * the first two columns (Gram-Schmidt) and takes the third as their cross
 * product, so out is a proper rotation + translation even with shear. */
void lmb_follow_filter(const float m[16], int mode, float out[16]);

#endif
