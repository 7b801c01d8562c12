/* skinning.h: CPU skinning of meshes whose vertices are sorted by influence
 * count (DESIGN section 4).
 *
 * Mesh preparation (once, lmb_skin_mesh_count + lmb_skin_mesh_build):
 * vertices are stably sorted by their number of non-zero weights, 1 first,
 * then 2, 3, 4; weights are renormalised to sum to 1. The permutation is
 * kept both ways (perm[sorted] = file index, inv[file] = sorted) and the
 * index buffer is remapped. Skinned source streams are float4 per vertex,
 * 16-byte aligned, in sorted order:
 *     pos[4 * v] = x y z 1,  nrm[4 * v] = x y z 0,  tan[4 * v] = x y z w
 * Influence data is packed per group (k = 1..4 influences, group k holds
 * count[k] vertices starting at sorted index first[k]):
 *     joints[joint_off[k] + k * (v - first[k]) + i]   i < k  (skin joint slots)
 *     weights[weight_off[k] + k * (v - first[k]) + i] i < k  (none for k = 1)
 *
 * Kernel: for every group one straight loop with no per-vertex branch on
 * the count. A vertex's skin matrix is the weighted sum of its palette
 * entries; positions are transformed as points, normals and tangents as
 * vectors by the same blended matrix (as three.js and most engines do; the
 * inverse-transpose differs only when joint matrices scale non-uniformly),
 * then normalised; tangent w is copied. Palettes use either layout of
 * palette.h (mat4 columns or mat3x4 rows).
 *
 * Each vertex is computed on its own with a fixed sequence of operations,
 * so results do not depend on how a job is split into chunks or threads. */
#ifndef LIMBER_SKINNING_H
#define LIMBER_SKINNING_H

#include "limber.h"

/* Vertices per work item of a batched job. */
#define LMB_SKIN_CHUNK 1024u

typedef struct lmb_skin_mesh {
    uint32_t vertex_count;
    uint32_t index_count; /* 0 without an index buffer */
    uint32_t joint_limit; /* 1 + the largest skin joint slot used */
    uint32_t has_normals, has_tangents;
    uint32_t first[5], count[5]; /* per influence count 1..4 ([0] unused) */
    size_t joint_off[5], weight_off[5];
    float *pos, *nrm, *tan; /* vertex_count * 4 each (nrm / tan NULL when absent) */
    uint16_t *joints;
    float *weights;
    uint32_t *perm;    /* sorted -> file */
    uint32_t *inv;     /* file -> sorted */
    uint32_t *indices; /* index_count, remapped to sorted order */
    uint32_t *jbytes;  /* joints[] as byte offsets of mat4 palette entries (x 64) */
} lmb_skin_mesh;

/* Source data in file order, as the binding decoded it. */
typedef struct lmb_skin_source {
    uint32_t vertex_count, index_count;
    const float *pos;        /* 3 per vertex */
    const float *nrm;        /* 3 per vertex or NULL */
    const float *tan;        /* 4 per vertex or NULL */
    const uint32_t *joints;  /* 4 per vertex, 0-based slots (ignored where weight is 0) */
    const float *weights;    /* 4 per vertex */
    const uint32_t *indices; /* index_count or NULL */
} lmb_skin_source;

/* Counts vertices per influence count (counts[1..4]) after dropping zero
 * weights. Errors: LMB_ENAN (a weight is NaN/inf), LMB_EINVAL (a negative
 * weight, or every weight of a vertex is zero), LMB_ERANGE (a joint slot
 * with a non-zero weight is >= LMB_MAX_JOINTS, or an index >= vertex
 * count); *bad receives the vertex (or index position). */
lmb_status lmb_skin_mesh_count(const lmb_skin_source *src, uint32_t counts[5], uint32_t *bad);

/* Bytes for lmb_skin_mesh_place (any alignment). */
size_t lmb_skin_mesh_bytes(const lmb_skin_source *src, const uint32_t counts[5]);

/* Lays out and fills a mesh from a source that lmb_skin_mesh_count accepted. */
lmb_skin_mesh *lmb_skin_mesh_build(void *mem, const lmb_skin_source *src, const uint32_t counts[5]);

/* One output stream: `base` points at vertex 0 of instance 0; vertices are
 * `stride` floats apart, instances `instance_stride` floats apart. `wide`
 * allows writing 4 floats per vertex (positions get w = 1, normals w = 0);
 * tangents always write 4 (w from the source). base NULL: not written. */
typedef struct lmb_skin_stream {
    float *base;
    size_t stride, instance_stride;
    int wide;
} lmb_skin_stream;

/* A job: skin `instances` instances of one mesh. Instance i reads palette
 * `palette + i * palette_stride` (floats) and writes vertex v of each
 * stream at base + i * instance_stride + o * stride with o = v (sorted
 * order) or o = mesh->perm[v] (file order, when file_order is set). */
typedef struct lmb_skin_task {
    const lmb_skin_mesh *mesh;
    const float *palette;
    size_t palette_stride;
    int layout; /* LMB_PALETTE_MAT4 or LMB_PALETTE_MAT3X4 */
    uint32_t instances;
    int file_order;
    int full; /* see lmb_skin_range.full; never with file_order */
    lmb_skin_stream pos, nrm, tan;
} lmb_skin_task;

/* Chunks of LMB_SKIN_CHUNK sorted vertices in one instance of a task. */
static inline uint32_t lmb_skin_task_chunks(const lmb_skin_task *t) {
    return (t->mesh->vertex_count + LMB_SKIN_CHUNK - 1) / LMB_SKIN_CHUNK;
}

/* Work items of a task: instances * chunks, instance-major (item = instance *
 * chunks + chunk), so a pool thread, which claims runs of consecutive items,
 * skins neighbouring chunks of one instance: it reuses that instance's
 * palette and writes one contiguous output range, and two threads rarely
 * write the cache line two chunks share at once. Chunk-major order (all
 * instances' chunk 0, then chunk 1, ...) cost two threads about 10% of
 * their speed (docs/skinning.md). Callers keep the total below 2^32. */
static inline uint64_t lmb_skin_task_items(const lmb_skin_task *t) {
    return (uint64_t)t->instances * lmb_skin_task_chunks(t);
}

/* Runs one work item of a task (the binding checked sizes and joint slots
 * against the palette). Cannot fail. */
void lmb_skin_task_item(const lmb_skin_task *t, uint32_t item);

/* Skins sorted vertices [begin, end) of one instance. `pal` is that
 * instance's palette; out_* point at that instance's vertex 0. */
typedef struct lmb_skin_range {
    const lmb_skin_mesh *mesh;
    const float *pal;
    int layout;
    const uint32_t *map; /* NULL or mesh->perm */
    float *pos, *nrm, *tan;
    size_t pos_stride, nrm_stride, tan_stride;
    int pos_wide, nrm_wide;
    int full; /* 16-byte stores allowed for every vertex but the last of
                 the range: the 4th float is owned (wide) or written later
                 by this same call (packed float3, interleaved neighbours) */
    uint32_t begin, end;
} lmb_skin_range;

void lmb_skin_range_portable(const lmb_skin_range *r);
void lmb_skin_range_avx2(const lmb_skin_range *r);
void lmb_skin_range_avx512(const lmb_skin_range *r);

#endif
