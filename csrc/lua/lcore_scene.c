/* lcore_scene.c: the Lua classes limber.Scene (a scene tree; its nodes
 * live in the kernel's storage, csrc/kernel/hierarchy.h) and limber.Slots
 * (a static table of named attachment matrices, also used for flattened
 * prefabs). Node ids are the same integers in Lua, here and in the kernel
 * (1 .. capacity); the kernel's 0 ("no parent") is nil at the surface.
 *
 * A Scene userdata is one pointer to its kernel storage, which is a separate
 * userdata in user value 1: growing the scene copies the nodes into a larger
 * storage and swaps the pointer, so the object the user holds stays the
 * same (examples/baselines/hierarchy.c reads that pointer too). The other
 * user values are Lua tables indexed by node id, each entry false when
 * unused (an entry is made when its id is first created, so later writes
 * never allocate):
 *  2 (ANCHORS)   the object whose memory the node's slot pointer reads (a
 *                Slots or a Pose): the collector keeps it while it is read;
 *  3 (NAMES)     the slot name (or joint index) the node hangs on;
 *  4 (PROVIDERS) the Slots or Pose whose slots the node offers its children;
 *  5 (INSTANCES) the pose instance of a Pose provider.
 * Every check runs before anything changes, and everything that can
 * allocate (table entries, a larger storage) comes before the commit, so an
 * error, an out-of-memory one included, leaves the scene as it was. */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "hierarchy.h"
#include "lcore.h"
#include "palette.h"
#include "pose.h"

#define SCENE_MT "limber.Scene"
#define SLOTS_MT "limber.Slots"

enum { UV_STORAGE = 1, UV_ANCHORS, UV_NAMES, UV_PROVIDERS, UV_INSTANCES, UV_COUNT = UV_INSTANCES };

#define MAX_CAPACITY (1 << 26)

typedef struct lslots {
    uint32_t count;
    float *m; /* count * 16 floats, affine, column-major */
} lslots;

static lslots *check_slots(lua_State *L, int arg) {
    return (lslots *)lmb_align_ptr(luaL_checkudata(L, arg, SLOTS_MT), 64);
}

/* ---- errors --------------------------------------------------------------- */

/* "bad argument #k to 'limber.Scene:<m>' (<problem>)" at the caller's line;
 * k counts as the caller wrote the call (self is not counted in a method
 * call), as luaL_argerror does. */
static int scene_argerror(lua_State *L, const char *m, int arg, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const char *msg = lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    lua_Debug ar;
    if (lua_getstack(L, 0, &ar)) {
        lua_getinfo(L, "n", &ar);
        if (ar.namewhat && strcmp(ar.namewhat, "method") == 0 && --arg == 0)
            return luaL_error(L, "calling 'limber.Scene:%s' on bad self (%s)", m, msg);
    }
    return luaL_error(L, "bad argument #%d to 'limber.Scene:%s' (%s)", arg, m, msg);
}

/* "limber.Scene:<m>: <problem>" at the caller's line. */
static int scene_error(lua_State *L, const char *m, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const char *msg = lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    return luaL_error(L, "limber.Scene:%s: %s", m, msg);
}

/* Short description of a value for messages: "number nan", "string x", "nil". */
static const char *describe(lua_State *L, int idx) {
    int t = lua_type(L, idx);
    if (t == LUA_TNUMBER || t == LUA_TSTRING) {
        idx = lua_absindex(L, idx);
        return lua_pushfstring(L, "%s %s", luaL_typename(L, idx), luaL_tolstring(L, idx, NULL));
    }
    return luaL_typename(L, idx);
}

/* ---- the Scene userdata --------------------------------------------------- */

/* Registry key (by address) of the Scene metatable: comparing metatables
 * costs no string lookup on the hot methods. */
static const char SCENE_KEY = 0;

static lmb_hier **test_scene(lua_State *L, int idx) {
    void *u = lua_touserdata(L, idx);
    if (!u || !lua_getmetatable(L, idx)) return NULL;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &SCENE_KEY);
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return same ? (lmb_hier **)u : NULL;
}

lmb_hier **lcore_test_scene(lua_State *L, int idx) {
    return test_scene(L, idx);
}

/* The storage of the Scene at argument 1 (method `m`). */
static lmb_hier *self_scene(lua_State *L, const char *m) {
    lmb_hier **u = test_scene(L, 1);
    if (!u) scene_argerror(L, m, 1, "limber.Scene expected, got %s", luaL_typename(L, 1));
    return *u;
}

/* A live node id at argument `arg`; `what` is "node" or an option name. */
static uint32_t check_node(lua_State *L, lmb_hier *h, const char *m, int arg, int idx,
                           const char *what) {
    const char *sep = strcmp(what, "node") ? ": " : "";
    const char *pre = *sep ? what : "";
    if (!lua_isinteger(L, idx))
        scene_argerror(L, m, arg, "%s must be an integer node id (got %s)", what, describe(L, idx));
    lua_Integer id = lua_tointeger(L, idx);
    if (id < 1 || id > (lua_Integer)h->capacity || !lmb_hier_alive(h, (uint32_t)id))
        scene_argerror(L, m, arg, "%s%snode %I does not exist or was destroyed", pre, sep, id);
    return (uint32_t)id;
}

