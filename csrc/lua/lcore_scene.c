/* lcore_scene.c: Lua types Hierarchy (the matrix storage of a scene, driven
 * by lua/limber/scene.lua) and Slots (a static table of named attachment
 * matrices, also used for flattened prefabs). Node ids are 1-based here
 * and 0-based in the kernel; parent 0 means "no parent". Every check runs
 * before anything is changed. */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "hierarchy.h"
#include "lcore.h"
#include "palette.h"
#include "pose.h"

#define HIER_MT "limber.Hierarchy"
#define SLOTS_MT "limber.Slots"

typedef struct lslots {
    uint32_t count;
    float *m; /* count * 16 floats, affine, column-major */
} lslots;

static lmb_hier *check_hier(lua_State *L, int arg) {
    return (lmb_hier *)lmb_align_ptr(luaL_checkudata(L, arg, HIER_MT), 64);
}

/* Registry key (by address, no string lookup) of the Hierarchy metatable. */
static const char HIER_KEY = 0;

/* The Hierarchy userdata at stack index idx, or NULL: its metatable is
 * compared with the one kept under HIER_KEY (luaL_testudata would look the
 * name up in the registry, a string compare per call on the hot methods). */
static void *test_hier(lua_State *L, int idx) {
    void *u = lua_touserdata(L, idx);
    if (!u || !lua_getmetatable(L, idx)) return NULL;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &HIER_KEY);
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return same ? u : NULL;
}

/* The Hierarchy userdata at argument 1 (a Hierarchy, or a limber.scene
 * table holding one in field "store"), or NULL. */
static void *find_hier(lua_State *L) {
    if (lua_type(L, 1) != LUA_TTABLE) return test_hier(L, 1);
    lua_getfield(L, 1, "store");
    void *u = test_hier(L, -1);
    lua_pop(L, 1); /* the scene table keeps the store alive */
    return u;
}

/* The hierarchy at argument 1, found by find_hier (so the scene's hot methods
 * are these C functions, with no Lua wrapper in between). */
static lmb_hier *self_hier(lua_State *L) {
    void *u = find_hier(L);
    if (!u) {
        if (lua_type(L, 1) == LUA_TTABLE)
            luaL_argerror(L, 1, "limber.Scene or limber.Hierarchy expected");
        luaL_checkudata(L, 1, HIER_MT); /* raises the usual message */
    }
    return (lmb_hier *)lmb_align_ptr(u, 64);
}

static lslots *check_slots(lua_State *L, int arg) {
    return (lslots *)lmb_align_ptr(luaL_checkudata(L, arg, SLOTS_MT), 64);
}

/* Short description of a value for messages: "number nan", "string x", "nil". */
static const char *describe(lua_State *L, int arg) {
    int t = lua_type(L, arg);
    if (t == LUA_TNUMBER || t == LUA_TSTRING)
        return lua_pushfstring(L, "%s %s", luaL_typename(L, arg), luaL_tolstring(L, arg, NULL));
    return luaL_typename(L, arg);
}

/* Raises "limber.scene: <msg>" at the line of the function `level` frames
 * up: 1 is the caller of the hot scene methods (these C functions, called
 * directly by the user), 2 the caller of a Lua wrapper such as Scene:world. */
static int scene_error_at(lua_State *L, int level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    luaL_where(L, level);
    lua_pushstring(L, "limber.scene: ");
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    lua_concat(L, 3);
    return lua_error(L);
}

#define scene_error(L, ...) scene_error_at(L, 1, __VA_ARGS__)

/* A live node id (1-based, as in Lua); errors name the line `level` up. */
static uint32_t check_live_at(lua_State *L, lmb_hier *h, int arg, const char *what, int level) {
    if (!lua_isinteger(L, arg))
        scene_error_at(L, level, "%s must be an integer node id (got %s)", what, describe(L, arg));
    lua_Integer id = lua_tointeger(L, arg);
    if (id < 1 || id > (lua_Integer)h->capacity || !(h->node[id].flags & LMB_HIER_ALIVE))
        scene_error_at(L, level, "%s%snode %I does not exist (unknown or destroyed)",
                       strcmp(what, "node") ? what : "", strcmp(what, "node") ? ": " : "", id);
    return (uint32_t)id;
}

static uint32_t check_live(lua_State *L, lmb_hier *h, int arg, const char *what) {
    return check_live_at(L, h, arg, what, 1);
}

