/* hierarchy.h: node storage, update scheduling and the world-matrix pass of
 * a scene tree (the limber.Scene userdata of csrc/lua/lcore_scene.c).
 *
 * Ids: nodes are ids 1 .. capacity (the same integers as in Lua); record 0
 * is the virtual root: "no parent", world = identity, never changes.
 *
 * Core data per node: parent id, slot matrix pointer (borrowed from a slot
 * table, a prefab or a pose's model matrices; NULL = identity; the binding
 * keeps its owner alive), follow mode, SRT (10 floats: t xyz, q xyzw, s xyz).
 * Derived: base = world[parent] x filter(slot), world = base x T*R*S.
 * The core data has no child lists; a child counter per node tells leaves
 * apart.
 *
 * Derived index (not core data): the nodes that have children form a doubly
 * linked list in depth-first preorder with their depth, so the descendants of
 * a node in that list are the run after it with a greater depth; the leaves
 * of a node form a list of its leaf children. Structure edits
 * (lmb_hier_link, lmb_hier_destroy) keep both in O(depth + moved subtree).
 *
 * Per update (lmb_hier_update), after the changes of a frame (DESIGN §3):
 *  0. followers of a pose whose generation changed since the last look are
 *     marked changed (a pose that did not move costs nothing);
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
 *     changed) and world for the order;
 *  5. the changed list of the frame gets the changed nodes, the order and the
 *     leaf children of the order (they moved with their parent; they are
 *     flagged, computed when read).
 * Cost: O(changed + their non-leaf descendants and leaf children + changed x
 * depth); never the whole scene. Memory: one caller block of lmb_hier_bytes(capacity) bytes;
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
    uint32_t fpos;             /* position + 1 in `followers` (0: not on a pose joint) */
} lmb_hnode;

/* Derived links (0 = the sentinel / the virtual root). A non-leaf is in the
 * preorder list of non-leaves (next, prev, depth); a leaf is in its
 * parent's list of leaf children (next, prev; prev 0 = first), whose head
 * is the parent's `leaves`. */
typedef struct lmb_hlink {
    uint32_t next, prev;
    int32_t depth;   /* non-leaves: roots 0, sentinel -1 */
    uint32_t leaves; /* first leaf child (0 = none) */
} lmb_hlink;

typedef struct lmb_hier {
    uint32_t capacity;  /* ids 1 .. capacity */
    uint32_t pass;      /* number of the last update pass */
    uint32_t frame;     /* first pass of the current frame (lmb_hier_update) */
    uint32_t structure; /* bumped whenever the non-leaf order changes */
    uint32_t cache_structure, cache_count;
    uint32_t stale_bound; /* unchanged nodes the cached order may keep */
    uint32_t dirty_count, dirty_cap;
    uint32_t order_count;           /* nodes in the last pass */
    uint32_t changed_count;         /* entries of `changed` for the current frame */
    uint32_t last_cached;           /* 1 when the last update reused the cached order */
    uint32_t count, top;            /* live nodes; highest id ever used */
    uint32_t free_head, free_count; /* ring of destroyed ids (first in, first out) */
    uint32_t follower_count, pose_count;
    uint32_t edits;        /* bumped by every create, destroy and link: a caller that runs
                            * other code (Lua) between checking a change and making it
                            * compares it before and after */
    lmb_hnode *node;       /* capacity + 1 records, 64-byte aligned */
    lmb_hlink *link;       /* capacity + 1 */
    const float **slot;    /* capacity + 1: slot matrices (borrowed), NULL = identity */
    const uint32_t **gen;  /* capacity + 1: generation counter of the pose a node follows */
    const uint32_t **igen; /* capacity + 1: the counter of its instance (bumped only when that
                            * instance's matrices change), or `gen` */
    uint32_t *seen;        /* capacity + 1: the generation a follower last saw */
    float *mats;           /* (capacity + 1) * 32: world (16) then base (16) per node */
    uint32_t *dirty;       /* dirty_cap = 2 * (capacity + 1) */
    uint32_t *order;       /* capacity + 1: the last pass, parents first */
    uint32_t *cache;       /* capacity + 1: the cached order */
    uint32_t *scratch;     /* capacity + 1 */
    uint32_t *pending;     /* capacity + 1: the nodes an update run starts from */
    uint32_t *changed;     /* capacity + 1: ids whose world changed in the current frame */
    uint32_t *free;        /* capacity: the destroyed ids, a ring */
    uint32_t *followers;   /* capacity: nodes on pose joints */
    const uint32_t **pose; /* capacity: the distinct generation counters followed */
    uint32_t *pose_seen;   /* capacity: their values at the last look */
    uint32_t *pose_refs;   /* capacity: how many followers read each */
    uint32_t *epoch;       /* capacity + 1: bumped each time the id is created, so an id a
                            * destroyed node leaves and a new node takes tell apart */
} lmb_hier;

