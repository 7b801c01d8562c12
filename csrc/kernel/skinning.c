/* skinning.c: skinned mesh preparation, the portable kernel and dispatch. */
#include "skinning.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "palette.h"

#define ALIGN 64

/* ---- mesh preparation ------------------------------------------------ */

/* Influences of vertex v: non-zero weights. */
static uint32_t influence_count(const float *w) {
    uint32_t n = 0;
    for (int i = 0; i < 4; i++)
        n += w[i] != 0.0f;
    return n;
}

lmb_status lmb_skin_mesh_count(const lmb_skin_source *src, uint32_t counts[5], lmb_error *err) {
    lmb_error_clear(err);
    memset(counts, 0, 5 * sizeof(uint32_t));
    uint32_t slots = src->skin_joints ? src->skin_joints : LMB_MAX_JOINTS;
    for (uint32_t v = 0; v < src->vertex_count; v++) {
        const float *w = src->weights + (size_t)v * 4;
        const uint32_t *j = src->joints + (size_t)v * 4;
        for (uint32_t i = 0; i < 4; i++) {
            if (!isfinite(w[i]))
                return lmb_error_set(err, LMB_ENAN, "weights",
                                     "vertex {i}: weight {j} is NaN or infinite ({v})", v, i,
                                     (double)w[i], 0);
            if (w[i] < 0.0f)
                return lmb_error_set(err, LMB_EINVAL, "weights",
                                     "vertex {i}: negative weight {j} ({v})", v, i, (double)w[i],
                                     0);
            if (w[i] == 0.0f || j[i] < slots) continue;
            if (j[i] == UINT32_MAX)
                return lmb_error_set(err, LMB_ERANGE, "joints",
                                     "vertex {i}: influence {j} has a non-zero weight but no joint",
                                     v, i, (double)j[i], (double)slots - 1);
            if (src->skin_joints)
                return lmb_error_set(err, LMB_ERANGE, "joints",
                                     "vertex {i}: joint slot {v} beyond the skin's {l} joints", v,
                                     i, (double)j[i], (double)slots);
            return lmb_error_set(err, LMB_ERANGE, "joints",
                                 "vertex {i}: joint slot {v} out of range [0, {l}]", v, i,
                                 (double)j[i], (double)slots - 1);
        }
        uint32_t n = influence_count(w);
        if (n == 0)
            return lmb_error_set(err, LMB_EINVAL, "weights", "vertex {i}: every weight is zero", v,
                                 0, 0, 0);
        counts[n]++;
    }
    for (uint32_t k = 0; k < src->index_count; k++)
        if (src->indices[k] >= src->vertex_count)
            return lmb_error_set(err, LMB_ERANGE, "indices",
                                 "indices[{i}] = {v} (1-based) out of range [1, {l}]", k, 0,
                                 (double)src->indices[k] + 1.0, (double)src->vertex_count);
    return LMB_OK;
}

/* The mesh struct and its arrays, laid out in this order. */
enum { MESH_ARRAYS = 10 };

/* Byte sizes of the mesh arrays, in layout order. */
static void array_sizes(uint32_t V0, uint32_t index_count, int has_n, int has_t,
                        const uint32_t counts[5], size_t sz[MESH_ARRAYS]) {
    size_t V = V0, nj = 0, nw = 0;
    for (uint32_t k = 1; k <= 4; k++) {
        nj += (size_t)counts[k] * k;
        if (k >= 2) nw += (size_t)counts[k] * k;
    }
    sz[0] = sizeof(lmb_skin_mesh);
    sz[1] = V * 4 * sizeof(float);
    sz[2] = has_n ? V * 4 * sizeof(float) : 0;
    sz[3] = has_t ? V * 4 * sizeof(float) : 0;
    sz[4] = nj * sizeof(uint16_t);
    sz[5] = nw * sizeof(float);
    sz[6] = V * sizeof(uint32_t);
    sz[7] = V * sizeof(uint32_t);
    sz[8] = (size_t)index_count * sizeof(uint32_t);
    sz[9] = nj * sizeof(uint32_t);
}

size_t lmb_skin_mesh_layout_bytes(uint32_t vertex_count, uint32_t index_count, int has_normals,
                                  int has_tangents, const uint32_t counts[5]) {
    size_t sz[MESH_ARRAYS], total = ALIGN;
    array_sizes(vertex_count, index_count, has_normals, has_tangents, counts, sz);
    for (int i = 0; i < MESH_ARRAYS; i++)
        total += lmb_align_up(sz[i], ALIGN);
    return total;
}

size_t lmb_skin_mesh_bytes(const lmb_skin_source *src, const uint32_t counts[5]) {
    return lmb_skin_mesh_layout_bytes(src->vertex_count, src->index_count, src->nrm != NULL,
                                      src->tan != NULL, counts);
}

