/* hierarchy.c: scene node storage, the derived non-leaf preorder list, the
 * update scheduling (update set, cached order, preorder runs) and the
 * batched world-matrix pass. All matrices are affine (bottom row 0 0 0 1):
 * slot tables are checked when built and pose model matrices are affine by
 * construction, so products use the 3x4 form. */
#include "hierarchy.h"

#include <math.h>
#include <string.h>

#include "skeleton.h"

#define ALIGN 64
#define KEPT 0x20000u /* temporary: dirty list compaction */

static const float IDENTITY[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
static const float IDENTITY_SRT[LMB_TRS_FLOATS] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1};

enum { S_HEAD, S_NODE, S_LINK, S_PTR, S_MAT, S_DIRTY, S_IDS, S_COUNT };

/* 4 pointer arrays (slot, gen, igen, pose), 8 id arrays (seen, order, cache,
 * scratch, pending, changed, free, followers) and 3 more (pose_seen,
 * pose_refs, epoch). */
#define N_PTR 4
#define N_IDS 11

static size_t sizes(uint32_t cap, size_t s[S_COUNT]) {
    size_t n = (size_t)cap + 1;
    s[S_HEAD] = lmb_align_up(sizeof(lmb_hier), ALIGN);
    s[S_NODE] = lmb_align_up(n * sizeof(lmb_hnode), ALIGN);
    s[S_LINK] = lmb_align_up(n * sizeof(lmb_hlink), ALIGN);
    s[S_PTR] = lmb_align_up(n * sizeof(const float *), ALIGN);
    s[S_MAT] = lmb_align_up(n * 32 * sizeof(float), ALIGN); /* world + base */
    s[S_DIRTY] = lmb_align_up(2 * n * sizeof(uint32_t), ALIGN);
    s[S_IDS] = lmb_align_up(n * sizeof(uint32_t), ALIGN);
    return s[S_HEAD] + s[S_NODE] + s[S_LINK] + N_PTR * s[S_PTR] + s[S_MAT] + s[S_DIRTY] +
           N_IDS * s[S_IDS] + ALIGN;
}

size_t lmb_hier_bytes(uint32_t capacity) {
    size_t s[S_COUNT];
    if (capacity < 1 || capacity > (1u << 26)) return 0;
    return sizes(capacity, s);
}

static void reset_record(lmb_hier *h, uint32_t id) {
    memset(&h->node[id], 0, sizeof h->node[id]);
    memset(&h->link[id], 0, sizeof h->link[id]);
    h->slot[id] = NULL;
    h->gen[id] = NULL;
    h->igen[id] = NULL;
    h->seen[id] = 0;
    memcpy(h->node[id].srt, IDENTITY_SRT, sizeof IDENTITY_SRT);
    memcpy(lmb_hier_world(h, id), IDENTITY, sizeof IDENTITY);
    memcpy(lmb_hier_base(h, id), IDENTITY, sizeof IDENTITY);
}

lmb_hier *lmb_hier_place(void *mem, uint32_t capacity, uint32_t stale_bound) {
    size_t s[S_COUNT];
    sizes(capacity, s);
    unsigned char *p = (unsigned char *)lmb_align_ptr(mem, ALIGN);
    lmb_hier *h = (lmb_hier *)(void *)p;
    memset(h, 0, sizeof *h);
    p += s[S_HEAD];
    h->capacity = capacity;
    h->stale_bound = stale_bound;
    h->dirty_cap = 2 * (capacity + 1);
    h->cache_structure = UINT32_MAX;
    h->frame = 1;
    h->node = (lmb_hnode *)(void *)p, p += s[S_NODE];
    h->link = (lmb_hlink *)(void *)p, p += s[S_LINK];
    h->slot = (const float **)(void *)p, p += s[S_PTR];
    h->gen = (const uint32_t **)(void *)p, p += s[S_PTR];
    h->igen = (const uint32_t **)(void *)p, p += s[S_PTR];
    h->pose = (const uint32_t **)(void *)p, p += s[S_PTR];
    h->mats = (float *)(void *)p, p += s[S_MAT];
    h->dirty = (uint32_t *)(void *)p, p += s[S_DIRTY];
    uint32_t **ids[N_IDS] = {&h->seen,      &h->order,     &h->cache, &h->scratch,
                             &h->pending,   &h->changed,   &h->free,  &h->followers,
                             &h->pose_seen, &h->pose_refs, &h->epoch};
    for (int k = 0; k < N_IDS; k++)
        *ids[k] = (uint32_t *)(void *)p, p += s[S_IDS];
    memset(h->epoch, 0, ((size_t)capacity + 1) * sizeof(uint32_t));
    for (uint32_t i = 0; i <= capacity; i++)
        reset_record(h, i);
    h->link[0].depth = -1; /* the sentinel of the preorder list */
    return h;
}

