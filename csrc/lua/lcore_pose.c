/* lcore_pose.c: Lua types Skeleton, Pose (a batch of instances), Skin and
 * Palette. Every check runs before anything is changed. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lcore.h"
#include "palette.h"

/* ---- Skeleton --------------------------------------------------------- */

lmb_skeleton *lcore_check_skeleton(lua_State *L, int arg) {
    return (lmb_skeleton *)lmb_align_ptr(luaL_checkudata(L, arg, SKELETON_MT), 64);
}

/* Pushes the skeleton's info table {names = {...}, index = {name = j}}. */
static void push_skel_info(lua_State *L, int arg) {
    luaL_checkudata(L, arg, SKELETON_MT);
    lua_getiuservalue(L, arg, 1);
}

/* Reads a temp array of n uint32 in a scratch userdata left on the stack. */
static uint32_t *scratch_u32(lua_State *L, size_t n) {
    return (uint32_t *)lua_newuserdatauv(L, (n ? n : 1) * sizeof(uint32_t), 0);
}

/** core.skeleton(parents, names, rest, inverse_binds)
 * parents: array of J integers, 0 for a root or the 1-based index of the
 * parent in this same (input) order, in any order; names: array of J
 * strings (or false for unnamed joints) or nil; rest: flat array of 10*J
 * numbers (t xyz, q xyzw, s xyz per joint) or nil for identity;
 * inverse_binds: flat array of 16*J numbers (column-major) or nil.
 * Returns the skeleton (joints parent-before-child) and the remap table
 * remap[input index] = new index. */
