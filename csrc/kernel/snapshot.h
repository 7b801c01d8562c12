/* snapshot.h: binary snapshots of Lua values holding limber objects.
 *
 * A snapshot is one blob: a header, then sections found by offsets from
 * the blob's start (no pointers anywhere; every offset a multiple of 16).
 * It stores a graph of values: plain tables (shared and cyclic references
 * kept), strings, numbers, booleans, and the objects of four kinds
 * (buffers, skeletons, skins, clips exact or packed, skin meshes), each with its Lua
 * data (the binding's uservalue) and, for clips, their side data (events).
 *
 *   header      lmb_snap_header (magic "LMBSNAP\0", version, an endianness
 *               tag, counts and section offsets, the root value)
 *   values      value_count lmb_snap_value (16 bytes: a tag and a payload)
 *   tables      table_count lmb_snap_table: the pairs of table k are values
 *               [first, first + 2 pairs), key then value
 *   strings     string_count lmb_snap_string (offset and length in data)
 *   objects     object_count lmb_snap_object (kind, parameters, payload)
 *   data        string bytes and object payloads, each 16-byte aligned
 *
 * Integers are stored little-endian; a blob written on a big-endian host
 * (or by another version) is refused by lmb_snap_check, which validates
 * everything a loader reads: the header, every section inside the blob,
 * every value's tag and index, table keys (not nil, not NaN), tables,
 * strings and payloads in order without overlap (so loading costs in
 * proportion to the blob), every object's parameters and payload size,
 * and skeletons and skins completely. Clips are checked as they are built
 * (lmb_snap_build_clip: lmb_clip_check and lmb_packed_check on the copy).
 * Nothing reads outside the blob.
 *
 * Object payloads (arrays in this order, each 16-byte aligned):
 *   BUFFER    n = {type, width, count low, count high, readonly}:
 *             count * width scalars of lmb_snap_scalar_size(type) bytes
 *   SKELETON  n = {J}: parent u16[J], rest f32[10 J], inverse_bind f32[16 J]
 *   SKIN      n = {K}: joint u16[K], inverse_bind f32[16 K]; its Lua data
 *             is the skeleton object (checked: joints below its count)
 *   CLIP      n = {tracks, keys, values, joint_span, duration bits, packed,
 *             dense}: tracks as u32[10] each (target, path | interp << 8 |
 *             width << 16 | is_node << 24, shared, stride, key_count,
 *             times, values, input, first bits, last bits), times
 *             f32[keys], records f32[values]; packed clips then a u32[12]
 *             block header (chunks, frames, interp, has_times,
 *             keyframe_count, range_floats, data_bytes, tracked_count, t0,
 *             dt, inv_dt bits, 0), tracked u8[8 chunks], streams u32[8]
 *             each (data, range, keys, kf, step | rec << 16, kinds, 0, 0),
 *             grid times f32[frames] (has_times), key frames u16, ranges
 *             f32, data bytes
 *   MESH      (a SkinMesh) n = {V, index_count, has_normals | has_tangents
 *             << 1, vertices with 1, 2, 3, 4 influences}: the sorted
 *             arrays pos f32[4 V], nrm f32[4 V] and tan f32[4 V] (when
 *             present), joints u16, weights f32 (groups of 2 to 4), perm
 *             u32[V], indices u32; its Lua data is its skin object or nil
 *             (checked: joints below the skin's count). */
#ifndef LIMBER_SNAPSHOT_H
#define LIMBER_SNAPSHOT_H

#include "clip.h"
#include "limber.h"
#include "palette.h"
#include "skeleton.h"
#include "skinning.h"

/* 2: a packed stream's word 6 holds its skip mask (version 1 wrote 0 there,
 * which reads as every lane stored); 3: packed rows may be V(b), a bit
 * width per joint (packed.h), which version 2 readers refuse as an unknown
 * row kind; 4: translation and scale rows may be SAME (row x's values),
 * which version 3 readers refuse likewise */
#define LMB_SNAP_VERSION 4u
#define LMB_SNAP_ENDIAN 0x01020304u
#define LMB_SNAP_ALIGN 16u

typedef struct lmb_snap_header {
    char magic[8];         /* "LMBSNAP\0" */
    uint32_t version;      /* LMB_SNAP_VERSION of the writer */
    uint32_t endian;       /* LMB_SNAP_ENDIAN as the writer stored it */
    uint32_t header_bytes; /* sizeof(lmb_snap_header) */
    uint32_t root;         /* value index of the root value */
    uint64_t total_bytes;  /* the whole blob */
    uint32_t value_count, table_count, string_count, object_count;
    uint64_t values, tables, strings, objects, data; /* section offsets */
    uint64_t data_bytes;
} lmb_snap_header;