void lmb_hier_copy(lmb_hier *dst, const lmb_hier *src) {
    size_t n = (size_t)src->capacity + 1;
    memcpy(dst->node, src->node, n * sizeof *src->node);
    memcpy(dst->link, src->link, n * sizeof *src->link);
    memcpy((void *)dst->slot, (const void *)src->slot, n * sizeof *src->slot);
    memcpy((void *)dst->gen, (const void *)src->gen, n * sizeof *src->gen);
    memcpy((void *)dst->igen, (const void *)src->igen, n * sizeof *src->igen);
    memcpy(dst->seen, src->seen, n * sizeof(uint32_t));
    memcpy(dst->epoch, src->epoch, n * sizeof(uint32_t));
    memcpy(dst->mats, src->mats, n * 32 * sizeof(float));
    memcpy(dst->dirty, src->dirty, src->dirty_count * sizeof(uint32_t));
    memcpy(dst->order, src->order, n * sizeof(uint32_t));
    memcpy(dst->cache, src->cache, n * sizeof(uint32_t));
    memcpy(dst->changed, src->changed, n * sizeof(uint32_t));
    memcpy(dst->followers, src->followers, src->follower_count * sizeof(uint32_t));
    memcpy((void *)dst->pose, (const void *)src->pose, src->pose_count * sizeof *src->pose);
    memcpy(dst->pose_seen, src->pose_seen, src->pose_count * sizeof(uint32_t));
    memcpy(dst->pose_refs, src->pose_refs, src->pose_count * sizeof(uint32_t));
    for (uint32_t k = 0; k < src->free_count; k++) /* the ring, unrolled */
        dst->free[k] = src->free[(src->free_head + k) % src->capacity];
    dst->free_head = 0;
    dst->free_count = src->free_count;
    dst->pass = src->pass;
    dst->frame = src->frame;
    dst->structure = src->structure;
    dst->cache_structure = src->cache_structure;
    dst->cache_count = src->cache_count;
    dst->stale_bound = src->stale_bound;
    dst->dirty_count = src->dirty_count;
    dst->order_count = src->order_count;
    dst->changed_count = src->changed_count;
    dst->last_cached = src->last_cached;
    dst->count = src->count;
    dst->top = src->top;
    dst->follower_count = src->follower_count;
    dst->pose_count = src->pose_count;
    dst->edits = src->edits;
}

/* ---- pending changes ------------------------------------------------------ */

/* Keeps only live, still-dirty, distinct entries (ids can repeat after a
 * destroy + create between two updates). At most capacity remain. */
static void compact_dirty(lmb_hier *h) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < h->dirty_count; i++) {
        lmb_hnode *n = &h->node[h->dirty[i]];
        if ((n->flags & LMB_HIER_DIRTY) && !(n->flags & KEPT)) {
            n->flags |= KEPT;
            h->dirty[k++] = h->dirty[i];
        }
    }
    for (uint32_t i = 0; i < k; i++)
        h->node[h->dirty[i]].flags &= ~KEPT;
    h->dirty_count = k;
}

void lmb_hier_touch(lmb_hier *h, uint32_t id) {
    lmb_hnode *n = &h->node[id];
    if (n->flags & LMB_HIER_DIRTY) return;
    n->flags |= LMB_HIER_DIRTY;
    if (h->dirty_count == h->dirty_cap) compact_dirty(h);
    h->dirty[h->dirty_count++] = id;
}

