/* snapshot.c: checking, reading and writing snapshot blobs (snapshot.h). */
#include "snapshot.h"

#include <math.h>
#include <string.h>

static const char snap_magic[8] = {'L', 'M', 'B', 'S', 'N', 'A', 'P', 0};

size_t lmb_snap_scalar_size(uint32_t type) {
    return type == LMB_SB_U8 ? 1u : type == LMB_SB_U16 ? 2u : 4u;
}

static size_t up16(size_t n) {
    return lmb_align_up(n, LMB_SNAP_ALIGN);
}

/* ---- reading (every read a memcpy: any alignment) --------------------- */

lmb_snap_header lmb_snap_head(const void *blob) {
    lmb_snap_header h;
    memcpy(&h, blob, sizeof h);
    return h;
}

#define SNAP_GET(type, name, section)                                                              \
    type name(const void *blob, uint32_t k) {                                                      \
        lmb_snap_header h = lmb_snap_head(blob);                                                   \
        type r;                                                                                    \
        memcpy(&r, (const unsigned char *)blob + h.section + (size_t)k * sizeof r, sizeof r);      \
        return r;                                                                                  \
    }
SNAP_GET(lmb_snap_value, lmb_snap_get_value, values)
SNAP_GET(lmb_snap_table, lmb_snap_get_table, tables)
SNAP_GET(lmb_snap_object, lmb_snap_get_object, objects)
#undef SNAP_GET

static lmb_snap_string get_string(const void *blob, const lmb_snap_header *h, uint32_t k) {
    lmb_snap_string s;
    memcpy(&s, (const unsigned char *)blob + h->strings + (size_t)k * sizeof s, sizeof s);
    return s;
}

const char *lmb_snap_get_string(const void *blob, uint32_t k, size_t *len) {
    lmb_snap_header h = lmb_snap_head(blob);
    lmb_snap_string s = get_string(blob, &h, k);
    *len = (size_t)s.len;
    return (const char *)blob + h.data + s.off;
}

const unsigned char *lmb_snap_payload(const void *blob, uint32_t k) {
    lmb_snap_header h = lmb_snap_head(blob);
    return (const unsigned char *)blob + h.data + lmb_snap_get_object(blob, k).off;
}

