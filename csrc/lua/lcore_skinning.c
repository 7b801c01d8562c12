/* lcore_skinning.c: Lua types SkinMesh, SkinTarget and SkinBatch, the
 * skinning calls and the module's worker pool. Every check runs before
 * anything is written. */
#include <stdlib.h>
#include <string.h>

#include "lcore.h"
#include "palette.h"
#include "skinning.h"
#include "threadpool.h"

#define SKINMESH_MT "limber.SkinMesh"
#define SKINTARGET_MT "limber.SkinTarget"
#define SKINBATCH_MT "limber.SkinBatch"
#define POOL_MT "limber.ThreadPool"
#define POOL_KEY "limber.pool"

/* ---- worker pool ------------------------------------------------------ */

/* At lua_close, objects finalized after the pool (created before the
 * module was loaded, or resurrected) may still skin: the pool is closed
 * for good, so those jobs run on the caller and no worker restarts on
 * memory the state is about to free. */
static int l_pool_gc(lua_State *L) {
    lmb_pool *p = (lmb_pool *)lmb_align_ptr(luaL_checkudata(L, 1, POOL_MT), 64);
    lmb_pool_close(p);
    return 0;
}

lmb_pool *lcore_pool(lua_State *L) {
    lua_getfield(L, LUA_REGISTRYINDEX, POOL_KEY);
    lmb_pool *p = (lmb_pool *)lmb_align_ptr(luaL_checkudata(L, -1, POOL_MT), 64);
    lua_pop(L, 1);
    return p;
}

/** core.threads([n]): the number of threads batched jobs use (the caller
 * included), after setting it to n (1 .. 65) when given, the number of
 * cores, and whether the build has threads (LIMBER_THREADS). Results do not
 * depend on the count. Always 1 in a single-threaded build. */
static int l_threads(lua_State *L) {
    lmb_pool *p = lcore_pool(L);
    if (!lua_isnoneornil(L, 1)) {
        lua_Integer n = luaL_checkinteger(L, 1);
        if (n < 1 || n > LMB_POOL_MAX_THREADS + 1)
            return luaL_argerror(L, 1,
                                 lua_pushfstring(L, "thread count %I out of range [1, %d]", n,
                                                 LMB_POOL_MAX_THREADS + 1));
        lmb_pool_set_threads(p, (uint32_t)n);
    }
    lua_pushinteger(L, lmb_pool_threads(p));
    lua_pushinteger(L, lmb_cpu_count());
#ifdef LIMBER_THREADS
    lua_pushboolean(L, 1);
#else
    lua_pushboolean(L, 0);
#endif
    return 3;
}

/* ---- SkinMesh --------------------------------------------------------- */

static lmb_skin_mesh *check_mesh(lua_State *L, int arg) {
    return (lmb_skin_mesh *)lmb_align_ptr(luaL_checkudata(L, arg, SKINMESH_MT), 64);
}

/* Scratch array in a userdata left on the stack (collected later). */
static void *scratch(lua_State *L, size_t bytes) {
    return lua_newuserdatauv(L, bytes ? bytes : 1, 0);
}

/* Reads desc[field] (at stack index `desc`) as `width` numbers per vertex
 * into a new scratch array of floats: an f32 Buffer of that width or a flat
 * table. *count receives the vertex count; NULL when the field is nil. */
static float *read_vec_stream(lua_State *L, int desc, const char *field, uint32_t width,
                              size_t *count) {
    int t = lcore_rawfield(L, desc, field);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return NULL;
    }
    float *out;
    if (t == LUA_TTABLE) {
        lua_Integer n = (lua_Integer)lcore_rawlen(L, -1);
        if (n % width != 0)
            luaL_error(L, "limber.skinning.mesh: %s has %I numbers, not a multiple of %d", field, n,
                       (int)width);
        *count = (size_t)n / width;
        out = (float *)scratch(L, (size_t)n * sizeof(float));
        lua_pushfstring(L, "limber.skinning.mesh: %s", field);
        lcore_read_floats(L, -3, lua_tostring(L, -1), 1, out, (size_t)n);
        lua_pop(L, 1);
    } else {
        lbuffer *b = (lbuffer *)luaL_testudata(L, -1, BUFFER_MT);
        if (!b || b->type != LBUF_F32 || b->width != width)
            luaL_error(L,
                       "limber.skinning.mesh: %s must be an f32 Buffer of width %d or a flat table",
                       field, (int)width);
        *count = b->count;
        out = (float *)scratch(L, b->count * width * sizeof(float));
        memcpy(out, b->data, b->count * width * sizeof(float));
    }
    lua_replace(L, -2); /* keep only the scratch */
    return out;
}

/* Reads integer data: a u8/u16/u32 Buffer of `width` (values as stored) or
 * a flat table of integers (1-based: 1 is subtracted, 0 becomes 0xFFFFFFFF
 * "unused"). */
static uint32_t *read_int_stream(lua_State *L, int desc, const char *field, uint32_t width,
                                 size_t *count) {
    int t = lcore_rawfield(L, desc, field);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return NULL;
    }
    uint32_t *out;
    if (t == LUA_TTABLE) {
        lua_Integer n = (lua_Integer)lcore_rawlen(L, -1);
        if (n % width != 0)
            luaL_error(L, "limber.skinning.mesh: %s has %I numbers, not a multiple of %d", field, n,
                       (int)width);
        *count = (size_t)n / width;
        out = (uint32_t *)scratch(L, (size_t)n * sizeof(uint32_t));
        for (lua_Integer k = 0; k < n; k++) {
            lua_rawgeti(L, -2, k + 1);
            int isint;
            lua_Integer v = lua_tointegerx(L, -1, &isint);
            lua_pop(L, 1);
            if (!isint || v < 0 || v > (lua_Integer)UINT32_MAX)
                luaL_error(L,
                           "limber.skinning.mesh: %s[%I] must be a non-negative integer (1-based)",
                           field, k + 1);
            out[k] = v == 0 ? UINT32_MAX : (uint32_t)(v - 1);
        }
    } else {
        lbuffer *b = (lbuffer *)luaL_testudata(L, -1, BUFFER_MT);
        if (!b || b->type == LBUF_F32 || b->width != width)
            luaL_error(L,
                       "limber.skinning.mesh: %s must be a u8/u16/u32 Buffer of width %d or a "
                       "flat table",
                       field, (int)width);
        *count = b->count;
        size_t n = b->count * width;
        out = (uint32_t *)scratch(L, n * sizeof(uint32_t));
        for (size_t k = 0; k < n; k++)
            out[k] = b->type == LBUF_U8    ? ((const uint8_t *)b->data)[k]
                     : b->type == LBUF_U16 ? ((const uint16_t *)b->data)[k]
                                           : ((const uint32_t *)b->data)[k];
    }
    lua_replace(L, -2);
    return out;
}

