/* two_states.c: limber in several lua_States at once (issue 13, items 8
 * and 9). Run by spec/states_spec.lua.
 *
 * Usage: two_states LUA_PATH LUA_CPATH race [frames]
 *   One state on the main thread computes reference bytes of a frame
 *   (crowd sampling, local-to-model, palettes, skinning, a frame plan with
 *   two layers and LOD on the worker pool, a clip packed with its measures
 *   shared out among the pool's threads) at each SIMD
 *   level. Then two threads each open their own state and run frames
 *   concurrently, each changing its own SIMD level and thread count every
 *   frame; every frame's bytes must equal the reference for the level that
 *   state asked for. A process-wide level lets one state's setting leak
 *   into the other's frame (a mismatch, and a race ThreadSanitizer sees).
 *
 * Usage: two_states LUA_PATH LUA_CPATH late [states]
 *   Opens and closes states one after the other. Each holds an object
 *   created before require "limber" whose __gc skins with workers (so it
 *   runs after the worker pool's own __gc at lua_close; on Lua 5.1 and
 *   LuaJIT, which unload the module first, one created after it, whose
 *   __gc runs first), and one stored in the registry. After every
 *   lua_close the process must have as many threads as before (counted in
 *   /proc/self/task), and the late skin's result must equal the one
 *   computed while the state was open.
 *
 * Prints one summary line; exits 1 on any mismatch or thread left. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#ifndef LUA_OK
#define LUA_OK 0 /* Lua 5.1 */
#endif

static const char *lpath, *lcpath;

/* The workload: returns frame(level, threads) -> bytes. Deterministic: its
 * own random generator, players sought to fixed times every frame. */