/* A node id in [1, capacity], live or not (raw access for baselines). */
static uint32_t check_slot_id(lua_State *L, lmb_hier *h, int arg) {
    lua_Integer id = luaL_checkinteger(L, arg);
    if (id < 1 || id > (lua_Integer)h->capacity)
        luaL_argerror(
            L, arg,
            lua_pushfstring(L, "node index %I out of range [1, %I]", id, (lua_Integer)h->capacity));
    return (uint32_t)id;
}

static float check_coord(lua_State *L, int arg, const char *what) {
    lua_Number v = lua_tonumber(L, arg);
    if (lua_type(L, arg) != LUA_TNUMBER || !isfinite(v) || fabs(v) > 3.4e38)
        scene_error(L, "%s must be a finite number (got %s)", what, describe(L, arg));
    return (float)v;
}

static lmb_hier *push_hier(lua_State *L, uint32_t cap, uint32_t bound) {
    size_t bytes = lmb_hier_bytes(cap);
    if (bytes == 0) luaL_error(L, "limber.Hierarchy: capacity %I out of range", (lua_Integer)cap);
    void *mem = lua_newuserdatauv(L, bytes, 1);
    luaL_setmetatable(L, HIER_MT);
    return lmb_hier_place(mem, cap, bound);
}

/** core.hierarchy(capacity [, stale_bound]): storage for nodes 1 .. capacity. */
static int l_hier_new(lua_State *L) {
    lua_Integer cap = luaL_checkinteger(L, 1);
    luaL_argcheck(L, cap >= 1 && cap <= (1 << 26), 1, "capacity out of range [1, 67108864]");
    lua_Integer bound = luaL_optinteger(L, 2, 256);
    luaL_argcheck(L, bound >= 0 && bound <= (lua_Integer)UINT32_MAX, 2, "stale bound out of range");
    push_hier(L, (uint32_t)cap, (uint32_t)bound);
    lua_newtable(L); /* anchors: id -> the object a node's slot pointer reads */
    lua_setiuservalue(L, -2, 1);
    return 1;
}

/** h:grow(capacity): a new, larger hierarchy holding a copy of every node.
 * The new hierarchy gets its own copy of the anchor table (the slot owners
 * its nodes read): a destroy or link on one of the two must never release
 * an owner the other still reads. The old one is left unchanged. */
static int l_hier_grow(lua_State *L) {
    lmb_hier *h = check_hier(L, 1);
    lua_Integer cap = luaL_checkinteger(L, 2);
    luaL_argcheck(L, cap >= (lua_Integer)h->capacity && cap <= (1 << 26), 2,
                  "capacity must not shrink and must be at most 67108864");
    lua_settop(L, 2);
    lmb_hier *d = push_hier(L, (uint32_t)cap, h->stale_bound); /* 3 */
    lua_getiuservalue(L, 1, 1);                                /* 4: the old anchors */
    lua_createtable(L, 0, 0);                                  /* 5: the new ones */
    lua_pushnil(L);
    while (lua_next(L, 4)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, 5);
    }
    lua_setiuservalue(L, 3, 1);
    lua_settop(L, 3);
    lmb_hier_copy(d, h); /* nothing can fail from here */
    return 1;
}

static int l_hier_capacity(lua_State *L) {
    lua_pushinteger(L, check_hier(L, 1)->capacity);
    return 1;
}

/** h:create(id): makes free id a live root leaf (identity SRT, changed). */
static int l_hier_create(lua_State *L) {
    lmb_hier *h = check_hier(L, 1);
    uint32_t id = check_slot_id(L, h, 2);
    if (h->node[id].flags & LMB_HIER_ALIVE)
        return luaL_error(L, "limber.Hierarchy: node %I is in use", (lua_Integer)id);
    /* the node's anchor entry exists from now on (false: no owner), so a
     * later link stores its owner without allocating: an allocation failure
     * happens here, before the node exists, or never */
    lua_getiuservalue(L, 1, 1);
    lua_pushboolean(L, 0);
    lua_rawseti(L, -2, (lua_Integer)id);
    lmb_hier_create(h, id);
    return 0;
}

/** h:alive(id): true for a live node. */
static int l_hier_alive(lua_State *L) {
    lmb_hier *h = check_hier(L, 1);
    lua_Integer id = luaL_checkinteger(L, 2);
    lua_pushboolean(L, id >= 1 && id <= (lua_Integer)h->capacity &&
                           (h->node[id].flags & LMB_HIER_ALIVE));
    return 1;
}

