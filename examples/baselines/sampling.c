/* baseline.c: naive key-lookup samplers for examples/bench_sampling.lua,
 * built as the extra module limber.baseline_sampling (build/limber/baseline_sampling.so),
 * never installed. Same data and interpolation as limber's kernel; only
 * the key lookup differs:
 *   "linear":  the Hands-on book's starting point: walk backwards from the
 *              last key until times[k] <= t (O(keys) per track);
 *   "bsearch": binary search over the whole key range per track;
 *   "table":   the Hands-on book's fast track: a table sampled at a fixed
 *              rate maps time to a key index (then a short forward walk).
 * Data comes in as limber Buffers' borrowed pointers (buf:ptr()). */
#include "lcompat.h"
#include <math.h>
#include <stdint.h>

static uint32_t find_linear(const float *tm, uint32_t n, float t) {
    for (uint32_t k = n - 1; k > 0; k--)
        if (tm[k] <= t) return k;
    return 0;
}

static uint32_t find_bsearch(const float *tm, uint32_t n, float t) {
    uint32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        if (tm[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

typedef struct table {
    const uint32_t *idx; /* m entries per track */
    uint32_t m;
    float rate;
} table;

static uint32_t find_table(const float *tm, uint32_t n, float t, const uint32_t *idx,
                           const table *tb) {
    uint32_t i = (uint32_t)(t * tb->rate);
    if (i >= tb->m) i = tb->m - 1;
    uint32_t k = idx[i];
    while (k + 2 < n && tm[k + 1] <= t)
        k++;
    return k;
}

static void sample(const float *tm, const float *v, uint32_t n, uint32_t w, float t, int linear,
                   const uint32_t *idx, const table *tb, float *out) {
    if (t <= tm[0] || n == 1) {
        for (uint32_t m = 0; m < w; m++)
            out[m] = v[m];
        return;
    }
    if (t >= tm[n - 1]) {
        for (uint32_t m = 0; m < w; m++)
            out[m] = v[(n - 1) * w + m];
        return;
    }
    uint32_t k = idx      ? find_table(tm, n, t, idx, tb)
                 : linear ? find_linear(tm, n, t)
                          : find_bsearch(tm, n, t);
    float s = (t - tm[k]) / (tm[k + 1] - tm[k]);
    const float *a = v + k * w, *b = a + w;
    if (w == 3) {
        for (uint32_t m = 0; m < 3; m++)
            out[m] = a[m] + (b[m] - a[m]) * s;
        return;
    }
    float dot = a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3], sign = 1.0f;
    if (dot < 0.0f) dot = -dot, sign = -1.0f;
    float wa, wb;
    if (dot > 0.9995f) {
        wa = 1.0f - s, wb = s * sign;
    } else {
        float th = acosf(dot), is = 1.0f / sinf(th);
        wa = sinf((1.0f - s) * th) * is, wb = sinf(s * th) * is * sign;
    }
    float q[4], l2 = 0.0f;
    for (int m = 0; m < 4; m++)
        q[m] = wa * a[m] + wb * b[m], l2 += q[m] * q[m];
    float inv = 1.0f / sqrtf(l2);
    for (int m = 0; m < 4; m++)
        out[m] = q[m] * inv;
}

/** baseline.sample(mode, times, tvals, rvals, svals, keys, joints, inst_times, count, out)
 * times: joints*3 tracks x keys floats (track order T, R, S per joint);
 * tvals/svals: joints x keys x 3; rvals: joints x keys x 4; inst_times:
 * count clip times (already wrapped); out: count x joints x 10 floats. */
static int l_sample(lua_State *L) {
    const char *mode = luaL_checkstring(L, 1);
    const float *times = (const float *)lua_touserdata(L, 2);
    const float *tv = (const float *)lua_touserdata(L, 3);
    const float *rv = (const float *)lua_touserdata(L, 4);
    const float *sv = (const float *)lua_touserdata(L, 5);
    uint32_t keys = (uint32_t)luaL_checkinteger(L, 6), joints = (uint32_t)luaL_checkinteger(L, 7);
    const float *it = (const float *)lua_touserdata(L, 8);
    uint32_t count = (uint32_t)luaL_checkinteger(L, 9);
    float *out = (float *)lua_touserdata(L, 10);
    luaL_argcheck(L, times && tv && rv && sv && it && out, 2, "pointers expected");
    int linear = mode[0] == 'l';
    table tb = {NULL, 0, 0.0f};
    if (mode[0] == 't') {
        tb.idx = (const uint32_t *)lua_touserdata(L, 11);
        tb.m = (uint32_t)luaL_checkinteger(L, 12);
        tb.rate = (float)luaL_checknumber(L, 13);
        luaL_argcheck(L, tb.idx && tb.m > 0, 11, "table expected");
    }
    for (uint32_t i = 0; i < count; i++) {
        float t = it[i];
        for (uint32_t j = 0; j < joints; j++) {
            float *o = out + ((size_t)i * joints + j) * 10;
            const float *tm = times + (size_t)j * 3 * keys;
            const uint32_t *ix = tb.idx ? tb.idx + (size_t)j * 3 * tb.m : NULL;
            sample(tm, tv + (size_t)j * keys * 3, keys, 3, t, linear, ix, &tb, o);
            sample(tm + keys, rv + (size_t)j * keys * 4, keys, 4, t, linear, ix ? ix + tb.m : NULL,
                   &tb, o + 3);
            sample(tm + 2 * (size_t)keys, sv + (size_t)j * keys * 3, keys, 3, t, linear,
                   ix ? ix + 2 * tb.m : NULL, &tb, o + 7);
        }
    }
    return 0;
}

/** baseline.build_table(times, keys, tracks, rate, m, out): out[track * m + i] = the key
 * interval containing time i / rate (m entries per track, u32). */
static int l_build_table(lua_State *L) {
    const float *times = (const float *)lua_touserdata(L, 1);
    uint32_t keys = (uint32_t)luaL_checkinteger(L, 2), tracks = (uint32_t)luaL_checkinteger(L, 3);
    float rate = (float)luaL_checknumber(L, 4);
    uint32_t m = (uint32_t)luaL_checkinteger(L, 5);
    uint32_t *out = (uint32_t *)lua_touserdata(L, 6);
    luaL_argcheck(L, times && out && keys >= 2, 1, "pointers expected");
    for (uint32_t tr = 0; tr < tracks; tr++) {
        const float *tm = times + (size_t)tr * keys;
        for (uint32_t i = 0; i < m; i++) {
            float t = (float)i / rate;
            uint32_t k = find_bsearch(tm, keys, t);
            out[(size_t)tr * m + i] = k > keys - 2 ? keys - 2 : k;
        }
    }
    return 0;
}

__attribute__((visibility("default"))) int luaopen_limber_baseline_sampling(lua_State *L);

__attribute__((visibility("default"))) int luaopen_limber_baseline_sampling(lua_State *L) {
    lua_newtable(L);
    lua_pushcfunction(L, l_sample);
    lua_setfield(L, -2, "sample");
    lua_pushcfunction(L, l_build_table);
    lua_setfield(L, -2, "build_table");
    return 1;
}