static int l_skeleton_new(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer n = lcore_rawlen(L, 1);
    if (n < 1 || n > (lua_Integer)LMB_MAX_JOINTS)
        return luaL_argerror(L, 1,
                             lua_pushfstring(L, "joint count %I out of range [1, %I]", n,
                                             (lua_Integer)LMB_MAX_JOINTS));
    uint32_t J = (uint32_t)n;
    int has_names = !lua_isnoneornil(L, 2), has_rest = !lua_isnoneornil(L, 3),
        has_ibm = !lua_isnoneornil(L, 4);
    if (has_names) luaL_checktype(L, 2, LUA_TTABLE);
    if (has_rest) luaL_checktype(L, 3, LUA_TTABLE);
    if (has_ibm) luaL_checktype(L, 4, LUA_TTABLE);
    lua_settop(L, 4);

    uint32_t *in_parent = scratch_u32(L, J); /* 5 */
    uint32_t *order = scratch_u32(L, J);     /* 6 */
    uint32_t *remap = scratch_u32(L, J);     /* 7 */
    int sorted = 1;
    for (uint32_t i = 0; i < J; i++) {
        lua_rawgeti(L, 1, i + 1);
        int isint;
        lua_Integer p = lua_tointegerx(L, -1, &isint);
        lua_pop(L, 1);
        if (!isint)
            return luaL_error(L,
                              "limber.skeleton: joint %I: parent must be an integer (0 for a root)",
                              (lua_Integer)i + 1);
        if (p < 0 || p > (lua_Integer)J)
            return luaL_error(L, "limber.skeleton: joint %I: parent %I out of range [0, %I]",
                              (lua_Integer)i + 1, p, (lua_Integer)J);
        if (p == (lua_Integer)i + 1)
            return luaL_error(L, "limber.skeleton: joint %I is its own parent (cycle)",
                              (lua_Integer)i + 1);
        in_parent[i] = p == 0 ? LMB_NO_PARENT : (uint32_t)(p - 1);
        if (p > (lua_Integer)i) sorted = 0;
    }
    /* the reordering's work space (only for joints not listed parent
     * first), through the Lua allocator like every byte of limber: a host's
     * memory limit sees it */
    uint32_t *work = scratch_u32(L, sorted ? 1 : lmb_skeleton_order_scratch(J)); /* 8 */
    if (has_names) {
        lua_newtable(L); /* 9: name -> input index, for duplicates */
        for (uint32_t i = 0; i < J; i++) {
            int t = lua_rawgeti(L, 2, i + 1);
            if (t == LUA_TNIL || (t == LUA_TBOOLEAN && !lua_toboolean(L, -1))) {
                lua_pop(L, 1);
                continue;
            }
            if (t != LUA_TSTRING)
                return luaL_error(L, "limber.skeleton: joint %I: name must be a string (got %s)",
                                  (lua_Integer)i + 1, luaL_typename(L, -1));
            lua_pushvalue(L, -1);
            if (lua_rawget(L, 9) != LUA_TNIL)
                return luaL_error(L, "limber.skeleton: joints %I and %I share the name '%s'",
                                  lua_tointeger(L, -1), (lua_Integer)i + 1, lua_tostring(L, -2));
            lua_pop(L, 1);
            lua_pushinteger(L, (lua_Integer)i + 1);
            lua_rawset(L, 9);
        }
    } else {
        lua_pushnil(L);
    }
    if (has_rest && lcore_rawlen(L, 3) != (lua_Integer)J * LMB_TRS_FLOATS)
        return luaL_error(L, "limber.skeleton: rest has %I numbers, expected %I (10 per joint)",
                          lcore_rawlen(L, 3), (lua_Integer)J * LMB_TRS_FLOATS);
    if (has_ibm && lcore_rawlen(L, 4) != (lua_Integer)J * 16)
        return luaL_error(
            L, "limber.skeleton: inverse_binds has %I numbers, expected %I (16 per joint)",
            lcore_rawlen(L, 4), (lua_Integer)J * 16);

    uint32_t bad = 0;
    lmb_status st = lmb_skeleton_order_into(J, in_parent, order, remap, work, &bad);
    if (st == LMB_ECYCLE)
        return luaL_error(L, "limber.skeleton: joint %I is its own ancestor (cycle)",
                          (lua_Integer)bad + 1);
    if (st != LMB_OK) return lcore_status_error(L, st, "limber.skeleton");

    lmb_skeleton *s =
        (lmb_skeleton *)lcore_newobject(L, lmb_skeleton_bytes(J), 1, SKELETON_MT); /* 10 */
    lmb_skeleton_place(s, J);
    for (uint32_t k = 0; k < J; k++) {
        uint32_t i = order[k];
        s->parent[k] =
            in_parent[i] == LMB_NO_PARENT ? LMB_NO_PARENT : (uint16_t)remap[in_parent[i]];
        float *trs = s->rest + (size_t)k * LMB_TRS_FLOATS;
        float *ibm = s->inverse_bind + (size_t)k * 16;
        if (has_rest) {
            lua_pushfstring(L, "limber.skeleton: rest");
            lcore_read_floats(L, 3, lua_tostring(L, -1), (lua_Integer)i * LMB_TRS_FLOATS + 1, trs,
                              LMB_TRS_FLOATS);
            lua_pop(L, 1);
        } else {
            static const float id[LMB_TRS_FLOATS] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
            memcpy(trs, id, sizeof id);
        }
        if (has_ibm) {
            lcore_read_floats(L, 4, "limber.skeleton: inverse_binds", (lua_Integer)i * 16 + 1, ibm,
                              16);
        } else {
            memset(ibm, 0, 16 * sizeof(float));
            ibm[0] = ibm[5] = ibm[10] = ibm[15] = 1.0f;
        }
    }
    st = lmb_skeleton_validate(s, &bad);
    if (st == LMB_EINVAL)
        return luaL_error(L, "limber.skeleton: joint %I: rest rotation is a zero quaternion",
                          (lua_Integer)order[bad] + 1);
    if (st != LMB_OK)
        return lcore_status_error(L, st, "limber.skeleton: joint %I", (lua_Integer)order[bad] + 1);

    /* info table: names in new order and name -> new index */
    lua_createtable(L, 0, 2); /* 11 */
    lua_createtable(L, (int)J, 0);
    lua_newtable(L);
    if (has_names) {
        for (uint32_t k = 0; k < J; k++) {
            int t = lua_rawgeti(L, 2, order[k] + 1);
            if (t == LUA_TSTRING) {
                lua_pushvalue(L, -1);
                lua_rawseti(L, -4, k + 1);
                lua_pushinteger(L, (lua_Integer)k + 1);
                lua_rawset(L, -3);
            } else {
                lua_pop(L, 1);
            }
        }
    }
    lua_setfield(L, -3, "index");
    lua_setfield(L, -2, "names");
    lua_setiuservalue(L, 10, 1);

    lua_pushvalue(L, 10);
    lua_createtable(L, (int)J, 0);
    for (uint32_t i = 0; i < J; i++) {
        lua_pushinteger(L, (lua_Integer)remap[i] + 1);
        lua_rawseti(L, -2, i + 1);
    }
    return 2;
}