/* Weights: f32 Buffer or table as floats; u8 / u16 Buffers as normalised. */
static float *read_weights(lua_State *L, int desc, size_t *count) {
    lcore_rawfield(L, desc, "weights");
    lbuffer *b = (lbuffer *)luaL_testudata(L, -1, BUFFER_MT);
    if (b && (b->type == LBUF_U8 || b->type == LBUF_U16)) {
        if (b->width != 4) luaL_error(L, "limber.skinning.mesh: weights must have width 4");
        *count = b->count;
        /* the Buffer stays on the stack (alive) while the scratch is made */
        float *out = (float *)scratch(L, b->count * 4 * sizeof(float));
        for (size_t k = 0; k < b->count * 4; k++)
            out[k] = b->type == LBUF_U8 ? (float)((const uint8_t *)b->data)[k] / 255.0f
                                        : (float)((const uint16_t *)b->data)[k] / 65535.0f;
        lua_replace(L, -2); /* keep only the scratch */
        return out;
    }
    lua_pop(L, 1);
    return read_vec_stream(L, desc, "weights", 4, count);
}

static int count_error(lua_State *L, const char *what, size_t n, size_t V) {
    return luaL_error(L, "limber.skinning.mesh: %s has %I vertices, positions have %I", what,
                      (lua_Integer)n, (lua_Integer)V);
}

/** core.skin_mesh(desc): an immutable skinned mesh (see skinning.h and the
 * CONTRACTS: positions, normals, tangents, joints, weights, indices, skin). */
static int l_mesh_new(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    size_t V = 0, n = 0;
    float *pos = read_vec_stream(L, 1, "positions", 3, &V);
    if (!pos) return luaL_error(L, "limber.skinning.mesh: positions are required");
    if (V == 0 || V > (size_t)1 << 28)
        return luaL_error(L, "limber.skinning.mesh: vertex count %I out of range [1, %I]",
                          (lua_Integer)V, (lua_Integer)1 << 28);
    lmb_skin_source src;
    memset(&src, 0, sizeof src);
    src.vertex_count = (uint32_t)V;
    src.pos = pos;
    src.nrm = read_vec_stream(L, 1, "normals", 3, &n);
    if (src.nrm && n != V) return count_error(L, "normals", n, V);
    src.tan = read_vec_stream(L, 1, "tangents", 4, &n);
    if (src.tan && n != V) return count_error(L, "tangents", n, V);
    uint32_t *joints = read_int_stream(L, 1, "joints", 4, &n);
    if (!joints) return luaL_error(L, "limber.skinning.mesh: joints are required");
    if (n != V) return count_error(L, "joints", n, V);
    float *weights = read_weights(L, 1, &n);
    if (!weights) return luaL_error(L, "limber.skinning.mesh: weights are required");
    if (n != V) return count_error(L, "weights", n, V);
    src.joints = joints;
    src.weights = weights;
    size_t ni = 0;
    uint32_t *indices = read_int_stream(L, 1, "indices", 1, &ni);
    if (indices) {
        if (ni > UINT32_MAX) return luaL_error(L, "limber.skinning.mesh: too many indices");
        src.index_count = (uint32_t)ni;
        src.indices = indices;
    }
    /* optional skin the mesh is bound to */
    lcore_rawfield(L, 1, "skin");
    lmb_skin *skin = NULL;
    if (!lua_isnil(L, -1)) {
        skin = (lmb_skin *)luaL_testudata(L, -1, SKIN_MT);
        if (!skin) return luaL_error(L, "limber.skinning.mesh: skin must be a limber.Skin");
        skin = lcore_check_skin(L, lua_gettop(L));
    }
    int skin_idx = lua_gettop(L);

    uint32_t counts[5], bad = 0;
    lmb_status st = lmb_skin_mesh_count(&src, counts, &bad);
    switch (st) {
    case LMB_OK:
        break;
    case LMB_ENAN:
        return luaL_error(L, "limber.skinning.mesh: vertex %I: a weight is NaN or infinite",
                          (lua_Integer)bad + 1);
    case LMB_EINVAL: {
        const float *w = weights + (size_t)bad * 4;
        if (w[0] < 0 || w[1] < 0 || w[2] < 0 || w[3] < 0)
            return luaL_error(L, "limber.skinning.mesh: vertex %I: negative weight",
                              (lua_Integer)bad + 1);
        return luaL_error(L, "limber.skinning.mesh: vertex %I: every weight is zero",
                          (lua_Integer)bad + 1);
    }
    default:
        if (indices && bad < src.index_count && indices[bad] >= V)
            return luaL_error(L,
                              "limber.skinning.mesh: indices[%I] = %I out of range (%I vertices)",
                              (lua_Integer)bad + 1, (lua_Integer)indices[bad] + 1, (lua_Integer)V);
        return luaL_error(L,
                          "limber.skinning.mesh: vertex %I: joint slot out of range [0, %I] "
                          "(or missing for a non-zero weight)",
                          (lua_Integer)bad + 1, (lua_Integer)LMB_MAX_JOINTS - 1);
    }
    /* Table indices that were 0 (1-based) became UINT32_MAX: invalid. */
    if (indices)
        for (uint32_t k = 0; k < src.index_count; k++)
            if (indices[k] >= V)
                return luaL_error(L, "limber.skinning.mesh: indices[%I] out of range [1, %I]",
                                  (lua_Integer)k + 1, (lua_Integer)V);
    if (skin) {
        /* joint slots must exist in the skin */
        for (uint32_t v = 0; v < V; v++)
            for (int i = 0; i < 4; i++)
                if (weights[(size_t)v * 4 + i] != 0.0f &&
                    joints[(size_t)v * 4 + i] >= skin->joint_count)
                    return luaL_error(L,
                                      "limber.skinning.mesh: vertex %I: joint slot %I beyond the "
                                      "skin's %I joints",
                                      (lua_Integer)v + 1, (lua_Integer)joints[(size_t)v * 4 + i],
                                      (lua_Integer)skin->joint_count);
    }
    void *mem = lcore_newobject(L, lmb_skin_mesh_bytes(&src, counts), 1, SKINMESH_MT);
    lmb_skin_mesh_build(mem, &src, counts);
    lua_pushvalue(L, skin_idx);
    lua_setiuservalue(L, -2, 1);
    return 1;
}

