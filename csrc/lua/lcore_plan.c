/* lcore_plan.c: layer stacks (limber.Stack, the blend stage with the layer
 * semantics of stack.h) and the frame plan (limber.Plan, plan.h): one call
 * per frame evaluates a crowd in cache-sized blocks over the worker pool. */
#include "lcore.h"

#include "../kernel/hierarchy.h"
#include "../kernel/plan.h"
#include "../kernel/threadpool.h"

#include <math.h>
#include <string.h>
#include <time.h>

#define STACK_MT "limber.Stack"
#define PLAN_MT "limber.Plan"
#define JS (LMB_TRS_FLOATS * LMB_LANES)

static const char *const mode_names[] = {"override", "additive", NULL};

/* Bump layout of one userdata block: each part 64-byte aligned. */
static size_t take(size_t *off, size_t bytes) {
    size_t at = lmb_align_up(*off, 64);
    *off = at + bytes;
    return at;
}

/* Raises the message on top of the stack: as "bad argument #arg (...)"
 * when arg > 0 (a setter's argument), else as it is (a field of a
 * constructor's description, already naming the function). */
static int raise_at(lua_State *L, int arg) {
    if (arg > 0) return luaL_argerror(L, arg, lua_tostring(L, -1));
    return lua_error(L);
}

/* Reads a mask (table or f32 Buffer of J numbers in [0, 1]) at `idx` into
 * out, raw. `what` names it in errors ("limber.plan: layers[2].mask", or
 * "mask" for the argument `arg` of a setter). */
static void read_mask(lua_State *L, int idx, uint32_t J, float *out, const char *what, int arg) {
    idx = lua_absindex(L, idx);
    lbuffer *b = (lbuffer *)luaL_testudata(L, idx, BUFFER_MT);
    int tab = !b && lua_type(L, idx) == LUA_TTABLE;
    if (!b && !tab) {
        lua_pushfstring(L, "%s must be a table or an f32 Buffer (got %s)", what,
                        luaL_typename(L, idx));
        raise_at(L, arg);
    }
    if (b && b->type != LBUF_F32) {
        lua_pushfstring(L, "%s Buffer must be f32", what);
        raise_at(L, arg);
    }
    size_t n = b ? b->count * b->width : (size_t)lua_rawlen(L, idx);
    if (n != J) {
        lua_pushfstring(L, "%s has %I weights, expected %I (one per joint)", what, (lua_Integer)n,
                        (lua_Integer)J);
        raise_at(L, arg);
    }
    if (b) {
        memcpy(out, b->data, (size_t)J * sizeof(float));
    } else {
        for (uint32_t j = 0; j < J; j++) {
            int t = lua_rawgeti(L, idx, (lua_Integer)j + 1);
            lua_Number v = lua_tonumber(L, -1);
            if (t != LUA_TNUMBER || !(v >= 0 && v <= 1)) {
                lua_pushfstring(L, "%s[%I] must be a number in [0, 1] (got %s)", what,
                                (lua_Integer)j + 1,
                                t == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1));
                raise_at(L, arg);
            }
            out[j] = (float)v;
            lua_pop(L, 1);
        }
    }
    for (uint32_t j = 0; j < J; j++)
        if (!(out[j] >= 0.0f && out[j] <= 1.0f)) {
            lua_pushfstring(L, "%s[%I] = %f is not in [0, 1]", what, (lua_Integer)j + 1,
                            (lua_Number)out[j]);
            raise_at(L, arg);
        }
}

/* Reads an additive reference at `idx` into out (J * LMB_TRS_FLOATS): a
 * Pose of skeleton `sk` (its instance 1) or { clip = Clip, time = t }
 * (sampled at t, looped). Errors as read_mask's. */
static void read_reference(lua_State *L, int idx, const lmb_skeleton *sk, float *out,
                           const char *what, int arg) {
    idx = lua_absindex(L, idx);
    lmb_pose *p = (lmb_pose *)luaL_testudata(L, idx, POSE_MT);
    if (p) {
        p = (lmb_pose *)lmb_align_ptr(p, 64);
        if (p->skel != sk) {
            lua_pushfstring(L, "%s is a Pose of another skeleton", what);
            raise_at(L, arg);
        }
        for (uint32_t j = 0; j < sk->joint_count; j++)
            lmb_pose_get_trs(p, 0, j, out + (size_t)j * LMB_TRS_FLOATS);
        return;
    }
    if (lua_type(L, idx) != LUA_TTABLE) {
        lua_pushfstring(L, "%s must be a limber.Pose or { clip = Clip, time = t } (got %s)", what,
                        luaL_typename(L, idx));
        raise_at(L, arg);
    }
    lcore_rawfield(L, idx, "clip");
    lmb_clip *c = (lmb_clip *)luaL_testudata(L, -1, CLIP_MT);
    if (!c) {
        lua_pushfstring(L, "%s.clip must be a limber.Clip (got %s)", what, luaL_typename(L, -1));
        raise_at(L, arg);
    }
    c = (lmb_clip *)lmb_align_ptr(c, 64);
    if (c->joint_span > sk->joint_count) {
        lua_pushfstring(L, "%s.clip animates joint %I but the skeleton has %I joints", what,
                        (lua_Integer)c->joint_span, (lua_Integer)sk->joint_count);
        raise_at(L, arg);
    }
    double t = 0.0;
    int tt = lcore_rawfield(L, idx, "time");
    if (tt != LUA_TNIL) {
        if (tt != LUA_TNUMBER || !isfinite(lua_tonumber(L, -1))) {
            lua_pushfstring(L, "%s.time must be a finite number", what);
            raise_at(L, arg);
        }
        t = (double)lua_tonumber(L, -1);
    }
    lua_pop(L, 2);
    lmb_clip_sample_pose(c, lmb_clip_time(c, t, 1), sk, out);
}

/* A layer argument: a 1-based index or the name of a layer; `names` is the
 * stack index of the object's name -> index table. Returns 0-based. */
static uint32_t check_layer(lua_State *L, int arg, int names, uint32_t count) {
    if (lua_type(L, arg) == LUA_TSTRING) {
        lua_pushvalue(L, arg);
        lua_rawget(L, names);
        lua_Integer k = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
        lua_pop(L, 1);
        if (k < 1)
            luaL_argerror(L, arg, lua_pushfstring(L, "no layer named '%s'", lua_tostring(L, arg)));
        return (uint32_t)(k - 1);
    }
    return lcore_check_index(L, arg, count, "layer");
}

/* A source weight: a float in [0, LMB_STACK_MAX_WEIGHT]. */
static float check_source_weight(lua_State *L, int arg) {
    float w = lcore_check_float(L, arg, "weight");
    if (!(w >= 0.0f && (double)w <= LMB_STACK_MAX_WEIGHT))
        luaL_argerror(L, arg,
                      lua_pushfstring(L, "weight %f out of range [0, %f]", (lua_Number)w,
                                      (lua_Number)LMB_STACK_MAX_WEIGHT));
    return w;
}

/* A layer weight: a float in [0, 1]. */
static float check_layer_weight(lua_State *L, int arg) {
    float w = lcore_check_float(L, arg, "weight");
    if (!(w >= 0.0f && w <= 1.0f))
        luaL_argerror(L, arg,
                      lua_pushfstring(L, "layer weight %f out of range [0, 1]", (lua_Number)w));
    return w;
}

/* Reads the common fields of layers[k] (table at `lt`): mode, mask,
 * reference, weight, name (into the names table at `names`). */
static void read_layer(lua_State *L, int lt, lua_Integer k, const lmb_skeleton *sk,
                       lmb_stack_layer *ly, float *mask, float *ref, float *weight, int names,
                       const char *fn) {
    char what[96];
    uint32_t J = sk->joint_count;
    ly->mode = LMB_LAYER_OVERRIDE;
    if (lcore_rawfield(L, lt, "mode") != LUA_TNIL) {
        const char *m = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        int found = -1;
        for (int q = 0; m && mode_names[q]; q++)
            if (strcmp(m, mode_names[q]) == 0) found = q;
        if (found < 0)
            luaL_error(L, "%s: layers[%I].mode must be \"override\" or \"additive\" (got %s)", fn,
                       k, m ? m : luaL_typename(L, -1));
        ly->mode = (uint32_t)found;
    }
    lua_pop(L, 1);
    snprintf(what, sizeof what, "%s: layers[%d].mask", fn, (int)k);
    ly->mask = NULL;
    if (lcore_rawfield(L, lt, "mask") != LUA_TNIL) {
        read_mask(L, -1, J, mask, what, 0);
        ly->mask = mask;
    }
    lua_pop(L, 1);
    snprintf(what, sizeof what, "%s: layers[%d].reference", fn, (int)k);
    ly->reference = NULL;
    if (lcore_rawfield(L, lt, "reference") != LUA_TNIL) {
        if (ly->mode != LMB_LAYER_ADDITIVE)
            luaL_error(L, "%s: layers[%I].reference is only for additive layers", fn, k);
        read_reference(L, -1, sk, ref, what, 0);
        ly->reference = ref;
    }
    lua_pop(L, 1);
    *weight = 1.0f;
    if (lcore_rawfield(L, lt, "weight") != LUA_TNIL) {
        lua_Number w = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : -1;
        if (!(w >= 0 && w <= 1))
            luaL_error(L, "%s: layers[%I].weight must be a number in [0, 1]", fn, k);
        *weight = (float)w;
    }
    lua_pop(L, 1);
    int nt = lcore_rawfield(L, lt, "name");
    if (nt == LUA_TSTRING) {
        lua_pushvalue(L, -1);
        if (lua_rawget(L, names) != LUA_TNIL)
            luaL_error(L, "%s: layers[%I].name '%s' is used twice", fn, k, lua_tostring(L, -2));
        lua_pop(L, 1);
        lua_pushinteger(L, k);
        lua_rawset(L, names);
    } else {
        if (nt != LUA_TNIL) luaL_error(L, "%s: layers[%I].name must be a string", fn, k);
        lua_pop(L, 1);
    }
}

/* ---- Stack ------------------------------------------------------------- */

typedef struct lstack {
    lmb_pose *out;
    uint32_t layer_count, source_count, lanes;
    lmb_stack_layer *layers;
    const lmb_pose **sources;
    float *src_w;   /* source_count * lanes */
    float *layer_w; /* layer_count * lanes */
    float *masks;   /* layer_count * J */
    float *refs;    /* layer_count * J * LMB_TRS_FLOATS */
    float *tmp;     /* one block */
} lstack;