lmb_skin_mesh *lmb_skin_mesh_place(void *mem, uint32_t vertex_count, uint32_t index_count,
                                   int has_normals, int has_tangents, const uint32_t counts[5]) {
    size_t sz[MESH_ARRAYS];
    array_sizes(vertex_count, index_count, has_normals, has_tangents, counts, sz);
    unsigned char *p = (unsigned char *)lmb_align_ptr(mem, ALIGN);
    void *arr[MESH_ARRAYS];
    for (int i = 0; i < MESH_ARRAYS; i++) {
        arr[i] = sz[i] ? (void *)p : NULL;
        p += lmb_align_up(sz[i], ALIGN);
    }
    lmb_skin_mesh *m = (lmb_skin_mesh *)arr[0];
    memset(m, 0, sizeof *m);
    m->vertex_count = vertex_count;
    m->index_count = index_count;
    m->has_normals = has_normals != 0;
    m->has_tangents = has_tangents != 0;
    m->pos = (float *)arr[1];
    m->nrm = (float *)arr[2];
    m->tan = (float *)arr[3];
    m->joints = (uint16_t *)arr[4];
    m->weights = (float *)arr[5];
    m->perm = (uint32_t *)arr[6];
    m->inv = (uint32_t *)arr[7];
    m->indices = (uint32_t *)arr[8];
    m->jbytes = (uint32_t *)arr[9];
    size_t joff = 0, woff = 0;
    uint32_t start = 0;
    for (uint32_t k = 1; k <= 4; k++) {
        m->first[k] = start;
        m->count[k] = counts[k];
        m->joint_off[k] = joff;
        m->weight_off[k] = woff;
        start += counts[k];
        joff += (size_t)counts[k] * k;
        if (k >= 2) woff += (size_t)counts[k] * k;
    }
    return m;
}

lmb_status lmb_skin_mesh_finish(lmb_skin_mesh *m, uint32_t skin_joints, lmb_error *err) {
    lmb_error_clear(err);
    uint32_t V = m->vertex_count;
    for (uint32_t f = 0; f < V; f++)
        m->inv[f] = UINT32_MAX;
    for (uint32_t s = 0; s < V; s++) {
        uint32_t f = m->perm[s];
        if (f >= V || m->inv[f] != UINT32_MAX)
            return lmb_error_set(err, LMB_EINVAL, "perm",
                                 "sorted vertex {i}: file vertex {v} out of range or twice", s, 0,
                                 (double)f, (double)V);
        m->inv[f] = s;
    }
    size_t nj = 0, nw = 0;
    for (uint32_t k = 1; k <= 4; k++) {
        nj += (size_t)m->count[k] * k;
        if (k >= 2) nw += (size_t)m->count[k] * k;
    }
    uint32_t limit = 0, slots = skin_joints ? skin_joints : LMB_MAX_JOINTS;
    for (size_t i = 0; i < nj; i++) {
        if (m->joints[i] >= slots)
            return lmb_error_set(err, LMB_ERANGE, "joints", "joint slot {v} out of range [0, {l}]",
                                 (uint32_t)i, 0, (double)m->joints[i], (double)slots - 1);
        m->jbytes[i] = (uint32_t)m->joints[i] * 16u * (uint32_t)sizeof(float);
        if ((uint32_t)m->joints[i] + 1 > limit) limit = (uint32_t)m->joints[i] + 1;
    }
    for (size_t i = 0; i < nw; i++)
        if (!isfinite(m->weights[i]) || m->weights[i] < 0.0f)
            return lmb_error_set(err, LMB_EINVAL, "weights", "weight {i} ({v}) is not finite >= 0",
                                 (uint32_t)i, 0, (double)m->weights[i], 0);
    for (uint32_t k = 0; k < m->index_count; k++)
        if (m->indices[k] >= V)
            return lmb_error_set(err, LMB_ERANGE, "indices",
                                 "indices[{i}] = {v} (1-based) out of range [1, {l}]", k, 0,
                                 (double)m->indices[k] + 1.0, (double)V);
    m->joint_limit = limit;
    return LMB_OK;
}

