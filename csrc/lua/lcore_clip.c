/* lcore_clip.c: Lua types Clip (immutable keyframe tracks), Sampler (plays
 * one clip per instance of a pose batch, cursors inside) and Blender
 * (weighted layers of pose batches). Every check runs before anything is
 * changed. */
#include <math.h>
#include <string.h>

#include "blend.h"
#include "clip.h"
#include "pack.h"
#include "skeleton.h"
#include "lcore.h"

#define SAMPLER_MT "limber.Sampler"
#define BLENDER_MT "limber.Blender"

#define PREFIX "limber.anim.clip"

static const char *const path_names[] = {"translation", "rotation", "scale", "float", NULL};
static const char *const interp_names[] = {"STEP", "LINEAR", "CUBICSPLINE", NULL};

/* ---- Clip ------------------------------------------------------------- */

static lmb_clip *check_clip(lua_State *L, int arg) {
    return (lmb_clip *)lmb_align_ptr(luaL_checkudata(L, arg, CLIP_MT), 64);
}

/* core.clip reads the tracks table exactly once, raw (no metamethods), into
 * C memory, validates that copy and builds from it: a table whose __len or
 * __index answer differently on a second look cannot get past a check.
 * Times and values objects are identified by identity (the same table or
 * Buffer on several tracks is one source, read once), so tracks that share
 * them share their keys in the clip. */

/* One times or values object of core.clip. */
typedef struct clip_src {
    const float *data;     /* Buffer data, or the table's copy in the scratch floats */
    size_t count;          /* floats */
    lua_Integer track;     /* first track using it, for errors */
    uint32_t times_offset; /* in clip->times, UINT32_MAX until used as times */
    uint8_t is_table;
    uint8_t as_values; /* first used as values (names the field in errors) */
} clip_src;

/* One track of core.clip, as read. */
typedef struct clip_desc {
    uint32_t target, tsrc, vsrc, times, values;
    uint32_t nt, nv;
    uint8_t is_node, path, interp, width, shared;
} clip_desc;

/* Index of a string option (the value on top of the stack), or -1. */
static int option_index(lua_State *L, const char *const names[]) {
    if (lua_type(L, -1) != LUA_TSTRING) return -1;
    const char *str = lua_tostring(L, -1);
    for (int m = 0; names[m]; m++)
        if (strcmp(str, names[m]) == 0) return m;
    return -1;
}

/* The source index of the times or values object on top of the stack (popped),
 * registering it in map (object -> index + 1) and objs (index + 1 -> object). */
static uint32_t clip_source(lua_State *L, lua_Integer k, const char *field, int map, int objs,
                            clip_src *src, uint32_t *nsrc) {
    lua_pushvalue(L, -1);
    if (lua_rawget(L, map) == LUA_TNUMBER) {
        uint32_t i = (uint32_t)lua_tointeger(L, -1) - 1;
        lua_pop(L, 2);
        return i;
    }
    lua_pop(L, 1);
    clip_src *c = src + *nsrc;
    if (lua_type(L, -1) == LUA_TTABLE) {
        c->is_table = 1;
        c->data = NULL;
        c->count = (size_t)lua_rawlen(L, -1);
    } else {
        lbuffer *b = (lbuffer *)luaL_testudata(L, -1, BUFFER_MT);
        if (!b)
            luaL_error(
                L, PREFIX ": tracks[%I]: %s must be a table of numbers or an f32 Buffer (got %s)",
                k, field, luaL_typename(L, -1));
        if (b->type != LBUF_F32)
            luaL_error(L, PREFIX ": tracks[%I]: %s Buffer must be f32", k, field);
        c->is_table = 0;
        c->data = (const float *)b->data;
        c->count = b->count * b->width;
    }
    c->track = k;
    c->times_offset = UINT32_MAX;
    c->as_values = field[0] == 'v';
    uint32_t i = (*nsrc)++;
    lua_pushvalue(L, -1);
    lua_rawseti(L, objs, (lua_Integer)i + 1);
    lua_pushinteger(L, (lua_Integer)i + 1);
    lua_rawset(L, map);
    return i;
}

/* Reads every track of the table at index 1 once into d[0 .. n); returns the
 * number of sources. */
static uint32_t clip_read_tracks(lua_State *L, lua_Integer n, clip_desc *d, clip_src *src, int map,
                                 int objs, int recs, size_t *keys_out, size_t *values_out) {
    uint32_t nsrc = 0;
    size_t keys = 0, values = 0;
    for (lua_Integer k = 1; k <= n; k++) {
        clip_desc *tr = d + (k - 1);
        if (lua_rawgeti(L, 1, k) != LUA_TTABLE)
            luaL_error(L, PREFIX ": tracks[%I] must be a table", k);
        int tt = lua_gettop(L);
        int tj = lcore_rawfield(L, tt, "joint"), tn = lcore_rawfield(L, tt, "node");
        if ((tj == LUA_TNIL) == (tn == LUA_TNIL))
            luaL_error(L, PREFIX ": tracks[%I] needs exactly one of joint or node", k);
        int isint;
        lua_Integer target = lua_tointegerx(L, tj != LUA_TNIL ? -2 : -1, &isint);
        lua_pop(L, 2);
        if (!isint || target < (tj != LUA_TNIL ? 1 : 0) ||
            target > (tj != LUA_TNIL ? (lua_Integer)LMB_MAX_JOINTS : (lua_Integer)UINT32_MAX))
            luaL_error(L, PREFIX ": tracks[%I]: %s must be an integer in [%d, %I]", k,
                       tj != LUA_TNIL ? "joint" : "node", tj != LUA_TNIL ? 1 : 0,
                       tj != LUA_TNIL ? (lua_Integer)LMB_MAX_JOINTS : (lua_Integer)UINT32_MAX);
        tr->is_node = tj == LUA_TNIL;
        tr->target = (uint32_t)(tr->is_node ? target : target - 1);
        lcore_rawfield(L, tt, "path");
        int pi = option_index(L, path_names);
        if (pi < 0)
            luaL_error(L,
                       PREFIX ": tracks[%I]: path must be \"translation\", \"rotation\", "
                              "\"scale\" or \"float\" (got %s)",
                       k,
                       lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, -1));
        lua_pop(L, 1);
        size_t w = pi == LMB_PATH_R ? 4 : 3;
        if (pi == LMB_PATH_F) {
            if (!tr->is_node)
                luaL_error(L, PREFIX ": tracks[%I]: float tracks need a node target, not a joint",
                           k);
            int isw = 1;
            lua_Integer fw =
                lcore_rawfield(L, tt, "width") == LUA_TNIL ? 1 : lua_tointegerx(L, -1, &isw);
            lua_pop(L, 1);
            if (!isw || fw < 1 || fw > LMB_FLOAT_WIDTH)
                luaL_error(L,
                           PREFIX ": tracks[%I]: float track width must be an integer in [1, %d]",
                           k, LMB_FLOAT_WIDTH);
            w = (size_t)fw;
        }
        int ii = LMB_LINEAR;
        if (lcore_rawfield(L, tt, "interpolation") != LUA_TNIL) ii = option_index(L, interp_names);
        if (ii < 0)
            luaL_error(L,
                       PREFIX ": tracks[%I]: interpolation must be \"STEP\", \"LINEAR\" or "
                              "\"CUBICSPLINE\" (got %s)",
                       k,
                       lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, -1));
        lua_pop(L, 1);
        tr->path = (uint8_t)pi, tr->interp = (uint8_t)ii, tr->width = (uint8_t)w;
        lcore_rawfield(L, tt, "times");
        tr->tsrc = clip_source(L, k, "times", map, objs, src, &nsrc);
        lcore_rawfield(L, tt, "values");
        tr->vsrc = clip_source(L, k, "values", map, objs, src, &nsrc);
        size_t nt = src[tr->tsrc].count, nv = src[tr->vsrc].count;
        size_t per = ii == LMB_CUBIC ? 3 * w : w;
        if (nt == 0) luaL_error(L, PREFIX ": tracks[%I]: no key times", k);
        if (nt > 0x7fffffff || nv != nt * per)
            luaL_error(L, PREFIX ": tracks[%I]: %I values for %I keys, expected %I (%I per key%s)",
                       k, (lua_Integer)nv, (lua_Integer)nt, (lua_Integer)(nt * per),
                       (lua_Integer)per, ii == LMB_CUBIC ? ": in-tangent, value, out-tangent" : "");
        tr->nt = (uint32_t)nt, tr->nv = (uint32_t)nv;
        tr->shared = 0;
        clip_src *ts = src + tr->tsrc;
        if (ts->times_offset == UINT32_MAX) {
            if (nt > 0x7fffffff - keys) luaL_error(L, PREFIX ": too many keys");
            ts->times_offset = (uint32_t)keys;
            keys += nt;
        } else {
            tr->shared = LMB_SHARE_TIMES;
        }
        tr->times = ts->times_offset;
        /* records: shared by tracks with the same times, values, interpolation, path, width */
        lua_Integer rkey =
            ((((lua_Integer)tr->tsrc << 21 | (lua_Integer)tr->vsrc) << 2 | ii) << 2 | pi) << 5 |
            (lua_Integer)w;
        if (lua_rawgeti(L, recs, rkey) == LUA_TNUMBER) {
            tr->values = (uint32_t)lua_tointeger(L, -1);
            tr->shared |= LMB_SHARE_RECORDS;
        } else {
            if (nv + nt > 0x7fffffff - values) luaL_error(L, PREFIX ": too many keys");
            tr->values = (uint32_t)values;
            values += nv + nt;
            lua_pushinteger(L, (lua_Integer)tr->values);
            lua_rawseti(L, recs, rkey);
        }
        lua_pop(L, 2);
    }
    *keys_out = keys, *values_out = values;
    return nsrc;
}