#define check_live(L, h, m, arg) check_node(L, h, m, arg, arg, "node")

/* A parent: nil (none, returned as 0) or a live node. */
static uint32_t opt_parent(lua_State *L, lmb_hier *h, const char *m, int arg, int idx) {
    if (lua_isnoneornil(L, idx)) return 0;
    return check_node(L, h, m, arg, idx, "parent");
}

static float check_coord(lua_State *L, const char *m, int arg, const char *what) {
    lua_Number v = lua_tonumber(L, arg);
    if (lua_type(L, arg) != LUA_TNUMBER || !isfinite(v) || fabs(v) > 3.4e38)
        scene_argerror(L, m, arg, "%s must be a finite number (got %s)", what, describe(L, arg));
    return (float)v;
}

/* Raw reads of n finite numbers from the table at stack index idx, each
 * element once: no metamethod can run code in the middle of a change or
 * answer differently later. A rotation must not be a zero quaternion. */
static void read_vec(lua_State *L, const char *m, int arg, int idx, const char *what, float *out,
                     int n) {
    if (!lua_istable(L, idx))
        scene_argerror(L, m, arg, "%s must be a table of %d numbers (got %s)", what, n,
                       luaL_typename(L, idx));
    for (int k = 0; k < n; k++) {
        lua_rawgeti(L, idx, k + 1);
        lua_Number v = lua_tonumber(L, -1);
        if (lua_type(L, -1) != LUA_TNUMBER || !isfinite(v) || fabs(v) > 3.4e38)
            scene_argerror(L, m, arg, "%s[%d] must be a finite number (got %s)", what, k + 1,
                           describe(L, -1));
        lua_pop(L, 1);
        out[k] = (float)v;
    }
    if (n == 4 && lmb_hier_check_rotation(out) != LMB_OK)
        scene_argerror(L, m, arg, "%s is a zero quaternion", what);
}

static const char *const follow_names[] = {"full", "rigid", "translation", NULL};

static int check_follow(lua_State *L, const char *m, int arg, int idx) {
    if (lua_isnoneornil(L, idx)) return LMB_FOLLOW_FULL;
    if (lua_type(L, idx) == LUA_TSTRING) {
        const char *f = lua_tostring(L, idx);
        for (int k = 0; follow_names[k]; k++)
            if (strcmp(follow_names[k], f) == 0) return k;
    }
    return scene_argerror(L, m, arg, "follow must be 'full', 'rigid' or 'translation' (got %s)",
                          describe(L, idx));
}

/* "'name'" or "3": a slot value for messages (pushed). */
static const char *slot_label(lua_State *L, int idx) {
    if (lua_type(L, idx) == LUA_TSTRING) return lua_pushfstring(L, "'%s'", lua_tostring(L, idx));
    return lua_pushfstring(L, "%I", lua_tointeger(L, idx));
}

/* Pushes user value `uv` of the Scene at index 1. */
static void push_uv(lua_State *L, int uv) {
    lua_getiuservalue(L, 1, uv);
}

/* Where a node hangs: the slot pointer and the pose generation it follows,
 * with the owner of that memory pushed on the stack (false: none). */
typedef struct target {
    const float *slot;
    const uint32_t *generation;
    const uint32_t *instance_generation;
} target;

/* Resolves slot value at stack index `idx` (nil: the parent's origin) on
 * `parent`: a slot name of the parent's Slots, or a joint name or index of
 * its Pose instance. Pushes the owner (or false). */
