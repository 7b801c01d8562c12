/* lcore_machine.c: state machines and blend spaces stepped for a crowd
 * (kernel machine.h): core.machine_def, core.blend_space, core.machines.
 * limber.controller builds these; every table is read raw. */
#include <math.h>
#include <string.h>

#include "lcore.h"
#include "machine.h"

#define MDEF_MT "limber.MachineDef"
#define SPACE_MT "limber.SpaceDef"
#define MACHINES_MT "limber.Machines"

/* The most parameters an instance has, states a machine has, transitions
 * and conditions it has. */
#define MAX_PARAMS 4096
#define MAX_STATES 4096
#define MAX_TRANS 65536

typedef struct lmdef {
    lmb_mdef def;
    uint32_t param_need; /* the largest parameter number used + 1 */
} lmdef;

/* ---- reading raw tables ---------------------------------------------------- */

/* A 1-based integer in [1, n] at the top (popped), or a raised error naming
 * `what`. */
static uint32_t top_index(lua_State *L, const char *fn, const char *what, uint32_t n) {
    lua_Integer v = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
    if (v < 1 || v > (lua_Integer)n)
        luaL_error(L, "%s: %s must be an integer in [1, %d]", fn, what, (int)n);
    lua_pop(L, 1);
    return (uint32_t)(v - 1);
}

static double top_number(lua_State *L, const char *fn, const char *what) {
    if (lua_type(L, -1) != LUA_TNUMBER) luaL_error(L, "%s: %s must be a number", fn, what);
    double v = (double)lua_tonumber(L, -1);
    lua_pop(L, 1);
    return v;
}

static uint32_t table_len(lua_State *L, int t, const char *fn, const char *what, uint32_t most) {
    if (lua_type(L, t) != LUA_TTABLE) luaL_error(L, "%s: %s must be a table", fn, what);
    lua_Integer n = lcore_rawlen(L, t);
    if (n < 0 || n > (lua_Integer)most)
        luaL_error(L, "%s: %s has more than %d entries", fn, what, (int)most);
    return (uint32_t)n;
}

static uint8_t op_of(const char *s) {
    static const char *ops[] = {"<", "<=", ">", ">=", "==", "~="};
    for (uint8_t k = 0; k < 6; k++)
        if (strcmp(s, ops[k]) == 0) return k;
    return 255;
}

/* ---- MachineDef ------------------------------------------------------------ */

/** core.machine_def(desc): a state machine's definition for
 * core.machines. desc = { states = { { transitions = { { when = { { param,
 * op, value }, ... }, trigger = param, at_end = bool, at_phase = p,
 * at_marker = bool }, ... }, space = bool, params = { param
 * [, param] }, smooth = seconds }, ... } }: parameters are numbers in [1,
 * 4096], ops "<", "<=", ">", ">=", "==", "~=", values numbers or booleans,
 * transitions in firing order. */
static int l_machine_def(lua_State *L) {
    const char *fn = "limber.core.machine_def";
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);               /* (the indices below count from here) */
    lcore_rawfield(L, 1, "states"); /* 2 */
    uint32_t S = table_len(L, 2, fn, "desc.states", MAX_STATES);
    if (S == 0) return luaL_error(L, "%s: desc.states is empty", fn);
    /* count transitions and conditions first */
    uint32_t T = 0, C = 0;
    for (uint32_t s = 1; s <= S; s++) {
        lua_rawgeti(L, 2, s);
        if (lua_type(L, -1) != LUA_TTABLE)
            return luaL_error(L, "%s: state %d must be a table", fn, (int)s);
        int st = lua_gettop(L);
        if (lcore_rawfield(L, st, "transitions") != LUA_TNIL) {
            uint32_t n = table_len(L, st + 1, fn, "transitions", MAX_TRANS);
            for (uint32_t t = 1; t <= n; t++) {
                lua_rawgeti(L, st + 1, t);
                if (lua_type(L, -1) != LUA_TTABLE)
                    return luaL_error(L, "%s: state %d: transition %d must be a table", fn, (int)s,
                                      (int)t);
                if (lcore_rawfield(L, -1, "when") != LUA_TNIL)
                    C += table_len(L, lua_gettop(L), fn, "when", MAX_TRANS);
                lua_pop(L, 2);
            }
            T += n;
            if (T > MAX_TRANS || C > MAX_TRANS)
                return luaL_error(L, "%s: too many transitions or conditions", fn);
        }
        lua_settop(L, 2);
    }
    size_t bytes = sizeof(lmdef) + S * sizeof(lmb_mstate) + (T ? T : 1) * sizeof(lmb_mtrans) +
                   (C ? C : 1) * sizeof(lmb_mcond);
    lmdef *md = (lmdef *)lcore_newobject(L, bytes, 0, MDEF_MT); /* 3 */
    lmb_mdef *d = &md->def;
    unsigned char *mem = (unsigned char *)(md + 1);
    d->states = (lmb_mstate *)(void *)mem;
    d->trans = (lmb_mtrans *)(void *)(mem + S * sizeof(lmb_mstate));
    d->conds = (lmb_mcond *)(void *)((unsigned char *)d->trans + (T ? T : 1) * sizeof(lmb_mtrans));
    d->state_count = S;
    uint32_t need = 0, t_at = 0, c_at = 0;