/* Raw reads, each element once, into `out`: no metamethod can run code in
 * the middle of a change or answer differently later. */
static void read_vec(lua_State *L, int arg, const char *what, float *out, int n) {
    if (!lua_istable(L, arg))
        scene_error(L, "%s must be a table of %d numbers (got %s)", what, n, luaL_typename(L, arg));
    for (int k = 0; k < n; k++) {
        lua_rawgeti(L, arg, k + 1);
        lua_Number v = lua_tonumber(L, -1);
        if (lua_type(L, -1) != LUA_TNUMBER || !isfinite(v) || fabs(v) > 3.4e38)
            scene_error(L, "%s[%d] must be a finite number (got %s)", what, k + 1, describe(L, -1));
        lua_pop(L, 1);
        out[k] = (float)v;
    }
}

/** h:set_srt(id, t, r, s): tables {x,y,z}, {x,y,z,w}, {x,y,z}; nil keeps
 * a component. The rotation is normalised; a zero quaternion is refused. */
static int l_hier_set_srt(lua_State *L) {
    lmb_hier *h = self_hier(L);
    uint32_t id = check_live(L, h, 2, "node");
    float t[3], r[4], s[3];
    int ht = !lua_isnoneornil(L, 3), hr = !lua_isnoneornil(L, 4), hs = !lua_isnoneornil(L, 5);
    if (ht) read_vec(L, 3, "translation", t, 3);
    if (hr) read_vec(L, 4, "rotation", r, 4);
    if (hs) read_vec(L, 5, "scale", s, 3);
    if (lmb_hier_set_srt(h, id, ht ? t : NULL, hr ? r : NULL, hs ? s : NULL) != LMB_OK)
        return scene_error(L, "rotation is a zero quaternion");
    return 0;
}

/** h:set_t(id, x, y, z) / h:set_r(id, x, y, z, w) / h:set_s(id, x, y, z):
 * one component from plain numbers (no table needed). */
static int l_hier_set_t(lua_State *L) {
    lmb_hier *h = self_hier(L);
    uint32_t id = check_live(L, h, 2, "node");
    float v[3] = {check_coord(L, 3, "x"), check_coord(L, 4, "y"), check_coord(L, 5, "z")};
    lmb_hier_set_srt(h, id, v, NULL, NULL);
    return 0;
}

static int l_hier_set_r(lua_State *L) {
    lmb_hier *h = self_hier(L);
    uint32_t id = check_live(L, h, 2, "node");
    float v[4] = {check_coord(L, 3, "x"), check_coord(L, 4, "y"), check_coord(L, 5, "z"),
                  check_coord(L, 6, "w")};
    if (lmb_hier_set_srt(h, id, NULL, v, NULL) != LMB_OK)
        return scene_error(L, "rotation is a zero quaternion");
    return 0;
}

static int l_hier_set_s(lua_State *L) {
    lmb_hier *h = self_hier(L);
    uint32_t id = check_live(L, h, 2, "node");
    float x = check_coord(L, 3, "x");
    float v[3] = {x, lua_isnoneornil(L, 4) ? x : check_coord(L, 4, "y"),
                  lua_isnoneornil(L, 5) ? x : check_coord(L, 5, "z")};
    lmb_hier_set_srt(h, id, NULL, NULL, v);
    return 0;
}

static void push_floats(lua_State *L, const float *v, int n, int out) {
    if (out) {
        lua_pushvalue(L, out);
    } else {
        lua_createtable(L, n, 0);
    }
    for (int k = 0; k < n; k++) {
        lua_pushnumber(L, (lua_Number)v[k]);
        lua_rawseti(L, -2, k + 1);
    }
}

/* Returns the stack index of an optional output table at arg, or 0. */
static int opt_out(lua_State *L, int arg) {
    if (lua_isnoneornil(L, arg)) return 0;
    luaL_checktype(L, arg, LUA_TTABLE);
    return arg;
}

/** h:srt(id): translation, rotation, scale tables. */
static int l_hier_srt(lua_State *L) {
    lmb_hier *h = self_hier(L);
    uint32_t id = check_live(L, h, 2, "node");
    const float *d = h->node[id].srt;
    push_floats(L, d, 3, 0);
    push_floats(L, d + 3, 4, 0);
    push_floats(L, d + 7, 3, 0);
    return 3;
}

static const char *const follow_names[] = {"full", "rigid", "translation", NULL};