lmb_skin_mesh *lmb_skin_mesh_build(void *mem, const lmb_skin_source *src,
                                   const uint32_t counts[5]) {
    lmb_skin_mesh *m = lmb_skin_mesh_place(mem, src->vertex_count, src->index_count,
                                           src->nrm != NULL, src->tan != NULL, counts);
    const uint32_t V = src->vertex_count;
    uint32_t cursor[5];
    for (uint32_t k = 1; k <= 4; k++)
        cursor[k] = m->first[k];
    uint32_t limit = 0;
    for (uint32_t f = 0; f < V; f++) {
        const float *w = src->weights + (size_t)f * 4;
        const uint32_t *j = src->joints + (size_t)f * 4;
        uint32_t k = influence_count(w);
        uint32_t s = cursor[k]++;
        m->perm[s] = f;
        m->inv[f] = s;
        double sum = 0.0;
        for (int i = 0; i < 4; i++)
            sum += (double)w[i];
        uint16_t *oj = m->joints + m->joint_off[k] + (size_t)(s - m->first[k]) * k;
        float *ow = k >= 2 ? m->weights + m->weight_off[k] + (size_t)(s - m->first[k]) * k : NULL;
        uint32_t n = 0;
        for (int i = 0; i < 4; i++) {
            if (w[i] == 0.0f) continue;
            oj[n] = (uint16_t)j[i];
            m->jbytes[(size_t)(oj - m->joints) + n] = j[i] * 16u * (uint32_t)sizeof(float);
            if (j[i] + 1 > limit) limit = j[i] + 1;
            if (ow) ow[n] = (float)((double)w[i] / sum);
            n++;
        }
        float *op = m->pos + (size_t)s * 4;
        op[0] = src->pos[(size_t)f * 3];
        op[1] = src->pos[(size_t)f * 3 + 1];
        op[2] = src->pos[(size_t)f * 3 + 2];
        op[3] = 1.0f;
        if (m->nrm) {
            float *on = m->nrm + (size_t)s * 4;
            memcpy(on, src->nrm + (size_t)f * 3, 3 * sizeof(float));
            on[3] = 0.0f;
        }
        if (m->tan) memcpy(m->tan + (size_t)s * 4, src->tan + (size_t)f * 4, 4 * sizeof(float));
    }
    m->joint_limit = limit;
    for (uint32_t k = 0; k < src->index_count; k++)
        m->indices[k] = m->inv[src->indices[k]];
    return m;
}

/* ---- portable kernel ------------------------------------------------- */

/* Adds w * palette entry P to the row-major 3x4 matrix B. */
static inline void accumulate(float B[12], const float *P, int layout, float w) {
    if (layout == LMB_PALETTE_MAT4) {
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 4; c++)
                B[r * 4 + c] += w * P[c * 4 + r];
    } else {
        for (int e = 0; e < 12; e++)
            B[e] += w * P[e];
    }
}

static inline void copy_entry(float B[12], const float *P, int layout) {
    if (layout == LMB_PALETTE_MAT4) {
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 4; c++)
                B[r * 4 + c] = P[c * 4 + r];
    } else {
        memcpy(B, P, 12 * sizeof(float));
    }
}

static inline void normalize3(float v[3]) {
    float s = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
    if (s < 1e-30f) s = 1e-30f;
    float inv = 1.0f / sqrtf(s);
    v[0] *= inv;
    v[1] *= inv;
    v[2] *= inv;
}

/* Transforms and writes sorted vertex v with the blended matrix B. */
static inline void emit(const lmb_skin_range *r, uint32_t v, const float B[12]) {
    size_t o = r->map ? r->map[v] : v;
    const float *p = r->src_pos + (size_t)(v - r->src_base) * 4;
    if (r->pos) {
        float *d = r->pos + o * r->pos_stride;
        for (int k = 0; k < 3; k++)
            d[k] = B[k * 4] * p[0] + B[k * 4 + 1] * p[1] + B[k * 4 + 2] * p[2] + B[k * 4 + 3];
        if (r->pos_wide) d[3] = 1.0f;
    }
    if (r->nrm) {
        const float *n = r->src_nrm + (size_t)(v - r->src_base) * 4;
        float t[3];
        for (int k = 0; k < 3; k++)
            t[k] = B[k * 4] * n[0] + B[k * 4 + 1] * n[1] + B[k * 4 + 2] * n[2];
        normalize3(t);
        float *d = r->nrm + o * r->nrm_stride;
        d[0] = t[0], d[1] = t[1], d[2] = t[2];
        if (r->nrm_wide) d[3] = 0.0f;
    }
    if (r->tan) {
        const float *n = r->src_tan + (size_t)(v - r->src_base) * 4;
        float t[3];
        for (int k = 0; k < 3; k++)
            t[k] = B[k * 4] * n[0] + B[k * 4 + 1] * n[1] + B[k * 4 + 2] * n[2];
        normalize3(t);
        float *d = r->tan + o * r->tan_stride;
        d[0] = t[0], d[1] = t[1], d[2] = t[2], d[3] = n[3];
    }
}