static uint32_t rd32(const unsigned char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static float rdf(const unsigned char *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}

static float f_of(uint32_t bits) {
    float v;
    memcpy(&v, &bits, 4);
    return v;
}

static uint32_t bits_of(float f) {
    uint32_t v;
    memcpy(&v, &f, 4);
    return v;
}

/* ---- payload layouts --------------------------------------------------- */

static size_t skeleton_layout(uint32_t J, size_t off[3]) {
    off[0] = 0;
    off[1] = up16((size_t)J * 2);
    off[2] = off[1] + up16((size_t)J * 40);
    return off[2] + up16((size_t)J * 64);
}

static size_t skin_layout(uint32_t K, size_t off[2]) {
    off[0] = 0;
    off[1] = up16((size_t)K * 2);
    return off[1] + up16((size_t)K * 64);
}

/* A mesh payload's arrays: 0 pos, 1 nrm, 2 tan, 3 joints, 4 weights, 5
 * perm, 6 indices (absent ones empty); SIZE_MAX when the counts do not add
 * up or the flags are out of range. */
static size_t mesh_layout(const uint32_t n[8], size_t off[7]) {
    uint64_t V = n[0], sum = 0, nj = 0, nw = 0;
    for (uint32_t k = 1; k <= 4; k++) {
        sum += n[2 + k];
        nj += (uint64_t)n[2 + k] * k;
        if (k >= 2) nw += (uint64_t)n[2 + k] * k;
    }
    if (sum != V || n[2] > 3) return SIZE_MAX;
    size_t sz[7] = {(size_t)(V * 16),
                    (n[2] & 1) ? (size_t)(V * 16) : 0,
                    (n[2] & 2) ? (size_t)(V * 16) : 0,
                    (size_t)(nj * 2),
                    (size_t)(nw * 4),
                    (size_t)(V * 4),
                    (size_t)n[1] * 4};
    size_t at = 0;
    for (int i = 0; i < 7; i++) {
        off[i] = at;
        at += up16(sz[i]);
    }
    return at;
}

/* A clip payload's arrays: 0 tracks, 1 times, 2 records, 3 block header,
 * 4 tracked, 5 streams, 6 grid times, 7 key frames, 8 ranges, 9 data; the
 * packed sizes come from the block header (read at off[3]). */
typedef struct clip_lay {
    size_t off[10], total;
    lmb_packed_sizes z;
    uint32_t packed;
} clip_lay;

#define PK_HEAD_WORDS 12u
#define STREAM_WORDS 8u
#define TRACK_WORDS 10u

/* Lays out the clip payload of parameters n; the packed part's sizes from
 * head (PK_HEAD_WORDS words; NULL when not packed). 0: out of range. */
static int clip_layout(const uint32_t n[8], const uint32_t *head, clip_lay *L) {
    memset(L, 0, sizeof *L);
    uint64_t t = n[0], keys = n[1], vals = n[2];
    if (t > (1u << 26) || n[5] > 1 || n[6] > 1) return 0;
    L->packed = n[5];
    L->off[0] = 0;
    L->off[1] = up16((size_t)(t * TRACK_WORDS * 4));
    L->off[2] = L->off[1] + up16((size_t)(keys * 4));
    L->off[3] = L->off[2] + up16((size_t)(vals * 4));
    L->total = L->off[3];
    if (!L->packed) return 1;
    L->off[4] = L->off[3] + PK_HEAD_WORDS * 4;
    if (!head) return 1;
    lmb_packed_sizes *z = &L->z;
    z->tracks = n[0], z->keys = n[1], z->values = n[2];
    z->chunks = head[0], z->frames = head[1], z->has_times = head[3];
    z->keyframes = head[4], z->range_floats = head[5], z->data_bytes = head[6];
    if (z->has_times > 1 || lmb_packed_clip_bytes(z) == 0) return 0;
    L->off[5] = L->off[4] + up16((size_t)z->chunks * 8);
    L->off[6] = L->off[5] + up16((size_t)z->chunks * 3 * STREAM_WORDS * 4);
    L->off[7] = L->off[6] + (z->has_times ? up16((size_t)z->frames * 4) : 0);
    L->off[8] = L->off[7] + up16((size_t)z->keyframes * 2);
    L->off[9] = L->off[8] + up16((size_t)z->range_floats * 4);
    L->total = L->off[9] + up16((size_t)z->data_bytes);
    return 1;
}

/* ---- checking ---------------------------------------------------------- */

static lmb_status fail(lmb_error *err, lmb_status code, const char *field, const char *detail,
                       uint32_t index, double value, double limit) {
    return lmb_error_set(err, code, field, detail, index, 0, value, limit);
}

/* Whether [off, off + count * size) lies inside the blob, 16-byte aligned. */
static int section_ok(uint64_t off, uint64_t count, uint64_t size, size_t bytes, uint64_t header) {
    if (off % LMB_SNAP_ALIGN || off < header || off > bytes) return 0;
    return count <= (bytes - off) / size;
}

static int value_ref_ok(const lmb_snap_header *h, lmb_snap_value v) {
    switch (v.tag) {
    case LMB_SV_NIL:
    case LMB_SV_FALSE:
    case LMB_SV_TRUE:
        return v.v == 0 && v.pad == 0;
    case LMB_SV_INT:
    case LMB_SV_NUM:
        return v.pad == 0;
    case LMB_SV_STR:
        return v.pad == 0 && v.v < h->string_count;
    case LMB_SV_TABLE:
        return v.pad == 0 && v.v < h->table_count;
    case LMB_SV_OBJECT:
        return v.pad == 0 && v.v < h->object_count;
    default:
        return 0;
    }
}

static int finite_floats(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(rdf(p + i * 4))) return 0;
    return 1;
}