/** h:link(id, parent, follow [, owner, a [, b]]): hangs node id below
 * parent (0: none) on the slot given by owner: a Slots object and slot
 * index a, or a Pose and instance a, joint b (the slot follows the joint's
 * model matrix). follow is "full", "rigid" or "translation". Refuses
 * cycles. */
static int l_hier_link(lua_State *L) {
    lmb_hier *h = check_hier(L, 1);
    uint32_t id = check_live(L, h, 2, "node");
    uint32_t parent = 0;
    if (!(lua_type(L, 3) == LUA_TNUMBER && lua_tointeger(L, 3) == 0 && lua_isinteger(L, 3)))
        parent = check_live(L, h, 3, "parent");
    if (parent && lmb_hier_is_below(h, parent, id)) {
        if (parent == id)
            return scene_error(L, "node %I cannot be its own parent", (lua_Integer)id);
        return scene_error(L, "node %I cannot hang below its descendant %I (cycle refused)",
                           (lua_Integer)id, (lua_Integer)parent);
    }
    int mode = luaL_checkoption(L, 4, "full", follow_names);
    const float *slot = NULL;
    int animated = 0;
    if (!lua_isnoneornil(L, 5)) {
        if (luaL_testudata(L, 5, SLOTS_MT)) {
            lslots *s = check_slots(L, 5);
            uint32_t i = lcore_check_index(L, 6, s->count, "slot");
            slot = s->m + (size_t)i * 16;
        } else if (luaL_testudata(L, 5, POSE_MT)) {
            lmb_pose *p = lcore_check_pose(L, 5);
            uint32_t i = lcore_check_index(L, 6, p->instance_count, "instance");
            uint32_t j = lcore_check_index(L, 7, p->joint_count, "joint");
            slot = p->model + ((size_t)i * p->joint_count + j) * 16;
            animated = 1;
        } else {
            return luaL_typeerror(L, 5, "limber.Slots or limber.Pose");
        }
    }
    /* the node reads the owner's memory; with no owner the entry stays
     * (false), so this store does not allocate for a node made by create.
     * It comes before the link: if it raises, nothing has changed */
    lua_getiuservalue(L, 1, 1);
    if (slot)
        lua_pushvalue(L, 5);
    else
        lua_pushboolean(L, 0);
    lua_rawseti(L, -2, (lua_Integer)id);
    lmb_hier_link(h, id, parent, slot, mode, animated);
    return 0;
}

/** h:touch(id): marks a node changed. */
static int l_hier_touch(lua_State *L) {
    lmb_hier *h = check_hier(L, 1);
    lmb_hier_touch(h, check_live(L, h, 2, "node"));
    return 0;
}

/** h:destroy(id): destroys node id and its subtree; returns a table of the
 * destroyed ids. */
static int l_hier_destroy(lua_State *L) {
    lmb_hier *h = check_hier(L, 1);
    uint32_t id = check_live(L, h, 2, "node");
    /* the result table is allocated (array part sized) before anything
     * changes, so an allocation failure leaves the hierarchy as it was;
     * storing ids in the array part and clearing anchors cannot allocate */
    uint32_t n = lmb_hier_subtree_size(h, id);
    lua_getiuservalue(L, 1, 1);
    lua_createtable(L, (int)n, 0);
    uint32_t done = lmb_hier_destroy(h, id, h->scratch);
    (void)done; /* == n */
    for (uint32_t k = 0; k < n; k++) {
        lua_pushinteger(L, (lua_Integer)h->scratch[k]);
        lua_rawseti(L, -2, (lua_Integer)k + 1);
        lua_pushnil(L);
        lua_rawseti(L, -3, (lua_Integer)h->scratch[k]);
    }
    return 1;
}

/** h:update([followers, count]): marks followers[1..count] changed (nodes
 * on pose joints), then runs the update. Returns the pass size. */
static int l_hier_update(lua_State *L) {
    lmb_hier *h = check_hier(L, 1);
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        lua_Integer count = luaL_checkinteger(L, 3);
        if (count < 0 || count > (lua_Integer)h->capacity)
            return luaL_argerror(L, 3,
                                 lua_pushfstring(L, "follower count %I out of range [0, %I]", count,
                                                 (lua_Integer)h->capacity));
        for (lua_Integer k = 1; k <= count; k++) {
            lua_rawgeti(L, 2, k);
            lua_Integer id = lua_tointeger(L, -1);
            lua_pop(L, 1);
            if (id < 1 || id > (lua_Integer)h->capacity || !(h->node[id].flags & LMB_HIER_ALIVE))
                return luaL_error(L, "limber.Hierarchy: followers[%I] = %I is not a live node", k,
                                  id);
        }
        for (lua_Integer k = 1; k <= count; k++) {
            lua_rawgeti(L, 2, k);
            lmb_hier_touch(h, (uint32_t)lua_tointeger(L, -1));
            lua_pop(L, 1);
        }
    }
    lua_pushinteger(L, lmb_hier_update(h));
    return 1;
}