static int l_mesh_vertex_count(lua_State *L) {
    lua_pushinteger(L, check_mesh(L, 1)->vertex_count);
    return 1;
}

/** mesh:influence_counts(): a table of the numbers of vertices with 1, 2, 3
 * and 4 influences. */
static int l_mesh_counts(lua_State *L) {
    lmb_skin_mesh *m = check_mesh(L, 1);
    lua_createtable(L, 4, 0);
    for (int k = 1; k <= 4; k++) {
        lua_pushinteger(L, m->count[k]);
        lua_rawseti(L, -2, k);
    }
    return 1;
}

/** mesh:gpu_permutation_buffer(): read-only u32 Buffer, element s (1-based) = the
 * 0-based file index of sorted vertex s. */
static int l_mesh_perm(lua_State *L) {
    lmb_skin_mesh *m = check_mesh(L, 1);
    lbuf_push_view(L, 1, m->perm, LBUF_U32, 1, m->vertex_count, 1);
    return 1;
}

/** mesh:gpu_inverse_permutation_buffer(): read-only u32 Buffer, element f (1-based)
 * = the 0-based sorted index of file vertex f. */
static int l_mesh_inv(lua_State *L) {
    lmb_skin_mesh *m = check_mesh(L, 1);
    lbuf_push_view(L, 1, m->inv, LBUF_U32, 1, m->vertex_count, 1);
    return 1;
}

/** mesh:gpu_index_buffer(): read-only u32 Buffer of the index buffer
 * remapped to sorted order (0-based, GPU-ready), or nil when the mesh has none. */
static int l_mesh_indices(lua_State *L) {
    lmb_skin_mesh *m = check_mesh(L, 1);
    if (m->index_count == 0) {
        lua_pushnil(L);
        return 1;
    }
    lbuf_push_view(L, 1, m->indices, LBUF_U32, 1, m->index_count, 1);
    return 1;
}

/** mesh:file_index(s): the 1-based file index of sorted vertex s. */
static int l_mesh_file_index(lua_State *L) {
    lmb_skin_mesh *m = check_mesh(L, 1);
    uint32_t s = lcore_check_index(L, 2, m->vertex_count, "vertex");
    lua_pushinteger(L, (lua_Integer)m->perm[s] + 1);
    return 1;
}

/** mesh:sorted_index(f): the 1-based sorted index of file vertex f. */
static int l_mesh_sorted_index(lua_State *L) {
    lmb_skin_mesh *m = check_mesh(L, 1);
    uint32_t f = lcore_check_index(L, 2, m->vertex_count, "vertex");
    lua_pushinteger(L, (lua_Integer)m->inv[f] + 1);
    return 1;
}

/** mesh:joint_limit(): 1 + the largest skin joint slot used (a palette
 * needs at least this many joints). */
static int l_mesh_joint_limit(lua_State *L) {
    lua_pushinteger(L, check_mesh(L, 1)->joint_limit);
    return 1;
}

/** mesh:index_count(), mesh:has_normals(), mesh:has_tangents(). */
static int l_mesh_index_count(lua_State *L) {
    lua_pushinteger(L, check_mesh(L, 1)->index_count);
    return 1;
}

static int l_mesh_has_normals(lua_State *L) {
    lua_pushboolean(L, (int)check_mesh(L, 1)->has_normals);
    return 1;
}

static int l_mesh_has_tangents(lua_State *L) {
    lua_pushboolean(L, (int)check_mesh(L, 1)->has_tangents);
    return 1;
}

/** mesh:skin(): the limber.Skin the mesh is bound to, or nil. */
static int l_mesh_skin(lua_State *L) {
    check_mesh(L, 1);
    lua_getiuservalue(L, 1, 1);
    return 1;
}

static int l_mesh_tostring(lua_State *L) {
    lmb_skin_mesh *m = check_mesh(L, 1);
    lua_pushfstring(L, "limber.SkinMesh(%d vertices: %d/%d/%d/%d with 1/2/3/4 influences)",
                    (int)m->vertex_count, (int)m->count[1], (int)m->count[2], (int)m->count[3],
                    (int)m->count[4]);
    return 1;
}

/* ---- SkinTarget -------------------------------------------------------- */

enum { STREAM_POS = 0, STREAM_NRM, STREAM_TAN };
static const char *const stream_names[] = {"positions", "normals", "tangents"};
static const char *const offset_names[] = {"position", "normal", "tangent"};

typedef struct ltarget {
    uint32_t vertices, instances;
    int file_order, interleaved;
    int spill_ok;         /* 16-byte stores of narrow streams land on bytes written later */
    lmb_skin_stream s[3]; /* base NULL when the stream is not written */
} ltarget;

static ltarget *check_target(lua_State *L, int arg) {
    return (ltarget *)luaL_checkudata(L, arg, SKINTARGET_MT);
}

/* Checks a Buffer used as output: writable, 4-byte scalars or bytes. */
static lbuffer *check_out_buffer(lua_State *L, int idx, const char *what) {
    lbuffer *b = (lbuffer *)luaL_testudata(L, idx, BUFFER_MT);
    if (!b) luaL_error(L, "limber.skinning.target: %s must be a limber.Buffer", what);
    if (b->readonly) luaL_error(L, "limber.skinning.target: %s is a read-only Buffer", what);
    if (b->type != LBUF_F32 && b->type != LBUF_U8)
        luaL_error(L, "limber.skinning.target: %s must be an f32 or u8 Buffer", what);
    if (((uintptr_t)b->data & 3u) != 0)
        luaL_error(L, "limber.skinning.target: %s data is not 4-byte aligned", what);
    return b;
}