void lmb_skin_range_portable(const lmb_skin_range *r) {
    const lmb_skin_mesh *m = r->mesh;
    const uint32_t width = lmb_palette_width(r->layout);
    const float *pal = r->pal;
    const int layout = r->layout;
    for (uint32_t k = 1; k <= 4; k++) {
        uint32_t lo = m->first[k], hi = m->first[k] + m->count[k];
        if (lo < r->begin) lo = r->begin;
        if (hi > r->end) hi = r->end;
        if (lo >= hi) continue;
        const uint16_t *J = m->joints + m->joint_off[k] + (size_t)(lo - m->first[k]) * k;
        if (k == 1) {
            for (uint32_t v = lo; v < hi; v++, J++) {
                float B[12];
                copy_entry(B, pal + (size_t)J[0] * width, layout);
                emit(r, v, B);
            }
            continue;
        }
        const float *W = m->weights + m->weight_off[k] + (size_t)(lo - m->first[k]) * k;
        for (uint32_t v = lo; v < hi; v++, J += k, W += k) {
            float B[12] = {0};
            for (uint32_t i = 0; i < k; i++)
                accumulate(B, pal + (size_t)J[i] * width, layout, W[i]);
            emit(r, v, B);
        }
    }
}

/* ---- tasks ----------------------------------------------------------- */

static void run_range(const lmb_skin_range *r) {
    int level = lmb_simd_level();
    if (level >= LMB_SIMD_AVX512)
        lmb_skin_range_avx512(r);
    else if (level >= LMB_SIMD_AVX2)
        lmb_skin_range_avx2(r);
    else
        lmb_skin_range_portable(r);
}

/* A morphed chunk: its source vertices morphed into buffers on this frame's
 * stack (48 KB, in L1/L2; only items that morph pay for the frame), then
 * skinned from there. */
static __attribute__((noinline)) void run_morphed(lmb_skin_range *r, const lmb_morph *mo,
                                                  const float *w, uint32_t c,
                                                  lmb_skin_range_fn run) {
    const lmb_skin_mesh *m = r->mesh;
    float mpos[LMB_SKIN_CHUNK * 4] __attribute__((aligned(64)));
    float mnrm[LMB_SKIN_CHUNK * 4] __attribute__((aligned(64)));
    float mtan[LMB_SKIN_CHUNK * 4] __attribute__((aligned(64)));
    float *pn = r->nrm && mo->has_nrm ? mnrm : NULL;
    float *pt = r->tan && mo->has_tan ? mtan : NULL;
    lmb_morph_chunk(mo, w, c, r->begin, r->end, mpos, pn, pt);
    /* every source now starts at vertex begin (unmorphed streams too) */
    r->src_pos = mpos;
    r->src_nrm = pn ? pn : m->nrm ? m->nrm + (size_t)r->begin * 4 : NULL;
    r->src_tan = pt ? pt : m->tan ? m->tan + (size_t)r->begin * 4 : NULL;
    r->src_base = r->begin;
    run(r);
}

static inline __attribute__((always_inline)) void task_item(const lmb_skin_task *t, uint32_t item,
                                                            lmb_skin_range_fn run) {
    const lmb_skin_mesh *m = t->mesh;
    /* instance-major (see lmb_skin_task_items) */
    uint32_t chunks = lmb_skin_task_chunks(t);
    uint32_t i = item / chunks, c = item % chunks;
    lmb_skin_range r;
    r.mesh = m;
    r.pal = t->palette + (size_t)i * t->palette_stride;
    r.layout = t->layout;
    r.map = t->file_order ? m->perm : NULL;
    r.pos = t->pos.base ? t->pos.base + (size_t)i * t->pos.instance_stride : NULL;
    r.nrm = t->nrm.base && m->nrm ? t->nrm.base + (size_t)i * t->nrm.instance_stride : NULL;
    r.tan = t->tan.base && m->tan ? t->tan.base + (size_t)i * t->tan.instance_stride : NULL;
    r.pos_stride = t->pos.stride;
    r.nrm_stride = t->nrm.stride;
    r.tan_stride = t->tan.stride;
    r.pos_wide = t->pos.wide;
    r.nrm_wide = t->nrm.wide;
    r.full = t->full && !t->file_order;
    r.begin = c * LMB_SKIN_CHUNK;
    r.end = r.begin + LMB_SKIN_CHUNK < m->vertex_count ? r.begin + LMB_SKIN_CHUNK : m->vertex_count;
    r.src_pos = m->pos, r.src_nrm = m->nrm, r.src_tan = m->tan;
    r.src_base = 0;
    const float *w = t->morph ? t->morph_w + (size_t)i * t->morph->target_count : NULL;
    if (w && lmb_morph_active(t->morph, w))
        run_morphed(&r, t->morph, w, c, run);
    else
        run(&r);
}

void lmb_skin_task_item(const lmb_skin_task *t, uint32_t item) {
    task_item(t, item, run_range);
}

