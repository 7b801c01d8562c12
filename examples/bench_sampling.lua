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

-- ---- the 96-joint humanoid ------------------------------------------------

local function humanoid()
  local joints = {}
  local function add(name, parent, t)
    joints[#joints + 1] = { name = name, parent = parent, translation = t or { 0, 0.1, 0 } }
    return name
  end
  add("hips", nil, { 0, 1, 0 })
  local p = "hips"
  for k = 1, 3 do p = add("spine" .. k, p) end
  local chest = add("chest", p)
  local head = add("head", add("neck", chest))
  for _, side in ipairs({ "l", "r" }) do
    local x = side == "l" and 0.1 or -0.1
    local a = add(side .. "_clavicle", chest, { x, 0.1, 0 })
    a = add(side .. "_upperarm", a, { x * 1.5, 0, 0 })
    add(side .. "_upperarm_twist", a, { x, 0, 0 })
    a = add(side .. "_forearm", a, { x * 2.5, 0, 0 })
    add(side .. "_forearm_twist", a, { x, 0, 0 })
    local hand = add(side .. "_hand", a, { x * 2.5, 0, 0 })
    for f = 1, 5 do
      local q = hand
      for s = 1, 3 do
        q = add(("%s_finger%d_%d"):format(side, f, s), q, { x * 0.3, 0, (f - 3) * 0.02 })
      end
    end
    local l = add(side .. "_thigh", "hips", { x, -0.1, 0 })
    add(side .. "_thigh_twist", l, { 0, -0.2, 0 })
    l = add(side .. "_calf", l, { 0, -0.45, 0 })
    add(side .. "_calf_twist", l, { 0, -0.2, 0 })
    l = add(side .. "_foot", l, { 0, -0.45, 0 })
    add(side .. "_toe_end", add(side .. "_toe", l, { 0, -0.05, 0.1 }), { 0, 0, 0.05 })
  end
  local k = 0
  while #joints < 96 do
    k = k + 1
    add("face" .. k, head, { (k % 7 - 3) * 0.01, 0.05, 0.08 })
  end
  return limber.skeleton(joints)
end

-- Synthetic clip: T, R and S tracks on every joint, keyed at `rate` Hz for
-- `seconds` seconds (one uniform key grid, as resampled mocap and DCC
-- exports have, so the clip gets the dense form); smooth motion (keys a few
-- degrees apart). Also returns the raw arrays for the baselines.
local function synthetic_clip(skel, seconds, rate, cursor_only)
  local J = skel:joint_count()
  local nk = math.floor(seconds * rate + 0.5) + 1
  local times = {}
  for k = 1, nk do times[k] = (k - 1) / rate end
  local tb = limber.buffer("f32", 1, times)
  local tracks = {}
  local all_times = limber.buffer("f32", 1, J * 3 * nk)
  local tv = limber.buffer("f32", 3, J * nk)
  local rv = limber.buffer("f32", 4, J * nk)
  local sv = limber.buffer("f32", 3, J * nk)
  local tstr = tb:bytes()
  for j = 1, J do
    local t0 = skel:rest_trs(j)
    local T, R, S = {}, {}, {}
    local ph = j * 0.37
    for k = 1, nk do
      local t = times[k]
      T[#T + 1], T[#T + 2], T[#T + 3] = t0[1] + 0.02 * math.sin(t * 3 + ph), t0[2],
        t0[3] + 0.01 * math.cos(t * 2 + ph)
      local a = 0.5 * math.sin(t * 4 + ph)
      local ax, ay, az = math.sin(ph), math.cos(ph), 0.3
      local n = math.sqrt(ax * ax + ay * ay + az * az)
      local sa = math.sin(a / 2) / n
      R[#R + 1], R[#R + 2], R[#R + 3], R[#R + 4] = ax * sa, ay * sa, az * sa, math.cos(a / 2)
      local s = 1 + 0.05 * math.sin(t * 5 + ph)
      S[#S + 1], S[#S + 2], S[#S + 3] = s, s, s
    end
    local tbuf, rbuf, sbuf = limber.buffer("f32", 3, T), limber.buffer("f32", 4, R),
      limber.buffer("f32", 3, S)
    tracks[#tracks + 1] = { joint = j, path = "translation", times = tb, values = tbuf }
    tracks[#tracks + 1] = { joint = j, path = "rotation", times = tb, values = rbuf }
    tracks[#tracks + 1] = { joint = j, path = "scale", times = tb, values = sbuf }
    for m = 0, 2 do all_times:set_bytes(tstr, ((j - 1) * 3 + m) * nk + 1) end
    tv:set_bytes(tbuf:bytes(), (j - 1) * nk + 1)
    rv:set_bytes(rbuf:bytes(), (j - 1) * nk + 1)
    sv:set_bytes(sbuf:bytes(), (j - 1) * nk + 1)
  end
  local name = ("synthetic %ds@%dHz"):format(seconds, rate)
  -- cursor_only: the same clip without the dense form (the per-track cursor path)
  local clip = cursor_only and limber.core.clip(tracks, name, false)
    or anim.clip({ name = name, tracks = tracks }, skel)
  return clip, { times = all_times, tv = tv, rv = rv, sv = sv, keys = nk, rate = rate }
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
