/* skin.c: the skinning baselines for examples/bench_skinning.lua.
 * naive: the skinning article's first version (DESIGN section 4): every
 * vertex as four influences, four weighted full 4x4 matrices summed,
 * position and normal transformed by the 4x4 sum, float3 streams in file
 * order. Plain scalar C, compiled like the rest of the project (no SIMD
 * intrinsics).
 * v1: limber's own kernel as it was when issue 19 asked for a faster one
 * (csrc/kernel/x86/skinning_avx2.c compiled again with LMB_SKIN_V1: no
 * quads, no software pipeline, the old order of a normal's squares; the
 * AVX-512 and portable kernels have not changed since), run
 * through the kernel's task items on one thread.
 * Also a monotonic wall clock for the benchmark and, on Linux, pinning the
 * calling thread to one CPU (to time each CPU of a host alone). Not
 * installed. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif
#include "lcompat.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sched.h>
#endif

#define EXPORT __attribute__((visibility("default")))

static void *ptr_arg(lua_State *L, int arg, size_t need) {
    luaL_checktype(L, arg, LUA_TLIGHTUSERDATA);
    lua_Integer size = luaL_checkinteger(L, arg + 1);
    if ((size_t)size < need) luaL_argerror(L, arg, "buffer too small");
    return lua_touserdata(L, arg);
}

/* The arguments naive and v1 share: (pos, pos_bytes, nrm, nrm_bytes,
 * joints(u16x4), j_bytes, weights(f32x4), w_bytes, palette(mat4),
 * pal_bytes, out_pos, op_bytes, out_nrm, on_bytes, V, K, N). */
typedef struct skin_args {
    lua_Integer V, K, N;
    const float *pos, *nrm, *wgt, *pal;
    const uint16_t *jnt;
    float *op, *on;
} skin_args;

static skin_args check_skin_args(lua_State *L) {
    skin_args a;
    a.V = luaL_checkinteger(L, 15), a.K = luaL_checkinteger(L, 16), a.N = luaL_checkinteger(L, 17);
    luaL_argcheck(L, a.V > 0 && a.V <= (1 << 24), 15, "vertex count out of range");
    luaL_argcheck(L, a.K > 0 && a.K <= 1024, 16, "joint count out of range");
    luaL_argcheck(L, a.N > 0 && a.N <= 4096, 17, "instance count out of range");
    a.pos = ptr_arg(L, 1, (size_t)a.V * 12);
    a.nrm = ptr_arg(L, 3, (size_t)a.V * 12);
    a.jnt = ptr_arg(L, 5, (size_t)a.V * 8);
    a.wgt = ptr_arg(L, 7, (size_t)a.V * 16);
    a.pal = ptr_arg(L, 9, (size_t)(a.N * a.K) * 64);
    a.op = ptr_arg(L, 11, (size_t)(a.N * a.V) * 12);
    a.on = ptr_arg(L, 13, (size_t)(a.N * a.V) * 12);
    return a;
}

/* naive(<the shared arguments>) skins N instances (palette instance i at
 * i*K*16 floats, outputs at i*V*3). */
static int l_naive(lua_State *L) {
    skin_args a = check_skin_args(L);
    const lua_Integer V = a.V, K = a.K, N = a.N;
    const float *pos = a.pos, *nrm = a.nrm, *wgt = a.wgt, *pal = a.pal;
    const uint16_t *jnt = a.jnt;
    float *op = a.op, *on = a.on;
    for (lua_Integer v = 0; v < V; v++)
        for (int i = 0; i < 4; i++)
            if (jnt[v * 4 + i] >= K) return luaL_error(L, "joint out of range");
    for (lua_Integer n = 0; n < N; n++) {
        const float *P = pal + n * K * 16;
        float *dp = op + n * V * 3, *dn = on + n * V * 3;
        for (lua_Integer v = 0; v < V; v++) {
            float m[16];
            for (int e = 0; e < 16; e++)
                m[e] = 0.0f;
            for (int i = 0; i < 4; i++) {
                const float *M = P + (size_t)jnt[v * 4 + i] * 16;
                float w = wgt[v * 4 + i];
                for (int e = 0; e < 16; e++)
                    m[e] += w * M[e];
            }
            const float *p = pos + v * 3, *q = nrm + v * 3;
            for (int r = 0; r < 3; r++) {
                dp[v * 3 + r] = m[r] * p[0] + m[4 + r] * p[1] + m[8 + r] * p[2] + m[12 + r];
                dn[v * 3 + r] = m[r] * q[0] + m[4 + r] * q[1] + m[8 + r] * q[2];
            }
            float *d = dn + v * 3;
            float s = 1.0f / sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
            d[0] *= s, d[1] *= s, d[2] *= s;
        }
    }
    return 0;
}