lmb_status lmb_hier_check_rotation(const float r[4]) {
    double r0 = (double)r[0], r1 = (double)r[1], r2 = (double)r[2], r3 = (double)r[3];
    double len = sqrt(r0 * r0 + r1 * r1 + r2 * r2 + r3 * r3);
    return len > 1e-12 && isfinite(len) ? LMB_OK : LMB_EINVAL;
}

static int finite_floats(const float *v, int n) {
    for (int k = 0; k < n; k++)
        if (!(fabsf(v[k]) <= LMB_FLOAT_LIMIT)) return 0; /* NaN fails too */
    return 1;
}

lmb_status lmb_hier_link_validate(const lmb_hier *h, uint32_t id, uint32_t parent, int mode,
                                  lmb_error *err) {
    lmb_error_clear(err);
    if (!lmb_hier_alive(h, id))
        return lmb_error_set(err, LMB_EINVAL, "node", "node {v} does not exist", 0, 0, id, 0);
    if (parent != 0 && !lmb_hier_alive(h, parent))
        return lmb_error_set(err, LMB_EINVAL, "parent", "node {l} does not exist", 0, 0, id,
                             parent);
    if (parent == id)
        return lmb_error_set(err, LMB_EINVAL, "parent", "node {v} cannot be its own parent", 0, 0,
                             id, parent);
    if (parent != 0 && lmb_hier_is_below(h, parent, id))
        return lmb_error_set(err, LMB_EINVAL, "parent",
                             "node {v} cannot hang below its descendant {l} (cycle refused)", 0, 0,
                             id, parent);
    if (mode != LMB_FOLLOW_FULL && mode != LMB_FOLLOW_RIGID && mode != LMB_FOLLOW_TRANSLATION)
        return lmb_error_set(err, LMB_EINVAL, "follow", "unknown follow mode {l}", 0, 0, id, mode);
    return LMB_OK;
}

lmb_status lmb_hier_set_srt(lmb_hier *h, uint32_t id, const float *t, const float *r,
                            const float *s) {
    float *d = h->node[id].srt;
    float q[4];
    if ((t && !finite_floats(t, 3)) || (r && !finite_floats(r, 4)) || (s && !finite_floats(s, 3)))
        return LMB_EINVAL;
    if (r) {
        double r0 = (double)r[0], r1 = (double)r[1], r2 = (double)r[2], r3 = (double)r[3];
        double len = sqrt(r0 * r0 + r1 * r1 + r2 * r2 + r3 * r3);
        if (!(len > 1e-12) || !isfinite(len)) return LMB_EINVAL;
        for (int k = 0; k < 4; k++)
            q[k] = (float)((double)r[k] / len);
    }
    if (t) memcpy(d, t, 3 * sizeof(float));
    if (r) memcpy(d + 3, q, sizeof q);
    if (s) memcpy(d + 7, s, 3 * sizeof(float));
    if (memcmp(d, IDENTITY_SRT, sizeof IDENTITY_SRT) == 0)
        h->node[id].flags &= ~LMB_HIER_HAS_SRT;
    else
        h->node[id].flags |= LMB_HIER_HAS_SRT;
    lmb_hier_touch(h, id);
    if (h->node[id].nchild == 0) {
        /* A changed leaf is recomputed when it is read (often soon, by a
         * renderer): start loading what that reads now, so the misses of
         * many leaves overlap instead of stalling one read each. */
        __builtin_prefetch(&h->node[h->node[id].parent], 0, 1);
        __builtin_prefetch(lmb_hier_base(h, id), 0, 1);
        __builtin_prefetch(lmb_hier_world(h, id), 1, 1);
    }
    return LMB_OK;
}

/* ---- matrices ---------------------------------------------------------------- */

