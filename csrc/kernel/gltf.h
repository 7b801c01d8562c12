/* gltf.h: the binary half of the glTF 2.0 importer.
 *
 * The JSON is parsed in Lua (lua-cjson); everything that touches bytes is
 * here: GLB container chunks, base64 data: URIs, accessor decoding (every
 * component type, normalized integers, byteStride, byteOffset, matrix
 * column padding, sparse substitution) and skin weight clean-up. Every
 * offset, length and count is checked before a byte is read, with size
 * arithmetic that cannot overflow, and sizes are capped (LMB_GLTF_MAX_*) so
 * a tiny hostile file cannot ask for gigabytes.
 *
 * Functions return a status and, on failure, write a short English reason
 * into err (errlen bytes, always NUL-terminated); the binding prefixes it
 * with the location ("limber.gltf: accessors[3]: ..."). Nothing here
 * allocates: callers provide output arrays sized with the *_count helpers. */
#ifndef LIMBER_GLTF_H
#define LIMBER_GLTF_H

#include "limber.h"

/* Largest accessor element count and largest decoded accessor (bytes). */
#define LMB_GLTF_MAX_COUNT ((size_t)1 << 26)
#define LMB_GLTF_MAX_OUTPUT ((size_t)1 << 30)

/* glTF componentType values. */
enum {
    LMB_GLTF_I8 = 5120,
    LMB_GLTF_U8 = 5121,
    LMB_GLTF_I16 = 5122,
    LMB_GLTF_U16 = 5123,
    LMB_GLTF_U32 = 5125,
    LMB_GLTF_F32 = 5126
};

/* The two chunks of a GLB container; pointers into the caller's bytes.
 * bin is NULL when the file has no BIN chunk. */
typedef struct lmb_glb {
    const uint8_t *json;
    size_t json_len;
    const uint8_t *bin;
    size_t bin_len;
} lmb_glb;

/* Parses a GLB header and its chunks: magic "glTF", version 2, total length
 * equal to len, a JSON chunk first, an optional BIN chunk second, chunk
 * lengths inside the file; unknown chunk types after them are skipped. */
lmb_status lmb_glb_parse(const uint8_t *data, size_t len, lmb_glb *out, char *err, size_t errlen);

/* Upper bound of the bytes decoded from `len` base64 characters. */
static inline size_t lmb_base64_max(size_t len) {
    return len / 4 * 3 + 3;
}

/* Decodes standard base64 (A-Z a-z 0-9 + /, '=' padding only at the end).
 * Refuses any other character; *out_len receives the byte count. */
lmb_status lmb_base64_decode(const char *in, size_t len, uint8_t *out, size_t *out_len, char *err,
                             size_t errlen);

/* Where an accessor's elements are. With data == NULL the accessor has no
 * bufferView and every element is zero (sparse values may follow). */
typedef struct lmb_accessor {
    const uint8_t *data;     /* the whole buffer */
    size_t data_len;         /* buffer bytes usable (its byteLength) */
    size_t view_offset;      /* bufferView.byteOffset */
    size_t view_length;      /* bufferView.byteLength */
    size_t view_stride;      /* bufferView.byteStride, 0 = tightly packed */
    size_t offset;           /* accessor.byteOffset inside the view */
    uint32_t component_type; /* LMB_GLTF_* */
    uint32_t components;     /* 1, 2, 3, 4 (SCALAR..VEC4), 4, 9, 16 (MAT2..MAT4) */
    uint32_t is_matrix;      /* MATn: columns are padded to 4 bytes */
    uint32_t normalized;
    size_t count; /* elements */
} lmb_accessor;

/* Bytes of one element (matrix columns padded to 4-byte boundaries). */
size_t lmb_accessor_element_size(const lmb_accessor *a);

/* Checks the description and every bound. want_int: the caller needs
 * integer values (indices, joints), so float components are refused. */
lmb_status lmb_accessor_check(const lmb_accessor *a, int want_int, char *err, size_t errlen);

/* Decodes a checked accessor into count * components floats (normalized
 * integers mapped to [0, 1] or [-1, 1] as glTF says; other integers as
 * their value). Returns LMB_ENAN (element in *bad) for NaN or infinity. */
lmb_status lmb_accessor_read_f32(const lmb_accessor *a, float *out, size_t *bad);

/* Decodes a checked integer accessor into count * components uint32. */
void lmb_accessor_read_u32(const lmb_accessor *a, uint32_t *out);

/* Sparse substitution: for k < n, element idx[k] of out (count elements of
 * `components` values) is replaced by vals[k]. Indices must be strictly
 * increasing and < count (*bad = k otherwise). */
lmb_status lmb_sparse_apply_f32(float *out, size_t count, uint32_t components, const uint32_t *idx,
                                const float *vals, size_t n, size_t *bad);
lmb_status lmb_sparse_apply_u32(uint32_t *out, size_t count, uint32_t components,
                                const uint32_t *idx, const uint32_t *vals, size_t n, size_t *bad);

/* Skin influences: merges JOINTS_0/WEIGHTS_0 and optionally JOINTS_1/
 * WEIGHTS_1 (j1/w1 NULL when absent) into 4 influences per vertex: the 4
 * largest weights (ties keep the earlier influence), renormalised to sum 1.
 * A vertex whose weights are all zero gets weight 1 on its first joint.
 * Weights must be finite and >= 0 (*bad = vertex otherwise, LMB_ERANGE). *max_joint
 * receives the largest joint index of any influence, so the caller can
 * compare it with each skin that uses the mesh. */
lmb_status lmb_skin_influences(size_t count, const uint32_t *j0, const float *w0,
                               const uint32_t *j1, const float *w1, uint16_t *out_j, float *out_w,
                               uint32_t *max_joint, size_t *bad);

#endif