static lstack *check_stack(lua_State *L, int arg) {
    return (lstack *)lmb_align_ptr(luaL_checkudata(L, arg, STACK_MT), 64);
}

/** core.stack(out, layers): the blend stage with layer-stack semantics
 * (stack.h). layers[k] = { mode = "override" | "additive", sources = { Pose,
 * ... } (out's skeleton and instance count), mask =, reference =, weight =,
 * name = }. Source 1 of each layer starts at weight 1, the others at 0. */
static int l_stack_new(lua_State *L) {
    const char *fn = "limber.stack";
    lmb_pose *out = lcore_check_pose(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    lua_Integer n = lcore_rawlen(L, 2);
    if (n < 1 || n > LMB_STACK_MAX_LAYERS)
        return luaL_argerror(
            L, 2,
            lua_pushfstring(L, "layer count %I out of range [1, %d]", n, LMB_STACK_MAX_LAYERS));
    /* One pass over the caller's tables, raw, into private copies: the layer
     * tables (3) and the anchors (4: out, then every source pose, checked).
     * Nothing is read from the caller's arrays again: a finalizer run by a
     * later allocation may change them. */
    lua_createtable(L, (int)n, 0);     /* 3 */
    lua_createtable(L, (int)n + 1, 1); /* 4 */
    lua_pushvalue(L, 1);
    lua_rawseti(L, 4, 1);
    uint32_t counts[LMB_STACK_MAX_LAYERS];
    lua_Integer S = 0;
    for (lua_Integer k = 1; k <= n; k++) {
        if (lua_rawgeti(L, 2, k) != LUA_TTABLE)
            return luaL_error(L, "%s: layers[%I] must be a table", fn, k);
        lua_pushvalue(L, -1);
        lua_rawseti(L, 3, k);
        if (lcore_rawfield(L, -1, "sources") != LUA_TTABLE)
            return luaL_error(L, "%s: layers[%I].sources must be an array of limber.Pose", fn, k);
        lua_Integer m = lcore_rawlen(L, -1);
        if (m < 1 || m > LMB_STACK_MAX_SOURCES)
            return luaL_error(L, "%s: layers[%I].sources: count %I out of range [1, %d]", fn, k, m,
                              LMB_STACK_MAX_SOURCES);
        for (lua_Integer q = 1; q <= m; q++) {
            lua_rawgeti(L, -1, q);
            lmb_pose *p = (lmb_pose *)luaL_testudata(L, -1, POSE_MT);
            if (!p)
                return luaL_error(L, "%s: layers[%I].sources[%I] must be a limber.Pose (got %s)",
                                  fn, k, q, luaL_typename(L, -1));
            p = (lmb_pose *)lmb_align_ptr(p, 64);
            if (p == out)
                return luaL_error(L, "%s: layers[%I].sources[%I] is the output pose", fn, k, q);
            if (p->skel != out->skel || p->instance_count != out->instance_count)
                return luaL_error(L,
                                  "%s: layers[%I].sources[%I] must have the output's skeleton "
                                  "and instance count",
                                  fn, k, q);
            lua_rawseti(L, 4, S + q + 1);
        }
        counts[k - 1] = (uint32_t)m;
        S += m;
        lua_pop(L, 2);
    }
    uint32_t J = out->joint_count, lanes = out->block_count * LMB_LANES;
    size_t off = lmb_align_up(sizeof(lstack), 64);
    size_t o_layers = take(&off, (size_t)n * sizeof(lmb_stack_layer));
    size_t o_src = take(&off, (size_t)S * sizeof(void *));
    size_t o_sw = take(&off, (size_t)S * lanes * 4);
    size_t o_lw = take(&off, (size_t)n * lanes * 4);
    size_t o_m = take(&off, (size_t)n * J * 4);
    size_t o_r = take(&off, (size_t)n * J * LMB_TRS_FLOATS * 4);
    size_t o_t = take(&off, (size_t)J * JS * 4);
    unsigned char *mem = (unsigned char *)lcore_newobject(L, off, 1, STACK_MT); /* 5 */
    lstack *st = (lstack *)(void *)mem;
    st->out = out;
    st->layer_count = (uint32_t)n;
    st->source_count = (uint32_t)S;
    st->lanes = lanes;
    st->layers = (lmb_stack_layer *)(void *)(mem + o_layers);
    st->sources = (const lmb_pose **)(void *)(mem + o_src);
    st->src_w = (float *)(void *)(mem + o_sw);
    st->layer_w = (float *)(void *)(mem + o_lw);
    st->masks = (float *)(void *)(mem + o_m);
    st->refs = (float *)(void *)(mem + o_r);
    st->tmp = (float *)(void *)(mem + o_t);
    lua_newtable(L); /* 6: names */
    uint32_t next = 0;
    for (lua_Integer k = 1; k <= n; k++) {
        lmb_stack_layer *ly = st->layers + (k - 1);
        lua_rawgeti(L, 3, k);
        int lt = lua_gettop(L);
        float w;
        read_layer(L, lt, k, out->skel, ly, st->masks + (size_t)(k - 1) * J,
                   st->refs + (size_t)(k - 1) * J * LMB_TRS_FLOATS, &w, 6, fn);
        for (uint32_t i = 0; i < lanes; i++)
            st->layer_w[(size_t)(k - 1) * lanes + i] = w;
        ly->first_source = next;
        ly->source_count = counts[k - 1];
        for (uint32_t q = 0; q < counts[k - 1]; q++, next++) {
            lua_rawgeti(L, 4, (lua_Integer)next + 2); /* checked above, anchored in 4 */
            st->sources[next] = (const lmb_pose *)lmb_align_ptr(lua_touserdata(L, -1), 64);
            lua_pop(L, 1);
            for (uint32_t i = 0; i < lanes; i++)
                st->src_w[(size_t)next * lanes + i] = q == 0;
        }
        lua_settop(L, 6);
    }
    lmb_error err;
    if (lmb_stack_validate(st->layers, st->layer_count, J, st->source_count, &err) != LMB_OK)
        return lcore_raise(L, &err, fn);
    lua_setfield(L, 4, "names");
    lua_pushvalue(L, 4);
    lua_setiuservalue(L, 5, 1);
    lua_pushvalue(L, 5);
    return 1;
}

/* Pushes the object's names table (user value 1's "names"); returns its index. */
static int push_names(lua_State *L, int obj) {
    lua_getiuservalue(L, obj, 1);
    lua_getfield(L, -1, "names");
    lua_replace(L, -2);
    return lua_gettop(L);
}

static uint32_t stack_source(lua_State *L, lstack *st, int larg, int sarg) {
    int names = push_names(L, 1);
    uint32_t n = check_layer(L, larg, names, st->layer_count);
    lua_pop(L, 1);
    const lmb_stack_layer *ly = st->layers + n;
    return ly->first_source + lcore_check_index(L, sarg, ly->source_count, "source");
}

/** stack:set_weight(i, layer, source, w): a source's weight for instance i
 * (w in [0, 1e6]; weights inside a layer are normalised). */
static int l_stack_set_weight(lua_State *L) {
    lstack *st = check_stack(L, 1);
    uint32_t i = lcore_check_index(L, 2, st->out->instance_count, "instance");
    uint32_t k = stack_source(L, st, 3, 4);
    st->src_w[(size_t)k * st->lanes + i] = check_source_weight(L, 5);
    return 0;
}

/** stack:weight(i, layer, source): the source's weight for instance i. */
static int l_stack_weight(lua_State *L) {
    lstack *st = check_stack(L, 1);
    uint32_t i = lcore_check_index(L, 2, st->out->instance_count, "instance");
    uint32_t k = stack_source(L, st, 3, 4);
    lua_pushnumber(L, (lua_Number)st->src_w[(size_t)k * st->lanes + i]);
    return 1;
}

/** stack:set_layer_weight(i, layer, w): the layer's weight for instance i, in [0, 1]. */
static int l_stack_set_layer_weight(lua_State *L) {
    lstack *st = check_stack(L, 1);
    uint32_t i = lcore_check_index(L, 2, st->out->instance_count, "instance");
    int names = push_names(L, 1);
    uint32_t n = check_layer(L, 3, names, st->layer_count);
    lua_pop(L, 1);
    st->layer_w[(size_t)n * st->lanes + i] = check_layer_weight(L, 4);
    return 0;
}

/** stack:layer_weight(i, layer): the layer's weight for instance i. */
static int l_stack_layer_weight(lua_State *L) {
    lstack *st = check_stack(L, 1);
    uint32_t i = lcore_check_index(L, 2, st->out->instance_count, "instance");
    int names = push_names(L, 1);
    uint32_t n = check_layer(L, 3, names, st->layer_count);
    lua_pop(L, 1);
    lua_pushnumber(L, (lua_Number)st->layer_w[(size_t)n * st->lanes + i]);
    return 1;
}

/* Shared by Stack and Plan: set_mask(layer, mask | nil) and
 * set_reference(layer, reference | nil) on a layer array. The new value is
 * read into a temporary block first, so an error changes nothing. */
static void set_mask(lua_State *L, lmb_stack_layer *ly, float *mask, uint32_t J, const char *fn) {
    if (lua_isnoneornil(L, 3)) {
        ly->mask = NULL;
        return;
    }
    float *tmp = (float *)lua_newuserdatauv(L, (size_t)J * sizeof(float), 0);
    read_mask(L, 3, J, tmp, fn, 3);
    memcpy(mask, tmp, (size_t)J * sizeof(float));
    ly->mask = mask;
}

static void set_reference(lua_State *L, lmb_stack_layer *ly, float *ref, const lmb_skeleton *sk,
                          const char *fn) {
    if (ly->mode != LMB_LAYER_ADDITIVE)
        luaL_argerror(L, 2, "the layer is not additive (only additive layers have a reference)");
    if (lua_isnoneornil(L, 3)) {
        ly->reference = NULL;
        return;
    }
    size_t n = (size_t)sk->joint_count * LMB_TRS_FLOATS;
    float *tmp = (float *)lua_newuserdatauv(L, n * sizeof(float), 0);
    read_reference(L, 3, sk, tmp, fn, 3);
    memcpy(ref, tmp, n * sizeof(float));
    ly->reference = ref;
}

/** stack:set_mask(layer, mask): per-joint weights in [0, 1] (table or f32
 * Buffer), nil for none. */
static int l_stack_set_mask(lua_State *L) {
    lstack *st = check_stack(L, 1);
    int names = push_names(L, 1);
    uint32_t n = check_layer(L, 2, names, st->layer_count);
    lua_pop(L, 1);
    uint32_t J = st->out->joint_count;
    set_mask(L, st->layers + n, st->masks + (size_t)n * J, J, "mask");
    return 0;
}

/** stack:set_reference(layer, reference): an additive layer's reference
 * (a Pose, its instance 1, or { clip =, time = }), nil for the rest pose. */
static int l_stack_set_reference(lua_State *L) {
    lstack *st = check_stack(L, 1);
    int names = push_names(L, 1);
    uint32_t n = check_layer(L, 2, names, st->layer_count);
    lua_pop(L, 1);
    uint32_t J = st->out->joint_count;
    set_reference(L, st->layers + n, st->refs + (size_t)n * J * LMB_TRS_FLOATS, st->out->skel,
                  "reference");
    return 0;
}

/** stack:run([first [, count]]): folds the layers of instances first ..
 * first + count - 1 (default every instance) into the output pose. */
static int l_stack_run(lua_State *L) {
    lstack *st = check_stack(L, 1);
    lmb_pose *out = st->out;
    uint32_t N = out->instance_count, J = out->joint_count;
    uint32_t first = lua_isnoneornil(L, 2) ? 0 : lcore_check_index(L, 2, N, "instance");
    lua_Integer count = lua_isnoneornil(L, 3) ? (lua_Integer)(N - first) : luaL_checkinteger(L, 3);
    if (count < 0 || (lua_Integer)first + count > (lua_Integer)N)
        return luaL_argerror(
            L, 3,
            lua_pushfstring(L, "count %I out of range [0, %I]", count, (lua_Integer)(N - first)));
    uint32_t end = first + (uint32_t)count;
    const float *src[LMB_STACK_MAX_LAYERS * LMB_STACK_MAX_SOURCES];
    float sw[LMB_STACK_MAX_LAYERS * LMB_STACK_MAX_SOURCES * LMB_LANES];
    float lw[LMB_STACK_MAX_LAYERS * LMB_LANES];
    for (uint32_t b = first / LMB_LANES; b * LMB_LANES < end; b++) {
        uint32_t base = b * LMB_LANES;
        for (uint32_t k = 0; k < st->source_count; k++) {
            src[k] = st->sources[k]->local + (size_t)b * J * JS;
            for (uint32_t l = 0; l < LMB_LANES; l++)
                sw[k * LMB_LANES + l] = st->src_w[(size_t)k * st->lanes + base + l];
        }
        for (uint32_t n = 0; n < st->layer_count; n++)
            for (uint32_t l = 0; l < LMB_LANES; l++)
                lw[n * LMB_LANES + l] = st->layer_w[(size_t)n * st->lanes + base + l];
        float *blk = out->local + (size_t)b * J * JS;
        int whole = base >= first && base + LMB_LANES <= end;
        lmb_stack_block(out->skel, st->layers, st->layer_count, src, sw, lw, NULL, 0,
                        whole ? blk : st->tmp);
        for (uint32_t l = 0; l < LMB_LANES; l++) {
            uint32_t i = base + l;
            if (i < first || i >= end) continue;
            if (!whole)
                for (size_t q = 0; q < (size_t)J * LMB_TRS_FLOATS; q++)
                    blk[q * LMB_LANES + l] = st->tmp[q * LMB_LANES + l];
            lmb_pose_touch(out, i, 0);
        }
    }
    return 0;
}

static int l_stack_output(lua_State *L) {
    check_stack(L, 1);
    lua_getiuservalue(L, 1, 1);
    lua_rawgeti(L, -1, 1);
    return 1;
}

static int l_stack_instances(lua_State *L) {
    lua_pushinteger(L, check_stack(L, 1)->out->instance_count);
    return 1;
}

static int l_stack_layer_count(lua_State *L) {
    lua_pushinteger(L, check_stack(L, 1)->layer_count);
    return 1;
}

static int l_stack_tostring(lua_State *L) {
    lstack *st = check_stack(L, 1);
    lua_pushfstring(L, "limber.Stack(%d instances, %d layers, %d sources)",
                    (int)st->out->instance_count, (int)st->layer_count, (int)st->source_count);
    return 1;
}

/* ---- Plan -------------------------------------------------------------- */

/* IK constraints of one plan, at most. */
#define PLAN_MAX_IK 32

/* A target that follows scene nodes: the target, pole and frame node ids
 * (0: none) with the epochs they had (an id reused by a new node is not
 * the node followed), and the weight to apply while they can be read. */
struct follow {
    uint32_t node[3], epoch[3];
    float weight;
};

typedef struct lplan {
    lmb_plan plan;
    uint32_t clip_count;
    float *masks, *refs;
    double total; /* seconds of the last run */
    /* targets that follow scene nodes: per constraint c and instance i,
     * follow[c * N + i] */
    struct follow *follow;
    uint32_t follow_count; /* (constraint, instance) pairs with a target node */
    lmb_hier **scene;      /* the Scene the nodes belong to (anchored as "scene") */
} lplan;

static lplan *check_plan(lua_State *L, int arg) {
    return (lplan *)lmb_align_ptr(luaL_checkudata(L, arg, PLAN_MT), 64);
}

struct lmb_plan *lcore_check_plan(lua_State *L, int arg) {
    return &check_plan(L, arg)->plan;
}

/* Allocates worker scratch for `count` workers as user value 2 of the plan
 * at `obj` (raises on failure, before anything changed). */
static void plan_workers(lua_State *L, int obj, lplan *lp, uint32_t count, const char *fn) {
    lmb_plan *p = &lp->plan;
    size_t per = lmb_plan_worker_bytes(p->pose->joint_count, p->source_count, p->layer_count);
    size_t head = lmb_align_up((size_t)count * sizeof(lmb_plan_worker), 64);
    if (per == 0 || per > ((size_t)1 << 36)) luaL_error(L, "%s: worker scratch too large", fn);
    unsigned char *mem = (unsigned char *)lua_newuserdatauv(L, head + (size_t)count * per + 64, 0);
    mem = (unsigned char *)lmb_align_ptr(mem, 64);
    lmb_plan_worker *w = (lmb_plan_worker *)(void *)mem;
    for (uint32_t k = 0; k < count; k++)
        lmb_plan_worker_place(w + k, mem + head + (size_t)k * per, p->pose->skel, p->source_count);
    lua_setiuservalue(L, obj, 2);
    p->workers = w;
    p->worker_count = count;
}

/* Reads a joint field (1-based integer in [1, J]) of the ik entry at idx. */
static uint32_t ik_joint(lua_State *L, int idx, const char *key, lua_Integer k, uint32_t J,
                         const char *fn) {
    lcore_rawfield(L, idx, key);
    lua_Integer j = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
    if (j < 1 || j > (lua_Integer)J)
        luaL_error(L, "%s: desc.ik[%I].%s must be a joint index in [1, %I]", fn, k, key,
                   (lua_Integer)J);
    lua_pop(L, 1);
    return (uint32_t)(j - 1);
}

/* A number field of the ik entry at idx (nil: def). */
static float ik_number(lua_State *L, int idx, const char *key, lua_Integer k, float def,
                       const char *fn) {
    int t = lcore_rawfield(L, idx, key);
    float v = def;
    if (t != LUA_TNIL) {
        if (t != LUA_TNUMBER || !lcore_float_ok(lua_tonumber(L, -1)))
            luaL_error(L, "%s: desc.ik[%I].%s must be a finite number", fn, k, key);
        v = (float)lua_tonumber(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

/* A { x, y, z } field of the ik entry at idx into out; 0 when nil. */
static int ik_vec(lua_State *L, int idx, const char *key, lua_Integer k, float out[3],
                  const char *fn) {
    int t = lcore_rawfield(L, idx, key);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return 0;
    }
    if (t != LUA_TTABLE || lcore_rawlen(L, -1) != 3)
        luaL_error(L, "%s: desc.ik[%I].%s must be { x, y, z }", fn, k, key);
    char what[64];
    snprintf(what, sizeof what, "%s: desc.ik[%d].%s", fn, (int)k, key);
    lcore_read_floats(L, -1, what, 1, out, 3);
    lua_pop(L, 1);
    return 1;
}

/* Reads desc.ik (raw, once) into ik[] (joints, settings; no per-instance
 * data yet); returns the count. */
static uint32_t read_ik(lua_State *L, uint32_t J, lmb_plan_ik ik[PLAN_MAX_IK], const char *fn) {
    int t = lcore_rawfield(L, 1, "ik");
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return 0;
    }
    if (t != LUA_TTABLE) luaL_error(L, "%s: desc.ik must be an array of IK constraints", fn);
    int list = lua_gettop(L);
    lua_Integer K = lcore_rawlen(L, list);
    if (K > PLAN_MAX_IK)
        luaL_error(L, "%s: desc.ik: %I constraints, at most %d", fn, K, PLAN_MAX_IK);
    for (lua_Integer k = 1; k <= K; k++) {
        lmb_plan_ik *c = ik + (k - 1);
        memset(c, 0, sizeof *c);
        if (lua_rawgeti(L, list, k) != LUA_TTABLE)
            luaL_error(L, "%s: desc.ik[%I] must be a table", fn, k);
        int e = lua_gettop(L);
        lcore_rawfield(L, e, "kind");
        const char *kind = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
        if (strcmp(kind, "two_bone") == 0) {
            c->kind = LMB_PLAN_IK_TWO_BONE;
            c->two_bone.root = ik_joint(L, e, "root", k, J, fn);
            c->two_bone.mid = ik_joint(L, e, "mid", k, J, fn);
            c->two_bone.tip = ik_joint(L, e, "tip", k, J, fn);
            c->two_bone.soften = ik_number(L, e, "soften", k, 1.0f, fn);
            lcore_rawfield(L, e, "keep_tip");
            c->two_bone.keep_tip = lua_toboolean(L, -1);
            lua_pop(L, 1);
        } else if (strcmp(kind, "aim") == 0) {
            c->kind = LMB_PLAN_IK_AIM;
            c->aim.joint = ik_joint(L, e, "joint", k, J, fn);
            c->aim.effector = c->aim.joint;
            if (lcore_rawfield(L, e, "effector") != LUA_TNIL)
                c->aim.effector = ik_joint(L, e, "effector", k, J, fn);
            lua_pop(L, 1);
            if (!ik_vec(L, e, "forward", k, c->aim.forward, fn))
                luaL_error(L, "%s: desc.ik[%I].forward is required", fn, k);
            ik_vec(L, e, "up", k, c->aim.up, fn);
            c->aim.limit = ik_number(L, e, "limit", k, 0.0f, fn);
        } else {
            luaL_error(L, "%s: desc.ik[%I].kind must be \"two_bone\" or \"aim\"", fn, k);
        }
        lua_settop(L, list);
    }
    lua_pop(L, 1);
    return (uint32_t)K;
}

/** core.plan(desc): the frame plan (see the module docs: pose, clips,
 * layers, palettes, slots, models, root_motion). */
static int l_plan_new(lua_State *L) {
    const char *fn = "limber.plan";
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lcore_rawfield(L, 1, "pose"); /* 2 */
    lmb_pose *pose = (lmb_pose *)luaL_testudata(L, 2, POSE_MT);
    if (!pose) return luaL_error(L, "%s: desc.pose must be a limber.Pose", fn);
    pose = (lmb_pose *)lmb_align_ptr(pose, 64);
    const lmb_skeleton *sk = pose->skel;
    uint32_t J = pose->joint_count, N = pose->instance_count;
    if (lcore_rawfield(L, 1, "clips") != LUA_TTABLE) /* 3 */
        return luaL_error(L, "%s: desc.clips must be an array of limber.Clip", fn);
    lua_Integer C = lcore_rawlen(L, 3);
    if (C < 1 || C > 65535)
        return luaL_error(L, "%s: desc.clips: clip count %I out of range [1, 65535]", fn, C);
    int lt = lcore_rawfield(L, 1, "layers"); /* 4 */
    if (lt != LUA_TNIL && lt != LUA_TTABLE)
        return luaL_error(L, "%s: desc.layers must be an array of layer tables", fn);
    lua_Integer n = lt == LUA_TNIL ? 1 : lcore_rawlen(L, 4);
    if (n < 1 || n > LMB_STACK_MAX_LAYERS)
        return luaL_error(L, "%s: desc.layers: layer count %I out of range [1, %d]", fn, n,
                          LMB_STACK_MAX_LAYERS);
    /* Every caller's table is read once, raw, into private copies (the
     * layer tables here, the clips below) with the counts in C: a finalizer
     * run by a later allocation may change the caller's tables. */
    lua_Integer S = 0;
    uint32_t counts[LMB_STACK_MAX_LAYERS];
    if (lt != LUA_TNIL) lua_createtable(L, (int)n, 0); /* 5, then 4 */
    for (lua_Integer k = 1; k <= n && lt != LUA_TNIL; k++) {
        if (lua_rawgeti(L, 4, k) != LUA_TTABLE)
            return luaL_error(L, "%s: layers[%I] must be a table", fn, k);
        lua_pushvalue(L, -1);
        lua_rawseti(L, 5, k);
        lua_Integer m = 1;
        if (lcore_rawfield(L, -1, "sources") != LUA_TNIL) {
            if (!lua_isinteger(L, -1))
                return luaL_error(L, "%s: layers[%I].sources must be an integer (a count)", fn, k);
            m = lua_tointeger(L, -1);
        }
        if (m < 1 || m > LMB_STACK_MAX_SOURCES)
            return luaL_error(L, "%s: layers[%I].sources: count %I out of range [1, %d]", fn, k, m,
                              LMB_STACK_MAX_SOURCES);
        counts[k - 1] = (uint32_t)m;
        S += m;
        lua_pop(L, 2);
    }
    if (lt != LUA_TNIL) lua_replace(L, 4);
    if (lt == LUA_TNIL) S = 1, counts[0] = 1;
    int pt = lcore_rawfield(L, 1, "palettes"); /* 5 */
    if (pt != LUA_TNIL && pt != LUA_TTABLE)
        return luaL_error(L, "%s: desc.palettes must be an array of limber.Palette", fn);
    lua_Integer P = pt == LUA_TNIL ? 0 : lcore_rawlen(L, 5);
    if (P > 1024) return luaL_error(L, "%s: desc.palettes: more than 1024 palettes", fn);
    int st = lcore_rawfield(L, 1, "slots"); /* 6 */
    if (st != LUA_TNIL && st != LUA_TTABLE)
        return luaL_error(L, "%s: desc.slots must be an array of joint indices", fn);
    lua_Integer SL = st == LUA_TNIL ? 0 : lcore_rawlen(L, 6);
    if (SL > (lua_Integer)J)
        return luaL_error(L, "%s: desc.slots has %I joints, more than the skeleton's %I", fn, SL,
                          (lua_Integer)J);
    lmb_plan_ik iks[PLAN_MAX_IK];
    uint32_t K = read_ik(L, J, iks, fn);
    /* the clips, their cursor stride and untracked lists */
    uint32_t stride = 0;
    size_t untracked = 0;
    lua_createtable(L, (int)C, 0); /* 7, then 3: the private copy of the clips */
    for (lua_Integer k = 1; k <= C; k++) {
        lua_rawgeti(L, 3, k);
        lmb_clip *c = (lmb_clip *)luaL_testudata(L, -1, CLIP_MT);
        if (!c)
            return luaL_error(L, "%s: desc.clips[%I] is not a limber.Clip (got %s)", fn, k,
                              luaL_typename(L, -1));
        lua_pushvalue(L, -1);
        lua_rawseti(L, 7, k);
        c = (lmb_clip *)lmb_align_ptr(c, 64);
        if (c->joint_span > J)
            return luaL_error(L,
                              "%s: desc.clips[%I] animates joint %I but the skeleton has %I joints",
                              fn, k, (lua_Integer)c->joint_span, (lua_Integer)J);
        if (lmb_clip_cursor_count(c) > stride) stride = lmb_clip_cursor_count(c);
        untracked += lmb_clip_untracked(c, J, NULL);
        lua_pop(L, 1);
    }
    lua_replace(L, 3);
    size_t off = lmb_align_up(sizeof(lplan), 64);
    size_t o_layers = take(&off, (size_t)n * sizeof(lmb_stack_layer));
    size_t o_lof = take(&off, (size_t)S * 4);
    size_t o_smp = take(&off, (size_t)S * sizeof(lmb_sampler));
    size_t o_clips = take(&off, (size_t)C * sizeof(void *));
    size_t o_uf = take(&off, ((size_t)C + 1) * 4);
    size_t o_u = take(&off, untracked * 4 + 4);
    size_t o_cur = take(&off, (size_t)S * N * stride * sizeof(lmb_cursor) + 4);
    size_t o_clip = take(&off, (size_t)S * N * 4);
    size_t o_time = take(&off, (size_t)S * N * 8);
    size_t o_prev = take(&off, (size_t)S * N * 8);
    size_t o_rate = take(&off, (size_t)S * N * 4);
    size_t o_loop = take(&off, (size_t)S * N);
    size_t o_w = take(&off, (size_t)S * N * 4 * 3);
    size_t o_lw = take(&off, (size_t)n * N * 4 * 3);
    size_t o_lod = take(&off, (size_t)N * 3);
    size_t o_act = take(&off, (size_t)N * 4 + 4);
    size_t o_pal = take(&off, (size_t)P * sizeof(lmb_plan_palette));
    size_t o_slot = take(&off, (size_t)SL * 2 + 2);
    size_t o_m = take(&off, (size_t)n * J * 4);
    size_t o_r = take(&off, (size_t)n * J * LMB_TRS_FLOATS * 4);
    size_t o_ik = take(&off, (size_t)K * sizeof(lmb_plan_ik));
    size_t o_ikf = take(&off, (size_t)K * N * 7 * 4);
    size_t o_ikb = take(&off, (size_t)K * N + 4);
    size_t o_fol = take(&off, (size_t)K * N * sizeof(struct follow) + 4);
    unsigned char *mem = (unsigned char *)lcore_newobject(L, off, 2, PLAN_MT); /* 7 */
    lplan *lp = (lplan *)(void *)mem;
    lmb_plan *p = &lp->plan;
    p->pose = pose;
    p->layer_count = (uint32_t)n;
    p->source_count = (uint32_t)S;
    p->layers = (lmb_stack_layer *)(void *)(mem + o_layers);
    p->layer_of = (uint32_t *)(void *)(mem + o_lof);
    p->src = (lmb_sampler *)(void *)(mem + o_smp);
    p->prev_time = (double *)(void *)(mem + o_prev);
    float *wts = (float *)(void *)(mem + o_w);
    p->weight = wts, p->weight_to = wts + (size_t)S * N;
    p->weight_speed = wts + 2 * (size_t)S * N;
    float *lws = (float *)(void *)(mem + o_lw);
    p->layer_weight = lws, p->layer_to = lws + (size_t)n * N;
    p->layer_speed = lws + 2 * (size_t)n * N;
    p->every = mem + o_lod, p->phase = mem + o_lod + N, p->dirty = mem + o_lod + 2 * (size_t)N;
    p->active = (uint32_t *)(void *)(mem + o_act);
    p->palette_count = (uint32_t)P;
    lmb_plan_palette *pals = (lmb_plan_palette *)(void *)(mem + o_pal);
    p->palettes = pals;
    p->slot_count = (uint32_t)SL;
    uint16_t *slots = (uint16_t *)(void *)(mem + o_slot);
    p->slots = slots;
    lp->clip_count = (uint32_t)C;
    lp->masks = (float *)(void *)(mem + o_m);
    lp->refs = (float *)(void *)(mem + o_r);
    p->ik_count = K;
    p->ik = (lmb_plan_ik *)(void *)(mem + o_ik);
    for (uint32_t c = 0; c < K; c++) {
        lmb_plan_ik *ik = p->ik + c;
        *ik = iks[c];
        float *f = (float *)(void *)(mem + o_ikf) + (size_t)c * N * 7;
        ik->target = f, ik->pole = f + (size_t)N * 3, ik->weight = f + (size_t)N * 6;
        ik->has_pole = mem + o_ikb + (size_t)c * N;
        memset(f, 0, (size_t)N * 7 * sizeof(float)); /* off: weight 0 */
        memset(ik->has_pole, 0, N);
    }
    lp->follow = (struct follow *)(void *)(mem + o_fol);
    memset(lp->follow, 0, (size_t)K * N * sizeof(struct follow));
    lp->follow_count = 0;
    lp->scene = NULL;
    /* anchors (user value 1): pose, clips, palettes; clip -> index; names */
    lua_createtable(L, 0, 4); /* 8 */
    lua_pushvalue(L, 2);
    lua_setfield(L, 8, "pose");
    lua_newtable(L); /* 9: clip -> index (1-based) */
    const lmb_clip **clips = (const lmb_clip **)(void *)(mem + o_clips);
    uint32_t *uf = (uint32_t *)(void *)(mem + o_uf), *u = (uint32_t *)(void *)(mem + o_u);
    uint32_t pos = 0;
    for (lua_Integer k = 1; k <= C; k++) {
        lua_rawgeti(L, 3, k);
        const lmb_clip *c = (const lmb_clip *)lmb_align_ptr(lua_touserdata(L, -1), 64);
        clips[k - 1] = c;
        lua_pushinteger(L, k);
        lua_rawset(L, 9);
        uf[k - 1] = pos;
        pos += lmb_clip_untracked(c, J, u + pos);
    }
    uf[C] = pos;
    lua_setfield(L, 8, "clip_index");
    lua_newtable(L); /* 9: names */
    /* layers */
    uint32_t next = 0;
    for (lua_Integer k = 1; k <= n; k++) {
        lmb_stack_layer *ly = p->layers + (k - 1);
        float w = 1.0f;
        lua_Integer m = 1;
        if (lt != LUA_TNIL) {
            lua_rawgeti(L, 4, k);
            int lidx = lua_gettop(L);
            read_layer(L, lidx, k, sk, ly, lp->masks + (size_t)(k - 1) * J,
                       lp->refs + (size_t)(k - 1) * J * LMB_TRS_FLOATS, &w, 9, fn);
            m = counts[k - 1];
            lua_settop(L, 9);
        } else {
            memset(ly, 0, sizeof *ly);
        }
        ly->first_source = next;
        ly->source_count = (uint32_t)m;
        for (uint32_t i = 0; i < N; i++) {
            p->layer_weight[(size_t)(k - 1) * N + i] = w;
            p->layer_to[(size_t)(k - 1) * N + i] = w;
        }
        for (lua_Integer q = 0; q < m; q++, next++) {
            p->layer_of[next] = (uint32_t)(k - 1);
            for (uint32_t i = 0; i < N; i++)
                p->weight[(size_t)next * N + i] = p->weight_to[(size_t)next * N + i] = q == 0;
        }
    }
    lua_setfield(L, 8, "names");
    /* one sampler per source, sharing the clips */
    for (uint32_t k = 0; k < (uint32_t)S; k++) {
        lmb_sampler *s = p->src + k;
        s->pose = pose;
        s->clip_count = (uint32_t)C;
        s->cursor_stride = stride;
        s->clips = clips;
        s->untracked_first = uf;
        s->untracked = u;
        s->cursors = (lmb_cursor *)(void *)(mem + o_cur) + (size_t)k * N * stride;
        s->clip = (int32_t *)(void *)(mem + o_clip) + (size_t)k * N;
        s->time = (double *)(void *)(mem + o_time) + (size_t)k * N;
        s->rate = (float *)(void *)(mem + o_rate) + (size_t)k * N;
        s->loop = mem + o_loop + (size_t)k * N;
        s->root_joint = -1;
        for (uint32_t i = 0; i < N; i++)
            s->clip[i] = -1, s->rate[i] = 1.0f, s->loop[i] = 1;
    }
    for (uint32_t i = 0; i < N; i++)
        p->every[i] = 1, p->phase[i] = 0, p->dirty[i] = 2;
    /* palettes */
    lua_createtable(L, (int)P, 0); /* 9 */
    for (lua_Integer k = 1; k <= P; k++) {
        lua_rawgeti(L, 5, k);
        lpalette *pal = (lpalette *)luaL_testudata(L, -1, PALETTE_MT);
        if (!pal)
            return luaL_error(L, "%s: desc.palettes[%I] is not a limber.Palette (got %s)", fn, k,
                              luaL_typename(L, -1));
        if (pal->pose != pose)
            return luaL_error(L, "%s: desc.palettes[%I] is a palette of another pose", fn, k);
        pals[k - 1].skin = pal->skin;
        pals[k - 1].layout = pal->layout;
        pals[k - 1].out = pal->data;
        lua_rawseti(L, 9, k);
    }
    lua_setfield(L, 8, "palettes");
    /* slots and models */
    for (lua_Integer k = 1; k <= SL; k++) {
        lua_rawgeti(L, 6, k);
        if (!lua_isinteger(L, -1))
            return luaL_error(L, "%s: desc.slots[%I] must be a joint index (got %s)", fn, k,
                              luaL_typename(L, -1));
        lua_Integer j = lua_tointeger(L, -1);
        if (j < 1 || j > (lua_Integer)J)
            return luaL_error(L, "%s: desc.slots[%I] = %I out of range [1, %I]", fn, k, j,
                              (lua_Integer)J);
        slots[k - 1] = (uint16_t)(j - 1);
        lua_pop(L, 1);
    }
    int mt = lcore_rawfield(L, 1, "models");
    if (mt != LUA_TNIL) {
        const char *m = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
        if (strcmp(m, "all") == 0)
            p->all_models = 1;
        else if (strcmp(m, "slots") != 0)
            return luaL_error(L, "%s: desc.models must be \"slots\" or \"all\"", fn);
    }
    lua_pop(L, 1);
    int loc = lcore_rawfield(L, 1, "locals");
    if (loc != LUA_TNIL) {
        if (loc != LUA_TBOOLEAN) return luaL_error(L, "%s: desc.locals must be a boolean", fn);
        p->write_locals = (uint32_t)lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
    if (lcore_rawfield(L, 1, "root_motion") != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TTABLE)
            return luaL_error(L, "%s: desc.root_motion must be a table", fn);
        int rt = lua_gettop(L);
        lcore_rawfield(L, rt, "joint");
        lua_Integer j = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
        if (j < 1 || j > (lua_Integer)J)
            return luaL_error(L, "%s: desc.root_motion.joint must be a joint index in [1, %I]", fn,
                              (lua_Integer)J);
        uint32_t flags = 0;
        lcore_rawfield(L, rt, "xz");
        if (lua_isnil(L, -1) || lua_toboolean(L, -1)) flags |= LMB_ROOT_XZ;
        lcore_rawfield(L, rt, "yaw");
        if (lua_toboolean(L, -1)) flags |= LMB_ROOT_YAW;
        for (uint32_t k = 0; k < (uint32_t)S; k++)
            p->src[k].root_joint = (int32_t)(j - 1), p->src[k].root_flags = flags;
    }
    lua_settop(L, 8);
    lua_setiuservalue(L, 7, 1);
    plan_workers(L, 7, lp, lmb_pool_threads(lcore_pool(L)), fn);
    lmb_error err;
    if (lmb_plan_validate(p, &err) != LMB_OK) return lcore_raise(L, &err, fn);
    return 1;
}

/* The anchors table field `key` of the plan at index 1, pushed. */
static int push_anchor(lua_State *L, const char *key) {
    lua_getiuservalue(L, 1, 1);
    lua_getfield(L, -1, key);
    lua_replace(L, -2);
    return lua_gettop(L);
}

/* (i, layer, source) arguments from `arg`: the instance and source (0-based). */
static uint32_t plan_source(lua_State *L, lplan *lp, int arg, uint32_t *inst) {
    lmb_plan *p = &lp->plan;
    *inst = lcore_check_index(L, arg, p->pose->instance_count, "instance");
    int names = push_anchor(L, "names");
    uint32_t n = check_layer(L, arg + 1, names, p->layer_count);
    lua_pop(L, 1);
    const lmb_stack_layer *ly = p->layers + n;
    return ly->first_source + lcore_check_index(L, arg + 2, ly->source_count, "source");
}

/** plan:play(i, layer, source, clip [, time [, rate [, loop]]]): the source
 * plays `clip` (an index into desc.clips, one of those Clips, or nil for
 * nothing) from `time` (default 0) at `rate` (default 1), looping unless
 * loop is false. The weight is unchanged. */
static int l_plan_play(lua_State *L) {
    lplan *lp = check_plan(L, 1);
    uint32_t i, k = plan_source(L, lp, 2, &i);
    int32_t c = -1;
    if (lua_type(L, 5) == LUA_TUSERDATA) {
        int idx = push_anchor(L, "clip_index");
        lua_pushvalue(L, 5);
        lua_rawget(L, idx);
        if (!lua_isinteger(L, -1))
            return luaL_argerror(L, 5, "the clip is not one of the plan's clips (desc.clips)");
        c = (int32_t)lua_tointeger(L, -1) - 1;
        lua_pop(L, 2);
    } else if (!lua_isnoneornil(L, 5)) {
        c = (int32_t)lcore_check_index(L, 5, lp->clip_count, "clip");
    }
    double t = lua_isnoneornil(L, 6) ? 0.0 : lcore_check_time(L, 6);
    float rate = lua_isnoneornil(L, 7) ? 1.0f : lcore_check_float(L, 7, "rate");
    int loop = lua_isnoneornil(L, 8) ? 1 : lua_toboolean(L, 8);
    lmb_sampler *s = lp->plan.src + k;
    if (c != s->clip[i]) /* cursors belong to the clip they were used with */
        memset(s->cursors + (size_t)i * s->cursor_stride, 0, s->cursor_stride * sizeof(lmb_cursor));
    s->clip[i] = c;
    s->time[i] = c >= 0 ? lmb_clip_time_d(s->clips[c], t, loop) : t;
    lp->plan.prev_time[(size_t)k * lp->plan.pose->instance_count + i] = s->time[i];
    s->rate[i] = rate;
    s->loop[i] = (uint8_t)loop;
    lmb_plan_touch(&lp->plan, i);
    return 0;
}

/** plan:set_time(i, layer, source, t): the source's time (seconds). */
static int l_plan_set_time(lua_State *L) {
    lplan *lp = check_plan(L, 1);
    uint32_t i, k = plan_source(L, lp, 2, &i);
    double v = lcore_check_time(L, 5);
    lmb_sampler *s = lp->plan.src + k;
    s->time[i] = s->clip[i] >= 0 ? lmb_clip_time_d(s->clips[s->clip[i]], v, s->loop[i]) : v;
    lp->plan.prev_time[(size_t)k * lp->plan.pose->instance_count + i] = s->time[i];
    lmb_plan_touch(&lp->plan, i);
    return 0;
}

/** plan:set_rate(i, layer, source, r): the source's playback rate. */
static int l_plan_set_rate(lua_State *L) {
    lplan *lp = check_plan(L, 1);
    uint32_t i, k = plan_source(L, lp, 2, &i);
    lp->plan.src[k].rate[i] = lcore_check_float(L, 5, "rate");
    return 0;
}

/** plan:stepped([flags]): the instances (ascending) with a source of
 * weight > 0 whose last run's step passed an end of its clip (a lap, or a
 * clip that does not loop reaching an end) or moved on a clip c with
 * flags[c] true (flags: a table read raw, one entry per clip of the set;
 * e.g. the clips with events): a superset of the instances an event, loop
 * or finished notification can come from, found in one C pass. */
static int l_plan_stepped(lua_State *L) {
    lplan *lp = check_plan(L, 1);
    const lmb_plan *p = &lp->plan;
    uint32_t C = p->src[0].clip_count, N = p->pose->instance_count;
    uint8_t *flags = NULL;
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        flags = (uint8_t *)lua_newuserdatauv(L, C > 0 ? C : 1, 0);
        for (uint32_t c = 0; c < C; c++) {
            lua_rawgeti(L, 2, (lua_Integer)c + 1);
            flags[c] = (uint8_t)lua_toboolean(L, -1);
            lua_pop(L, 1);
        }
    }
    uint32_t *out = (uint32_t *)lua_newuserdatauv(L, (size_t)N * sizeof(uint32_t), 0);
    uint32_t n = lmb_plan_stepped(p, flags, out);
    lua_createtable(L, (int)(n < INT_MAX ? n : INT_MAX), 0);
    for (uint32_t k = 0; k < n; k++) {
        lua_pushinteger(L, (lua_Integer)out[k] + 1);
        lua_rawseti(L, -2, (lua_Integer)k + 1);
    }
    return 1;
}

/** plan:source(i, layer, source): clip index (nil for none), time, rate,
 * loop, weight, and the time before the last run's step (play and
 * set_time set it with the time: a start or a seek is not a step). */
static int l_plan_source(lua_State *L) {
    lplan *lp = check_plan(L, 1);
    uint32_t i, k = plan_source(L, lp, 2, &i);
    const lmb_sampler *s = lp->plan.src + k;
    if (s->clip[i] < 0)
        lua_pushnil(L);
    else
        lua_pushinteger(L, s->clip[i] + 1);
    lua_pushnumber(L, (lua_Number)s->time[i]);
    lua_pushnumber(L, (lua_Number)s->rate[i]);
    lua_pushboolean(L, s->loop[i]);
    lua_pushnumber(L, (lua_Number)lp->plan.weight[(size_t)k * lp->plan.pose->instance_count + i]);
    lua_pushnumber(L,
                   (lua_Number)lp->plan.prev_time[(size_t)k * lp->plan.pose->instance_count + i]);
    return 6;
}

/** plan:morph_weights(node, defaults [, out]): every instance's blended
 * values of the float tracks on node `node` (e.g. a glTF mesh node's morph
 * weights) through the layer stack as it stands after the last run, from
 * `defaults` (1 to 16 numbers: the mesh's default weights); an f32 Buffer of
 * width #defaults and one element per instance (`out`, filled, or new). */
static int l_plan_morph_weights(lua_State *L) {
    lplan *lp = check_plan(L, 1);
    const lmb_plan *p = &lp->plan;
    lua_Integer node = luaL_checkinteger(L, 2);
    if (node < 0 || node > (lua_Integer)UINT32_MAX)
        return luaL_argerror(L, 2, "node must be an integer in [0, 2^32 - 1]");
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_Integer W = lcore_rawlen(L, 3);
    if (W < 1 || W > LMB_FLOAT_WIDTH)
        return luaL_argerror(
            L, 3,
            lua_pushfstring(L, "defaults must hold 1 to %d numbers (got %I)", LMB_FLOAT_WIDTH, W));
    float base[LMB_FLOAT_WIDTH];
    lcore_read_floats(L, 3, "defaults", 1, base, (size_t)W);
    uint32_t N = p->pose->instance_count;
    lbuffer *out;
    if (!lua_isnoneornil(L, 4)) {
        out = (lbuffer *)luaL_testudata(L, 4, BUFFER_MT);
        if (!out || out->type != LBUF_F32 || out->width != (uint32_t)W || out->count != N ||
            out->readonly)
            return luaL_argerror(L, 4,
                                 lua_pushfstring(L,
                                                 "out must be a writable f32 Buffer of width %I "
                                                 "with %I elements",
                                                 W, (lua_Integer)N));
        lua_settop(L, 4);
    } else {
        lua_settop(L, 3);
        out = lbuf_push(L, LBUF_F32, (uint32_t)W, N);
    }
    /* the track of each clip of the set on this node (on the C stack for
     * the usual few clips: no allocation per frame) */
    int32_t few[64];
    int32_t *track =
        lp->clip_count <= 64
            ? few
            : (int32_t *)lua_newuserdatauv(L, (size_t)lp->clip_count * sizeof(int32_t), 0);
    const lmb_clip *const *clips = p->src[0].clips;
    for (uint32_t k = 0; k < lp->clip_count; k++) {
        const lmb_clip *c = clips[k];
        track[k] = -1;
        for (uint32_t m = c->joint_track_count; m < c->track_count; m++) {
            const lmb_track *tr = c->tracks + m;
            if (tr->target != (uint32_t)node || tr->path != LMB_PATH_F) continue;
            if (tr->width != (uint32_t)W)
                return luaL_error(L,
                                  "limber.Plan:morph_weights: clip %d's track on node %I has %d "
                                  "values per key, defaults %I",
                                  (int)k + 1, node, (int)tr->width, W);
            track[k] = (int32_t)m;
            break;
        }
    }
    lmb_plan_float_track(p, track, (uint32_t)W, base, (float *)out->data);
    if (track != few) lua_pop(L, 1);
    return 1;
}

/* An optional fade time at `arg`: >= 0 seconds (0 or nil: at once). */
static float check_fade(lua_State *L, int arg) {
    if (lua_isnoneornil(L, arg)) return 0.0f;
    float f = lcore_check_float(L, arg, "fade");
    if (f < 0.0f) luaL_argerror(L, arg, lua_pushfstring(L, "fade %f must be >= 0", (lua_Number)f));
    return f;
}

/* Sets a weight now or as a fade: speed = |to - w| / fade. */
static void set_faded(float *w, float *to, float *speed, float value, float fade) {
    *to = value;
    if (fade > 0.0f && *w != value) {
        *speed = (float)(fabs((double)value - (double)*w) / (double)fade);
        if (!(*speed > 0.0f) || !isfinite(*speed)) *w = value, *speed = 0.0f;
    } else {
        *w = value;
        *speed = 0.0f;
    }
}

/** plan:set_weight(i, layer, source, w [, fade]): the source's weight in
 * [0, 1e6] (weights inside a layer are normalised), at once or moving
 * linearly there over `fade` seconds of run(dt). */
static int l_plan_set_weight(lua_State *L) {
    lplan *lp = check_plan(L, 1);
    lmb_plan *p = &lp->plan;
    uint32_t i, k = plan_source(L, lp, 2, &i);
    float w = check_source_weight(L, 5), fade = check_fade(L, 6);
    size_t at = (size_t)k * p->pose->instance_count + i;
    set_faded(p->weight + at, p->weight_to + at, p->weight_speed + at, w, fade);
    lmb_plan_touch(p, i);
    return 0;
}

/** plan:weight(i, layer, source): the source's current weight. */
static int l_plan_weight(lua_State *L) {
    lplan *lp = check_plan(L, 1);
    uint32_t i, k = plan_source(L, lp, 2, &i);
    lua_pushnumber(L, (lua_Number)lp->plan.weight[(size_t)k * lp->plan.pose->instance_count + i]);
    return 1;
}

static uint32_t plan_layer(lua_State *L, lplan *lp, int arg) {
    int names = push_anchor(L, "names");
    uint32_t n = check_layer(L, arg, names, lp->plan.layer_count);
    lua_pop(L, 1);
    return n;
}

/** plan:set_layer_weight(i, layer, w [, fade]): the layer's weight in [0, 1]. */
static int l_plan_set_layer_weight(lua_State *L) {
    lplan *lp = check_plan(L, 1);
    lmb_plan *p = &lp->plan;
    uint32_t i = lcore_check_index(L, 2, p->pose->instance_count, "instance");
    uint32_t n = plan_layer(L, lp, 3);
    float w = check_layer_weight(L, 4), fade = check_fade(L, 5);
    size_t at = (size_t)n * p->pose->instance_count + i;
    set_faded(p->layer_weight + at, p->layer_to + at, p->layer_speed + at, w, fade);
    lmb_plan_touch(p, i);
    return 0;
}

/** plan:layer_weight(i, layer): the layer's current weight. */
static int l_plan_layer_weight(lua_State *L) {
    lplan *lp = check_plan(L, 1);
    lmb_plan *p = &lp->plan;
    uint32_t i = lcore_check_index(L, 2, p->pose->instance_count, "instance");
    uint32_t n = plan_layer(L, lp, 3);
    lua_pushnumber(L, (lua_Number)p->layer_weight[(size_t)n * p->pose->instance_count + i]);
    return 1;
}

/** plan:set_mask(layer, mask): per-joint weights in [0, 1], nil for none. */
static int l_plan_set_mask(lua_State *L) {
    lplan *lp = check_plan(L, 1);
    uint32_t n = plan_layer(L, lp, 2), J = lp->plan.pose->joint_count;
    set_mask(L, lp->plan.layers + n, lp->masks + (size_t)n * J, J, "mask");
    lmb_plan_touch_all(&lp->plan);
    return 0;
}

/** plan:set_reference(layer, reference): an additive layer's reference (a
 * Pose, its instance 1, or { clip =, time = }), nil for the rest pose. */
static int l_plan_set_reference(lua_State *L) {
    lplan *lp = check_plan(L, 1);
    uint32_t n = plan_layer(L, lp, 2), J = lp->plan.pose->joint_count;
    set_reference(L, lp->plan.layers + n, lp->refs + (size_t)n * J * LMB_TRS_FLOATS,
                  lp->plan.pose->skel, "reference");
    lmb_plan_touch_all(&lp->plan);
    return 0;
}

/** plan:set_lod(i, every [, phase]): instance i is evaluated on runs n with
 * (n + phase) % every == 0 (every 1 .. 255; phase 0 .. every - 1, default
 * (i - 1) % every, which spreads a tier evenly over the runs). */
static int l_plan_set_lod(lua_State *L) {
    lplan *lp = check_plan(L, 1);
    lmb_plan *p = &lp->plan;
    uint32_t i = lcore_check_index(L, 2, p->pose->instance_count, "instance");
    lua_Integer every = luaL_checkinteger(L, 3);
    if (every < 1 || every > 255)
        return luaL_argerror(L, 3, lua_pushfstring(L, "every %I out of range [1, 255]", every));
    lua_Integer phase = (lua_Integer)(i % (uint32_t)every);
    if (!lua_isnoneornil(L, 4)) {
        phase = luaL_checkinteger(L, 4);
        if (phase < 0 || phase >= every)
            return luaL_argerror(
                L, 4, lua_pushfstring(L, "phase %I out of range [0, %I]", phase, every - 1));
    }
    p->every[i] = (uint8_t)every;
    p->phase[i] = (uint8_t)phase;
    return 0;
}

/** plan:lod(i): every, phase of instance i. */
static int l_plan_lod(lua_State *L) {
    lplan *lp = check_plan(L, 1);
    uint32_t i = lcore_check_index(L, 2, lp->plan.pose->instance_count, "instance");
    lua_pushinteger(L, lp->plan.every[i]);
    lua_pushinteger(L, lp->plan.phase[i]);
    return 2;
}

/** plan:invalidate([i]): instance i (default every instance) is evaluated
 * again at its next due run even if nothing changed. */
static int l_plan_invalidate(lua_State *L) {
    lplan *lp = check_plan(L, 1);
    if (lua_isnoneornil(L, 2)) {
        lmb_plan_touch_all(&lp->plan);
    } else {
        lmb_plan_touch(&lp->plan,
                       lcore_check_index(L, 2, lp->plan.pose->instance_count, "instance"));
    }
    return 0;
}

/* ---- IK constraints ------------------------------------------------------ */

/* Stops constraint c's target of instance i following a node. */
static void unfollow(lplan *lp, uint32_t c, uint32_t i) {
    struct follow *f = lp->follow + (size_t)c * lp->plan.pose->instance_count + i;
    if (f->node[0]) lp->follow_count--;
    memset(f, 0, sizeof *f);
}

/* Writes constraint c's inputs of instance i; marks it changed when they
 * differ from what it had. pole NULL: none. */
static void put_ik(lmb_plan *p, uint32_t c, uint32_t i, const float *t, const float *pole,
                   float w) {
    lmb_plan_ik *ik = p->ik + c;
    float *ot = ik->target + (size_t)i * 3, *op = ik->pole + (size_t)i * 3;
    uint8_t hp = pole != NULL;
    int same = ik->weight[i] == w && ik->has_pole[i] == hp;
    for (int k = 0; k < 3 && w > 0.0f; k++) {
        float pk = pole ? pole[k] : 0.0f;
        same &= ot[k] == t[k] && op[k] == pk;
        ot[k] = t[k], op[k] = pk;
    }
    ik->weight[i] = w, ik->has_pole[i] = hp;
    if (!same) lmb_plan_touch(p, i);
}

/* The (plan, constraint c, instance i) arguments of the IK methods (c and i
 * 0-based). */
static lplan *ik_args(lua_State *L, uint32_t *c, uint32_t *i) {
    lplan *lp = check_plan(L, 1);
    *c = lcore_check_index(L, 2, lp->plan.ik_count, "constraint");
    *i = lcore_check_index(L, 3, lp->plan.pose->instance_count, "instance");
    return lp;
}

/** plan:set_ik(c, i, targets [, poles [, weights]]): constraint c (1-based,
 * in desc.ik's order) of instance i: targets `{ x, y, z }` (one instance)
 * or an f32 Buffer of width 3 (instances i, i + 1, ...), poles the same
 * shape or nil (none), weights a number in [0, 1] or an f32 Buffer of width
 * 1 (default 1; 0: off); in the pose's model space. targets nil: the
 * constraint is off for instance i. Stops a target following a node. */
static int l_plan_set_ik(lua_State *L) {
    uint32_t c, i;
    lplan *lp = ik_args(L, &c, &i);
    lmb_plan *p = &lp->plan;
    const uint32_t N = p->pose->instance_count;
    if (lua_isnoneornil(L, 4)) {
        if (!lua_isnoneornil(L, 5) || !lua_isnoneornil(L, 6))
            return luaL_argerror(L, 4, "poles and weights need targets");
        unfollow(lp, c, i);
        put_ik(p, c, i, NULL, NULL, 0.0f);
        return 0;
    }
    float t1[3], p1[3], w1 = 1.0f;
    size_t n, np = 0, nw = 0;
    const float *tg = lcore_vec3_arg(L, 4, "targets", 0, t1, &n);
    const float *po = lcore_vec3_arg(L, 5, "poles", 1, p1, &np);
    if (po && np != n)
        return luaL_argerror(
            L, 5, lua_pushfstring(L, "%I poles for %I targets", (lua_Integer)np, (lua_Integer)n));
    const float *w = lcore_weight_arg(L, 6, &w1, &nw);
    int one_w = w && nw == 1 && lua_type(L, 6) == LUA_TNUMBER; /* one weight for all */
    if (w && nw != n && !one_w)
        return luaL_argerror(
            L, 6, lua_pushfstring(L, "%I weights for %I targets", (lua_Integer)nw, (lua_Integer)n));
    if ((uint64_t)i + n > N)
        return luaL_argerror(L, 3,
                             lua_pushfstring(L, "instances %I .. %I out of range [1, %I]",
                                             (lua_Integer)i + 1, (lua_Integer)(i + n),
                                             (lua_Integer)N));
    for (size_t k = 0; w && k < (one_w ? 1 : n); k++)
        if (!(w[k] >= 0.0f && w[k] <= 1.0f))
            return luaL_argerror(L, 6,
                                 lua_pushfstring(L, "weight %f of instance %I outside [0, 1]",
                                                 (lua_Number)w[k], (lua_Integer)(i + k + 1)));
    for (size_t k = 0; k < n * 3; k++) /* a Buffer view may hold anything */
        if (!lcore_float_ok((lua_Number)tg[k]) || (po && !lcore_float_ok((lua_Number)po[k])))
            return luaL_argerror(L, po && lcore_float_ok((lua_Number)tg[k]) ? 5 : 4,
                                 lua_pushfstring(L, "instance %I: not a finite float",
                                                 (lua_Integer)(i + k / 3 + 1)));
    for (size_t k = 0; k < n; k++) {
        uint32_t at = i + (uint32_t)k;
        unfollow(lp, c, at);
        put_ik(p, c, at, tg + k * 3, po ? po + k * 3 : NULL, w ? w[one_w ? 0 : k] : 1.0f);
    }
    return 0;
}

/* An optional node id field of follow_ik's options (0: none). */
static uint32_t follow_node(lua_State *L, int opts, const char *key, const lmb_hier *h) {
    if (opts == 0 || lcore_rawfield(L, opts, key) == LUA_TNIL) {
        if (opts) lua_pop(L, 1);
        return 0;
    }
    lua_Integer id = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
    if (id < 1 || id > (lua_Integer)h->capacity || !lmb_hier_alive(h, (uint32_t)id))
        luaL_argerror(L, 6,
                      lua_pushfstring(L, "option '%s' must be a live node of the scene", key));
    lua_pop(L, 1);
    return (uint32_t)id;
}

/** plan:follow_ik(c, i, scene, node [, opts]): constraint c's target of
 * instance i follows scene node `node` (a limber.Scene's id): at every
 * run, its world position (as of the scene's last update), taken into the
 * model space of opts.frame (a node whose world matrix is the pose's model
 * space, such as the character's own node; default the world). opts.pole:
 * a node whose position is the pole; opts.weight: in [0, 1] (default 1).
 * node nil: stops following and turns the constraint off. A destroyed node
 * turns it off at the next run (a new node that takes its id is not
 * followed); while a node was never computed by an update, or the frame is
 * singular, the constraint is off for that run. The plan's followed nodes
 * belong to one Scene at a time. */
static int l_plan_follow_ik(lua_State *L) {
    uint32_t c, i;
    lplan *lp = ik_args(L, &c, &i);
    lmb_plan *p = &lp->plan;
    const uint32_t N = p->pose->instance_count;
    lmb_hier **sc = lcore_test_scene(L, 4);
    if (!sc) return luaL_argerror(L, 4, "limber.Scene expected");
    if (lp->scene && lp->scene != sc && lp->follow_count)
        return luaL_argerror(L, 4, "the plan already follows nodes of another Scene");
    const lmb_hier *h = *sc;
    if (lua_isnoneornil(L, 5)) {
        unfollow(lp, c, i);
        put_ik(p, c, i, NULL, NULL, 0.0f);
        return 0;
    }
    lua_Integer id = lua_isinteger(L, 5) ? lua_tointeger(L, 5) : 0;
    if (id < 1 || id > (lua_Integer)h->capacity || !lmb_hier_alive(h, (uint32_t)id))
        return luaL_argerror(L, 5, "node must be a live node of the scene");
    int opts = 0;
    if (!lua_isnoneornil(L, 6)) {
        luaL_checktype(L, 6, LUA_TTABLE);
        opts = 6;
    }
    uint32_t pole = follow_node(L, opts, "pole", h), frame = follow_node(L, opts, "frame", h);
    float w = 1.0f;
    if (opts && lcore_rawfield(L, opts, "weight") != LUA_TNIL) {
        lua_Number v = lua_tonumber(L, -1);
        if (lua_type(L, -1) != LUA_TNUMBER || !(v >= 0 && v <= 1))
            return luaL_argerror(L, 6, "option 'weight' must be a number in [0, 1]");
        w = (float)v;
    }
    if (lp->scene != sc) { /* anchor the scene: its storage is read at every run */
        lua_getiuservalue(L, 1, 1);
        lua_pushvalue(L, 4);
        lua_setfield(L, -2, "scene");
        lua_pop(L, 1);
    }
    /* checked again: a __gc run by an allocation above may have grown the
     * scene (its storage moved), destroyed the nodes or followed another one */
    h = *sc;
    if (lp->scene && lp->scene != sc && lp->follow_count)
        return luaL_argerror(L, 4, "the plan already follows nodes of another Scene");
    if (!lmb_hier_alive(h, (uint32_t)id) || (pole && !lmb_hier_alive(h, pole)) ||
        (frame && !lmb_hier_alive(h, frame)))
        return luaL_argerror(L, 5, "a node was destroyed during the call");
    lp->scene = sc;
    struct follow *f = lp->follow + (size_t)c * N + i;
    if (!f->node[0]) lp->follow_count++;
    f->node[0] = (uint32_t)id, f->node[1] = pole, f->node[2] = frame;
    for (int k = 0; k < 3; k++)
        f->epoch[k] = f->node[k] ? h->epoch[f->node[k]] : 0;
    f->weight = w; /* the position comes at the next run */
    lmb_plan_touch(p, i);
    return 0;
}

/* v (3 floats) into the space of the affine column-major matrix m: m^-1 v.
 * Returns 0 when m is singular. */
static int to_frame(const float *m, const float *v, float out[3]) {
    double a = (double)m[0], b = (double)m[4], c = (double)m[8], d = (double)m[1], e = (double)m[5],
           f = (double)m[9], g = (double)m[2], h = (double)m[6], k = (double)m[10];
    double A = e * k - f * h, B = -(d * k - f * g), C = d * h - e * g;
    double det = a * A + b * B + c * C;
    if (!(fabs(det) > 1e-30)) return 0;
    double x = (double)v[0] - (double)m[12], y = (double)v[1] - (double)m[13],
           z = (double)v[2] - (double)m[14];
    double r0 = (A * x + -(b * k - c * h) * y + (b * f - c * e) * z) / det;
    double r1 = (B * x + (a * k - c * g) * y + -(a * f - c * d) * z) / det;
    double r2 = (C * x + -(a * h - b * g) * y + (a * e - b * d) * z) / det;
    out[0] = (float)r0, out[1] = (float)r1, out[2] = (float)r2;
    return isfinite(out[0]) && isfinite(out[1]) && isfinite(out[2]);
}

/* Targets that follow nodes: read the nodes' world positions (as
 * scene:world reads them: nodes on pose joints synced, leaves refreshed). */
static void follow_nodes(lplan *lp) {
    lmb_plan *p = &lp->plan;
    const uint32_t N = p->pose->instance_count;
    lmb_hier *h = *lp->scene;
    lmb_hier_sync(h);
    for (uint32_t c = 0; c < p->ik_count; c++)
        for (uint32_t i = 0; i < N; i++) {
            struct follow *f = lp->follow + (size_t)c * N + i;
            if (!f->node[0]) continue;
            int alive = 1, computed = 1;
            for (int k = 0; k < 3; k++) {
                uint32_t id = f->node[k];
                if (!id) continue;
                alive &= lmb_hier_alive(h, id) && h->epoch[id] == f->epoch[k];
                if (!alive) break;
                lmb_hier_refresh(h, id);
                computed &= h->node[id].stamp != 0; /* 0: not computed by an update yet */
            }
            if (!alive) { /* a node is gone: the constraint is off */
                unfollow(lp, c, i);
                put_ik(p, c, i, NULL, NULL, 0.0f);
                continue;
            }
            float t[3], pl[3];
            const float *tw = lmb_hier_world(h, f->node[0]) + 12;
            const float *pw = f->node[1] ? lmb_hier_world(h, f->node[1]) + 12 : NULL;
            if (computed && f->node[2]) {
                const float *m = lmb_hier_world(h, f->node[2]);
                computed = to_frame(m, tw, t) && (!pw || to_frame(m, pw, pl));
            } else if (computed) {
                memcpy(t, tw, sizeof t);
                if (pw) memcpy(pl, pw, sizeof pl);
            }
            /* not computed yet, or the frame singular (scaled to 0): off for
             * this run, still following */
            if (!computed || !(f->weight > 0.0f))
                put_ik(p, c, i, NULL, NULL, 0.0f);
            else
                put_ik(p, c, i, t, pw ? pl : NULL, f->weight);
        }
}

/** plan:ik(c, i): constraint c of instance i as it stands: target { x, y,
 * z }, weight, pole { x, y, z } or nil (targets of followed nodes: as of
 * the last run). */
static int l_plan_ik(lua_State *L) {
    uint32_t c, i;
    const lmb_plan_ik *ik = ik_args(L, &c, &i)->plan.ik + c;
    lcore_push_floats(L, ik->target + (size_t)i * 3, 3, 0);
    lua_pushnumber(L, (lua_Number)ik->weight[i]);
    if (ik->has_pole[i])
        lcore_push_floats(L, ik->pole + (size_t)i * 3, 3, 0);
    else
        lua_pushnil(L);
    return 3;
}

static int l_plan_ik_count(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)check_plan(L, 1)->plan.ik_count);
    return 1;
}