/* Bytes for a hierarchy of `capacity` nodes; 0 when it would overflow. */
size_t lmb_hier_bytes(uint32_t capacity);

static inline float *lmb_hier_world(const lmb_hier *h, uint32_t id) {
    return h->mats + (size_t)id * 32;
}
static inline float *lmb_hier_base(const lmb_hier *h, uint32_t id) {
    return h->mats + (size_t)id * 32 + 16;
}
static inline int lmb_hier_alive(const lmb_hier *h, uint32_t id) {
    return id >= 1 && id <= h->capacity && (h->node[id].flags & LMB_HIER_ALIVE);
}

/* Lays out an empty hierarchy in `mem` (any alignment). */
lmb_hier *lmb_hier_place(void *mem, uint32_t capacity, uint32_t stale_bound);

/* Copies everything from src (src->capacity <= dst->capacity). */
void lmb_hier_copy(lmb_hier *dst, const lmb_hier *src);

/* The id the next lmb_hier_create returns (recycled first in, first out,
 * else the next unused one), or 0 when the hierarchy is full. */
uint32_t lmb_hier_next_id(const lmb_hier *h);

/* Makes lmb_hier_next_id(h) (not 0) a live root leaf with identity SRT,
 * pending; returns it. */
uint32_t lmb_hier_create(lmb_hier *h);

/* The rules of lmb_hier_link: id is a live node; parent is 0 (none) or a
 * live node that is neither id nor one of its descendants; mode is a
 * LMB_FOLLOW_*. Returns LMB_OK, or fills err (field "node", "parent" or
 * "follow"; value = id, limit = parent) and returns its code. */
lmb_status lmb_hier_link_validate(const lmb_hier *h, uint32_t id, uint32_t parent, int mode,
                                  lmb_error *err);

/* Hangs live node id below parent (see lmb_hier_link_validate, whose rules
 * it assumes) with a slot matrix (NULL = identity)
 * and follow mode. `generation` is NULL for a static slot, or the counter
 * of the pose whose model matrix `slot` is (bumped whenever the pose's
 * model matrices change): the node then follows the pose.
 * `instance_generation` (NULL: `generation`) is the counter of the pose
 * instance the slot belongs to, bumped only when that instance's matrices
 * change: an update recomputes the node only then (a frame plan with LOD
 * moves a few instances of a pose per frame). Keeps the derived lists. */
void lmb_hier_link(lmb_hier *h, uint32_t id, uint32_t parent, const float *slot, int mode,
                   const uint32_t *generation, const uint32_t *instance_generation);

/* True when `a` is `b` or one of its descendants. O(depth). */
int lmb_hier_is_below(const lmb_hier *h, uint32_t a, uint32_t b);

/* Sets translation (3), rotation (4, normalised here; must be non-zero)
 * and scale (3); NULL keeps a component. Returns LMB_EINVAL, changing
 * nothing, for a value that is not finite within LMB_FLOAT_LIMIT or a zero
 * quaternion. */
lmb_status lmb_hier_set_srt(lmb_hier *h, uint32_t id, const float *t, const float *r,
                            const float *s);

