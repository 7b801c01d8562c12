/* lcore_snap.c: binary snapshots (kernel snapshot.h) of Lua values that
 * hold limber objects: core.snapshot_save and core.snapshot_load, used by
 * limber.snapshot.
 *
 * Saving walks the value graph without recursion (a queue of tables and
 * objects, each numbered when first seen, so shared and cyclic references
 * stay shared), reading every table raw: metamethods never run. Loading
 * checks the whole blob first (lmb_snap_check), then creates every string,
 * table and object once, fills the tables and binds the objects' Lua data;
 * the objects' info tables are rebuilt from checked fields, never taken
 * from the blob as they are. All memory is Lua's (userdata anchored on the
 * stack), so an error at any point leaks nothing and changes nothing. */
#if defined(__unix__) || defined(__APPLE__)
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#endif
#include "lcore.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#define LMB_HAVE_POSIX_FILES 1
#endif

#include "clip.h"
#include "palette.h"
#include "skeleton.h"
#include "skinning.h"
#include "snapshot.h"

#define SAVE "limber.snapshot.save"
#define LOAD "limber.snapshot.load"

/* Largest dense form built for a loaded clip, against its payload: beyond
 * it the clip samples through its cursors (the same values), so a small
 * hostile blob cannot ask for gigabytes. */
#define DENSE_FACTOR 256u
#define DENSE_SLACK ((size_t)1 << 20)

/* ---- growable byte arrays in userdata on the stack ---------------------- */

typedef struct gbuf {
    unsigned char *p;
    size_t n, cap;
    int slot; /* stack index of the userdata holding p */
} gbuf;

static void gbuf_init(lua_State *L, gbuf *g) {
    g->cap = 256, g->n = 0;
    g->p = (unsigned char *)lua_newuserdatauv(L, g->cap, 0);
    g->slot = lua_gettop(L);
}

static unsigned char *gbuf_grow(lua_State *L, gbuf *g, size_t more) {
    if (more > ((size_t)1 << 40) - g->n) luaL_error(L, SAVE ": the snapshot is too large");
    if (g->n + more > g->cap) {
        size_t cap = g->cap;
        while (cap < g->n + more)
            cap *= 2;
        unsigned char *p = (unsigned char *)lua_newuserdatauv(L, cap, 0);
        memcpy(p, g->p, g->n);
        lua_replace(L, g->slot);
        g->p = p, g->cap = cap;
    }
    unsigned char *at = g->p + g->n;
    memset(at, 0, more);
    g->n += more;
    return at;
}

/* ---- saving ------------------------------------------------------------ */

enum { S_ROOT = 1, S_SIDE, S_IDS, S_TLIST, S_OLIST, S_TOP = S_OLIST };

typedef struct saver {
    lua_State *L;
    gbuf values, tables, strings, objects, sbytes, payload;
    uint32_t ntables, nobjects, nstrings;
} saver;

static uint32_t count_of(saver *s, size_t bytes, size_t rec) {
    size_t n = bytes / rec;
    if (n >= UINT32_MAX) luaL_error(s->L, SAVE ": the snapshot is too large");
    return (uint32_t)n;
}

static void *object_of(lua_State *L, int idx, const char *mt) {
    void *u = luaL_testudata(L, idx, mt);
    return u ? (strcmp(mt, BUFFER_MT) == 0 ? u : lmb_align_ptr(u, 64)) : NULL;
}

/* Appends one value record for the Lua value at idx; returns its index.
 * Tables, objects and strings get their number when first seen. */
