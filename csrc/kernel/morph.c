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
        for (uint32_t f = 0; f < src->vertex_count; f++)
            n += (uint64_t)entry_nonzero(src, t, f);
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

static uint32_t stride_of(const lmb_morph_source *src) {
    return 4u + (source_has(src, 1) ? 4u : 0u) + (source_has(src, 2) ? 4u : 0u);
}

/* Byte sizes of the struct and its arrays, in layout order. */
static void array_sizes(const lmb_morph_source *src, uint32_t entries, size_t sz[4]) {
    size_t chunks = chunks_of(src->vertex_count);
    sz[0] = sizeof(lmb_morph);
    sz[1] = (size_t)src->target_count * (chunks + 1) * sizeof(uint32_t);
    sz[2] = (size_t)entries * sizeof(uint32_t);
    sz[3] = (size_t)entries * stride_of(src) * sizeof(float);
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
    mo->stride = stride_of(src);
    mo->start = (uint32_t *)arr[1];
    mo->vertex = (uint32_t *)arr[2];
    mo->delta = (float *)arr[3];
    uint32_t e = 0;
    for (uint32_t t = 0; t < src->target_count; t++) {
        uint32_t *st = mo->start + (size_t)t * (mo->chunks + 1);
        /* sorted order: walking sorted vertices keeps each target's entries
         * increasing, so chunk boundaries are where the vertex index crosses */
        for (uint32_t v = 0; v < src->vertex_count; v++) {
            if (v % LMB_SKIN_CHUNK == 0) st[v / LMB_SKIN_CHUNK] = e;
            uint32_t f = mesh->perm[v];
            if (!entry_nonzero(src, t, f)) continue;
            mo->vertex[e] = v;
            float *d = mo->delta + (size_t)e * mo->stride;
            int k = 0;
            for (int s = 0; s < 3; s++) {
                if ((s == 1 && !mo->has_nrm) || (s == 2 && !mo->has_tan)) continue;
                const float *a = delta_of(src, s, t);
                for (int c = 0; c < 3; c++)
                    d[k++] = a ? a[(size_t)f * 3 + (size_t)c] : 0.0f;
                d[k++] = 0.0f; /* 4 floats per stream: one vector */
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

/* dst (4 floats per vertex) += w * the 4 floats at offset `at` of each entry
 * of [e0, e1) (xyz and a zero, so w and tangent signs stay), entry vertices
 * relative to begin. A target that moves every vertex of the chunk is a
 * straight loop. */
static void add_deltas(const lmb_morph *mo, uint32_t e0, uint32_t e1, uint32_t begin, float w,
                       uint32_t at, float *restrict dst) {
    const size_t stride = mo->stride;
    const float *restrict delta = mo->delta + (size_t)e0 * stride + at;
    const uint32_t *restrict vertex = mo->vertex + e0;
    const uint32_t n = e1 - e0;
    if (n > 0 && vertex[n - 1] - vertex[0] == n - 1) { /* consecutive vertices */
        float *restrict o = dst + (size_t)(vertex[0] - begin) * 4;
        for (uint32_t i = 0; i < n; i++)
            for (int c = 0; c < 4; c++)
                o[(size_t)i * 4 + (size_t)c] += w * delta[(size_t)i * stride + (size_t)c];
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        const float *d = delta + (size_t)i * stride;
        float *o = dst + (size_t)(vertex[i] - begin) * 4;
        for (int c = 0; c < 4; c++)
            o[c] += w * d[c];
    }
}

/* Targets whose deltas one fused pass adds (more go through add_deltas). */
#define FUSED 8

/* dst[v] = src[v] + sum_k w[k] * d[k][v * stride] over the n vertices of a
 * chunk, 4 floats each: one pass for the targets that move every vertex. */
static void fused_pass(const float *restrict src, float *restrict dst, uint32_t n,
                       const float *const *d, const float *w, uint32_t nd, size_t stride) {
    if (nd == 0) {
        if (src != dst) memcpy(dst, src, (size_t)n * 4 * sizeof(float));
        return;
    }
    if (nd <= 2) { /* the common cases, as straight loops */
        const float *restrict d0 = d[0], *restrict d1 = nd == 2 ? d[1] : d[0];
        const float w0 = w[0], w1 = nd == 2 ? w[1] : 0.0f;
        for (uint32_t i = 0; i < n; i++)
            for (int c = 0; c < 4; c++) {
                size_t k = (size_t)i * stride + (size_t)c;
                dst[(size_t)i * 4 + (size_t)c] =
                    src[(size_t)i * 4 + (size_t)c] + w0 * d0[k] + w1 * d1[k];
            }
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        float acc[4];
        for (int c = 0; c < 4; c++)
            acc[c] = src[(size_t)i * 4 + (size_t)c];
        for (uint32_t k = 0; k < nd; k++)
            for (int c = 0; c < 4; c++)
                acc[c] += w[k] * d[k][(size_t)i * stride + (size_t)c];
        for (int c = 0; c < 4; c++)
            dst[(size_t)i * 4 + (size_t)c] = acc[c];
    }
}

/* One stream (offset `at` in the entries) of a chunk: src (the mesh's
 * vertices from begin) to dst, plus every active target's deltas, targets
 * in order for each vertex. Dense targets (every vertex of the chunk) are
 * summed in fused passes first, sparse ones added after; the sum's order per
 * vertex depends only on the targets, not on the chunking. */
static void morph_stream(const lmb_morph *mo, const float *w, uint32_t c, uint32_t begin,
                         uint32_t end, const float *src, float *dst, uint32_t at) {
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
        dp[nd] = mo->delta + (size_t)st[c] * mo->stride + at;
        dw[nd++] = wt;
        if (nd == FUSED) {
            fused_pass(first ? src : dst, dst, n, dp, dw, nd, mo->stride);
            first = 0;
            nd = 0;
        }
    }
    if (nd > 0 || first) fused_pass(first ? src : dst, dst, n, dp, dw, nd, mo->stride);
    for (uint32_t t = 0; t < mo->target_count; t++) {
        float wt = w[t];
        if (wt == 0.0f) continue;
        const uint32_t *st = mo->start + (size_t)t * (mo->chunks + 1);
        if (st[c + 1] - st[c] == n) continue;
        add_deltas(mo, st[c], st[c + 1], begin, wt, at, dst);
    }
}

void lmb_morph_chunk(const lmb_morph *mo, const float *w, uint32_t c, uint32_t begin, uint32_t end,
                     float *pos, float *nrm, float *tan) {
    const lmb_skin_mesh *m = mo->mesh;
    morph_stream(mo, w, c, begin, end, m->pos + (size_t)begin * 4, pos, 0);
    if (nrm) {
        if (mo->has_nrm)
            morph_stream(mo, w, c, begin, end, m->nrm + (size_t)begin * 4, nrm, 4);
        else
            memcpy(nrm, m->nrm + (size_t)begin * 4, (size_t)(end - begin) * 4 * sizeof(float));
    }
    if (tan) {
        if (mo->has_tan)
            morph_stream(mo, w, c, begin, end, m->tan + (size_t)begin * 4, tan,
                         mo->has_nrm ? 8u : 4u);
        else
            memcpy(tan, m->tan + (size_t)begin * 4, (size_t)(end - begin) * 4 * sizeof(float));
    }
}