static int l_skel_count(lua_State *L) {
    lua_pushinteger(L, lcore_check_skeleton(L, 1)->joint_count);
    return 1;
}

/** skel:parent(j): the parent's index, or nil for a root. */
static int l_skel_parent(lua_State *L) {
    lmb_skeleton *s = lcore_check_skeleton(L, 1);
    uint32_t j = lcore_check_index(L, 2, s->joint_count, "joint");
    if (s->parent[j] == LMB_NO_PARENT) return 0;
    lua_pushinteger(L, (lua_Integer)s->parent[j] + 1);
    return 1;
}

/** skel:parents(): a table of every parent index (0 for roots). */
static int l_skel_parents(lua_State *L) {
    lmb_skeleton *s = lcore_check_skeleton(L, 1);
    lua_createtable(L, (int)s->joint_count, 0);
    for (uint32_t j = 0; j < s->joint_count; j++) {
        lua_pushinteger(L, s->parent[j] == LMB_NO_PARENT ? 0 : (lua_Integer)s->parent[j] + 1);
        lua_rawseti(L, -2, j + 1);
    }
    return 1;
}

/** skel:name(j): the joint's name or nil. */
static int l_skel_name(lua_State *L) {
    lmb_skeleton *s = lcore_check_skeleton(L, 1);
    uint32_t j = lcore_check_index(L, 2, s->joint_count, "joint");
    push_skel_info(L, 1);
    lua_getfield(L, -1, "names");
    lua_rawgeti(L, -1, j + 1);
    return 1;
}

/* Bytes of v, little-endian, into the hash (the same hash on every host). */
static uint64_t hash_u32(uint64_t h, uint32_t v) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    return lmb_hash64(h, b, 4);
}

void lcore_rig_hash(lua_State *L, int arg, char out[17]) {
    lmb_skeleton *s = lcore_check_skeleton(L, arg);
    push_skel_info(L, arg);
    lua_getfield(L, -1, "names");
    uint64_t h = hash_u32(LMB_HASH64_SEED, s->joint_count);
    for (uint32_t j = 0; j < s->joint_count; j++) {
        h = hash_u32(h, s->parent[j]);
        lua_rawgeti(L, -1, (lua_Integer)j + 1);
        size_t n = 0;
        const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
        h = hash_u32(h, name ? (uint32_t)n : 0xFFFFFFFFu);
        if (name) h = lmb_hash64(h, name, n);
        lua_pop(L, 1);
    }
    lua_pop(L, 2);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/** skel:rig_hash(): 16 hex digits from the joint count, every parent and every
 * name (in joint order): equal for skeletons of one rig, different when a joint,
 * a parent or a name differs. A packed clip records its skeleton's (clip:rig_hash). */
static int l_skel_rig_hash(lua_State *L) {
    char hex[17];
    lcore_rig_hash(L, 1, hex);
    lua_pushstring(L, hex);
    return 1;
}

/** skel:find(name): the joint index, or nil when no joint has that name. */
static int l_skel_find(lua_State *L) {
    lcore_check_skeleton(L, 1);
    luaL_checkstring(L, 2);
    push_skel_info(L, 1);
    lua_getfield(L, -1, "index");
    lua_pushvalue(L, 2);
    lua_rawget(L, -2);
    return 1;
}

static void push_floats(lua_State *L, const float *v, int n) {
    lcore_push_floats(L, v, n, 0);
}

/* Pushes the n floats as a table: the caller's `out` table at out_arg
 * (filled with raw sets) when one is given, else a new one. */
static void push_floats_out(lua_State *L, const float *v, int n, int out_arg) {
    if (lua_isnoneornil(L, out_arg)) {
        push_floats(L, v, n);
        return;
    }
    luaL_checktype(L, out_arg, LUA_TTABLE);
    for (int k = 0; k < n; k++) {
        lua_pushnumber(L, (lua_Number)v[k]);
        lua_rawseti(L, out_arg, k + 1);
    }
    lua_pushvalue(L, out_arg);
}

/** skel:rest_trs(j): the rest pose of joint j: translation {x,y,z},
 * rotation {x,y,z,w}, scale {x,y,z}. */
static int l_skel_rest(lua_State *L) {
    lmb_skeleton *s = lcore_check_skeleton(L, 1);
    uint32_t j = lcore_check_index(L, 2, s->joint_count, "joint");
    const float *trs = s->rest + (size_t)j * LMB_TRS_FLOATS;
    push_floats(L, trs, 3);
    push_floats(L, trs + 3, 4);
    push_floats(L, trs + 7, 3);
    return 3;
}

/** skel:inverse_bind(j [, out]): the joint's inverse bind matrix (16 numbers). */
static int l_skel_ibm(lua_State *L) {
    lmb_skeleton *s = lcore_check_skeleton(L, 1);
    uint32_t j = lcore_check_index(L, 2, s->joint_count, "joint");
    push_floats_out(L, s->inverse_bind + (size_t)j * 16, 16, 3);
    return 1;
}

static int l_skel_tostring(lua_State *L) {
    lmb_skeleton *s = lcore_check_skeleton(L, 1);
    lua_pushfstring(L, "limber.Skeleton(%d joints, %d roots)", (int)s->joint_count,
                    (int)s->root_count);
    return 1;
}

/* ---- Pose ------------------------------------------------------------- */

lmb_pose *lcore_check_pose(lua_State *L, int arg) {
    return (lmb_pose *)lmb_align_ptr(luaL_checkudata(L, arg, POSE_MT), 64);
}

/** core.pose(skeleton, instances): a batch of `instances` poses, all at
 * the rest pose. The pose keeps the skeleton alive. */
static int l_pose_new(lua_State *L) {
    lmb_skeleton *s = lcore_check_skeleton(L, 1);
    lua_Integer n = luaL_checkinteger(L, 2);
    if (n < 1 || n > (1 << 24))
        return luaL_argerror(L, 2,
                             lua_pushfstring(L, "instance count %I out of range [1, %I]", n,
                                             (lua_Integer)(1 << 24)));
    size_t bytes = lmb_pose_bytes(s->joint_count, (uint32_t)n);
    if (bytes == 0) return luaL_error(L, "limber.pose: size overflows");
    void *mem = lua_newuserdatauv(L, bytes, 1);
    luaL_setmetatable(L, POSE_MT);
    lmb_pose_place(mem, s, (uint32_t)n);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1); /* the pose reads its skeleton */
    return 1;
}