static uint32_t put_value(saver *s, int idx) {
    lua_State *L = s->L;
    idx = lua_absindex(L, idx);
    lmb_snap_value v = {LMB_SV_NIL, 0, 0};
    int t = lua_type(L, idx);
    if (t == LUA_TBOOLEAN) {
        v.tag = lua_toboolean(L, idx) ? LMB_SV_TRUE : LMB_SV_FALSE;
    } else if (t == LUA_TNUMBER) {
#if LUA_VERSION_NUM >= 503
        if (lua_isinteger(L, idx)) {
            lua_Integer i = lua_tointeger(L, idx);
            v.tag = LMB_SV_INT;
            memcpy(&v.v, &i, sizeof i);
        } else
#endif
        {
            double d = (double)lua_tonumber(L, idx);
            v.tag = LMB_SV_NUM;
            memcpy(&v.v, &d, sizeof d);
        }
    } else if (t == LUA_TSTRING || t == LUA_TTABLE || t == LUA_TUSERDATA) {
        lua_pushvalue(L, idx);
        int known = lua_rawget(L, S_IDS) != LUA_TNIL;
        uint32_t id = known ? (uint32_t)lua_tointeger(L, -1) : 0;
        lua_pop(L, 1);
        if (t == LUA_TSTRING) {
            v.tag = LMB_SV_STR;
            if (!known) {
                size_t len;
                const char *str = lua_tolstring(L, idx, &len);
                id = s->nstrings++;
                lmb_snap_string rec = {s->sbytes.n, len};
                memcpy(gbuf_grow(L, &s->strings, sizeof rec), &rec, sizeof rec);
                memcpy(gbuf_grow(L, &s->sbytes, len), str, len);
            }
        } else if (t == LUA_TTABLE) {
            v.tag = LMB_SV_TABLE;
            if (!known) {
                if (lua_getmetatable(L, idx))
                    luaL_error(L, SAVE ": cannot store a table with a metatable");
                id = s->ntables++;
                lua_pushvalue(L, idx);
                lua_rawseti(L, S_TLIST, (lua_Integer)id + 1);
            }
        } else {
            v.tag = LMB_SV_OBJECT;
            if (!known) {
                if (!object_of(L, idx, BUFFER_MT) && !object_of(L, idx, SKELETON_MT) &&
                    !object_of(L, idx, SKIN_MT) && !object_of(L, idx, CLIP_MT) &&
                    !object_of(L, idx, SKINMESH_MT)) {
                    const char *name = "userdata";
                    if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING)
                        name = lua_tostring(L, -1);
                    luaL_error(L,
                               SAVE ": cannot store a %s (snapshots hold tables, strings, "
                                    "numbers, booleans, buffers, skeletons, skins, clips and skin "
                                    "meshes)",
                               name);
                }
                id = s->nobjects++;
                lua_pushvalue(L, idx);
                lua_rawseti(L, S_OLIST, (lua_Integer)id + 1);
            }
        }
        if (!known) {
            lua_pushvalue(L, idx);
            lua_pushinteger(L, (lua_Integer)id);
            lua_rawset(L, S_IDS);
        }
        v.v = id;
    } else if (t != LUA_TNIL) {
        luaL_error(L, SAVE ": cannot store a %s", lua_typename(L, t));
    }
    uint32_t at = count_of(s, s->values.n, sizeof v);
    memcpy(gbuf_grow(L, &s->values, sizeof v), &v, sizeof v);
    return at;
}

/* A table key for the canonical order: booleans, numbers, strings, then
 * the rest (tables and objects) in the order lua_next gave them. */
typedef struct skey {
    int rank;
    double num;
    const char *str;
    size_t len;
    uint32_t slot;
} skey;

static int skey_cmp(const void *pa, const void *pb) {
    const skey *a = (const skey *)pa, *b = (const skey *)pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    if (a->rank <= 1 && a->num != b->num) return a->num < b->num ? -1 : 1;
    if (a->rank == 2) {
        size_t n = a->len < b->len ? a->len : b->len;
        int c = memcmp(a->str, b->str, n);
        if (c != 0) return c;
        if (a->len != b->len) return a->len < b->len ? -1 : 1;
    }
    return a->slot < b->slot ? -1 : a->slot > b->slot;
}

/* Table k's pairs, keys in the canonical order (so one value always gives
 * one blob: a loaded snapshot saves back to the same bytes). */