static target resolve_slot(lua_State *L, const char *m, int arg, uint32_t parent, int idx) {
    target t = {NULL, NULL, NULL};
    int ty = lua_type(L, idx);
    if (ty == LUA_TNIL || ty == LUA_TNONE) {
        lua_pushboolean(L, 0);
        return t;
    }
    int by_index = lua_isinteger(L, idx);
    if (ty != LUA_TSTRING && !by_index)
        scene_argerror(L, m, arg, "slot must be a string name or a joint index (got %s)",
                       describe(L, idx));
    if (parent == 0)
        scene_argerror(L, m, arg, "slot %s: a root node has no slots", slot_label(L, idx));
    push_uv(L, UV_PROVIDERS);
    lua_rawgeti(L, -1, (lua_Integer)parent);
    lua_remove(L, -2);
    int prov = lua_gettop(L);
    if (luaL_testudata(L, prov, SLOTS_MT)) {
        lslots *s = (lslots *)lmb_align_ptr(lua_touserdata(L, prov), 64);
        if (by_index)
            scene_argerror(L, m, arg, "slot %s: only joints of a pose can be named by index",
                           slot_label(L, idx));
        lua_getiuservalue(L, prov, 1);
        lua_getfield(L, -1, "index");
        lua_pushvalue(L, idx);
        lua_rawget(L, -2);
        lua_Integer i = lua_tointeger(L, -1);
        lua_pop(L, 3);
        if (i < 1 || i > (lua_Integer)s->count)
            scene_argerror(L, m, arg, "slot %s: node %I has no slot of that name",
                           slot_label(L, idx), (lua_Integer)parent);
        t.slot = s->m + (size_t)(i - 1) * 16;
        return t;
    }
    if (!luaL_testudata(L, prov, POSE_MT))
        scene_argerror(L, m, arg,
                       "slot %s: node %I has no slots (create it with slots, a prefab or a pose)",
                       slot_label(L, idx), (lua_Integer)parent);
    lmb_pose *p = lcore_check_pose(L, prov);
    push_uv(L, UV_INSTANCES);
    lua_rawgeti(L, -1, (lua_Integer)parent);
    lua_Integer inst = lua_tointeger(L, -1);
    lua_pop(L, 2);
    lua_Integer j;
    if (by_index) {
        j = lua_tointeger(L, idx);
        if (j < 1 || j > (lua_Integer)p->joint_count)
            scene_argerror(L, m, arg, "slot %I: joint index out of range [1, %I] for node %I", j,
                           (lua_Integer)p->joint_count, (lua_Integer)parent);
    } else {
        lua_getiuservalue(L, prov, 1); /* the skeleton */
        lua_getfield(L, -1, "find");
        lua_insert(L, -2);
        lua_pushvalue(L, idx);
        lua_call(L, 2, 1);
        int isint;
        j = lcompat_tointeger_strict(L, -1, &isint);
        lua_pop(L, 1);
        if (j < 1 || j > (lua_Integer)p->joint_count)
            scene_argerror(L, m, arg, "slot %s: the skeleton of node %I has no joint of that name",
                           slot_label(L, idx), (lua_Integer)parent);
    }
    t.slot = p->model + ((size_t)(inst - 1) * p->joint_count + (size_t)(j - 1)) * 16;
    t.generation = &p->generation;
    t.instance_generation = p->inst_generation + (inst - 1);
    return t;
}

/* The commit of a link (nothing here allocates: the entries exist). The
 * owner is on the top of the stack; the slot value at `slot_idx`. */
static void commit_link(lua_State *L, lmb_hier *h, uint32_t id, uint32_t parent, int mode,
                        int slot_idx, target t) {
    int owner = lua_gettop(L);
    push_uv(L, UV_ANCHORS);
    lua_pushvalue(L, owner);
    lua_rawseti(L, -2, (lua_Integer)id);
    push_uv(L, UV_NAMES);
    if (lua_isnoneornil(L, slot_idx))
        lua_pushboolean(L, 0);
    else
        lua_pushvalue(L, slot_idx);
    lua_rawseti(L, -2, (lua_Integer)id);
    lua_settop(L, owner - 1);
    lmb_hier_link(h, id, parent, t.slot, mode, t.generation, t.instance_generation);
}

static lmb_hier *push_storage(lua_State *L, uint32_t cap, uint32_t bound) {
    size_t bytes = lmb_hier_bytes(cap);
    if (bytes == 0) luaL_error(L, "limber.Scene: capacity %I out of range", (lua_Integer)cap);
    return lmb_hier_place(lua_newuserdatauv(L, bytes, 0), cap, bound);
}

/** core.scene(capacity [, stale_bound]): an empty Scene for nodes 1 ..
 * capacity (it grows by doubling when full). */
static int l_scene_new(lua_State *L) {
    lua_Integer cap = luaL_checkinteger(L, 1);
    luaL_argcheck(L, cap >= 1 && cap <= MAX_CAPACITY, 1, "capacity out of range [1, 67108864]");
    lua_Integer bound = luaL_optinteger(L, 2, 256);
    luaL_argcheck(L, bound >= 0 && bound <= (lua_Integer)UINT32_MAX, 2,
                  "stale bound out of range [0, 4294967295]");
    lua_settop(L, 0);
    lmb_hier **u = (lmb_hier **)lua_newuserdatauv(L, sizeof *u, UV_COUNT);
    *u = NULL;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &SCENE_KEY);
    lua_setmetatable(L, 1);
    for (int uv = UV_ANCHORS; uv <= UV_COUNT; uv++) {
        lua_newtable(L);
        lua_setiuservalue(L, 1, uv);
    }
    *u = push_storage(L, (uint32_t)cap, (uint32_t)bound);
    lua_setiuservalue(L, 1, UV_STORAGE);
    return 1;
}

/* The scene's storage, checked after code that may have run Lua: a __gc at
 * an allocation, a slot provider's `find` or `index`. Raises (before the
 * call changed anything) when that code edited the scene, or moved its
 * storage, since `h` and `edits` were read: the checks made before would be
 * stale, and `h` perhaps freed. */
static lmb_hier *same_scene(lua_State *L, const char *m, const lmb_hier *h, uint32_t edits) {
    lmb_hier *now = *(lmb_hier **)lua_touserdata(L, 1);
    if (now != h || now->edits != edits)
        scene_error(L, m, "the scene was edited during the call (from a __gc or a slot lookup)");
    return now;
}