/* The bytes one output stream writes: n vertices, `stride` bytes apart,
 * `size` bytes each (size <= stride), from address lo. */
typedef struct footprint {
    uintptr_t lo;
    size_t stride, size, n;
    uint32_t job, stream;
} footprint;

static uintptr_t fp_end(const footprint *f) {
    return f->lo + (f->n - 1) * f->stride + f->size;
}

static footprint stream_footprint(const lmb_skin_stream *st, int k, size_t n) {
    footprint f;
    f.lo = (uintptr_t)(void *)st->base;
    f.stride = st->stride * sizeof(float);
    f.size = k == STREAM_TAN || st->wide ? 16 : 12;
    f.n = n;
    f.job = 0;
    f.stream = (uint32_t)k;
    return f;
}

/* True when some byte is written by both streams. Equal strides (the
 * interleaved case) are compared exactly: both sets repeat with that
 * period inside the span they share, so they meet there iff one attribute
 * of a meets one of b, period for period. Other strides are compared by
 * their spans (a refusal errs on the safe side). */
static int fp_overlap(const footprint *fa, const footprint *fb) {
    footprint ca = *fa, cb = *fb;
    footprint *a = fa->lo <= fb->lo ? &ca : &cb, *b = fa->lo <= fb->lo ? &cb : &ca;
    uintptr_t ahi = fp_end(a), bhi = fp_end(b);
    if (ahi <= b->lo || bhi <= a->lo) return 0; /* disjoint spans */
    /* one vertex alone repeats with any period at least its size */
    if (a->n == 1 && b->stride >= a->size) a->stride = b->stride;
    if (b->n == 1 && a->stride >= b->size) b->stride = a->stride;
    if (a->stride != b->stride) return 1;
    /* offsets from a->lo: a writes [m s, m s + p), b writes [d + m s, d + m s + q) */
    int64_t s = (int64_t)a->stride, p = (int64_t)a->size, q = (int64_t)b->size;
    int64_t d = (int64_t)(b->lo - a->lo);
    int64_t hlo = d, hhi = (int64_t)((ahi < bhi ? ahi : bhi) - a->lo); /* shared span */
    int64_t r = d % s; /* b's attribute within a period of a: [r, r + q) */
    for (int w = 0; w < 2; w++) {
        int64_t x = r - w * s;                                  /* b's piece, unwrapped */
        int64_t lo = x > 0 ? x : 0, hi = x + q < p ? x + q : p; /* meets a's [0, p)? */
        if (lo >= hi) continue;
        if (hhi - hlo >= s) return 1; /* the shared span holds a whole period */
        int64_t m = (hlo - lo) / s;
        for (int64_t k = m - 2; k <= m + 2; k++)
            if (lo + k * s < hhi && hi + k * s > hlo) return 1;
    }
    return 0;
}

static size_t buffer_bytes(const lbuffer *b) {
    return b->count * b->width * lbuf_scalar_size(b->type);
}

/** core.skin_target(desc): where skinned vertices go, for `instances`
 * instances of `vertices` vertices (or desc.mesh's count). Separate
 * streams: desc.positions / normals / tangents = a Buffer (f32 width 3 or
 * 4; width 4 gets w written) or true (a new f32 Buffer of width 3 / 3 / 4).
 * Interleaved: desc.buffer (f32 or u8 Buffer), desc.stride (bytes per
 * vertex) and desc.position / normal / tangent (byte offsets). desc.order
 * "sorted" (default, matches mesh:indices()) or "file". */