/* out = a x b for affine matrices (bottom rows 0 0 0 1). */
static inline void mul_affine(const float *a, const float *b, float *out) {
    /* a column of 4 floats per vector (GCC / clang vector extensions: SSE
     * on x86): each entry is the sum the scalar code made, in its order,
     * a[r] b0 + a[4 + r] b1 + a[8 + r] b2 (+ a[12 + r] for the translation) */
    typedef float v4f __attribute__((vector_size(16)));
    v4f a0, a1, a2, a3;
    memcpy(&a0, a, sizeof a0);
    memcpy(&a1, a + 4, sizeof a1);
    memcpy(&a2, a + 8, sizeof a2);
    memcpy(&a3, a + 12, sizeof a3);
    for (int c = 0; c < 4; c++) {
        v4f o = a0 * b[c * 4] + a1 * b[c * 4 + 1] + a2 * b[c * 4 + 2];
        if (c == 3) o += a3;
        memcpy(out + c * 4, &o, sizeof o);
    }
    out[3] = out[7] = out[11] = 0.0f;
    out[15] = 1.0f;
}

static void normalize3(float *v) {
    float l = sqrtf(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    if (l > 1e-20f) {
        v[0] /= l;
        v[1] /= l;
        v[2] /= l;
    }
}

void lmb_follow_filter(const float m[16], int mode, float out[16]) {
    if (mode == LMB_FOLLOW_FULL) {
        memcpy(out, m, 16 * sizeof(float));
        return;
    }
    memcpy(out, IDENTITY, sizeof IDENTITY);
    out[12] = m[12];
    out[13] = m[13];
    out[14] = m[14];
    if (mode != LMB_FOLLOW_RIGID) return;
    float x[3] = {m[0], m[1], m[2]}, y[3] = {m[4], m[5], m[6]};
    normalize3(x);
    float d = x[0] * y[0] + x[1] * y[1] + x[2] * y[2];
    y[0] -= d * x[0];
    y[1] -= d * x[1];
    y[2] -= d * x[2];
    normalize3(y);
    out[0] = x[0], out[1] = x[1], out[2] = x[2];
    out[4] = y[0], out[5] = y[1], out[6] = y[2];
    out[8] = x[1] * y[2] - x[2] * y[1];
    out[9] = x[2] * y[0] - x[0] * y[2];
    out[10] = x[0] * y[1] - x[1] * y[0];
}

/* base = world[parent] x filter(slot); world[0] is the identity. */
static inline void compute_base(lmb_hier *h, uint32_t id) {
    float *base = lmb_hier_base(h, id);
    const float *pw = lmb_hier_world(h, h->node[id].parent);
    if (!(h->node[id].flags & LMB_HIER_HAS_SLOT)) {
        memcpy(base, pw, 16 * sizeof(float));
        return;
    }
    const float *slot = h->slot[id];
    int mode = (int)(h->node[id].flags & LMB_HIER_MODE_MASK);
    if (mode == LMB_FOLLOW_FULL) {
        mul_affine(pw, slot, base);
    } else {
        float f[16];
        lmb_follow_filter(slot, mode, f);
        mul_affine(pw, f, base);
    }
}

/* world = base x TRS(srt). */
static inline void compute_world(lmb_hier *h, uint32_t id) {
    const float *base = lmb_hier_base(h, id);
    float *world = lmb_hier_world(h, id);
    if (!(h->node[id].flags & LMB_HIER_HAS_SRT)) {
        memcpy(world, base, 16 * sizeof(float));
        return;
    }
    const float *srt = h->node[id].srt;
    if (memcmp(srt + 3, IDENTITY_SRT + 3, 7 * sizeof(float)) == 0) {
        /* a translation alone (an attachment's offset, say): base's
         * columns as they are, its translation moved by base x t (the sums
         * mul_affine makes, in its order) */
        memcpy(world, base, 12 * sizeof(float));
        world[3] = world[7] = world[11] = 0.0f;
        for (int r = 0; r < 3; r++)
            world[12 + r] = base[r] * srt[0] + base[4 + r] * srt[1] + base[8 + r] * srt[2];
        world[12] += base[12];
        world[13] += base[13];
        world[14] += base[14];
        world[15] = 1.0f;
        return;
    }
    float local[16];
    lmb_trs_to_mat4(srt, local);
    mul_affine(base, local, world);
}

void lmb_hier_pass(lmb_hier *h, const uint32_t *ids, uint32_t count, uint32_t pass) {
    for (uint32_t k = 0; k < count; k++) {
        uint32_t id = ids[k];
        lmb_hnode *n = &h->node[id];
        if ((n->flags & (LMB_HIER_BASE_DIRTY | LMB_HIER_ANIMATED)) ||
            h->node[n->parent].stamp == pass) {
            compute_base(h, id);
            n->flags &= ~LMB_HIER_BASE_DIRTY;
        }
        compute_world(h, id);
        n->stamp = pass;
    }
}

void lmb_hier_compute(lmb_hier *h, uint32_t id, uint32_t pass) {
    compute_base(h, id);
    h->node[id].flags &= ~LMB_HIER_BASE_DIRTY;
    compute_world(h, id);
    h->node[id].stamp = pass;
}

void lmb_hier_refresh(lmb_hier *h, uint32_t id) {
    lmb_hnode *n = &h->node[id];
    if (n->nchild) return;
    int parent_moved = h->node[n->parent].stamp > n->stamp;
    if (!parent_moved && !(n->flags & LMB_HIER_STALE)) return;
    /* as in the pass: the stored base stays valid unless the parent's world,
     * the parent or the slot changed (a leaf that only moved itself) */
    if (parent_moved || (n->flags & (LMB_HIER_BASE_DIRTY | LMB_HIER_ANIMATED))) {
        compute_base(h, id);
        n->flags &= ~LMB_HIER_BASE_DIRTY;
    }
    compute_world(h, id);
    n->stamp = h->pass;
    n->flags &= ~LMB_HIER_STALE;
}

int lmb_hier_has_changed(const lmb_hier *h, uint32_t id) {
    return h->pass != 0 && h->node[id].changed >= h->frame;
}

/* ---- structure ------------------------------------------------------------------ */

/* Leaf x joins / leaves the list of leaf children of p. */
static void leaf_insert(lmb_hier *h, uint32_t p, uint32_t x) {
    lmb_hlink *link = h->link;
    uint32_t f = link[p].leaves;
    link[x].prev = 0;
    link[x].next = f;
    link[x].depth = 0;
    if (f) link[f].prev = x;
    link[p].leaves = x;
}

static void leaf_remove(lmb_hier *h, uint32_t p, uint32_t x) {
    lmb_hlink *link = h->link;
    if (link[x].prev)
        link[link[x].prev].next = link[x].next;
    else
        link[p].leaves = link[x].next;
    if (link[x].next) link[link[x].next].prev = link[x].prev;
    link[x].next = link[x].prev = 0;
}

/* Last node of the preorder run of non-leaf x (x and its non-leaf descendants). */
static uint32_t run_last(const lmb_hier *h, uint32_t x) {
    const lmb_hlink *link = h->link;
    int32_t d = link[x].depth;
    uint32_t last = x, cur = link[x].next;
    while (link[cur].depth > d) {
        last = cur;
        cur = link[cur].next;
    }
    return last;
}

/* Leaf q gets its first child: its world must be current before children
 * read it; it leaves its parent's leaf list and joins the order right after
 * its parent. */
static void make_nonleaf(lmb_hier *h, uint32_t q) {
    lmb_hier_refresh(h, q);
    lmb_hlink *link = h->link;
    uint32_t p = h->node[q].parent;
    leaf_remove(h, p, q);
    uint32_t b = link[p].next;
    link[q].depth = p ? link[p].depth + 1 : 0;
    link[p].next = q;
    link[q].prev = p;
    link[q].next = b;
    link[b].prev = q;
    h->structure++;
}

/* Non-leaf x lost its last child (its run is x alone): it leaves the order
 * for its parent's leaf list. Its world and stamp stay those of its last
 * computation. */
static void make_leaf(lmb_hier *h, uint32_t x) {
    lmb_hlink *l = &h->link[x];
    h->link[l->prev].next = l->next;
    h->link[l->next].prev = l->prev;
    l->next = l->prev = 0;
    leaf_insert(h, h->node[x].parent, x);
    h->structure++;
}

/* ---- followers of pose joints ----------------------------------------------------- */

static uint32_t pose_index(const lmb_hier *h, const uint32_t *gen) {
    uint32_t k = 0;
    while (k < h->pose_count && h->pose[k] != gen)
        k++;
    return k;
}

static void follower_add(lmb_hier *h, uint32_t id, const uint32_t *gen, const uint32_t *igen) {
    h->followers[h->follower_count++] = id;
    h->node[id].fpos = h->follower_count;
    h->gen[id] = gen;
    h->igen[id] = igen ? igen : gen;
    h->seen[id] = *h->igen[id];
    uint32_t k = pose_index(h, gen);
    if (k == h->pose_count) {
        h->pose[k] = gen;
        h->pose_seen[k] = *gen;
        h->pose_refs[k] = 0;
        h->pose_count++;
    }
    h->pose_refs[k]++;
}

static void follower_remove(lmb_hier *h, uint32_t id) {
    uint32_t at = h->node[id].fpos - 1, last = h->followers[--h->follower_count];
    h->followers[at] = last;
    h->node[last].fpos = at + 1;
    h->node[id].fpos = 0;
    uint32_t k = pose_index(h, h->gen[id]);
    if (--h->pose_refs[k] == 0) {
        uint32_t e = --h->pose_count;
        h->pose[k] = h->pose[e];
        h->pose_seen[k] = h->pose_seen[e];
        h->pose_refs[k] = h->pose_refs[e];
    }
    h->gen[id] = NULL;
    h->igen[id] = NULL;
}

/* ---- nodes ------------------------------------------------------------------------ */

int lmb_hier_is_below(const lmb_hier *h, uint32_t a, uint32_t b) {
    while (a != 0) {
        if (a == b) return 1;
        a = h->node[a].parent;
    }
    return 0;
}

uint32_t lmb_hier_next_id(const lmb_hier *h) {
    if (h->free_count) return h->free[h->free_head];
    return h->top < h->capacity ? h->top + 1 : 0;
}

uint32_t lmb_hier_create(lmb_hier *h) {
    uint32_t id = lmb_hier_next_id(h);
    if (h->free_count) {
        h->free_head = (h->free_head + 1) % h->capacity;
        h->free_count--;
    } else {
        h->top = id;
    }
    reset_record(h, id);
    h->epoch[id]++; /* another node than any before it with this id */
    h->node[id].flags = LMB_HIER_ALIVE | LMB_HIER_BASE_DIRTY;
    leaf_insert(h, 0, id);
    h->count++;
    h->edits++;
    lmb_hier_touch(h, id);
    return id;
}

void lmb_hier_link(lmb_hier *h, uint32_t id, uint32_t newp, const float *slot, int mode,
                   const uint32_t *generation, const uint32_t *instance_generation) {
    lmb_hnode *node = h->node;
    lmb_hlink *link = h->link;
    uint32_t oldp = node[id].parent;
    h->edits++;
    if (newp != oldp) {
        if (newp) {
            if (node[newp].nchild == 0) make_nonleaf(h, newp);
            node[newp].nchild++;
        }
        if (node[id].nchild > 0) {
            node[id].parent = newp;
            /* cut the run of id out of the order and splice it after newp */
            uint32_t last = run_last(h, id);
            uint32_t before = link[id].prev, after = link[last].next;
            link[before].next = after;
            link[after].prev = before;
            int32_t delta = (newp ? link[newp].depth + 1 : 0) - link[id].depth;
            if (delta != 0) {
                for (uint32_t cur = id;; cur = link[cur].next) {
                    link[cur].depth += delta;
                    if (cur == last) break;
                }
            }
            uint32_t c = link[newp].next;
            link[newp].next = id;
            link[id].prev = newp;
            link[last].next = c;
            link[c].prev = last;
            h->structure++;
        } else {
            leaf_remove(h, oldp, id);
            node[id].parent = newp;
            leaf_insert(h, newp, id);
        }
        if (oldp && --node[oldp].nchild == 0) make_leaf(h, oldp);
    }
    h->slot[id] = slot;
    if (node[id].fpos) follower_remove(h, id);
    if (generation) follower_add(h, id, generation, instance_generation);
    uint32_t f = node[id].flags & ~(LMB_HIER_MODE_MASK | LMB_HIER_ANIMATED | LMB_HIER_HAS_SLOT);
    f |= ((uint32_t)mode & LMB_HIER_MODE_MASK) | LMB_HIER_BASE_DIRTY;
    if (slot) f |= LMB_HIER_HAS_SLOT;
    if (generation) f |= LMB_HIER_ANIMATED;
    node[id].flags = f;
    lmb_hier_touch(h, id);
}

uint32_t lmb_hier_subtree_size(const lmb_hier *h, uint32_t id) {
    if (h->node[id].nchild == 0) return 1;
    const lmb_hlink *link = h->link;
    int32_t d = link[id].depth;
    uint32_t n = 1, cur = id;
    do {
        n += h->node[cur].nchild;
        cur = link[cur].next;
    } while (link[cur].depth > d);
    return n;
}

uint32_t lmb_hier_destroy(lmb_hier *h, uint32_t id, uint32_t *out) {
    lmb_hnode *node = h->node;
    lmb_hlink *link = h->link;
    h->edits++;
    uint32_t n = 0, p = node[id].parent;
    if (node[id].nchild > 0) {
        uint32_t last = run_last(h, id);
        for (uint32_t cur = id;; cur = link[cur].next) {
            out[n++] = cur;
            if (cur == last) break;
        }
        uint32_t before = link[id].prev, after = link[last].next;
        link[before].next = after;
        link[after].prev = before;
        /* the leaves of the run hang on its nodes' leaf lists */
        uint32_t runs = n;
        for (uint32_t k = 0; k < runs; k++)
            for (uint32_t x = link[out[k]].leaves; x; x = link[x].next)
                out[n++] = x;
        h->structure++;
    } else {
        leaf_remove(h, p, id);
        out[n++] = id;
    }
    if (p && --node[p].nchild == 0) make_leaf(h, p);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t x = out[k];
        if (node[x].fpos) follower_remove(h, x);
        reset_record(h, x);
        h->free[(h->free_head + h->free_count++) % h->capacity] = x;
    }
    h->count -= n;
    return n;
}

