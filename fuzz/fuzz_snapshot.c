/* fuzz_snapshot.c: snapshot blobs (snapshot.h) through lmb_snap_check and,
 * when it accepts, every object built (lmb_snap_build_*) and used: clips
 * sampled at many times (whole poses, every track with cursors, packed
 * chunks through a decode cache, forward and backward), the dense form of
 * exact clips built and sampled, skins prepared on their skeletons, skin
 * meshes checked against their skins (permutations, joint limits).
 * Input: the blob itself (seeds: fuzz/regressions/snapshot/, written by
 * limber.snapshot.save).
 * Oracles: an accepted blob whose objects build gives, written back
 * (the dense flag aside: a request, honoured where the clip allows)
 * (lmb_snap_write_*), payloads that pass lmb_snap_check again and build
 * objects that sample to the same bits; the writer is the reader's
 * inverse. */
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "snapshot.h"

#define MAX_OBJECT_BYTES ((size_t)64 << 20)

typedef struct built {
    void *mem;
    void *obj; /* lmb_skeleton / lmb_skin / lmb_clip; NULL: not built */
    void *dense;
} built;

static void *alloc64(size_t n, void **raw) {
    *raw = calloc(1, n + 64);
    return *raw ? lmb_align_ptr(*raw, 64) : NULL;
}

/* Samples clip c into out (floats, appended at *n up to cap): poses on a
 * flat skeleton of its span, every track, packed chunks through a cache. */
static void sample_clip(const lmb_clip *c, float *out, size_t *n, size_t cap) {
    static const float times[] = {0.0f, 0.01f, 0.3f, 0.31f, 0.9f, 2.0f, 0.05f, 1e9f, -1.0f};
    uint32_t J = c->joint_span ? c->joint_span : 1;
    if (J > 512) J = 512; /* the whole span is sampled by the chunk loop below */
    void *raw = NULL;
    lmb_skeleton *s = (lmb_skeleton *)alloc64(lmb_skeleton_bytes(J), &raw);
    float *trs = (float *)malloc((size_t)J * LMB_TRS_FLOATS * sizeof(float));
    if (s && trs) {
        lmb_skeleton_place(s, J);
        for (uint32_t j = 0; j < J; j++) {
            static const float id[LMB_TRS_FLOATS] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
            s->parent[j] = j ? (uint16_t)(j - 1) : LMB_NO_PARENT;
            memcpy(s->rest + (size_t)j * LMB_TRS_FLOATS, id, sizeof id);
        }
        s->root_count = 1;
        if (c->joint_span <= J) {
            for (size_t k = 0; k < sizeof times / sizeof times[0]; k++) {
                float t = lmb_clip_time(c, (double)times[k], k & 1);
                lmb_clip_sample_pose(c, t, s, trs);
                for (size_t i = 0; i < (size_t)J * LMB_TRS_FLOATS && *n < cap; i++)
                    out[(*n)++] = trs[i];
            }
        }
    }
    free(trs);
    free(raw);
    for (uint32_t m = 0; m < c->track_count; m++) {
        lmb_cursor cur;
        memset(&cur, 0, sizeof cur);
        for (size_t k = 0; k < sizeof times / sizeof times[0]; k++) {
            float v[LMB_FLOAT_WIDTH];
            lmb_track_sample(c, c->tracks + m, lmb_clip_time(c, (double)times[k], 1), &cur, v);
            for (uint32_t i = 0; i < c->tracks[m].width && *n < cap; i++)
                out[(*n)++] = v[i];
        }
    }
    if (c->packed.streams) {
        float cache[LMB_PK_CACHE_FLOATS], chunk[80];
        for (uint32_t q = 0; q < c->packed.chunks && q < 64; q++) {
            memset(cache, 0, sizeof cache);
            for (int k = 0; k < 24; k++) {
                float pos = (float)(k < 12 ? k : 30 - k) * 0.37f;
                float last = (float)(c->packed.frames - 1);
                pos = pos < last ? pos : last;
                lmb_packed_chunk_cached(&c->packed, q, pos, cache, chunk, 8);
                for (int i = 0; i < 80 && *n < cap; i++)
                    out[(*n)++] = chunk[i];
            }
        }
    }
}