/* Reads an optional table of n floats at arg into out (lcore_read_floats);
 * returns 0 when the argument is nil. */
static int opt_vec(lua_State *L, int arg, const char *what, float *out, int n) {
    if (lua_isnoneornil(L, arg)) return 0;
    if (!lua_istable(L, arg))
        return luaL_argerror(
            L, arg, lua_pushfstring(L, "%s must be a table of %d numbers or nil", what, n));
    if (lcore_rawlen(L, arg) != n)
        return luaL_argerror(
            L, arg,
            lua_pushfstring(L, "%s must have %d numbers (got %I)", what, n, lcore_rawlen(L, arg)));
    lcore_read_floats(L, arg, what, 1, out, (size_t)n);
    return 1;
}

static uint32_t check_instance(lua_State *L, lmb_pose *p, int arg) {
    return lcore_check_index(L, arg, p->instance_count, "instance");
}

/** pose:set_trs(i, j, t, r, s): sets the local translation {x,y,z},
 * rotation {x,y,z,w} (normalised here) and scale {x,y,z} of joint j of
 * instance i; nil keeps a component. */
static int l_pose_set_local(lua_State *L) {
    lmb_pose *p = lcore_check_pose(L, 1);
    uint32_t i = check_instance(L, p, 2);
    uint32_t j = lcore_check_index(L, 3, p->joint_count, "joint");
    float trs[LMB_TRS_FLOATS];
    lmb_pose_get_trs(p, i, j, trs);
    float t[3], r[4], s[3];
    int ht = opt_vec(L, 4, "translation", t, 3);
    int hr = opt_vec(L, 5, "rotation", r, 4);
    int hs = opt_vec(L, 6, "scale", s, 3);
    if (hr) {
        double len = sqrt((double)r[0] * (double)r[0] + (double)r[1] * (double)r[1] +
                          (double)r[2] * (double)r[2] + (double)r[3] * (double)r[3]);
        if (!(len > 1e-12)) return luaL_argerror(L, 5, "rotation is a zero quaternion");
        for (int k = 0; k < 4; k++)
            r[k] = (float)((double)r[k] / len);
    }
    if (ht) memcpy(trs, t, sizeof t);
    if (hr) memcpy(trs + 3, r, sizeof r);
    if (hs) memcpy(trs + 7, s, sizeof s);
    lmb_pose_set_trs(p, i, j, trs);
    return 0;
}