static lmb_status check_skeleton(const unsigned char *p, uint32_t J, uint32_t k, lmb_error *err) {
    size_t off[3];
    skeleton_layout(J, off);
    for (uint32_t i = 0; i < J; i++) {
        uint16_t par;
        memcpy(&par, p + (size_t)i * 2, 2);
        if (par != LMB_NO_PARENT && par >= i)
            return fail(err, LMB_EINVAL, "objects",
                        "object {i}: skeleton joint {v} has a parent after it", k, (double)i + 1,
                        0);
        const unsigned char *rest = p + off[1] + (size_t)i * 40;
        double len = 0.0;
        for (int m = 3; m < 7; m++)
            len += (double)rdf(rest + m * 4) * (double)rdf(rest + m * 4);
        if (!finite_floats(rest, 10) || !finite_floats(p + off[2] + (size_t)i * 64, 16) ||
            !(len > 0.999 && len < 1.001))
            return fail(err, LMB_EINVAL, "objects",
                        "object {i}: skeleton joint {v}: rest pose or inverse bind is not finite, "
                        "or its rotation not unit length",
                        k, (double)i + 1, 0);
    }
    return LMB_OK;
}

lmb_status lmb_snap_check(const void *blob, size_t bytes, lmb_error *err) {
    lmb_error_clear(err);
    const unsigned char *b = (const unsigned char *)blob;
    if (bytes < sizeof(lmb_snap_header) || memcmp(b, snap_magic, 8) != 0)
        return fail(err, LMB_EINVAL, "header", "not a limber snapshot", 0, 0, 0);
    lmb_snap_header h = lmb_snap_head(blob);
    if (h.endian != LMB_SNAP_ENDIAN)
        return fail(err, LMB_EINVAL, "header",
                    h.endian == 0x04030201u
                        ? "written on a host of the other byte order"
                        : "the byte order tag is damaged (not a limber snapshot of this host)",
                    0, 0, 0);
    if (h.version > LMB_SNAP_VERSION)
        return fail(err, LMB_EINVAL, "version",
                    "snapshot version {v} is newer than this limber's ({l}): write it again with "
                    "this version",
                    0, (double)h.version, (double)LMB_SNAP_VERSION);
    if (h.version == 0)
        return fail(err, LMB_EINVAL, "version", "snapshot version 0 is not valid", 0, 0, 0);
    if (h.header_bytes != sizeof h || h.total_bytes != bytes)
        return fail(err, LMB_ESIZE, "header",
                    "the blob has {v} bytes, its header says {l} (truncated or padded)", 0,
                    (double)bytes, (double)h.total_bytes);
    if (!section_ok(h.values, h.value_count, sizeof(lmb_snap_value), bytes, sizeof h) ||
        !section_ok(h.tables, h.table_count, sizeof(lmb_snap_table), bytes, sizeof h) ||
        !section_ok(h.strings, h.string_count, sizeof(lmb_snap_string), bytes, sizeof h) ||
        !section_ok(h.objects, h.object_count, sizeof(lmb_snap_object), bytes, sizeof h) ||
        !section_ok(h.data, h.data_bytes, 1, bytes, sizeof h))
        return fail(err, LMB_ERANGE, "header", "a section lies outside the blob or is unaligned", 0,
                    0, 0);
    if (h.root >= h.value_count)
        return fail(err, LMB_ERANGE, "header", "the root value {v} is not a value", 0,
                    (double)h.root, 0);
    for (uint32_t k = 0; k < h.value_count; k++)
        if (!value_ref_ok(&h, lmb_snap_get_value(blob, k)))
            return fail(err, LMB_EINVAL, "values", "value {i}: bad tag or reference", k, 0, 0);
    if (lmb_snap_get_value(blob, h.root).tag == LMB_SV_NIL)
        return fail(err, LMB_EINVAL, "header", "the root value is nil", 0, 0, 0);
    /* tables: pairs in order, without overlap (loading is linear) */
    uint64_t next = 0;
    for (uint32_t k = 0; k < h.table_count; k++) {
        lmb_snap_table t = lmb_snap_get_table(blob, k);
        uint64_t end = (uint64_t)t.first + 2 * (uint64_t)t.pairs;
        if (t.first < next || end > h.value_count)
            return fail(err, LMB_ERANGE, "tables", "table {i}: pairs out of range or overlapping",
                        k, 0, 0);
        next = end;
        for (uint32_t i = 0; i < t.pairs; i++) {
            lmb_snap_value key = lmb_snap_get_value(blob, t.first + 2 * i);
            lmb_snap_value val = lmb_snap_get_value(blob, t.first + 2 * i + 1);
            double d;
            memcpy(&d, &key.v, sizeof d);
            if (key.tag == LMB_SV_NIL || val.tag == LMB_SV_NIL ||
                (key.tag == LMB_SV_NUM && isnan(d)))
                return fail(err, LMB_EINVAL, "tables",
                            "table {i}: a nil or NaN key, or a nil value", k, 0, 0);
        }
    }
    /* strings, then object payloads: in order inside the data section */
    next = 0;
    for (uint32_t k = 0; k < h.string_count; k++) {
        lmb_snap_string s = get_string(blob, &h, k);
        if (s.off < next || s.off > h.data_bytes || s.len > h.data_bytes - s.off)
            return fail(err, LMB_ERANGE, "strings", "string {i} out of range or overlapping", k, 0,
                        0);
        next = s.off + s.len;
    }
    for (uint32_t k = 0; k < h.object_count; k++) {
        lmb_snap_object o = lmb_snap_get_object(blob, k);
        if (o.off % LMB_SNAP_ALIGN || o.off < next || o.off > h.data_bytes ||
            o.bytes > h.data_bytes - o.off || o.lua >= h.value_count || o.side >= h.value_count ||
            o.pad)
            return fail(err, LMB_ERANGE, "objects", "object {i}: payload or data out of range", k,
                        0, 0);
        next = o.off + o.bytes;
        /* parameters a kind does not use must be zero (one blob per value) */
        uint32_t used = o.kind == LMB_SO_BUFFER                          ? 5u
                        : o.kind == LMB_SO_CLIP || o.kind == LMB_SO_MESH ? 7u
                                                                         : 1u;
        for (uint32_t i = used; i < 8; i++)
            if (o.n[i] != 0)
                return fail(err, LMB_EINVAL, "objects", "object {i}: unused parameter {v} is not 0",
                            k, (double)i + 1, 0);
        const unsigned char *p = b + h.data + o.off;
        lmb_snap_value lua = lmb_snap_get_value(blob, o.lua);
        switch (o.kind) {
        case LMB_SO_BUFFER: {
            uint64_t count = (uint64_t)o.n[2] | (uint64_t)o.n[3] << 32;
            size_t ss = lmb_snap_scalar_size(o.n[0]);
            if (o.n[0] > LMB_SB_U32 || o.n[1] == 0 || o.n[1] > 4096 || o.n[4] > 1 ||
                count > o.bytes || count * o.n[1] * ss != o.bytes)
                return fail(err, LMB_ESIZE, "objects",
                            "object {i}: buffer type, width or count does not match its bytes", k,
                            0, 0);
            break;
        }
        case LMB_SO_SKELETON: {
            size_t off[3];
            uint32_t J = o.n[0];
            if (J == 0 || J > LMB_MAX_JOINTS || skeleton_layout(J, off) != o.bytes)
                return fail(err, LMB_ESIZE, "objects",
                            "object {i}: skeleton joint count {v} does not match its bytes", k,
                            (double)J, 0);
            lmb_status st = check_skeleton(p, J, k, err);
            if (st != LMB_OK) return st;
            break;
        }
        case LMB_SO_SKIN: {
            size_t off[2];
            uint32_t K = o.n[0];
            if (K == 0 || K > LMB_MAX_JOINTS || skin_layout(K, off) != o.bytes)
                return fail(err, LMB_ESIZE, "objects",
                            "object {i}: skin joint count {v} does not match its bytes", k,
                            (double)K, 0);
            if (lua.tag != LMB_SV_OBJECT ||
                lmb_snap_get_object(blob, (uint32_t)lua.v).kind != LMB_SO_SKELETON)
                return fail(err, LMB_EINVAL, "objects", "object {i}: a skin without its skeleton",
                            k, 0, 0);
            uint32_t J = lmb_snap_get_object(blob, (uint32_t)lua.v).n[0];
            for (uint32_t i = 0; i < K; i++) {
                uint16_t j;
                memcpy(&j, p + (size_t)i * 2, 2);
                if (j >= J || !finite_floats(p + off[1] + (size_t)i * 64, 16))
                    return fail(err, LMB_EINVAL, "objects",
                                "object {i}: skin joint {v} is out of range or its inverse bind "
                                "not finite",
                                k, (double)i + 1, 0);
            }
            break;
        }
        case LMB_SO_CLIP: {
            clip_lay L;
            uint32_t head[PK_HEAD_WORDS];
            if (!clip_layout(o.n, NULL, &L) || (L.packed && o.bytes < L.off[4]))
                return fail(err, LMB_ESIZE, "objects", "object {i}: clip sizes out of range", k, 0,
                            0);
            if (L.packed) memcpy(head, p + L.off[3], sizeof head);
            if (!clip_layout(o.n, L.packed ? head : NULL, &L) || L.total != o.bytes)
                return fail(err, LMB_ESIZE, "objects",
                            "object {i}: clip sizes do not match its bytes", k, 0, 0);
            if (lua.tag != LMB_SV_TABLE)
                return fail(err, LMB_EINVAL, "objects", "object {i}: a clip without its info table",
                            k, 0, 0);
            break;
        }
        case LMB_SO_MESH: {
            size_t off[7];
            size_t need = mesh_layout(o.n, off);
            if (need != o.bytes)
                return fail(err, LMB_ESIZE, "objects",
                            "object {i}: skin mesh counts do not match its bytes", k, 0, 0);
            if (lua.tag != LMB_SV_NIL &&
                (lua.tag != LMB_SV_OBJECT ||
                 lmb_snap_get_object(blob, (uint32_t)lua.v).kind != LMB_SO_SKIN))
                return fail(err, LMB_EINVAL, "objects",
                            "object {i}: a skin mesh's data must be its skin or nil", k, 0, 0);
            break;
        }
        default:
            return fail(err, LMB_EINVAL, "objects", "object {i}: unknown kind {v}", k,
                        (double)o.kind, 0);
        }
    }
    return LMB_OK;
}