/* Makes room for one more node: a storage of twice the capacity takes a
 * copy of every node and replaces the old one (a world_buffer view keeps
 * the old storage it reads alive). Returns the storage; raises if the scene
 * was edited since `edits` (same_scene) while this allocated. */
static lmb_hier *reserve_node(lua_State *L, const char *m, uint32_t edits) {
    lmb_hier **u = (lmb_hier **)lua_touserdata(L, 1);
    lmb_hier *h = same_scene(L, m, *u, edits);
    if (lmb_hier_next_id(h) == 0) {
        if (h->capacity >= MAX_CAPACITY) scene_error(L, m, "the scene is full (67108864 nodes)");
        uint32_t cap = h->capacity > MAX_CAPACITY / 2 ? MAX_CAPACITY : h->capacity * 2;
        lmb_hier *d = push_storage(L, cap, h->stale_bound);
        same_scene(L, m, h, edits);
        lmb_hier_copy(d, h);
        lua_setiuservalue(L, 1, UV_STORAGE);
        *u = h = d;
    }
    /* every per-node table gets its entry before the node exists */
    lua_Integer id = (lua_Integer)lmb_hier_next_id(h);
    for (int uv = UV_ANCHORS; uv <= UV_COUNT; uv++) {
        push_uv(L, uv);
        if (lua_rawgeti(L, -1, id) == LUA_TNIL) {
            lua_pushboolean(L, 0);
            lua_rawseti(L, -3, id);
        }
        lua_pop(L, 2);
    }
    return same_scene(L, m, h, edits);
}

static const char *const create_keys[] = {"parent", "slot",  "follow", "translation", "rotation",
                                          "scale",  "slots", "pose",   "instance",    NULL};
enum { O_PARENT = 3, O_SLOT, O_FOLLOW, O_T, O_R, O_S, O_SLOTS, O_POSE, O_INSTANCE };

/** scene:create([opts]): a new node; returns its id. */
static int l_create(lua_State *L) {
    const char *m = "create";
    lmb_hier *h = self_scene(L, m);
    const uint32_t edits = h->edits; /* the checks below hold while it stays */
    if (lua_isnoneornil(L, 2)) {
        lua_settop(L, 1);
        lua_newtable(L);
    } else if (!lua_istable(L, 2)) {
        return scene_argerror(L, m, 2, "opts must be a table or nil (got %s)", luaL_typename(L, 2));
    }
    lua_settop(L, 2);
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        lua_pop(L, 1);
        int known = 0;
        if (lua_type(L, -1) == LUA_TSTRING)
            for (int k = 0; create_keys[k]; k++)
                known |= strcmp(create_keys[k], lua_tostring(L, -1)) == 0;
        if (!known) return scene_argerror(L, m, 2, "unknown option %s", describe(L, -1));
    }
    for (int k = 0; create_keys[k]; k++)
        lcore_rawfield(L, 2, create_keys[k]); /* O_PARENT .. O_INSTANCE */
    uint32_t parent = opt_parent(L, h, m, 2, O_PARENT);
    int mode = check_follow(L, m, 2, O_FOLLOW);
    float t[3], r[4], s[3];
    int ht = !lua_isnil(L, O_T), hr = !lua_isnil(L, O_R), hs = !lua_isnil(L, O_S);
    if (ht) read_vec(L, m, 2, O_T, "translation", t, 3);
    if (hr) read_vec(L, m, 2, O_R, "rotation", r, 4);
    if (hs) read_vec(L, m, 2, O_S, "scale", s, 3);
    lua_Integer inst = 0;
    if (!lua_isnil(L, O_SLOTS) && !lua_isnil(L, O_POSE))
        return scene_argerror(L, m, 2, "give slots or pose, not both");
    if (!lua_isnil(L, O_SLOTS) && !luaL_testudata(L, O_SLOTS, SLOTS_MT))
        return scene_argerror(
            L, m, 2, "slots must be a limber.Slots (from scene.slots or scene.prefab), got %s",
            luaL_typename(L, O_SLOTS));
    if (!lua_isnil(L, O_POSE)) {
        if (!luaL_testudata(L, O_POSE, POSE_MT))
            return scene_argerror(L, m, 2, "pose must be a limber.Pose, got %s",
                                  luaL_typename(L, O_POSE));
        lmb_pose *p = lcore_check_pose(L, O_POSE);
        inst = lua_isnil(L, O_INSTANCE)       ? 1
               : lua_isinteger(L, O_INSTANCE) ? lua_tointeger(L, O_INSTANCE)
                                              : 0;
        if (inst < 1 || inst > (lua_Integer)p->instance_count)
            return scene_argerror(L, m, 2, "instance must be an integer in [1, %I] (got %s)",
                                  (lua_Integer)p->instance_count, describe(L, O_INSTANCE));
    } else if (!lua_isnil(L, O_INSTANCE)) {
        return scene_argerror(L, m, 2, "instance is an instance of pose (no pose given)");
    }
    target tg = resolve_slot(L, m, 2, parent, O_SLOT); /* pushes the owner: 12 */
    /* what can allocate */
    h = reserve_node(L, m, edits);
    /* the commit */
    uint32_t id = lmb_hier_create(h);
    if (ht || hr || hs) lmb_hier_set_srt(h, id, ht ? t : NULL, hr ? r : NULL, hs ? s : NULL);
    push_uv(L, UV_PROVIDERS);
    lua_pushvalue(L, lua_isnil(L, O_SLOTS) ? O_POSE : O_SLOTS);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 0);
    }
    lua_rawseti(L, -2, (lua_Integer)id);
    push_uv(L, UV_INSTANCES);
    if (inst)
        lua_pushinteger(L, inst);
    else
        lua_pushboolean(L, 0);
    lua_rawseti(L, -2, (lua_Integer)id);
    lua_settop(L, O_INSTANCE + 1); /* the owner on top */
    commit_link(L, h, id, parent, mode, O_SLOT, tg);
    lua_pushinteger(L, (lua_Integer)id);
    return 1;
}