/** pose:trs(i, j): translation, rotation, scale tables of joint j of instance i. */
static int l_pose_get_local(lua_State *L) {
    lmb_pose *p = lcore_check_pose(L, 1);
    uint32_t i = check_instance(L, p, 2);
    uint32_t j = lcore_check_index(L, 3, p->joint_count, "joint");
    float trs[LMB_TRS_FLOATS];
    lmb_pose_get_trs(p, i, j, trs);
    push_floats(L, trs, 3);
    push_floats(L, trs + 3, 4);
    push_floats(L, trs + 7, 3);
    return 3;
}

/** pose:reset([i]): back to the rest pose (every instance without i). */
static int l_pose_reset(lua_State *L) {
    lmb_pose *p = lcore_check_pose(L, 1);
    if (lua_isnoneornil(L, 2)) {
        for (uint32_t i = 0; i < p->instance_count; i++)
            lmb_pose_reset(p, i);
    } else {
        lmb_pose_reset(p, check_instance(L, p, 2));
    }
    return 0;
}

/** pose:set_root(i, m): the affine root matrix (16 numbers, column-major)
 * applied to the root joints of instance i; nil resets it to identity. */
static int l_pose_set_root(lua_State *L) {
    lmb_pose *p = lcore_check_pose(L, 1);
    uint32_t i = check_instance(L, p, 2);
    float m[16];
    if (!opt_vec(L, 3, "root matrix", m, 16)) {
        lmb_pose_set_root(p, i, NULL);
        return 0;
    }
    lmb_error err;
    if (lmb_pose_root_validate(m, &err) != LMB_OK) return lcore_raise_arg(L, 3, &err);
    lmb_pose_set_root(p, i, m);
    return 0;
}

/** pose:local_to_model([force]): model matrices of every instance, from
 * each one's first changed joint (every joint with force). */
static int l_pose_l2m(lua_State *L) {
    lmb_pose *p = lcore_check_pose(L, 1);
    /* every block of a live pose: nothing can fail (lmb_pose_l2m_validate) */
    lmb_pose_local_to_model(p, 0, p->block_count, lua_toboolean(L, 2));
    return 0;
}

/** pose:model(i, j [, out]): the model matrix of joint j of instance i (16 numbers). */
static int l_pose_model(lua_State *L) {
    lmb_pose *p = lcore_check_pose(L, 1);
    uint32_t i = check_instance(L, p, 2);
    uint32_t j = lcore_check_index(L, 3, p->joint_count, "joint");
    push_floats_out(L, p->model + ((size_t)i * p->joint_count + j) * 16, 16, 4);
    return 1;
}

/** pose:model_buffer(): a read-only Buffer view of every model matrix
 * (instances x joints elements of 16 floats, instance-major). */
static int l_pose_models(lua_State *L) {
    lmb_pose *p = lcore_check_pose(L, 1);
    lbuf_push_view(L, 1, p->model, LBUF_F32, 16, (size_t)p->instance_count * p->joint_count, 1);
    return 1;
}

/** pose:dirty(i): the first joint changed since the last pass, or nil. */
static int l_pose_dirty(lua_State *L) {
    lmb_pose *p = lcore_check_pose(L, 1);
    uint32_t i = check_instance(L, p, 2);
    if (p->first_dirty[i] >= p->joint_count)
        lua_pushnil(L);
    else
        lua_pushinteger(L, (lua_Integer)p->first_dirty[i] + 1);
    return 1;
}

/** pose:instance_count() (also #pose), pose:joint_count(). */
static int l_pose_instances(lua_State *L) {
    lua_pushinteger(L, lcore_check_pose(L, 1)->instance_count);
    return 1;
}

static int l_pose_joints(lua_State *L) {
    lua_pushinteger(L, lcore_check_pose(L, 1)->joint_count);
    return 1;
}

static int l_pose_skeleton(lua_State *L) {
    lcore_check_pose(L, 1);
    lua_getiuservalue(L, 1, 1);
    return 1;
}

static int l_pose_tostring(lua_State *L) {
    lmb_pose *p = lcore_check_pose(L, 1);
    lua_pushfstring(L, "limber.Pose(%d instances x %d joints)", (int)p->instance_count,
                    (int)p->joint_count);
    return 1;
}

/* ---- Skin ------------------------------------------------------------- */

lmb_skin *lcore_check_skin(lua_State *L, int arg) {
    return (lmb_skin *)lmb_align_ptr(luaL_checkudata(L, arg, SKIN_MT), 64);
}