#define PARAM(v) ((v) + 1 > need ? (need = (v) + 1) : need)
    for (uint32_t s = 1; s <= S; s++) {
        lua_rawgeti(L, 2, s);
        int st = lua_gettop(L);
        lmb_mstate *ms = d->states + s - 1;
        lcore_rawfield(L, st, "space");
        ms->space = (uint8_t)lua_toboolean(L, -1);
        lua_settop(L, st);
        if (ms->space) {
            lcore_rawfield(L, st, "params");
            uint32_t n = table_len(L, st + 1, fn, "params", 2);
            if (n < 1) return luaL_error(L, "%s: state %d: params is empty", fn, (int)s);
            ms->dims = (uint8_t)n;
            for (uint32_t k = 0; k < n; k++) {
                lua_rawgeti(L, st + 1, k + 1);
                ms->param[k] = top_index(L, fn, "a parameter", MAX_PARAMS);
                PARAM(ms->param[k]);
            }
            lua_settop(L, st);
            lcore_rawfield(L, st, "smooth");
            double sm = lua_isnil(L, -1) ? 0.0 : top_number(L, fn, "smooth");
            if (!(sm >= 0.0) || sm > (double)LMB_FLOAT_LIMIT)
                return luaL_error(L, "%s: state %d: smooth must be a finite number >= 0", fn,
                                  (int)s);
            ms->smooth = (float)sm;
            lua_settop(L, st);
        }
        ms->tr_first = t_at;
        if (lcore_rawfield(L, st, "transitions") != LUA_TNIL) {
            uint32_t n = (uint32_t)lcore_rawlen(L, st + 1);
            for (uint32_t t = 1; t <= n; t++, t_at++) {
                if (t_at >= T) return luaL_error(L, "%s: desc changed while read", fn);
                lua_rawgeti(L, st + 1, t);
                int tt = lua_gettop(L);
                lmb_mtrans *tr = d->trans + t_at;
                tr->cond_first = c_at;
                tr->trigger = -1;
                if (lcore_rawfield(L, tt, "trigger") != LUA_TNIL) {
                    tr->trigger = (int32_t)top_index(L, fn, "trigger", MAX_PARAMS);
                    PARAM((uint32_t)tr->trigger);
                }
                lua_settop(L, tt);
                lcore_rawfield(L, tt, "at_end");
                tr->at_end = (uint8_t)lua_toboolean(L, -1);
                lcore_rawfield(L, tt, "at_marker");
                tr->at_marker = (uint8_t)lua_toboolean(L, -1);
                lua_settop(L, tt);
                if (lcore_rawfield(L, tt, "at_phase") != LUA_TNIL) {
                    tr->has_phase = 1;
                    tr->phase = top_number(L, fn, "at_phase");
                }
                lua_settop(L, tt);
                if (lcore_rawfield(L, tt, "when") != LUA_TNIL) {
                    uint32_t nc = (uint32_t)lcore_rawlen(L, tt + 1);
                    for (uint32_t c = 1; c <= nc; c++, c_at++) {
                        if (c_at >= C) return luaL_error(L, "%s: desc changed while read", fn);
                        lua_rawgeti(L, tt + 1, c);
                        int ct = lua_gettop(L);
                        if (lua_type(L, ct) != LUA_TTABLE)
                            return luaL_error(L, "%s: a condition must be { param, op, value }",
                                              fn);
                        lmb_mcond *cd = d->conds + c_at;
                        lua_rawgeti(L, ct, 1);
                        cd->param = top_index(L, fn, "a condition's parameter", MAX_PARAMS);
                        PARAM(cd->param);
                        lua_rawgeti(L, ct, 2);
                        cd->op = lua_type(L, -1) == LUA_TSTRING ? op_of(lua_tostring(L, -1)) : 255;
                        if (cd->op == 255) return luaL_error(L, "%s: unknown condition op", fn);
                        lua_pop(L, 1);
                        lua_rawgeti(L, ct, 3);
                        if (lua_type(L, -1) == LUA_TBOOLEAN) {
                            cd->boolean = 1;
                            cd->value = lua_toboolean(L, -1) ? 1.0 : 0.0;
                            lua_pop(L, 1);
                        } else {
                            cd->value = top_number(L, fn, "a condition's value");
                        }
                        lua_settop(L, tt + 1);
                    }
                }
                tr->cond_count = c_at - tr->cond_first;
                /* the state is looked at every step when one waits on time */
                ms->timed |= (uint8_t)(tr->at_end || tr->has_phase || tr->at_marker);
                lua_settop(L, st + 1);
            }
        }
        ms->tr_count = t_at - ms->tr_first;
        lua_settop(L, 3);
    }
#undef PARAM
    d->trans_count = t_at, d->cond_count = c_at;
    md->param_need = need;
    lmb_error err;
    if (lmb_mdef_validate(d, MAX_PARAMS, &err) != LMB_OK) return lcore_raise(L, &err, fn);
    return 1;
}

static lmdef *check_mdef(lua_State *L, int arg) {
    return (lmdef *)lmb_align_ptr(luaL_checkudata(L, arg, MDEF_MT), 64);
}

/** def:state_count(): the definition's number of states. */
static int l_mdef_states(lua_State *L) {
    lua_pushinteger(L, check_mdef(L, 1)->def.state_count);
    return 1;
}

/* ---- SpaceDef -------------------------------------------------------------- */