/* ---- the per-frame update ------------------------------------------------------- */

/* Replaces the cached order by order[0 .. n). */
static void set_cache(lmb_hier *h, const uint32_t *order, uint32_t n) {
    for (uint32_t i = 0; i < h->cache_count; i++)
        h->node[h->cache[i]].flags &= ~LMB_HIER_CACHED;
    for (uint32_t i = 0; i < n; i++) {
        h->cache[i] = order[i];
        h->node[order[i]].flags |= LMB_HIER_CACHED;
    }
    h->cache_count = n;
}

/* Keeps the live, distinct entries of the frame's changed list (a node
 * destroyed and created again within a frame can be listed twice). */
static void compact_changed(lmb_hier *h) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < h->changed_count; i++) {
        lmb_hnode *n = &h->node[h->changed[i]];
        if ((n->flags & LMB_HIER_ALIVE) && n->changed >= h->frame && !(n->flags & KEPT)) {
            n->flags |= KEPT;
            h->changed[k++] = h->changed[i];
        }
    }
    for (uint32_t i = 0; i < k; i++)
        h->node[h->changed[i]].flags &= ~KEPT;
    h->changed_count = k;
}

/* Node x changes in pass `pass` of the current frame: listed once per frame. */
static inline void mark_changed(lmb_hier *h, uint32_t x, uint32_t pass) {
    lmb_hnode *n = &h->node[x];
    if (n->changed < h->frame) {
        if (h->changed_count > h->capacity) compact_changed(h);
        h->changed[h->changed_count++] = x;
    }
    n->changed = pass;
}

