/* morph.c: sparse morph targets of a skinned mesh (see morph.h). */
#include "morph.h"

#include <math.h>
#include <string.h>

#include "skinning.h"

#define ALIGN 64

static const char *const stream_field[3] = {"positions", "normals", "tangents"};

/* The stream arrays of a source: [0] positions, [1] normals, [2] tangents. */
static const float *const *stream_of(const lmb_morph_source *src, int s) {
    return s == 0 ? src->pos : s == 1 ? src->nrm : src->tan;
}

static const float *delta_of(const lmb_morph_source *src, int s, uint32_t t) {
    const float *const *a = stream_of(src, s);
    return a ? a[t] : NULL;
}

/* Whether file vertex f of target t moves anything. */
static int entry_nonzero(const lmb_morph_source *src, uint32_t t, uint32_t f) {
    for (int s = 0; s < 3; s++) {
        const float *d = delta_of(src, s, t);
        if (d && (d[(size_t)f * 3] != 0.0f || d[(size_t)f * 3 + 1] != 0.0f ||
                  d[(size_t)f * 3 + 2] != 0.0f))
            return 1;
    }
    return 0;
}

static uint32_t chunk_end(uint32_t c, uint32_t vertices) {
    uint32_t e = (c + 1) * LMB_SKIN_CHUNK;
    return e < vertices ? e : vertices;
}

/* Whether target t stores every vertex of chunk c (zeros included): when it
 * moves at least 3/4 of them, so the chunk's deltas are one straight loop;
 * else only the vertices it moves. */
static int chunk_dense(const lmb_morph_source *src, const struct lmb_skin_mesh *mesh, uint32_t t,
                       uint32_t c) {
    uint32_t v0 = c * LMB_SKIN_CHUNK, v1 = chunk_end(c, src->vertex_count), n = 0;
    for (uint32_t v = v0; v < v1; v++)
        n += (uint32_t)entry_nonzero(src, t, mesh->perm[v]);
    return (uint64_t)n * 4 >= (uint64_t)(v1 - v0) * 3;
}

static int source_has(const lmb_morph_source *src, int s) {
    for (uint32_t t = 0; t < src->target_count; t++)
        if (delta_of(src, s, t)) return 1;
    return 0;
}

lmb_status lmb_morph_count(const lmb_morph_source *src, const lmb_skin_mesh *mesh,
                           uint32_t *entries, lmb_error *err) {
    lmb_error_clear(err);
    *entries = 0;
    if (src->vertex_count != mesh->vertex_count)
        return lmb_error_set(err, LMB_ESIZE, "vertices",
                             "the targets have {v} vertices, the mesh {l}", 0, 0,
                             (double)src->vertex_count, (double)mesh->vertex_count);
    if (src->target_count < 1 || src->target_count > LMB_MORPH_MAX_TARGETS)
        return lmb_error_set(err, LMB_ERANGE, "targets", "{v} targets, expected 1 to {l}", 0, 0,
                             (double)src->target_count, (double)LMB_MORPH_MAX_TARGETS);
    if (source_has(src, 1) && !mesh->nrm)
        return lmb_error_set(err, LMB_EINVAL, "normals",
                             "the targets have normal deltas but the mesh has no normals", 0, 0, 0,
                             0);
    if (source_has(src, 2) && !mesh->tan)
        return lmb_error_set(err, LMB_EINVAL, "tangents",
                             "the targets have tangent deltas but the mesh has no tangents", 0, 0,
                             0, 0);
    uint64_t n = 0;
    for (uint32_t t = 0; t < src->target_count; t++) {
        for (int s = 0; s < 3; s++) {
            const float *d = delta_of(src, s, t);
            if (!d) continue;
            for (size_t i = 0; i < (size_t)src->vertex_count * 3; i++)
                if (!isfinite(d[i]))
                    return lmb_error_set(err, LMB_ENAN, stream_field[s],
                                         "target {i}: the delta of vertex {j} is {v}", t,
                                         (uint32_t)(i / 3), (double)d[i], 0);
        }
        for (uint32_t c = 0; c * LMB_SKIN_CHUNK < src->vertex_count; c++) {
            uint32_t v0 = c * LMB_SKIN_CHUNK, v1 = chunk_end(c, src->vertex_count);
            if (chunk_dense(src, mesh, t, c)) {
                n += v1 - v0;
                continue;
            }
            for (uint32_t v = v0; v < v1; v++)
                n += (uint64_t)entry_nonzero(src, t, mesh->perm[v]);
        }
    }
    if (n > UINT32_MAX - 1u)
        return lmb_error_set(err, LMB_ERANGE, "targets", "{v} non-zero deltas, at most {l}", 0, 0,
                             (double)n, (double)(UINT32_MAX - 1u));
    *entries = (uint32_t)n;
    return LMB_OK;
}