/* Copies every table source (objs[i + 1]) once into floats, checking each
 * number as it is read; sets each source's data. */
static void clip_read_tables(lua_State *L, clip_src *src, uint32_t nsrc, int objs, float *out) {
    for (uint32_t i = 0; i < nsrc; i++) {
        clip_src *c = src + i;
        if (!c->is_table) continue;
        const char *field = c->as_values ? "values" : "times";
        lua_rawgeti(L, objs, (lua_Integer)i + 1);
        for (size_t m = 0; m < c->count; m++) {
            int isnum;
            lua_rawgeti(L, -1, (lua_Integer)m + 1);
            lua_Number v = lua_tonumberx(L, -1, &isnum);
            lua_pop(L, 1);
            if (!isnum || !lcore_float_ok(v)) {
                /* the toolkit's message (no label is made unless needed) */
                lua_pushfstring(L, PREFIX ": tracks[%I]: %s", c->track, field);
                lcore_read_floats(L, -2, lua_tostring(L, -1), 1, out, c->count);
            }
            out[m] = (float)v;
        }
        lua_pop(L, 1);
        c->data = out;
        out += c->count;
    }
}

/* info.node_slots of the info table on top: the node tracks' positions (1-based). */
static void set_node_slots(lua_State *L, const lmb_clip *c) {
    lua_newtable(L);
    int nk = 0;
    for (uint32_t m = c->joint_track_count; m < c->track_count; m++) {
        lua_pushinteger(L, (lua_Integer)m + 1);
        lua_rawseti(L, -2, ++nk);
    }
    lua_setfield(L, -2, "node_slots");
}

/** core.clip(tracks [, name [, dense [, duration]]]): builds an immutable clip. tracks[k] =
 * { joint = j (1-based) | node = id, path = "translation" | "rotation" |
 * "scale", interpolation = "STEP" | "LINEAR" | "CUBICSPLINE" (default
 * LINEAR), times = table | f32 Buffer, values = table | f32 Buffer }.
 * Every table is read once, raw (metamethods are not used). Tracks given
 * the very same times (and values) table or Buffer share those keys in
 * the clip (stored once). dense (default true): build the dense form when
 * the joint tracks share a uniform key grid (false: always the cursor path).
 * duration (optional): the clip lasts at least this long (loops wrap there). */
static int l_clip_new(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    const char *name = luaL_optstring(L, 2, NULL);
    if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TBOOLEAN);
    int want_dense = lua_isnoneornil(L, 3) || lua_toboolean(L, 3);
    double min_duration = 0.0;
    if (!lua_isnoneornil(L, 4)) {
        min_duration = luaL_checknumber(L, 4);
        luaL_argcheck(L, min_duration >= 0.0 && min_duration <= (double)LMB_FLOAT_LIMIT, 4,
                      "duration must be a finite number >= 0");
    }
    lua_settop(L, 2);
    lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
    if (n > 1000000) return luaL_error(L, PREFIX ": %I tracks is too many", n);
    size_t off_src = lmb_align_up((size_t)n * sizeof(clip_desc), 16);
    unsigned char *scratch = (unsigned char *)lua_newuserdatauv(
        L, off_src + 2 * (size_t)n * sizeof(clip_src) + 1, 0); /* 3 */
    clip_desc *desc = (clip_desc *)(void *)scratch;
    clip_src *src = (clip_src *)(void *)(scratch + off_src);
    lua_newtable(L); /* 4: object -> source index + 1 (anchors the objects) */
    lua_createtable(L, (int)(n < 1024 ? n : 1024), 0); /* 5: source index + 1 -> object */
    lua_newtable(L);                                   /* 6: record key -> record offset */
    size_t keys = 0, values = 0;
    uint32_t nsrc = clip_read_tracks(L, n, desc, src, 4, 5, 6, &keys, &values);
    size_t table_floats = 0;
    for (uint32_t i = 0; i < nsrc; i++)
        if (src[i].is_table) table_floats += src[i].count;
    float *copy = (float *)lua_newuserdatauv(L, table_floats * sizeof(float) + 1, 0); /* 7 */
    clip_read_tables(L, src, nsrc, 5, copy);
    size_t bytes = lmb_clip_bytes((uint32_t)n, (uint32_t)keys, (uint32_t)values);
    lmb_clip *c = (lmb_clip *)lcore_newobject(L, bytes, 1, CLIP_MT); /* 8 */
    lmb_clip_place(c, (uint32_t)n, (uint32_t)keys, (uint32_t)values);
    /* fill from the copy (shapes were checked when read) */
    for (lua_Integer k = 1; k <= n; k++) {
        const clip_desc *d = desc + (k - 1);
        lmb_track *tr = c->tracks + (k - 1);
        tr->is_node = d->is_node;
        tr->target = d->target;
        tr->path = d->path;
        tr->interp = d->interp;
        tr->width = d->width;
        tr->shared = d->shared;
        tr->key_count = d->nt;
        tr->times = d->times;
        tr->values = d->values;
        tr->input = (uint32_t)(k - 1);
        if (!(d->shared & LMB_SHARE_TIMES))
            memcpy(c->times + d->times, src[d->tsrc].data, (size_t)d->nt * sizeof(float));
        if (!(d->shared & LMB_SHARE_RECORDS)) {
            size_t per = d->nv / d->nt;
            const float *v = src[d->vsrc].data;
            float *rec = c->values + d->values;
            for (size_t r = 0; r < d->nt; r++)
                memcpy(rec + r * (per + 1) + 1, v + r * per, per * sizeof(float));
        }
    }
    lmb_error err;
    if (lmb_clip_finish(c, &err) != LMB_OK) return lcore_raise(L, &err, PREFIX);
    /* info table: name and node tracks in input order */
    lua_createtable(L, 0, 2);
    if (name) {
        lua_pushstring(L, name);
        lua_setfield(L, -2, "name");
    }
    set_node_slots(L, c);
    /* a longer duration than the keys' (channels limber does not sample,
     * such as glTF weights, can run longer): the tracks hold their last key */
    if ((float)min_duration > c->duration) c->duration = (float)min_duration;
    size_t dense = want_dense ? lmb_clip_dense_bytes(c) : 0;
    lua_pushinteger(L, (lua_Integer)(bytes + dense));
    lua_setfield(L, -2, "bytes");
    if (dense > 0) {
        /* the dense frames live in a plain userdata anchored by the info table */
        void *mem = lua_newuserdatauv(L, dense, 0);
        lmb_clip_dense_build(c, mem);
        lua_setfield(L, -2, "dense_frames");
    }
    lua_setiuservalue(L, 8, 1);
    lua_settop(L, 8);
    return 1;
}