typedef struct plan_job {
    lmb_plan *plan;
    int simd_cap;
} plan_job;

static void plan_item(void *ctx, uint32_t item, uint32_t worker) {
    plan_job *j = (plan_job *)ctx;
    lmb_simd_use(j->simd_cap);
    lmb_plan_block(j->plan, item, worker);
}

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/** plan:run([dt]): advances every source's time by rate * dt and the fades
 * by |dt| (default 0), then evaluates every instance that is due and
 * changed (blocks of 8 over the worker pool). Returns how many it
 * evaluated. */
static int l_plan_run(lua_State *L) {
    check_plan(L, 1);
    double dt = 0.0;
    if (!lua_isnoneornil(L, 2)) {
        lcore_check_float(L, 2, "dt");
        dt = (double)lua_tonumber(L, 2);
    }
    lua_pushinteger(L, lcore_plan_run(L, 1, dt));
    return 1;
}

uint32_t lcore_plan_run(lua_State *L, int idx, double dt) {
    lplan *lp = check_plan(L, idx);
    lmb_plan *p = &lp->plan;
    lmb_pool *pool = lcore_pool(L);
    uint32_t threads = lmb_pool_threads(pool);
    if (threads > p->worker_count) plan_workers(L, idx, lp, threads, "limber.Plan:run");
    double t0 = wall();
    if (lp->follow_count) follow_nodes(lp);
    uint32_t blocks = lmb_plan_advance(p, dt);
    for (uint32_t w = 0; w < p->worker_count; w++)
        p->workers[w].sample = p->workers[w].blend = p->workers[w].model = p->workers[w].ik =
            p->workers[w].output = 0.0;
    if (blocks) {
        plan_job job = {p, lcore_simd_cap(L)};
        /* at most the workers with scratch: a __gc run while plan_workers
         * allocated may have raised the pool's count since */
        lmb_pool_run_workers(pool, blocks, p->worker_count, plan_item, &job);
    }
    lmb_plan_finish(p);
    lp->total = wall() - t0;
    return p->active_count;
}

