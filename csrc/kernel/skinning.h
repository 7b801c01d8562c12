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
#include "morph.h"

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
    uint32_t skin_joints;    /* joints of the skin the mesh is bound to (0: no skin) */
} lmb_skin_source;

/* Validates a source and counts vertices per influence count (counts[1..4])
 * after dropping zero weights. Rules (err: index = the vertex, index2 =
 * the influence 0..3, value = the offending number):
 *   LMB_ENAN   "weights": a weight is NaN or infinite;
 *   LMB_EINVAL "weights": a weight is negative, or every weight of a
 *              vertex is zero;
 *   LMB_ERANGE "joints":  a joint slot with a non-zero weight is >=
 *              LMB_MAX_JOINTS (limit LMB_MAX_JOINTS - 1) or, with
 *              skin_joints, >= skin_joints (limit skin_joints);
 *   LMB_ERANGE "indices": an index >= vertex_count (index = the position
 *              in indices, value = the index + 1, limit = vertex_count). */
lmb_status lmb_skin_mesh_count(const lmb_skin_source *src, uint32_t counts[5], lmb_error *err);

/* Bytes for lmb_skin_mesh_place (any alignment). */
size_t lmb_skin_mesh_bytes(const lmb_skin_source *src, const uint32_t counts[5]);

/* Lays out and fills a mesh from a source that lmb_skin_mesh_count accepted. */
lmb_skin_mesh *lmb_skin_mesh_build(void *mem, const lmb_skin_source *src, const uint32_t counts[5]);

/* A mesh whose sorted arrays come from elsewhere (a snapshot): bytes for
 * its layout (any alignment), the layout (header set, arrays placed, group
 * offsets from counts[1..4], which must sum to vertex_count), and, once
 * pos / nrm / tan / joints / weights / perm / indices are filled, the
 * check that derives the rest: perm a permutation of the vertices (inv set
 * from it), joint slots below skin_joints (0: LMB_MAX_JOINTS; jbytes and
 * joint_limit set), weights finite and >= 0, indices below vertex_count.
 * LMB_OK or the problem in *err. */
size_t lmb_skin_mesh_layout_bytes(uint32_t vertex_count, uint32_t index_count, int has_normals,
                                  int has_tangents, const uint32_t counts[5]);
lmb_skin_mesh *lmb_skin_mesh_place(void *mem, uint32_t vertex_count, uint32_t index_count,
                                   int has_normals, int has_tangents, const uint32_t counts[5]);
lmb_status lmb_skin_mesh_finish(lmb_skin_mesh *m, uint32_t skin_joints, lmb_error *err);

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
    const lmb_morph *morph; /* NULL: no morph targets */
    const float *morph_w;   /* instance i's weights at morph_w + i * target_count */
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

/* Runs one work item of a task made by lmb_skin_job_task from a job that
 * lmb_skin_job_validate accepted. Cannot fail. */
void lmb_skin_task_item(const lmb_skin_task *t, uint32_t item);

/* ---- targets and jobs: validate, then run ------------------------------ */

enum { LMB_SKIN_POS = 0, LMB_SKIN_NRM = 1, LMB_SKIN_TAN = 2 };

#define LMB_SKIN_MAX_VERTICES (1u << 28)
#define LMB_SKIN_MAX_INSTANCES (1u << 24)
#define LMB_SKIN_MAX_STRIDE 4096
#define LMB_SKIN_NO_OFFSET INT64_MIN

/* Where skinned vertices go, as a caller describes it: `instances` copies
 * of `vertices` vertices, either interleaved in one buffer (vertex v of
 * all instances at buffer + v * stride, attribute k at offset[k] bytes,
 * LMB_SKIN_NO_OFFSET: not written) or in separate streams (base[k] NULL: not written;
 * width[k] floats per vertex, elements[k] vertices available). Positions
 * and normals are 12 bytes (16 in a width 4 stream), tangents 16. */
typedef struct lmb_skin_target_desc {
    int64_t vertices, instances;
    int file_order; /* write in file order (mesh->perm) instead of sorted */
    int interleaved;
    void *buffer; /* interleaved */
    size_t buffer_bytes;
    int64_t stride, offset[3];
    float *base[3]; /* separate */
    int64_t width[3];
    size_t elements[3];
} lmb_skin_target_desc;

/* A validated target. spill_ok: a 12-byte attribute may be stored with 16
 * bytes (the SIMD kernels do) because the 4 extra bytes are owned (width
 * 4) or written afterwards by this same job (a later attribute of the
 * vertex, or the next vertex's attribute at offset 0). */
typedef struct lmb_skin_target {
    uint32_t vertices, instances;
    int file_order, interleaved, spill_ok;
    lmb_skin_stream s[3];
} lmb_skin_target;