/** core.blend_space(desc): a blend space for core.machines. desc = { dims =
 * 1 or 2, at = { x, ... } (1D, ascending) or { { x, y }, ... } (2D),
 * durations = { seconds, ... } (one per point), tris = { { a, b, c }, ...
 * } and edges = { { a, b }, ... } (2D: point numbers of a triangulation and
 * its hull), sync = bool }. */
static int l_blend_space(lua_State *L) {
    const char *fn = "limber.core.blend_space";
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);             /* (the indices below count from here) */
    lcore_rawfield(L, 1, "dims"); /* 2 */
    uint32_t dims = top_index(L, fn, "desc.dims", 2) + 1;
    lcore_rawfield(L, 1, "at");        /* 2 */
    lcore_rawfield(L, 1, "durations"); /* 3 */
    lcore_rawfield(L, 1, "tris");      /* 4 */
    lcore_rawfield(L, 1, "edges");     /* 5 */
    uint32_t n = table_len(L, 2, fn, "desc.at", LMB_SPACE_MAX);
    if (n < 1) return luaL_error(L, "%s: desc.at is empty", fn);
    if (table_len(L, 3, fn, "desc.durations", LMB_SPACE_MAX) != n)
        return luaL_error(L, "%s: desc.durations needs one entry per point", fn);
    uint32_t nt = 0, ne = 0;
    if (dims == 2) {
        nt = table_len(L, 4, fn, "desc.tris", 4 * LMB_SPACE_MAX);
        ne = table_len(L, 5, fn, "desc.edges", 4 * LMB_SPACE_MAX);
    }
    size_t bytes = sizeof(lmb_space) + (size_t)n * (dims + 1) * sizeof(double) +
                   ((size_t)nt * 3 + (size_t)ne * 2 + 1) * sizeof(uint32_t);
    lmb_space *sp = (lmb_space *)lcore_newobject(L, bytes, 0, SPACE_MT); /* 6 */
    sp->dims = dims, sp->count = n, sp->tri_count = nt, sp->edge_count = ne;
    sp->at = (double *)(void *)(sp + 1);
    sp->dur = sp->at + (size_t)n * dims;
    sp->tris = (uint32_t *)(void *)(sp->dur + n);
    sp->edges = sp->tris + (size_t)nt * 3;
    for (uint32_t k = 0; k < n; k++) {
        lua_rawgeti(L, 2, k + 1);
        if (dims == 1) {
            sp->at[k] = top_number(L, fn, "a point");
        } else {
            int pt = lua_gettop(L);
            if (lua_type(L, pt) != LUA_TTABLE)
                return luaL_error(L, "%s: a 2D point must be { x, y }", fn);
            lua_rawgeti(L, pt, 1);
            sp->at[2 * k] = top_number(L, fn, "a point's x");
            lua_rawgeti(L, pt, 2);
            sp->at[2 * k + 1] = top_number(L, fn, "a point's y");
            lua_pop(L, 1);
        }
        lua_rawgeti(L, 3, k + 1);
        sp->dur[k] = top_number(L, fn, "a duration");
    }
    for (uint32_t k = 0; k < nt + ne; k++) {
        int tri = k < nt;
        lua_rawgeti(L, tri ? 4 : 5, tri ? k + 1 : k - nt + 1);
        int e = lua_gettop(L);
        if (lua_type(L, e) != LUA_TTABLE)
            return luaL_error(L, "%s: a triangle or edge must be a table", fn);
        for (uint32_t c = 0; c < (tri ? 3u : 2u); c++) {
            lua_rawgeti(L, e, c + 1);
            uint32_t v = top_index(L, fn, "a triangle or edge's point", n);
            if (tri)
                sp->tris[3 * k + c] = v;
            else
                sp->edges[2 * (k - nt) + c] = v;
        }
        lua_pop(L, 1);
    }
    lcore_rawfield(L, 1, "sync");
    sp->sync = (uint32_t)lua_toboolean(L, -1);
    lua_pop(L, 1);
    lmb_error err;
    if (lmb_space_validate(sp, &err) != LMB_OK) return lcore_raise(L, &err, fn);
    return 1;
}

static lmb_space *check_space(lua_State *L, int arg) {
    return (lmb_space *)lmb_align_ptr(luaL_checkudata(L, arg, SPACE_MT), 64);
}

/** space:weights(x [, y]): the points' weights at x (2D: at (x, y)), a
 * table (x, y: numbers, not NaN). */
static int l_space_weights(lua_State *L) {
    lmb_space *sp = check_space(L, 1);
    double x = luaL_checknumber(L, 2), y = sp->dims == 2 ? luaL_checknumber(L, 3) : 0.0;
    luaL_argcheck(L, x == x, 2, "x is NaN");
    luaL_argcheck(L, y == y, 3, "y is NaN");
    double w[LMB_SPACE_MAX];
    lmb_space_weights(sp, x, y, w);
    lua_createtable(L, (int)sp->count, 0);
    for (uint32_t k = 0; k < sp->count; k++) {
        lua_pushnumber(L, (lua_Number)w[k]);
        lua_rawseti(L, -2, k + 1);
    }
    return 1;
}

/* ---- Machines -------------------------------------------------------------- */

typedef struct lmachines {
    lmb_machines m;
    uint32_t *out_key;
    int32_t *out_code;
    double *out_el;
} lmachines;

/* User values: 1 the plan, 2 defs by run key, 3 spaces by run key, 4 the
 * parameter arrays (a userdata replaced when they grow), 5 the event times
 * by clip (userdata). */