/** clip:dense(): true when the clip has the dense form (uniform key grid
 * shared by every joint track, LINEAR or STEP), sampled in O(1) per instance. */
static int l_clip_dense(lua_State *L) {
    lua_pushboolean(L, check_clip(L, 1)->dense.data != NULL);
    return 1;
}

static int l_clip_duration(lua_State *L) {
    lua_pushnumber(L, (lua_Number)check_clip(L, 1)->duration);
    return 1;
}

/* Pushes field `name` of the clip's info table (user value 1). */
static int clip_info(lua_State *L, const char *name) {
    check_clip(L, 1);
    lua_getiuservalue(L, 1, 1);
    lua_getfield(L, -1, name);
    return 1;
}

static int l_clip_name(lua_State *L) {
    return clip_info(L, "name");
}

/** clip:node_tracks(): array of { node =, path =, interpolation =, keys = }. */
static int l_clip_node_tracks(lua_State *L) {
    lmb_clip *c = check_clip(L, 1);
    lua_createtable(L, (int)(c->track_count - c->joint_track_count), 0);
    for (uint32_t m = c->joint_track_count; m < c->track_count; m++) {
        const lmb_track *tr = c->tracks + m;
        lua_createtable(L, 0, 4);
        lua_pushinteger(L, tr->target);
        lua_setfield(L, -2, "node");
        lua_pushstring(L, path_names[tr->path]);
        lua_setfield(L, -2, "path");
        lua_pushstring(L, interp_names[tr->interp]);
        lua_setfield(L, -2, "interpolation");
        lua_pushinteger(L, tr->key_count);
        lua_setfield(L, -2, "keys");
        lua_rawseti(L, -2, (lua_Integer)(m - c->joint_track_count) + 1);
    }
    return 1;
}

/** clip:joint_tracks(): array of { joint =, path =, interpolation =, keys = }
 * sorted by joint then path. */
/* The k-th joint track of clip c as a track record: an entry of tracks[],
 * or for a packed clip one made from its tracked bits (no keys of its own:
 * sampling it decodes the packed streams). Returns 0 past the last. */
static int clip_joint_track(const lmb_clip *c, uint32_t k, lmb_track *out) {
    if (!c->packed.streams) {
        if (k >= c->joint_track_count) return 0;
        *out = c->tracks[k];
        return 1;
    }
    const lmb_packed *p = &c->packed;
    for (uint32_t j = 0; j < p->chunks * 8u; j++) {
        for (uint32_t path = 0; path < 3; path++) {
            if (!lmb_packed_tracks(p, j, path) || k-- > 0) continue;
            memset(out, 0, sizeof *out);
            out->target = j, out->path = (uint8_t)path, out->interp = (uint8_t)p->interp;
            out->width = path == LMB_PATH_R ? 4 : 3;
            out->key_count = p->streams[(size_t)(j / 8) * 3 + path].keys;
            return 1;
        }
    }
    return 0;
}

static int l_clip_joint_tracks(lua_State *L) {
    lmb_clip *c = check_clip(L, 1);
    lua_createtable(L, (int)lmb_clip_joint_track_count(c), 0);
    lmb_track t;
    for (uint32_t m = 0; clip_joint_track(c, m, &t); m++) {
        lua_createtable(L, 0, 4);
        lua_pushinteger(L, (lua_Integer)t.target + 1);
        lua_setfield(L, -2, "joint");
        lua_pushstring(L, path_names[t.path]);
        lua_setfield(L, -2, "path");
        lua_pushstring(L, interp_names[t.interp]);
        lua_setfield(L, -2, "interpolation");
        lua_pushinteger(L, t.key_count);
        lua_setfield(L, -2, "keys");
        lua_rawseti(L, -2, (lua_Integer)m + 1);
    }
    return 1;
}

/* A time argument in double: wrapping a long clip's time rounded to float
 * first would move it (3000 s in float is only good to 0.25 ms). */
double lcore_check_time(lua_State *L, int arg) {
    lua_Number t = luaL_checknumber(L, arg);
    if (!isfinite(t))
        luaL_argerror(L, arg, lua_pushfstring(L, "time is not a finite number (%f)", t));
    return (double)t;
}

static int push_sample(lua_State *L, const lmb_clip *c, const lmb_track *tr, int targ, int larg) {
    double t = lcore_check_time(L, targ);
    int loop = lua_isnoneornil(L, larg) ? 1 : lua_toboolean(L, larg); /* loops by default */
    lmb_cursor cursor = {0, 0.0f, 0.0f};
    float v[LMB_FLOAT_WIDTH];
    lmb_track_sample(c, tr, lmb_clip_time(c, (double)t, loop), &cursor, v);
    for (int m = 0; m < tr->width; m++)
        lua_pushnumber(L, (lua_Number)v[m]);
    return tr->width;
}

/** clip:sample_node(k, t [, loop]): the value of node track k (1-based, as
 * in node_tracks()) at time t (wrapped unless loop is false, then clamped),
 * as 3 or 4 numbers. */
static int l_clip_sample_node(lua_State *L) {
    lmb_clip *c = check_clip(L, 1);
    uint32_t k = lcore_check_index(L, 2, c->track_count - c->joint_track_count, "node track");
    return push_sample(L, c, c->tracks + c->joint_track_count + k, 3, 4);
}

/** clip:sample_joint(j, path, t [, loop]): the value of joint j's track for
 * `path` at time t (wrapped unless loop is false, then clamped): 3 or 4
 * numbers, or nil when the clip has no such track. */
static int l_clip_sample_joint(lua_State *L) {
    lmb_clip *c = check_clip(L, 1);
    lua_Integer j = luaL_checkinteger(L, 2);
    int path = luaL_checkoption(L, 3, NULL, path_names);
    lcore_check_time(L, 4);
    if (c->packed.streams) {
        if (j < 1 || j > (lua_Integer)c->joint_span ||
            !lmb_packed_tracks(&c->packed, (uint32_t)(j - 1), (uint32_t)path)) {
            lua_pushnil(L);
            return 1;
        }
        lmb_track t;
        memset(&t, 0, sizeof t);
        t.target = (uint32_t)(j - 1), t.path = (uint8_t)path, t.width = path == LMB_PATH_R ? 4 : 3;
        return push_sample(L, c, &t, 4, 5);
    }
    for (uint32_t m = 0; m < c->joint_track_count; m++) {
        const lmb_track *tr = c->tracks + m;
        if ((lua_Integer)tr->target + 1 == j && tr->path == path)
            return push_sample(L, c, tr, 4, 5);
    }
    lua_pushnil(L);
    return 1;
}

/* track_keys of a packed clip: the keys of the stream that holds (joint
 * j, path): its key frames (every step-th frame of the grid and the last
 * one, or the stream's own frames), their grid times and the values
 * decoded there (what the sampler gives at those times). */