/** h:world(id [, out]): the world matrix (16 numbers), leaves on demand. */
static int l_hier_world(lua_State *L) {
    lmb_hier *h = self_hier(L);
    uint32_t id = check_live(L, h, 2, "node");
    int out = opt_out(L, 3);
    lmb_hier_refresh(h, id);
    push_floats(L, lmb_hier_world(h, id), 16, out);
    return 1;
}

/** h:world_values(id): the world matrix as 16 return values (leaves on
 * demand), for limber.scene's Scene:world, which stores them into its `out`
 * table with one Lua assignment (16 lua_rawseti calls from C cost about 2.5x
 * as much). Errors name the line that called Scene:world. */
static int l_hier_world_values(lua_State *L) {
    void *u = find_hier(L);
    if (!u)
        scene_error_at(L, 2,
                       "world: expected a limber.Scene as self (got %s; call it as "
                       "scene:world(id))",
                       luaL_typename(L, 1));
    lmb_hier *h = (lmb_hier *)lmb_align_ptr(u, 64);
    uint32_t id = check_live_at(L, h, 2, "node", 2);
    lmb_hier_refresh(h, id);
    const float *w = lmb_hier_world(h, id);
    luaL_checkstack(L, 16, NULL);
    for (int k = 0; k < 16; k++)
        lua_pushnumber(L, (lua_Number)w[k]);
    return 16;
}

/** h:gather(ids, count, buffer [, first]): for k = 1 .. count, the world
 * matrix of node ids[k] (leaves on demand) into element first + k - 1 of an
 * f32 Buffer of width 16 (default first 1): one call for a whole batch, e.g.
 * a renderer's instance buffer. Every id is checked before anything is written. */
static int l_hier_gather(lua_State *L) {
    lmb_hier *h = self_hier(L);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer count = luaL_checkinteger(L, 3);
    lbuffer *b = lbuf_check(L, 4);
    lua_Integer first = luaL_optinteger(L, 5, 1);
    if (b->type != LBUF_F32 || b->width != 16 || b->readonly)
        return luaL_argerror(L, 4, "a writable f32 buffer of width 16 expected");
    if (count < 0 || count > (lua_Integer)h->capacity)
        return luaL_argerror(
            L, 3,
            lua_pushfstring(L, "count %I out of range [0, %I]", count, (lua_Integer)h->capacity));
    /* count is in [0, capacity] here; first is any integer: compare before
     * any arithmetic on it (b->count < 2^63) */
    if (first < 1 || (uint64_t)(first - 1) > (uint64_t)b->count ||
        (uint64_t)count > (uint64_t)b->count - (uint64_t)(first - 1))
        return luaL_argerror(L, 5,
                             lua_pushfstring(L,
                                             "%I elements from element %I do not fit a "
                                             "buffer of %I",
                                             count, first, (lua_Integer)b->count));
    uint32_t *ids = h->scratch;
    for (lua_Integer k = 0; k < count; k++) {
        lua_rawgeti(L, 2, k + 1);
        lua_Integer id = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
        lua_pop(L, 1);
        if (id < 1 || id > (lua_Integer)h->capacity || !(h->node[id].flags & LMB_HIER_ALIVE))
            return scene_error(L, "gather: ids[%I] is not a live node", k + 1);
        ids[k] = (uint32_t)id;
    }
    float *out = (float *)b->data + (size_t)(first - 1) * 16;
    for (lua_Integer k = 0; k < count; k++) {
        lmb_hier_refresh(h, ids[k]);
        memcpy(out + (size_t)k * 16, lmb_hier_world(h, ids[k]), 16 * sizeof(float));
    }
    return 0;
}

/** h:refresh(id): makes the stored world of id current (leaves on demand). */
static int l_hier_refresh(lua_State *L) {
    lmb_hier *h = self_hier(L);
    lmb_hier_refresh(h, check_live(L, h, 2, "node"));
    return 0;
}