/* Pushes a skin of `skel` (stack index) over joints[] (or every joint when
 * the table arg is 0) with inverse binds from the table at ibm_arg (or the
 * skeleton's). Raises before pushing anything that could be seen. */
static lmb_skin *push_skin(lua_State *L, int skel_arg, int joints_arg, int ibm_arg) {
    lmb_skeleton *s = lcore_check_skeleton(L, skel_arg);
    uint32_t K = s->joint_count;
    if (joints_arg) {
        lua_Integer n = lcore_rawlen(L, joints_arg);
        if (n < 1 || n > (lua_Integer)LMB_MAX_JOINTS)
            luaL_argerror(L, joints_arg,
                          lua_pushfstring(L, "skin joint count %I out of range [1, %I]", n,
                                          (lua_Integer)LMB_MAX_JOINTS));
        K = (uint32_t)n;
    }
    if (ibm_arg && lcore_rawlen(L, ibm_arg) != (lua_Integer)K * 16)
        luaL_argerror(L, ibm_arg,
                      lua_pushfstring(L, "inverse binds have %I numbers, expected %I",
                                      lcore_rawlen(L, ibm_arg), (lua_Integer)K * 16));
    void *mem = lcore_newobject(L, lmb_skin_bytes(K), 1, SKIN_MT);
    lmb_skin *k = lmb_skin_place(mem, s, K);
    for (uint32_t i = 0; i < K; i++) {
        uint32_t j = i;
        if (joints_arg) {
            lua_rawgeti(L, joints_arg, i + 1);
            int isint;
            lua_Integer v = lua_tointegerx(L, -1, &isint);
            lua_pop(L, 1);
            if (!isint || v < 1 || v > (lua_Integer)s->joint_count)
                luaL_error(L, "limber.skin: joints[%I] must be a joint index in [1, %I]",
                           (lua_Integer)i + 1, (lua_Integer)s->joint_count);
            j = (uint32_t)(v - 1);
        }
        k->joint[i] = (uint16_t)j;
        if (ibm_arg)
            lcore_read_floats(L, ibm_arg, "limber.skin: inverse_binds", (lua_Integer)i * 16 + 1,
                              k->inverse_bind + (size_t)i * 16, 16);
        else
            memcpy(k->inverse_bind + (size_t)i * 16, s->inverse_bind + (size_t)j * 16,
                   16 * sizeof(float));
    }
    uint32_t bad;
    lmb_status st = lmb_skin_prepare(k, &bad);
    if (st != LMB_OK) lcore_status_error(L, st, "limber.skin: joint %I", (lua_Integer)bad + 1);
    lua_pushvalue(L, skel_arg);
    lua_setiuservalue(L, -2, 1);
    return k;
}

/** core.skin(skeleton, [joints], [inverse_binds]): a skin over the given
 * skeleton joints (1-based indices; default every joint in order) with one
 * inverse bind matrix each (flat 16 numbers per joint; default the
 * skeleton's). */
static int l_skin_new(lua_State *L) {
    lcore_check_skeleton(L, 1);
    if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
    if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TTABLE);
    push_skin(L, 1, lua_isnoneornil(L, 2) ? 0 : 2, lua_isnoneornil(L, 3) ? 0 : 3);
    return 1;
}

static int l_skin_count(lua_State *L) {
    lua_pushinteger(L, lcore_check_skin(L, 1)->joint_count);
    return 1;
}

/** skin:joint(k): the skeleton joint used by skin joint k. */
static int l_skin_joint(lua_State *L) {
    lmb_skin *k = lcore_check_skin(L, 1);
    uint32_t i = lcore_check_index(L, 2, k->joint_count, "skin joint");
    lua_pushinteger(L, (lua_Integer)k->joint[i] + 1);
    return 1;
}

/** skin:inverse_bind(k [, out]): the inverse bind matrix of skin joint k. */
static int l_skin_ibm(lua_State *L) {
    lmb_skin *k = lcore_check_skin(L, 1);
    uint32_t i = lcore_check_index(L, 2, k->joint_count, "skin joint");
    push_floats_out(L, k->inverse_bind + (size_t)i * 16, 16, 3);
    return 1;
}

static int l_skin_skeleton(lua_State *L) {
    lcore_check_skin(L, 1);
    lua_getiuservalue(L, 1, 1);
    return 1;
}