/* Links node `id` below `parent` on slot value at slot_idx: checks the
 * cycle, resolves, commits. */
static void relink(lua_State *L, lmb_hier *h, const char *m, uint32_t id, uint32_t parent,
                   int parent_arg, int slot_idx, int follow_idx) {
    const uint32_t edits = h->edits;
    int mode = check_follow(L, m, follow_idx, follow_idx);
    lmb_error err;
    if (lmb_hier_link_validate(h, id, parent, mode, &err) != LMB_OK) {
        char msg[160];
        lmb_error_format(&err, msg, sizeof msg);
        scene_argerror(L, m, parent_arg, "%s", msg);
    }
    target tg = resolve_slot(L, m, slot_idx, parent, slot_idx); /* may run Lua */
    h = same_scene(L, m, h, edits);
    commit_link(L, h, id, parent, mode, slot_idx, tg);
}

/** scene:set_parent(id, parent [, slot [, follow]]): parent nil = none. */
static int l_set_parent(lua_State *L) {
    const char *m = "set_parent";
    lmb_hier *h = self_scene(L, m);
    uint32_t id = check_live(L, h, m, 2);
    uint32_t parent = opt_parent(L, h, m, 3, 3);
    lua_settop(L, 5);
    relink(L, h, m, id, parent, 3, 4, 5);
    return 0;
}

/** scene:set_slot(id, slot [, follow]): another slot of the same parent. */
static int l_set_slot(lua_State *L) {
    const char *m = "set_slot";
    lmb_hier *h = self_scene(L, m);
    uint32_t id = check_live(L, h, m, 2);
    lua_settop(L, 4);
    relink(L, h, m, id, h->node[id].parent, 0, 3, 4);
    return 0;
}

/** scene:parent(id): parent (nil for a root), slot (or nil), follow mode. */
static int l_parent(lua_State *L) {
    const char *m = "parent";
    lmb_hier *h = self_scene(L, m);
    uint32_t id = check_live(L, h, m, 2);
    uint32_t p = h->node[id].parent;
    if (p)
        lua_pushinteger(L, (lua_Integer)p);
    else
        lua_pushnil(L);
    push_uv(L, UV_NAMES);
    if (!lua_rawgeti(L, -1, (lua_Integer)id) || !lua_toboolean(L, -1)) {
        lua_pop(L, 1);
        lua_pushnil(L);
    }
    lua_remove(L, -2);
    lua_pushstring(L, follow_names[h->node[id].flags & LMB_HIER_MODE_MASK]);
    return 3;
}

/** scene:exists(id): true when id is a live node (any value is accepted). */
static int l_exists(lua_State *L) {
    lmb_hier *h = self_scene(L, "exists");
    int isint;
    lua_Integer id = lcompat_tointeger_strict(L, 2, &isint);
    lua_pushboolean(L,
                    id >= 1 && id <= (lua_Integer)h->capacity && lmb_hier_alive(h, (uint32_t)id));
    return 1;
}

static int l_child_count(lua_State *L) {
    const char *m = "child_count";
    lmb_hier *h = self_scene(L, m);
    lua_pushinteger(L, h->node[check_live(L, h, m, 2)].nchild);
    return 1;
}

static int l_node_count(lua_State *L) {
    lua_pushinteger(L, self_scene(L, "node_count")->count);
    return 1;
}

/** scene:destroy(id): destroys id and its subtree; returns how many. */
static int l_destroy(lua_State *L) {
    const char *m = "destroy";
    lmb_hier *h = self_scene(L, m);
    uint32_t id = check_live(L, h, m, 2);
    lua_settop(L, 1);
    for (int uv = UV_ANCHORS; uv <= UV_COUNT; uv++)
        push_uv(L, uv); /* 2 .. 5 */
    uint32_t n = lmb_hier_destroy(h, id, h->scratch);
    for (uint32_t k = 0; k < n; k++) {
        for (int t = 2; t <= 5; t++) {
            lua_pushboolean(L, 0);
            lua_rawseti(L, t, (lua_Integer)h->scratch[k]);
        }
    }
    lua_pushinteger(L, (lua_Integer)n);
    return 1;
}