/** h:base(id [, out]): the stored base matrix. */
static int l_hier_base(lua_State *L) {
    lmb_hier *h = check_hier(L, 1);
    uint32_t id = check_live(L, h, 2, "node");
    push_floats(L, lmb_hier_base(h, id), 16, opt_out(L, 3));
    return 1;
}

/** h:slot_world(id, slots, index [, out]): world(id) x slots[index]. */
static int l_hier_slot_world(lua_State *L) {
    lmb_hier *h = check_hier(L, 1);
    uint32_t id = check_live(L, h, 2, "node");
    lslots *s = check_slots(L, 3);
    uint32_t i = lcore_check_index(L, 4, s->count, "slot");
    int out = opt_out(L, 5);
    float m[16];
    lmb_hier_refresh(h, id);
    lmb_mat4_mul(lmb_hier_world(h, id), s->m + (size_t)i * 16, m);
    push_floats(L, m, 16, out);
    return 1;
}

/** h:has_changed(id): true when the world of id changed in the last update. */
static int l_hier_has_changed(lua_State *L) {
    lmb_hier *h = self_hier(L);
    lua_pushboolean(L, lmb_hier_has_changed(h, check_live(L, h, 2, "node")));
    return 1;
}

/** h:child_count(id): number of direct children. */
static int l_hier_child_count(lua_State *L) {
    lmb_hier *h = self_hier(L);
    lua_pushinteger(L, h->node[check_live(L, h, 2, "node")].nchild);
    return 1;
}

/** h:changed([out]): a table of the ids whose world changed in the last
 * update (recomputed non-leaves and leaves that changed themselves), and
 * the count; entries after the count are left as they were. */
static int l_hier_changed(lua_State *L) {
    lmb_hier *h = self_hier(L);
    int out = opt_out(L, 2);
    if (out)
        lua_pushvalue(L, out);
    else
        lua_createtable(L, (int)h->changed_count, 0);
    for (uint32_t k = 0; k < h->changed_count; k++) {
        lua_pushinteger(L, (lua_Integer)h->changed[k]);
        lua_rawseti(L, -2, (lua_Integer)k + 1);
    }
    lua_pushinteger(L, (lua_Integer)h->changed_count);
    return 2;
}

/** h:stats(): pass size, whether the cached order was reused, cache size,
 * update number, changed count, pending changes. */
static int l_hier_stats(lua_State *L) {
    lmb_hier *h = check_hier(L, 1);
    lua_pushinteger(L, h->order_count);
    lua_pushboolean(L, (int)h->last_cached);
    lua_pushinteger(L, h->cache_count);
    lua_pushinteger(L, h->pass);
    lua_pushinteger(L, h->changed_count);
    lua_pushinteger(L, h->dirty_count);
    return 6;
}

/** h:compute(id, pass): base and world of one node from its parent's world
 * (raw; used by the naive baselines of the benchmark). */
static int l_hier_compute(lua_State *L) {
    lmb_hier *h = check_hier(L, 1);
    uint32_t id = check_slot_id(L, h, 2);
    lua_Integer pass = luaL_checkinteger(L, 3);
    luaL_argcheck(L, pass >= 0 && pass <= (lua_Integer)UINT32_MAX, 3, "pass out of range");
    lmb_hier_compute(h, id, (uint32_t)pass);
    return 0;
}

/** h:pass(ids, count, pass): the raw world pass over ids[1..count] (parents
 * first; used by the full-recomputation baseline). Ids are checked first. */