void lmb_skin_task_item_with(const lmb_skin_task *t, uint32_t item, lmb_skin_range_fn run) {
    task_item(t, item, run);
}

/* ---- targets and jobs -------------------------------------------------- */

static const char *const stream_field[] = {"positions", "normals", "tangents"};
static const char *const offset_field[] = {"position", "normal", "tangent"};

/* Bytes an attribute k occupies in an interleaved vertex. */
static int64_t attr_size(int k) {
    return k == LMB_SKIN_TAN ? 16 : 12;
}

static lmb_skin_footprint footprint_of(const lmb_skin_stream *st, int k, size_t n) {
    lmb_skin_footprint f;
    f.lo = (uintptr_t)(void *)st->base;
    f.stride = st->stride * sizeof(float);
    f.size = k == LMB_SKIN_TAN || st->wide ? 16 : 12;
    f.n = n;
    f.task = 0;
    f.stream = (uint32_t)k;
    return f;
}

static uintptr_t fp_end(const lmb_skin_footprint *f) {
    return f->lo + (f->n - 1) * f->stride + f->size;
}

/* True when some byte is written by both streams. Equal strides (the
 * interleaved case) are compared exactly: both sets repeat with that
 * period inside the span they share, so they meet there iff one attribute
 * of a meets one of b, period for period. Other strides are compared by
 * their spans (a refusal errs on the safe side). */
static int fp_overlap(const lmb_skin_footprint *fa, const lmb_skin_footprint *fb) {
    lmb_skin_footprint ca = *fa, cb = *fb;
    lmb_skin_footprint *a = fa->lo <= fb->lo ? &ca : &cb, *b = fa->lo <= fb->lo ? &cb : &ca;
    uintptr_t ahi = fp_end(a), bhi = fp_end(b);
    if (ahi <= b->lo || bhi <= a->lo) return 0; /* disjoint spans */
    /* one vertex alone repeats with any period at least its size */
    if (a->n == 1 && b->stride >= a->size) a->stride = b->stride;
    if (b->n == 1 && a->stride >= b->size) b->stride = a->stride;
    if (a->stride != b->stride) return 1;
    /* offsets from a->lo: a writes [m s, m s + p), b writes [d + m s, d + m s + q) */
    int64_t s = (int64_t)a->stride, p = (int64_t)a->size, q = (int64_t)b->size;
    int64_t d = (int64_t)(b->lo - a->lo);
    int64_t hlo = d, hhi = (int64_t)((ahi < bhi ? ahi : bhi) - a->lo); /* shared span */
    int64_t r = d % s; /* b's attribute within a period of a: [r, r + q) */
    for (int64_t w = 0; w < 2; w++) {
        int64_t x = r - w * s;                                  /* b's piece, unwrapped */
        int64_t lo = x > 0 ? x : 0, hi = x + q < p ? x + q : p; /* meets a's [0, p)? */
        if (lo >= hi) continue;
        if (hhi - hlo >= s) return 1; /* the shared span holds a whole period */
        int64_t m = (hlo - lo) / s;
        for (int64_t k = m - 2; k <= m + 2; k++)
            if (lo + k * s < hhi && hi + k * s > hlo) return 1;
    }
    return 0;
}

static lmb_status check_interleaved(const lmb_skin_target_desc *d, size_t total, lmb_error *err) {
    if (((uintptr_t)d->buffer & 3u) != 0)
        return lmb_error_set(err, LMB_EINVAL, "buffer", "buffer data is not 4-byte aligned", 0, 0,
                             0, 0);
    int64_t stride = d->stride;
    if (stride < 4 || stride % 4 != 0 || stride > LMB_SKIN_MAX_STRIDE)
        return lmb_error_set(err, LMB_ERANGE, "stride",
                             "stride {v} must be a multiple of 4 bytes in [4, {l}]", 0, 0,
                             (double)stride, LMB_SKIN_MAX_STRIDE);
    int any = 0;
    int64_t last = 0;
    for (int k = 0; k < 3; k++) {
        int64_t o = d->offset[k];
        if (o == LMB_SKIN_NO_OFFSET) continue;
        if (o < 0 || o % 4 != 0 || o > stride - attr_size(k)) {
            lmb_error_set(err, LMB_ERANGE, offset_field[k],
                          "{f} offset {v} must be a multiple of 4 in [0, {l}] ({c})", 0, 0,
                          (double)o, (double)(stride - attr_size(k)));
            snprintf(err->context, sizeof err->context, "stride %lld", (long long)stride);
            return err->code;
        }
        any = 1;
        if (o + attr_size(k) > last) last = o + attr_size(k);
    }
    if (!any)
        return lmb_error_set(err, LMB_EINVAL, "buffer",
                             "give at least one of position, normal, tangent offsets", 0, 0, 0, 0);
    for (int a = 0; a < 3; a++)
        for (int c = a + 1; c < 3; c++) {
            int64_t oa = d->offset[a], oc = d->offset[c]; /* validated: >= 0 when given */
            if (oa < 0 || oc < 0 || oa >= oc + attr_size(c) || oc >= oa + attr_size(a)) continue;
            lmb_error_set(err, LMB_EINVAL, offset_field[a],
                          "{f} and {c} offsets overlap (bytes {v} and {l} of the stride)", 0, 0,
                          (double)oa, (double)oc);
            snprintf(err->context, sizeof err->context, "%s", offset_field[c]);
            return err->code;
        }
    /* (total - 1) * stride + last, without overflow */
    size_t need = SIZE_MAX;
    if (total - 1 <= (SIZE_MAX - (size_t)last) / (size_t)stride)
        need = (total - 1) * (size_t)stride + (size_t)last;
    if (d->buffer_bytes < need) {
        lmb_error_set(err, LMB_ESIZE, "buffer", "buffer too small: {v} bytes, need {l} ({c})", 0, 0,
                      (double)d->buffer_bytes, (double)need);
        snprintf(err->context, sizeof err->context, "%llu vertices x stride %lld",
                 (unsigned long long)total, (long long)stride);
        return err->code;
    }
    return LMB_OK;
}

