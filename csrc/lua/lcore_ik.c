/* lcore_ik.c: two-bone and aim IK on pose batches (kernel ik.h). */
#include <string.h>

#include "ik.h"
#include "lcore.h"

const float *lcore_vec3_arg(lua_State *L, int arg, const char *what, int optional, float one[3],
                            size_t *count) {
    if (optional && lua_isnoneornil(L, arg)) return NULL;
    lbuffer *b = (lbuffer *)luaL_testudata(L, arg, BUFFER_MT);
    if (b) {
        if (b->type != LBUF_F32 || b->width != 3)
            luaL_argerror(L, arg, lua_pushfstring(L, "%s must be an f32 Buffer of width 3", what));
        *count = b->count;
        return (const float *)b->data;
    }
    if (!lua_istable(L, arg))
        luaL_argerror(L, arg,
                      lua_pushfstring(L,
                                      "%s must be { x, y, z } or an f32 Buffer of width 3 (got %s)",
                                      what, luaL_typename(L, arg)));
    if (lcore_rawlen(L, arg) != 3)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s must have 3 numbers", what));
    lcore_read_floats(L, arg, what, 1, one, 3);
    *count = 1;
    return one;
}

const float *lcore_weight_arg(lua_State *L, int arg, float *one, size_t *count) {
    if (lua_isnoneornil(L, arg)) return NULL;
    lbuffer *b = (lbuffer *)luaL_testudata(L, arg, BUFFER_MT);
    if (b) {
        if (b->type != LBUF_F32 || b->width != 1)
            luaL_argerror(L, arg, "weights must be an f32 Buffer of width 1");
        *count = b->count;
        return (const float *)b->data;
    }
    *one = lcore_check_float(L, arg, "weight");
    *count = 1;
    return one;
}

static uint32_t joint_arg(lua_State *L, int arg, const lmb_pose *p, const char *what) {
    return lcore_check_index(L, arg, p->joint_count, what);
}

/* The instance range [first, first + count) of a job over n instances:
 * first (1-based, default 1) at argument arg. */
static uint32_t first_arg(lua_State *L, int arg, const lmb_pose *p, size_t n) {
    lua_Integer first = luaL_optinteger(L, arg, 1);
    lua_Integer N = (lua_Integer)p->instance_count;
    if (first < 1 || first > N)
        luaL_argerror(L, arg, lua_pushfstring(L, "first %I out of range [1, %I]", first, N));
    if ((uint64_t)first - 1 + n > (uint64_t)N) /* first <= N: the sum cannot wrap */
        luaL_argerror(L, arg,
                      lua_pushfstring(L, "instances %I .. %I out of range [1, %I]", first,
                                      (lua_Integer)((uint64_t)first - 1 + n), N));
    return (uint32_t)(first - 1);
}

/* Every per-instance array of a job has the targets' count (or one entry). */
static void same_count(lua_State *L, int arg, const char *what, size_t n, size_t want) {
    if (n != want)
        luaL_argerror(
            L, arg,
            lua_pushfstring(L, "%I %s for %I targets", (lua_Integer)n, what, (lua_Integer)want));
}

/* The per-instance inputs of a job at arguments arg .. arg + 3: targets,
 * poles, weights and first (count: the instances); t1 / p1 / w1 hold a
 * single instance's values. */
typedef struct job_inputs {
    float t1[3], p1[3], w1;
    const float *targets, *poles, *weights;
    uint32_t first, count;
} job_inputs;

static void read_inputs(lua_State *L, int arg, const lmb_pose *p, job_inputs *in) {
    size_t n, np = 0, nw = 0;
    in->targets = lcore_vec3_arg(L, arg, "targets", 0, in->t1, &n);
    in->poles = lcore_vec3_arg(L, arg + 1, "poles", 1, in->p1, &np);
    if (in->poles) same_count(L, arg + 1, "poles", np, n);
    in->weights = lcore_weight_arg(L, arg + 2, &in->w1, &nw);
    if (in->weights) same_count(L, arg + 2, "weights", nw, n);
    in->first = first_arg(L, arg + 3, p, n);
    in->count = (uint32_t)n;
}

/** core.ik_two_bone(pose, root, mid, tip, targets [, poles [, weights [, first
 * [, soften [, keep_tip]]]]]): two-bone IK (ik.h) for the instances from
 * `first` (one per target); joints 1-based. */
static int l_two_bone(lua_State *L) {
    lmb_pose *p = lcore_check_pose(L, 1);
    lmb_ik_two_bone j;
    memset(&j, 0, sizeof j);
    j.pose = p;
    j.root = joint_arg(L, 2, p, "root joint");
    j.mid = joint_arg(L, 3, p, "mid joint");
    j.tip = joint_arg(L, 4, p, "tip joint");
    job_inputs in;
    read_inputs(L, 5, p, &in);
    j.targets = in.targets, j.poles = in.poles, j.weights = in.weights;
    j.first = in.first, j.count = in.count;
    j.soften = lua_isnoneornil(L, 9) ? 1.0f : lcore_check_float(L, 9, "soften");
    j.keep_tip = lua_toboolean(L, 10);
    lmb_error err;
    if (lmb_ik_two_bone_validate(&j, &err) != LMB_OK)
        return lcore_raise(L, &err, "limber.ik.two_bone");
    lmb_ik_two_bone_run(&j);
    return 0;
}

/** core.ik_aim(pose, joint, effector, forward, up, targets [, poles [,
 * weights [, first [, limit]]]]): aim IK (ik.h); up may be nil. */
static int l_aim(lua_State *L) {
    lmb_pose *p = lcore_check_pose(L, 1);
    lmb_ik_aim j;
    memset(&j, 0, sizeof j);
    j.pose = p;
    j.joint = joint_arg(L, 2, p, "joint");
    j.effector = lua_isnoneornil(L, 3) ? j.joint : joint_arg(L, 3, p, "effector");
    size_t n1;
    float f[3], u[3] = {0, 0, 0};
    const float *fv = lcore_vec3_arg(L, 4, "forward", 0, f, &n1);
    if (n1 != 1) luaL_argerror(L, 4, "forward must be { x, y, z }"); /* before reading it */
    memcpy(j.forward, fv, sizeof f);
    if (!lua_isnoneornil(L, 5)) {
        const float *uv = lcore_vec3_arg(L, 5, "up", 0, u, &n1);
        if (n1 != 1) luaL_argerror(L, 5, "up must be { x, y, z }");
        memcpy(j.up, uv, sizeof u);
    }
    job_inputs in;
    read_inputs(L, 6, p, &in);
    j.targets = in.targets, j.poles = in.poles, j.weights = in.weights;
    j.first = in.first, j.count = in.count;
    j.limit = lua_isnoneornil(L, 10) ? 0.0f : lcore_check_float(L, 10, "limit");
    lmb_error err;
    if (lmb_ik_aim_validate(&j, &err) != LMB_OK) return lcore_raise(L, &err, "limber.ik.aim");
    lmb_ik_aim_run(&j);
    return 0;
}

void lcore_open_ik(lua_State *L) {
    static const luaL_Reg funcs[] = {{"ik_two_bone", l_two_bone}, {"ik_aim", l_aim}, {NULL, NULL}};
    luaL_setfuncs(L, funcs, 0);
}