/* ---- building ---------------------------------------------------------- */

size_t lmb_snap_object_bytes(const void *blob, uint32_t k) {
    lmb_snap_object o = lmb_snap_get_object(blob, k);
    switch (o.kind) {
    case LMB_SO_SKELETON:
        return lmb_skeleton_bytes(o.n[0]);
    case LMB_SO_SKIN:
        return lmb_skin_bytes(o.n[0]);
    case LMB_SO_MESH: {
        uint32_t counts[5] = {0, o.n[3], o.n[4], o.n[5], o.n[6]};
        return lmb_skin_mesh_layout_bytes(o.n[0], o.n[1], o.n[2] & 1, (o.n[2] >> 1) & 1, counts);
    }
    case LMB_SO_CLIP: {
        clip_lay L;
        uint32_t head[PK_HEAD_WORDS];
        clip_layout(o.n, NULL, &L);
        if (!L.packed) return lmb_clip_bytes(o.n[0], o.n[1], o.n[2]);
        memcpy(head, lmb_snap_payload(blob, k) + L.off[3], sizeof head);
        clip_layout(o.n, head, &L);
        return lmb_packed_clip_bytes(&L.z);
    }
    default:
        return (size_t)o.bytes;
    }
}

lmb_skeleton *lmb_snap_build_skeleton(const void *blob, uint32_t k, void *mem) {
    lmb_snap_object o = lmb_snap_get_object(blob, k);
    const unsigned char *p = lmb_snap_payload(blob, k);
    uint32_t J = o.n[0];
    size_t off[3];
    skeleton_layout(J, off);
    lmb_skeleton *s = lmb_skeleton_place(mem, J);
    memcpy(s->parent, p, (size_t)J * 2);
    memcpy(s->rest, p + off[1], (size_t)J * 40);
    memcpy(s->inverse_bind, p + off[2], (size_t)J * 64);
    for (uint32_t i = 0; i < J; i++)
        s->root_count += s->parent[i] == LMB_NO_PARENT;
    return s;
}