static lmb_status check_separate(const lmb_skin_target_desc *d, size_t total, lmb_error *err) {
    int any = 0;
    lmb_skin_stream st[3];
    for (int k = 0; k < 3; k++) {
        st[k].base = d->base[k];
        if (!d->base[k]) continue;
        any = 1;
        int64_t w = d->width[k];
        if (w != 4 && (k == LMB_SKIN_TAN || w != 3)) {
            lmb_error_set(err, LMB_EINVAL, stream_field[k],
                          "{f} must be an f32 Buffer of width {c} (got width {v})", 0, 0, (double)w,
                          0);
            snprintf(err->context, sizeof err->context, "%s", k == LMB_SKIN_TAN ? "4" : "3 or 4");
            return err->code;
        }
        if (((uintptr_t)d->base[k] & 3u) != 0)
            return lmb_error_set(err, LMB_EINVAL, stream_field[k], "{f} data is not 4-byte aligned",
                                 0, 0, 0, 0);
        if (d->elements[k] < total) {
            lmb_error_set(err, LMB_ESIZE, stream_field[k],
                          "{f} buffer too small: {v} elements, need {l} ({c})", 0, 0,
                          (double)d->elements[k], (double)total);
            snprintf(err->context, sizeof err->context, "%lld instances x %lld vertices",
                     (long long)d->instances, (long long)d->vertices);
            return err->code;
        }
        st[k].stride = (size_t)w;
        st[k].wide = w == 4;
    }
    if (!any)
        return lmb_error_set(err, LMB_EINVAL, "positions",
                             "no output stream (give positions, normals or tangents, or buffer + "
                             "offsets)",
                             0, 0, 0, 0);
    /* one stream must not write another's bytes (the same Buffer twice) */
    for (int a = 0; a < 3; a++)
        for (int c = a + 1; c < 3; c++) {
            if (!st[a].base || !st[c].base) continue;
            lmb_skin_footprint fa = footprint_of(&st[a], a, total);
            lmb_skin_footprint fc = footprint_of(&st[c], c, total);
            if (!fp_overlap(&fa, &fc)) continue;
            lmb_error_set(err, LMB_EINVAL, stream_field[a],
                          "{f} and {c} write the same bytes (the same Buffer, or overlapping ones)",
                          0, 0, 0, 0);
            snprintf(err->context, sizeof err->context, "%s", stream_field[c]);
            return err->code;
        }
    return LMB_OK;
}

lmb_status lmb_skin_target_validate(const lmb_skin_target_desc *d, lmb_error *err) {
    lmb_error_clear(err);
    if (d->vertices < 1 || d->vertices > LMB_SKIN_MAX_VERTICES)
        return lmb_error_set(err, LMB_ERANGE, "vertices",
                             "vertex count {v} out of range [1, {l}] (give mesh or vertices)", 0, 0,
                             (double)d->vertices, LMB_SKIN_MAX_VERTICES);
    if (d->instances < 1 || d->instances > LMB_SKIN_MAX_INSTANCES)
        return lmb_error_set(err, LMB_ERANGE, "instances",
                             "instance count {v} out of range [1, {l}]", 0, 0, (double)d->instances,
                             LMB_SKIN_MAX_INSTANCES);
    size_t total = (size_t)d->vertices * (size_t)d->instances; /* < 2^52 */
    return d->interleaved ? check_interleaved(d, total, err) : check_separate(d, total, err);
}