static const char *const workload =
    "local limber = require 'limber'\n"
    "local anim = require 'limber.anim'\n"
    "local sk = require 'limber.skinning'\n"
    "local core = limber.core\n"
    "local seed = 7\n"
    "local function rnd() seed = (seed * 1103515245 + 12345) % 2147483648; return seed / "
    "2147483648 end\n"
    "local J, N, V = 16, 24, 2500\n"
    "local joints = {}\n"
    "for j = 1, J do\n"
    "  joints[j] = { name = 'j' .. j, parent = j > 1 and ('j' .. (1 + math.floor(rnd() * (j - "
    "1)))) or nil,\n"
    "                translation = { rnd(), rnd(), rnd() } }\n"
    "end\n"
    "local skel = limber.skeleton(joints)\n"
    "local tracks = {}\n"
    "for j = 1, J do\n"
    "  local r, t = {}, {}\n"
    "  for _ = 1, 5 do\n"
    "    r[#r + 1], r[#r + 2], r[#r + 3], r[#r + 4] = rnd() - 0.5, rnd() - 0.5, rnd() - 0.5, 1\n"
    "    t[#t + 1], t[#t + 2], t[#t + 3] = rnd(), rnd(), rnd()\n"
    "  end\n"
    "  tracks[#tracks + 1] = { joint = j, path = 'rotation', times = { 0, 0.5, 1, 1.5, 2 }, values "
    "= r }\n"
    "  tracks[#tracks + 1] = { joint = j, path = 'translation', times = { 0, 0.5, 1, 1.5, 2 }, "
    "values = t }\n"
    "end\n"
    "local clip = anim.clip({ tracks = tracks }, skel)\n"
    "local pose = limber.pose(skel, N)\n"
    "local crowd = anim.crowd(pose, { clip })\n"
    "for i = 1, N do crowd:player(i):play(clip) end\n"
    "local pal = limber.palette(pose)\n"
    "local pos, nrm, jnt, wgt = {}, {}, {}, {}\n"
    "for _ = 1, V do\n"
    "  for _ = 1, 3 do pos[#pos + 1] = rnd() * 4 - 2 end\n"
    "  nrm[#nrm + 1], nrm[#nrm + 2], nrm[#nrm + 3] = rnd() + 0.1, rnd() - 0.5, rnd() - 0.5\n"
    "  local k = 1 + math.floor(rnd() * 4)\n"
    "  for q = 1, 4 do jnt[#jnt + 1] = 1 + math.floor(rnd() * J); wgt[#wgt + 1] = q <= k and rnd() "
    "+ 0.05 or 0 end\n"
    "end\n"
    "local mesh = sk.mesh { positions = pos, normals = nrm, joints = jnt, weights = wgt }\n"
    "local target = sk.target { mesh = mesh, instances = N, positions = true, normals = true }\n"
    "local ppose = limber.pose(skel, N)\n"
    "local ppal = limber.palette(ppose, { layout = 'mat3x4' })\n"
    "local mask = {}\n"
    "for j = 1, J do mask[j] = j % 3 == 0 and 0 or (j % 3 == 1 and 1 or 0.5) end\n"
    "local plan = limber.plan { pose = ppose, clips = { clip }, palettes = { ppal }, slots = { 2 "
    "},\n"
    "  layers = { { sources = 2 }, { mask = mask } } }\n"
    "for i = 1, N do\n"
    "  plan:set_weight(i, 1, 2, 0.25 + rnd())\n"
    "  plan:set_layer_weight(i, 2, i % 2 == 0 and 1 or rnd())\n"
    "  plan:set_lod(i, 1 + i % 3)\n"
    "end\n"
    "local ltracks = {}\n"
    "for j = 1, J do\n"
    "  local r, t, tm = {}, {}, {}\n"
    "  for k = 1, 40 do\n"
    "    tm[k] = (k - 1) / 20\n"
    "    r[#r + 1], r[#r + 2], r[#r + 3], r[#r + 4] = 0.2 * rnd() - 0.1, 0.2 * rnd() - 0.1, 0.1, "
    "1\n"
    "    t[#t + 1], t[#t + 2], t[#t + 3] = 0.1 * rnd(), 0.1 * rnd(), 0.1 * rnd()\n"
    "  end\n"
    "  ltracks[#ltracks + 1] = { joint = j, path = 'rotation', times = tm, values = r }\n"
    "  ltracks[#ltracks + 1] = { joint = j, path = 'translation', times = tm, values = t }\n"
    "end\n"
    "local exact = anim.clip({ tracks = ltracks })\n"
    "-- a long grid (2,100 keys: 8,397 positions), whose candidate streams' checks\n"
    "-- the pool's threads share, packed once per state (ThreadSanitizer's race run\n"
    "-- sets LIMBER_LONG_PACK)\n"
    "local long = ''\n"
    "if os.getenv('LIMBER_LONG_PACK') then\n"
    "  local lr, lt = {}, {}\n"
    "  for k = 1, 2100 do\n"
    "    lt[k] = (k - 1) / 60\n"
    "    local a = math.sin(k * 0.05) + 0.01 * rnd()\n"
    "    lr[#lr + 1], lr[#lr + 2], lr[#lr + 3], lr[#lr + 4] = math.sin(a / 2), 0, 0, math.cos(a / "
    "2)\n"
    "  end\n"
    "  local lclip = anim.clip({ tracks = { { joint = 1, path = 'rotation', times = lt, values = "
    "lr } } })\n"
    "  long = require('limber.snapshot').save(assert(anim.pack(lclip, skel, { tolerance = 1e-3 "
    "})))\n"
    "end\n"
    "local frame_no = 0\n"
    "return function(level, threads)\n"
    "  core.simd(level)\n"
    "  sk.threads(threads)\n"
    "  frame_no = frame_no + 1\n"
    "  for i = 1, N do crowd:player(i):seek(0.05 * i) end\n"
    "  crowd:advance(0)\n"
    "  crowd:evaluate()\n"
    "  pose:local_to_model()\n"
    "  pal:update()\n"
    "  sk.run(mesh, pal, target)\n"
    "  for i = 1, N do\n"
    "    plan:play(i, 1, 1, 1, 0.05 * i)\n"
    "    plan:play(i, 1, 2, 1, 0.07 * i)\n"
    "    plan:play(i, 2, 1, 1, 0.03 * i)\n"
    "  end\n"
    "  plan:invalidate()\n"
    "  for _ = 1, 4 do plan:run(0) end -- every LOD phase: every instance evaluated\n"
    "  -- the compressor's measures share out their sample times among the threads\n"
    "  local packed = assert(anim.pack(exact, skel, { tolerance = 1e-3 }))\n"
    "  local _, _, used = core.simd()\n"
    "  return used .. '|' .. target:position_buffer():bytes() .. target:normal_buffer():bytes() .. "
    "pal:matrix_buffer():bytes() .. ppal:matrix_buffer():bytes() .. "
    "require('limber.snapshot').save(packed) .. long\n"
    "end\n";

static const char *const levels[3] = {"portable", "avx2", "avx512"};