static int l_hier_pass(lua_State *L) {
    lmb_hier *h = check_hier(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer count = luaL_checkinteger(L, 3);
    luaL_argcheck(L, count >= 0 && count <= (lua_Integer)h->capacity, 3, "count out of range");
    lua_Integer pass = luaL_checkinteger(L, 4);
    luaL_argcheck(L, pass >= 1 && pass <= (lua_Integer)UINT32_MAX, 4, "pass out of range");
    uint32_t *ids = h->scratch;
    for (lua_Integer k = 0; k < count; k++) {
        lua_rawgeti(L, 2, k + 1);
        lua_Integer id = lua_tointeger(L, -1);
        lua_pop(L, 1);
        if (id < 1 || id > (lua_Integer)h->capacity)
            return luaL_error(L, "limber.Hierarchy: ids[%I] = %I out of range [1, %I]", k + 1, id,
                              (lua_Integer)h->capacity);
        ids[k] = (uint32_t)id;
    }
    lmb_hier_pass(h, ids, (uint32_t)count, (uint32_t)pass);
    return 0;
}

/** h:worlds(): a read-only Buffer view of the matrices: element id + 1 is
 * node id, 32 floats: its world matrix (1..16) then its base (17..32);
 * element 1 is "no parent" (identity). Stride 128 bytes for GPU upload. */
static int l_hier_worlds(lua_State *L) {
    lmb_hier *h = check_hier(L, 1);
    lbuf_push_view(L, 1, h->mats, LBUF_F32, 32, (size_t)h->capacity + 1, 1);
    return 1;
}

static int l_hier_tostring(lua_State *L) {
    lua_pushfstring(L, "limber.Hierarchy(%I nodes)", (lua_Integer)check_hier(L, 1)->capacity);
    return 1;
}

/* ---- Slots ------------------------------------------------------------ */

/* Pushes new slots of `count` matrices; info table {names=, index=} as
 * user value, built from the names table at `names` (checked). */
static lslots *push_slots(lua_State *L, int names, uint32_t count) {
    lua_createtable(L, (int)count, 0); /* names */
    lua_createtable(L, 0, (int)count); /* index */
    int ni = lua_gettop(L) - 1;
    for (uint32_t i = 0; i < count; i++) {
        lua_rawgeti(L, names, (lua_Integer)i + 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "limber.Slots: names[%I] must be a string (got %s)", (lua_Integer)i + 1,
                       luaL_typename(L, -1));
        lua_pushvalue(L, -1);
        if (lua_rawget(L, ni + 1) != LUA_TNIL)
            luaL_error(L, "limber.Slots: names[%I]: duplicate slot name '%s'", (lua_Integer)i + 1,
                       lua_tostring(L, -2));
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_rawseti(L, ni, (lua_Integer)i + 1);
        lua_pushinteger(L, (lua_Integer)i + 1);
        lua_rawset(L, ni + 1);
    }
    lslots *s = (lslots *)lcore_newobject(L, sizeof(lslots) + 64 + (size_t)count * 64, 1, SLOTS_MT);
    s->count = count;
    s->m = (float *)lmb_align_ptr(s + 1, 64);
    lua_createtable(L, 0, 2);
    lua_pushvalue(L, ni);
    lua_setfield(L, -2, "names");
    lua_pushvalue(L, ni + 1);
    lua_setfield(L, -2, "index");
    lua_setiuservalue(L, -2, 1);
    return s;
}

static uint32_t check_slot_count(lua_State *L, int names) {
    luaL_checktype(L, names, LUA_TTABLE);
    lua_Integer count = lcore_rawlen(L, names);
    if (count < 1 || count > (1 << 24))
        luaL_argerror(L, names,
                      lua_pushfstring(L, "slot count %I out of range [1, 16777216]", count));
    return (uint32_t)count;
}

/** core.slots(names, matrices): a static slot table. names: array of
 * unique strings; matrices: flat array of 16 numbers per slot (column-major,
 * affine: bottom row 0 0 0 1). */
static int l_slots_new(lua_State *L) {
    uint32_t count = check_slot_count(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    if (lcore_rawlen(L, 2) != (lua_Integer)count * 16)
        return luaL_argerror(L, 2,
                             lua_pushfstring(L, "expected %I numbers (16 per slot), got %I",
                                             (lua_Integer)count * 16, lcore_rawlen(L, 2)));
    lua_settop(L, 2);
    lslots *s = push_slots(L, 1, count);
    lcore_read_floats(L, 2, "matrices", 1, s->m, (size_t)count * 16);
    for (uint32_t i = 0; i < count; i++) {
        const float *m = s->m + (size_t)i * 16;
        if (m[3] != 0.0f || m[7] != 0.0f || m[11] != 0.0f || m[15] != 1.0f)
            return luaL_argerror(L, 2,
                                 lua_pushfstring(L,
                                                 "matrix of slot %I is not affine "
                                                 "(bottom row must be 0 0 0 1)",
                                                 (lua_Integer)i + 1));
    }
    return 1;
}

/** core.slots_from_pose(pose, instance, names): a slot table holding a copy
 * of the model matrices of one pose instance (a flattened prefab). */
static int l_slots_from_pose(lua_State *L) {
    lmb_pose *p = lcore_check_pose(L, 1);
    uint32_t i = lcore_check_index(L, 2, p->instance_count, "instance");
    uint32_t count = check_slot_count(L, 3);
    if (count != p->joint_count)
        return luaL_argerror(L, 3,
                             lua_pushfstring(L, "%I names for %I joints", (lua_Integer)count,
                                             (lua_Integer)p->joint_count));
    lua_settop(L, 3);
    lslots *s = push_slots(L, 3, count);
    memcpy(s->m, p->model + (size_t)i * count * 16, (size_t)count * 16 * sizeof(float));
    return 1;
}

static int l_slots_count(lua_State *L) {
    lua_pushinteger(L, check_slots(L, 1)->count);
    return 1;
}

/** slots:find(name): the slot index, or nil. */
static int l_slots_find(lua_State *L) {
    check_slots(L, 1);
    luaL_checkany(L, 2);
    lua_getiuservalue(L, 1, 1);
    lua_getfield(L, -1, "index");
    lua_pushvalue(L, 2);
    lua_rawget(L, -2);
    return 1;
}

/** slots:name(i): the name of slot i. */
static int l_slots_name(lua_State *L) {
    lslots *s = check_slots(L, 1);
    uint32_t i = lcore_check_index(L, 2, s->count, "slot");
    lua_getiuservalue(L, 1, 1);
    lua_getfield(L, -1, "names");
    lua_rawgeti(L, -1, (lua_Integer)i + 1);
    return 1;
}

/** slots:matrix(i [, out]): the matrix of slot i (16 numbers). */
static int l_slots_matrix(lua_State *L) {
    lslots *s = check_slots(L, 1);
    uint32_t i = lcore_check_index(L, 2, s->count, "slot");
    push_floats(L, s->m + (size_t)i * 16, 16, opt_out(L, 3));
    return 1;
}

static int l_slots_tostring(lua_State *L) {
    lua_pushfstring(L, "limber.Slots(%I slots)", (lua_Integer)check_slots(L, 1)->count);
    return 1;
}

/** core.follow_filter(m, mode): the part of matrix m (16 numbers) a child
 * takes under follow mode "full", "rigid" or "translation". */
static int l_follow_filter(lua_State *L) {
    float m[16], out[16];
    lcore_read_floats(L, 1, "matrix", 1, m, 16);
    int mode = luaL_checkoption(L, 2, "full", follow_names);
    lmb_follow_filter(m, mode, out);
    push_floats(L, out, 16, 0);
    return 1;
}

void lcore_open_scene(lua_State *L) {
    static const luaL_Reg hier_methods[] = {{"grow", l_hier_grow},
                                            {"capacity", l_hier_capacity},
                                            {"create", l_hier_create},
                                            {"alive", l_hier_alive},
                                            {"set_srt", l_hier_set_srt},
                                            {"set_t", l_hier_set_t},
                                            {"set_r", l_hier_set_r},
                                            {"set_s", l_hier_set_s},
                                            {"srt", l_hier_srt},
                                            {"link", l_hier_link},
                                            {"touch", l_hier_touch},
                                            {"destroy", l_hier_destroy},
                                            {"update", l_hier_update},
                                            {"world", l_hier_world},
                                            {"world_values", l_hier_world_values},
                                            {"refresh", l_hier_refresh},
                                            {"base", l_hier_base},
                                            {"gather", l_hier_gather},
                                            {"slot_world", l_hier_slot_world},
                                            {"has_changed", l_hier_has_changed},
                                            {"child_count", l_hier_child_count},
                                            {"changed", l_hier_changed},
                                            {"stats", l_hier_stats},
                                            {"compute", l_hier_compute},
                                            {"pass", l_hier_pass},
                                            {"worlds", l_hier_worlds},
                                            {NULL, NULL}};
    static const luaL_Reg hier_meta[] = {{"__tostring", l_hier_tostring}, {NULL, NULL}};
    static const luaL_Reg slots_methods[] = {{"count", l_slots_count},
                                             {"find", l_slots_find},
                                             {"name", l_slots_name},
                                             {"matrix", l_slots_matrix},
                                             {NULL, NULL}};
    static const luaL_Reg slots_meta[] = {
        {"__len", l_slots_count}, {"__tostring", l_slots_tostring}, {NULL, NULL}};
    static const luaL_Reg funcs[] = {{"hierarchy", l_hier_new},
                                     {"slots", l_slots_new},
                                     {"slots_from_pose", l_slots_from_pose},
                                     {"follow_filter", l_follow_filter},
                                     {NULL, NULL}};
    lcore_class(L, HIER_MT, hier_meta, hier_methods);
    luaL_getmetatable(L, HIER_MT);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &HIER_KEY);
    lcore_class(L, SLOTS_MT, slots_meta, slots_methods);
    luaL_setfuncs(L, funcs, 0);
}