static lmachines *check_machines(lua_State *L, int arg) {
    return (lmachines *)lmb_align_ptr(luaL_checkudata(L, arg, MACHINES_MT), 64);
}

/** core.machines(plan): the state machines and blend spaces of the plan's
 * crowd (every run empty, no parameter set). */
static int l_machines(lua_State *L) {
    lmb_plan *p = lcore_check_plan(L, 1);
    uint32_t N = p->pose->instance_count, Ly = p->layer_count, S = p->source_count;
    lua_settop(L, 1); /* the new object at 2 */
    size_t R = (size_t)N * Ly;
    size_t bytes =
        sizeof(lmachines) + R * sizeof(lmb_mrun) + R * 2 * (sizeof(uint32_t) + sizeof(int32_t)) +
        (size_t)N * (1 + sizeof(uint32_t) + Ly * sizeof(float)) + (size_t)N * S * sizeof(lmb_kept) +
        (size_t)p->src[0].clip_count * (sizeof(lmb_root_tracks) + sizeof(lmb_clip_events)) +
        R * sizeof(double) + 64;
    lmachines *lm = (lmachines *)lcore_newobject(L, bytes, 5, MACHINES_MT); /* 2 */
    lmb_machines *m = &lm->m;
    m->plan = p, m->instance_count = N, m->layer_count = Ly;
    unsigned char *mem = (unsigned char *)lmb_align_ptr(lm + 1, 8);
    m->kept_src = (lmb_kept *)(void *)mem;
    mem += (size_t)N * S * sizeof(lmb_kept);
    m->roots = (lmb_root_tracks *)(void *)mem;
    mem += (size_t)p->src[0].clip_count * sizeof(lmb_root_tracks);
    m->root_joint = UINT32_MAX;
    m->events = (lmb_clip_events *)(void *)mem;
    mem += (size_t)p->src[0].clip_count * sizeof(lmb_clip_events);
    m->runs = (lmb_mrun *)(void *)mem;
    mem += R * sizeof(lmb_mrun);
    lm->out_el = (double *)(void *)mem;
    mem += R * sizeof(double);
    lm->out_key = (uint32_t *)(void *)mem;
    mem += R * 2 * sizeof(uint32_t);
    lm->out_code = (int32_t *)(void *)mem;
    mem += R * 2 * sizeof(int32_t);
    m->kept_list = (uint32_t *)(void *)mem;
    mem += (size_t)N * sizeof(uint32_t);
    m->kept_layer = (float *)(void *)mem;
    mem += (size_t)N * Ly * sizeof(float);
    m->kept = mem;
    for (size_t k = 0; k < R; k++)
        m->runs[k].slot = -1;
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, 2, 1);
    lua_newtable(L);
    lua_setiuservalue(L, 2, 2);
    lua_newtable(L);
    lua_setiuservalue(L, 2, 3);
    lua_newtable(L);
    lua_setiuservalue(L, 2, 5);
    return 1;
}

static uint32_t check_instance(lua_State *L, lmachines *lm, int arg) {
    return lcore_check_index(L, arg, lm->m.instance_count, "instance");
}

/* (i, n) at arg, arg + 1: the run's key (0-based). */
static uint32_t check_key(lua_State *L, lmachines *lm, int arg) {
    uint32_t i = check_instance(L, lm, arg);
    uint32_t n = lcore_check_index(L, arg + 1, lm->m.layer_count, "layer");
    return i * lm->m.layer_count + n;
}

/* Grows the parameter arrays to `need` parameters per instance (raises on
 * failure, before anything changed). */
static void grow_params(lua_State *L, lmachines *lm, uint32_t need) {
    lmb_machines *m = &lm->m;
    if (need <= m->param_count) return;
    uint32_t had = m->param_count, cap = had ? had : 4;
    while (cap < need)
        cap *= 2;
    if (cap > MAX_PARAMS) cap = MAX_PARAMS;
    size_t N = m->instance_count;
    unsigned char *mem =
        (unsigned char *)lua_newuserdatauv(L, N * cap * (sizeof(double) + 1) + 8, 0);
    if (m->param_count != had) {
        /* a __gc run by that allocation grew the arrays (set_param from a
         * finalizer): start again from what they are now */
        lua_pop(L, 1);
        grow_params(L, lm, need);
        return;
    }
    double *v = (double *)lmb_align_ptr(mem, 8);
    uint8_t *t = (uint8_t *)(v + N * cap);
    memset(v, 0, N * cap * sizeof(double));
    memset(t, 0, N * cap);
    for (size_t i = 0; i < N; i++) {
        if (m->param_count == 0) break;
        memcpy(v + i * cap, m->param + i * m->param_count, m->param_count * sizeof(double));
        memcpy(t + i * cap, m->param_type + i * m->param_count, m->param_count);
    }
    lua_setiuservalue(L, 1, 4); /* the old arrays go with the GC */
    m->param = v, m->param_type = t, m->param_count = cap;
}

/** machines:set_param(i, param, value [, quiet]): instance i's parameter
 * number `param` (1 .. 4096) to a number or boolean; the runs of i with a
 * machine are looked at in the next step unless `quiet`. */
