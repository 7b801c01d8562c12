/* Naive local-to-model baselines for examples/bench_hierarchy.lua, a
 * timing loop that calls limber's kernel straight from C, and the raw
 * world-matrix calls the naive baselines of examples/bench_scene.lua make on
 * a limber.Scene (compute, pass: not part of limber's API).
 *
 * (b) "recursive": the data-oriented-design article's starting point: a
 *     node object per joint with its own TRS and a vector of child
 *     pointers, world matrices by recursion from each root, cglm
 *     glm_quat_mat4 + glm_mat4_mul.
 * (c) "flat": the article's "after": joints in parent-before-child arrays,
 *     one forward loop, still one cglm matrix build and 4x4 multiply per
 *     joint.
 * Both are deliberately plain; they are what limber is measured against. */
#include <cglm/cglm.h>
#include "lcompat.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hierarchy.h"
#include "pose.h"

typedef struct node {
    vec3 t;
    versor q;
    vec3 s;
    mat4 world;
    struct node **child;
    int child_count, child_cap;
} node;

typedef struct bench {
    int instances, joints;
    int *parent;  /* -1 for roots */
    node *nodes;  /* instances * joints */
    float *trs;   /* instances * joints * 10, flat version input */
    float *model; /* instances * joints * 16, flat version output */
} bench;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static float frand(unsigned *state) {
    *state = *state * 1664525u + 1013904223u;
    return (float)(*state >> 8) / 16777216.0f;
}

static void local_matrix(const float *t, const float *q, const float *s, mat4 out) {
    versor qq = {q[0], q[1], q[2], q[3]};
    glm_quat_mat4(qq, out);
    glm_scale(out, (float *)s);
    out[3][0] = t[0];
    out[3][1] = t[1];
    out[3][2] = t[2];
}

static void recurse(node *n, mat4 parent_world) {
    mat4 local;
    local_matrix(n->t, n->q, n->s, local);
    glm_mat4_mul(parent_world, local, n->world);
    for (int c = 0; c < n->child_count; c++)
        recurse(n->child[c], n->world);
}

static int bench_gc(lua_State *L) {
    bench *b = (bench *)luaL_checkudata(L, 1, "limber.baseline.Hierarchy");
    if (b->nodes) {
        for (int k = 0; k < b->instances * b->joints; k++)
            free(b->nodes[k].child);
    }
    free(b->nodes), free(b->parent), free(b->trs), free(b->model);
    memset(b, 0, sizeof *b);
    return 0;
}

/* new(parents_table (0 = root, 1-based), instances, seed) */
static int bench_new(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    int J = (int)luaL_len(L, 1);
    int N = (int)luaL_checkinteger(L, 2);
    unsigned seed = (unsigned)luaL_optinteger(L, 3, 1);
    bench *b = (bench *)lua_newuserdatauv(L, sizeof(bench), 0);
    memset(b, 0, sizeof *b);
    luaL_setmetatable(L, "limber.baseline.Hierarchy");
    b->instances = N, b->joints = J;
    b->parent = (int *)malloc(sizeof(int) * (size_t)J);
    b->nodes = (node *)calloc((size_t)N * (size_t)J, sizeof(node));
    b->trs = (float *)malloc(sizeof(float) * 10 * (size_t)N * (size_t)J);
    void *mem = NULL;
    if (posix_memalign(&mem, 64, sizeof(float) * 16 * (size_t)N * (size_t)J) == 0)
        b->model = (float *)mem;
    if (!b->parent || !b->nodes || !b->trs || !b->model) return luaL_error(L, "out of memory");
    for (int j = 0; j < J; j++) {
        lua_geti(L, 1, j + 1);
        b->parent[j] = (int)lua_tointeger(L, -1) - 1;
        lua_pop(L, 1);
    }
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < J; j++) {
            float *v = b->trs + ((size_t)i * (size_t)J + (size_t)j) * 10;
            for (int k = 0; k < 3; k++)
                v[k] = frand(&seed) * 2 - 1;
            float qn = 0;
            for (int k = 3; k < 7; k++)
                v[k] = frand(&seed) * 2 - 1, qn += v[k] * v[k];
            qn = sqrtf(qn);
            for (int k = 3; k < 7; k++)
                v[k] /= qn;
            for (int k = 7; k < 10; k++)
                v[k] = 0.5f + frand(&seed);
            node *n = &b->nodes[(size_t)i * (size_t)J + (size_t)j];
            memcpy(n->t, v, 3 * sizeof(float));
            memcpy(n->q, v + 3, 4 * sizeof(float));
            memcpy(n->s, v + 7, 3 * sizeof(float));
            int p = b->parent[j];
            if (p >= 0) {
                node *pn = &b->nodes[(size_t)i * (size_t)J + (size_t)p];
                if (pn->child_count == pn->child_cap) {
                    pn->child_cap = pn->child_cap ? pn->child_cap * 2 : 4;
                    pn->child = (node **)realloc(pn->child, sizeof(node *) * (size_t)pn->child_cap);
                }
                pn->child[pn->child_count++] = n;
            }
        }
    }
    return 1;
}