lmb_skin *lmb_snap_build_skin(const void *blob, uint32_t k, const lmb_skeleton *skel, void *mem) {
    lmb_snap_object o = lmb_snap_get_object(blob, k);
    const unsigned char *p = lmb_snap_payload(blob, k);
    uint32_t K = o.n[0];
    size_t off[2];
    skin_layout(K, off);
    lmb_skin *s = lmb_skin_place(mem, skel, K);
    memcpy(s->joint, p, (size_t)K * 2);
    memcpy(s->inverse_bind, p + off[1], (size_t)K * 64);
    uint32_t bad;
    lmb_skin_prepare(s, &bad); /* checked: cannot fail */
    return s;
}

lmb_status lmb_snap_build_clip(const void *blob, uint32_t k, void *mem, lmb_clip **out,
                               lmb_error *err) {
    lmb_error_clear(err);
    lmb_snap_object o = lmb_snap_get_object(blob, k);
    const unsigned char *p = lmb_snap_payload(blob, k);
    clip_lay L;
    uint32_t head[PK_HEAD_WORDS];
    clip_layout(o.n, NULL, &L);
    lmb_clip *c;
    if (L.packed) {
        memcpy(head, p + L.off[3], sizeof head);
        clip_layout(o.n, head, &L);
        c = lmb_packed_clip_place(mem, &L.z);
        if (head[11] != 0)
            return fail(err, LMB_EINVAL, "objects", "object {i}: reserved words are not zero", k, 0,
                        0);
    } else {
        c = lmb_clip_place(mem, o.n[0], o.n[1], o.n[2]);
    }
    for (uint32_t t = 0; t < o.n[0]; t++) {
        const unsigned char *r = p + (size_t)t * TRACK_WORDS * 4;
        lmb_track *tr = c->tracks + t;
        uint32_t packed_bits = rd32(r + 4);
        tr->target = rd32(r);
        tr->path = (uint8_t)packed_bits, tr->interp = (uint8_t)(packed_bits >> 8);
        tr->width = (uint8_t)(packed_bits >> 16), tr->is_node = (uint8_t)(packed_bits >> 24);
        tr->shared = (uint8_t)rd32(r + 8);
        tr->stride = rd32(r + 12), tr->key_count = rd32(r + 16);
        tr->times = rd32(r + 20), tr->values = rd32(r + 24), tr->input = rd32(r + 28);
        tr->first = f_of(rd32(r + 32)), tr->last = f_of(rd32(r + 36));
        if (rd32(r + 8) > 3)
            return fail(err, LMB_EINVAL, "objects", "object {i}: track flags out of range", k, 0,
                        0);
    }
    memcpy(c->times, p + L.off[1], (size_t)o.n[1] * 4);
    memcpy(c->values, p + L.off[2], (size_t)o.n[2] * 4);
    c->joint_span = o.n[3];
    c->duration = f_of(o.n[4]);
    c->joint_track_count = 0; /* the leading joint tracks (lmb_clip_check checks the order) */
    while (!L.packed && c->joint_track_count < o.n[0] && !c->tracks[c->joint_track_count].is_node)
        c->joint_track_count++;
    if (L.packed) {
        lmb_packed *k2 = &c->packed;
        k2->interp = head[2];
        k2->tracked_count = head[7];
        k2->t0 = f_of(head[8]), k2->dt = f_of(head[9]), k2->inv_dt = f_of(head[10]);
        memcpy((void *)(uintptr_t)k2->tracked, p + L.off[4], (size_t)L.z.chunks * 8);
        lmb_pstream *st = (lmb_pstream *)(uintptr_t)k2->streams;
        for (uint32_t s = 0; s < L.z.chunks * 3; s++) {
            const unsigned char *r = p + L.off[5] + (size_t)s * STREAM_WORDS * 4;
            uint32_t sr = rd32(r + 16);
            st[s].data = rd32(r), st[s].range = rd32(r + 4), st[s].keys = rd32(r + 8);
            st[s].kf = rd32(r + 12);
            st[s].step = (uint16_t)sr, st[s].rec = (uint8_t)(sr >> 16);
            memcpy(st[s].kind, r + 20, 4);
            uint32_t skip = rd32(r + 24); /* (version 1 wrote 0: every lane stored) */
            st[s].skip = (uint8_t)skip;
            if (sr >> 24) /* (lmb_packed_check checks it further: at most 128) */
                return fail(err, LMB_EINVAL, "objects",
                            "object {i}: stream record size {v} is out of range", k,
                            (double)(sr >> 16), 0);
            if ((skip >> 8) | rd32(r + 28))
                return fail(err, LMB_EINVAL, "objects", "object {i}: stream padding is not zero", k,
                            0, 0);
        }
        if (L.z.has_times)
            memcpy((void *)(uintptr_t)k2->times, p + L.off[6], (size_t)L.z.frames * 4);
        memcpy((void *)(uintptr_t)k2->keyframes, p + L.off[7], (size_t)L.z.keyframes * 2);
        memcpy((void *)(uintptr_t)k2->ranges, p + L.off[8], (size_t)L.z.range_floats * 4);
        memcpy((void *)(uintptr_t)k2->data, p + L.off[9], (size_t)L.z.data_bytes);
        if (c->joint_span > (uint32_t)LMB_MAX_JOINTS)
            return fail(err, LMB_ERANGE, "objects", "object {i}: joint span out of range", k, 0, 0);
        lmb_status st2 = lmb_packed_check(c, err);
        if (st2 != LMB_OK) return st2;
    }
    lmb_status st = lmb_clip_check(c, err);
    if (st != LMB_OK) return st;
    *out = c;
    return LMB_OK;
}