static lua_State *open_state(void) {
    lua_State *L = luaL_newstate();
    if (!L) return NULL;
    luaL_openlibs(L);
    lua_getglobal(L, "package");
    lua_pushstring(L, lpath);
    lua_setfield(L, -2, "path");
    lua_pushstring(L, lcpath);
    lua_setfield(L, -2, "cpath");
    lua_pop(L, 1);
    return L;
}

static void fail(lua_State *L, const char *what) {
    fprintf(stderr, "two_states: %s: %s\n", what, lua_tostring(L, -1));
    exit(1);
}

/* Pushes the frame function of a new workload. */
static void load_workload(lua_State *L) {
    if (luaL_loadstring(L, workload) != LUA_OK) fail(L, "load");
    if (lua_pcall(L, 0, 1, 0) != LUA_OK) fail(L, "workload");
}

/* Runs one frame (frame function on top); returns the bytes (on the stack). */
static const char *run_frame(lua_State *L, int level, int threads, size_t *len) {
    lua_pushvalue(L, -1);
    lua_pushstring(L, levels[level]);
    lua_pushinteger(L, threads);
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) fail(L, "frame");
    return lua_tolstring(L, -1, len);
}

static char *ref[3];
static size_t ref_len[3];

typedef struct racer {
    int id, frames;
    long mismatches;
} racer;

static void *race_main(void *arg) {
    racer *r = (racer *)arg;
    lua_State *L = open_state();
    if (!L) return NULL;
    load_workload(L);
    for (int f = 0; f < r->frames; f++) {
        int level = (f + r->id) % 3, threads = 1 + (f + 2 * r->id) % 3;
        size_t len;
        const char *b = run_frame(L, level, threads, &len);
        if (len != ref_len[level] || memcmp(b, ref[level], len) != 0) r->mismatches++;
        lua_pop(L, 1);
    }
    lua_close(L);
    return NULL;
}

static int race(int frames) {
    lua_State *L = open_state();
    if (!L) return 2;
    load_workload(L);
    int distinct = 0;
    for (int level = 0; level < 3; level++) {
        size_t len;
        const char *b = run_frame(L, level, 1, &len);
        ref[level] = malloc(len);
        if (!ref[level]) return 2;
        memcpy(ref[level], b, len);
        ref_len[level] = len;
        if (level > 0 && (len != ref_len[0] || memcmp(b, ref[0], len) != 0)) distinct = 1;
        lua_pop(L, 1);
    }
    lua_close(L);
    racer r[2] = {{0, frames, 0}, {1, frames, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, race_main, &r[i]) != 0) return 2;
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int level = 0; level < 3; level++)
        free(ref[level]);
    printf("two_states race: 2 states x %d frames: mismatches %ld (levels give %s bytes)\n", frames,
           r[0].mismatches + r[1].mismatches, distinct ? "different" : "the same");
    return r[0].mismatches + r[1].mismatches ? 1 : 0;
}