static void save_table(saver *s, uint32_t k) {
    lua_State *L = s->L;
    lua_rawgeti(L, S_TLIST, (lua_Integer)k + 1);
    int t = lua_gettop(L);
    lua_newtable(L); /* t + 1: the keys, anchored while sorted */
    gbuf keys;
    gbuf_init(L, &keys); /* t + 2 */
    uint32_t n = 0;
    lua_pushnil(L);
    while (lua_next(L, t)) {
        lua_pop(L, 1);
        skey sk;
        memset(&sk, 0, sizeof sk);
        sk.slot = n;
        int kt = lua_type(L, -1);
        if (kt == LUA_TBOOLEAN) {
            sk.rank = 0, sk.num = lua_toboolean(L, -1);
        } else if (kt == LUA_TNUMBER) {
            sk.rank = 1, sk.num = (double)lua_tonumber(L, -1);
        } else if (kt == LUA_TSTRING) {
            sk.rank = 2, sk.str = lua_tolstring(L, -1, &sk.len);
        } else {
            sk.rank = 3;
        }
        memcpy(gbuf_grow(L, &keys, sizeof sk), &sk, sizeof sk);
        lua_pushvalue(L, -1);
        lua_rawseti(L, t + 1, (lua_Integer)++n);
    }
    skey *all = (skey *)(void *)keys.p;
    if (n > 1) qsort(all, n, sizeof(skey), skey_cmp);
    lmb_snap_table rec = {count_of(s, s->values.n, sizeof(lmb_snap_value)), n};
    for (uint32_t i = 0; i < n; i++) {
        lua_rawgeti(L, t + 1, (lua_Integer)all[i].slot + 1);
        lua_pushvalue(L, -1);
        lua_rawget(L, t);
        put_value(s, -2);
        put_value(s, -1);
        lua_pop(L, 2);
        all = (skey *)(void *)keys.p; /* (put_value never grows `keys`) */
    }
    memcpy(gbuf_grow(L, &s->tables, sizeof rec), &rec, sizeof rec);
    lua_settop(L, t - 1);
}

/* A clip's Lua data as stored: the checked fields of its info table (the
 * rest, node slots, bytes and the dense frames, is rebuilt on load). */
static void push_clip_lua(lua_State *L, int obj) {
    static const char *const keep[] = {"name", "rig_hash", "source_bytes", "error"};
    lua_getiuservalue(L, obj, 1);
    lua_createtable(L, 0, 4);
    for (int k = 0; k < 4; k++) {
        lua_pushstring(L, keep[k]);
        lua_pushstring(L, keep[k]);
        lua_rawget(L, -4);
        lua_rawset(L, -3);
    }
    lua_remove(L, -2);
}

static void save_object(saver *s, uint32_t k) {
    lua_State *L = s->L;
    lua_rawgeti(L, S_OLIST, (lua_Integer)k + 1);
    int o = lua_gettop(L);
    lmb_snap_object rec;
    memset(&rec, 0, sizeof rec);
    size_t bytes = 0;
    const lbuffer *buf = (const lbuffer *)object_of(L, o, BUFFER_MT);
    const lmb_skeleton *skel = (const lmb_skeleton *)object_of(L, o, SKELETON_MT);
    const lmb_skin *skin = (const lmb_skin *)object_of(L, o, SKIN_MT);
    const lmb_clip *clip = (const lmb_clip *)object_of(L, o, CLIP_MT);
    const lmb_skin_mesh *mesh = (const lmb_skin_mesh *)object_of(L, o, SKINMESH_MT);
    if (buf) {
        rec.kind = LMB_SO_BUFFER;
        rec.n[0] = buf->type, rec.n[1] = buf->width;
        rec.n[2] = (uint32_t)buf->count, rec.n[3] = (uint32_t)((uint64_t)buf->count >> 32);
        rec.n[4] = buf->readonly;
        bytes = buf->count * buf->width * lbuf_scalar_size(buf->type);
    } else if (skel) {
        rec.kind = LMB_SO_SKELETON;
        bytes = lmb_snap_skeleton_payload(skel, rec.n);
    } else if (skin) {
        rec.kind = LMB_SO_SKIN;
        bytes = lmb_snap_skin_payload(skin, rec.n);
    } else if (mesh) {
        rec.kind = LMB_SO_MESH;
        bytes = lmb_snap_mesh_payload(mesh, rec.n);
    } else {
        rec.kind = LMB_SO_CLIP;
        bytes = lmb_snap_clip_payload(clip, rec.n);
    }
    size_t at = lmb_align_up(s->payload.n, LMB_SNAP_ALIGN);
    gbuf_grow(L, &s->payload, at - s->payload.n);
    unsigned char *p = gbuf_grow(L, &s->payload, lmb_align_up(bytes, LMB_SNAP_ALIGN));
    rec.off = at, rec.bytes = bytes;
    if (buf) memcpy(p, buf->data, bytes);
    if (skel) lmb_snap_write_skeleton(skel, p);
    if (skin) lmb_snap_write_skin(skin, p);
    if (clip) lmb_snap_write_clip(clip, p);
    if (mesh) lmb_snap_write_mesh(mesh, p);
    /* Lua data: a skeleton's names, a skin's skeleton, a mesh's skin, a clip's info */
    if (skel || skin || mesh) {
        lua_getiuservalue(L, o, 1);
    } else if (clip) {
        push_clip_lua(L, o);
    } else {
        lua_pushnil(L);
    }
    if (skel) { /* only the names: the index is rebuilt from them */
        lua_createtable(L, 0, 1);
        lua_pushliteral(L, "names");
        lua_pushliteral(L, "names");
        lua_rawget(L, -4);
        lua_rawset(L, -3);
        lua_remove(L, -2);
    }
    rec.lua = put_value(s, -1);
    lua_pop(L, 1);
    if (clip && lua_type(L, S_SIDE) == LUA_TTABLE) {
        lua_pushvalue(L, o);
        lua_rawget(L, S_SIDE);
    } else {
        lua_pushnil(L);
    }
    rec.side = put_value(s, -1);
    lua_pop(L, 1);
    /* the record goes in place k (objects are numbered in the order seen) */
    memcpy(s->objects.p + (size_t)k * sizeof rec, &rec, sizeof rec);
    lua_settop(L, o - 1);
}