static uint32_t chunks_of(uint32_t vertices) {
    return (vertices + LMB_SKIN_CHUNK - 1) / LMB_SKIN_CHUNK;
}

static uint32_t streams_of(const lmb_morph_source *src) {
    return 1u + (source_has(src, 1) ? 1u : 0u) + (source_has(src, 2) ? 1u : 0u);
}

/* Byte sizes of the struct and its arrays, in layout order. */
static void array_sizes(const lmb_morph_source *src, uint32_t entries, size_t sz[4]) {
    size_t chunks = chunks_of(src->vertex_count);
    sz[0] = sizeof(lmb_morph);
    sz[1] = (size_t)src->target_count * (chunks + 1) * sizeof(uint32_t);
    sz[2] = (size_t)entries * sizeof(uint32_t);
    sz[3] = (size_t)entries * 4 * streams_of(src) * sizeof(float);
}

size_t lmb_morph_bytes(const lmb_morph_source *src, uint32_t entries) {
    size_t sz[4], total = ALIGN;
    array_sizes(src, entries, sz);
    for (int i = 0; i < 4; i++) {
        if (sz[i] > SIZE_MAX / 2 - total - ALIGN) return 0;
        total += lmb_align_up(sz[i], ALIGN);
    }
    return total;
}

lmb_morph *lmb_morph_build(void *mem, const lmb_morph_source *src, const lmb_skin_mesh *mesh,
                           uint32_t entries) {
    size_t sz[4];
    array_sizes(src, entries, sz);
    unsigned char *p = (unsigned char *)lmb_align_ptr(mem, ALIGN);
    void *arr[4];
    for (int i = 0; i < 4; i++) {
        arr[i] = (void *)p;
        p += lmb_align_up(sz[i], ALIGN);
    }
    lmb_morph *mo = (lmb_morph *)arr[0];
    memset(mo, 0, sizeof *mo);
    mo->mesh = mesh;
    mo->vertex_count = src->vertex_count;
    mo->target_count = src->target_count;
    mo->chunks = chunks_of(src->vertex_count);
    mo->entry_count = entries;
    mo->has_nrm = (uint32_t)source_has(src, 1);
    mo->has_tan = (uint32_t)source_has(src, 2);
    mo->streams = streams_of(src);
    mo->start = (uint32_t *)arr[1];
    mo->vertex = (uint32_t *)arr[2];
    mo->delta = (float *)arr[3];
    uint32_t e = 0;
    for (uint32_t t = 0; t < src->target_count; t++) {
        uint32_t *st = mo->start + (size_t)t * (mo->chunks + 1);
        /* sorted order: walking sorted vertices keeps each target's entries
         * increasing, so chunk boundaries are where the vertex index crosses */
        int dense = 0;
        for (uint32_t v = 0; v < src->vertex_count; v++) {
            if (v % LMB_SKIN_CHUNK == 0) {
                st[v / LMB_SKIN_CHUNK] = e;
                dense = chunk_dense(src, mesh, t, v / LMB_SKIN_CHUNK);
            }
            uint32_t f = mesh->perm[v];
            if (!dense && !entry_nonzero(src, t, f)) continue;
            mo->vertex[e] = v;
            uint32_t k = 0; /* the stream's place among the stored ones */
            for (int s = 0; s < 3; s++) {
                if ((s == 1 && !mo->has_nrm) || (s == 2 && !mo->has_tan)) continue;
                const float *a = delta_of(src, s, t);
                float *d = mo->delta + ((size_t)k++ * entries + e) * 4;
                for (int c = 0; c < 3; c++)
                    d[c] = a ? a[(size_t)f * 3 + (size_t)c] : 0.0f;
                d[3] = 0.0f; /* 4 floats per delta: one vector */
            }
            e++;
        }
        st[mo->chunks] = e;
    }
    return mo;
}

int lmb_morph_active(const lmb_morph *mo, const float *w) {
    for (uint32_t t = 0; t < mo->target_count; t++)
        if (w[t] != 0.0f) return 1;
    return 0;
}

/* The deltas of stream k (0: positions, then normals, tangents as stored). */
static const float *stream_deltas(const lmb_morph *mo, uint32_t k) {
    return mo->delta + (size_t)k * mo->entry_count * 4;
}

/* dst (4 floats per vertex) += w * delta (4 floats per entry: xyz and a zero,
 * so w and tangent signs stay) for the entries [e0, e1) of one stream,
 * entry vertices relative to begin. A run of consecutive vertices is one
 * straight loop. */
