/* skin.c: the naive CPU skinning baseline for examples/bench_skinning.lua
 * (the skinning article's first version, DESIGN section 4): every vertex as
 * four influences, four weighted full 4x4 matrices summed, position and
 * normal transformed by the 4x4 sum, float3 streams in file order. Plain
 * scalar C, compiled like the rest of the project (no SIMD intrinsics).
 * Also a monotonic wall clock for the benchmark and, on Linux, pinning the
 * calling thread to one CPU (to time each CPU of a host alone). Not
 * installed. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif
#include "lcompat.h"
#include <math.h>
#include <stdint.h>
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

/* naive(pos, pos_bytes, nrm, nrm_bytes, joints(u16x4), j_bytes, weights(f32x4), w_bytes,
 *       palette(mat4), pal_bytes, out_pos, op_bytes, out_nrm, on_bytes, V, K, N)
 * skins N instances (palette instance i at i*K*16 floats, outputs at i*V*3). */
static int l_naive(lua_State *L) {
    lua_Integer V = luaL_checkinteger(L, 15), K = luaL_checkinteger(L, 16),
                N = luaL_checkinteger(L, 17);
    const float *pos = ptr_arg(L, 1, (size_t)V * 12);
    const float *nrm = ptr_arg(L, 3, (size_t)V * 12);
    const uint16_t *jnt = ptr_arg(L, 5, (size_t)V * 8);
    const float *wgt = ptr_arg(L, 7, (size_t)V * 16);
    const float *pal = ptr_arg(L, 9, (size_t)(N * K) * 64);
    float *op = ptr_arg(L, 11, (size_t)(N * V) * 12);
    float *on = ptr_arg(L, 13, (size_t)(N * V) * 12);
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
    lua_pushcfunction(L, l_now);
    lua_setfield(L, -2, "now");
    lua_pushcfunction(L, l_cpus);
    lua_setfield(L, -2, "cpus");
    lua_pushcfunction(L, l_pin);
    lua_setfield(L, -2, "pin");
    return 1;
}