/** core.snapshot_save(value [, side]): the snapshot blob of value (a
 * string). side (optional): a table clip -> side data (limber.anim's
 * events), stored with each clip. */
static int l_snapshot_save(lua_State *L) {
    luaL_checkany(L, 1);
    if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    lua_newtable(L); /* S_IDS */
    lua_newtable(L); /* S_TLIST */
    lua_newtable(L); /* S_OLIST */
    saver s;
    memset(&s, 0, sizeof s);
    s.L = L;
    gbuf_init(L, &s.values);
    gbuf_init(L, &s.tables);
    gbuf_init(L, &s.strings);
    gbuf_init(L, &s.objects);
    gbuf_init(L, &s.sbytes);
    gbuf_init(L, &s.payload);
    uint32_t root = put_value(&s, S_ROOT);
    if (lua_isnil(L, S_ROOT)) return luaL_argerror(L, 1, "cannot store nil");
    uint32_t tdone = 0, odone = 0;
    while (tdone < s.ntables || odone < s.nobjects) {
        if (tdone < s.ntables) {
            save_table(&s, tdone++);
        } else {
            if (s.objects.n < (size_t)s.nobjects * sizeof(lmb_snap_object))
                gbuf_grow(L, &s.objects,
                          (size_t)s.nobjects * sizeof(lmb_snap_object) - s.objects.n);
            save_object(&s, odone++);
        }
    }
    /* the blob: header, sections, then the data (strings, then payloads) */
    lmb_snap_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, "LMBSNAP", 8);
    h.version = LMB_SNAP_VERSION, h.endian = LMB_SNAP_ENDIAN;
    h.header_bytes = sizeof h, h.root = root;
    h.value_count = count_of(&s, s.values.n, sizeof(lmb_snap_value));
    h.table_count = s.ntables, h.string_count = s.nstrings, h.object_count = s.nobjects;
    size_t off = lmb_align_up(sizeof h, LMB_SNAP_ALIGN);
    h.values = off, off = lmb_align_up(off + s.values.n, LMB_SNAP_ALIGN);
    h.tables = off, off = lmb_align_up(off + s.tables.n, LMB_SNAP_ALIGN);
    h.strings = off, off = lmb_align_up(off + s.strings.n, LMB_SNAP_ALIGN);
    h.objects = off, off = lmb_align_up(off + s.objects.n, LMB_SNAP_ALIGN);
    h.data = off;
    size_t pbase = lmb_align_up(s.sbytes.n, LMB_SNAP_ALIGN);
    h.data_bytes = pbase + s.payload.n;
    h.total_bytes = off + h.data_bytes;
    for (uint32_t k = 0; k < s.nobjects; k++) { /* payload offsets: after the strings */
        lmb_snap_object rec;
        memcpy(&rec, s.objects.p + (size_t)k * sizeof rec, sizeof rec);
        rec.off += pbase;
        memcpy(s.objects.p + (size_t)k * sizeof rec, &rec, sizeof rec);
    }
    unsigned char *out = (unsigned char *)lua_newuserdatauv(L, (size_t)h.total_bytes, 0);
    memset(out, 0, (size_t)h.total_bytes);
    memcpy(out, &h, sizeof h);
    memcpy(out + h.values, s.values.p, s.values.n);
    memcpy(out + h.tables, s.tables.p, s.tables.n);
    memcpy(out + h.strings, s.strings.p, s.strings.n);
    memcpy(out + h.objects, s.objects.p, s.objects.n);
    memcpy(out + h.data, s.sbytes.p, s.sbytes.n);
    memcpy(out + h.data + pbase, s.payload.p, s.payload.n);
    lua_pushlstring(L, (const char *)out, (size_t)h.total_bytes);
    return 1;
}