/** plan:timings(): { advance, sample, blend, model, ik, output, total } in
 * ms of the last run (stages summed over the threads; total is wall time). */
static int l_plan_timings(lua_State *L) {
    lplan *lp = check_plan(L, 1);
    lmb_plan *p = &lp->plan;
    double s = 0, b = 0, m = 0, k2 = 0, o = 0;
    for (uint32_t w = 0; w < p->worker_count; w++)
        s += p->workers[w].sample, b += p->workers[w].blend, m += p->workers[w].model,
            k2 += p->workers[w].ik, o += p->workers[w].output;
    lua_createtable(L, 0, 7);
    const char *keys[7] = {"advance", "sample", "blend", "model", "ik", "output", "total"};
    double v[7] = {p->advance, s, b, m, k2, o, lp->total};
    for (int k = 0; k < 7; k++) {
        lua_pushnumber(L, (lua_Number)(v[k] * 1e3));
        lua_setfield(L, -2, keys[k]);
    }
    return 1;
}

static int l_plan_pose(lua_State *L) {
    check_plan(L, 1);
    push_anchor(L, "pose");
    return 1;
}

static int l_plan_instances(lua_State *L) {
    lua_pushinteger(L, check_plan(L, 1)->plan.pose->instance_count);
    return 1;
}