/* ---- transforms ------------------------------------------------------------ */

/** scene:set_trs(id, t, r, s): tables; nil keeps a part. */
static int l_set_trs(lua_State *L) {
    const char *m = "set_trs";
    lmb_hier *h = self_scene(L, m);
    uint32_t id = check_live(L, h, m, 2);
    float t[3], r[4], s[3];
    int ht = !lua_isnoneornil(L, 3), hr = !lua_isnoneornil(L, 4), hs = !lua_isnoneornil(L, 5);
    if (ht) read_vec(L, m, 3, 3, "translation", t, 3);
    if (hr) read_vec(L, m, 4, 4, "rotation", r, 4);
    if (hs) read_vec(L, m, 5, 5, "scale", s, 3);
    lmb_hier_set_srt(h, id, ht ? t : NULL, hr ? r : NULL, hs ? s : NULL);
    return 0;
}

static int l_set_translation(lua_State *L) {
    const char *m = "set_translation";
    lmb_hier *h = self_scene(L, m);
    uint32_t id = check_live(L, h, m, 2);
    float v[3] = {check_coord(L, m, 3, "x"), check_coord(L, m, 4, "y"), check_coord(L, m, 5, "z")};
    lmb_hier_set_srt(h, id, v, NULL, NULL);
    return 0;
}

static int l_set_rotation(lua_State *L) {
    const char *m = "set_rotation";
    lmb_hier *h = self_scene(L, m);
    uint32_t id = check_live(L, h, m, 2);
    float v[4] = {check_coord(L, m, 3, "x"), check_coord(L, m, 4, "y"), check_coord(L, m, 5, "z"),
                  check_coord(L, m, 6, "w")};
    if (lmb_hier_check_rotation(v) != LMB_OK)
        return scene_argerror(L, m, 3, "rotation is a zero quaternion");
    lmb_hier_set_srt(h, id, NULL, v, NULL);
    return 0;
}

static int l_set_scale(lua_State *L) {
    const char *m = "set_scale";
    lmb_hier *h = self_scene(L, m);
    uint32_t id = check_live(L, h, m, 2);
    float v[3] = {check_coord(L, m, 3, "x"), check_coord(L, m, 4, "y"), check_coord(L, m, 5, "z")};
    lmb_hier_set_srt(h, id, NULL, NULL, v);
    return 0;
}

/* Pushes n floats into the table at stack index `out` (0: a new table). */
static void push_floats(lua_State *L, const float *v, int n, int out) {
    if (out)
        lua_pushvalue(L, out);
    else
        lua_createtable(L, n, 0);
    for (int k = 0; k < n; k++) {
        lua_pushnumber(L, (lua_Number)v[k]);
        lua_rawseti(L, -2, k + 1);
    }
}

/* The stack index of an optional `out` table at arg, or 0. */
static int opt_out(lua_State *L, const char *m, int arg) {
    if (lua_isnoneornil(L, arg)) return 0;
    if (!lua_istable(L, arg))
        scene_argerror(L, m, arg, "out must be a table (got %s)", describe(L, arg));
    return arg;
}

/** scene:trs(id [, t, r, s]): translation, rotation, scale tables. */
static int l_trs(lua_State *L) {
    const char *m = "trs";
    lmb_hier *h = self_scene(L, m);
    uint32_t id = check_live(L, h, m, 2);
    int ot = opt_out(L, m, 3), orr = opt_out(L, m, 4), os = opt_out(L, m, 5);
    /* a copy: each table made below can run a __gc that grows the scene,
     * which moves (and may free) the node storage */
    float d[LMB_TRS_FLOATS];
    memcpy(d, h->node[id].srt, sizeof d);
    push_floats(L, d, 3, ot);
    push_floats(L, d + 3, 4, orr);
    push_floats(L, d + 7, 3, os);
    return 3;
}

/* ---- the frame ------------------------------------------------------------- */

static int l_update(lua_State *L) {
    lua_pushinteger(L, lmb_hier_update(self_scene(L, "update")));
    return 1;
}

/* The reads first catch up with poses that moved since the last update. */
static lmb_hier *self_synced(lua_State *L, const char *m) {
    lmb_hier *h = self_scene(L, m);
    lmb_hier_sync(h);
    return h;
}

/** scene:world(id [, out]): the world matrix (16 numbers), leaves on demand. */
static int l_world(lua_State *L) {
    const char *m = "world";
    lmb_hier *h = self_scene(L, m);
    uint32_t id = check_live(L, h, m, 2);
    int out = opt_out(L, m, 3);
    lmb_hier_sync(h);
    lmb_hier_refresh(h, id);
    push_uv(L, UV_STORAGE); /* h stays alive if a __gc below grows the scene */
    push_floats(L, lmb_hier_world(h, id), 16, out);
    return 1;
}

static int l_refresh(lua_State *L) {
    const char *m = "refresh";
    lmb_hier *h = self_scene(L, m);
    uint32_t id = check_live(L, h, m, 2);
    lmb_hier_sync(h);
    lmb_hier_refresh(h, id);
    return 0;
}