/* ---- loading ----------------------------------------------------------- */

enum { L_BLOB = 1, L_STRS = 2, L_TABS, L_OBJS };

static int load_fail(lua_State *L, const char *fmt, uint32_t k) {
    return luaL_error(L, LOAD ": object %I: %s", (lua_Integer)k + 1, fmt);
}

/* Pushes value k of the checked blob (strings, tables, objects made already). */
static void push_value(lua_State *L, const void *blob, uint32_t k) {
    lmb_snap_value v = lmb_snap_get_value(blob, k);
    switch (v.tag) {
    case LMB_SV_FALSE:
    case LMB_SV_TRUE:
        lua_pushboolean(L, v.tag == LMB_SV_TRUE);
        break;
    case LMB_SV_INT: {
        int64_t i;
        memcpy(&i, &v.v, sizeof i);
#if LUA_VERSION_NUM >= 503
        lua_pushinteger(L, (lua_Integer)i);
#else
        lua_pushnumber(L, (lua_Number)i);
#endif
        break;
    }
    case LMB_SV_NUM: {
        double d;
        memcpy(&d, &v.v, sizeof d);
        lua_pushnumber(L, (lua_Number)d);
        break;
    }
    case LMB_SV_STR:
        lua_rawgeti(L, L_STRS, (lua_Integer)v.v + 1);
        break;
    case LMB_SV_TABLE:
        lua_rawgeti(L, L_TABS, (lua_Integer)v.v + 1);
        break;
    case LMB_SV_OBJECT:
        lua_rawgeti(L, L_OBJS, (lua_Integer)v.v + 1);
        break;
    default:
        lua_pushnil(L);
    }
}

/* A skeleton's info table from its stored Lua data (a table whose names
 * field, if any, is a table): names[j] kept where it is a string. */
static void bind_skeleton(lua_State *L, const void *blob, uint32_t k, uint32_t J) {
    int obj = lua_gettop(L);
    push_value(L, blob, lmb_snap_get_object(blob, k).lua);
    if (!lua_istable(L, -1)) load_fail(L, "a skeleton's data must be a table", k);
    int names = lcore_rawfield(L, -1, "names");
    if (names != LUA_TNIL && names != LUA_TTABLE)
        load_fail(L, "a skeleton's names must be a table", k);
    int src = lua_gettop(L);
    lua_createtable(L, 0, 2); /* info */
    lua_createtable(L, (int)J, 0);
    lua_newtable(L);
    for (uint32_t j = 0; j < J && names == LUA_TTABLE; j++) {
        if (lua_rawgeti(L, src, (lua_Integer)j + 1) == LUA_TSTRING) {
            lua_pushvalue(L, -1);
            lua_rawseti(L, -4, (lua_Integer)j + 1);
            lua_pushinteger(L, (lua_Integer)j + 1);
            lua_rawset(L, -3);
        } else {
            lua_pop(L, 1);
        }
    }
    lua_setfield(L, -3, "index");
    lua_setfield(L, -2, "names");
    lua_setiuservalue(L, obj, 1);
    lua_settop(L, obj);
}

/* A clip's info table from its stored Lua data: name and rig hash
 * (strings), source bytes (a number), error (a table, copied shallow),
 * with node slots, bytes and the dense form made here. */
