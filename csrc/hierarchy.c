/* hierarchy.c: scene node storage and the batched world-matrix pass.
 * All matrices here are affine (bottom row 0 0 0 1): slot tables are
 * checked when built and pose model matrices are affine by construction,
 * so products use the 3x4 form. */
#include "hierarchy.h"

#include <math.h>
#include <string.h>

#include "skeleton.h"

#define ALIGN 64

static const float IDENTITY[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
static const float IDENTITY_SRT[LMB_TRS_FLOATS] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1};

static size_t sizes(uint32_t cap, size_t s[8]) {
    size_t n = cap ? cap : 1;
    s[0] = lmb_align_up(sizeof(lmb_hier), ALIGN);
    s[1] = lmb_align_up(n * sizeof(uint32_t), ALIGN);       /* parent */
    s[2] = lmb_align_up(n * sizeof(const float *), ALIGN);  /* slot */
    s[3] = lmb_align_up(n, ALIGN);                          /* flags */
    s[4] = lmb_align_up(n * sizeof(uint32_t), ALIGN);       /* stamp */
    s[5] = lmb_align_up(n * sizeof(uint32_t), ALIGN);       /* order */
    s[6] = lmb_align_up(n * LMB_TRS_FLOATS * sizeof(float), ALIGN);
    s[7] = lmb_align_up(n * 16 * sizeof(float), ALIGN); /* base, world (twice) */
    return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + 2 * s[7] + ALIGN;
}

size_t lmb_hier_bytes(uint32_t capacity) {
    size_t s[8];
    if (capacity > (1u << 26)) return 0;
    return sizes(capacity, s);
}

lmb_hier *lmb_hier_place(void *mem, uint32_t capacity) {
    size_t s[8];
    sizes(capacity, s);
    unsigned char *p = (unsigned char *)lmb_align_ptr(mem, ALIGN);
    lmb_hier *h = (lmb_hier *)(void *)p;
    p += s[0];
    h->capacity = capacity;
    h->parent = (uint32_t *)(void *)p, p += s[1];
    h->slot = (const float **)(void *)p, p += s[2];
    h->flags = p, p += s[3];
    h->stamp = (uint32_t *)(void *)p, p += s[4];
    h->order = (uint32_t *)(void *)p, p += s[5];
    h->srt = (float *)(void *)p, p += s[6];
    h->base = (float *)(void *)p, p += s[7];
    h->world = (float *)(void *)p;
    for (uint32_t n = 0; n < capacity; n++) lmb_hier_reset(h, n);
    return h;
}

void lmb_hier_reset(lmb_hier *h, uint32_t n) {
    h->parent[n] = LMB_HIER_NONE;
    h->slot[n] = NULL;
    h->flags[n] = LMB_HIER_BASE_DIRTY;
    h->stamp[n] = 0;
    memcpy(h->srt + (size_t)n * LMB_TRS_FLOATS, IDENTITY_SRT, sizeof IDENTITY_SRT);
    memcpy(h->base + (size_t)n * 16, IDENTITY, sizeof IDENTITY);
    memcpy(h->world + (size_t)n * 16, IDENTITY, sizeof IDENTITY);
}

void lmb_hier_copy(lmb_hier *dst, const lmb_hier *src) {
    size_t n = src->capacity;
    memcpy(dst->parent, src->parent, n * sizeof *src->parent);
    memcpy((void *)dst->slot, (const void *)src->slot, n * sizeof *src->slot);
    memcpy(dst->flags, src->flags, n);
    memcpy(dst->stamp, src->stamp, n * sizeof *src->stamp);
    memcpy(dst->srt, src->srt, n * LMB_TRS_FLOATS * sizeof(float));
    memcpy(dst->base, src->base, n * 16 * sizeof(float));
    memcpy(dst->world, src->world, n * 16 * sizeof(float));
}

void lmb_hier_link(lmb_hier *h, uint32_t n, uint32_t parent, const float *slot, int mode,
                   int animated) {
    h->parent[n] = parent;
    h->slot[n] = slot;
    uint8_t f = (uint8_t)(h->flags[n] & LMB_HIER_HAS_SRT);
    f |= (uint8_t)((unsigned)mode & LMB_HIER_MODE_MASK) | LMB_HIER_BASE_DIRTY;
    if (animated) f |= LMB_HIER_ANIMATED;
    h->flags[n] = f;
}