/* The v1 AVX2 kernel: the same source as the library's, built with
 * LMB_SKIN_V1 (its entry is lmb_skin_range_avx2_v1). */
#define LMB_SKIN_V1 1
#include "x86/skinning_avx2.c"

typedef struct v1_skinner {
    void *mesh_mem;
    lmb_skin_target target;
    lmb_skin_task task;
    lmb_skin_range_fn run;
} v1_skinner;

#define V1_MT "limber.baseline_skin.v1"

static int v1_gc(lua_State *L) {
    v1_skinner *s = (v1_skinner *)luaL_checkudata(L, 1, V1_MT);
    free(s->mesh_mem);
    s->mesh_mem = NULL;
    return 0;
}

/* One frame: every work item of the task, in order, on this thread. */
static int v1_frame(lua_State *L) {
    v1_skinner *s = (v1_skinner *)lua_touserdata(L, lua_upvalueindex(1));
    uint64_t items = lmb_skin_task_items(&s->task);
    for (uint64_t i = 0; i < items; i++)
        lmb_skin_task_item_with(&s->task, (uint32_t)i, s->run);
    return 0;
}

static int v1_fail(lua_State *L, const lmb_error *err) {
    char msg[256];
    lmb_error_format(err, msg, sizeof msg);
    return luaL_error(L, "v1: %s", msg);
}

/* v1(<the shared arguments>, level)
 * prepares the v1 kernel for N instances of the mesh (sorted like limber's,
 * outputs in sorted order as separate float3 streams at i*V*3) and returns
 * a function that skins one frame. level: "avx512", "avx2" or "portable"
 * (the kernel limber would pick at that level). The buffers must outlive
 * the function (the benchmark keeps them). */
static int l_v1(lua_State *L) {
    static const char *const levels[] = {"portable", "avx2", "avx512", NULL};
    int level = luaL_checkoption(L, 18, NULL, levels);
    luaL_argcheck(L, level <= lmb_simd_cpu_level(), 18, "not supported by this CPU");
    skin_args a = check_skin_args(L);
    const lua_Integer V = a.V, K = a.K, N = a.N;
    const float *pos = a.pos, *nrm = a.nrm, *wgt = a.wgt, *pal = a.pal;
    const uint16_t *jnt = a.jnt;
    float *op = a.op, *on = a.on;
    v1_skinner *s = (v1_skinner *)lua_newuserdata(L, sizeof *s);
    memset(s, 0, sizeof *s);
    luaL_newmetatable(L, V1_MT);
    lua_pushcfunction(L, v1_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    uint32_t *joints = (uint32_t *)lua_newuserdata(L, (size_t)V * 16);
    for (lua_Integer k = 0; k < V * 4; k++)
        joints[k] = jnt[k];
    lmb_skin_source src;
    memset(&src, 0, sizeof src);
    src.vertex_count = (uint32_t)V;
    src.pos = pos, src.nrm = nrm, src.joints = joints, src.weights = wgt;
    src.skin_joints = (uint32_t)K;
    uint32_t counts[5];
    lmb_error err;
    if (lmb_skin_mesh_count(&src, counts, &err) != LMB_OK) return v1_fail(L, &err);
    s->mesh_mem = malloc(lmb_skin_mesh_bytes(&src, counts));
    if (!s->mesh_mem) return luaL_error(L, "v1: out of memory");
    const lmb_skin_mesh *mesh = lmb_skin_mesh_build(s->mesh_mem, &src, counts);
    lua_pop(L, 1); /* the joints: copied into the mesh */
    lmb_skin_target_desc td;
    memset(&td, 0, sizeof td);
    td.vertices = V, td.instances = N;
    td.base[LMB_SKIN_POS] = op, td.base[LMB_SKIN_NRM] = on;
    td.width[LMB_SKIN_POS] = td.width[LMB_SKIN_NRM] = 3;
    td.elements[LMB_SKIN_POS] = td.elements[LMB_SKIN_NRM] = (size_t)(N * V);
    if (lmb_skin_target_validate(&td, &err) != LMB_OK) return v1_fail(L, &err);
    lmb_skin_target_init(&s->target, &td);
    lmb_skin_job j;
    memset(&j, 0, sizeof j);
    j.mesh = mesh, j.palette = pal;
    j.palette_joints = (uint32_t)K, j.palette_instances = (uint32_t)N;
    j.layout = LMB_PALETTE_MAT4, j.target = &s->target;
    j.first = 0, j.count = (uint32_t)N, j.slot = 0;
    if (lmb_skin_job_validate(&j, &err) != LMB_OK) return v1_fail(L, &err);
    lmb_skin_job_task(&j, &s->task);
    s->run = level == LMB_SIMD_AVX512 ? lmb_skin_range_avx512
             : level == LMB_SIMD_AVX2 ? lmb_skin_range_avx2_v1
                                      : lmb_skin_range_portable;
    lua_pushcclosure(L, v1_frame, 1);
    return 1;
}

/** now(): seconds from a monotonic wall clock (threads make os.clock useless). */
static int l_now(lua_State *L) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
    return 1;
}