static void bind_clip(lua_State *L, const void *blob, uint32_t k, lmb_clip *c, size_t bytes) {
    static const char *const field[] = {"name", "rig_hash", "source_bytes", "error"};
    static const int type[] = {LUA_TSTRING, LUA_TSTRING, LUA_TNUMBER, LUA_TTABLE};
    int obj = lua_gettop(L);
    lmb_snap_object o = lmb_snap_get_object(blob, k);
    push_value(L, blob, o.lua);
    int src = lua_gettop(L);
    lua_createtable(L, 0, 6);
    for (int f = 0; f < 4; f++) {
        int t = lcore_rawfield(L, src, field[f]);
        if (t != LUA_TNIL && t != type[f])
            load_fail(L, "a clip's info field has the wrong type", k);
        if (t == LUA_TTABLE) { /* error statistics: numbers and strings */
            lua_newtable(L);
            lua_pushnil(L);
            while (lua_next(L, -3)) {
                int vt = lua_type(L, -1);
                if (lua_type(L, -2) != LUA_TSTRING || (vt != LUA_TNUMBER && vt != LUA_TSTRING))
                    load_fail(L, "a clip's error table holds other values", k);
                lua_pushvalue(L, -2);
                lua_insert(L, -2);
                lua_rawset(L, -4);
            }
            lua_remove(L, -2);
        }
        lua_setfield(L, -2, field[f]);
    }
    lua_newtable(L);
    for (uint32_t m = c->joint_track_count; m < c->track_count; m++) {
        lua_pushinteger(L, (lua_Integer)m + 1);
        lua_rawseti(L, -2, (lua_Integer)(m - c->joint_track_count) + 1);
    }
    lua_setfield(L, -2, "node_slots");
    size_t dense = o.n[6] ? lmb_clip_dense_bytes(c) : 0;
    if (dense > DENSE_SLACK + (size_t)DENSE_FACTOR * (size_t)o.bytes) dense = 0;
    if (dense > 0) {
        void *mem = lua_newuserdatauv(L, dense, 0);
        lmb_clip_dense_build(c, mem);
        lua_setfield(L, -2, "dense_frames");
    }
    lua_pushinteger(L, (lua_Integer)(bytes + dense));
    lua_setfield(L, -2, "bytes");
    lua_setiuservalue(L, obj, 1);
    lua_settop(L, obj);
}

/* The pass that makes objects of this kind: skins after their skeletons,
 * meshes after their skins. */
static int pass_of(uint32_t kind) {
    return kind == LMB_SO_SKIN ? 1 : kind == LMB_SO_MESH ? 2 : 0;
}

/* Makes object k (in its pass_of). */
static void make_object(lua_State *L, const void *blob, uint32_t k, lmb_error *err) {
    lmb_snap_object o = lmb_snap_get_object(blob, k);
    if (o.kind == LMB_SO_BUFFER) {
        uint64_t count = (uint64_t)o.n[2] | (uint64_t)o.n[3] << 32;
        lbuffer *b = lbuf_push(L, (int)o.n[0], o.n[1], (size_t)count);
        memcpy(b->data, lmb_snap_payload(blob, k), (size_t)o.bytes);
        b->readonly = (uint8_t)o.n[4];
    } else if (o.kind == LMB_SO_SKELETON) {
        void *mem = lcore_newobject(L, lmb_snap_object_bytes(blob, k), 1, SKELETON_MT);
        lmb_snap_build_skeleton(blob, k, mem);
        bind_skeleton(L, blob, k, o.n[0]);
    } else if (o.kind == LMB_SO_SKIN) {
        lmb_snap_value sv = lmb_snap_get_value(blob, o.lua);
        lua_rawgeti(L, L_OBJS, (lua_Integer)sv.v + 1);
        const lmb_skeleton *skel = lcore_check_skeleton(L, -1);
        void *mem = lcore_newobject(L, lmb_snap_object_bytes(blob, k), 1, SKIN_MT);
        lmb_snap_build_skin(blob, k, skel, mem);
        lua_insert(L, -2);
        lua_setiuservalue(L, -2, 1); /* the skin reads its skeleton */
    } else if (o.kind == LMB_SO_MESH) {
        lmb_snap_value sv = lmb_snap_get_value(blob, o.lua);
        uint32_t skin_joints = 0;
        if (sv.tag == LMB_SV_OBJECT) {
            lua_rawgeti(L, L_OBJS, (lua_Integer)sv.v + 1);
            skin_joints = lcore_check_skin(L, -1)->joint_count;
        } else {
            lua_pushnil(L);
        }
        size_t bytes = lmb_snap_object_bytes(blob, k);
        void *mem = lcore_newobject(L, bytes, 1, SKINMESH_MT);
        lmb_skin_mesh *m = NULL;
        if (lmb_snap_build_mesh(blob, k, skin_joints, mem, &m, err) != LMB_OK) {
            char msg[256];
            lmb_error_format(err, msg, sizeof msg);
            luaL_error(L, LOAD ": object %I (a skin mesh): %s", (lua_Integer)k + 1, msg);
        }
        lua_insert(L, -2);
        lua_setiuservalue(L, -2, 1); /* the mesh's skin, or nil */
    } else {
        size_t bytes = lmb_snap_object_bytes(blob, k);
        if (bytes == 0) load_fail(L, "the clip is too large", k);
        void *mem = lcore_newobject(L, bytes, 1, CLIP_MT);
        lmb_clip *c = NULL;
        if (lmb_snap_build_clip(blob, k, mem, &c, err) != LMB_OK) {
            char msg[256];
            lmb_error_format(err, msg, sizeof msg);
            luaL_error(L, LOAD ": object %I (a clip): %s", (lua_Integer)k + 1, msg);
        }
        bind_clip(L, blob, k, c, bytes);
    }
    lua_rawseti(L, L_OBJS, (lua_Integer)k + 1);
}