static int l_skin_tostring(lua_State *L) {
    lmb_skin *k = lcore_check_skin(L, 1);
    lua_pushfstring(L, "limber.Skin(%d joints)", (int)k->joint_count);
    return 1;
}

/* ---- Palette ---------------------------------------------------------- */

lpalette *lcore_check_palette(lua_State *L, int arg) {
    return (lpalette *)luaL_checkudata(L, arg, PALETTE_MT);
}

#define check_palette lcore_check_palette

/** core.palette(pose, [skin], [layout]): palette storage for every
 * instance of the pose; layout "mat4" (default) or "mat3x4". Without a
 * skin, every skeleton joint with the skeleton's inverse binds. */
static int l_palette_new(lua_State *L) {
    static const char *const layouts[] = {"mat4", "mat3x4", NULL};
    lmb_pose *p = lcore_check_pose(L, 1);
    int layout = luaL_checkoption(L, 3, "mat4", layouts);
    lua_settop(L, 3);
    if (lua_isnil(L, 2)) {
        lua_getiuservalue(L, 1, 1); /* 4: the skeleton */
        push_skin(L, 4, 0, 0);      /* 5 */
        lua_replace(L, 2);
        lua_settop(L, 3);
    }
    lmb_skin *k = lcore_check_skin(L, 2);
    lmb_error err;
    if (lmb_palette_validate(p, k, layout, 0, p->instance_count, &err) != LMB_OK)
        return lcore_raise_arg(L, 2, &err);
    uint32_t width = lmb_palette_width(layout);
    size_t floats = (size_t)p->instance_count * k->joint_count * width;
    lpalette *pal =
        (lpalette *)lua_newuserdatauv(L, sizeof(lpalette) + 64 + floats * sizeof(float), 2);
    pal->pose = p;
    pal->skin = k;
    pal->data = (float *)lmb_align_ptr(pal + 1, 64);
    memset(pal->data, 0, floats * sizeof(float));
    pal->instances = p->instance_count;
    pal->joints = k->joint_count;
    pal->layout = layout;
    luaL_setmetatable(L, PALETTE_MT);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    lua_pushvalue(L, 2);
    lua_setiuservalue(L, -2, 2);
    return 1;
}

/** palette:update([first, count]): recomputes the palettes of instances
 * first .. first+count-1 (default all) from the pose's model matrices. */
static int l_palette_update(lua_State *L) {
    lpalette *pal = check_palette(L, 1);
    lua_Integer first = luaL_optinteger(L, 2, 1);
    /* first is range-checked before any arithmetic; then instances - first
     * + 1 is in [1, instances] and count is compared with it, never added */
    if (first < 1 || first > (lua_Integer)pal->instances)
        return luaL_argerror(L, 2,
                             lua_pushfstring(L, "instance index %I out of range [1, %I]", first,
                                             (lua_Integer)pal->instances));
    lua_Integer left = (lua_Integer)pal->instances - first + 1;
    lua_Integer count = luaL_optinteger(L, 3, left);
    if (count < 0 || count > left)
        return luaL_argerror(L, 3,
                             lua_pushfstring(L, "count %I out of range [0, %I]", count, left));
    lmb_error err;
    if (lmb_palette_validate(pal->pose, pal->skin, pal->layout, (uint32_t)(first - 1),
                             (uint32_t)count, &err) != LMB_OK)
        return lcore_raise(L, &err, "limber.Palette:update"); /* unreachable: checked above */
    uint32_t width = lmb_palette_width(pal->layout);
    lmb_palette_run(pal->pose, pal->skin, pal->layout,
                    pal->data + (size_t)(first - 1) * pal->joints * width, (uint32_t)(first - 1),
                    (uint32_t)count);
    return 0;
}

/** palette:matrix_buffer(): a read-only Buffer view (instances x joints elements
 * of 16 or 12 floats). */
static int l_palette_buffer(lua_State *L) {
    lpalette *pal = check_palette(L, 1);
    lbuf_push_view(L, 1, pal->data, LBUF_F32, lmb_palette_width(pal->layout),
                   (size_t)pal->instances * pal->joints, 1);
    return 1;
}

/** palette:get(i, k [, out]): entry k of instance i (16 or 12 numbers). */
static int l_palette_get(lua_State *L) {
    lpalette *pal = check_palette(L, 1);
    uint32_t i = lcore_check_index(L, 2, pal->instances, "instance");
    uint32_t k = lcore_check_index(L, 3, pal->joints, "skin joint");
    uint32_t width = lmb_palette_width(pal->layout);
    push_floats_out(L, pal->data + ((size_t)i * pal->joints + k) * width, (int)width, 4);
    return 1;
}