static int packed_track_keys(lua_State *L, const lmb_clip *c, lua_Integer j, int path) {
    const lmb_packed *p = &c->packed;
    if (path > LMB_PATH_S || j < 1 || j > (lua_Integer)c->joint_span ||
        !lmb_packed_tracks(p, (uint32_t)(j - 1), (uint32_t)path)) {
        lua_pushnil(L);
        return 1;
    }
    static const uint32_t first[3] = {0, 3, 7}; /* the path's components in a decoded chunk */
    const uint32_t q = (uint32_t)(j - 1) / 8, lane = (uint32_t)(j - 1) % 8;
    const uint32_t width = path == LMB_PATH_R ? 4 : 3;
    const lmb_pstream *s = p->streams + (size_t)q * 3 + (size_t)path;
    lua_createtable(L, (int)s->keys, 0);
    lua_createtable(L, (int)(s->keys * width), 0);
    float out[10 * 8];
    for (uint32_t k = 0; k < s->keys; k++) {
        uint32_t f = s->step ? (k * s->step < p->frames - 1 ? k * s->step : p->frames - 1)
                             : p->keyframes[s->kf + k];
        double t = p->times ? (double)p->times[f] : (double)p->t0 + (double)f * (double)p->dt;
        lua_pushnumber(L, (lua_Number)t);
        lua_rawseti(L, -3, (lua_Integer)k + 1);
        lmb_packed_chunk(p, q, (float)f, out, 8);
        for (uint32_t e = 0; e < width; e++) {
            lua_pushnumber(L, (lua_Number)out[(first[path] + e) * 8 + lane]);
            lua_rawseti(L, -2, (lua_Integer)(k * width + e) + 1);
        }
    }
    lua_pushstring(L, interp_names[p->interp]);
    /* the bits each component of a key takes (0: stored once or derived) */
    lua_createtable(L, (int)width, 0);
    const float *rg = p->ranges + s->range;
    uint32_t bits[4] = {0, 0, 0, 0}, derived = 4; /* the derived component (4: none) */
    for (uint32_t r = 0; r < width; r++) {
        uint32_t kd = s->kind[r], w[8];
        if (kd == LMB_PK_F32) bits[r] = 32;
        if (lmb_pk_quantized(kd)) bits[r] = kd - 16u;
        if (lmb_pk_var(kd)) {
            lmb_pk_var_widths(kd, s->skip, rg[16], w);
            bits[r] = w[lane];
        }
        if (kd == LMB_PK_DERIVE) derived = 3;
        if (kd == LMB_PK_DERIVE_ANY) derived = (uint32_t)rg[0] >> (2 * lane) & 3u;
        rg += lmb_pk_range_floats(kd);
    }
    /* DERIVE_ANY: rows 0 .. 2 hold the components other than the derived one */
    for (uint32_t e = 0, r = 0; e < width; e++) {
        lua_pushinteger(L, (lua_Integer)(e == derived ? 0 : bits[r++]));
        lua_rawseti(L, -2, (lua_Integer)e + 1);
    }
    return 4;
}

/** clip:track_keys(j, path): the keys of joint j's track for `path`: key
 * times (table), values (flat table: width numbers per key, in-tangent,
 * value, out-tangent for CUBICSPLINE; rotations normalised) and the
 * interpolation name; nil when the clip has no such track. A packed clip
 * gives the keys its stream keeps, decoded (LINEAR or STEP); between them
 * it interpolates as an exact clip of those keys does, except on an
 * irregular grid, where it interpolates by grid frame, not by time; and a
 * fourth value: per component, the bits each key stores for it (0: stored
 * once, a rotation's component derived from the other three, or a uniform
 * translation's or scale's y and z read from x; 32: a raw float). */
static int l_clip_track_keys(lua_State *L) {
    lmb_clip *c = check_clip(L, 1);
    lua_Integer j = luaL_checkinteger(L, 2);
    int path = luaL_checkoption(L, 3, NULL, path_names);
    if (c->packed.streams) return packed_track_keys(L, c, j, path);
    for (uint32_t m = 0; m < c->joint_track_count; m++) {
        const lmb_track *tr = c->tracks + m;
        if ((lua_Integer)tr->target + 1 != j || tr->path != path) continue;
        uint32_t per = tr->interp == LMB_CUBIC ? 3u * tr->width : tr->width;
        lua_createtable(L, (int)tr->key_count, 0);
        lua_createtable(L, (int)(tr->key_count * per), 0);
        for (uint32_t k = 0; k < tr->key_count; k++) {
            const float *rec = c->values + tr->values + (size_t)k * tr->stride;
            lua_pushnumber(L, (lua_Number)c->times[tr->times + k]);
            lua_rawseti(L, -3, (lua_Integer)k + 1);
            for (uint32_t e = 0; e < per; e++) {
                lua_pushnumber(L, (lua_Number)rec[1 + e]);
                lua_rawseti(L, -2, (lua_Integer)(k * per + e) + 1);
            }
        }
        lua_pushstring(L, interp_names[tr->interp]);
        return 3;
    }
    lua_pushnil(L);
    return 1;
}

/** clip:joint_span(): the largest joint index a track animates (0 if none). */
static int l_clip_joint_span(lua_State *L) {
    lua_pushinteger(L, check_clip(L, 1)->joint_span);
    return 1;
}

/** clip:track_count() (also #clip): joint and node tracks. */
static int l_clip_track_count(lua_State *L) {
    const lmb_clip *c = check_clip(L, 1);
    lua_pushinteger(L, (lua_Integer)c->track_count +
                           (c->packed.streams ? (lua_Integer)c->packed.tracked_count : 0));
    return 1;
}

/** clip:key_count(): total number of keys over every track. */
static int l_clip_key_count(lua_State *L) {
    const lmb_clip *c = check_clip(L, 1);
    lua_Integer total = 0; /* shared keys count once per track using them */
    for (uint32_t m = 0; m < c->track_count; m++)
        total += c->tracks[m].key_count;
    lmb_track t;
    for (uint32_t m = 0; c->packed.streams && clip_joint_track(c, m, &t); m++)
        total += t.key_count; /* a packed clip's joint tracks: their streams' keys */
    lua_pushinteger(L, total);
    return 1;
}

static int l_clip_tostring(lua_State *L) {
    lmb_clip *c = check_clip(L, 1);
    lua_getiuservalue(L, 1, 1);
    lua_getfield(L, -1, "name");
    lua_pushfstring(L, "limber.Clip(%s, %f s, %d tracks)",
                    lua_isstring(L, -1) ? lua_tostring(L, -1) : "unnamed", (lua_Number)c->duration,
                    (int)(c->track_count + (c->packed.streams ? c->packed.tracked_count : 0)));
    return 1;
}

/* Sets t[name] = v on the table at the top of the stack. */
static void set_number(lua_State *L, const char *name, double v) {
    lua_pushnumber(L, (lua_Number)v);
    lua_setfield(L, -2, name);
}

/* Pushes the error table of clip:error() from stats. */
static void push_stats(lua_State *L, const lmb_pack_stats *st, double tolerance, double distance) {
    lua_createtable(L, 0, 8);
    set_number(L, "max_error", st->max_joint);
    set_number(L, "max_error_distance", st->max_distance);
    set_number(L, "p99_error_distance", st->p99_distance);
    lua_pushinteger(L, (lua_Integer)st->worst_joint + 1);
    lua_setfield(L, -2, "worst_joint");
    set_number(L, "worst_time", (double)st->worst_time);
    lua_pushinteger(L, (lua_Integer)st->samples);
    lua_setfield(L, -2, "samples");
    set_number(L, "tolerance", tolerance);
    set_number(L, "distance", distance);
}

/** core.clip_pack(clip, skeleton, tolerance, distance [, cache_bytes [, source_keys]]):
 * a packed copy of clip (pack.h) whose model-space error for skeleton stays
 * within tolerance at the joints and at `distance` from them, or nil and a
 * message when no packing meets the tolerance. cache_bytes (an integer >= 0,
 * default LMB_PACK_CACHE_BYTES) caps the source samples kept while packing;
 * source_keys (a boolean, default false) keeps every key at its source
 * value (lmb_pack_job.source_keys). Bad arguments raise. */