lmb_status lmb_snap_build_mesh(const void *blob, uint32_t k, uint32_t skin_joints, void *mem,
                               lmb_skin_mesh **out, lmb_error *err) {
    lmb_snap_object o = lmb_snap_get_object(blob, k);
    const unsigned char *p = lmb_snap_payload(blob, k);
    size_t off[7];
    mesh_layout(o.n, off);
    uint32_t counts[5] = {0, o.n[3], o.n[4], o.n[5], o.n[6]};
    lmb_skin_mesh *m =
        lmb_skin_mesh_place(mem, o.n[0], o.n[1], o.n[2] & 1, (o.n[2] >> 1) & 1, counts);
    size_t V = m->vertex_count, nj = 0, nw = 0;
    for (uint32_t g = 1; g <= 4; g++) {
        nj += (size_t)counts[g] * g;
        if (g >= 2) nw += (size_t)counts[g] * g;
    }
    memcpy(m->pos, p + off[0], V * 16);
    if (m->nrm) memcpy(m->nrm, p + off[1], V * 16);
    if (m->tan) memcpy(m->tan, p + off[2], V * 16);
    if (nj) memcpy(m->joints, p + off[3], nj * 2);
    if (nw) memcpy(m->weights, p + off[4], nw * 4);
    if (V) memcpy(m->perm, p + off[5], V * 4);
    if (m->index_count) memcpy(m->indices, p + off[6], (size_t)m->index_count * 4);
    lmb_status st = lmb_skin_mesh_finish(m, skin_joints, err);
    if (st != LMB_OK) return st;
    *out = m;
    return LMB_OK;
}

