/* lcore_skinning.c: Lua types SkinMesh, SkinTarget and SkinBatch, the
 * skinning calls and the module's worker pool. Every check runs before
 * anything is written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lcore.h"
#include "palette.h"
#include "skinning.h"
#include "threadpool.h"

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
static float *read_vec_stream_as(lua_State *L, const char *who, int desc, const char *field,
                                 uint32_t width, size_t *count) {
    int t = lcore_rawfield(L, desc, field);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return NULL;
    }
    float *out;
    if (t == LUA_TTABLE) {
        lua_Integer n = (lua_Integer)lcore_rawlen(L, -1);
        if (n % width != 0)
            luaL_error(L, "%s: %s has %I numbers, not a multiple of %d", who, field, n, (int)width);
        *count = (size_t)n / width;
        out = (float *)scratch(L, (size_t)n * sizeof(float));
        lua_pushfstring(L, "%s: %s", who, field);
        lcore_read_floats(L, -3, lua_tostring(L, -1), 1, out, (size_t)n);
        lua_pop(L, 1);
    } else {
        lbuffer *b = (lbuffer *)luaL_testudata(L, -1, BUFFER_MT);
        if (!b || b->type != LBUF_F32 || b->width != width)
            luaL_error(L, "%s: %s must be an f32 Buffer of width %d or a flat table", who, field,
                       (int)width);
        *count = b->count;
        out = (float *)scratch(L, b->count * width * sizeof(float));
        memcpy(out, b->data, b->count * width * sizeof(float));
    }
    lua_replace(L, -2); /* keep only the scratch */
    return out;
}

static float *read_vec_stream(lua_State *L, int desc, const char *field, uint32_t width,
                              size_t *count) {
    return read_vec_stream_as(L, "limber.skinning.mesh", desc, field, width, count);
}

/* An index stream (joint slots, vertex indices) from one of two fields:
 * `field`, a flat table of 1-based indices (0 = no joint), or "gpu_" ..
 * field, a u8/u16/u32 Buffer of 0-based ones as a GPU (and glTF) stores
 * them. One field, one index base: a Buffer in `field` or a table in the
 * gpu_ field is an error that names the other. Decoded 0-based; a table's 0
 * (no joint) becomes 0xFFFFFFFF "unused". */