static int l_clip_pack(lua_State *L) {
    lmb_clip *src = check_clip(L, 1);
    lmb_skeleton *sk = lcore_check_skeleton(L, 2);
    lmb_pack_job job;
    memset(&job, 0, sizeof job);
    job.src = src, job.skel = sk;
    job.tolerance = lcore_check_float(L, 3, "tolerance");
    job.distance = lcore_check_float(L, 4, "distance");
    job.cache_bytes = LMB_PACK_CACHE_BYTES;
    if (!lua_isnoneornil(L, 5)) {
        lua_Integer cb = luaL_checkinteger(L, 5);
        luaL_argcheck(L, cb >= 0, 5, "cache bytes must be >= 0");
        job.cache_bytes = (uint64_t)cb > (uint64_t)SIZE_MAX ? SIZE_MAX : (size_t)cb;
    }
    if (!lua_isnoneornil(L, 6)) {
        luaL_checktype(L, 6, LUA_TBOOLEAN);
        job.source_keys = lua_toboolean(L, 6);
    }
    lua_settop(L, 4);
    lmb_error err;
    lmb_error_clear(&err);
    if (src->packed.streams)
        return luaL_argerror(L, 1, "the clip is packed already (pack the exact clip)");
    if (src->joint_span > sk->joint_count)
        return luaL_argerror(L, 2,
                             lua_pushfstring(L,
                                             "the clip animates joint %d of a %d-joint "
                                             "skeleton",
                                             (int)src->joint_span, (int)sk->joint_count));
    if (!(job.tolerance > 0.0f))
        return luaL_argerror(
            L, 3, lua_pushfstring(L, "tolerance must be > 0 (got %f)", (lua_Number)job.tolerance));
    if (!(job.distance >= 0.0f))
        return luaL_argerror(
            L, 4, lua_pushfstring(L, "distance must be >= 0 (got %f)", (lua_Number)job.distance));
    job.pool = lcore_pool(L);
    /* the thread count once: allocating the scratch may run a __gc that sets another */
    job.workers = lmb_pack_workers(job.pool);
    size_t sb = lmb_pack_scratch_bytes(src, sk, job.cache_bytes, job.workers);
    if (sb == 0) { /* a limit, not a bad argument: the clip stays usable exact */
        lua_pushnil(L);
        lua_pushliteral(L, "limber.anim.pack: the clip is too large to pack");
        return 2;
    }
    void *scratch = lua_newuserdatauv(L, sb, 0); /* 5 */
    if (lmb_pack_plan(&job, scratch, &err) != LMB_OK) {
        if (err.code == LMB_ERANGE && strcmp(err.field, "tolerance") == 0) {
            char buf[256];
            lmb_error_format(&err, buf, sizeof buf);
            lua_pushnil(L);
            lua_pushfstring(L, "limber.anim.pack: %s", buf);
            return 2;
        }
        return lcore_raise(L, &err, "limber.anim.pack");
    }
    void *mem = lcore_newobject(L, job.bytes, 1, CLIP_MT); /* 6 */
    lmb_clip *c = lmb_pack_write(&job, scratch, mem);
    lua_createtable(L, 0, 4); /* 7: info */
    lua_getiuservalue(L, 1, 1);
    lua_getfield(L, -1, "name");
    lua_setfield(L, -3, "name");
    lua_getfield(L, -1, "bytes");
    lua_setfield(L, -3, "source_bytes");
    lua_pop(L, 1);
    lua_pushinteger(L, (lua_Integer)job.bytes);
    lua_setfield(L, -2, "bytes");
    char hex[17];
    lcore_rig_hash(L, 2, hex);
    lua_pushstring(L, hex);
    lua_setfield(L, -2, "rig_hash");
    set_node_slots(L, c);
    push_stats(L, &job.stats, (double)job.tolerance, (double)job.distance);
    lua_setfield(L, -2, "error");
    lua_setiuservalue(L, 6, 1);
    lua_settop(L, 6);
    return 1;
}

/** clip:packed(): true for a packed clip (limber.anim.pack). */
static int l_clip_packed(lua_State *L) {
    lua_pushboolean(L, check_clip(L, 1)->packed.streams != NULL);
    return 1;
}

/** clip:rig_hash(): a packed clip's skeleton's rig hash (skeleton:rig_hash), or nil. */
static int l_clip_rig_hash(lua_State *L) {
    return clip_info(L, "rig_hash");
}

/** clip:bytes(): the bytes the clip holds (keys, dense frames or packed streams, tables). */
static int l_clip_bytes(lua_State *L) {
    return clip_info(L, "bytes");
}

/** clip:error([source, skeleton, distance]): the packed clip's error
 * against its source as measured when packed: { max_error (at the joints),
 * max_error_distance, p99_error_distance (at `distance` from them),
 * worst_joint, worst_time, samples, tolerance, distance, bytes }; an exact
 * clip reports zeros. With a source clip and a skeleton, measures again
 * against that source (any two clips of the skeleton). */
static int l_clip_error(lua_State *L) {
    lmb_clip *c = check_clip(L, 1);
    if (!lua_isnoneornil(L, 2)) {
        lmb_clip *src = check_clip(L, 2);
        lmb_skeleton *sk = lcore_check_skeleton(L, 3);
        float distance = lcore_check_float(L, 4, "distance");
        luaL_argcheck(L, distance >= 0.0f, 4, "distance must be >= 0");
        if (src->packed.streams) return luaL_argerror(L, 2, "the source must be an exact clip");
        if (src->joint_span > sk->joint_count || c->joint_span > sk->joint_count)
            return luaL_argerror(L, 3, "the skeleton has fewer joints than the clips animate");
        struct lmb_pool *pool = lcore_pool(L);
        uint32_t workers = lmb_pack_workers(pool); /* once, as in l_clip_pack */
        size_t sb = lmb_pack_scratch_bytes(src, sk, LMB_PACK_CACHE_BYTES, workers);
        if (sb == 0) return luaL_argerror(L, 2, "the clip is too large to measure");
        void *scratch = lua_newuserdatauv(L, sb, 0);
        lmb_pack_stats st;
        lmb_pack_measure(src, c, sk, distance, pool, workers, scratch, &st);
        push_stats(L, &st, 0.0, (double)distance);
    } else {
        lua_getiuservalue(L, 1, 1);
        lua_getfield(L, -1, "error");
        if (lua_istable(L, -1)) {
            /* a copy: the caller may change it */
            lua_newtable(L);
            lua_pushnil(L);
            while (lua_next(L, -3)) {
                lua_pushvalue(L, -2);
                lua_insert(L, -2);
                lua_rawset(L, -4);
            }
        } else {
            lmb_pack_stats st;
            memset(&st, 0, sizeof st);
            push_stats(L, &st, 0.0, 0.0);
        }
    }
    lua_getiuservalue(L, 1, 1);
    lua_getfield(L, -1, "bytes");
    lua_setfield(L, -3, "bytes");
    lua_pop(L, 1);
    return 1;
}

/* ---- Sampler ---------------------------------------------------------- */

static lmb_sampler *check_sampler(lua_State *L, int arg) {
    return (lmb_sampler *)lmb_align_ptr(luaL_checkudata(L, arg, SAMPLER_MT), 64);
}

/** core.sampler(pose, clips): plays one of `clips` (an array of Clips whose
 * joint tracks fit the pose's skeleton) per instance of `pose`. Every
 * instance starts with no clip (not sampled). */