/* ---- writing ----------------------------------------------------------- */

size_t lmb_snap_skeleton_payload(const lmb_skeleton *s, uint32_t n[8]) {
    size_t off[3];
    memset(n, 0, 8 * sizeof n[0]);
    n[0] = s->joint_count;
    return skeleton_layout(s->joint_count, off);
}

void lmb_snap_write_skeleton(const lmb_skeleton *s, unsigned char *out) {
    size_t off[3];
    uint32_t J = s->joint_count;
    skeleton_layout(J, off);
    memcpy(out, s->parent, (size_t)J * 2);
    memcpy(out + off[1], s->rest, (size_t)J * 40);
    memcpy(out + off[2], s->inverse_bind, (size_t)J * 64);
}

size_t lmb_snap_skin_payload(const lmb_skin *k, uint32_t n[8]) {
    size_t off[2];
    memset(n, 0, 8 * sizeof n[0]);
    n[0] = k->joint_count;
    return skin_layout(k->joint_count, off);
}

void lmb_snap_write_skin(const lmb_skin *k, unsigned char *out) {
    size_t off[2];
    skin_layout(k->joint_count, off);
    memcpy(out, k->joint, (size_t)k->joint_count * 2);
    memcpy(out + off[1], k->inverse_bind, (size_t)k->joint_count * 64);
}

static void clip_params(const lmb_clip *c, uint32_t n[8], uint32_t head[PK_HEAD_WORDS]) {
    memset(n, 0, 8 * sizeof n[0]);
    n[0] = c->track_count, n[1] = c->key_total, n[2] = c->value_total;
    n[3] = c->joint_span, n[4] = bits_of(c->duration);
    n[5] = c->packed.streams != NULL, n[6] = c->dense.data != NULL;
    memset(head, 0, PK_HEAD_WORDS * 4);
    if (!n[5]) return;
    const lmb_packed *p = &c->packed;
    head[0] = p->chunks, head[1] = p->frames, head[2] = p->interp, head[3] = p->times != NULL;
    head[4] = p->keyframe_count, head[5] = p->range_floats, head[6] = p->data_bytes;
    head[7] = p->tracked_count;
    head[8] = bits_of(p->t0), head[9] = bits_of(p->dt), head[10] = bits_of(p->inv_dt);
}