/** palette:instance_count() (also #palette), palette:joint_count() (skin
 * joints per instance), palette:layout() ("mat4" or "mat3x4"). */
static int l_palette_instances(lua_State *L) {
    lua_pushinteger(L, check_palette(L, 1)->instances);
    return 1;
}

static int l_palette_joints(lua_State *L) {
    lua_pushinteger(L, check_palette(L, 1)->joints);
    return 1;
}

static int l_palette_layout(lua_State *L) {
    lua_pushstring(L, check_palette(L, 1)->layout == LMB_PALETTE_MAT4 ? "mat4" : "mat3x4");
    return 1;
}

static int l_palette_tostring(lua_State *L) {
    lpalette *pal = check_palette(L, 1);
    lua_pushfstring(L, "limber.Palette(%d instances x %d joints, %s)", (int)pal->instances,
                    (int)pal->joints, pal->layout == LMB_PALETTE_MAT4 ? "mat4" : "mat3x4");
    return 1;
}

static int l_palette_pose(lua_State *L) {
    check_palette(L, 1);
    lua_getiuservalue(L, 1, 1);
    return 1;
}

static int l_palette_skin(lua_State *L) {
    check_palette(L, 1);
    lua_getiuservalue(L, 1, 2);
    return 1;
}

void lcore_open_pose(lua_State *L) {
    static const luaL_Reg skel_methods[] = {
        {"joint_count", l_skel_count}, {"parent", l_skel_parent},    {"parents", l_skel_parents},
        {"name", l_skel_name},         {"find", l_skel_find},        {"rest_trs", l_skel_rest},
        {"rig_hash", l_skel_rig_hash}, {"inverse_bind", l_skel_ibm}, {NULL, NULL}};
    static const luaL_Reg skel_meta[] = {
        {"__len", l_skel_count}, {"__tostring", l_skel_tostring}, {NULL, NULL}};
    static const luaL_Reg pose_methods[] = {{"set_trs", l_pose_set_local},
                                            {"trs", l_pose_get_local},
                                            {"reset", l_pose_reset},
                                            {"set_root", l_pose_set_root},
                                            {"local_to_model", l_pose_l2m},
                                            {"model", l_pose_model},
                                            {"model_buffer", l_pose_models},
                                            {"dirty", l_pose_dirty},
                                            {"instance_count", l_pose_instances},
                                            {"joint_count", l_pose_joints},
                                            {"skeleton", l_pose_skeleton},
                                            {NULL, NULL}};
    static const luaL_Reg pose_meta[] = {
        {"__len", l_pose_instances}, {"__tostring", l_pose_tostring}, {NULL, NULL}};
    static const luaL_Reg skin_methods[] = {{"joint_count", l_skin_count},
                                            {"joint", l_skin_joint},
                                            {"inverse_bind", l_skin_ibm},
                                            {"skeleton", l_skin_skeleton},
                                            {NULL, NULL}};
    static const luaL_Reg skin_meta[] = {
        {"__len", l_skin_count}, {"__tostring", l_skin_tostring}, {NULL, NULL}};
    static const luaL_Reg palette_methods[] = {{"update", l_palette_update},
                                               {"matrix_buffer", l_palette_buffer},
                                               {"get", l_palette_get},
                                               {"instance_count", l_palette_instances},
                                               {"joint_count", l_palette_joints},
                                               {"layout", l_palette_layout},
                                               {"pose", l_palette_pose},
                                               {"skin", l_palette_skin},
                                               {NULL, NULL}};
    static const luaL_Reg palette_meta[] = {
        {"__len", l_palette_instances}, {"__tostring", l_palette_tostring}, {NULL, NULL}};
    static const luaL_Reg funcs[] = {{"skeleton", l_skeleton_new},
                                     {"pose", l_pose_new},
                                     {"skin", l_skin_new},
                                     {"palette", l_palette_new},
                                     {NULL, NULL}};
    lcore_class(L, SKELETON_MT, skel_meta, skel_methods);
    lcore_class(L, POSE_MT, pose_meta, pose_methods);
    lcore_class(L, SKIN_MT, skin_meta, skin_methods);
    lcore_class(L, PALETTE_MT, palette_meta, palette_methods);
    luaL_setfuncs(L, funcs, 0);
}