/* Checks every rule of a target description (err->field names the
 * description field):
 *   "vertices" in [1, LMB_SKIN_MAX_VERTICES], "instances" in [1,
 *   LMB_SKIN_MAX_INSTANCES];
 *   interleaved: "buffer" 4-byte aligned; "stride" a multiple of 4 in [4,
 *   LMB_SKIN_MAX_STRIDE]; each given offset ("position", "normal",
 *   "tangent") a multiple of 4 with the attribute inside the stride; at
 *   least one offset; no two attributes overlap; the buffer holds
 *   (vertices * instances - 1) * stride + the end of the last attribute;
 *   separate: at least one stream; each f32 stream of width 3 or 4
 *   ("tangents": 4), 4-byte aligned, with vertices * instances elements;
 *   no two streams write the same bytes.
 * No side effects. */
lmb_status lmb_skin_target_validate(const lmb_skin_target_desc *d, lmb_error *err);

/* Fills a target from a description lmb_skin_target_validate accepted,
 * deciding spill_ok. Cannot fail. */
void lmb_skin_target_init(lmb_skin_target *t, const lmb_skin_target_desc *d);

/* One skinning job: palette instances [first, first + count) of a palette
 * (palette_instances instances of palette_joints entries in `layout`,
 * instance 0 at `palette`) skin `mesh` into target instances [slot, slot +
 * count). mesh_skin / palette_skin: the skins the mesh and the palette
 * were made for (opaque, NULL: unknown). */
typedef struct lmb_skin_job {
    const lmb_skin_mesh *mesh;
    const void *mesh_skin, *palette_skin;
    const float *palette;
    uint32_t palette_joints, palette_instances;
    int layout;
    const lmb_skin_target *target;
    uint32_t first, count, slot;
    /* optional morph targets of the mesh: palette instance i uses weights
     * morph_w[i * target_count .. + target_count) of `weight_rows` rows */
    const lmb_morph *morph;
    const float *morph_w;
    uint32_t weight_rows;
} lmb_skin_job;

/* Checks a job: the morph targets (if any) belong to the mesh ("morph",
 * LMB_EMISMATCH), their weights have a row for every palette instance the
 * job reads ("weights", LMB_ERANGE) and those rows are finite ("weights",
 * LMB_ENAN, index = the row, index2 = the target); the skins agree (LMB_EMISMATCH), layout is a
 * palette layout, the palette has an entry for every joint slot the mesh uses
 * ("palette", value = the largest slot, limit = palette_joints), the
 * target holds the mesh's vertex count ("target"), the instance ranges
 * fit the palette ("first"/"count": index .. index2, limit = instances)
 * and the target ("slot"), the target's normal / tangent streams have
 * mesh data ("normals", "tangents"), and the work fits one call (items <
 * 2^32, "count"). No side effects. */
lmb_status lmb_skin_job_validate(const lmb_skin_job *j, lmb_error *err);

/* Checks `rows` rows of morph weights (target_count floats each): every
 * weight finite ("weights", LMB_ENAN, index = the row, index2 = the
 * target; first: the index of row 0, for the message). */
lmb_status lmb_skin_weights_check(const lmb_morph *mo, const float *w, uint32_t rows,
                                  uint32_t first, lmb_error *err);

/* The task of a validated job. Cannot fail. */
void lmb_skin_job_task(const lmb_skin_job *j, lmb_skin_task *t);

/* The bytes one stream of a task writes, for overlap checks. */
typedef struct lmb_skin_footprint {
    uintptr_t lo;
    size_t stride, size, n;
    uint32_t task, stream;
} lmb_skin_footprint;

/* Checks tasks that run together (a batch): their work items fit in
 * 2^32 (field "jobs") and no two tasks write the same bytes ("jobs",
 * index / index2 = the two tasks, field / context = their streams'
 * names). `scratch` holds 3 * n footprints. */
lmb_status lmb_skin_batch_validate(const lmb_skin_task *tasks, uint32_t n,
                                   lmb_skin_footprint *scratch, lmb_error *err);

/* Skins sorted vertices [begin, end) of one instance. `pal` is that
 * instance's palette; out_* point at that instance's vertex 0. Source
 * vertex v is read at src_pos + 4 * (v - src_base) (likewise src_nrm,
 * src_tan): the mesh's own arrays with src_base 0, or a morphed chunk. */
typedef struct lmb_skin_range {
    const lmb_skin_mesh *mesh;
    const float *src_pos, *src_nrm, *src_tan;
    uint32_t src_base;
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

/* lmb_skin_task_item with a given range kernel instead of the one the SIMD
 * level picks (the skinning benchmark times an older kernel through it:
 * examples/baselines/skin.c). */
typedef void (*lmb_skin_range_fn)(const lmb_skin_range *r);
void lmb_skin_task_item_with(const lmb_skin_task *t, uint32_t item, lmb_skin_range_fn run);

#endif