/* Copies the baseline's random local poses into a limber.Pose (same values
 * for every path) */
static int bench_fill_pose(lua_State *L) {
    bench *b = (bench *)luaL_checkudata(L, 1, "limber.baseline.Hierarchy");
    lmb_pose *p = (lmb_pose *)lmb_align_ptr(luaL_checkudata(L, 2, "limber.Pose"), 64);
    if ((int)p->instance_count != b->instances || (int)p->joint_count != b->joints)
        return luaL_error(L, "pose size differs from the baseline's");
    for (int i = 0; i < b->instances; i++)
        for (int j = 0; j < b->joints; j++)
            lmb_pose_set_trs(p, (uint32_t)i, (uint32_t)j,
                             b->trs + ((size_t)i * (size_t)b->joints + (size_t)j) * 10);
    return 0;
}

static void run_recursive(bench *b) {
    mat4 id = GLM_MAT4_IDENTITY_INIT;
    for (int i = 0; i < b->instances; i++)
        for (int j = 0; j < b->joints; j++)
            if (b->parent[j] < 0) recurse(&b->nodes[(size_t)i * (size_t)b->joints + (size_t)j], id);
}

static void run_flat(bench *b) {
    for (int i = 0; i < b->instances; i++) {
        const float *trs = b->trs + (size_t)i * (size_t)b->joints * 10;
        mat4 *model = (mat4 *)(void *)(b->model + (size_t)i * (size_t)b->joints * 16);
        for (int j = 0; j < b->joints; j++) {
            mat4 local;
            const float *v = trs + (size_t)j * 10;
            local_matrix(v, v + 3, v + 7, local);
            if (b->parent[j] < 0)
                glm_mat4_copy(local, model[j]);
            else
                glm_mat4_mul(model[b->parent[j]], local, model[j]);
        }
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Times `frames` runs; returns median and min in milliseconds. */
static int timed(lua_State *L, int frames, void (*fn)(void *), void *arg) {
    double *t = (double *)lua_newuserdatauv(L, sizeof(double) * (size_t)frames, 0);
    fn(arg);
    for (int f = 0; f < frames; f++) {
        double t0 = now();
        fn(arg);
        t[f] = (now() - t0) * 1e3;
    }
    qsort(t, (size_t)frames, sizeof(double), cmp_double);
    lua_pushnumber(L, t[frames / 2]);
    lua_pushnumber(L, t[0]);
    return 2;
}

static void fn_recursive(void *a) {
    run_recursive((bench *)a);
}
static void fn_flat(void *a) {
    run_flat((bench *)a);
}
static void fn_limber(void *a) {
    lmb_pose *p = (lmb_pose *)a;
    lmb_pose_local_to_model(p, 0, p->block_count, 1);
}

/* time(kind, frames [, pose]) -> median_ms, min_ms */
static int bench_time(lua_State *L) {
    bench *b = (bench *)luaL_checkudata(L, 1, "limber.baseline.Hierarchy");
    const char *kind = luaL_checkstring(L, 2);
    int frames = (int)luaL_checkinteger(L, 3);
    luaL_argcheck(L, frames > 0, 3, "frames must be positive");
    if (strcmp(kind, "recursive") == 0) return timed(L, frames, fn_recursive, b);
    if (strcmp(kind, "flat") == 0) return timed(L, frames, fn_flat, b);
    if (strcmp(kind, "limber") == 0)
        return timed(L, frames, fn_limber, lmb_align_ptr(luaL_checkudata(L, 4, "limber.Pose"), 64));
    return luaL_argerror(L, 2, "kind must be recursive, flat or limber");
}

/* model(kind, instance, joint) -> 16 numbers of a baseline's result */
static int bench_model(lua_State *L) {
    bench *b = (bench *)luaL_checkudata(L, 1, "limber.baseline.Hierarchy");
    const char *kind = luaL_checkstring(L, 2);
    int i = (int)luaL_checkinteger(L, 3) - 1, j = (int)luaL_checkinteger(L, 4) - 1;
    luaL_argcheck(L, i >= 0 && i < b->instances, 3, "instance out of range");
    luaL_argcheck(L, j >= 0 && j < b->joints, 4, "joint out of range");
    const float *m = strcmp(kind, "recursive") == 0
                         ? &b->nodes[(size_t)i * (size_t)b->joints + (size_t)j].world[0][0]
                         : b->model + ((size_t)i * (size_t)b->joints + (size_t)j) * 16;
    lua_createtable(L, 16, 0);
    for (int k = 0; k < 16; k++) {
        lua_pushnumber(L, m[k]);
        lua_rawseti(L, -2, k + 1);
    }
    return 1;
}

/* The kernel storage of a limber.Scene: the userdata is one pointer to it
 * (csrc/lua/lcore_scene.c). */
static lmb_hier *check_scene(lua_State *L, int arg) {
    return *(lmb_hier **)luaL_checkudata(L, arg, "limber.Scene");
}

/* compute(scene, id, pass): base and world of one node from its parent's
 * stored world, stamped with `pass` (the naive loops). */
static int scene_compute(lua_State *L) {
    lmb_hier *h = check_scene(L, 1);
    lua_Integer id = luaL_checkinteger(L, 2);
    luaL_argcheck(L, id >= 1 && id <= (lua_Integer)h->capacity, 2, "node id out of range");
    lua_Integer pass = luaL_checkinteger(L, 3);
    luaL_argcheck(L, pass >= 0 && pass <= (lua_Integer)UINT32_MAX, 3, "pass out of range");
    lmb_hier_compute(h, (uint32_t)id, (uint32_t)pass);
    return 0;
}

/* pass(scene, ids, count, pass): the raw world pass over ids[1 .. count]
 * (parents first): the full-recomputation baseline in one C call. */
static int scene_pass(lua_State *L) {
    lmb_hier *h = check_scene(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer count = luaL_checkinteger(L, 3);
    luaL_argcheck(L, count >= 0 && count <= (lua_Integer)h->capacity, 3, "count out of range");
    lua_Integer pass = luaL_checkinteger(L, 4);
    luaL_argcheck(L, pass >= 1 && pass <= (lua_Integer)UINT32_MAX, 4, "pass out of range");
    uint32_t *ids =
        (uint32_t *)lua_newuserdatauv(L, (size_t)(count ? count : 1) * sizeof(uint32_t), 0);
    for (lua_Integer k = 0; k < count; k++) {
        lua_rawgeti(L, 2, k + 1);
        lua_Integer id = lua_tointeger(L, -1);
        lua_pop(L, 1);
        if (id < 1 || id > (lua_Integer)h->capacity)
            return luaL_error(L, "ids[%I] = %I out of range [1, %I]", k + 1, id,
                              (lua_Integer)h->capacity);
        ids[k] = (uint32_t)id;
    }
    lmb_hier_pass(h, ids, (uint32_t)count, (uint32_t)pass);
    return 0;
}

__attribute__((visibility("default"))) int luaopen_limber_baseline_hierarchy(lua_State *L);

__attribute__((visibility("default"))) int luaopen_limber_baseline_hierarchy(lua_State *L) {
    static const luaL_Reg methods[] = {
        {"fill_pose", bench_fill_pose}, {"time", bench_time}, {"model", bench_model}, {NULL, NULL}};
    luaL_newmetatable(L, "limber.baseline.Hierarchy");
    lua_pushcfunction(L, bench_gc);
    lua_setfield(L, -2, "__gc");
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushcfunction(L, bench_new);
    lua_setfield(L, -2, "new");
    lua_pushcfunction(L, scene_compute);
    lua_setfield(L, -2, "compute");
    lua_pushcfunction(L, scene_pass);
    lua_setfield(L, -2, "pass");
    return 1;
}
