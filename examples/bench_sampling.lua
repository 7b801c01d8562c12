--- Clip sampling benchmark (issue 3): 1000 instances of a 96-joint
-- humanoid, each with its own time; one frame = advance every instance by
-- 1/60 s and sample every joint's T, R and S into the pose batch.
--   case 1: synthetic 10 s clip keyed at 30 Hz
--   case 2: 60 s clip keyed at 120 Hz (7,201 keys per track)
--   case 3: case 2 with a random seek for every instance every frame
-- Both clips key every track on one uniform grid, so they take limber's
-- dense form; the same clips built without it (per-track cursors + binary
-- search) run side by side as "cursor path".
-- Baselines (same data, same interpolation, only the key lookup differs),
-- in C in examples/baselines/sampling.c (module limber.baseline_sampling): a naive
-- backward linear search per track (the Hands-on book's starting point,
-- run on fewer instances and reported per joint), a binary search per
-- track and the book's fixed-rate lookup table (one table per track, at the
-- key rate, then a short forward walk). They are scalar and keep times and
-- values in separate arrays. Also a two-layer blend of all instances.
-- Usage: lua5.4 examples/bench_sampling.lua [--json] [--frames N]
package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local C = require "common" -- finds limber for this Lua: the LuaRocks tree or the CMake build
local limber = require "limber"
local anim = require "limber.anim"
local baseline = require "limber.baseline_sampling"

local JSON = false
local FRAMES = 60
for k, a in ipairs(arg) do
  if a == "--json" then JSON = true end
  if a == "--frames" then FRAMES = tonumber(arg[k + 1]) end
end
local N = 1000
local DT = 1 / 60
local clock = os.clock

-- the 96-joint humanoid and the synthetic clips (shared with bench_clips.lua)
local humanoid = function() return C.sampling_humanoid(limber) end
local synthetic_clip = function(skel, seconds, rate, cursor_only)
  return C.synthetic_clip(limber, skel, seconds, rate, cursor_only)
end