static int l_plan_layer_count(lua_State *L) {
    lua_pushinteger(L, check_plan(L, 1)->plan.layer_count);
    return 1;
}

/** plan:source_count(layer): the number of sources of a layer. */
static int l_plan_source_count(lua_State *L) {
    lplan *lp = check_plan(L, 1);
    lua_pushinteger(L, lp->plan.layers[plan_layer(L, lp, 2)].source_count);
    return 1;
}

/** plan:frame(): runs so far. */
static int l_plan_frame(lua_State *L) {
    lua_pushinteger(L, check_plan(L, 1)->plan.run);
    return 1;
}

/** plan:evaluated(): how many instances the last run evaluated. */
static int l_plan_evaluated(lua_State *L) {
    lua_pushinteger(L, check_plan(L, 1)->plan.active_count);
    return 1;
}

static int l_plan_tostring(lua_State *L) {
    lplan *lp = check_plan(L, 1);
    lua_pushfstring(L, "limber.Plan(%d instances, %d layers, %d sources)",
                    (int)lp->plan.pose->instance_count, (int)lp->plan.layer_count,
                    (int)lp->plan.source_count);
    return 1;
}

void lcore_open_plan(lua_State *L) {
    static const luaL_Reg stack_meta[] = {
        {"__len", l_stack_instances}, {"__tostring", l_stack_tostring}, {NULL, NULL}};
    static const luaL_Reg stack_methods[] = {{"set_weight", l_stack_set_weight},
                                             {"weight", l_stack_weight},
                                             {"set_layer_weight", l_stack_set_layer_weight},
                                             {"layer_weight", l_stack_layer_weight},
                                             {"set_mask", l_stack_set_mask},
                                             {"set_reference", l_stack_set_reference},
                                             {"run", l_stack_run},
                                             {"output", l_stack_output},
                                             {"instance_count", l_stack_instances},
                                             {"layer_count", l_stack_layer_count},
                                             {NULL, NULL}};
    static const luaL_Reg plan_meta[] = {
        {"__len", l_plan_instances}, {"__tostring", l_plan_tostring}, {NULL, NULL}};
    static const luaL_Reg plan_methods[] = {{"play", l_plan_play},
                                            {"set_time", l_plan_set_time},
                                            {"set_rate", l_plan_set_rate},
                                            {"stepped", l_plan_stepped},
                                            {"source", l_plan_source},
                                            {"morph_weights", l_plan_morph_weights},
                                            {"set_weight", l_plan_set_weight},
                                            {"weight", l_plan_weight},
                                            {"set_layer_weight", l_plan_set_layer_weight},
                                            {"layer_weight", l_plan_layer_weight},
                                            {"set_mask", l_plan_set_mask},
                                            {"set_reference", l_plan_set_reference},
                                            {"set_lod", l_plan_set_lod},
                                            {"lod", l_plan_lod},
                                            {"invalidate", l_plan_invalidate},
                                            {"run", l_plan_run},
                                            {"set_ik", l_plan_set_ik},
                                            {"follow_ik", l_plan_follow_ik},
                                            {"ik", l_plan_ik},
                                            {"ik_count", l_plan_ik_count},
                                            {"timings", l_plan_timings},
                                            {"pose", l_plan_pose},
                                            {"instance_count", l_plan_instances},
                                            {"layer_count", l_plan_layer_count},
                                            {"source_count", l_plan_source_count},
                                            {"frame", l_plan_frame},
                                            {"evaluated", l_plan_evaluated},
                                            {NULL, NULL}};
    lcore_class(L, STACK_MT, stack_meta, stack_methods);
    lcore_class(L, PLAN_MT, plan_meta, plan_methods);
    lua_pushcfunction(L, l_stack_new);
    lua_setfield(L, -2, "stack");
    lua_pushcfunction(L, l_plan_new);
    lua_setfield(L, -2, "plan");
}