/* Interleaved: may attribute k (position or normal, 12 bytes at off[k])
 * store 16 bytes? Yes when the 4 bytes after it are written later by the
 * same job: by a later attribute of the same vertex (position, normal,
 * tangent order) or, at the end of the stride, by the next vertex's
 * attribute at offset 0. */
static int spill_covered(const int64_t off[3], int64_t stride, int k) {
    int64_t q = off[k] + 12;
    for (int c = 0; c < 3; c++) {
        if (off[c] < 0) continue;
        if (q == stride && off[c] == 0) return 1;
        if (q < stride && c > k && off[c] <= q && q + 4 <= off[c] + attr_size(c)) return 1;
    }
    return 0;
}

void lmb_skin_target_init(lmb_skin_target *t, const lmb_skin_target_desc *d) {
    memset(t, 0, sizeof *t);
    t->vertices = (uint32_t)d->vertices;
    t->instances = (uint32_t)d->instances;
    t->file_order = d->file_order;
    t->interleaved = d->interleaved;
    t->spill_ok = 1; /* separate: width 3 spills onto the next vertex; width 4 is owned */
    for (int k = 0; k < 3; k++) {
        if (d->interleaved) {
            if (d->offset[k] == LMB_SKIN_NO_OFFSET) continue;
            if (k < LMB_SKIN_TAN && !spill_covered(d->offset, d->stride, k)) t->spill_ok = 0;
            size_t stride = (size_t)d->stride / 4;
            t->s[k].base = (float *)(void *)((char *)d->buffer + d->offset[k]);
            t->s[k].stride = stride;
            t->s[k].instance_stride = (size_t)d->vertices * stride;
            t->s[k].wide = 0;
        } else if (d->base[k]) {
            t->s[k].base = d->base[k];
            t->s[k].stride = (size_t)d->width[k];
            t->s[k].instance_stride = (size_t)d->vertices * (size_t)d->width[k];
            t->s[k].wide = d->width[k] == 4;
        }
    }
}

lmb_status lmb_skin_weights_check(const lmb_morph *mo, const float *w, uint32_t rows,
                                  uint32_t first, lmb_error *err) {
    const uint32_t T = mo->target_count;
    for (uint32_t i = 0; i < rows; i++)
        for (uint32_t t = 0; t < T; t++) {
            float x = w[(size_t)i * T + t];
            if (!isfinite(x))
                return lmb_error_set(err, LMB_ENAN, "weights",
                                     "morph weight {j} of instance {i} is {v}", first + i, t,
                                     (double)x, 0);
        }
    return LMB_OK;
}

lmb_status lmb_skin_job_validate(const lmb_skin_job *j, lmb_error *err) {
    lmb_error_clear(err);
    const lmb_skin_mesh *m = j->mesh;
    const lmb_skin_target *tg = j->target;
    if (j->mesh_skin && j->palette_skin && j->mesh_skin != j->palette_skin)
        return lmb_error_set(err, LMB_EMISMATCH, "palette",
                             "the palette belongs to another skin than the mesh", 0, 0, 0, 0);
    if (j->layout != LMB_PALETTE_MAT4 && j->layout != LMB_PALETTE_MAT3X4)
        return lmb_error_set(err, LMB_EINVAL, "layout", "unknown palette layout {v}", 0, 0,
                             (double)j->layout, 0);
    if (m->joint_limit > j->palette_joints)
        return lmb_error_set(err, LMB_ERANGE, "palette",
                             "the mesh uses skin joint slot {v} but the palette has {l} joints "
                             "(0-based slots below {l})",
                             0, 0, (double)m->joint_limit - 1, (double)j->palette_joints);
    if (tg->vertices != m->vertex_count)
        return lmb_error_set(err, LMB_EMISMATCH, "target",
                             "the target holds {v} vertices per instance, the mesh has {l}", 0, 0,
                             (double)tg->vertices, (double)m->vertex_count);
    if ((uint64_t)j->first + j->count > j->palette_instances)
        return lmb_error_set(err, LMB_ERANGE, "count",
                             "palette instances {i} .. {v} out of range [1, {l}]", j->first, 0,
                             (double)j->first + (double)j->count, (double)j->palette_instances);
    if ((uint64_t)j->slot + j->count > tg->instances)
        return lmb_error_set(err, LMB_ERANGE, "slot",
                             "target too small: instances {i} .. {v}, the target holds {l}",
                             j->slot, 0, (double)j->slot + (double)j->count, (double)tg->instances);
    if (tg->s[LMB_SKIN_NRM].base && !m->has_normals)
        return lmb_error_set(err, LMB_EINVAL, "normals",
                             "the target wants normals but the mesh has none", 0, 0, 0, 0);
    if (tg->s[LMB_SKIN_TAN].base && !m->has_tangents)
        return lmb_error_set(err, LMB_EINVAL, "tangents",
                             "the target wants tangents but the mesh has none", 0, 0, 0, 0);
    if (j->morph) {
        if (j->morph->mesh != m)
            return lmb_error_set(err, LMB_EMISMATCH, "morph",
                                 "the morph targets belong to another mesh", 0, 0, 0, 0);
        if ((uint64_t)j->first + j->count > j->weight_rows)
            return lmb_error_set(err, LMB_ERANGE, "weights",
                                 "no morph weights for palette instances {i} .. {v}: {l} rows",
                                 j->first, 0, (double)j->first + (double)j->count,
                                 (double)j->weight_rows);
        lmb_status st =
            lmb_skin_weights_check(j->morph, j->morph_w + (size_t)j->first * j->morph->target_count,
                                   j->count, j->first, err);
        if (st != LMB_OK) return st;
    }
    uint64_t chunks = (m->vertex_count + LMB_SKIN_CHUNK - 1) / LMB_SKIN_CHUNK;
    if ((uint64_t)j->count * chunks > UINT32_MAX)
        return lmb_error_set(err, LMB_ERANGE, "count",
                             "too much work in one call: {v} work items, at most {l}", 0, 0,
                             (double)j->count * (double)chunks, (double)UINT32_MAX);
    return LMB_OK;
}