static int l_set_param(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    uint32_t i = check_instance(L, lm, 2);
    uint32_t pid = lcore_check_index(L, 3, MAX_PARAMS, "parameter");
    int t = lua_type(L, 4);
    if (t != LUA_TNUMBER && t != LUA_TBOOLEAN)
        return luaL_argerror(L, 4, "value must be a number or boolean");
    grow_params(L, lm, pid + 1);
    lmb_machines *m = &lm->m;
    size_t at = (size_t)i * m->param_count + pid;
    m->param_type[at] = t == LUA_TNUMBER ? LMB_PARAM_NUMBER : LMB_PARAM_BOOL;
    m->param[at] =
        t == LUA_TNUMBER ? (double)lua_tonumber(L, 4) : (lua_toboolean(L, 4) ? 1.0 : 0.0);
    if (!lua_toboolean(L, 5)) lmb_machines_touch(m, i);
    return 0;
}

/** machines:param(i, param): the value (nil: unset). */
static int l_param(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    uint32_t i = check_instance(L, lm, 2);
    uint32_t pid = lcore_check_index(L, 3, MAX_PARAMS, "parameter");
    lmb_machines *m = &lm->m;
    if (pid >= m->param_count) return 0;
    size_t at = (size_t)i * m->param_count + pid;
    if (m->param_type[at] == LMB_PARAM_NUMBER)
        lua_pushnumber(L, (lua_Number)m->param[at]);
    else if (m->param_type[at] == LMB_PARAM_BOOL)
        lua_pushboolean(L, m->param[at] != 0.0);
    else
        lua_pushnil(L);
    return 1;
}

/* Anchors the value at `v` (or nil) as run `key`'s entry in user value uv. */
static void anchor(lua_State *L, int uv, uint32_t key, int v) {
    lua_getiuservalue(L, 1, uv);
    lua_pushvalue(L, v);
    lua_rawseti(L, -2, (lua_Integer)key + 1);
    lua_pop(L, 1);
}

/** machines:set_run(i, layer, def, state [, slot]): the machine `def`
 * (core.machine_def; nil: none) runs on the layer in state `state`, its
 * clip on source `slot` of the layer (nil: a space state); looked at in
 * the next step. */
static int l_set_run(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    uint32_t key = check_key(L, lm, 2);
    lmb_mrun *r = lm->m.runs + key;
    if (lua_isnil(L, 4)) {
        r->def = NULL, r->dirty = 0, r->slot = -1;
        anchor(L, 2, key, 4);
        return 0;
    }
    lmdef *md = check_mdef(L, 4);
    uint32_t st = lcore_check_index(L, 5, md->def.state_count, "state");
    const lmb_plan *p = lm->m.plan;
    uint32_t n = key % lm->m.layer_count;
    int32_t slot = lua_isnoneornil(L, 6)
                       ? -1
                       : (int32_t)lcore_check_index(L, 6, p->layers[n].source_count, "source");
    grow_params(L, lm, md->param_need);
    anchor(L, 2, key, 4);
    r->def = &md->def, r->state = st, r->slot = slot, r->dirty = 1;
    return 0;
}

/** machines:run(i, layer): the state (nil: no machine) and source. */
static int l_run(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    const lmb_mrun *r = lm->m.runs + check_key(L, lm, 2);
    if (!r->def) return 0;
    lua_pushinteger(L, (lua_Integer)r->state + 1);
    if (r->slot < 0)
        lua_pushnil(L);
    else
        lua_pushinteger(L, (lua_Integer)r->slot + 1);
    return 2;
}

/** machines:bind(i, layer, space, sources [, marker]): the blend space
 * (core.blend_space; nil: none) plays on the layer, its points on the
 * layer's `sources` (a table, one per point); `marker`: the caller syncs it
 * by markers (a step reports its changes instead of applying them). */
static int l_bind(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    uint32_t key = check_key(L, lm, 2);
    lmb_mrun *r = lm->m.runs + key;
    if (lua_isnil(L, 4)) {
        r->space = NULL, r->nslots = 0, r->has_x = 0;
        anchor(L, 3, key, 4);
        return 0;
    }
    lmb_space *sp = check_space(L, 4);
    luaL_checktype(L, 5, LUA_TTABLE);
    uint32_t n = key % lm->m.layer_count, count = lm->m.plan->layers[n].source_count;
    if (lcore_rawlen(L, 5) != (lua_Integer)sp->count)
        return luaL_argerror(L, 5, "one source per point of the space");
    uint8_t slots[LMB_SPACE_MAX];
    for (uint32_t k = 0; k < sp->count; k++) {
        lua_rawgeti(L, 5, k + 1);
        lua_Integer s = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
        if (s < 1 || s > (lua_Integer)count)
            return luaL_argerror(
                L, 5, lua_pushfstring(L, "sources[%d] must be in [1, %d]", (int)k + 1, (int)count));
        slots[k] = (uint8_t)(s - 1);
        lua_pop(L, 1);
    }
    anchor(L, 3, key, 4);
    r->space = sp, r->nslots = (uint8_t)sp->count, r->has_x = 0;
    r->marker = (uint8_t)lua_toboolean(L, 6);
    memcpy(r->slots, slots, sp->count);
    return 0;
}

/** machines:apply(i, layer, x, y, fade): the space on the layer goes to
 * (x, y) (1D: y ignored): weights over `fade` seconds, synced rates at once
 * (not for a space synced by markers). x, y not NaN; fade finite >= 0.
 * Returns the seconds since the run's marker phase was set (set_marker),
 * 0 when it does not sync by markers. */