/** scene:gather(ids, count, buffer [, first]) */
static int l_gather(lua_State *L) {
    const char *m = "gather";
    lmb_hier *h = self_scene(L, m);
    if (!lua_istable(L, 2))
        return scene_argerror(L, m, 2, "table of node ids expected, got %s", luaL_typename(L, 2));
    lua_Integer count;
    if (lua_isnil(L, 3)) /* rule 9 of CHANGES.md: the count defaults to the rest, #ids */
        count = lcore_rawlen(L, 2);
    else if (!lua_isinteger(L, 3))
        return scene_argerror(L, m, 3, "integer count or nil expected, got %s", describe(L, 3));
    else
        count = lua_tointeger(L, 3);
    lbuffer *b = lbuf_check(L, 4);
    lua_Integer first = 1;
    if (!lua_isnoneornil(L, 5)) {
        if (!lua_isinteger(L, 5))
            return scene_argerror(L, m, 5, "integer first expected, got %s", describe(L, 5));
        first = lua_tointeger(L, 5);
    }
    if (b->type != LBUF_F32 || b->width != 16 || b->readonly)
        return scene_argerror(L, m, 4, "a writable f32 buffer of width 16 expected");
    if (count < 0 || count > (lua_Integer)h->capacity)
        return scene_argerror(L, m, 3, "count %I out of range [0, %I]", count,
                              (lua_Integer)h->capacity);
    /* count is in [0, capacity] here; first is any integer: compare before
     * any arithmetic on it (b->count < 2^63) */
    if (first < 1 || (uint64_t)(first - 1) > (uint64_t)b->count ||
        (uint64_t)count > (uint64_t)b->count - (uint64_t)(first - 1))
        return scene_argerror(L, m, 5, "%I elements from element %I do not fit a buffer of %I",
                              count, first, (lua_Integer)b->count);
    uint32_t *ids = h->pending; /* not used between updates */
    for (lua_Integer k = 0; k < count; k++) {
        lua_rawgeti(L, 2, k + 1);
        int isint;
        lua_Integer id = lcompat_tointeger_strict(L, -1, &isint);
        lua_pop(L, 1);
        if (id < 1 || id > (lua_Integer)h->capacity || !lmb_hier_alive(h, (uint32_t)id))
            return scene_argerror(L, m, 2, "ids[%I] is not a live node", k + 1);
        ids[k] = (uint32_t)id;
    }
    uint32_t pass = h->pass;
    lmb_hier_sync(h); /* a pass it runs uses pending: then ids are read again
                       * (raw reads: no Lua code ran, the table holds what was
                       * checked) */
    for (lua_Integer k = 0; h->pass != pass && k < count; k++) {
        lua_rawgeti(L, 2, k + 1);
        ids[k] = (uint32_t)lua_tointeger(L, -1);
        lua_pop(L, 1);
    }
    /* many leaves in a row (attachments on slot joints a frame plan just
     * wrote): each one's reads are loaded a few leaves ahead, so that their
     * cache misses overlap instead of stalling one leaf each */
    float *out = (float *)b->data + (size_t)(first - 1) * 16;
    enum { AHEAD = 8 };
    for (lua_Integer k = 0; k < count; k++) {
        if (k + 2 * AHEAD < count) lmb_hier_prefetch(h, ids[k + 2 * AHEAD], 0);
        if (k + AHEAD < count) lmb_hier_prefetch(h, ids[k + AHEAD], 1);
        lmb_hier_refresh(h, ids[k]);
        memcpy(out + (size_t)k * 16, lmb_hier_world(h, ids[k]), 16 * sizeof(float));
    }
    return 0;
}

/** scene:slot_world(id, name [, out]): world(id) x the matrix of slot name
 * of the node's slot table. */
static int l_slot_world(lua_State *L) {
    const char *m = "slot_world";
    lmb_hier *h = self_scene(L, m);
    uint32_t id = check_live(L, h, m, 2);
    int out = opt_out(L, m, 4);
    push_uv(L, UV_PROVIDERS);
    lua_rawgeti(L, -1, (lua_Integer)id);
    int prov = lua_gettop(L);
    if (!luaL_testudata(L, prov, SLOTS_MT))
        return scene_argerror(L, m, 2, "node %I has no slot table", (lua_Integer)id);
    lslots *s = (lslots *)lmb_align_ptr(lua_touserdata(L, prov), 64);
    lua_getiuservalue(L, prov, 1);
    lua_getfield(L, -1, "index");
    lua_pushvalue(L, 3);
    lua_Integer i = lua_type(L, 3) == LUA_TSTRING ? (lua_rawget(L, -2), lua_tointeger(L, -1)) : 0;
    if (i < 1 || i > (lua_Integer)s->count)
        return scene_argerror(L, m, 3, "node %I has no slot named %s", (lua_Integer)id,
                              describe(L, 3));
    float w[16];
    lmb_hier_sync(h);
    lmb_hier_refresh(h, id);
    lmb_mat4_mul(lmb_hier_world(h, id), s->m + (size_t)(i - 1) * 16, w);
    push_floats(L, w, 16, out);
    return 1;
}

