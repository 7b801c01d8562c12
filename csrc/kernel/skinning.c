/* skinning.c: skinned mesh preparation, the portable kernel and dispatch. */
#include "skinning.h"

#include <math.h>
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

lmb_status lmb_skin_mesh_count(const lmb_skin_source *src, uint32_t counts[5], uint32_t *bad) {
    memset(counts, 0, 5 * sizeof(uint32_t));
    for (uint32_t v = 0; v < src->vertex_count; v++) {
        const float *w = src->weights + (size_t)v * 4;
        const uint32_t *j = src->joints + (size_t)v * 4;
        for (int i = 0; i < 4; i++) {
            if (!isfinite(w[i])) {
                *bad = v;
                return LMB_ENAN;
            }
            if (w[i] < 0.0f) {
                *bad = v;
                return LMB_EINVAL;
            }
            if (w[i] != 0.0f && j[i] >= LMB_MAX_JOINTS) {
                *bad = v;
                return LMB_ERANGE;
            }
        }
        uint32_t n = influence_count(w);
        if (n == 0) {
            *bad = v;
            return LMB_EINVAL;
        }
        counts[n]++;
    }
    for (uint32_t k = 0; k < src->index_count; k++)
        if (src->indices[k] >= src->vertex_count) {
            *bad = k;
            return LMB_ERANGE;
        }
    return LMB_OK;
}

/* The mesh struct and its arrays, laid out in this order. */
enum { MESH_ARRAYS = 10 };

/* Byte sizes of the mesh arrays, in layout order. */
static void array_sizes(const lmb_skin_source *src, const uint32_t counts[5],
                        size_t sz[MESH_ARRAYS]) {
    size_t V = src->vertex_count, nj = 0, nw = 0;
    for (uint32_t k = 1; k <= 4; k++) {
        nj += (size_t)counts[k] * k;
        if (k >= 2) nw += (size_t)counts[k] * k;
    }
    sz[0] = sizeof(lmb_skin_mesh);
    sz[1] = V * 4 * sizeof(float);
    sz[2] = src->nrm ? V * 4 * sizeof(float) : 0;
    sz[3] = src->tan ? V * 4 * sizeof(float) : 0;
    sz[4] = nj * sizeof(uint16_t);
    sz[5] = nw * sizeof(float);
    sz[6] = V * sizeof(uint32_t);
    sz[7] = V * sizeof(uint32_t);
    sz[8] = (size_t)src->index_count * sizeof(uint32_t);
    sz[9] = nj * sizeof(uint32_t);
}

size_t lmb_skin_mesh_bytes(const lmb_skin_source *src, const uint32_t counts[5]) {
    size_t sz[MESH_ARRAYS], total = ALIGN;
    array_sizes(src, counts, sz);
    for (int i = 0; i < MESH_ARRAYS; i++)
        total += lmb_align_up(sz[i], ALIGN);
    return total;
}

lmb_skin_mesh *lmb_skin_mesh_build(void *mem, const lmb_skin_source *src,
                                   const uint32_t counts[5]) {
    size_t sz[MESH_ARRAYS];
    array_sizes(src, counts, sz);
    unsigned char *p = (unsigned char *)lmb_align_ptr(mem, ALIGN);
    void *arr[MESH_ARRAYS];
    for (int i = 0; i < MESH_ARRAYS; i++) {
        arr[i] = sz[i] ? (void *)p : NULL;
        p += lmb_align_up(sz[i], ALIGN);
    }
    lmb_skin_mesh *m = (lmb_skin_mesh *)arr[0];
    memset(m, 0, sizeof *m);
    const uint32_t V = src->vertex_count;
    m->vertex_count = V;
    m->index_count = src->index_count;
    m->has_normals = src->nrm != NULL;
    m->has_tangents = src->tan != NULL;
    m->pos = (float *)arr[1];
    m->nrm = (float *)arr[2];
    m->tan = (float *)arr[3];
    m->joints = (uint16_t *)arr[4];
    m->weights = (float *)arr[5];
    m->perm = (uint32_t *)arr[6];
    m->inv = (uint32_t *)arr[7];
    m->indices = (uint32_t *)arr[8];
    m->jbytes = (uint32_t *)arr[9];

    uint32_t cursor[5];
    size_t joff = 0, woff = 0;
    uint32_t start = 0;
    for (uint32_t k = 1; k <= 4; k++) {
        m->first[k] = cursor[k] = start;
        m->count[k] = counts[k];
        m->joint_off[k] = joff;
        m->weight_off[k] = woff;
        start += counts[k];
        joff += (size_t)counts[k] * k;
        if (k >= 2) woff += (size_t)counts[k] * k;
    }
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
    const lmb_skin_mesh *m = r->mesh;
    size_t o = r->map ? r->map[v] : v;
    const float *p = m->pos + (size_t)v * 4;
    if (r->pos) {
        float *d = r->pos + o * r->pos_stride;
        for (int k = 0; k < 3; k++)
            d[k] = B[k * 4] * p[0] + B[k * 4 + 1] * p[1] + B[k * 4 + 2] * p[2] + B[k * 4 + 3];
        if (r->pos_wide) d[3] = 1.0f;
    }
    if (r->nrm) {
        const float *n = m->nrm + (size_t)v * 4;
        float t[3];
        for (int k = 0; k < 3; k++)
            t[k] = B[k * 4] * n[0] + B[k * 4 + 1] * n[1] + B[k * 4 + 2] * n[2];
        normalize3(t);
        float *d = r->nrm + o * r->nrm_stride;
        d[0] = t[0], d[1] = t[1], d[2] = t[2];
        if (r->nrm_wide) d[3] = 0.0f;
    }
    if (r->tan) {
        const float *n = m->tan + (size_t)v * 4;
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

void lmb_skin_task_item(const lmb_skin_task *t, uint32_t item) {
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
    int level = lmb_simd_level();
    if (level >= LMB_SIMD_AVX512)
        lmb_skin_range_avx512(&r);
    else if (level >= LMB_SIMD_AVX2)
        lmb_skin_range_avx2(&r);
    else
        lmb_skin_range_portable(&r);
}