/* nil and a message, the helpers' way of saying no */
static int fail(lua_State *L, const char *why) {
    lua_pushnil(L);
    lua_pushstring(L, why);
    return 2;
}

#ifdef __linux__
static cpu_set_t start_mask; /* the thread's CPUs before the first pin */
static int have_start_mask;

static int save_start_mask(void) {
    if (!have_start_mask && sched_getaffinity(0, sizeof start_mask, &start_mask) == 0)
        have_start_mask = 1;
    return have_start_mask;
}
#endif

/** cpus(): the CPU numbers this thread may run on now (a list, ascending),
 * or nil and a message where that cannot be asked. */
static int l_cpus(lua_State *L) {
#ifdef __linux__
    if (!save_start_mask()) return fail(L, "sched_getaffinity failed");
    cpu_set_t now;
    if (sched_getaffinity(0, sizeof now, &now) != 0) return fail(L, "sched_getaffinity failed");
    lua_newtable(L);
    lua_Integer n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET((size_t)c, &now)) {
            lua_pushinteger(L, c);
            lua_rawseti(L, -2, ++n);
        }
    return 1;
#else
    return fail(L, "CPU affinity is Linux-only here");
#endif
}

/** pin(cpu): runs the calling thread on CPU `cpu` only; pin() gives it back
 * the CPUs it had before the first pin. Threads started while pinned
 * inherit the pin, so the benchmark only pins single-threaded runs.
 * Returns true, or nil and a message. */
static int l_pin(lua_State *L) {
#ifdef __linux__
    if (!save_start_mask()) return fail(L, "sched_getaffinity failed");
    cpu_set_t m = start_mask;
    if (!lua_isnoneornil(L, 1)) {
        lua_Integer c = luaL_checkinteger(L, 1);
        luaL_argcheck(L, c >= 0 && c < CPU_SETSIZE && CPU_ISSET((size_t)c, &start_mask), 1,
                      "not one of this thread's CPUs");
        CPU_ZERO(&m);
        CPU_SET((size_t)c, &m);
    }
    if (sched_setaffinity(0, sizeof m, &m) != 0) return fail(L, "sched_setaffinity failed");
    lua_pushboolean(L, 1);
    return 1;
#else
    return fail(L, "CPU affinity is Linux-only here");
#endif
}

EXPORT int luaopen_limber_baseline_skin(lua_State *L);

EXPORT int luaopen_limber_baseline_skin(lua_State *L) {
    lua_newtable(L);
    lua_pushcfunction(L, l_naive);
    lua_setfield(L, -2, "naive");
    lua_pushcfunction(L, l_v1);
    lua_setfield(L, -2, "v1");
    lua_pushcfunction(L, l_now);
    lua_setfield(L, -2, "now");
    lua_pushcfunction(L, l_cpus);
    lua_setfield(L, -2, "cpus");
    lua_pushcfunction(L, l_pin);
    lua_setfield(L, -2, "pin");
    return 1;
}