void lmb_skin_job_task(const lmb_skin_job *j, lmb_skin_task *t) {
    const lmb_skin_target *tg = j->target;
    memset(t, 0, sizeof *t);
    t->mesh = j->mesh;
    t->palette_stride = (size_t)j->palette_joints * lmb_palette_width(j->layout);
    t->palette = j->palette + (size_t)j->first * t->palette_stride;
    t->layout = j->layout;
    t->instances = j->count;
    t->file_order = tg->file_order;
    t->full = tg->spill_ok && !tg->file_order;
    t->morph = j->morph;
    t->morph_w = j->morph ? j->morph_w + (size_t)j->first * j->morph->target_count : NULL;
    lmb_skin_stream *out[3] = {&t->pos, &t->nrm, &t->tan};
    for (int k = 0; k < 3; k++) {
        *out[k] = tg->s[k];
        if (out[k]->base) out[k]->base += (size_t)j->slot * tg->s[k].instance_stride;
    }
}

static int cmp_footprint(const void *a, const void *b) {
    const lmb_skin_footprint *x = (const lmb_skin_footprint *)a;
    const lmb_skin_footprint *y = (const lmb_skin_footprint *)b;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    if (x->task != y->task) return x->task < y->task ? -1 : 1;
    return x->stream < y->stream ? -1 : x->stream > y->stream;
}

lmb_status lmb_skin_batch_validate(const lmb_skin_task *tasks, uint32_t n, lmb_skin_footprint *fp,
                                   lmb_error *err) {
    lmb_error_clear(err);
    uint64_t items = 0;
    size_t nf = 0;
    for (uint32_t k = 0; k < n; k++) {
        const lmb_skin_task *t = &tasks[k];
        items += lmb_skin_task_items(t);
        if (items > UINT32_MAX)
            return lmb_error_set(err, LMB_ERANGE, "jobs",
                                 "too much work in one batch: more than {l} work items at job {i}",
                                 k, 0, (double)items, (double)UINT32_MAX);
        const lmb_skin_stream *st[3] = {&t->pos, &t->nrm, &t->tan};
        for (int a = 0; a < 3; a++) {
            if (!st[a]->base || t->instances == 0) continue;
            fp[nf] = footprint_of(st[a], a, (size_t)t->instances * t->mesh->vertex_count);
            fp[nf].task = k;
            nf++;
        }
    }
    qsort(fp, nf, sizeof *fp, cmp_footprint);
    for (size_t i = 0; i < nf; i++) {
        uintptr_t end = fp_end(&fp[i]);
        for (size_t j = i + 1; j < nf && fp[j].lo < end; j++) {
            if (!fp_overlap(&fp[i], &fp[j])) continue;
            const lmb_skin_footprint *x = fp[i].task <= fp[j].task ? &fp[i] : &fp[j];
            const lmb_skin_footprint *y = x == &fp[i] ? &fp[j] : &fp[i];
            lmb_error_set(err, LMB_EINVAL, stream_field[x->stream],
                          "jobs {i} and {j} write the same bytes ({f} of job {i}, {c} of job {j}: "
                          "their targets share a Buffer)",
                          x->task, y->task, 0, 0);
            snprintf(err->context, sizeof err->context, "%s", stream_field[y->stream]);
            return err->code;
        }
    }
    return LMB_OK;
}