/* Threads of this process now. */
static int count_threads(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* A joined thread can stay listed a moment: count until stable at `want`. */
static int settle_threads(int want) {
    int n = count_threads();
    for (int k = 0; k < 100 && n != want; k++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        n = count_threads();
    }
    return n;
}

static const char *const late_chunk =
    /* an object whose finalizer calls f(t): a table with __gc from Lua 5.2, a
     * userdata from newproxy on 5.1 and LuaJIT (whose __gc is for userdata only) */
    "local function finalized(f, t)\n"
    "  if not newproxy then return setmetatable(t, { __gc = f }) end\n"
    "  local p = newproxy(true)\n"
    "  getmetatable(p).__gc = function() f(t) end\n"
    "  return p\n"
    "end\n"
    "local function late_skin(j)\n"
    "  j.sk.threads(4)\n"
    "  j.sk.run(j.mesh, j.pal, j.target)\n"
    "  report('late', j.target:position_buffer():bytes())\n"
    "end\n"
    "local job = {}\n"
    /* from Lua 5.2: a finalizer set before the module's pool exists, which runs
     * after the pool's __gc. Lua 5.1 and LuaJIT unload a C library (the
     * handle's __gc) before they finalize anything made before it was
     * loaded, so no finalizer of theirs can call limber after the pool's
     * __gc: there it is set after require and runs first at lua_close */
    "local late = not newproxy and finalized(late_skin, job)\n"
    "local limber = require 'limber'\n"
    "local sk = require 'limber.skinning'\n"
    "late = late or finalized(late_skin, job)\n"
    "local skel = limber.skeleton({ { name = 'a' }, { name = 'b', parent = 'a', translation = { 1, "
    "2, 3 } } })\n"
    "local pose = limber.pose(skel, 8)\n"
    "for i = 1, 8 do pose:set_trs(i, 2, { i, 0, 0 }) end\n"
    "pose:local_to_model()\n"
    "local pal = limber.palette(pose)\n"
    "pal:update()\n"
    "local V = 3000\n"
    "local pos, jnt, wgt = {}, {}, {}\n"
    "for v = 1, V do\n"
    "  pos[#pos + 1], pos[#pos + 2], pos[#pos + 3] = v, -v, v * 0.5\n"
    "  jnt[#jnt + 1], jnt[#jnt + 2], jnt[#jnt + 3], jnt[#jnt + 4] = 1, 2, 0, 0\n"
    "  wgt[#wgt + 1], wgt[#wgt + 2], wgt[#wgt + 3], wgt[#wgt + 4] = 0.25, 0.75, 0, 0\n"
    "end\n"
    "local mesh = sk.mesh { positions = pos, joints = jnt, weights = wgt }\n"
    "local target = sk.target { mesh = mesh, instances = 8, positions = true }\n"
    "sk.threads(4)\n"
    "sk.run(mesh, pal, target)\n"
    "report('open', target:position_buffer():bytes())\n"
    "target:position_buffer():set(1, { 0, 0, 0 })\n"
    "job.sk, job.mesh, job.pal, job.target = sk, mesh, pal, target\n"
    /* a second one, reachable from the registry until the state closes */
    "local keep = finalized(function() sk.run(mesh, pal, target) end, {})\n"
    "debug.getregistry()['two_states.keep'] = keep\n"
    "assert(late)\n";

/* Bytes the late chunk reports through report(name, bytes): [0] while
 * open, [1] from the finalizer that ran at lua_close (after the pool's,
 * from Lua 5.2). */
static char *reported[2];
static size_t reported_len[2];

static int l_report(lua_State *L) {
    int which = strcmp(luaL_checkstring(L, 1), "late") == 0;
    size_t len;
    const char *b = luaL_checklstring(L, 2, &len);
    free(reported[which]);
    reported[which] = malloc(len ? len : 1);
    if (!reported[which]) return luaL_error(L, "out of memory");
    memcpy(reported[which], b, len);
    reported_len[which] = len;
    return 0;
}

/* Runs the late chunk in a new state and closes it; the finalizer's skin
 * must equal the one made while the state was open. */
static int late_state(int *bad_result) {
    lua_State *L = open_state();
    if (!L) return 2;
    lua_register(L, "report", l_report);
    if (luaL_loadstring(L, late_chunk) != LUA_OK) fail(L, "load late");
    if (lua_pcall(L, 0, 0, 0) != LUA_OK) fail(L, "late chunk");
    lua_close(L);
    if (!reported[0] || !reported[1] || reported_len[0] != reported_len[1] ||
        memcmp(reported[0], reported[1], reported_len[0]) != 0)
        (*bad_result)++;
    for (int k = 0; k < 2; k++) {
        free(reported[k]);
        reported[k] = NULL;
    }
    return 0;
}

static int late(int states) {
    int bad = 0;
    /* a first state loads the module and lets runtimes start their own
     * threads (ThreadSanitizer has one): count from there */
    if (late_state(&bad) != 0) return 2;
    int before = count_threads(), worst = before;
    for (int k = 0; k < states; k++) {
        if (late_state(&bad) != 0) return 2;
        int now = settle_threads(before);
        if (now > worst) worst = now;
    }
    int after = settle_threads(before);
    printf("two_states late: %d states: threads before %d, after %d, most after a close %d, "
           "late skins wrong %d\n",
           states, before, after, worst, bad);
    return after != before || worst != before || bad ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: two_states LUA_PATH LUA_CPATH race|late [n]\n");
        return 2;
    }
    lpath = argv[1];
    lcpath = argv[2];
    int n = argc > 4 ? atoi(argv[4]) : 0;
    if (strcmp(argv[3], "race") == 0) return race(n > 0 ? n : 60);
    if (strcmp(argv[3], "late") == 0) return late(n > 0 ? n : 6);
    fprintf(stderr, "two_states: unknown mode %s\n", argv[3]);
    return 2;
}