/** core.snapshot_load(blob): the value stored in the blob, and an array of
 * {clip, side data} for the clips saved with side data. Any damage is an
 * error naming what is wrong; nothing is made then. */
static int l_snapshot_load(lua_State *L) {
    size_t n;
    const char *blob = luaL_checklstring(L, 1, &n);
    lua_settop(L, 1);
    lmb_error err;
    if (lmb_snap_check(blob, n, &err) != LMB_OK) {
        char msg[256];
        lmb_error_format(&err, msg, sizeof msg);
        return luaL_error(L, LOAD ": %s", msg);
    }
    lmb_snap_header h = lmb_snap_head(blob);
    lua_createtable(L, (int)(h.string_count < 1000000 ? h.string_count : 1000000), 0);
    for (uint32_t k = 0; k < h.string_count; k++) {
        size_t len;
        const char *s = lmb_snap_get_string(blob, k, &len);
        lua_pushlstring(L, s, len);
        lua_rawseti(L, L_STRS, (lua_Integer)k + 1);
    }
    lua_createtable(L, (int)(h.table_count < 1000000 ? h.table_count : 1000000), 0);
    for (uint32_t k = 0; k < h.table_count; k++) {
        lmb_snap_table t = lmb_snap_get_table(blob, k);
        lua_createtable(L, 0, (int)(t.pairs < 100000 ? t.pairs : 100000));
        lua_rawseti(L, L_TABS, (lua_Integer)k + 1);
    }
    lua_createtable(L, (int)(h.object_count < 1000000 ? h.object_count : 1000000), 0);
    /* objects: their tables' contents come first (a clip's info is read) */
    for (uint32_t k = 0; k < h.table_count; k++) {
        lmb_snap_table t = lmb_snap_get_table(blob, k);
        lua_rawgeti(L, L_TABS, (lua_Integer)k + 1);
        for (uint32_t i = 0; i < t.pairs; i++) {
            lmb_snap_value key = lmb_snap_get_value(blob, t.first + 2 * i);
            lmb_snap_value val = lmb_snap_get_value(blob, t.first + 2 * i + 1);
            if (key.tag == LMB_SV_OBJECT || val.tag == LMB_SV_OBJECT) continue; /* below */
            push_value(L, blob, t.first + 2 * i);
            push_value(L, blob, t.first + 2 * i + 1);
            lua_rawset(L, -3);
        }
        lua_pop(L, 1);
    }
    for (int pass = 0; pass < 3; pass++)
        for (uint32_t k = 0; k < h.object_count; k++)
            if (pass_of(lmb_snap_get_object(blob, k).kind) == pass) make_object(L, blob, k, &err);
    for (uint32_t k = 0; k < h.table_count; k++) { /* the pairs that name objects */
        lmb_snap_table t = lmb_snap_get_table(blob, k);
        lua_rawgeti(L, L_TABS, (lua_Integer)k + 1);
        for (uint32_t i = 0; i < t.pairs; i++) {
            lmb_snap_value key = lmb_snap_get_value(blob, t.first + 2 * i);
            lmb_snap_value val = lmb_snap_get_value(blob, t.first + 2 * i + 1);
            if (key.tag != LMB_SV_OBJECT && val.tag != LMB_SV_OBJECT) continue;
            push_value(L, blob, t.first + 2 * i);
            push_value(L, blob, t.first + 2 * i + 1);
            lua_rawset(L, -3);
        }
        lua_pop(L, 1);
    }
    push_value(L, blob, h.root); /* 5 */
    lua_newtable(L);             /* 6: {clip, side} pairs */
    int nside = 0;
    for (uint32_t k = 0; k < h.object_count; k++) {
        lmb_snap_object o = lmb_snap_get_object(blob, k);
        if (o.kind != LMB_SO_CLIP || lmb_snap_get_value(blob, o.side).tag == LMB_SV_NIL) continue;
        lua_createtable(L, 2, 0);
        lua_rawgeti(L, L_OBJS, (lua_Integer)k + 1);
        lua_rawseti(L, -2, 1);
        push_value(L, blob, o.side);
        lua_rawseti(L, -2, 2);
        lua_rawseti(L, -2, ++nside);
    }
    return 2;
}

