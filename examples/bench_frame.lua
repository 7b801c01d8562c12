--- Frame benchmark (issue 16): the stage-by-stage calls against the frame plan.
--
-- Workload: the 96-joint humanoid of bench_hierarchy; three synthetic clips
-- keyed at 30 Hz on one uniform grid (built like bench_sampling's): two
-- locomotion clips keying every joint and an upper-body clip keying the
-- subtree of spine2. Each instance has two layers: a base locomotion layer
-- cross-fading between the two locomotion clips (source weights w and 1 - w,
-- w in [0.3, 0.7] per instance) and an upper-body override layer playing the
-- upper-body clip under a mask (1 on spine2's subtree, 0 elsewhere; layer
-- weight 1 for 85% of the instances, as a game plays an upper-body action,
-- and in [0.2, 1) for the other 15%, as if fading it in or out). Every source
-- has its own time and rate.
-- Palettes in the mat3x4 layout; a scene with one node per character (on
-- its pose instance) and 4 attachments on slot joints (head, both hands,
-- back) whose world matrices are gathered every frame, as a renderer would.
--
-- (a) stages: one sampler per (layer, source) (advance + run), one
--     limber.stack (the same layer semantics as the plan), local-to-model,
--     palette:update(), scene:update() + gather;
-- (b) the plan: plan:run(dt), scene:update() + gather;
-- both on 1 thread, at --small and --large instances, measured interleaved
-- (turns of --block timed frames, a then b then b then a ..., each turn after
-- one untimed frame), ns per joint per frame (median frame); (c) the plan on
-- every thread at --large instances (interleaved with (a) and (b)); (d)
-- --crowd instances with LOD tiers (20% every frame, 30% every 2nd, 50%
-- every 4th, phases staggered) against the same crowd at full rate, both
-- on 1 thread, interleaved, ms per frame of plan:run (what LOD saves; the
-- JSON's figures and the target) and of the frame with the scene (which
-- LOD does not reduce: printed too). Before timing, the two paths' palettes, slot joints
-- and attachments are compared (and again after the timed frames, when
-- both have run the same frames): an error above 1e-3.
--
--   lua5.4 examples/bench_frame.lua [--frames 200] [--block 8] [--small 100]
--     [--large 1000] [--crowd 10000] [--seed 16] [--json]
-- Row (e), the controller (limber.controller, issue 18): the --large crowd
-- driven by a 4-state machine (one state a synced 1D blend space of the
-- three clips) and the upper layer; controller_ms_1000 is its update()
-- minus the plan's own run, plan_ms_1000 that run (target: at most 0.25x).
-- The JSON keys keep the default sizes' names (stages_ns_100 ...) whatever
-- the sizes given; "sizes" in the output says which ran.
package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local C = require "common" -- finds limber for this Lua: the LuaRocks tree or the CMake build
local limber = require "limber"
local anim = require "limber.anim"
local scene = require "limber.scene"
local sk = require "limber.skinning"
local core = limber.core

local opt = C.options(arg, { frames = 200, block = 8, small = 100, large = 1000, crowd = 10000,
                             seed = 16, json = false })
for _, k in ipairs({ "frames", "block", "small", "large", "crowd" }) do
  if not (C.tointeger(opt[k]) and opt[k] >= 1) then
    error(("--%s must be an integer >= 1"):format(k), 0)
  end
end
if opt.small >= opt.large then error("--small must be below --large", 0) end
local DT = 1 / 60
local clock = core.clock
local SLOTS = { "head", "hand_l", "hand_r", "back" }
local UPPER = "spine2"
math.randomseed(opt.seed)

local skel = limber.skeleton(C.humanoid())
local J = skel:joint_count()

-- The upper-body mask: 1 on UPPER and its subtree, 0 elsewhere (parents come first).
local upper, mask = {}, {}
do
  local root = assert(skel:find(UPPER))
  for j = 1, J do
    local p = skel:parent(j)
    upper[j] = j == root or (p ~= nil and upper[p]) or false
    mask[j] = upper[j] and 1 or 0
  end
end

-- Synthetic clip keyed at `rate` Hz for `seconds` s on the joints where
-- keyed[j] (all by default): T, R and S tracks, smooth motion around the rest
-- pose (as bench_sampling's), `freq` scaling the speed and `phase` shifting it.
local function synthetic_clip(name, seconds, rate, freq, phase, keyed)
  local nk = math.floor(seconds * rate + 0.5) + 1
  local times = {}
  for k = 1, nk do times[k] = (k - 1) / rate end
  local tb = limber.buffer("f32", 1, times)
  local tracks = {}
  for j = 1, J do
    if not keyed or keyed[j] then
      local t0 = skel:rest_trs(j)
      local T, R, S = {}, {}, {}
      local ph = j * 0.37 + phase
      local ax, ay, az = math.sin(ph), math.cos(ph), 0.3
      local n = math.sqrt(ax * ax + ay * ay + az * az)
      for k = 1, nk do
        local t = times[k] * freq
        T[#T + 1], T[#T + 2], T[#T + 3] = t0[1] + 0.02 * math.sin(t * 3 + ph), t0[2],
          t0[3] + 0.01 * math.cos(t * 2 + ph)
        local a = 0.5 * math.sin(t * 4 + ph)
        local sa = math.sin(a / 2) / n
        R[#R + 1], R[#R + 2], R[#R + 3], R[#R + 4] = ax * sa, ay * sa, az * sa, math.cos(a / 2)
        local s = 1 + 0.05 * math.sin(t * 5 + ph)
        S[#S + 1], S[#S + 2], S[#S + 3] = s, s, s
      end
      tracks[#tracks + 1] = { joint = j, path = "translation", times = tb,
                              values = limber.buffer("f32", 3, T) }
      tracks[#tracks + 1] = { joint = j, path = "rotation", times = tb,
                              values = limber.buffer("f32", 4, R) }
      tracks[#tracks + 1] = { joint = j, path = "scale", times = tb,
                              values = limber.buffer("f32", 3, S) }
    end
  end
  local clip = anim.clip({ name = name, tracks = tracks, pack = false }, skel) -- exact, dense
  assert(clip:dense(), name .. " has no dense form")
  return clip
end

local clips = {
  synthetic_clip("walk", 10, 30, 1.0, 0.0),
  synthetic_clip("run", 8, 30, 1.7, 1.3),
  synthetic_clip("wave", 4, 30, 2.3, 2.1, upper),
}
-- which clip each (layer, source) plays: base 1 walk, base 2 run, upper 1 wave
local SOURCES = { { layer = 1, source = 1, clip = 1 }, { layer = 1, source = 2, clip = 2 },
                  { layer = 2, source = 1, clip = 3 } }

-- Per-instance parameters, the same for both paths: each source's time and
-- rate, the base cross-fade weight and the upper layer's weight.
local function parameters(N)
  local par = {}
  for i = 1, N do
    local fading = math.random() < 0.15
    local p = { w = 0.3 + 0.4 * math.random(), layer = fading and 0.2 + 0.8 * math.random() or 1,
                time = {}, rate = {} }
    for k, s in ipairs(SOURCES) do
      p.time[k] = math.random() * clips[s.clip]:duration()
      p.rate[k] = 0.9 + 0.2 * math.random()
    end
    par[i] = p
  end
  return par
end

-- A scene over `pose`: a node per instance on a grid, 4 attachments on its
-- slot joints. Returns the scene and a function that updates it and gathers
-- the attachments' world matrices.
local function make_scene(pose, N)
  local sc = scene.new({ capacity = N * 5 + 1 })
  local side = math.ceil(math.sqrt(N))
  local ids = {}
  for i = 1, N do
    local x, z = (i - 1) % side * 2, math.floor((i - 1) / side) * 2
    local node = sc:create({ pose = pose, instance = i, translation = { x, 0, z } })
    for _, name in ipairs(SLOTS) do
      ids[#ids + 1] = sc:create({ parent = node, slot = name, follow = "rigid",
                                  translation = { 0, 0.05, 0 } })
    end
  end
  local out = limber.buffer("f32", 16, #ids)
  sc:update()
  return function()
    sc:update()
    sc:gather(ids, #ids, out)
  end, out
end

-- (a) the stage-by-stage path over N instances.
local function build_stages(N, par)
  local poses, samplers = {}, {}
  for k, s in ipairs(SOURCES) do
    poses[k] = limber.pose(skel, N)
    samplers[k] = anim.sampler(poses[k], clips)
    for i = 1, N do samplers[k]:set(i, s.clip, par[i].time[k], true, par[i].rate[k]) end
  end
  local out = limber.pose(skel, N)
  local stack = limber.stack(out, {
    { name = "base", sources = { poses[1], poses[2] } },
    { name = "upper", sources = { poses[3] }, mask = mask },
  })
  for i = 1, N do
    stack:set_weight(i, 1, 1, par[i].w)
    stack:set_weight(i, 1, 2, 1 - par[i].w)
    stack:set_layer_weight(i, 2, par[i].layer)
  end
  local pal = limber.palette(out, { layout = "mat3x4" })
  local update_scene, gathered = make_scene(out, N)
  local parts = { sample = {}, blend = {}, model = {}, palette = {}, scene = {} }
  local function frame(record)
    local t0 = clock()
    for k = 1, #samplers do
      samplers[k]:advance(DT)
      samplers[k]:run()
    end
    local t1 = clock()
    stack:run()
    local t2 = clock()
    out:local_to_model()
    local t3 = clock()
    pal:update()
    local t4 = clock()
    update_scene()
    local t5 = clock()
    if record then
      local n = #parts.sample + 1
      parts.sample[n], parts.blend[n], parts.model[n] = t1 - t0, t2 - t1, t3 - t2
      parts.palette[n], parts.scene[n] = t4 - t3, t5 - t4
    end
    return (t5 - t0) * 1e3
  end
  return { frame = frame, pose = out, palette = pal, gathered = gathered, parts = parts }
end

-- (b) the plan over N instances; `lod` true: the LOD tiers.
local function build_plan(N, par, lod)
  local pose = limber.pose(skel, N)
  local pal = limber.palette(pose, { layout = "mat3x4" })
  local plan = limber.plan({
    pose = pose, clips = clips,
    layers = { { name = "base", sources = 2 }, { name = "upper", sources = 1, mask = mask } },
    palettes = { pal }, slots = SLOTS,
  })
  for i = 1, N do
    local p = par[i]
    for k, s in ipairs(SOURCES) do
      plan:play(i, s.layer, s.source, s.clip, p.time[k], p.rate[k], true)
    end
    plan:set_weight(i, 1, 1, p.w)
    plan:set_weight(i, 1, 2, 1 - p.w)
    plan:set_layer_weight(i, 2, p.layer)
  end
  if lod then
    -- tiers as distance bands would give them: 20% every frame, 30% every 2nd, 50% every 4th
    for i = 1, N do
      local f = (i - 0.5) / N
      plan:set_lod(i, f < 0.2 and 1 or f < 0.5 and 2 or 4)
    end
  end
  local update_scene, gathered = make_scene(pose, N)
  local parts = { plan = {}, scene = {}, evaluated = {}, advance = {}, sample = {}, blend = {},
                  model = {}, palette = {} }
  local function frame(record)
    local t0 = clock()
    local evaluated = plan:run(DT)
    local t1 = clock()
    update_scene()
    local t2 = clock()
    if record then
      local n = #parts.plan + 1
      parts.plan[n], parts.scene[n], parts.evaluated[n] = t1 - t0, t2 - t1, evaluated
      local tm = plan:timings()
      for _, k in ipairs({ "advance", "sample", "blend", "model" }) do
        parts[k][n] = tm[k] * 1e-3
      end
      -- palettes and slot joints ("palette" in plan-api.md, "output" in the binding)
      parts.palette[n] = (tm.palette or tm.output) * 1e-3
    end
    return (t2 - t0) * 1e3
  end
  return { frame = frame, pose = pose, palette = pal, gathered = gathered, parts = parts,
           plan = plan }
end

-- Largest absolute difference between two f32 Buffers of the same shape,
-- over every `stride`-th group of `group` elements.
local function max_diff(a, b, group, stride)
  local worst = 0
  local count = a:element_count()
  for first = 1, count, group * stride do
    local n = math.min(group, count - first + 1)
    local x, y = C.values(a, first, n), C.values(b, first, n)
    for k = 1, #x do
      local d = math.abs(x[k] - y[k])
      if d > worst or d ~= d then worst = d end -- NaN counts as the worst
    end
  end
  return worst
end

-- Palettes, slot joints' model matrices and gathered attachments of (a) and (b).
local function compare(a, b, N)
  local stride = math.max(1, math.floor(N / 100)) -- about 100 instances
  local d_pal = max_diff(a.palette:matrix_buffer(), b.palette:matrix_buffer(), J, stride)
  local d_slot = 0
  for i = 1, N, stride do
    for _, name in ipairs(SLOTS) do
      local j = skel:find(name)
      local x, y = a.pose:model(i, j), b.pose:model(i, j)
      for k = 1, 16 do
        local d = math.abs(x[k] - y[k])
        if d > d_slot or d ~= d then d_slot = d end
      end
    end
  end
  local d_att = max_diff(a.gathered, b.gathered, #SLOTS, stride)
  local worst = math.max(d_pal, d_slot, d_att)
  if d_pal ~= d_pal or d_slot ~= d_slot or d_att ~= d_att then worst = 0 / 0 end
  if worst > 1e-3 or worst ~= worst then
    error(("stages and plan disagree at %d instances: palettes %g, slot joints %g,"
      .. " attachments %g"):format(N, d_pal, d_slot, d_att), 0)
  end
  return worst
end

-- Runs the variants in turns: each turn one untimed frame then `block` timed
-- ones; the order of the variants reverses every round. Returns per variant
-- the list of frame times (ms).
local function interleave(variants, frames, block)
  local times = {}
  for k = 1, #variants do times[k] = {} end
  local round = 0
  while #times[1] < frames do
    round = round + 1
    for n = 1, #variants do
      local k = round % 2 == 1 and n or #variants + 1 - n
      local v = variants[k]
      if v.enter then v.enter() end
      v.run.frame(false)
      for _ = 1, block do
        local t = times[k]
        t[#t + 1] = v.run.frame(true)
      end
    end
  end
  return times
end

local function median(list) return (C.stats(list)) end
local function sum_median(list, scale) return median(list) * (scale or 1e3) end

local _, cores, threaded = sk.threads()
local all_threads = threaded and math.max(cores, 1) or 1
local function threads(n) return function() sk.threads(n) end end

local res, rows, checks = {}, {}, {}
local function ns(ms, N) return ms * 1e6 / (N * J) end

for _, N in ipairs({ opt.small, opt.large }) do
  local par = parameters(N)
  local a, b = build_stages(N, par), build_plan(N, par)
  sk.threads(1)
  a.frame(false)
  b.frame(false)
  checks[#checks + 1] = { N = N, before = compare(a, b, N) }
  local variants = { { run = a, enter = threads(1) }, { run = b, enter = threads(1) } }
  local mt
  if N == opt.large and all_threads > 1 then
    mt = build_plan(N, par)
    variants[3] = { run = mt, enter = threads(all_threads) }
  end
  local t = interleave(variants, opt.frames, opt.block)
  sk.threads(1)
  checks[#checks].after = compare(a, b, N) -- both ran the same frames
  local key = N == opt.small and "100" or "1000"
  local am, amin = C.stats(t[1])
  local bm, bmin = C.stats(t[2])
  res["stages_ns_" .. key], res["plan_ns_" .. key] = ns(am, N), ns(bm, N)
  rows[#rows + 1] = { "(a) stages, 1 thread", N, am, amin, ns(am, N) }
  rows[#rows + 1] = { "(b) plan, 1 thread", N, bm, bmin, ns(bm, N) }
  if N == opt.large then
    if mt then
      local cm, cmin = C.stats(t[3])
      res.plan_mt_ns_1000 = ns(cm, N)
      rows[#rows + 1] = { ("(c) plan, %d threads"):format(all_threads), N, cm, cmin, ns(cm, N) }
    else
      res.plan_mt_ns_1000 = ns(bm, N)
      rows[#rows + 1] = { "(c) plan, 1 thread (no worker pool)", N, bm, bmin, ns(bm, N) }
    end
    res.split_a, res.split_b = a.parts, b.parts
    res.mt_parts = mt and mt.parts
  end
end
res.threads = all_threads

-- (d) the LOD crowd against the same crowd at full rate, 1 thread
do
  local N = opt.crowd
  local par = parameters(N)
  local lod, full = build_plan(N, par, true), build_plan(N, par, false)
  sk.threads(1)
  local t = interleave({ { run = lod }, { run = full } }, opt.frames, opt.block)
  local function ms(list)
    local m, mn = C.stats(list)
    return m * 1e3, mn * 1e3
  end
  local lm, lmin = ms(lod.parts.plan)
  local fm, fmin = ms(full.parts.plan)
  res.lod_ms_10000, res.full_ms_10000 = lm, fm
  res.lod_frame_ms, res.full_frame_ms = C.stats(t[1]), C.stats(t[2])
  local e = 0
  for _, v in ipairs(lod.parts.evaluated) do e = e + v end
  res.lod_evaluated = e / #lod.parts.evaluated / N
  rows[#rows + 1] = { "(d) plan:run, LOD tiers, 1 thread", N, lm, lmin, ns(lm, N) }
  rows[#rows + 1] = { "    plan:run, all at full rate, 1 thread", N, fm, fmin, ns(fm, N) }
  local a, amin = C.stats(t[1])
  rows[#rows + 1] = { "    frame (+ scene), LOD tiers", N, a, amin, ns(a, N) }
  a, amin = C.stats(t[2])
  rows[#rows + 1] = { "    frame (+ scene), all at full rate", N, a, amin, ns(a, N) }
end
-- (e) the controller (issue 18): the same crowd at --large driven by a
-- 4-state machine on the base layer (one state a synced 1D blend space of
-- the three clips) and the upper layer; its per-frame cost is update()
-- minus the plan's own run (plan:timings().total), 1 thread. (f) the same
-- with the space synced by markers (foot-downs about every 0.45 s on walk
-- and run, at other fractions of their steps; wave without: evenly
-- spaced): what sync by markers adds.
local function controller_row(markers)
  local N = opt.large
  local controller = require "limber.controller"
  local pose = limber.pose(skel, N)
  local pal = limber.palette(pose, { layout = "mat3x4" })
  local ctl = controller.new({ pose = pose, clips = clips, palettes = { pal }, slots = SLOTS,
    layers = { { name = "base" }, { name = "upper", mask = mask } } })
  local m = controller.machine({
    initial = "walk",
    states = { walk = { clip = "walk" }, run = { clip = "run" },
               rest = { clip = "walk", rate = 0.5 },
               move = { space = { { clip = "walk", at = 0 }, { clip = "run", at = 1 },
                                  { clip = "wave", at = 2 } }, param = "speed",
                        markers = markers and { "L", "R" } or nil } },
    transitions = {
      { from = "walk", to = "move", fade = 0.3, when = { { "speed", ">", 0.5 } } },
      { from = "move", to = "run", fade = 0.3, when = { { "speed", ">", 1.8 } } },
      { from = "run", to = "rest", fade = 0.3, at_phase = 0.5, when = { { "speed", "<", 0.2 } } },
      { from = "any", to = "walk", fade = 0.2, trigger = "reset", priority = 1 },
    } })
  for i = 1, N do
    ctl:set(i, "speed", math.random() * 2)
    ctl:set_machine(i, "base", m)
    ctl:play(i, "upper", "wave", { time = math.random() * clips[3]:duration() })
    ctl:set_weight(i, "upper", math.random() < 0.3 and 1 or 0)
  end
  sk.threads(1)
  local total, plan_part, own = {}, {}, {}
  for f = 1, opt.frames do
    for _ = 1, math.floor(N / 50) do ctl:set(math.random(N), "speed", math.random() * 2.2) end
    if f % 40 == 0 then ctl:trigger(math.random(N), "reset") end
    local t0 = clock()
    ctl:update(DT)
    total[f] = (clock() - t0) * 1e3
    plan_part[f] = ctl:plan():timings().total
    own[f] = total[f] - plan_part[f]
  end
  if markers then -- (f) also reads what a game reads each frame, for the whole crowd:
    -- events and root motion in one C pass each, against a call per instance
    local rm, ev, rm1, ev1 = {}, {}, {}, {}
    local out
    for f = 1, 20 do
      ctl:update(DT)
      local t0 = clock()
      out = ctl:root_motions(1, out)
      local t1 = clock()
      local n = #ctl:crowd_events()
      local t2 = clock()
      for i = 1, N do ctl:root_motion(i) end
      local t3 = clock()
      local count = 0
      for i = 1, N do count = count + #ctl:events(i) end
      local t4 = clock()
      assert(count == n, "crowd_events and events(i) disagree")
      rm[f], ev[f], rm1[f], ev1[f] = (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3,
        (t4 - t3) * 1e3
      res.events_per_frame = n
    end
    res.reads = { C.stats(rm), C.stats(ev), C.stats(rm1), C.stats(ev1) }
  end
  local tm, pm = C.stats(total), C.stats(plan_part)
  rows[#rows + 1] = { markers and "(f) the same, the space synced by markers"
    or "(e) controller: machines + plan:run", N, tm, (select(2, C.stats(total))), ns(tm, N) }
  rows[#rows + 1] = { "    of which plan:run", N, pm, (select(2, C.stats(plan_part))), ns(pm, N) }
  return C.stats(own), pm
end
res.controller_ms_1000, res.plan_ms_1000 = controller_row(false)
do -- foot-downs every half step of the 10 s walk and the 8 s run (20 each,
  -- L and R in turn, at other fractions of each step): markers about every
  -- 0.45 s, as a real walk has them
  for c = 1, 2 do
    local d, ev = clips[c]:duration(), {}
    for k = 0, 19 do
      local f = (k + (k % 2 == 0 and 0.1 or 0.6) * (c == 1 and 1 or 0.5)) / 20
      ev[#ev + 1] = { time = f * d, name = k % 2 == 0 and "L" or "R" }
    end
    anim.set_events(clips[c], ev)
  end
  res.markers_ms_1000 = controller_row(true)
  anim.set_events(clips[1], nil)
  anim.set_events(clips[2], nil)
end
sk.threads(all_threads)

print(C.interpreter_line())
print(("frame: %d-joint humanoid, 2 layers (base: 2 sources cross-fading, upper body: override"
  .. " under a mask of %s's subtree), mat3x4 palettes, %d slot joints + attachments per"
  .. " instance"):format(J, UPPER, #SLOTS))
print(("sizes %d / %d / %d instances, %d timed frames per row (turns of %d, interleaved),"
  .. " AVX2 %s, %d thread(s) available"):format(opt.small, opt.large, opt.crowd,
  math.ceil(opt.frames / opt.block) * opt.block, opt.block,
  select(2, core.simd()) and "yes" or "no", all_threads))
print(("%-40s %9s %10s %9s %9s"):format("", "instances", "median ms", "min ms", "ns/joint"))
for _, r in ipairs(rows) do
  print(("%-40s %9d %10.3f %9.3f %9.2f"):format(r[1], r[2], r[3], r[4], r[5]))
end
local function split(parts, keys)
  local out = {}
  for _, k in ipairs(keys) do out[#out + 1] = ("%s %.3f"):format(k, sum_median(parts[k])) end
  return table.concat(out, ", ")
end
print(("at %d, stages (median ms): %s"):format(opt.large,
  split(res.split_a, { "sample", "blend", "model", "palette", "scene" })))
print(("at %d, plan 1 thread (median ms): %s; plan:timings(): %s"):format(opt.large,
  split(res.split_b, { "plan", "scene" }),
  split(res.split_b, { "advance", "sample", "blend", "model", "palette" })))
do -- the same frames without the scene (which both paths share)
  local pa, sa = res.split_a, {}
  for n = 1, #pa.sample do sa[n] = pa.sample[n] + pa.blend[n] + pa.model[n] + pa.palette[n] end
  local ma, mb = median(sa) * 1e3, median(res.split_b.plan) * 1e3
  print(("at %d without the scene: stages %.3f ms, plan %.3f ms (%.2fx)"):format(opt.large, ma,
    mb, ma / mb))
end
if res.mt_parts then
  print(("at %d, plan %d threads (median ms): %s; plan:timings() (summed over threads): %s")
    :format(opt.large, all_threads, split(res.mt_parts, { "plan", "scene" }),
      split(res.mt_parts, { "advance", "sample", "blend", "model", "palette" })))
end
print(("LOD crowd: %.3f of the instances evaluated per frame (tiers give 0.475); the frame with"
  .. " the scene %.3f ms vs %.3f ms at full rate (%.3fx)"):format(res.lod_evaluated,
  res.lod_frame_ms, res.full_frame_ms, res.lod_frame_ms / res.full_frame_ms))
for _, c in ipairs(checks) do
  print(("max abs difference stages vs plan at %d (palettes, slot joints, attachments):"
    .. " %.3g before timing, %.3g after"):format(c.N, c.before, c.after))
end
local r100 = res.stages_ns_100 / res.plan_ns_100
local r1000 = res.stages_ns_1000 / res.plan_ns_1000
local rlod = res.lod_ms_10000 / res.full_ms_10000
print(("ratios: stages/plan %.2fx at %d, %.2fx at %d; plan 1 thread/%d threads %.2fx at %d;"
  .. " lod/full (plan:run) %.3fx at %d"):format(r100, opt.small, r1000, opt.large, all_threads,
  res.plan_ns_1000 / res.plan_mt_ns_1000, opt.large, rlod, opt.crowd))
local function met(ok) return ok and "met" or "MISSED" end
print(("controller's own part at %d: %.3f ms, with the space synced by markers %.3f ms")
  :format(opt.large, res.controller_ms_1000, res.markers_ms_1000))
print(("reads at %d (row (f), %d events a frame): root_motions %.3f ms and crowd_events %.3f ms"
  .. " in one C pass each; root_motion(i) for every i %.3f ms, events(i) %.3f ms")
  :format(opt.large, res.events_per_frame, res.reads[1], res.reads[2], res.reads[3], res.reads[4]))
print(("targets: plan >= 2x faster than stages at %d: %s; plan not slower at %d: %s;"
  .. " lod <= 0.55x full: %s; controller <= 0.25x plan at %d: %s (%.3f / %.3f ms)")
  :format(opt.large, met(r1000 >= 2), opt.small, met(r100 >= 1), met(rlod <= 0.55), opt.large,
    met(res.controller_ms_1000 <= 0.25 * res.plan_ms_1000), res.controller_ms_1000,
    res.plan_ms_1000))

if opt.json then
  -- the issue's keys in the issue's order, then the interpreter
  local parts = {}
  for _, k in ipairs({ "stages_ns_100", "plan_ns_100", "stages_ns_1000", "plan_ns_1000",
                       "plan_mt_ns_1000", "threads", "lod_ms_10000", "full_ms_10000",
                       "controller_ms_1000", "plan_ms_1000" }) do
    parts[#parts + 1] = ('"%s": ' .. (k == "threads" and "%d" or "%.4f")):format(k, res[k])
  end
  parts[#parts + 1] = '"lua": ' .. C.json_string(C.lua)
  print("{" .. table.concat(parts, ", ") .. "}")
end