static int l_target_new(lua_State *L) {
    static const char *const orders[] = {"sorted", "file", NULL};
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lua_Integer V = 0, N = 1;
    if (lcore_rawfield(L, 1, "mesh") != LUA_TNIL) V = check_mesh(L, 2)->vertex_count;
    lua_pop(L, 1);
    if (lcore_rawfield(L, 1, "vertices") != LUA_TNIL) {
        if (!lua_isinteger(L, -1))
            return luaL_error(L, "limber.skinning.target: vertices must be an integer");
        V = lua_tointeger(L, -1);
    }
    lua_pop(L, 1);
    if (V < 1 || V > ((lua_Integer)1 << 28))
        return luaL_error(L,
                          "limber.skinning.target: vertex count %I out of range [1, %I] (give "
                          "mesh or vertices)",
                          V, (lua_Integer)1 << 28);
    if (lcore_rawfield(L, 1, "instances") != LUA_TNIL) {
        if (!lua_isinteger(L, -1))
            return luaL_error(L, "limber.skinning.target: instances must be an integer");
        N = lua_tointeger(L, -1);
    }
    lua_pop(L, 1);
    if (N < 1 || N > (1 << 24))
        return luaL_error(L, "limber.skinning.target: instance count %I out of range [1, %I]", N,
                          (lua_Integer)(1 << 24));
    lcore_rawfield(L, 1, "order");
    int file_order = luaL_checkoption(L, -1, "sorted", orders);
    lua_pop(L, 1);
    size_t total = (size_t)V * (size_t)N; /* vertices over all instances */

    ltarget tg;
    memset(&tg, 0, sizeof tg);
    tg.vertices = (uint32_t)V;
    tg.instances = (uint32_t)N;
    tg.file_order = file_order;
    /* stack: 1 desc, 2..4 the stream buffers (or nil) */
    if (lcore_rawfield(L, 1, "buffer") != LUA_TNIL) {
        lbuffer *b = check_out_buffer(L, 2, "buffer");
        tg.interleaved = 1;
        lcore_rawfield(L, 1, "stride");
        int isint;
        lua_Integer stride = lua_tointegerx(L, -1, &isint);
        lua_pop(L, 1);
        if (!isint || stride < 4 || stride % 4 != 0 || stride > 4096)
            return luaL_error(L, "limber.skinning.target: stride must be a multiple of 4 bytes in "
                                 "[4, 4096]");
        lua_Integer off[3];
        int any = 0;
        for (int k = 0; k < 3; k++) {
            off[k] = -1;
            if (lcore_rawfield(L, 1, offset_names[k]) != LUA_TNIL) {
                lua_Integer o = lua_tointegerx(L, -1, &isint);
                lua_Integer size = k == STREAM_TAN ? 16 : 12;
                if (!isint || o < 0 || o % 4 != 0 || o + size > stride)
                    return luaL_error(L,
                                      "limber.skinning.target: %s offset must be a multiple of 4 "
                                      "in [0, %I] (stride %I)",
                                      offset_names[k], stride - size, stride);
                off[k] = o;
                any = 1;
            }
            lua_pop(L, 1);
        }
        if (!any)
            return luaL_error(L, "limber.skinning.target: give at least one of position, normal, "
                                 "tangent offsets");
        for (int a = 0; a < 3; a++)
            for (int c = a + 1; c < 3; c++)
                if (off[a] >= 0 && off[c] >= 0) {
                    lua_Integer ea = off[a] + (a == STREAM_TAN ? 16 : 12);
                    lua_Integer ec = off[c] + (c == STREAM_TAN ? 16 : 12);
                    if (off[a] < ec && off[c] < ea)
                        return luaL_error(L, "limber.skinning.target: %s and %s offsets overlap",
                                          offset_names[a], offset_names[c]);
                }
        size_t need = (total - 1) * (size_t)stride;
        lua_Integer last = 0;
        for (int k = 0; k < 3; k++)
            if (off[k] >= 0 && off[k] + (k == STREAM_TAN ? 16 : 12) > last)
                last = off[k] + (k == STREAM_TAN ? 16 : 12);
        need += (size_t)last;
        if (buffer_bytes(b) < need)
            return luaL_error(L,
                              "limber.skinning.target: buffer too small: %I bytes, need %I "
                              "(%I vertices x stride %I)",
                              (lua_Integer)buffer_bytes(b), (lua_Integer)need, (lua_Integer)total,
                              stride);
        /* A 12-byte attribute may be stored with 16 bytes when the extra 4
         * bytes are written afterwards: by a later attribute of the same
         * vertex (position, normal, tangent order) or, at the end of the
         * stride, by the next vertex's attribute at offset 0. */
        tg.spill_ok = 1;
        for (int k = 0; k < 2; k++) {
            if (off[k] < 0) continue;
            lua_Integer q = off[k] + 12;
            int ok = 0;
            for (int c = 0; c < 3; c++) {
                if (off[c] < 0) continue;
                lua_Integer size = c == STREAM_TAN ? 16 : 12;
                if (q == stride && off[c] == 0) ok = 1;
                if (q < stride && c > k && off[c] <= q && q + 4 <= off[c] + size) ok = 1;
            }
            if (!ok) tg.spill_ok = 0;
        }
        for (int k = 0; k < 3; k++) {
            if (off[k] < 0) continue;
            tg.s[k].base = (float *)(void *)((char *)b->data + off[k]);
            tg.s[k].stride = (size_t)stride / 4;
            tg.s[k].instance_stride = (size_t)V * ((size_t)stride / 4);
            tg.s[k].wide = 0;
        }
        lua_pushvalue(L, 2);
        lua_pushvalue(L, 2); /* 2, 3, 4: the buffer for every stream */
    } else {
        lua_pop(L, 1);
        int any = 0;
        tg.spill_ok = 1; /* width 3: spills onto the next vertex; width 4: owned */
        for (int k = 0; k < 3; k++) {
            int t = lcore_rawfield(L, 1, stream_names[k]); /* 2 + k */
            if (t == LUA_TNIL || (t == LUA_TBOOLEAN && !lua_toboolean(L, -1))) {
                lua_pop(L, 1);
                lua_pushnil(L);
                continue;
            }
            any = 1;
            uint32_t width;
            lbuffer *b;
            if (t == LUA_TBOOLEAN) {
                lua_pop(L, 1);
                width = k == STREAM_TAN ? 4 : 3;
                b = lbuf_push(L, LBUF_F32, width, total);
            } else {
                b = check_out_buffer(L, -1, stream_names[k]);
                if (b->type != LBUF_F32 || (b->width != 4 && (k == STREAM_TAN || b->width != 3)))
                    return luaL_error(
                        L, "limber.skinning.target: %s must be an f32 Buffer of width %s",
                        stream_names[k], k == STREAM_TAN ? "4" : "3 or 4");
                width = b->width;
                if (b->count < total)
                    return luaL_error(L,
                                      "limber.skinning.target: %s buffer too small: %I elements, "
                                      "need %I (%I instances x %I vertices)",
                                      stream_names[k], (lua_Integer)b->count, (lua_Integer)total, N,
                                      V);
            }
            tg.s[k].base = (float *)b->data;
            tg.s[k].stride = width;
            tg.s[k].instance_stride = (size_t)V * width;
            tg.s[k].wide = width == 4;
        }
        if (!any)
            return luaL_error(L, "limber.skinning.target: no output stream (give positions, "
                                 "normals or tangents, or buffer + offsets)");
        /* one stream must not write another's bytes (the same Buffer twice) */
        for (int a = 0; a < 3; a++)
            for (int c = a + 1; c < 3; c++) {
                if (!tg.s[a].base || !tg.s[c].base) continue;
                footprint fa = stream_footprint(&tg.s[a], a, total);
                footprint fc = stream_footprint(&tg.s[c], c, total);
                if (fp_overlap(&fa, &fc))
                    return luaL_error(L,
                                      "limber.skinning.target: %s and %s write the same bytes "
                                      "(the same Buffer, or overlapping ones)",
                                      stream_names[a], stream_names[c]);
            }
    }
    ltarget *t = (ltarget *)lua_newuserdatauv(L, sizeof(ltarget), 3);
    *t = tg;
    for (int k = 0; k < 3; k++) {
        lua_pushvalue(L, 2 + k);
        lua_setiuservalue(L, -2, k + 1); /* the target writes these buffers */
    }
    luaL_setmetatable(L, SKINTARGET_MT);
    return 1;
}

/** target:position_buffer() / normal_buffer() / tangent_buffer(): the
 * Buffer the stream is written to (for interleaved targets, the shared
 * buffer), or nil. */