static int l_apply(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    uint32_t key = check_key(L, lm, 2);
    double x = luaL_checknumber(L, 4), y = luaL_optnumber(L, 5, 0.0);
    luaL_argcheck(L, x == x, 4, "x is NaN");
    luaL_argcheck(L, y == y, 5, "y is NaN");
    float fade = lua_isnoneornil(L, 6) ? 0.0f : lcore_check_float(L, 6, "fade");
    luaL_argcheck(L, fade >= 0.0f, 6, "fade must be >= 0");
    lmb_machines_apply(&lm->m, key, x, y, fade);
    const lmb_mrun *r = lm->m.runs + key;
    lua_pushnumber(L, r->synced ? (lua_Number)r->el : 0.0);
    return 1;
}

/** machines:touch(i, layer): the run is looked at in the next step. */
static int l_touch(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    lmb_mrun *r = lm->m.runs + check_key(L, lm, 2);
    if (r->def) r->dirty = 1;
    return 0;
}

/** machines:step(dt, out): one step after a plan run of dt (see
 * lmb_machines_step); fills out (raw) with key, code pairs (key = (i - 1)
 * * layers + layer; code 0: a marker space's parameter changed, k: the
 * state's k-th transition holds, -k: it holds if its marker was crossed)
 * and returns the number of pairs. */
/* A step of dt, its reports into the table at 3; pushes their count. */
static int step_into(lua_State *L, lmachines *lm, double dt) {
    uint32_t n = lmb_machines_step(&lm->m, dt, lm->out_key, lm->out_code);
    for (uint32_t k = 0; k < n; k++) {
        lua_pushinteger(L, (lua_Integer)lm->out_key[k] + 1);
        lua_rawseti(L, 3, 2 * (lua_Integer)k + 1);
        lua_pushinteger(L, lm->out_code[k]);
        lua_rawseti(L, 3, 2 * (lua_Integer)k + 2);
    }
    lua_pushinteger(L, n);
    return 1;
}

static int l_step(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    double dt = luaL_checknumber(L, 2);
    luaL_argcheck(L, isfinite(dt), 2, "dt must be finite");
    luaL_checktype(L, 3, LUA_TTABLE);
    return step_into(L, lm, dt);
}

/** machines:update(dt, out): the plan's run of dt (plan:run(dt): times,
 * fades, the crowd's evaluation), then machines:step(dt, out), in one
 * call. dt a finite float. Returns step's count. */
static int l_update(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    lcore_check_float(L, 2, "dt");
    double dt = (double)lua_tonumber(L, 2); /* (checked as a float, used as given) */
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_settop(L, 3);
    lua_getiuservalue(L, 1, 1); /* the plan, 4 */
    lcore_plan_run(L, 4, dt);
    lua_settop(L, 3);
    return step_into(L, lm, dt);
}

/** machines:keep(i): keeps instance i's sources as the last run played
 * them (until the next step), for events and root motion. */
static int l_keep(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    lmb_machines_keep(&lm->m, check_instance(L, lm, 2));
    return 0;
}

/** machines:kept(): the instances kept since the last step, ascending. */
static int l_kept(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    const lmb_machines *m = &lm->m;
    lua_createtable(L, (int)m->kept_count, 0);
    lua_Integer k = 0;
    for (uint32_t i = 0; i < m->instance_count; i++)
        if (m->kept[i]) {
            lua_pushinteger(L, (lua_Integer)i + 1);
            lua_rawseti(L, -2, ++k);
        }
    return 1;
}

/** machines:source(i, layer, source): as plan:source, but as the last run
 * played it when the instance was kept. */
static int l_source(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    uint32_t key = check_key(L, lm, 2), i = key / lm->m.layer_count;
    const lmb_plan *p = lm->m.plan;
    const lmb_stack_layer *ly = p->layers + key % lm->m.layer_count;
    uint32_t k = ly->first_source + lcore_check_index(L, 4, ly->source_count, "source");
    lmb_kept e;
    lmb_machines_source(&lm->m, i, k, &e);
    if (e.clip < 0)
        lua_pushnil(L);
    else
        lua_pushinteger(L, (lua_Integer)e.clip + 1);
    lua_pushnumber(L, (lua_Number)e.time);
    lua_pushnumber(L, (lua_Number)e.rate);
    lua_pushboolean(L, e.loop);
    lua_pushnumber(L, (lua_Number)e.weight);
    lua_pushnumber(L, (lua_Number)e.prev);
    return 6;
}

/** machines:layer_weight(i, layer): as plan:layer_weight, kept or now. */
static int l_layer_weight(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    uint32_t key = check_key(L, lm, 2), i = key / lm->m.layer_count;
    uint32_t n = key % lm->m.layer_count;
    float w = lm->m.kept[i] ? lm->m.kept_layer[(size_t)i * lm->m.layer_count + n]
                            : lm->m.plan->layer_weight[(size_t)n * lm->m.instance_count + i];
    lua_pushnumber(L, (lua_Number)w);
    return 1;
}

/* The joint argument at arg: 0-based, inside the plan's skeleton. */
static uint32_t check_joint(lua_State *L, lmachines *lm, int arg) {
    return lcore_check_index(L, arg, lm->m.plan->pose->joint_count, "joint");
}

/** machines:root_motion(joint, i): instance i's root motion in the plan's
 * last run (lmb_machines_root): dx, dy, dz, dyaw of joint `joint`. */