/* LMB_OK when r (x, y, z, w) can be normalised (not a zero quaternion),
 * LMB_EINVAL otherwise. */
lmb_status lmb_hier_check_rotation(const float r[4]);

/* Marks a node changed (it is recomputed at the next update). */
void lmb_hier_touch(lmb_hier *h, uint32_t id);

/* Destroys live node id and its subtree; their ids are recycled first in,
 * first out. Writes the destroyed ids to out[0 .. count) (out may be
 * h->scratch) and returns count. O(size of the subtree). */
uint32_t lmb_hier_destroy(lmb_hier *h, uint32_t id, uint32_t *out);

/* How many nodes lmb_hier_destroy(h, id, ...) would destroy: 1 + the
 * child counts of id's non-leaf run (every node of the subtree but id has
 * one parent in that run). O(non-leaf descendants); changes nothing. */
uint32_t lmb_hier_subtree_size(const lmb_hier *h, uint32_t id);

/* The per-frame update (see the header comment): starts a new frame, then
 * runs the pending changes and the followers of poses whose generation
 * changed since the last look. Returns the pass size. */
uint32_t lmb_hier_update(lmb_hier *h);

/* Continues the current frame if a followed pose changed since the last
 * look (e.g. the game ran local-to-model after lmb_hier_update): its
 * followers and their descendants are recomputed and join the frame's
 * changed list. O(followed poses) when nothing changed. Other pending
 * changes wait for the next lmb_hier_update. Does nothing before the
 * first update. Returns the pass size (0 when nothing ran). */
uint32_t lmb_hier_sync(lmb_hier *h);

/* The count of h->changed[0 ..): the distinct live nodes whose world
 * changed in the current frame (the list is compacted first). */
uint32_t lmb_hier_changed(lmb_hier *h);

/* Brings the stored world of `id` up to date: a leaf is recomputed only if
 * it changed at an update or its parent's world changed since it was last
 * computed. Non-leaves are always current after an update. */
void lmb_hier_refresh(lmb_hier *h, uint32_t id);

/* Starts loading what lmb_hier_refresh(h, id) misses most (the node, its
 * slot matrix, its world), so that a caller refreshing
 * many leaves in a row can overlap their cache misses: call it a few nodes
 * ahead. `stage` 0 loads the node and its slot pointer, 1 what they point
 * to (call stage 0 further ahead than stage 1). Changes nothing. */
static inline void lmb_hier_prefetch(const lmb_hier *h, uint32_t id, int stage) {
    const lmb_hnode *n = &h->node[id];
    if (stage == 0) {
        __builtin_prefetch(n, 0, 3);
        __builtin_prefetch(&h->slot[id], 0, 3);
        return;
    }
    if (n->nchild) return;
    if (n->flags & LMB_HIER_HAS_SLOT) __builtin_prefetch(h->slot[id], 0, 3);
    __builtin_prefetch(lmb_hier_world(h, id), 1, 3);
}

/* True when the world of `id` changed in the current frame (the last
 * update and the syncs after it). */
int lmb_hier_has_changed(const lmb_hier *h, uint32_t id);

/* Recomputes base and world of one node from its parent's stored world,
 * stamping it with `pass` (for the baselines of the benchmarks). */
void lmb_hier_compute(lmb_hier *h, uint32_t id, uint32_t pass);

/* The raw world pass over ids[0 .. count) (parents first) at pass number
 * `pass`: base recomputed when dirty, animated or the parent was computed in
 * the same pass; then world. Used by the update; exposed for baselines. */
void lmb_hier_pass(lmb_hier *h, const uint32_t *ids, uint32_t count, uint32_t pass);

/* out = filter(m, mode): see LMB_FOLLOW_*. The rigid filter orthonormalises
 * the first two columns (Gram-Schmidt) and takes the third as their cross
 * product, so out is a proper rotation + translation even with shear. */
void lmb_follow_filter(const float m[16], int mode, float out[16]);

#endif