size_t lmb_snap_clip_payload(const lmb_clip *c, uint32_t n[8]) {
    uint32_t head[PK_HEAD_WORDS];
    clip_lay L;
    clip_params(c, n, head);
    clip_layout(n, n[5] ? head : NULL, &L);
    return L.total;
}

void lmb_snap_write_clip(const lmb_clip *c, unsigned char *out) {
    uint32_t n[8], head[PK_HEAD_WORDS];
    clip_lay L;
    clip_params(c, n, head);
    clip_layout(n, n[5] ? head : NULL, &L);
    for (uint32_t t = 0; t < c->track_count; t++) {
        const lmb_track *tr = c->tracks + t;
        uint32_t w[TRACK_WORDS] = {tr->target,
                                   (uint32_t)tr->path | (uint32_t)tr->interp << 8 |
                                       (uint32_t)tr->width << 16 | (uint32_t)tr->is_node << 24,
                                   tr->shared,
                                   tr->stride,
                                   tr->key_count,
                                   tr->times,
                                   tr->values,
                                   tr->input,
                                   bits_of(tr->first),
                                   bits_of(tr->last)};
        memcpy(out + (size_t)t * sizeof w, w, sizeof w);
    }
    memcpy(out + L.off[1], c->times, (size_t)c->key_total * 4);
    memcpy(out + L.off[2], c->values, (size_t)c->value_total * 4);
    if (!n[5]) return;
    const lmb_packed *p = &c->packed;
    memcpy(out + L.off[3], head, sizeof head);
    memcpy(out + L.off[4], p->tracked, (size_t)p->chunks * 8);
    for (uint32_t s = 0; s < p->chunks * 3; s++) {
        const lmb_pstream *st = p->streams + s;
        uint32_t w[STREAM_WORDS] = {st->data, st->range, st->keys, st->kf,
                                    (uint32_t)st->step | (uint32_t)st->rec << 16};
        memcpy(&w[5], st->kind, 4);
        w[6] = st->skip;
        memcpy(out + L.off[5] + (size_t)s * sizeof w, w, sizeof w);
    }
    if (p->times) memcpy(out + L.off[6], p->times, (size_t)p->frames * 4);
    memcpy(out + L.off[7], p->keyframes, (size_t)p->keyframe_count * 2);
    memcpy(out + L.off[8], p->ranges, (size_t)p->range_floats * 4);
    memcpy(out + L.off[9], p->data, p->data_bytes);
}

size_t lmb_snap_mesh_payload(const lmb_skin_mesh *m, uint32_t n[8]) {
    size_t off[7];
    memset(n, 0, 8 * sizeof n[0]);
    n[0] = m->vertex_count, n[1] = m->index_count;
    n[2] = (m->nrm != NULL) | (uint32_t)(m->tan != NULL) << 1;
    for (uint32_t k = 1; k <= 4; k++)
        n[2 + k] = m->count[k];
    return mesh_layout(n, off);
}

void lmb_snap_write_mesh(const lmb_skin_mesh *m, unsigned char *out) {
    uint32_t n[8];
    size_t off[7], V = m->vertex_count, nj = 0, nw = 0;
    lmb_snap_mesh_payload(m, n);
    mesh_layout(n, off);
    for (uint32_t g = 1; g <= 4; g++) {
        nj += (size_t)m->count[g] * g;
        if (g >= 2) nw += (size_t)m->count[g] * g;
    }
    if (V) memcpy(out + off[0], m->pos, V * 16);
    if (m->nrm) memcpy(out + off[1], m->nrm, V * 16);
    if (m->tan) memcpy(out + off[2], m->tan, V * 16);
    if (nj) memcpy(out + off[3], m->joints, nj * 2);
    if (nw) memcpy(out + off[4], m->weights, nw * 4);
    if (V) memcpy(out + off[5], m->perm, V * 4);
    if (m->index_count) memcpy(out + off[6], m->indices, (size_t)m->index_count * 4);
}
