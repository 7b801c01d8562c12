/* morph.h: morph targets (glTF 2.0 mesh `targets`) of an influence-sorted
 * skinned mesh, applied by the skinning kernel in the same pass.
 *
 * A morphed vertex is base + sum_t w_t * delta_t (per chunk: the targets
 * stored whole for the chunk first, then the sparse ones, each group in
 * target order; chunks are fixed per mesh, so the result does not depend on
 * the thread count, but a GPU summing in target order may differ in the
 * last bits), then skinned as usual; normals (and tangents' xyz) get their own deltas where the
 * targets have them and are renormalised after skinning.
 *
 * Storage is sparse per chunk of LMB_SKIN_CHUNK sorted vertices: where a
 * target moves at least 3/4 of a chunk's vertices it keeps all of them
 * (one straight loop), elsewhere only the vertices whose deltas are not all
 * zero, in sorted-vertex order (lmb_skin_mesh.perm), with an index of where
 * each chunk starts in that list. So a target at weight 0 costs nothing and
 * a sparse target costs in proportion to the vertices it moves:
 *     entries of target t in chunk c: [start[t * (chunks + 1) + c],
 *                                      start[t * (chunks + 1) + c + 1])
 *     entry e: sorted vertex vertex[e]; its position delta at
 *              delta[e * 4] (x y z 0: one SIMD vector), its normal delta
 *              (if has_nrm) at delta[(entry_count + e) * 4], its tangent
 *              delta (if has_tan) in the next block: each stream is one
 *              contiguous array, so a target that moves every vertex of a
 *              chunk is a straight loop (a stream a target lacks holds
 *              zeros). */
#ifndef LIMBER_MORPH_H
#define LIMBER_MORPH_H

#include "limber.h"

struct lmb_skin_mesh;

/* Targets per mesh (glTF sets no bound; faces use tens to hundreds). */
#define LMB_MORPH_MAX_TARGETS 4096u

typedef struct lmb_morph {
    const struct lmb_skin_mesh *mesh; /* the mesh the targets were built for */
    uint32_t vertex_count, target_count, chunks;
    uint32_t entry_count;
    uint32_t has_nrm, has_tan, streams; /* streams stored: 1 + has_nrm + has_tan */
    uint32_t *start;                    /* target_count * (chunks + 1) */
    uint32_t *vertex;                   /* entry_count */
    float *delta;                       /* streams * entry_count * 4 */
} lmb_morph;

/* Deltas in file order, as the binding decoded them: per target, 3 floats
 * per vertex for each stream, or NULL where the target lacks the stream
 * (tangent deltas are xyz: glTF gives no w delta). */
typedef struct lmb_morph_source {
    uint32_t vertex_count, target_count;
    const float *const *pos, *const *nrm, *const *tan; /* target_count pointers each */
} lmb_morph_source;

/* Validates a source for `mesh` and counts its non-zero entries. Rules
 * (err: index = the target, index2 = the vertex in file order):
 *   "vertices" LMB_ESIZE: vertex_count differs from the mesh's;
 *   "targets"  LMB_ERANGE: target_count not in [1, LMB_MORPH_MAX_TARGETS];
 *   "positions" / "normals" / "tangents" LMB_ENAN: a delta is NaN or
 *              infinite (value = the delta);
 *   "normals" / "tangents" LMB_EINVAL: deltas for a stream the mesh has not.
 * No side effects. */
lmb_status lmb_morph_count(const lmb_morph_source *src, const struct lmb_skin_mesh *mesh,
                           uint32_t *entries, lmb_error *err);

/* Bytes for lmb_morph_build (any alignment; 0 on overflow). */
size_t lmb_morph_bytes(const lmb_morph_source *src, uint32_t entries);

/* Lays out and fills the targets of a source lmb_morph_count accepted. */
lmb_morph *lmb_morph_build(void *mem, const lmb_morph_source *src, const struct lmb_skin_mesh *mesh,
                           uint32_t entries);

/* Whether any of the target_count weights w[] is not zero. */
int lmb_morph_active(const lmb_morph *mo, const float *w);

/* Morphed source vertices [begin, end) of chunk c (end - begin <=
 * LMB_SKIN_CHUNK) with weights w (target_count finite floats): writes 4
 * floats per vertex, vertex begin first, to pos (x y z 1), and to nrm /
 * tan when not NULL (normals x y z 0, tangents x y z w with the base's w). */
void lmb_morph_chunk(const lmb_morph *mo, const float *w, uint32_t c, uint32_t begin, uint32_t end,
                     float *pos, float *nrm, float *tan);

#endif