/* Builds every object of a checked blob; 0 when a clip is refused. */
static int build_all(const uint8_t *blob, built *b, uint32_t count) {
    for (uint32_t pass = 0; pass < 3; pass++) {
        for (uint32_t k = 0; k < count; k++) {
            lmb_snap_object o = lmb_snap_get_object(blob, k);
            uint32_t want = o.kind == LMB_SO_SKIN ? 1u : o.kind == LMB_SO_MESH ? 2u : 0u;
            if (want != pass || o.kind == LMB_SO_BUFFER) continue;
            size_t bytes = lmb_snap_object_bytes(blob, k);
            if (bytes == 0 || bytes > MAX_OBJECT_BYTES) return 0;
            void *mem = alloc64(bytes, &b[k].mem);
            if (!mem) return 0;
            if (o.kind == LMB_SO_SKELETON) {
                b[k].obj = lmb_snap_build_skeleton(blob, k, mem);
            } else if (o.kind == LMB_SO_MESH) {
                lmb_snap_value sv = lmb_snap_get_value(blob, o.lua);
                uint32_t skin_joints = 0;
                if (sv.tag == LMB_SV_OBJECT) {
                    if (!b[sv.v].obj) lmb_fuzz_fail("mesh %u before its skin", k);
                    skin_joints = ((const lmb_skin *)b[sv.v].obj)->joint_count;
                }
                lmb_skin_mesh *m = NULL;
                lmb_error err;
                if (lmb_snap_build_mesh(blob, k, skin_joints, mem, &m, &err) != LMB_OK) return 0;
                if (m->joint_limit > (skin_joints ? skin_joints : LMB_MAX_JOINTS))
                    lmb_fuzz_fail("mesh %u: joint limit %u over %u", k, m->joint_limit,
                                  skin_joints);
                for (uint32_t v = 0; v < m->vertex_count; v++)
                    if (m->inv[m->perm[v]] != v) lmb_fuzz_fail("mesh %u: perm and inv disagree", k);
                b[k].obj = m;
            } else if (o.kind == LMB_SO_SKIN) {
                uint32_t sk = (uint32_t)lmb_snap_get_value(blob, o.lua).v;
                if (!b[sk].obj) lmb_fuzz_fail("skin %u before its skeleton %u", k, sk);
                b[k].obj = lmb_snap_build_skin(blob, k, (const lmb_skeleton *)b[sk].obj, mem);
            } else {
                lmb_clip *c = NULL;
                lmb_error err;
                if (lmb_snap_build_clip(blob, k, mem, &c, &err) != LMB_OK) return 0;
                if (err.code != LMB_OK || !c) lmb_fuzz_fail("clip %u built without a clip", k);
                b[k].obj = c;
                size_t dense = o.n[6] ? lmb_clip_dense_bytes(c) : 0;
                if (dense > 0 && dense < MAX_OBJECT_BYTES) {
                    void *dm = NULL;
                    void *d = alloc64(dense, &dm);
                    if (d) {
                        lmb_clip_dense_build(c, d);
                        b[k].dense = dm;
                    }
                }
            }
        }
    }
    return 1;
}

static void free_all(built *b, uint32_t count) {
    for (uint32_t k = 0; k < count; k++) {
        free(b[k].mem);
        free(b[k].dense);
    }
}

int lmb_fuzz_snapshot(const uint8_t *data, size_t size) {
    lmb_error err;
    if (lmb_snap_check(data, size, &err) != LMB_OK) {
        if (err.code == LMB_OK || !err.field) lmb_fuzz_fail("refused without an error record");
        return 0;
    }
    lmb_snap_header h = lmb_snap_head(data);
    built *a = (built *)calloc((size_t)h.object_count + 1, sizeof *a);
    built *b = (built *)calloc((size_t)h.object_count + 1, sizeof *b);
    uint8_t *copy = (uint8_t *)malloc(size);
    size_t cap = 1u << 16;
    float *sa = (float *)malloc(cap * sizeof(float)), *sb = (float *)malloc(cap * sizeof(float));
    if (!a || !b || !copy || !sa || !sb || !build_all(data, a, h.object_count)) goto done;
    /* written back: every payload from its object */
    memcpy(copy, data, size);
    for (uint32_t k = 0; k < h.object_count; k++) {
        lmb_snap_object o = lmb_snap_get_object(data, k);
        uint32_t n[8];
        size_t bytes = 0;
        unsigned char *p = copy + h.data + o.off;
        if (o.kind == LMB_SO_BUFFER) continue;
        memset(p, 0, (size_t)o.bytes);
        if (o.kind == LMB_SO_SKELETON) {
            bytes = lmb_snap_skeleton_payload((const lmb_skeleton *)a[k].obj, n);
            lmb_snap_write_skeleton((const lmb_skeleton *)a[k].obj, p);
        } else if (o.kind == LMB_SO_SKIN) {
            bytes = lmb_snap_skin_payload((const lmb_skin *)a[k].obj, n);
            lmb_snap_write_skin((const lmb_skin *)a[k].obj, p);
        } else if (o.kind == LMB_SO_MESH) {
            bytes = lmb_snap_mesh_payload((const lmb_skin_mesh *)a[k].obj, n);
            lmb_snap_write_mesh((const lmb_skin_mesh *)a[k].obj, p);
        } else {
            bytes = lmb_snap_clip_payload((const lmb_clip *)a[k].obj, n);
            lmb_snap_write_clip((const lmb_clip *)a[k].obj, p);
        }
        if (o.kind == LMB_SO_CLIP) n[6] = o.n[6]; /* asks for a dense form: built if it can be */
        if (bytes != o.bytes || memcmp(n, o.n, sizeof n) != 0)
            lmb_fuzz_fail("object %u: written back with other sizes", k);
    }
    if (lmb_snap_check(copy, size, &err) != LMB_OK) lmb_fuzz_fail("written back, refused");
    if (!build_all(copy, b, h.object_count)) lmb_fuzz_fail("written back, a clip refused");
    for (uint32_t k = 0; k < h.object_count; k++) {
        lmb_snap_object o = lmb_snap_get_object(data, k);
        if (o.kind != LMB_SO_CLIP) continue;
        size_t na = 0, nb = 0;
        sample_clip((const lmb_clip *)a[k].obj, sa, &na, cap);
        sample_clip((const lmb_clip *)b[k].obj, sb, &nb, cap);
        if (na != nb || memcmp(sa, sb, na * sizeof(float)) != 0)
            lmb_fuzz_fail("object %u: written back, samples differently", k);
    }
done:
    if (a) free_all(a, h.object_count);
    if (b) free_all(b, h.object_count);
    free(a);
    free(b);
    free(copy);
    free(sa);
    free(sb);
    return 0;
}

LMB_FUZZ_ENTRY(lmb_fuzz_snapshot)