static uint32_t *read_int_stream(lua_State *L, int desc, const char *field, uint32_t width,
                                 size_t *count) {
    char gpu[32];
    snprintf(gpu, sizeof gpu, "gpu_%s", field);
    int t = lcore_rawfield(L, desc, field);
    int tg = lcore_rawfield(L, desc, gpu);
    if (t != LUA_TNIL && tg != LUA_TNIL)
        luaL_error(L,
                   "limber.skinning.mesh: give %s (1-based table) or %s (0-based Buffer), not both",
                   field, gpu);
    if (t == LUA_TNIL && tg == LUA_TNIL) {
        lua_pop(L, 2);
        return NULL;
    }
    uint32_t *out;
    if (t != LUA_TNIL) {
        lua_pop(L, 1); /* the nil gpu_ field */
        if (t != LUA_TTABLE)
            luaL_error(L,
                       "limber.skinning.mesh: %s must be a flat table of 1-based indices (a Buffer "
                       "of 0-based ones goes in %s)",
                       field, gpu);
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
        lua_remove(L, -2); /* the nil table field */
        lbuffer *b = (lbuffer *)luaL_testudata(L, -1, BUFFER_MT);
        if (!b || b->type == LBUF_F32 || b->width != width)
            luaL_error(L,
                       "limber.skinning.mesh: %s must be a u8/u16/u32 Buffer of width %d (0-based; "
                       "a table of 1-based indices goes in %s)",
                       gpu, (int)width, field);
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

/** core.skinning_mesh(desc): an immutable skinned mesh (see skinning.h and
 * docs/api.luadoc: positions, normals, tangents, joints or gpu_joints,
 * weights, indices or gpu_indices, skin). */
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
    if (!joints) return luaL_error(L, "limber.skinning.mesh: joints (or gpu_joints) are required");
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

    src.skin_joints = skin ? skin->joint_count : 0;
    uint32_t counts[5];
    lmb_error err;
    if (lmb_skin_mesh_count(&src, counts, &err) != LMB_OK)
        return lcore_raise(L, &err, "limber.skinning.mesh");
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

enum { STREAM_POS = LMB_SKIN_POS, STREAM_NRM = LMB_SKIN_NRM, STREAM_TAN = LMB_SKIN_TAN };
static const char *const stream_names[] = {"positions", "normals", "tangents"};
static const char *const offset_names[] = {"position", "normal", "tangent"};

/* A SkinTarget userdata: the kernel's validated target; user values 1..3
 * hold the Buffers the streams write. */
typedef lmb_skin_target ltarget;

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
    return b;
}

static size_t buffer_bytes(const lbuffer *b) {
    return b->count * b->width * lbuf_scalar_size(b->type);
}

/* Reads desc[field] as an integer (absent: def); raises naming it. */
static int64_t int_field(lua_State *L, const char *field, int64_t def) {
    int64_t v = def;
    if (lcore_rawfield(L, 1, field) != LUA_TNIL) {
        int isint;
        v = (int64_t)lua_tointegerx(L, -1, &isint);
        if (!isint) luaL_error(L, "limber.skinning.target: %s must be an integer", field);
    }
    lua_pop(L, 1);
    return v;
}

/** core.skin_target(desc): where skinned vertices go, for `instances`
 * instances of `vertices` vertices (or desc.mesh's count). Separate
 * streams: desc.positions / normals / tangents = a Buffer (f32 width 3 or
 * 4; width 4 gets w written) or true (a new f32 Buffer of width 3 / 3 / 4).
 * Interleaved: desc.buffer (f32 or u8 Buffer), desc.stride (bytes per
 * vertex) and desc.position / normal / tangent (byte offsets). desc.order
 * "sorted" (default, matches mesh:indices()) or "file". The rules are the
 * kernel's (lmb_skin_target_validate). */
static int l_target_new(lua_State *L) {
    static const char *const orders[] = {"sorted", "file", NULL};
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lmb_skin_target_desc d;
    memset(&d, 0, sizeof d);
    if (lcore_rawfield(L, 1, "mesh") != LUA_TNIL) d.vertices = check_mesh(L, 2)->vertex_count;
    lua_pop(L, 1);
    d.vertices = int_field(L, "vertices", d.vertices);
    d.instances = int_field(L, "instances", 1);
    lcore_rawfield(L, 1, "order");
    d.file_order = luaL_checkoption(L, -1, "sorted", orders);
    lua_pop(L, 1);
    lmb_error err;
    /* counts first: the streams created for `true` need them */
    if (lmb_skin_target_validate(&d, &err) != LMB_OK &&
        (strcmp(err.field, "vertices") == 0 || strcmp(err.field, "instances") == 0))
        return lcore_raise(L, &err, "limber.skinning.target");
    size_t total = (size_t)d.vertices * (size_t)d.instances;
    /* stack: 1 desc, 2..4 the Buffer each stream writes (or nil) */
    if (lcore_rawfield(L, 1, "buffer") != LUA_TNIL) {
        lbuffer *b = check_out_buffer(L, 2, "buffer");
        d.interleaved = 1;
        d.buffer = b->data;
        d.buffer_bytes = buffer_bytes(b);
        d.stride = int_field(L, "stride", 0);
        for (int k = 0; k < 3; k++) {
            d.offset[k] = int_field(L, offset_names[k], LMB_SKIN_NO_OFFSET);
        }
        lua_pushvalue(L, 2);
        lua_pushvalue(L, 2); /* 2, 3, 4: the buffer for every stream */
    } else {
        lua_pop(L, 1);
        for (int k = 0; k < 3; k++) {
            int t = lcore_rawfield(L, 1, stream_names[k]); /* 2 + k */
            if (t == LUA_TNIL || (t == LUA_TBOOLEAN && !lua_toboolean(L, -1))) {
                lua_pop(L, 1);
                lua_pushnil(L);
                continue;
            }
            lbuffer *b;
            if (t == LUA_TBOOLEAN) {
                lua_pop(L, 1);
                b = lbuf_push(L, LBUF_F32, k == STREAM_TAN ? 4 : 3, total);
            } else {
                b = check_out_buffer(L, -1, stream_names[k]);
                if (b->type != LBUF_F32)
                    return luaL_error(
                        L, "limber.skinning.target: %s must be an f32 Buffer of width %s",
                        stream_names[k], k == STREAM_TAN ? "4" : "3 or 4");
            }
            d.base[k] = (float *)b->data;
            d.width[k] = b->width;
            d.elements[k] = b->count;
        }
    }
    if (lmb_skin_target_validate(&d, &err) != LMB_OK)
        return lcore_raise(L, &err, "limber.skinning.target");
    ltarget *t = (ltarget *)lua_newuserdatauv(L, sizeof(ltarget), 3);
    lmb_skin_target_init(t, &d);
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

/* ---- SkinMorph -------------------------------------------------------- */

#define SKINMORPH_MT "limber.SkinMorph"

static lmb_morph *check_morph(lua_State *L, int arg) {
    return (lmb_morph *)lmb_align_ptr(luaL_checkudata(L, arg, SKINMORPH_MT), 64);
}

/** core.skinning_morph(mesh, targets): the morph targets of a SkinMesh.
 * targets[t] = { positions =, normals =, tangents = }: deltas in file order,
 * 3 per vertex (f32 Buffers of width 3 or flat tables), any of them absent. */
static int l_morph_new(lua_State *L) {
    static const char *const who = "limber.skinning.morph";
    static const char *const fields[3] = {"positions", "normals", "tangents"};
    lmb_skin_mesh *mesh = check_mesh(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    lua_Integer T = lcore_rawlen(L, 2);
    if (T < 1 || T > (lua_Integer)LMB_MORPH_MAX_TARGETS)
        return luaL_argerror(L, 2,
                             lua_pushfstring(L, "%I targets, expected 1 to %I", T,
                                             (lua_Integer)LMB_MORPH_MAX_TARGETS));
    const float **arr = (const float **)scratch(L, 3 * (size_t)T * sizeof(float *)); /* 3 */
    lua_createtable(L, (int)T * 3, 0); /* 4: anchors of the decoded streams */
    for (lua_Integer t = 0; t < T; t++) {
        if (lua_rawgeti(L, 2, t + 1) != LUA_TTABLE) /* 5 */
            return luaL_error(L, "%s: targets[%I] must be a table", who, t + 1);
        for (int k = 0; k < 3; k++) {
            size_t n = 0;
            lua_pushfstring(L, "targets[%I].%s", t + 1, fields[k]); /* 6 */
            const char *name = lua_tostring(L, 6);
            float *d = NULL;
            if (lcore_rawfield(L, 5, fields[k]) == LUA_TNIL) { /* 7 */
                lua_pop(L, 1);
            } else {
                /* read_vec_stream_as reads desc[field] and names it: give it
                 * a one-field table keyed by the full name */
                lua_createtable(L, 0, 1); /* 8 */
                lua_pushvalue(L, 6);
                lua_pushvalue(L, 7);
                lua_rawset(L, 8);
                lua_replace(L, 7);
                d = read_vec_stream_as(L, who, 7, name, 3, &n); /* 8 */
                if (n != mesh->vertex_count)
                    return luaL_error(L, "%s: %s has %I vertices, the mesh %I", who, name,
                                      (lua_Integer)n, (lua_Integer)mesh->vertex_count);
                lua_rawseti(L, 4, (lua_Integer)(t * 3 + k + 1));
                lua_pop(L, 1); /* 7 */
            }
            arr[(size_t)k * (size_t)T + (size_t)t] = d;
            lua_pop(L, 1); /* 6 */
        }
        lua_pop(L, 1); /* 5 */
    }
    lmb_morph_source src;
    src.vertex_count = mesh->vertex_count;
    src.target_count = (uint32_t)T;
    src.pos = arr;
    src.nrm = arr + T;
    src.tan = arr + 2 * T;
    /* a stream no target has is absent (NULL) */
    int any[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++)
        for (lua_Integer t = 0; t < T; t++)
            any[k] |= arr[(size_t)k * (size_t)T + (size_t)t] != NULL;
    if (!any[1]) src.nrm = NULL;
    if (!any[2]) src.tan = NULL;
    uint32_t entries;
    lmb_error err;
    if (lmb_morph_count(&src, mesh, &entries, &err) != LMB_OK) return lcore_raise(L, &err, who);
    size_t bytes = lmb_morph_bytes(&src, entries);
    if (bytes == 0) return luaL_error(L, "%s: the targets are too large", who);
    void *mem = lcore_newobject(L, bytes, 2, SKINMORPH_MT); /* 2: run's weights copy */
    lmb_morph_build(mem, &src, mesh, entries);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1); /* the targets read the mesh's arrays */
    return 1;
}

static int l_morph_targets(lua_State *L) {
    lua_pushinteger(L, check_morph(L, 1)->target_count);
    return 1;
}

static int l_morph_entries(lua_State *L) {
    lua_pushinteger(L, check_morph(L, 1)->entry_count);
    return 1;
}

static int l_morph_vertices(lua_State *L) {
    lua_pushinteger(L, check_morph(L, 1)->vertex_count);
    return 1;
}

static int l_morph_has_normals(lua_State *L) {
    lua_pushboolean(L, check_morph(L, 1)->has_nrm != 0);
    return 1;
}

static int l_morph_has_tangents(lua_State *L) {
    lua_pushboolean(L, check_morph(L, 1)->has_tan != 0);
    return 1;
}

static int l_morph_mesh(lua_State *L) {
    check_morph(L, 1);
    lua_getiuservalue(L, 1, 1);
    return 1;
}

/** morph:gpu_delta_buffer([order]): a new f32 Buffer of width 4 holding every
 * delta for a vertex shader: element (s * T + t) * V + v (0-based) is stream
 * s's delta (0 positions, then normals if any target has them, then
 * tangents) of target t at vertex v, xyz and 0; v in sorted order (default,
 * matches the skinned outputs and gpu_index_buffer) or "file" order. */
static int l_morph_gpu(lua_State *L) {
    static const char *const orders[] = {"sorted", "file", NULL};
    lmb_morph *mo = check_morph(L, 1);
    int file = luaL_checkoption(L, 2, "sorted", orders);
    const lmb_skin_mesh *m = mo->mesh;
    size_t T = mo->target_count, V = mo->vertex_count;
    size_t S = 1u + (mo->has_nrm ? 1u : 0u) + (mo->has_tan ? 1u : 0u);
    lbuffer *b = lbuf_push(L, LBUF_F32, 4, S * T * V);
    float *out = (float *)b->data;
    memset(out, 0, S * T * V * 4 * sizeof(float));
    for (size_t t = 0; t < T; t++) {
        const uint32_t *st = mo->start + t * (mo->chunks + 1);
        for (uint32_t e = st[0]; e < st[mo->chunks]; e++) {
            size_t v = file ? m->perm[mo->vertex[e]] : mo->vertex[e];
            for (size_t k = 0; k < S; k++)
                memcpy(out + ((k * T + t) * V + v) * 4, mo->delta + (k * mo->entry_count + e) * 4,
                       3 * sizeof(float));
        }
    }
    return 1;
}

static int l_morph_tostring(lua_State *L) {
    lmb_morph *mo = check_morph(L, 1);
    lua_pushfstring(L, "limber.SkinMorph(%d targets, %d vertices, %d deltas)",
                    (int)mo->target_count, (int)mo->vertex_count, (int)mo->entry_count);
    return 1;
}

/* The morph weights of a job: `weights` at stack index w, an f32 Buffer or
 * (allow_table) a flat table of numbers copied into a scratch userdata left
 * on the stack; rows of the morph's target count. */
static const float *job_weights(lua_State *L, int w, const lmb_morph *mo, int allow_table,
                                const char *who, uint32_t *rows) {
    size_t n;
    const float *data;
    lbuffer *b = (lbuffer *)luaL_testudata(L, w, BUFFER_MT);
    if (b && b->type == LBUF_F32) {
        n = b->count * b->width;
        data = (const float *)b->data;
    } else if (allow_table && lua_type(L, w) == LUA_TTABLE) {
        n = (size_t)lcore_rawlen(L, w);
        float *f = (float *)scratch(L, n * sizeof(float));
        lua_pushfstring(L, "%s: weights", who);
        lcore_read_floats(L, w, lua_tostring(L, -1), 1, f, n);
        lua_pop(L, 1);
        data = f;
    } else {
        luaL_error(L, "%s: weights must be an f32 Buffer%s", who,
                   allow_table ? " or a flat table of numbers" : "");
        return NULL;
    }
    if (n % mo->target_count != 0)
        luaL_error(L, "%s: %I morph weights are not rows of %I (the target count)", who,
                   (lua_Integer)n, (lua_Integer)mo->target_count);
    size_t r = n / mo->target_count;
    *rows = r > UINT32_MAX ? UINT32_MAX : (uint32_t)r;
    return data;
}

/* ---- jobs ------------------------------------------------------------- */

/* Fills a task for palette instances [first, first + count) written to
 * target instances [slot, slot + count), after the kernel checked that the
 * objects fit (lmb_skin_job_validate). Raises naming the problem; writes
 * nothing. */
static void make_task(lua_State *L, int mesh_arg, int pal_arg, int tg_arg, int morph_arg, int w_arg,
                      int allow_table, uint32_t first, uint32_t count, uint32_t slot,
                      const char *who, lmb_skin_task *task) {
    lmb_skin_job j;
    memset(&j, 0, sizeof j);
    if (morph_arg && !lua_isnil(L, morph_arg)) {
        if (!luaL_testudata(L, morph_arg, SKINMORPH_MT))
            luaL_error(L, "%s: morph must be a limber.SkinMorph", who);
        j.morph = check_morph(L, morph_arg);
        if (lua_isnil(L, w_arg)) luaL_error(L, "%s: morph targets need weights", who);
        j.morph_w = job_weights(L, w_arg, j.morph, allow_table, who, &j.weight_rows);
    } else if (w_arg && !lua_isnil(L, w_arg)) {
        luaL_error(L, "%s: weights without morph targets", who);
    }
    j.mesh = check_mesh(L, mesh_arg);
    lpalette *pal = lcore_check_palette(L, pal_arg);
    j.target = check_target(L, tg_arg);
    lua_getiuservalue(L, mesh_arg, 1);
    j.mesh_skin = lua_touserdata(L, -1);
    lua_getiuservalue(L, pal_arg, 2);
    j.palette_skin = lua_touserdata(L, -1);
    lua_pop(L, 2); /* the objects stay anchored by their owners */
    j.palette = pal->data;
    j.palette_joints = pal->joints;
    j.palette_instances = pal->instances;
    j.layout = pal->layout;
    j.first = first;
    j.count = count;
    j.slot = slot;
    lmb_error err;
    if (lmb_skin_job_validate(&j, &err) != LMB_OK) lcore_raise(L, &err, who);
    lmb_skin_job_task(&j, task);
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

/** core.skin_run(mesh, palette, target[, morph, weights]): skins every
 * instance of the palette with the mesh into the target (same instance
 * counts), with the morph targets at the weights (one row per instance). */
static int l_skin(lua_State *L) {
    lua_settop(L, 5);
    lpalette *pal = lcore_check_palette(L, 2);
    ltarget *tg = check_target(L, 3);
    check_mesh(L, 1);
    if (pal->instances != tg->instances)
        return luaL_error(L,
                          "limber.skinning.skin: mismatched instance counts: the palette has %I, "
                          "the target %I",
                          (lua_Integer)pal->instances, (lua_Integer)tg->instances);
    lmb_skin_task task;
    make_task(L, 1, 2, 3, 4, 5, 1, 0, pal->instances, 0, "limber.skinning.skin", &task);
    if (task.morph) { /* the kernel reads a private copy: the weights' Buffer may be an output */
        size_t nw = (size_t)task.instances * task.morph->target_count;
        /* kept by the morph (user value 2) and reused: no allocation per frame */
        size_t have = lua_getiuservalue(L, 4, 2) == LUA_TUSERDATA ? lua_rawlen(L, -1) : 0;
        if (have < nw * sizeof(float)) {
            lua_pop(L, 1);
            lua_newuserdatauv(L, nw * sizeof(float), 0);
            lua_pushvalue(L, -1);
            lua_setiuservalue(L, 4, 2);
        }
        float *copy = (float *)lua_touserdata(L, -1);
        memcpy(copy, task.morph_w, nw * sizeof(float));
        task.morph_w = copy;
    }
    uint32_t end = (uint32_t)lmb_skin_task_items(&task); /* < 2^32: validated */
    run_tasks(L, &task, &end, 1);
    return 0;
}

/* ---- SkinBatch -------------------------------------------------------- */

typedef struct lbatch {
    uint32_t count;
    lmb_skin_task *tasks;
    uint32_t *item_end;
    const float **wsrc; /* per task: its morph weights in their Buffer (NULL: none) */
    float *wcopy;       /* the copies the kernel reads, refreshed and checked by run */
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
                   (size_t)n * sizeof(const float *) + (size_t)n * sizeof(uint32_t);
    lbatch *b = (lbatch *)lcore_newobject(L, bytes, 2, SKINBATCH_MT); /* 2 */
    b->tasks = (lmb_skin_task *)(void *)((char *)b + lmb_align_up(sizeof(lbatch), 64));
    b->wsrc = (const float **)(void *)(b->tasks + n);
    b->item_end = (uint32_t *)(void *)(b->wsrc + n);
    b->wcopy = NULL;
    lua_createtable(L, (int)n * 5, 0); /* 3: anchors */
    slot_range *ranges = (slot_range *)lua_newuserdatauv(L, (size_t)n * sizeof(slot_range), 0);
    lua_insert(L, 1); /* scratch below the arguments: 1 scratch, 2 jobs, 3 batch, 4 anchors */
    uint64_t items = 0;
    for (lua_Integer k = 1; k <= n; k++) {
        if (lua_rawgeti(L, 2, k) != LUA_TTABLE) /* 5 */
            return luaL_error(L, "limber.skinning.batch: job %I is not a table", k);
        lcore_rawfield(L, 5, "mesh");    /* 6 */
        lcore_rawfield(L, 5, "palette"); /* 7 */
        lcore_rawfield(L, 5, "target");  /* 8 */
        lcore_rawfield(L, 5, "morph");   /* 9 */
        lcore_rawfield(L, 5, "weights"); /* 10 */
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
        lua_pushfstring(L, "limber.skinning.batch: job %I", k); /* 11 */
        make_task(L, 6, 7, 8, 9, 10, 0, first - 1, count, slot - 1, lua_tostring(L, 11),
                  &b->tasks[k - 1]);
        ranges[k - 1].target = lua_touserdata(L, 8);
        ranges[k - 1].slot = slot - 1;
        ranges[k - 1].count = count;
        ranges[k - 1].job = (uint32_t)k;
        items += lmb_skin_task_items(&b->tasks[k - 1]);
        b->item_end[k - 1] = (uint32_t)(items > UINT32_MAX ? UINT32_MAX : items);
        for (int a = 0; a < 5; a++) {
            lua_pushvalue(L, 6 + a);
            lua_rawseti(L, 4, (k - 1) * 5 + a + 1);
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
     * targets on one Buffer), nor do more than 2^32 work items: the
     * kernel's batch rules. */
    lmb_skin_footprint *fp =
        (lmb_skin_footprint *)lua_newuserdatauv(L, (size_t)n * 3 * sizeof(lmb_skin_footprint), 0);
    lmb_error err;
    if (lmb_skin_batch_validate(b->tasks, (uint32_t)n, fp, &err) != LMB_OK)
        return lcore_raise(L, &err, "limber.skinning.batch");
    lua_pop(L, 1);
    /* morph weights: the kernel reads copies, refreshed from the Buffers and
     * checked by every run (a Buffer may be another job's output) */
    size_t nw = 0;
    for (lua_Integer k = 0; k < n; k++) {
        lmb_skin_task *t = &b->tasks[k];
        b->wsrc[k] = t->morph ? t->morph_w : NULL;
        if (t->morph) nw += (size_t)t->instances * t->morph->target_count;
    }
    float *wc = (float *)lua_newuserdatauv(L, nw * sizeof(float) + 1, 0);
    size_t off = 0;
    for (lua_Integer k = 0; k < n; k++) {
        lmb_skin_task *t = &b->tasks[k];
        if (!t->morph) continue;
        t->morph_w = wc + off;
        off += (size_t)t->instances * t->morph->target_count;
    }
    b->wcopy = wc;
    lua_setiuservalue(L, 3, 2);
    b->count = (uint32_t)n;
    lua_setiuservalue(L, 3, 1); /* the batch reads meshes, palettes and targets */
    return 1;
}

/** batch:run(): skins every job (in parallel on the worker pool). */
static int l_batch_run(lua_State *L) {
    lbatch *b = check_batch(L, 1);
    for (uint32_t k = 0; k < b->count; k++) { /* this run's morph weights, checked */
        lmb_skin_task *t = &b->tasks[k];
        if (!t->morph) continue;
        memcpy((float *)t->morph_w, b->wsrc[k],
               (size_t)t->instances * t->morph->target_count * sizeof(float));
        lmb_error err;
        if (lmb_skin_weights_check(t->morph, t->morph_w, t->instances, 0, &err) != LMB_OK) {
            char who[64];
            snprintf(who, sizeof who, "limber.SkinBatch:run: job %u", (unsigned)k + 1);
            return lcore_raise(L, &err, who);
        }
    }
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
    static const luaL_Reg morph_methods[] = {
        {"target_count", l_morph_targets},      {"delta_count", l_morph_entries},
        {"vertex_count", l_morph_vertices},     {"has_normals", l_morph_has_normals},
        {"has_tangents", l_morph_has_tangents}, {"mesh", l_morph_mesh},
        {"gpu_delta_buffer", l_morph_gpu},      {NULL, NULL}};
    static const luaL_Reg morph_meta[] = {
        {"__len", l_morph_targets}, {"__tostring", l_morph_tostring}, {NULL, NULL}};
    static const luaL_Reg pool_meta[] = {{"__gc", l_pool_gc}, {NULL, NULL}};
    static const luaL_Reg funcs[] = {{"skinning_mesh", l_mesh_new},
                                     {"skinning_target", l_target_new},
                                     {"skinning_run", l_skin},
                                     {"skinning_batch", l_batch_new},
                                     {"skinning_morph", l_morph_new},
                                     {"threads", l_threads},
                                     {NULL, NULL}};
    lcore_class(L, SKINMESH_MT, mesh_meta, mesh_methods);
    lcore_class(L, SKINTARGET_MT, target_meta, target_methods);
    lcore_class(L, SKINBATCH_MT, batch_meta, batch_methods);
    lcore_class(L, SKINMORPH_MT, morph_meta, morph_methods);
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