static int target_stream(lua_State *L, int k) {
    ltarget *t = check_target(L, 1);
    if (!t->s[k].base) {
        lua_pushnil(L);
        return 1;
    }
    lua_getiuservalue(L, 1, k + 1);
    return 1;
}
static int l_target_positions(lua_State *L) {
    return target_stream(L, STREAM_POS);
}
static int l_target_normals(lua_State *L) {
    return target_stream(L, STREAM_NRM);
}
static int l_target_tangents(lua_State *L) {
    return target_stream(L, STREAM_TAN);
}

/** target:vertex_count() (per instance), target:instance_count() (also
 * #target), target:order() ("sorted" or "file"), target:layout()
 * ("separate" or "interleaved"). */
static int l_target_vertices(lua_State *L) {
    lua_pushinteger(L, check_target(L, 1)->vertices);
    return 1;
}

static int l_target_instances(lua_State *L) {
    lua_pushinteger(L, check_target(L, 1)->instances);
    return 1;
}

static int l_target_order(lua_State *L) {
    lua_pushstring(L, check_target(L, 1)->file_order ? "file" : "sorted");
    return 1;
}

static int l_target_layout(lua_State *L) {
    lua_pushstring(L, check_target(L, 1)->interleaved ? "interleaved" : "separate");
    return 1;
}

static int l_target_tostring(lua_State *L) {
    ltarget *t = check_target(L, 1);
    lua_pushfstring(L, "limber.SkinTarget(%d instances x %d vertices, %s, %s)", (int)t->instances,
                    (int)t->vertices, t->file_order ? "file" : "sorted",
                    t->interleaved ? "interleaved" : "separate");
    return 1;
}

/* ---- jobs ------------------------------------------------------------- */

/* Fills a task for palette instances [first, first + count) written to
 * target instances [slot, slot + count), after checking that the objects
 * fit. Raises naming the problem; writes nothing. */