/* One pass from the changed nodes ids[0 .. count) (live, distinct). */
static uint32_t run(lmb_hier *h, const uint32_t *ids, uint32_t count) {
    lmb_hnode *node = h->node;
    const lmb_hlink *link = h->link;
    uint32_t pass = ++h->pass;
    uint32_t nn = 0, n = 0;
    int miss = h->cache_structure != h->structure;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t id = ids[i];
        lmb_hnode *d = &node[id];
        mark_changed(h, id, pass);
        if (d->nchild == 0) {
            d->flags |= LMB_HIER_STALE;
        } else {
            d->flags |= LMB_HIER_MARK;
            h->scratch[nn++] = id;
            if (!(d->flags & LMB_HIER_CACHED)) miss = 1;
        }
    }
    if (nn > 0) {
        uint32_t *order = h->order;
        if (!miss) {
            /* every changed node is in last order: keep the nodes that changed
             * or whose parent changed; a subsequence stays topological */
            for (uint32_t i = 0; i < h->cache_count; i++) {
                uint32_t x = h->cache[i];
                if ((node[x].flags & LMB_HIER_MARK) || node[node[x].parent].changed == pass) {
                    mark_changed(h, x, pass);
                    order[n++] = x;
                }
            }
            uint32_t stale = h->cache_count - n;
            if (stale > h->stale_bound && stale > n) set_cache(h, order, n);
            h->last_cached = 1;
        } else {
            /* a changed non-leaf with no changed ancestor heads a preorder
             * run: exactly its non-leaf descendants, parents first */
            for (uint32_t i = 0; i < nn; i++) {
                uint32_t x = h->scratch[i];
                uint32_t q = node[x].parent;
                while (q != 0 && !(node[q].flags & LMB_HIER_MARK))
                    q = node[q].parent;
                if (q != 0) continue;
                int32_t d = link[x].depth;
                uint32_t cur = x;
                do {
                    mark_changed(h, cur, pass);
                    order[n++] = cur;
                    cur = link[cur].next;
                } while (link[cur].depth > d);
            }
            set_cache(h, order, n);
            h->cache_structure = h->structure;
            h->last_cached = 0;
        }
        for (uint32_t i = 0; i < nn; i++)
            node[h->scratch[i]].flags &= ~LMB_HIER_MARK;
        lmb_hier_pass(h, order, n, pass);
        /* the leaf children of the order moved with it (computed when read) */
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t x = link[order[i]].leaves; x; x = link[x].next)
                mark_changed(h, x, pass);
    }
    h->order_count = n;
    return n;
}