static void add_deltas(const lmb_morph *mo, const float *sd, uint32_t e0, uint32_t e1,
                       uint32_t begin, float w, float *restrict dst) {
    const float *restrict delta = sd + (size_t)e0 * 4;
    const uint32_t *restrict vertex = mo->vertex + e0;
    const uint32_t n = e1 - e0;
    if (n > 0 && vertex[n - 1] - vertex[0] == n - 1) { /* consecutive vertices */
        float *restrict o = dst + (size_t)(vertex[0] - begin) * 4;
        for (size_t k = 0; k < (size_t)n * 4; k++)
            o[k] += w * delta[k];
        return;
    }
    /* scattered vertices: one 4-float vector per entry (GCC / Clang vector
     * extension: SSE on x86-64, the same arithmetic everywhere) */
    typedef float v4 __attribute__((vector_size(16)));
    const v4 wv = {w, w, w, w};
    for (uint32_t i = 0; i < n; i++) {
        v4 d, o;
        float *op = dst + (size_t)(vertex[i] - begin) * 4;
        memcpy(&d, delta + (size_t)i * 4, sizeof d);
        memcpy(&o, op, sizeof o);
        o += wv * d;
        memcpy(op, &o, sizeof o);
    }
}

/* Targets whose deltas one fused pass adds (more go through add_deltas). */
#define FUSED 8

/* dst = src + sum_k w[k] * d[k] over the 4 n floats of a chunk's vertices:
 * one pass for the targets that move every vertex (src may be dst). */
static void fused_pass(const float *src, float *dst, uint32_t n, const float *const *d,
                       const float *w, uint32_t nd) {
    const size_t m = (size_t)n * 4;
    if (nd == 0) {
        if (src != dst) memcpy(dst, src, m * sizeof(float));
        return;
    }
    if (nd <= 2) { /* the common cases, as straight loops */
        const float *d0 = d[0], *d1 = nd == 2 ? d[1] : d[0];
        const float w0 = w[0], w1 = nd == 2 ? w[1] : 0.0f;
        for (size_t k = 0; k < m; k++)
            dst[k] = src[k] + w0 * d0[k] + w1 * d1[k];
        return;
    }
    for (size_t k = 0; k < m; k++) {
        float acc = src[k];
        for (uint32_t t = 0; t < nd; t++)
            acc += w[t] * d[t][k];
        dst[k] = acc;
    }
}

/* One stream (offset `at` in the entries) of a chunk: src (the mesh's
 * vertices from begin) to dst, plus every active target's deltas, targets
 * in order for each vertex. Dense targets (every vertex of the chunk) are
 * summed in fused passes first, sparse ones added after; the sum's order per
 * vertex depends only on the targets, not on the chunking. */
static void morph_stream(const lmb_morph *mo, const float *w, uint32_t c, uint32_t begin,
                         uint32_t end, const float *src, float *dst, uint32_t stream) {
    const float *sd = stream_deltas(mo, stream);
    const uint32_t n = end - begin;
    const float *dp[FUSED];
    float dw[FUSED];
    uint32_t nd = 0;
    int first = 1;
    for (uint32_t t = 0; t < mo->target_count; t++) {
        float wt = w[t];
        if (wt == 0.0f) continue;
        const uint32_t *st = mo->start + (size_t)t * (mo->chunks + 1);
        if (st[c + 1] - st[c] != n) continue; /* sparse here: below */
        dp[nd] = sd + (size_t)st[c] * 4;
        dw[nd++] = wt;
        if (nd == FUSED) {
            fused_pass(first ? src : dst, dst, n, dp, dw, nd);
            first = 0;
            nd = 0;
        }
    }
    if (nd > 0 || first) fused_pass(first ? src : dst, dst, n, dp, dw, nd);
    for (uint32_t t = 0; t < mo->target_count; t++) {
        float wt = w[t];
        if (wt == 0.0f) continue;
        const uint32_t *st = mo->start + (size_t)t * (mo->chunks + 1);
        if (st[c + 1] - st[c] == n) continue;
        add_deltas(mo, sd, st[c], st[c + 1], begin, wt, dst);
    }
}

void lmb_morph_chunk(const lmb_morph *mo, const float *w, uint32_t c, uint32_t begin, uint32_t end,
                     float *pos, float *nrm, float *tan) {
    const lmb_skin_mesh *m = mo->mesh;
    morph_stream(mo, w, c, begin, end, m->pos + (size_t)begin * 4, pos, 0);
    if (nrm) {
        if (mo->has_nrm)
            morph_stream(mo, w, c, begin, end, m->nrm + (size_t)begin * 4, nrm, 1);
        else
            memcpy(nrm, m->nrm + (size_t)begin * 4, (size_t)(end - begin) * 4 * sizeof(float));
    }
    if (tan) {
        if (mo->has_tan)
            morph_stream(mo, w, c, begin, end, m->tan + (size_t)begin * 4, tan,
                         mo->has_nrm ? 2u : 1u);
        else
            memcpy(tan, m->tan + (size_t)begin * 4, (size_t)(end - begin) * 4 * sizeof(float));
    }
}