static int l_root_motion(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    uint32_t j = check_joint(L, lm, 2), i = check_instance(L, lm, 3);
    double out[4];
    lmb_machines_root(&lm->m, j, i, out);
    for (int k = 0; k < 4; k++)
        lua_pushnumber(L, (lua_Number)out[k]);
    return 4;
}

/** machines:root_motions(joint [, out]): every instance's root motion in
 * the plan's last run, as machines:root_motion, in an f32 Buffer of width 4
 * and one element per instance (`out`, filled, or new). */
static int l_root_motions(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    uint32_t j = check_joint(L, lm, 2), N = lm->m.instance_count;
    lbuffer *b;
    if (lua_isnoneornil(L, 3)) {
        b = lbuf_push(L, LBUF_F32, 4, N);
    } else {
        b = lbuf_check(L, 3);
        if (b->type != LBUF_F32 || b->width != 4 || b->count != N || b->readonly)
            return luaL_argerror(L, 3,
                                 "out must be a writable f32 Buffer of width 4, one element "
                                 "per instance");
        lua_pushvalue(L, 3);
    }
    float *o = (float *)b->data;
    for (uint32_t i = 0; i < N; i++) {
        double v[4];
        lmb_machines_root(&lm->m, j, i, v);
        for (size_t k = 0; k < 4; k++) {
            double x = v[k];
            o[4 * (size_t)i + k] = (float)(x > 3.4e38 ? 3.4e38 : (x < -3.4e38 ? -3.4e38 : x));
        }
    }
    return 1;
}

/* Reads `count` numbers of the array at arg into out: finite, ascending,
 * in [lo, hi] (hi_open: below hi). */
static void read_times(lua_State *L, int arg, uint32_t count, double lo, double hi, int hi_open,
                       double *out) {
    for (uint32_t k = 0; k < count; k++) {
        lua_rawgeti(L, arg, (lua_Integer)k + 1);
        double v = lua_type(L, -1) == LUA_TNUMBER ? (double)lua_tonumber(L, -1) : (double)NAN;
        lua_pop(L, 1);
        if (!(v >= lo && (hi_open ? v < hi : v <= hi)) || (k > 0 && v < out[k - 1]))
            luaL_argerror(
                L, arg,
                lua_pushfstring(L, "event %d: a number in the clip, in time order", (int)k + 1));
        out[k] = v;
    }
}

/** machines:set_events(clip, times, loop_times): the event times of clip
 * `clip` (1-based in the plan's set; nil times: none), as limber.anim keeps
 * them: ascending in [0, duration], and for looping play ascending in [0,
 * duration) (an event at the duration moved to 0); the same count. */
static int l_set_events(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    const lmb_sampler *s = lm->m.plan->src;
    uint32_t c = lcore_check_index(L, 2, s->clip_count, "clip");
    if (lua_isnil(L, 3)) {
        lm->m.events[c].count = 0;
        return 0;
    }
    luaL_checktype(L, 3, LUA_TTABLE);
    luaL_checktype(L, 4, LUA_TTABLE);
    lua_Integer n = lcore_rawlen(L, 3);
    if (n < 1 || n > (1 << 20) || lcore_rawlen(L, 4) != n)
        return luaL_argerror(L, 4, "1 to 2^20 times, as many as loop times");
    double d = (double)s->clips[c]->duration;
    double *mem = (double *)lua_newuserdatauv(L, (size_t)n * 2 * sizeof(double), 0);
    read_times(L, 3, (uint32_t)n, 0.0, d, 0, mem);
    read_times(L, 4, (uint32_t)n, 0.0, d, d > 0.0, mem + n);
    lua_getiuservalue(L, 1, 5);
    lua_pushvalue(L, -2);
    lua_rawseti(L, -2, (lua_Integer)c + 1); /* the old times go with the GC */
    lmb_clip_events *ev = lm->m.events + c;
    ev->times = mem, ev->loop_times = mem + n, ev->count = (uint32_t)n;
    return 0;
}

/* Appends a hit to the table at stack index 3 (raw): instance, layer,
 * source, clip (1-based), event (1-based; negative: loop_times), weight.
 * (A memory error raised here unwinds lmb_machines_events, which holds no
 * resource and changes nothing while it calls back.) */
struct hits {
    lua_State *L;
    lua_Integer n;
};

static void push_hit(void *ctx, const lmb_event_hit *h) {
    struct hits *o = (struct hits *)ctx;
    lua_State *L = o->L;
    lua_Integer at = o->n * 6;
    lua_pushinteger(L, (lua_Integer)h->instance + 1);
    lua_rawseti(L, 3, at + 1);
    lua_pushinteger(L, (lua_Integer)h->layer + 1);
    lua_rawseti(L, 3, at + 2);
    lua_pushinteger(L, (lua_Integer)h->source + 1);
    lua_rawseti(L, 3, at + 3);
    lua_pushinteger(L, (lua_Integer)h->clip + 1);
    lua_rawseti(L, 3, at + 4);
    lua_pushinteger(L, h->looped ? -((lua_Integer)h->event + 1) : (lua_Integer)h->event + 1);
    lua_rawseti(L, 3, at + 5);
    lua_pushnumber(L, (lua_Number)h->weight);
    lua_rawseti(L, 3, at + 6);
    o->n++;
}