enum {
    LMB_SV_NIL = 0, /* only as an object's absent Lua or side data */
    LMB_SV_FALSE = 1,
    LMB_SV_TRUE = 2,
    LMB_SV_INT = 3, /* v: the integer's two's complement bits */
    LMB_SV_NUM = 4, /* v: the double's bits */
    LMB_SV_STR = 5, /* v: string index */
    LMB_SV_TABLE = 6,
    LMB_SV_OBJECT = 7
};

typedef struct lmb_snap_value {
    uint32_t tag, pad;
    uint64_t v;
} lmb_snap_value;

typedef struct lmb_snap_table {
    uint32_t first, pairs;
} lmb_snap_table;

typedef struct lmb_snap_string {
    uint64_t off, len; /* in the data section */
} lmb_snap_string;

enum { LMB_SO_BUFFER = 1, LMB_SO_SKELETON = 2, LMB_SO_SKIN = 3, LMB_SO_CLIP = 4, LMB_SO_MESH = 5 };

typedef struct lmb_snap_object {
    uint32_t kind;
    uint32_t lua;  /* value index of the object's Lua data (LMB_SV_NIL: none) */
    uint32_t side; /* value index of its side data (LMB_SV_NIL: none) */
    uint32_t pad;
    uint64_t off, bytes; /* payload in the data section */
    uint32_t n[8];       /* kind parameters (above) */
} lmb_snap_object;

/* Buffer scalar types (the binding's LBUF_* values) and their sizes. */
enum { LMB_SB_F32 = 0, LMB_SB_U8 = 1, LMB_SB_U16 = 2, LMB_SB_U32 = 3 };
size_t lmb_snap_scalar_size(uint32_t type);

/* Validates a blob of `bytes` bytes (any alignment: it is read with
 * memcpy). LMB_OK, or the first problem in *err (field names the part:
 * "header", "version", "values", "tables", "strings", "objects" or the
 * object's field; index the record). A blob of a newer version is refused
 * with field "version" and the versions as value and limit. */
lmb_status lmb_snap_check(const void *blob, size_t bytes, lmb_error *err);

/* Reading a checked blob. */
lmb_snap_header lmb_snap_head(const void *blob);
lmb_snap_value lmb_snap_get_value(const void *blob, uint32_t k);
lmb_snap_table lmb_snap_get_table(const void *blob, uint32_t k);
/* String k: its bytes (inside the blob) and length. */
const char *lmb_snap_get_string(const void *blob, uint32_t k, size_t *len);
lmb_snap_object lmb_snap_get_object(const void *blob, uint32_t k);
/* Object k's payload (inside the blob). */
const unsigned char *lmb_snap_payload(const void *blob, uint32_t k);

/* Memory (any alignment) for checked object k as a kernel object. */
size_t lmb_snap_object_bytes(const void *blob, uint32_t k);
/* Builds checked object k in mem (lmb_snap_object_bytes, 64-byte
 * aligned): a skeleton; a skin of `skel` (the skeleton object its Lua data
 * names); a clip, checked on the copy (LMB_OK or the problem in *err; its
 * dense form, when n[6] asks for one, is left to lmb_clip_dense_build). */
lmb_skeleton *lmb_snap_build_skeleton(const void *blob, uint32_t k, void *mem);
lmb_skin *lmb_snap_build_skin(const void *blob, uint32_t k, const lmb_skeleton *skel, void *mem);
lmb_status lmb_snap_build_clip(const void *blob, uint32_t k, void *mem, lmb_clip **out,
                               lmb_error *err);
/* A skin mesh, checked on the copy (lmb_skin_mesh_finish; skin_joints: its
 * skin's joint count, 0 without a skin). */
lmb_status lmb_snap_build_mesh(const void *blob, uint32_t k, uint32_t skin_joints, void *mem,
                               lmb_skin_mesh **out, lmb_error *err);

/* ---- writing ---------------------------------------------------------- */

/* Payload bytes of a skeleton, skin or clip object, and the parameters
 * n[8] its record needs; lmb_snap_write_* fills the payload (out, 16-byte
 * aligned, zeroed by the caller). */
size_t lmb_snap_skeleton_payload(const lmb_skeleton *s, uint32_t n[8]);
void lmb_snap_write_skeleton(const lmb_skeleton *s, unsigned char *out);
size_t lmb_snap_skin_payload(const lmb_skin *k, uint32_t n[8]);
void lmb_snap_write_skin(const lmb_skin *k, unsigned char *out);
size_t lmb_snap_clip_payload(const lmb_clip *c, uint32_t n[8]);
void lmb_snap_write_clip(const lmb_clip *c, unsigned char *out);
size_t lmb_snap_mesh_payload(const lmb_skin_mesh *m, uint32_t n[8]);
void lmb_snap_write_mesh(const lmb_skin_mesh *m, unsigned char *out);

#endif