static void make_task(lua_State *L, int mesh_arg, int pal_arg, int tg_arg, uint32_t first,
                      uint32_t count, uint32_t slot, const char *who, lmb_skin_task *task) {
    lmb_skin_mesh *m = check_mesh(L, mesh_arg);
    lpalette *pal = lcore_check_palette(L, pal_arg);
    ltarget *tg = check_target(L, tg_arg);
    lua_getiuservalue(L, mesh_arg, 1);
    if (!lua_isnil(L, -1)) {
        lua_getiuservalue(L, pal_arg, 2);
        if (!lua_rawequal(L, -1, -2))
            luaL_error(L, "%s: the palette belongs to another skin than the mesh", who);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    if (m->joint_limit > pal->joints)
        luaL_error(L,
                   "%s: the mesh uses skin joint slot %I but the palette has %I joints (slots "
                   "0 .. %I)",
                   who, (lua_Integer)m->joint_limit - 1, (lua_Integer)pal->joints,
                   (lua_Integer)pal->joints - 1);
    if (tg->vertices != m->vertex_count)
        luaL_error(L, "%s: the target holds %I vertices per instance, the mesh has %I", who,
                   (lua_Integer)tg->vertices, (lua_Integer)m->vertex_count);
    if ((uint64_t)first + count > pal->instances)
        luaL_error(L, "%s: palette instances %I .. %I out of range [1, %I]", who,
                   (lua_Integer)first + 1, (lua_Integer)first + count, (lua_Integer)pal->instances);
    if ((uint64_t)slot + count > tg->instances)
        luaL_error(L, "%s: target too small: instances %I .. %I, the target holds %I", who,
                   (lua_Integer)slot + 1, (lua_Integer)slot + count, (lua_Integer)tg->instances);
    if (tg->s[STREAM_NRM].base && !m->has_normals)
        luaL_error(L, "%s: the target wants normals but the mesh has none", who);
    if (tg->s[STREAM_TAN].base && !m->has_tangents)
        luaL_error(L, "%s: the target wants tangents but the mesh has none", who);
    uint32_t width = lmb_palette_width(pal->layout);
    memset(task, 0, sizeof *task);
    task->mesh = m;
    task->palette_stride = (size_t)pal->joints * width;
    task->palette = pal->data + (size_t)first * task->palette_stride;
    task->layout = pal->layout;
    task->instances = count;
    task->file_order = tg->file_order;
    task->full = tg->spill_ok && !tg->file_order;
    lmb_skin_stream *out[3] = {&task->pos, &task->nrm, &task->tan};
    for (int k = 0; k < 3; k++) {
        *out[k] = tg->s[k];
        if (out[k]->base) out[k]->base += (size_t)slot * tg->s[k].instance_stride;
    }
}

typedef struct skin_job {
    const lmb_skin_task *tasks;
    const uint32_t *item_end; /* prefix sums of items per task */
    uint32_t task_count;
    int simd_cap; /* the calling state's SIMD level cap */
} skin_job;

static void run_item(void *ctx, uint32_t item, uint32_t worker) {
    (void)worker;
    const skin_job *j = (const skin_job *)ctx;
    lmb_simd_use(j->simd_cap); /* workers serve one state, but run its current setting */
    uint32_t lo = 0, hi = j->task_count - 1;
    while (lo < hi) { /* first task whose end is > item */
        uint32_t mid = (lo + hi) / 2;
        if (j->item_end[mid] > item)
            hi = mid;
        else
            lo = mid + 1;
    }
    uint32_t base = lo ? j->item_end[lo - 1] : 0;
    lmb_skin_task_item(&j->tasks[lo], item - base);
}

static void run_tasks(lua_State *L, const lmb_skin_task *tasks, const uint32_t *item_end,
                      uint32_t n) {
    if (n == 0 || item_end[n - 1] == 0) return;
    skin_job job = {tasks, item_end, n, lcore_simd_cap(L)};
    lmb_pool_run(lcore_pool(L), item_end[n - 1], run_item, &job);
}

/** core.skin_run(mesh, palette, target): skins every instance of the palette
 * with the mesh into the target (same instance counts). */
static int l_skin(lua_State *L) {
    lpalette *pal = lcore_check_palette(L, 2);
    ltarget *tg = check_target(L, 3);
    check_mesh(L, 1);
    if (pal->instances != tg->instances)
        return luaL_error(L,
                          "limber.skinning.skin: mismatched instance counts: the palette has %I, "
                          "the target %I",
                          (lua_Integer)pal->instances, (lua_Integer)tg->instances);
    lmb_skin_task task;
    make_task(L, 1, 2, 3, 0, pal->instances, 0, "limber.skinning.skin", &task);
    uint64_t items = lmb_skin_task_items(&task);
    if (items > UINT32_MAX) return luaL_error(L, "limber.skinning.skin: too much work in one call");
    uint32_t end = (uint32_t)items;
    run_tasks(L, &task, &end, 1);
    return 0;
}

/* ---- SkinBatch -------------------------------------------------------- */

typedef struct lbatch {
    uint32_t count;
    lmb_skin_task *tasks;
    uint32_t *item_end;
} lbatch;

static lbatch *check_batch(lua_State *L, int arg) {
    return (lbatch *)lmb_align_ptr(luaL_checkudata(L, arg, SKINBATCH_MT), 64);
}

/* Reads an optional positive integer field; returns def when nil. */
static uint32_t opt_field(lua_State *L, int t, const char *f, uint32_t def, lua_Integer k) {
    uint32_t v = def;
    if (lcore_rawfield(L, t, f) != LUA_TNIL) {
        int isint;
        lua_Integer x = lua_tointegerx(L, -1, &isint);
        if (!isint || x < 1 || x > (lua_Integer)UINT32_MAX)
            luaL_error(L, "limber.skinning.batch: job %I: %s must be a positive integer", k, f);
        v = (uint32_t)x;
    }
    lua_pop(L, 1);
    return v;
}

typedef struct slot_range {
    const void *target;
    uint32_t slot, count, job;
} slot_range;

static int cmp_range(const void *a, const void *b) {
    const slot_range *x = (const slot_range *)a, *y = (const slot_range *)b;
    if (x->target != y->target) return (uintptr_t)x->target < (uintptr_t)y->target ? -1 : 1;
    if (x->slot != y->slot) return x->slot < y->slot ? -1 : 1;
    return x->job < y->job ? -1 : x->job > y->job;
}

static int cmp_footprint(const void *a, const void *b) {
    const footprint *x = (const footprint *)a, *y = (const footprint *)b;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    if (x->job != y->job) return x->job < y->job ? -1 : 1;
    return x->stream < y->stream ? -1 : x->stream > y->stream;
}

/** core.skin_batch(jobs): a prepared list of skinning jobs run together by
 * batch:run(). Each job is {mesh = , palette = , target = , first = 1
 * (palette instance), count = (to the palette's end), slot = first (target
 * instance)}. Meshes, palettes and targets may differ per job. */
static int l_batch_new(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lua_Integer n = lcore_rawlen(L, 1);
    if (n < 1 || n > (1 << 20))
        return luaL_argerror(
            L, 1,
            lua_pushfstring(L, "job count %I out of range [1, %I]", n, (lua_Integer)(1 << 20)));
    size_t bytes = lmb_align_up(sizeof(lbatch), 64) + (size_t)n * sizeof(lmb_skin_task) +
                   (size_t)n * sizeof(uint32_t);
    lbatch *b = (lbatch *)lcore_newobject(L, bytes, 1, SKINBATCH_MT); /* 2 */
    b->tasks = (lmb_skin_task *)(void *)((char *)b + lmb_align_up(sizeof(lbatch), 64));
    b->item_end = (uint32_t *)(void *)(b->tasks + n);
    lua_createtable(L, (int)n * 3, 0); /* 3: anchors */
    slot_range *ranges = (slot_range *)lua_newuserdatauv(L, (size_t)n * sizeof(slot_range), 0);
    lua_insert(L, 1); /* scratch below the arguments: 1 scratch, 2 jobs, 3 batch, 4 anchors */
    uint64_t items = 0;
    for (lua_Integer k = 1; k <= n; k++) {
        if (lua_rawgeti(L, 2, k) != LUA_TTABLE) /* 5 */
            return luaL_error(L, "limber.skinning.batch: job %I is not a table", k);
        lcore_rawfield(L, 5, "mesh");    /* 6 */
        lcore_rawfield(L, 5, "palette"); /* 7 */
        lcore_rawfield(L, 5, "target");  /* 8 */
        if (!luaL_testudata(L, 6, SKINMESH_MT))
            return luaL_error(L, "limber.skinning.batch: job %I: mesh must be a limber.SkinMesh",
                              k);
        if (!luaL_testudata(L, 7, PALETTE_MT))
            return luaL_error(L, "limber.skinning.batch: job %I: palette must be a limber.Palette",
                              k);
        if (!luaL_testudata(L, 8, SKINTARGET_MT))
            return luaL_error(
                L, "limber.skinning.batch: job %I: target must be a limber.SkinTarget", k);
        lpalette *pal = lcore_check_palette(L, 7);
        uint32_t first = opt_field(L, 5, "first", 1, k);
        if (first > pal->instances)
            return luaL_error(L, "limber.skinning.batch: job %I: first %I out of range [1, %I]", k,
                              (lua_Integer)first, (lua_Integer)pal->instances);
        uint32_t count = opt_field(L, 5, "count", pal->instances - first + 1, k);
        uint32_t slot = opt_field(L, 5, "slot", first, k);
        lua_pushfstring(L, "limber.skinning.batch: job %I", k); /* 9 */
        make_task(L, 6, 7, 8, first - 1, count, slot - 1, lua_tostring(L, 9), &b->tasks[k - 1]);
        ranges[k - 1].target = lua_touserdata(L, 8);
        ranges[k - 1].slot = slot - 1;
        ranges[k - 1].count = count;
        ranges[k - 1].job = (uint32_t)k;
        items += lmb_skin_task_items(&b->tasks[k - 1]);
        if (items > UINT32_MAX)
            return luaL_error(L, "limber.skinning.batch: too much work in one batch");
        b->item_end[k - 1] = (uint32_t)items;
        for (int a = 0; a < 3; a++) {
            lua_pushvalue(L, 6 + a);
            lua_rawseti(L, 4, (k - 1) * 3 + a + 1);
        }
        lua_settop(L, 4);
    }
    /* Jobs writing the same target instances would race: results would
     * depend on thread timing. */
    qsort(ranges, (size_t)n, sizeof *ranges, cmp_range);
    for (lua_Integer k = 1; k < n; k++) {
        const slot_range *x = &ranges[k - 1], *y = &ranges[k];
        if (x->target == y->target && (uint64_t)x->slot + x->count > y->slot)
            return luaL_error(L,
                              "limber.skinning.batch: jobs %I and %I write the same target "
                              "instance %I",
                              (lua_Integer)(x->job < y->job ? x->job : y->job),
                              (lua_Integer)(x->job < y->job ? y->job : x->job),
                              (lua_Integer)y->slot + 1);
    }
    /* Nor may two jobs write the same bytes through different targets (two
     * targets on one Buffer): compare the bytes each stream of each job
     * writes, sorted by first address. */
    footprint *fp = (footprint *)lua_newuserdatauv(L, (size_t)n * 3 * sizeof(footprint), 0);
    size_t nf = 0;
    for (lua_Integer k = 0; k < n; k++) {
        const lmb_skin_task *t = &b->tasks[k];
        const lmb_skin_stream *st[3] = {&t->pos, &t->nrm, &t->tan};
        for (int a = 0; a < 3; a++) {
            if (!st[a]->base || t->instances == 0) continue;
            fp[nf] = stream_footprint(st[a], a, (size_t)t->instances * t->mesh->vertex_count);
            fp[nf].job = (uint32_t)k + 1;
            nf++;
        }
    }
    qsort(fp, nf, sizeof *fp, cmp_footprint);
    for (size_t i = 0; i < nf; i++) {
        uintptr_t end = fp_end(&fp[i]);
        for (size_t j = i + 1; j < nf && fp[j].lo < end; j++)
            if (fp_overlap(&fp[i], &fp[j])) {
                const footprint *x = fp[i].job <= fp[j].job ? &fp[i] : &fp[j];
                const footprint *y = x == &fp[i] ? &fp[j] : &fp[i];
                return luaL_error(L,
                                  "limber.skinning.batch: jobs %I and %I write the same bytes "
                                  "(%s of job %I, %s of job %I: their targets share a Buffer)",
                                  (lua_Integer)x->job, (lua_Integer)y->job, stream_names[x->stream],
                                  (lua_Integer)x->job, stream_names[y->stream],
                                  (lua_Integer)y->job);
            }
    }
    lua_pop(L, 1);
    b->count = (uint32_t)n;
    lua_setiuservalue(L, 3, 1); /* the batch reads meshes, palettes and targets */
    return 1;
}

/** batch:run(): skins every job (in parallel on the worker pool). */
static int l_batch_run(lua_State *L) {
    lbatch *b = check_batch(L, 1);
    run_tasks(L, b->tasks, b->item_end, b->count);
    return 0;
}

/** batch:job_count() (also #batch). */
static int l_batch_len(lua_State *L) {
    lua_pushinteger(L, check_batch(L, 1)->count);
    return 1;
}

static int l_batch_tostring(lua_State *L) {
    lua_pushfstring(L, "limber.SkinBatch(%d jobs)", (int)check_batch(L, 1)->count);
    return 1;
}

/* ---- registration ----------------------------------------------------- */

void lcore_open_skinning(lua_State *L) {
    static const luaL_Reg mesh_methods[] = {{"vertex_count", l_mesh_vertex_count},
                                            {"index_count", l_mesh_index_count},
                                            {"has_normals", l_mesh_has_normals},
                                            {"has_tangents", l_mesh_has_tangents},
                                            {"influence_counts", l_mesh_counts},
                                            {"gpu_permutation_buffer", l_mesh_perm},
                                            {"gpu_inverse_permutation_buffer", l_mesh_inv},
                                            {"gpu_index_buffer", l_mesh_indices},
                                            {"file_index", l_mesh_file_index},
                                            {"sorted_index", l_mesh_sorted_index},
                                            {"joint_limit", l_mesh_joint_limit},
                                            {"skin", l_mesh_skin},
                                            {NULL, NULL}};
    static const luaL_Reg mesh_meta[] = {
        {"__len", l_mesh_vertex_count}, {"__tostring", l_mesh_tostring}, {NULL, NULL}};
    static const luaL_Reg target_methods[] = {{"position_buffer", l_target_positions},
                                              {"normal_buffer", l_target_normals},
                                              {"tangent_buffer", l_target_tangents},
                                              {"vertex_count", l_target_vertices},
                                              {"instance_count", l_target_instances},
                                              {"order", l_target_order},
                                              {"layout", l_target_layout},
                                              {NULL, NULL}};
    static const luaL_Reg target_meta[] = {
        {"__len", l_target_instances}, {"__tostring", l_target_tostring}, {NULL, NULL}};
    static const luaL_Reg batch_methods[] = {
        {"run", l_batch_run}, {"job_count", l_batch_len}, {NULL, NULL}};
    static const luaL_Reg batch_meta[] = {
        {"__len", l_batch_len}, {"__tostring", l_batch_tostring}, {NULL, NULL}};
    static const luaL_Reg pool_meta[] = {{"__gc", l_pool_gc}, {NULL, NULL}};
    static const luaL_Reg funcs[] = {
        {"skinning_mesh", l_mesh_new}, {"skinning_target", l_target_new},
        {"skinning_run", l_skin},      {"skinning_batch", l_batch_new},
        {"threads", l_threads},        {NULL, NULL}};
    lcore_class(L, SKINMESH_MT, mesh_meta, mesh_methods);
    lcore_class(L, SKINTARGET_MT, target_meta, target_methods);
    lcore_class(L, SKINBATCH_MT, batch_meta, batch_methods);
    luaL_newmetatable(L, POOL_MT);
    luaL_setfuncs(L, pool_meta, 0);
    lua_pop(L, 1);
    /* One pool per Lua state, kept in the registry: its __gc joins the
     * workers when the state closes. Created once even if the module is
     * loaded again. */
    if (lua_getfield(L, LUA_REGISTRYINDEX, POOL_KEY) == LUA_TNIL) {
        void *mem = lcore_newobject(L, lmb_pool_bytes(), 0, POOL_MT);
        lmb_pool_init(mem, lmb_cpu_count());
        lua_setfield(L, LUA_REGISTRYINDEX, POOL_KEY);
    }
    lua_pop(L, 1);
    luaL_setfuncs(L, funcs, 0);
}