local function stats(samples)
  table.sort(samples)
  return samples[math.floor(#samples / 2) + 1], samples[1]
end

local function time_frames(frames, fn)
  local s = {}
  fn() -- warm up
  for f = 1, frames do
    local t0 = clock()
    fn(f)
    s[f] = (clock() - t0) * 1000
  end
  return stats(s)
end

local skel = humanoid()
local J = skel:joint_count()
assert(J == 96)
local pose = limber.pose(skel, N)

local function run_case(clip, seek)
  local s = anim.sampler(pose, { clip })
  local d = clip:duration()
  for i = 1, N do s:set(i, 1, math.random() * d, true, 1) end
  local seeks = {}
  for f = 1, FRAMES + 1 do
    seeks[f] = {}
    for i = 1, N do seeks[f][i] = math.random() * d end
  end
  if seek then
    -- time only the sampling call; the seeks are set from Lua beforehand
    local samples = {}
    for f = 1, FRAMES + 1 do
      local sk = seeks[f]
      for i = 1, N do s:set_time(i, sk[i]) end
      local t0 = clock()
      s:run()
      samples[f] = (clock() - t0) * 1000
    end
    table.remove(samples, 1)
    return stats(samples)
  end
  return time_frames(FRAMES, function()
    s:advance(DT)
    s:run()
  end)
end

-- Baseline frames: each instance at its own time; "seek" draws new random
-- times (outside the timing), else advances them by 1/60 s (wrapped).
local function run_baseline(data, mode, count, d, seek)
  local times = limber.buffer("f32", 1, count)
  local out = limber.buffer("f32", 10, count * J)
  local tv = {}
  for i = 1, count do tv[i] = math.random() * d end
  local tp, tvp, rvp, svp = data.times:ptr(), data.tv:ptr(), data.rv:ptr(), data.sv:ptr()
  local ip, op = times:ptr(), out:ptr()
  local tab, m, rate
  if mode == "table" then
    rate = data.rate
    m = math.floor(d * rate) + 1
    tab = limber.buffer("u32", 1, m * J * 3)
    baseline.build_table(tp, data.keys, J * 3, rate, m, tab:ptr())
    tab = tab -- keep alive
  end
  local tabp = tab and tab:ptr()
  local frames = mode == "linear" and math.max(5, math.floor(FRAMES / 4)) or FRAMES
  local s = {}
  for f = 1, frames + 1 do
    for i = 1, count do
      local t = seek and math.random() * d or (tv[i] + DT) % d
      tv[i] = t
      times:set(i, t)
    end
    local t0 = clock()
    baseline.sample(mode, tp, tvp, rvp, svp, data.keys, J, ip, count, op, tabp, m, rate)
    s[f] = (clock() - t0) * 1000
  end
  table.remove(s, 1)
  return stats(s)
end

math.randomseed(42)
local clip1, data1 = synthetic_clip(skel, 10, 30)
local clip2, data2 = synthetic_clip(skel, 60, 120)

assert(clip1:dense() and clip2:dense())
local clip1c = synthetic_clip(skel, 10, 30, true)
local clip2c = synthetic_clip(skel, 60, 120, true)

local r = {}
r.sample_ms, r.sample_min = run_case(clip1, false)
r.sample_long_ms, r.sample_long_min = run_case(clip2, false)
r.sample_seek_ms, r.sample_seek_min = run_case(clip2, true)
-- the same with the portable kernel (no AVX2)
local simd_was = limber.core.simd()
limber.core.simd(false)
r.portable_ms, r.portable_min = run_case(clip1, false)
r.portable_long_ms, r.portable_long_min = run_case(clip2, false)
r.portable_seek_ms, r.portable_seek_min = run_case(clip2, true)
limber.core.simd(simd_was)
-- the same clips without the dense form (per-track cursors + binary search)
r.cursor_ms, r.cursor_min = run_case(clip1c, false)
r.cursor_long_ms, r.cursor_long_min = run_case(clip2c, false)
r.cursor_seek_ms, r.cursor_seek_min = run_case(clip2c, true)
clip1c, clip2c = nil, nil -- luacheck: ignore
collectgarbage()
-- baselines: naive linear search on 50 instances, scaled to 1000 instances
local NAIVE_N = 50
local nm, nmin = run_baseline(data1, "linear", NAIVE_N, clip1:duration())
r.naive_ms, r.naive_min = nm * N / NAIVE_N, nmin * N / NAIVE_N
local nlm, nlmin = run_baseline(data2, "linear", NAIVE_N, clip2:duration())
r.naive_long_ms, r.naive_long_min = nlm * N / NAIVE_N, nlmin * N / NAIVE_N
r.bsearch_ms, r.bsearch_min = run_baseline(data1, "bsearch", N, clip1:duration())
r.bsearch_long_ms, r.bsearch_long_min = run_baseline(data2, "bsearch", N, clip2:duration())
r.bsearch_seek_ms, r.bsearch_seek_min = run_baseline(data2, "bsearch", N, clip2:duration(), true)
r.table_ms, r.table_min = run_baseline(data1, "table", N, clip1:duration())
r.table_long_ms, r.table_long_min = run_baseline(data2, "table", N, clip2:duration())
r.table_seek_ms, r.table_seek_min = run_baseline(data2, "table", N, clip2:duration(), true)

-- two-layer blend of every instance (layer poses sampled once)
do
  local pa, pb = limber.pose(skel, N), limber.pose(skel, N)
  local sa, sb = anim.sampler(pa, { clip1 }), anim.sampler(pb, { clip2 })
  for i = 1, N do
    sa:set(i, 1, math.random() * 10)
    sb:set(i, 1, math.random() * 60)
  end
  sa:run()
  sb:run()
  local bl = anim.blender(pose, { { pose = pa }, { pose = pb } })
  for i = 1, N do
    local w = math.random()
    bl:set_weight(i, 1, w)
    bl:set_weight(i, 2, 1 - w)
  end
  r.blend2_ms, r.blend2_min = time_frames(FRAMES, function() bl:run() end)
end

local per = N * J
local function ns(ms) return ms * 1e6 / per end
r.ns_per_joint = ns(r.sample_ms)
r.ns_per_joint_long = ns(r.sample_long_ms)
r.ns_per_joint_seek = ns(r.sample_seek_ms)

print(C.interpreter_line())
print(("limber clip sampling: %d instances x %d joints (T, R, S tracks), %d frames, medians (min);"
  .. " AVX2: %s"):format(N, J, FRAMES, tostring(limber.core.simd())))
local function line(label, med, mn, note)
  print(("  %-44s %8.3f ms (%7.3f)  %6.2f ns/joint%s"):format(label, med, mn, ns(med), note or ""))
end
line("case 1: 10 s @ 30 Hz, advance + sample", r.sample_ms, r.sample_min)
line("case 2: 60 s @ 120 Hz, advance + sample", r.sample_long_ms, r.sample_long_min)
line("case 3: case 2 + random seek every frame", r.sample_seek_ms, r.sample_seek_min,
  "  (sample call only)")
line("portable kernel (no AVX2), case 1", r.portable_ms, r.portable_min)
line("portable kernel (no AVX2), case 2", r.portable_long_ms, r.portable_long_min)
line("portable kernel (no AVX2), case 3", r.portable_seek_ms, r.portable_seek_min,
  "  (sample call only)")
line("cursor path (dense form off), case 1", r.cursor_ms, r.cursor_min)
line("cursor path (dense form off), case 2", r.cursor_long_ms, r.cursor_long_min)
line("cursor path (dense form off), case 3", r.cursor_seek_ms, r.cursor_seek_min,
  "  (sample call only)")
line("naive linear search, case 1 (per 1000)", r.naive_ms, r.naive_min,
  ("  (ran %d instances)"):format(NAIVE_N))
line("naive linear search, case 2 (per 1000)", r.naive_long_ms, r.naive_long_min,
  ("  (ran %d instances)"):format(NAIVE_N))
line("binary search, case 1", r.bsearch_ms, r.bsearch_min)
line("binary search, case 2", r.bsearch_long_ms, r.bsearch_long_min)
line("binary search, case 3", r.bsearch_seek_ms, r.bsearch_seek_min)
line("fixed-rate table (Hands-on), case 1", r.table_ms, r.table_min)
line("fixed-rate table (Hands-on), case 2", r.table_long_ms, r.table_long_min)
line("fixed-rate table (Hands-on), case 3", r.table_seek_ms, r.table_seek_min)
line("two-layer blend", r.blend2_ms, r.blend2_min)
print(("ratios: case 2 vs naive %.0fx, vs binary search %.2fx; case 1 vs naive %.1fx,"
  .. " vs binary search %.2fx"):format(r.naive_long_ms / r.sample_long_ms,
    r.bsearch_long_ms / r.sample_long_ms, r.naive_ms / r.sample_ms, r.bsearch_ms / r.sample_ms))
print(("targets: case 1 <= 6 ns/joint: %s; case 2 <= 15: %s; case 3 <= 40: %s;"
  .. " case 2 >= 50x naive: %s"):format(r.ns_per_joint <= 6 and "met" or "MISSED",
    r.ns_per_joint_long <= 15 and "met" or "MISSED",
    r.ns_per_joint_seek <= 40 and "met" or "MISSED",
    r.naive_long_ms / r.sample_long_ms >= 50 and "met" or "MISSED"))

if JSON then
  local keys = { "sample_ms", "sample_long_ms", "sample_seek_ms", "naive_ms", "naive_long_ms",
    "bsearch_long_ms", "ns_per_joint", "ns_per_joint_long", "ns_per_joint_seek", "blend2_ms" }
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = ('"%s": %.4f'):format(k, r[k]) end
  parts[#parts + 1] = '"lua": ' .. C.json_string(C.lua)
  print("{" .. table.concat(parts, ", ") .. "}")
end