static int l_sampler_new(lua_State *L) {
    lmb_pose *p = lcore_check_pose(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    /* the clips are read once, raw, into a private array (4), checked and
     * used from there: metamethods of the caller's table are never run */
    lua_Integer nc = (lua_Integer)lua_rawlen(L, 2);
    if (nc < 1 || nc > 65535)
        return luaL_argerror(L, 2, lua_pushfstring(L, "clip count %I out of range [1, 65535]", nc));
    uint32_t J = p->joint_count, stride = 0;
    size_t untracked = 0;
    lua_createtable(L, (int)nc, 0); /* 3: anchors the clips */
    const lmb_clip **got =
        (const lmb_clip **)lua_newuserdatauv(L, (size_t)nc * sizeof(void *), 0); /* 4 */
    for (lua_Integer k = 1; k <= nc; k++) {
        lua_rawgeti(L, 2, k);
        lmb_clip *c = (lmb_clip *)luaL_testudata(L, -1, CLIP_MT);
        if (!c)
            return luaL_argerror(L, 2,
                                 lua_pushfstring(L, "clips[%I] is not a limber.Clip (got %s)", k,
                                                 luaL_typename(L, -1)));
        c = (lmb_clip *)lmb_align_ptr(c, 64);
        if (lmb_clip_cursor_count(c) > stride) stride = lmb_clip_cursor_count(c);
        untracked += lmb_clip_untracked(c, J, NULL);
        got[k - 1] = c;
        lua_rawseti(L, 3, k);
    }
    /* the kernel's rules, before anything is allocated (no per-instance
     * arrays yet: every instance starts with no clip) */
    lmb_sampler job;
    memset(&job, 0, sizeof job);
    job.pose = p;
    job.clip_count = (uint32_t)nc;
    job.cursor_stride = stride;
    job.clips = got;
    job.root_joint = -1;
    lmb_error err;
    if (lmb_sampler_validate(&job, 0, p->instance_count, &err) != LMB_OK)
        return lcore_raise_arg(L, 2, &err);
    uint32_t N = p->instance_count;
    size_t off_clips = lmb_align_up(sizeof(lmb_sampler), 16);
    size_t off_uf = off_clips + lmb_align_up((size_t)nc * sizeof(void *), 16);
    size_t off_u = off_uf + lmb_align_up(((size_t)nc + 1) * 4, 16);
    size_t off_cur = off_u + lmb_align_up(untracked * 4 + 4, 16);
    size_t off_clip = off_cur + lmb_align_up((size_t)N * stride * sizeof(lmb_cursor) + 4, 64);
    size_t off_time = off_clip + lmb_align_up((size_t)N * 4, 16);
    size_t off_rate = off_time + lmb_align_up((size_t)N * 8, 16);
    size_t off_loop = off_rate + lmb_align_up((size_t)N * 4, 16);
    size_t bytes = off_loop + N;
    unsigned char *m = (unsigned char *)lcore_newobject(L, bytes, 2, SAMPLER_MT); /* 5 */
    lmb_sampler *s = (lmb_sampler *)(void *)m;
    s->pose = p;
    s->clip_count = (uint32_t)nc;
    s->cursor_stride = stride;
    const lmb_clip **clips = (const lmb_clip **)(void *)(m + off_clips);
    uint32_t *uf = (uint32_t *)(void *)(m + off_uf), *u = (uint32_t *)(void *)(m + off_u);
    s->clips = clips;
    s->untracked_first = uf;
    s->untracked = u;
    s->cursors = (lmb_cursor *)(void *)(m + off_cur);
    s->clip = (int32_t *)(void *)(m + off_clip);
    s->time = (double *)(void *)(m + off_time);
    s->rate = (float *)(void *)(m + off_rate);
    s->loop = m + off_loop;
    uint32_t pos = 0;
    for (lua_Integer k = 1; k <= nc; k++) {
        const lmb_clip *c = got[k - 1];
        clips[k - 1] = c;
        uf[k - 1] = pos;
        pos += lmb_clip_untracked(c, J, u + pos);
    }
    uf[nc] = pos;
    lua_pushvalue(L, 3);
    lua_setiuservalue(L, 5, 2);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, 5, 1); /* the sampler writes into the pose */
    s->root_joint = -1;
    for (uint32_t i = 0; i < N; i++) {
        s->clip[i] = -1;
        s->rate[i] = 1.0f;
        s->loop[i] = 1;
    }
    return 1;
}

/** sampler:set(i, clip, time [, loop [, rate]]): instance i plays clip
 * number `clip` (1-based in the sampler's set; nil: not sampled) at
 * `time` seconds (wrapped when loop, the default, else clamped). `rate` is
 * used by sampler:advance (default 1; negative plays backwards). */
static int l_sampler_set(lua_State *L) {
    lmb_sampler *s = check_sampler(L, 1);
    uint32_t i = lcore_check_index(L, 2, s->pose->instance_count, "instance");
    int32_t k = -1;
    if (!lua_isnoneornil(L, 3)) k = (int32_t)lcore_check_index(L, 3, s->clip_count, "clip");
    double t = lcore_check_time(L, 4);
    int loop = lua_isnoneornil(L, 5) ? 1 : lua_toboolean(L, 5);
    float rate = lua_isnoneornil(L, 6) ? s->rate[i] : lcore_check_float(L, 6, "rate");
    if (k != s->clip[i]) /* cursors belong to the clip they were used with */
        memset(s->cursors + (size_t)i * s->cursor_stride, 0, s->cursor_stride * sizeof(lmb_cursor));
    s->clip[i] = k;
    s->time[i] = t;
    s->loop[i] = (uint8_t)loop;
    s->rate[i] = rate;
    return 0;
}

/** sampler:set_time(i, time): only the time of instance i. */
static int l_sampler_set_time(lua_State *L) {
    lmb_sampler *s = check_sampler(L, 1);
    uint32_t i = lcore_check_index(L, 2, s->pose->instance_count, "instance");
    s->time[i] = lcore_check_time(L, 3);
    return 0;
}

/** sampler:get(i): clip number (nil for none), time, loop, rate of instance i. */
static int l_sampler_get(lua_State *L) {
    lmb_sampler *s = check_sampler(L, 1);
    uint32_t i = lcore_check_index(L, 2, s->pose->instance_count, "instance");
    if (s->clip[i] < 0)
        lua_pushnil(L);
    else
        lua_pushinteger(L, s->clip[i] + 1);
    lua_pushnumber(L, (lua_Number)s->time[i]);
    lua_pushboolean(L, s->loop[i]);
    lua_pushnumber(L, (lua_Number)s->rate[i]);
    return 4;
}

/** sampler:advance(dt): time += rate * dt for every instance with a clip
 * (wrapped into the clip when looping, clamped otherwise), in double:
 * finite rates and dt (at most LMB_FLOAT_LIMIT in magnitude) give finite times. */
static int l_sampler_advance(lua_State *L) {
    lmb_sampler *s = check_sampler(L, 1);
    lcore_check_float(L, 2, "dt"); /* the check (finite, float range) */
    /* the value in double: 1/60 rounded to float would drift 0.2 ms an hour */
    lmb_sampler_advance(s, (double)lua_tonumber(L, 2));
    return 0;
}

/** sampler:run([first [, count]]): samples instances first ..
 * first+count-1 that have a clip (default first 1, count to the end) into
 * the pose's local transforms. */
static int l_sampler_run(lua_State *L) {
    lmb_sampler *s = check_sampler(L, 1);
    uint32_t N = s->pose->instance_count;
    if (lua_isnoneornil(L, 2)) {
        lmb_sampler_run(s, 0, N);
        return 0;
    }
    uint32_t first = lcore_check_index(L, 2, N, "instance");
    lua_Integer count = luaL_optinteger(L, 3, (lua_Integer)(N - first));
    if (count < 0 || count > (lua_Integer)(N - first))
        return luaL_argerror(
            L, 3,
            lua_pushfstring(L, "count %I out of range [0, %I]", count, (lua_Integer)(N - first)));
    lmb_sampler_run(s, first, (uint32_t)count);
    return 0;
}