uint32_t lmb_hier_changed(lmb_hier *h) {
    compact_changed(h);
    return h->changed_count;
}

uint32_t lmb_hier_update(lmb_hier *h) {
    h->frame = h->pass + 1;
    h->changed_count = 0;
    for (uint32_t k = 0; k < h->follower_count; k++) {
        uint32_t f = h->followers[k];
        if (*h->igen[f] != h->seen[f]) {
            h->seen[f] = *h->igen[f];
            lmb_hier_touch(h, f);
        }
    }
    for (uint32_t k = 0; k < h->pose_count; k++)
        h->pose_seen[k] = *h->pose[k];
    uint32_t count = 0;
    for (uint32_t i = 0; i < h->dirty_count; i++) {
        uint32_t id = h->dirty[i];
        lmb_hnode *d = &h->node[id];
        if (!(d->flags & LMB_HIER_DIRTY)) continue; /* destroyed, or a repeat */
        d->flags &= ~LMB_HIER_DIRTY;
        h->pending[count++] = id;
    }
    h->dirty_count = 0;
    return run(h, h->pending, count);
}

uint32_t lmb_hier_sync(lmb_hier *h) {
    int moved = 0;
    if (h->pass == 0) return 0;
    for (uint32_t k = 0; k < h->pose_count; k++) {
        if (*h->pose[k] != h->pose_seen[k]) {
            h->pose_seen[k] = *h->pose[k];
            moved = 1;
        }
    }
    if (!moved) return 0;
    uint32_t count = 0;
    for (uint32_t k = 0; k < h->follower_count; k++) {
        uint32_t f = h->followers[k];
        if (*h->igen[f] != h->seen[f]) {
            h->seen[f] = *h->igen[f];
            h->pending[count++] = f;
        }
    }
    return count ? run(h, h->pending, count) : 0;
}