lmb_status lmb_hier_set_srt(lmb_hier *h, uint32_t n, const float *t, const float *r,
                            const float *s) {
    float *d = h->srt + (size_t)n * LMB_TRS_FLOATS;
    float q[4];
    if (r) {
        double r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
        double len = sqrt(r0 * r0 + r1 * r1 + r2 * r2 + r3 * r3);
        if (!(len > 1e-12) || !isfinite(len)) return LMB_EINVAL;
        for (int k = 0; k < 4; k++) q[k] = (float)((double)r[k] / len);
    }
    if (t) memcpy(d, t, 3 * sizeof(float));
    if (r) memcpy(d + 3, q, sizeof q);
    if (s) memcpy(d + 7, s, 3 * sizeof(float));
    if (memcmp(d, IDENTITY_SRT, sizeof IDENTITY_SRT) == 0)
        h->flags[n] &= (uint8_t)~LMB_HIER_HAS_SRT;
    else
        h->flags[n] |= LMB_HIER_HAS_SRT;
    return LMB_OK;
}

/* out = a x b for affine matrices (bottom rows 0 0 0 1). */
static inline void mul_affine(const float *a, const float *b, float *out) {
    for (int c = 0; c < 4; c++) {
        float b0 = b[c * 4], b1 = b[c * 4 + 1], b2 = b[c * 4 + 2];
        for (int r = 0; r < 3; r++)
            out[c * 4 + r] = a[r] * b0 + a[4 + r] * b1 + a[8 + r] * b2;
        out[c * 4 + 3] = 0.0f;
    }
    out[12] += a[12];
    out[13] += a[13];
    out[14] += a[14];
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

/* base = world[parent] x filter(slot). */
static inline void compute_base(lmb_hier *h, uint32_t n) {
    float *base = h->base + (size_t)n * 16;
    uint32_t p = h->parent[n];
    const float *slot = h->slot[n];
    const float *pw = p == LMB_HIER_NONE ? IDENTITY : h->world + (size_t)p * 16;
    if (!slot) {
        memcpy(base, pw, 16 * sizeof(float));
        return;
    }
    int mode = h->flags[n] & LMB_HIER_MODE_MASK;
    if (mode == LMB_FOLLOW_FULL) {
        mul_affine(pw, slot, base);
    } else {
        float f[16];
        lmb_follow_filter(slot, mode, f);
        mul_affine(pw, f, base);
    }
}

/* world = base x TRS(srt). */
static inline void compute_world(lmb_hier *h, uint32_t n) {
    const float *base = h->base + (size_t)n * 16;
    float *world = h->world + (size_t)n * 16;
    if (!(h->flags[n] & LMB_HIER_HAS_SRT)) {
        memcpy(world, base, 16 * sizeof(float));
        return;
    }
    float local[16];
    lmb_trs_to_mat4(h->srt + (size_t)n * LMB_TRS_FLOATS, local);
    mul_affine(base, local, world);
}

void lmb_hier_update(lmb_hier *h, const uint32_t *ids, uint32_t count, uint32_t pass) {
    for (uint32_t k = 0; k < count; k++) {
        uint32_t n = ids[k];
        uint32_t p = h->parent[n];
        uint8_t f = h->flags[n];
        if ((f & (LMB_HIER_BASE_DIRTY | LMB_HIER_ANIMATED)) ||
            (p != LMB_HIER_NONE && h->stamp[p] == pass)) {
            compute_base(h, n);
            h->flags[n] = (uint8_t)(f & ~LMB_HIER_BASE_DIRTY);
        }
        compute_world(h, n);
        h->stamp[n] = pass;
    }
}

void lmb_hier_compute(lmb_hier *h, uint32_t n, uint32_t pass) {
    compute_base(h, n);
    h->flags[n] &= (uint8_t)~LMB_HIER_BASE_DIRTY;
    compute_world(h, n);
    h->stamp[n] = pass;
}