/** core.snapshot_write(fname, path, blob): writes the blob to path. Only a
 * regular file is written: an existing path that is anything else (a FIFO,
 * a directory, a device) is refused before anything is opened, so nothing
 * here can hang. The blob goes to a new file next to path (mkstemp, synced
 * to disk, with the old file's mode or 0666 less the umask), which then
 * replaces path in one rename: a failure halfway (disk full) leaves the old
 * file as it was and no partial one. A symbolic link at path is replaced by
 * the file, not written through. Errors read "<fname>: cannot write
 * '<path>': <why>". */
static int l_snapshot_write(lua_State *L) {
    const char *fname = luaL_checkstring(L, 1);
    const char *path = luaL_checkstring(L, 2);
    size_t n;
    const char *blob = luaL_checklstring(L, 3, &n);
#ifdef LMB_HAVE_POSIX_FILES
    struct stat st;
    int exists = stat(path, &st) == 0;
    if (exists && !S_ISREG(st.st_mode))
        return luaL_error(L, "%s: cannot write '%s': not a regular file", fname, path);
    /* the new file keeps an existing file's mode; a new one gets 0666 less
     * the umask, as open() would give it */
    mode_t mode = exists ? (st.st_mode & 07777) : 0;
    if (!exists) {
        mode_t mask = umask(0);
        umask(mask);
        mode = 0666 & ~mask;
    }
    const char *tmp = lua_pushfstring(L, "%s.XXXXXX", path);
    char *name = (char *)lua_newuserdatauv(L, strlen(tmp) + 1, 0);
    memcpy(name, tmp, strlen(tmp) + 1);
    int fd = mkstemp(name);
    if (fd < 0) return luaL_error(L, "%s: cannot write '%s': %s", fname, path, strerror(errno));
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    const char *why = NULL;
    int e = 0;
    size_t done = 0;
    while (done < n && !why) {
        ssize_t w = write(fd, blob + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            e = errno;
            why = w < 0 ? strerror(e) : "no progress";
        } else {
            done += (size_t)w;
        }
    }
    if (!why && fchmod(fd, mode) != 0) why = strerror(errno);
    if (!why && fsync(fd) != 0) why = strerror(errno); /* on disk before the rename */
    if (close(fd) != 0 && !why) why = strerror(errno);
    if (!why && rename(name, path) != 0) why = strerror(errno);
    if (why) {
        unlink(name);
        return luaL_error(L, "%s: cannot write '%s': %s", fname, path, why);
    }
#else
    FILE *f = fopen(path, "wb");
    if (!f) return luaL_error(L, "%s: cannot write '%s'", fname, path);
    size_t w = fwrite(blob, 1, n, f);
    if (fclose(f) != 0 || w != n) return luaL_error(L, "%s: cannot write '%s'", fname, path);
#endif
    return 0;
}

void lcore_open_snapshot(lua_State *L) {
    static const luaL_Reg funcs[] = {{"snapshot_save", l_snapshot_save},
                                     {"snapshot_load", l_snapshot_load},
                                     {"snapshot_write", l_snapshot_write},
                                     {NULL, NULL}};
    luaL_setfuncs(L, funcs, 0);
    lua_pushinteger(L, LMB_SNAP_VERSION);
    lua_setfield(L, -2, "SNAPSHOT_VERSION");
}