/** sampler:reset_cursors(): forget every cursor (the next lookups binary-search). */
static int l_sampler_reset_cursors(lua_State *L) {
    lmb_sampler *s = check_sampler(L, 1);
    memset(s->cursors, 0, (size_t)s->pose->instance_count * s->cursor_stride * sizeof(lmb_cursor));
    return 0;
}

/** sampler:set_root_motion(joint [, xz [, yaw]]): after sampling, removes
 * the root motion of `joint` gained since clip time 0: its x and z
 * translation (xz, default true) and its yaw about +Y (yaw, default false).
 * nil turns removal off. */
static int l_sampler_set_root_motion(lua_State *L) {
    lmb_sampler *s = check_sampler(L, 1);
    if (lua_isnoneornil(L, 2)) {
        s->root_joint = -1;
        return 0;
    }
    uint32_t j = lcore_check_index(L, 2, s->pose->joint_count, "joint");
    uint32_t flags = (lua_isnoneornil(L, 3) || lua_toboolean(L, 3)) ? LMB_ROOT_XZ : 0;
    if (lua_toboolean(L, 4)) flags |= LMB_ROOT_YAW;
    s->root_joint = (int32_t)j;
    s->root_flags = flags;
    return 0;
}

static int l_sampler_pose(lua_State *L) {
    check_sampler(L, 1);
    lua_getiuservalue(L, 1, 1);
    return 1;
}

/** sampler:instance_count() (also #sampler), sampler:clip_count(). */
static int l_sampler_instances(lua_State *L) {
    lua_pushinteger(L, check_sampler(L, 1)->pose->instance_count);
    return 1;
}

static int l_sampler_clip_count(lua_State *L) {
    lua_pushinteger(L, check_sampler(L, 1)->clip_count);
    return 1;
}

static int l_sampler_tostring(lua_State *L) {
    lmb_sampler *s = check_sampler(L, 1);
    lua_pushfstring(L, "limber.Sampler(%d instances, %d clips)", (int)s->pose->instance_count,
                    (int)s->clip_count);
    return 1;
}

/** sampler:clips(): the array of clips (a copy). */
static int l_sampler_clips(lua_State *L) {
    lmb_sampler *s = check_sampler(L, 1);
    lua_getiuservalue(L, 1, 2);
    lua_createtable(L, (int)s->clip_count, 0);
    for (uint32_t k = 1; k <= s->clip_count; k++) {
        lua_rawgeti(L, -2, k);
        lua_rawseti(L, -2, k);
    }
    return 1;
}

/* ---- Blender ---------------------------------------------------------- */

typedef struct lblender {
    lmb_pose *out;
    uint32_t layer_count;
    uint32_t lanes; /* block_count * LMB_LANES */
    lmb_blend_layer *layers;
    float *weights; /* layer_count * lanes */
    float *masks;   /* layer_count * joint_count */
} lblender;

static lblender *check_blender(lua_State *L, int arg) {
    return (lblender *)lmb_align_ptr(luaL_checkudata(L, arg, BLENDER_MT), 64);
}

/* Reads a mask (table or f32 Buffer of J numbers) at stack index `idx`
 * into out, raw (each element read once, no metamethods); raises naming
 * layer k. The range rule is the kernel's (lmb_blend_mask_validate). */
static void read_mask(lua_State *L, int idx, lua_Integer k, uint32_t J, float *out) {
    idx = lua_absindex(L, idx);
    lbuffer *b = (lbuffer *)luaL_testudata(L, idx, BUFFER_MT);
    int tab = !b && lua_type(L, idx) == LUA_TTABLE;
    size_t n = b ? b->count * b->width : tab ? (size_t)lua_rawlen(L, idx) : 0;
    if (!b && !tab)
        luaL_error(L, "limber.blender: layers[%I].mask must be a table or an f32 Buffer", k);
    if (b && b->type != LBUF_F32)
        luaL_error(L, "limber.blender: layers[%I].mask Buffer must be f32", k);
    if (n != J)
        luaL_error(L, "limber.blender: layers[%I].mask has %I weights, expected %I (one per joint)",
                   k, (lua_Integer)n, (lua_Integer)J);
    if (b) {
        memcpy(out, b->data, (size_t)J * sizeof(float));
        return;
    }
    lua_pushvalue(L, idx);
    lua_pushfstring(L, "limber.blender: layers[%I].mask", k);
    lcore_read_floats(L, -2, lua_tostring(L, -1), 1, out, J); /* relative: not an argument */
    lua_pop(L, 2);
}

/** core.blender(out, layers): blends layer poses into `out` (a Pose of the
 * same skeleton and instance count). layers[k] = { pose = Pose, mask =
 * table | Buffer (one weight in [0, 1] per joint) or nil, additive = bool,
 * reference = Pose (additive only: 1 instance or as many as out) }.
 * Weights start at 1 for the first layer and 0 for the others. Every table
 * is read once, raw (metamethods are not used), straight into the new
 * blender, which is returned only when every layer passed. */