/** machines:events(threshold, out [, i]): the events the sources of
 * instance i (nil: every instance, ascending) crossed in the plan's last
 * run (lmb_machines_events), for sources of effective weight above
 * threshold (>= 0; 0: above 0; a number, or a table of one per layer, read
 * raw): out (raw) gets 6 values per event:
 * instance, layer, source, clip, event (1-based into the times given to
 * set_events; negative: into loop_times), weight. Returns the count. */
static int l_events(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    double thr[LMB_STACK_MAX_LAYERS];
    for (uint32_t n = 0; n < lm->m.layer_count; n++) {
        if (lua_type(L, 2) == LUA_TTABLE) {
            lua_rawgeti(L, 2, (lua_Integer)n + 1);
            thr[n] = lua_type(L, -1) == LUA_TNUMBER ? (double)lua_tonumber(L, -1) : (double)NAN;
            lua_pop(L, 1);
        } else {
            thr[n] = luaL_checknumber(L, 2);
        }
        luaL_argcheck(L, thr[n] >= 0.0, 2,
                      "thresholds must be numbers >= 0 (one, or one per layer)");
    }
    luaL_checktype(L, 3, LUA_TTABLE);
    struct hits o = {L, 0};
    if (!lua_isnoneornil(L, 4)) {
        lmb_machines_events(&lm->m, check_instance(L, lm, 4), thr, push_hit, &o);
    } else {
        for (uint32_t i = 0; i < lm->m.instance_count; i++)
            lmb_machines_events(&lm->m, i, thr, push_hit, &o);
    }
    lua_pushinteger(L, o.n);
    return 1;
}

/** machines:set_marker(i, layer, hi, lo): the space on the layer syncs by
 * markers and was just put at a marker phase: hi seconds to its next
 * marker, lo back to its previous (finite, >= 0); its time since is 0.
 * hi nil: it no longer syncs. */
static int l_set_marker(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    lmb_mrun *r = lm->m.runs + check_key(L, lm, 2);
    if (lua_isnoneornil(L, 4)) {
        r->synced = 0, r->restore = 0;
        return 0;
    }
    double hi = luaL_checknumber(L, 4), lo = luaL_checknumber(L, 5);
    luaL_argcheck(L, hi >= 0.0 && isfinite(hi), 4, "hi must be a finite number >= 0");
    luaL_argcheck(L, lo >= 0.0 && isfinite(lo), 5, "lo must be a finite number >= 0");
    r->synced = 1, r->hi = hi, r->lo = lo, r->el = 0.0;
    return 0;
}

/** machines:set_restore(i, layer, flag): whether the marker space's rates
 * need putting back before the next run. */
static int l_set_restore(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    lmb_mrun *r = lm->m.runs + check_key(L, lm, 2);
    r->restore = (uint8_t)lua_toboolean(L, 4);
    return 0;
}

/** machines:markers(dt, out): before a plan run of dt, the marker spaces
 * due (lmb_machines_markers): out (raw) gets key, code, el per run; returns
 * the count. */
static int l_markers(lua_State *L) {
    lmachines *lm = check_machines(L, 1);
    double dt = luaL_checknumber(L, 2);
    luaL_argcheck(L, isfinite(dt), 2, "dt must be finite");
    luaL_checktype(L, 3, LUA_TTABLE);
    uint32_t n = lmb_machines_markers(&lm->m, dt, lm->out_key, lm->out_code, lm->out_el);
    for (uint32_t k = 0; k < n; k++) {
        lua_pushinteger(L, (lua_Integer)lm->out_key[k] + 1);
        lua_rawseti(L, 3, 3 * (lua_Integer)k + 1);
        lua_pushinteger(L, lm->out_code[k]);
        lua_rawseti(L, 3, 3 * (lua_Integer)k + 2);
        lua_pushnumber(L, (lua_Number)lm->out_el[k]);
        lua_rawseti(L, 3, 3 * (lua_Integer)k + 3);
    }
    lua_pushinteger(L, n);
    return 1;
}

void lcore_open_machine(lua_State *L) {
    static const luaL_Reg mdef_methods[] = {{"state_count", l_mdef_states}, {NULL, NULL}};
    static const luaL_Reg space_methods[] = {{"weights", l_space_weights}, {NULL, NULL}};
    static const luaL_Reg methods[] = {{"set_param", l_set_param},
                                       {"param", l_param},
                                       {"set_run", l_set_run},
                                       {"run", l_run},
                                       {"bind", l_bind},
                                       {"apply", l_apply},
                                       {"touch", l_touch},
                                       {"step", l_step},
                                       {"keep", l_keep},
                                       {"kept", l_kept},
                                       {"source", l_source},
                                       {"layer_weight", l_layer_weight},
                                       {"root_motion", l_root_motion},
                                       {"root_motions", l_root_motions},
                                       {"set_events", l_set_events},
                                       {"events", l_events},
                                       {"set_marker", l_set_marker},
                                       {"set_restore", l_set_restore},
                                       {"markers", l_markers},
                                       {"update", l_update},
                                       {NULL, NULL}};
    lcore_class(L, MDEF_MT, NULL, mdef_methods);
    lcore_class(L, SPACE_MT, NULL, space_methods);
    lcore_class(L, MACHINES_MT, NULL, methods);
    lua_pushcfunction(L, l_machine_def);
    lua_setfield(L, -2, "machine_def");
    lua_pushcfunction(L, l_blend_space);
    lua_setfield(L, -2, "blend_space");
    lua_pushcfunction(L, l_machines);
    lua_setfield(L, -2, "machines");
}