static int l_has_changed(lua_State *L) {
    const char *m = "has_changed";
    lmb_hier *h = self_synced(L, m);
    lua_pushboolean(L, lmb_hier_has_changed(h, check_live(L, h, m, 2)));
    return 1;
}

/** scene:changed([out]): the ids whose world changed in this frame, and
 * their count; entries of `out` after the count are left as they were. */
static int l_changed(lua_State *L) {
    const char *m = "changed";
    lmb_hier *h = self_synced(L, m);
    int out = opt_out(L, m, 2);
    uint32_t n = lmb_hier_changed(h);
    push_uv(L, UV_STORAGE); /* h stays alive (and as it was) if a __gc below edits the scene */
    if (out)
        lua_pushvalue(L, out);
    else
        lua_createtable(L, (int)n, 0);
    for (uint32_t k = 0; k < n; k++) {
        lua_pushinteger(L, (lua_Integer)h->changed[k]);
        lua_rawseti(L, -2, (lua_Integer)k + 1);
    }
    lua_pushinteger(L, (lua_Integer)n);
    return 2;
}

/** scene:stats(): figures of the last update pass. */
static int l_stats(lua_State *L) {
    lmb_hier *h = self_scene(L, "stats");
    push_uv(L, UV_STORAGE); /* h stays alive if a __gc below grows the scene */
    lua_createtable(L, 0, 7);
    lua_pushinteger(L, h->order_count);
    lua_setfield(L, -2, "pass");
    lua_pushboolean(L, (int)h->last_cached);
    lua_setfield(L, -2, "cached");
    lua_pushinteger(L, h->cache_count);
    lua_setfield(L, -2, "cache");
    lua_pushinteger(L, h->pass);
    lua_setfield(L, -2, "frame");
    lua_pushinteger(L, h->changed_count);
    lua_setfield(L, -2, "changed");
    lua_pushinteger(L, h->dirty_count);
    lua_setfield(L, -2, "pending");
    lua_pushinteger(L, h->capacity);
    lua_setfield(L, -2, "capacity");
    return 1;
}

/** scene:world_buffer(): a read-only view of the matrices (see api.luadoc). */
static int l_world_buffer(lua_State *L) {
    lmb_hier *h = self_synced(L, "world_buffer");
    push_uv(L, UV_STORAGE);
    lbuf_push_view(L, lua_gettop(L), h->mats, LBUF_F32, 32, (size_t)h->capacity + 1, 1);
    return 1;
}

static int l_scene_tostring(lua_State *L) {
    lmb_hier *h = self_scene(L, "__tostring");
    lua_pushfstring(L, "limber.Scene (%I nodes)", (lua_Integer)h->count);
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
    if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TTABLE);
    push_floats(L, s->m + (size_t)i * 16, 16, lua_isnoneornil(L, 3) ? 0 : 3);
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
    static const luaL_Reg scene_methods[] = {{"create", l_create},
                                             {"destroy", l_destroy},
                                             {"exists", l_exists},
                                             {"parent", l_parent},
                                             {"set_parent", l_set_parent},
                                             {"set_slot", l_set_slot},
                                             {"child_count", l_child_count},
                                             {"node_count", l_node_count},
                                             {"set_trs", l_set_trs},
                                             {"set_translation", l_set_translation},
                                             {"set_rotation", l_set_rotation},
                                             {"set_scale", l_set_scale},
                                             {"trs", l_trs},
                                             {"update", l_update},
                                             {"world", l_world},
                                             {"refresh", l_refresh},
                                             {"gather", l_gather},
                                             {"slot_world", l_slot_world},
                                             {"has_changed", l_has_changed},
                                             {"changed", l_changed},
                                             {"stats", l_stats},
                                             {"world_buffer", l_world_buffer},
                                             {NULL, NULL}};
    static const luaL_Reg scene_meta[] = {
        {"__len", l_node_count}, {"__tostring", l_scene_tostring}, {NULL, NULL}};
    static const luaL_Reg slots_methods[] = {{"slot_count", l_slots_count},
                                             {"find", l_slots_find},
                                             {"name", l_slots_name},
                                             {"matrix", l_slots_matrix},
                                             {NULL, NULL}};
    static const luaL_Reg slots_meta[] = {
        {"__len", l_slots_count}, {"__tostring", l_slots_tostring}, {NULL, NULL}};
    static const luaL_Reg funcs[] = {{"scene", l_scene_new},
                                     {"slots", l_slots_new},
                                     {"slots_from_pose", l_slots_from_pose},
                                     {"follow_filter", l_follow_filter},
                                     {NULL, NULL}};
    lcore_class(L, SCENE_MT, scene_meta, scene_methods);
    luaL_getmetatable(L, SCENE_MT);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &SCENE_KEY);
    lcore_class(L, SLOTS_MT, slots_meta, slots_methods);
    luaL_setfuncs(L, funcs, 0);
}