static int l_blender_new(lua_State *L) {
    lmb_pose *out = lcore_check_pose(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    lua_Integer n = (lua_Integer)lua_rawlen(L, 2);
    if (n < 1 || n > LMB_BLEND_MAX_LAYERS)
        return luaL_argerror(
            L, 2,
            lua_pushfstring(L, "layer count %I out of range [1, %d]", n, LMB_BLEND_MAX_LAYERS));
    uint32_t J = out->joint_count, lanes = out->block_count * LMB_LANES;
    size_t off_layers = lmb_align_up(sizeof(lblender), 16);
    size_t off_w = off_layers + lmb_align_up((size_t)n * sizeof(lmb_blend_layer), 64);
    size_t off_m = off_w + lmb_align_up((size_t)n * lanes * 4, 64);
    size_t bytes = off_m + (size_t)n * J * 4;
    unsigned char *mem = (unsigned char *)lcore_newobject(L, bytes, 1, BLENDER_MT); /* 3 */
    lblender *bl = (lblender *)(void *)mem;
    bl->out = out;
    bl->layer_count = (uint32_t)n;
    bl->lanes = lanes;
    bl->layers = (lmb_blend_layer *)(void *)(mem + off_layers);
    bl->weights = (float *)(void *)(mem + off_w);
    bl->masks = (float *)(void *)(mem + off_m);
    lua_createtable(L, (int)n * 2 + 1, 0); /* 4: anchors: out, layer poses, references */
    lua_pushvalue(L, 1);
    lua_rawseti(L, 4, 1);
    for (lua_Integer k = 1; k <= n; k++) {
        lmb_blend_layer *ly = bl->layers + (k - 1);
        memset(ly, 0, sizeof *ly);
        if (lua_rawgeti(L, 2, k) != LUA_TTABLE)
            return luaL_error(L, "limber.blender: layers[%I] must be a table", k);
        int lt = lua_gettop(L);
        lcore_rawfield(L, lt, "pose");
        lmb_pose *p = (lmb_pose *)luaL_testudata(L, -1, POSE_MT);
        if (!p) return luaL_error(L, "limber.blender: layers[%I].pose must be a limber.Pose", k);
        ly->pose = (lmb_pose *)lmb_align_ptr(p, 64);
        lua_rawseti(L, 4, 2 * k);
        lcore_rawfield(L, lt, "additive");
        ly->additive = (uint32_t)lua_toboolean(L, -1);
        lua_pop(L, 1);
        if (lcore_rawfield(L, lt, "reference") != LUA_TNIL) {
            lmb_pose *r = (lmb_pose *)luaL_testudata(L, -1, POSE_MT);
            if (!r)
                return luaL_error(L, "limber.blender: layers[%I].reference must be a limber.Pose",
                                  k);
            ly->reference = (lmb_pose *)lmb_align_ptr(r, 64);
        }
        lua_rawseti(L, 4, 2 * k + 1);
        ly->weight = bl->weights + (size_t)(k - 1) * lanes;
        for (uint32_t i = 0; i < lanes; i++)
            bl->weights[(size_t)(k - 1) * lanes + i] = k == 1;
        lcore_rawfield(L, lt, "mask");
        if (!lua_isnil(L, -1)) {
            float *mask = bl->masks + (size_t)(k - 1) * J;
            read_mask(L, -1, k, J, mask);
            ly->mask = mask;
        }
        lua_settop(L, 4);
    }
    lmb_error err;
    if (lmb_blend_validate(out, bl->layers, bl->layer_count, 0, out->block_count, &err) != LMB_OK)
        return lcore_raise(L, &err, "limber.blender");
    lua_setiuservalue(L, 3, 1);
    return 1;
}

/* A blend weight: a float in [0, LMB_BLEND_MAX_WEIGHT] (blend.h). */
static float check_weight(lua_State *L, int arg) {
    float w = lcore_check_float(L, arg, "weight");
    if (w < 0.0f) luaL_argerror(L, arg, lua_pushfstring(L, "weight %f must be >= 0", (double)w));
    if ((double)w > LMB_BLEND_MAX_WEIGHT)
        luaL_argerror(L, arg,
                      lua_pushfstring(L, "weight %f is above the largest blend weight %f",
                                      (double)w, (lua_Number)LMB_BLEND_MAX_WEIGHT));
    return w;
}

/** blender:set_weight(i, layer, w): the weight of a layer for instance i, a
 * number in [0, 1e6] (weights are relative; the bound keeps their sums
 * finite in float). */
static int l_blender_set_weight(lua_State *L) {
    lblender *b = check_blender(L, 1);
    uint32_t i = lcore_check_index(L, 2, b->out->instance_count, "instance");
    uint32_t l = lcore_check_index(L, 3, b->layer_count, "layer");
    b->weights[(size_t)l * b->lanes + i] = check_weight(L, 4);
    return 0;
}

/** blender:weight(i, layer): the weight of a layer for instance i. */
static int l_blender_weight(lua_State *L) {
    lblender *b = check_blender(L, 1);
    uint32_t i = lcore_check_index(L, 2, b->out->instance_count, "instance");
    uint32_t l = lcore_check_index(L, 3, b->layer_count, "layer");
    lua_pushnumber(L, (lua_Number)b->weights[(size_t)l * b->lanes + i]);
    return 1;
}

/** blender:set_layer_weight(layer, w): the weight (in [0, 1e6]) of a layer
 * for every instance. */
static int l_blender_set_layer_weight(lua_State *L) {
    lblender *b = check_blender(L, 1);
    uint32_t l = lcore_check_index(L, 2, b->layer_count, "layer");
    float w = check_weight(L, 3);
    for (uint32_t i = 0; i < b->out->instance_count; i++)
        b->weights[(size_t)l * b->lanes + i] = w;
    return 0;
}

/** blender:set_mask(layer, mask): replaces a layer's joint mask (nil: none). */
static int l_blender_set_mask(lua_State *L) {
    lblender *b = check_blender(L, 1);
    uint32_t l = lcore_check_index(L, 2, b->layer_count, "layer");
    float *mask = b->masks + (size_t)l * b->out->joint_count;
    if (lua_isnoneornil(L, 3)) {
        b->layers[l].mask = NULL;
        return 0;
    }
    uint32_t J = b->out->joint_count;
    float small[1024];
    float *tmp = J <= 1024 ? small : (float *)lua_newuserdatauv(L, (size_t)J * sizeof(float), 0);
    read_mask(L, 3, (lua_Integer)l + 1, J, tmp); /* check everything first, then commit */
    lmb_error err;
    if (lmb_blend_mask_validate(tmp, J, l, &err) != LMB_OK)
        return lcore_raise(L, &err, "limber.blender");
    memcpy(mask, tmp, J * sizeof(float));
    b->layers[l].mask = mask;
    return 0;
}

/** blender:run(): blends every instance into the output pose. */
static int l_blender_run(lua_State *L) {
    lblender *b = check_blender(L, 1);
    lmb_blend_run(b->out, b->layers, b->layer_count, 0, b->out->block_count);
    return 0;
}

static int l_blender_out(lua_State *L) {
    check_blender(L, 1);
    lua_getiuservalue(L, 1, 1);
    lua_rawgeti(L, -1, 1);
    return 1;
}

/** blender:instance_count() (also #blender), blender:layer_count(). */
static int l_blender_instances(lua_State *L) {
    lua_pushinteger(L, check_blender(L, 1)->out->instance_count);
    return 1;
}

static int l_blender_layer_count(lua_State *L) {
    lua_pushinteger(L, check_blender(L, 1)->layer_count);
    return 1;
}

static int l_blender_tostring(lua_State *L) {
    lblender *b = check_blender(L, 1);
    lua_pushfstring(L, "limber.Blender(%d instances, %d layers)", (int)b->out->instance_count,
                    (int)b->layer_count);
    return 1;
}

void lcore_open_clip(lua_State *L) {
    static const luaL_Reg clip_meta[] = {
        {"__len", l_clip_track_count}, {"__tostring", l_clip_tostring}, {NULL, NULL}};
    static const luaL_Reg sampler_meta[] = {
        {"__len", l_sampler_instances}, {"__tostring", l_sampler_tostring}, {NULL, NULL}};
    static const luaL_Reg blender_meta[] = {
        {"__len", l_blender_instances}, {"__tostring", l_blender_tostring}, {NULL, NULL}};
    static const luaL_Reg clip_methods[] = {{"duration", l_clip_duration},
                                            {"name", l_clip_name},
                                            {"node_tracks", l_clip_node_tracks},
                                            {"joint_tracks", l_clip_joint_tracks},
                                            {"sample_node", l_clip_sample_node},
                                            {"sample_joint", l_clip_sample_joint},
                                            {"track_keys", l_clip_track_keys},
                                            {"joint_span", l_clip_joint_span},
                                            {"key_count", l_clip_key_count},
                                            {"track_count", l_clip_track_count},
                                            {"dense", l_clip_dense},
                                            {"packed", l_clip_packed},
                                            {"bytes", l_clip_bytes},
                                            {"rig_hash", l_clip_rig_hash},
                                            {"error", l_clip_error},
                                            {NULL, NULL}};
    static const luaL_Reg sampler_methods[] = {{"set", l_sampler_set},
                                               {"set_time", l_sampler_set_time},
                                               {"get", l_sampler_get},
                                               {"advance", l_sampler_advance},
                                               {"run", l_sampler_run},
                                               {"reset_cursors", l_sampler_reset_cursors},
                                               {"set_root_motion", l_sampler_set_root_motion},
                                               {"pose", l_sampler_pose},
                                               {"clips", l_sampler_clips},
                                               {"instance_count", l_sampler_instances},
                                               {"clip_count", l_sampler_clip_count},
                                               {NULL, NULL}};
    static const luaL_Reg blender_methods[] = {{"set_weight", l_blender_set_weight},
                                               {"weight", l_blender_weight},
                                               {"set_layer_weight", l_blender_set_layer_weight},
                                               {"set_mask", l_blender_set_mask},
                                               {"run", l_blender_run},
                                               {"output", l_blender_out},
                                               {"instance_count", l_blender_instances},
                                               {"layer_count", l_blender_layer_count},
                                               {NULL, NULL}};
    lcore_class(L, CLIP_MT, clip_meta, clip_methods);
    lcore_class(L, SAMPLER_MT, sampler_meta, sampler_methods);
    lcore_class(L, BLENDER_MT, blender_meta, blender_methods);
    lua_pushcfunction(L, l_clip_new);
    lua_setfield(L, -2, "clip");
    lua_pushcfunction(L, l_clip_pack);
    lua_setfield(L, -2, "clip_pack");
    lua_pushcfunction(L, l_sampler_new);
    lua_setfield(L, -2, "sampler");
    lua_pushcfunction(L, l_blender_new);
    lua_setfield(L, -2, "blender");
}
