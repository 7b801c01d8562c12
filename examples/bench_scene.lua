-- Benchmark of limber.scene's incremental update against full recomputation
-- and a dirty-flag recursive scene graph with child lists, in one run.
--
--   lua5.4 examples/bench_scene.lua [--json] [--nodes N] [--seed S]
--
-- Scene: N nodes (default 100,000), a random forest of depth <= 12, 70% leaves,
-- 10% of the nodes hung on a slot of a parent that has a slot table. Per frame,
-- k nodes change their translation, then the scene is updated and the world
-- matrix of every changed leaf is read as a renderer would: copied into an
-- instance buffer with one batched call (`scene:gather`; the naive and
-- dirty-flag versions read the same way). Reading them one by one from Lua
-- (`scene:world(id, out)`) is measured too, for limber and the naive version.
-- Figures are the median CPU time of a frame. "fresh" frames change different
-- random nodes every frame; "cached" frames change the same nodes as the
-- frame before.
package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local C = require "common" -- finds limber for this Lua: the LuaRocks tree or the CMake build
local scene = require "limber.scene"
local core = require "limber.core"
-- the raw world-matrix calls of the naive baselines (not limber's API)
local baseline = require "limber.baseline_hierarchy"
local compute, raw_pass = baseline.compute, baseline.pass

local args = { json = false, nodes = 100000, seed = 12345 }
do
  local i = 1
  while i <= #arg do
    local a = arg[i]
    if a == "--json" then args.json = true
    elseif a == "--nodes" then args.nodes = tonumber(arg[i + 1]) i = i + 1
    elseif a == "--seed" then args.seed = tonumber(arg[i + 1]) i = i + 1
    else error("unknown argument " .. a) end
    i = i + 1
  end
end

local N = math.floor(args.nodes)
math.randomseed(args.seed)
local clock = os.clock

-- ---- the random forest ------------------------------------------------------

local MAX_DEPTH = 12
local n_internal = math.floor(N * 0.3)
local n_roots = math.max(1, math.floor(n_internal / 60))
local parent, depth, has_slots, slot_of, srt = {}, {}, {}, {}, {}
local internal_has_child = {}
for i = 1, n_internal do
  if i <= n_roots then
    parent[i], depth[i] = 0, 1
  else
    local p
    repeat p = math.random(1, i - 1) until depth[p] <= MAX_DEPTH - 2
    parent[i], depth[i] = p, depth[p] + 1
    internal_has_child[p] = true
  end
  has_slots[i] = math.random() < 0.2
end
local leafless = {}
for i = 1, n_internal do
  if not internal_has_child[i] then leafless[#leafless + 1] = i end
end
for i = n_internal + 1, N do
  local k = i - n_internal
  local p = leafless[k] or math.random(1, n_internal)
  parent[i], depth[i] = p, depth[p] + 1
end
local slot_names = { "a", "b", "c", "d" }
local on_slots = 0
for i = 1, N do
  local p = parent[i]
  if p ~= 0 and has_slots[p] and math.random() < 0.5 then
    slot_of[i] = slot_names[math.random(4)]
    on_slots = on_slots + 1
  end
  srt[i] = { math.random() - 0.5, math.random() - 0.5, math.random() - 0.5 }
end
local max_depth = 0
for i = 1, N do max_depth = math.max(max_depth, depth[i]) end

local slots = scene.slots({
  a = { translation = { 0, 1, 0 } },
  b = { translation = { 1, 0, 0 }, rotation = { 0, 0.7071068, 0, 0.7071068 } },
  c = { translation = { 0, 0, 1 }, scale = { 0.5, 0.5, 0.5 } },
  d = { translation = { -1, 0, 0 } },
})

-- ---- limber.scene --------------------------------------------------------------

local sc = scene.new({ capacity = N })
local t0 = clock()
for i = 1, N do
  local id = sc:create({ parent = parent[i] ~= 0 and parent[i] or nil, slot = slot_of[i],
                         translation = srt[i], slots = has_slots[i] and slots or nil })
  assert(id == i)
end
sc:update()
local build_ms = (clock() - t0) * 1e3
local leaves = 0
for i = 1, N do
  if sc:child_count(i) == 0 then leaves = leaves + 1 end
  sc:world(i)
end

local is_leaf = {}
for i = 1, N do is_leaf[i] = sc:child_count(i) == 0 end

-- Precomputed change sets (not timed): sets[f] = array of k ids, lists[f] =
-- the leaves among them (what the renderer reads).
local function random_sets(k, frames)
  local sets, lists = {}, {}
  for f = 1, frames do
    local s, seen, l = {}, {}, {}
    while #s < k do
      local id = math.random(1, N)
      if not seen[id] then
        seen[id], s[#s + 1] = true, id
        if is_leaf[id] then l[#l + 1] = id end
      end
    end
    sets[f], lists[f] = s, l
  end
  return sets, lists
end

local function median(t)
  table.sort(t)
  local n = #t
  local h = math.floor(n / 2)
  if n % 2 == 1 then return t[h + 1] end
  return (t[h] + t[h + 1]) / 2
end

local out = {}
local gather_buf = core.buffer("f32", 16, 20000)

-- One limber frame: k translations, update, every changed leaf's world into
-- the instance buffer (leaves computed on demand).
local function limber_frame(set, list, f)
  local x = f * 1e-3
  for j = 1, #set do sc:set_translation(set[j], x, 0.5, -0.5) end
  sc:update()
  sc:gather(list, #list, gather_buf)
end

-- The same frame reading the leaves one by one from Lua.
local function limber_frame_per_node(set, f)
  local x = f * 1e-3
  for j = 1, #set do sc:set_translation(set[j], x, 0.5, -0.5) end
  sc:update()
  for j = 1, #set do
    local id = set[j]
    if is_leaf[id] then sc:world(id, out) end
  end
end

local function frames_for(k)
  if k == 0 then return 300 elseif k <= 100 then return 200 elseif k <= 1000 then return 60 end
  return 15
end

local function bench_limber(k, cached)
  local frames = frames_for(k)
  local sets, lists = random_sets(k, cached and 1 or frames + 3)
  local times = {}
  for f = 1, frames + 3 do
    local set, list = sets[cached and 1 or f], lists[cached and 1 or f]
    local s = clock()
    limber_frame(set, list, f)
    local dt = clock() - s
    if f > 3 then times[#times + 1] = dt * 1e3 end
  end
  return median(times)
end

-- Where a limber frame goes at k (fresh sets): translations, update, reads.
local function bench_split(k)
  local frames = 40
  local sets, lists = random_sets(k, frames + 1)
  local ts, tu, tr = {}, {}, {}
  for f = 1, frames + 1 do
    local set = sets[f]
    local a = clock()
    for j = 1, #set do sc:set_translation(set[j], f * 1e-3, 0.5, -0.5) end
    local b = clock()
    sc:update()
    local c = clock()
    sc:gather(lists[f], #lists[f], gather_buf)
    local d = clock()
    if f > 1 then
      ts[#ts + 1], tu[#tu + 1], tr[#tr + 1] = (b - a) * 1e3, (c - b) * 1e3, (d - c) * 1e3
    end
  end
  return median(ts), median(tu), median(tr), sc:stats().pass
end

-- k=1000 fresh frames with the leaves read one by one from Lua.
local function bench_per_node(k, frames)
  local sets = random_sets(k, frames + 1)
  local times = {}
  for f = 1, frames + 1 do
    local s = clock()
    limber_frame_per_node(sets[f], f)
    if f > 1 then times[#times + 1] = (clock() - s) * 1e3 end
  end
  return median(times)
end

-- ---- naive full recomputation --------------------------------------------------
-- (a) Lua loop over every node calling the same C math (baseline.compute:
--     base = parent world x slot, world = base x T*R*S); ids are in parent-first
--     order here; the changed leaves read with the same gather call (or one by
--     one, to compare with limber's per-node reads). (b) the same in plain Lua
--     tables. (c) one C call over all ids.

local all_ids = {}
for i = 1, N do all_ids[i] = i end

local function bench_full_lua_c(frames, per_node)
  local times, loop = {}, {}
  for f = 1, frames do
    local sets, lists = random_sets(1000, 1)
    local set, l = sets[1], lists[1]
    local s = clock()
    for j = 1, #set do sc:set_translation(set[j], f * 1e-3, 0.5, -0.5) end
    local pass = (per_node and 1000000 or 3000000) + f
    local a = clock()
    for id = 1, N do compute(sc, id, pass) end
    local b = clock()
    if per_node then
      for j = 1, #l do sc:world(l[j], out) end
    else
      sc:gather(l, #l, gather_buf)
    end
    times[#times + 1] = (clock() - s) * 1e3
    loop[#loop + 1] = (b - a) * 1e3
  end
  return median(times), median(loop)
end

local function bench_full_one_c_call(frames)
  local times = {}
  for f = 1, frames do
    local s = clock()
    raw_pass(sc, all_ids, N, 2000000 + f)
    times[#times + 1] = (clock() - s) * 1e3
  end
  return median(times)
end

local function mul(a, b, o)
  for c = 0, 3 do
    local b0, b1, b2, b3 = b[c * 4 + 1], b[c * 4 + 2], b[c * 4 + 3], b[c * 4 + 4]
    for r = 1, 4 do
      o[c * 4 + r] = a[r] * b0 + a[4 + r] * b1 + a[8 + r] * b2 + a[12 + r] * b3
    end
  end
  return o
end

local function bench_full_plain_lua(frames)
  local I = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1 }
  local slot_m = {}
  for _, name in ipairs(slot_names) do slot_m[name] = slots:matrix(slots:find(name)) end
  local world, base, loc = {}, {}, {}
  for i = 1, N do
    world[i], base[i] = {}, {}
    loc[i] = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, srt[i][1], srt[i][2], srt[i][3], 1 }
  end
  local times = {}
  for _ = 1, frames do
    local s = clock()
    for i = 1, N do
      local p = parent[i]
      local pw = p == 0 and I or world[p]
      local sl = slot_of[i]
      local b = sl and mul(pw, slot_m[sl], base[i]) or pw
      mul(b, loc[i], world[i])
    end
    times[#times + 1] = (clock() - s) * 1e3
  end
  return median(times)
end

-- ---- dirty-flag recursive scene graph with child lists ---------------------------
-- The classic pattern (seeds/dirty-flag-pattern): setTransform marks the node
-- dirty; each frame a recursive walk from the roots recomputes a node when it
-- or an ancestor is dirty. Same C math per recomputed node (its own storage).

local df_store = scene.new({ capacity = N })
local children, roots = {}, {}
for i = 1, N do children[i] = {} end
for i = 1, N do
  local p = parent[i]
  if p == 0 then roots[#roots + 1] = i else local c = children[p] c[#c + 1] = i end
  local id = df_store:create({ parent = p ~= 0 and p or nil, slot = slot_of[i],
                               translation = srt[i], slots = has_slots[i] and slots or nil })
  assert(id == i)
end
local df_dirty = {}
for i = 1, N do df_dirty[i] = true end
local df_pass = 0

local function df_render(id, dirty)
  dirty = dirty or df_dirty[id]
  if dirty then
    compute(df_store, id, df_pass)
    df_dirty[id] = false
  end
  local c = children[id]
  for j = 1, #c do df_render(c[j], dirty) end
end

local function df_frame(set, list, f)
  for j = 1, #set do
    local id = set[j]
    df_store:set_translation(id, f * 1e-3, 0.5, -0.5)
    df_dirty[id] = true
  end
  df_pass = df_pass + 1
  for r = 1, #roots do df_render(roots[r], false) end
  df_store:gather(list, #list, gather_buf)
end
df_frame({}, {}, 0)

local function bench_dirty_flag(k)
  local frames = math.min(frames_for(k), 30)
  local sets, lists = random_sets(k, frames + 2)
  local times = {}
  for f = 1, frames + 2 do
    local s = clock()
    df_frame(sets[f], lists[f], f)
    if f > 2 then times[#times + 1] = (clock() - s) * 1e3 end
  end
  return median(times)
end

-- Check once that both agree with a full recomputation (not timed).
do
  local sets, lists = random_sets(500, 1)
  limber_frame(sets[1], lists[1], 7)
  df_frame(sets[1], lists[1], 7)
  local a, b = {}, {}
  local worst = 0
  for i = 1, N, 97 do
    sc:world(i, a)
    df_store:world(i, b)
    for c = 1, 16 do worst = math.max(worst, math.abs(a[c] - b[c])) end
  end
  assert(worst < 1e-3, "limber and the dirty-flag graph disagree: " .. worst)
end

-- ---- run -------------------------------------------------------------------------

local ks = { 0, 10, 100, 1000, 10000 }
local res = { fresh = {}, cached = {}, dirty = {} }
for _, k in ipairs(ks) do
  res.fresh[k] = bench_limber(k, false)
  res.cached[k] = bench_limber(k, true)
  res.dirty[k] = bench_dirty_flag(k)
end
local split_set, split_update, split_read, split_pass = bench_split(1000)
local per_node_ms = bench_per_node(1000, 40)
local full_lua_c, full_loop = bench_full_lua_c(7)
local full_per_node = bench_full_lua_c(7, true)
local full_one_c = bench_full_one_c_call(10)
local full_plain = bench_full_plain_lua(3)

local function f3(v) return ("%.3f"):format(v) end
print(C.interpreter_line())
print(("limber.scene benchmark: %d nodes (%d leaves = %.0f%%, %d on slots = %.0f%%, %d roots,"
  .. " depth <= %d)")
  :format(N, leaves, 100 * leaves / N, on_slots, 100 * on_slots / N, n_roots, max_depth))
print(("build %d nodes + first update: %.1f ms; simd %s")
  :format(N, build_ms, tostring(core.simd())))
print("median ms per frame (k translations + update + every changed leaf's world into an instance"
  .. " buffer, one gather call):")
print(("%8s %12s %12s %12s %10s")
  :format("k", "limber new", "limber same", "dirty-flag", "dirty/new"))
for _, k in ipairs(ks) do
  print(("%8d %12s %12s %12s %9.1fx"):format(k, f3(res.fresh[k]), f3(res.cached[k]),
    f3(res.dirty[k]), res.dirty[k] / math.max(res.fresh[k], 1e-6)))
end
print(("naive full recomputation, Lua loop + C math per node: %s ms (%.1fx limber k=1000 new)")
  :format(f3(full_lua_c), full_lua_c / res.fresh[1000]))
print(("naive full recomputation, plain Lua matrices:         %s ms (%.1fx)")
  :format(f3(full_plain), full_plain / res.fresh[1000]))
print(("full recomputation, one C call over all %d ids:   %s ms (for reference)")
  :format(N, f3(full_one_c)))
print(("limber k=1000 new, split: %s ms translations + %s ms update (%d nodes in the pass) + %s ms"
  .. " gather (leaves computed on demand)"):format(f3(split_set), f3(split_update), split_pass,
  f3(split_read)))
print(("  update + on-demand leaves %s ms vs the naive full loop alone %s ms: %.1fx")
  :format(f3(split_update + split_read), f3(full_loop), full_loop / (split_update + split_read)))
print(("k=1000 new with the leaves read one by one from Lua (scene:world(id, out)): limber %s ms,"
  .. " naive full %s ms: %.1fx")
  :format(f3(per_node_ms), f3(full_per_node), full_per_node / per_node_ms))
local slope_new = (res.fresh[10000] - res.fresh[100]) / 9900 * 1e3
local slope_cached = (res.cached[10000] - res.cached[100]) / 9900 * 1e3
print(("slope per changed node (k=100 -> 10,000): new %.3f us, same %.3f us"):format(slope_new,
  slope_cached))
local targets = {
  { "k=0 <= 0.05 ms", res.fresh[0] <= 0.05 },
  { "k=1000 same nodes <= 1.0 ms", res.cached[1000] <= 1.0 },
  { "k=1000 new nodes <= 2.0 ms", res.fresh[1000] <= 2.0 },
  { ">= 20x faster than naive full at k=1000", full_lua_c / res.fresh[1000] >= 20 },
}
local beats = true
for _, k in ipairs(ks) do beats = beats and res.fresh[k] < res.dirty[k] end
targets[#targets + 1] = { "faster than dirty-flag at every k", beats }
for _, t in ipairs(targets) do
  print(("target %-42s %s"):format(t[1], t[2] and "met" or "MISSED"))
end

if args.json then
  print(("{\"nodes\": %d, \"full_ms\": %s, \"full_plain_lua_ms\": %s, \"full_one_c_call_ms\": %s, "
    .. "\"dirty_flag_ms_k1000\": %s, \"k0_ms\": %s, \"k10_ms\": %s, \"k100_ms\": %s, "
    .. "\"k1000_ms\": %s, "
    .. "\"k10000_ms\": %s, \"k1000_cached_ms\": %s, \"slope_us_per_node\": %.4f, "
    .. "\"k1000_update_ms\": %s, \"k1000_reads_ms\": %s, \"full_loop_ms\": %s, "
    .. "\"k1000_per_node_ms\": %s, \"full_per_node_ms\": %s, \"lua\": %s}")
    :format(N, f3(full_lua_c), f3(full_plain), f3(full_one_c), f3(res.dirty[1000]),
      f3(res.fresh[0]),
      f3(res.fresh[10]), f3(res.fresh[100]), f3(res.fresh[1000]), f3(res.fresh[10000]),
      f3(res.cached[1000]), slope_new, f3(split_update), f3(split_read), f3(full_loop),
      f3(per_node_ms), f3(full_per_node), C.json_string(C.lua)))
end
