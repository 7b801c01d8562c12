-- limber.controller (issue 18, first part): transitions that never pop,
-- exact layer semantics, events and root motion from every contributing
-- clip through fades, and examples/anim_dump.lua.
--
-- Continuity is measured as the issue states it: in chains of interrupted
-- fades of 0.25 s or more, no joint's local rotation changes between two
-- frames by more than 1.5x the fastest change any clip has on its own; and
-- for chains of short fades, evaluating at 4x the frame rate at least halves
-- the largest per-frame change (continuous motion shrinks with the step, a
-- pop does not). Root motion and events are compared with plain-Lua sums
-- over the sources with the weights a linear fade gives.
local H = require "spec.helper"
local limber = require "limber"
local anim = require "limber.anim"
local gltf = require "limber.gltf"
local controller = require "limber.controller"

H.seed("controller")

local fox
local function fox_asset()
  fox = fox or gltf.load(H.assets .. "Fox/Fox.glb", { tolerance = 0 })
  return fox
end

local function fox_clips(a)
  local clips = {}
  for _, an in ipairs(a.animations) do clips[#clips + 1] = an.clips[1] end
  return clips
end

-- Rotations of every joint of instance 1.
local function rotations(pose)
  local out = {}
  for j = 1, pose:joint_count() do
    local _, r = pose:trs(1, j)
    out[j] = r
  end
  return out
end

-- The largest change of a quaternion component between two frames (up to sign).
local function change(a, b)
  local m = 0
  for j = 1, #a do
    local d1, d2 = 0, 0
    for c = 1, 4 do
      d1 = math.max(d1, math.abs(a[j][c] - b[j][c]))
      d2 = math.max(d2, math.abs(a[j][c] + b[j][c]))
    end
    m = math.max(m, math.min(d1, d2))
  end
  return m
end

-- Runs `script` ({ {time, clip, fade}, ... }, seconds) on the Fox base layer at
-- `fps` for `seconds`; returns the largest per-frame rotation change after the
-- first play.
local function run_chain(script, fps, seconds)
  local a = fox_asset()
  local skel = a.skeletons[1].skeleton
  local pose = limber.pose(skel, 1)
  local ctl = controller.new({ pose = pose, clips = fox_clips(a), locals = true })
  local dt, k, worst = 1 / fps, 1, 0
  local prev
  for f = 0, math.floor(seconds * fps + 0.5) do
    if f > 0 then ctl:update(dt) end
    local t = f * dt
    local started = false
    while script[k] and script[k][1] <= t + 1e-9 do
      ctl:play(1, "base", script[k][2], { fade = script[k][3] })
      started = started or script[k][3] == 0
      k = k + 1
    end
    ctl:update(0)
    local cur = rotations(pose)
    if prev and not started then worst = math.max(worst, change(prev, cur)) end
    prev = cur
  end
  return worst
end

describe("limber.controller", function()
  it("never pops in chains of interrupted fades of 0.25 s or more (Fox)", function()
    local names = { "Walk", "Run", "Survey" }
    -- the fastest change each clip has alone
    local fastest = 0
    for _, n in ipairs(names) do
      fastest = math.max(fastest, run_chain({ { 0, n, 0 } }, 60, 4))
    end
    assert.is_true(fastest > 0.01)
    -- the issue's chain, A -> B -> C -> A within 0.2 s, and random chains
    local chains = { { { 0, "Walk", 0 }, { 1, "Run", 0.5 }, { 1.25, "Survey", 0.5 },
                       { 1.33, "Walk", 0.5 } },
                     { { 0, "Walk", 0 }, { 0.5, "Run", 0.25 }, { 0.6, "Survey", 0.3 },
                       { 0.7, "Walk", 0.25 }, { 0.75, "Run", 0.4 } } }
    for _ = 1, 6 do
      local c = { { 0, names[math.random(3)], 0 } }
      local t = 0
      for _ = 1, math.random(3, 8) do
        t = t + H.rand(0.03, 0.4)
        c[#c + 1] = { t, names[math.random(3)], H.rand(0.25, 0.6) }
      end
      chains[#chains + 1] = c
    end
    for n, c in ipairs(chains) do
      local w = run_chain(c, 60, c[#c][1] + 1)
      assert.is_true(w <= 1.5 * fastest + 1e-4,
        ("chain %d: a frame changed by %.4f, the fastest clip alone %.4f"):format(n, w, fastest))
    end
  end)

  it("changes less per frame at 4x the frame rate, however short the fades", function()
    local names = { "Walk", "Run", "Survey" }
    for _ = 1, 5 do
      local c = { { 0, names[math.random(3)], 0 } }
      local t = 0
      for _ = 1, math.random(3, 6) do
        -- at frames of both rates (multiples of 1/60 s): the same chain at both
        t = t + math.random(1, 9) / 60
        c[#c + 1] = { t, names[math.random(3)], H.rand(0.02, 0.1) }
      end
      local w60 = run_chain(c, 60, t + 0.5)
      local w240 = run_chain(c, 240, t + 0.5)
      assert.is_true(w240 <= 0.5 * w60 + 1e-6, ("60 fps %.4f, 240 fps %.4f"):format(w60, w240))
    end
  end)

  it("gives exactly the override clip on its masked joints and the layers below elsewhere",
    function()
      local a = fox_asset()
      local skel = a.skeletons[1].skeleton
      local clips = fox_clips(a)
      local pose = limber.pose(skel, 1)
      local ctl = controller.new({ pose = pose, clips = clips, locals = true, layers = {
        { name = "base" }, { name = "upper", mask = { root = "b_Spine01_02" } } } })
      local base_pose, upper_pose = limber.pose(skel, 1), limber.pose(skel, 1)
      local base = controller.new({ pose = base_pose, clips = clips, locals = true })
      local upper = controller.new({ pose = upper_pose, clips = clips, locals = true })
      ctl:play(1, "base", "Walk", { time = 0.1 })
      ctl:play(1, "upper", "Run", { time = 0.3 })
      base:play(1, 1, "Walk", { time = 0.1 })
      upper:play(1, 1, "Run", { time = 0.3 })
      local mask = limber.mask(skel, { root = "b_Spine01_02" })
      local off = false -- from frame 16 the upper layer has weight 0: the base everywhere
      for f = 1, 30 do
        for _, c in ipairs({ ctl, base, upper }) do c:update(f == 1 and 0 or 1 / 60) end
        for j = 1, skel:joint_count() do
          local m = type(mask) == "table" and mask[j] or mask:get(j)
          local want = (m == 1 and not off) and upper_pose or base_pose
          assert.same({ want:trs(1, j) }, { pose:trs(1, j) }, ("frame %d joint %d"):format(f, j))
        end
        if f == 15 then
          ctl:set_weight(1, "upper", 0)
          off = true
        end
      end
    end)

  -- A skeleton of a root and a child; clips moving the root along x, with events.
  local function walker_setup(n) return H.walker_setup(n or 1) end

  it("sums root motion and reports events over every source through a fade", function()
    local _, clips, pose = walker_setup()
    local ctl = controller.new({ pose = pose, clips = clips })
    ctl:play(1, 1, "slow")
    ctl:update(0)
    local dt, T = 1 / 50, 0.4
    local total, seen = 0, {}
    for f = 1, 60 do
      if f == 11 then ctl:play(1, 1, "fast", { fade = T }) end
      ctl:update(dt)
      -- weights after this step: "fast" starts at frame 11 and fades in
      -- linearly, one step of it in that frame's update already
      local wf = f < 11 and 0 or math.min(1, (f - 10) * dt / T)
      local ws = 1 - wf
      local x, y, z, yaw = ctl:root_motion(1)
      assert.near(ws * 1 * dt + wf * 3 * dt, x, 1e-5, "frame " .. f)
      assert.equal(0, y)
      assert.equal(0, z)
      assert.equal(0, yaw)
      total = total + x
      for _, e in ipairs(ctl:events(1)) do
        local w = e.clip == "slow" and ws or wf
        assert.near(w, e.weight, 1e-5, ("frame %d %s"):format(f, e.name))
        assert.is_true(e.weight > 0)
        seen[#seen + 1] = e.clip .. ":" .. e.name
      end
    end
    -- slow steps at 0.5 s (frame 25) while it still has weight; fast kicks
    -- from frame 11 on (at 0.25 and 0.75 of its lap)
    local joined = table.concat(seen, " ")
    assert.matches("slow:step", joined, 1, true)
    assert.matches("fast:kick", joined, 1, true)
    local slow_steps = select(2, joined:gsub("slow:step", ""))
    assert.equal(1, slow_steps) -- at 0.5 s; by 1.5 s slow has no weight left
    assert.is_true(total > 0)
  end)

  it("calls handlers after each update: events by name and clip, loops, finished clips",
    function()
      local skel, clips = walker_setup()
      local payload = { sound = "thud", volume = 0.5 }
      clips[3] = anim.clip({ name = "once", events = { { time = 0.9, name = "last",
        data = payload } }, tracks = {
        { joint = 1, path = "translation", times = { 0, 1 }, values = { 0, 0, 0, 1, 0, 0 } } } },
        skel)
      local N = 6
      local pose = limber.pose(skel, N)
      local ctl = controller.new({ pose = pose, clips = clips })
      local calls = {}
      local function rec(kind)
        return function(i, r) calls[#calls + 1] = { kind = kind, i = i, r = r } end
      end
      ctl:on({ event = true }, rec("all"))
      ctl:on({ event = "kick" }, rec("kick"))
      ctl:on({ clip = "slow" }, rec("slow"))
      ctl:on({ loop = true }, rec("loop"))
      local fast_loops = ctl:on({ loop = "fast" }, rec("loop fast"))
      ctl:on({ finished = true }, rec("finished"))
      local lasts = {}
      ctl:on({ event = "last" }, function(i, r) lasts[#lasts + 1] = { i, r.data } end)
      -- 1, 2: random cross-fades between slow and fast; 3: fast at 1.3x from
      -- 0; 4: once at 1.1x; 5: once backward from its end; 6: fast at -0.7x
      ctl:play(3, 1, "fast", { rate = 1.3 })
      ctl:play(4, 1, "once", { rate = 1.1, loop = false })
      ctl:play(5, 1, "once", { rate = -1.1, time = 1, loop = false })
      ctl:play(6, 1, "fast", { rate = -0.7, time = 0.5 })
      ctl:update(0)
      local dt, F = 1 / 50, 200
      local laps, finished, fast_laps = { 0, 0, 0, 0, 0, 0 }, {}, { 0, 0 }
      for f = 1, F do
        for i = 1, 2 do
          if math.random() < 0.08 then
            ctl:play(i, 1, math.random() < 0.5 and "slow" or "fast",
              { fade = H.rand(0, 0.3), rate = H.rand(0.5, 2), time = H.rand(0, 1) })
          end
        end
        calls = {}
        ctl:update(dt)
        -- the handlers ran for this update, over the crowd in instance order:
        -- the event handlers exactly what ctl:events gives, filtered
        local want = { all = {}, kick = {}, slow = {} }
        for i = 1, N do
          for _, e in ipairs(ctl:events(i)) do
            local key = ("%d %s %s %.9g %.6g"):format(i, e.clip, e.name, e.time, e.weight)
            want.all[#want.all + 1] = key
            if e.name == "kick" then want.kick[#want.kick + 1] = key end
            if e.clip == "slow" then want.slow[#want.slow + 1] = key end
          end
        end
        local got = { all = {}, kick = {}, slow = {} }
        local last_i = 0
        for _, c in ipairs(calls) do
          if got[c.kind] then
            local r = c.r
            got[c.kind][#got[c.kind] + 1] = ("%d %s %s %.9g %.6g"):format(c.i, r.clip, r.name,
              r.time, r.weight)
          elseif c.kind == "loop" then
            laps[c.i] = laps[c.i] + c.r.laps
          elseif c.kind == "loop fast" then -- before / after ctl:off at frame 100
            local k = f <= 100 and 1 or 2
            fast_laps[k] = fast_laps[k] + 1
          elseif c.kind == "finished" then
            finished[#finished + 1] = { i = c.i, f = f, clip = c.r.clip, weight = c.r.weight }
          end
          if c.kind == "all" then
            assert.is_true(c.i >= last_i) -- instance order
            last_i = c.i
          end
        end
        assert.same(want, got, "frame " .. f)
        if f == 100 then ctl:off(fast_loops) end
      end
      -- the 'fast' loop handler ran until it was removed, and not after
      assert.is_true(fast_laps[1] > 0)
      assert.equal(0, fast_laps[2])
      -- the payload comes with the event (instance 5 backward from the end
      -- crosses 0.9 first, instance 4 forward later)
      assert.same({ { 5, payload }, { 4, payload } }, lasts)
      -- laps: the plain count of how often each constant-rate clip passed
      -- its end (or its start, backward)
      assert.equal(math.floor(1.3 * F * dt), laps[3])
      assert.equal(math.floor(-0.7 * F * dt + 0.5), laps[6]) -- from 0.5 backward: -2.8 + 0.5
      -- once: finished exactly once, at the frame its time reached the end
      -- (or 0 backward), at weight 1
      assert.equal(2, #finished)
      assert.same({ i = 4, f = math.ceil(1 / (1.1 * dt)), clip = "once", weight = 1 }, finished[1])
      assert.same({ i = 5, f = math.ceil(1 / (1.1 * dt)), clip = "once", weight = 1 }, finished[2])
      -- a handler that plays changes the next update, not this one's calls
      local seen = {}
      local h = ctl:on({ event = "kick" }, function(i)
        seen[#seen + 1] = i
        ctl:play(3, 1, "slow")
      end)
      for _ = 1, 60 do ctl:update(dt) end
      assert.is_true(#seen > 0)
      ctl:off(h)
      -- refusals
      local function err(what, fn) return select(2, pcall(ctl.on, ctl, what, fn)) end
      local f0 = function() end
      assert.matches("bad argument #1 to 'limber.Controller:on' %(give event = name",
        err({}, f0))
      assert.matches("no clip named 'nope'", err({ clip = "nope" }, f0))
      assert.matches("give one of", err({ loop = true, finished = true }, f0))
      assert.matches("give one of", err({ loop = true, event = "kick" }, f0))
      assert.matches("unknown key 'evnt'", err({ evnt = "kick" }, f0))
      assert.matches("bad argument #2 to 'limber.Controller:on' %(function expected",
        err({ event = "kick" }, 5))
      assert.matches("not a handler of this controller",
        select(2, pcall(ctl.off, ctl, {})))
    end)

  it("finds the instances handlers need in one C pass (plan:stepped), as plain Lua does",
    function()
      local skel, clips = walker_setup()
      local N = 40
      local ctl = controller.new({ pose = limber.pose(skel, N), clips = clips })
      local plan = ctl:plan()
      local names = { "slow", "fast" }
      for i = 1, N do ctl:play(i, 1, names[math.random(2)], { time = H.rand(0, 1) }) end
      local total = 0
      for f = 1, 150 do
        for i = 1, N do
          local r = math.random()
          if r < 0.05 then
            ctl:play(i, 1, names[math.random(2)], { fade = H.rand(0, 0.3), rate = H.rand(-2, 2),
              time = H.rand(0, 1), loop = math.random() < 0.6 })
          elseif r < 0.07 then
            plan:set_time(i, 1, math.random(ctl.S), H.rand(0, 1))
          end
        end
        local dt = math.random() < 0.1 and 0 or H.rand(-0.01, 0.05)
        ctl:update(dt)
        local flags = { math.random() < 0.5, math.random() < 0.5 }
        -- plain Lua: a source with weight whose step passed an end of its
        -- clip, or moved on a flagged clip
        local want = {}
        for i = 1, N do
          local hit = false
          for s = 1, ctl.S do
            local k, t, rate, loop, w, prev = plan:source(i, 1, s)
            if k and w > 0 then
              local d = clips[k]:duration()
              if loop then
                local delta = rate * dt
                hit = hit or (delta ~= 0 and (flags[k] or
                  (d > 0 and math.floor((prev + delta) / d) ~= math.floor(prev / d))))
              else
                hit = hit or (t ~= prev and (flags[k] or (t >= d and prev < d)
                  or (t <= 0 and prev > 0)))
              end
            end
          end
          if hit then want[#want + 1] = i end
        end
        assert.same(want, plan:stepped(flags), "frame " .. f)
        total = total + #want
      end
      assert.is_true(total > 50)
      assert.same(plan:stepped(), plan:stepped({})) -- no flags: ends only
      assert.matches("bad argument #2 to 'limber.Plan:stepped' %(table expected",
        select(2, pcall(plan.stepped, plan, 5)))
    end)

  it("reports what the run played when a machine switches clips at once after it", function()
    -- A and B take turns at each clip end with no fade: the switch happens
    -- after the run that crossed the end, so that run's events and lap are
    -- A's, and B's first events come with the next update (once)
    local skel = walker_setup()
    local function mk(name)
      return anim.clip({ name = name, events = { { time = 0.05, name = "ev_" .. name } }, tracks = {
        { joint = 2, path = "rotation", times = { 0, 1 }, values = { 0, 0, 0, 1, 0, 0.6, 0, 0.8 } } } },
        skel)
    end
    local pose = limber.pose(skel, 1)
    local ctl = controller.new({ pose = pose, clips = { mk("A"), mk("B") } })
    ctl:set_machine(1, 1, controller.machine({ initial = "a",
      states = { a = { clip = "A" }, b = { clip = "B" } },
      transitions = { { from = "a", to = "b", fade = 0, at_end = true },
                      { from = "b", to = "a", fade = 0, at_end = true } } }))
    local log, loops, last = {}, {}, {}
    ctl:on({ event = true }, function(_, e) log[#log + 1] = e.name end)
    ctl:on({ loop = true }, function(_, r) loops[#loops + 1] = r.clip end)
    for u = 1, 47 do
      log = {}
      ctl:update(0.13)
      local listed = {}
      for _, e in ipairs(ctl:events(1)) do listed[#listed + 1] = e.name end
      assert.same(listed, log, "update " .. u)
      assert.is_true(#log <= 1, "update " .. u)
      -- an event is never reported by two updates in a row (a lap is 1 s)
      if log[1] then assert.are_not.equal(last[1], log[1], "update " .. u) end
      last = log
    end
    -- every clip end the machine switched at is a lap of the clip that ran:
    -- A, B, A, B, A (47 x 0.13 s = 6.1 s, a switch each 8th update)
    assert.same({ "A", "B", "A", "B", "A" }, loops)
  end)

  it("keeps every source fading from its current weight, in at most `sources` slots",
    function()
      for _, S in ipairs({ 6, 3 }) do
        local _, clips, pose = walker_setup()
        local ctl = controller.new({ pose = pose, clips = clips, sources = S })
        ctl:play(1, 1, 1)
        for f = 1, 40 do
          if f % 4 == 0 then ctl:play(1, 1, 1 + f % 3 % 2, { fade = 0.3 }) end
          ctl:update(1 / 60)
          local sum, n, eff = 0, 0, 0
          for _, e in ipairs(ctl:sources(1)) do
            sum, n, eff = sum + e.weight, n + 1, eff + e.effective
          end
          assert.is_true(n >= 1 and n <= S)
          assert.near(1, eff, 1e-5)
          assert.is_true(sum > 0)
        end
        -- plays every 4 frames, fades of 18: 6 slots are enough, 3 are not
        if S == 6 then assert.equal(0, ctl:dropped()) else assert.is_true(ctl:dropped() > 0) end
      end
    end)

  it("plays a 1D blend space: exactly a clip at its point, linear weights, one phase", function()
    local a = fox_asset()
    local skel = a.skeletons[1].skeleton
    local clips = fox_clips(a)
    local space = controller.blend1d({ { clip = "Run", at = 3 }, { clip = "Walk", at = 1 },
                                       { clip = "Survey", at = 0 } })
    local pose, alone_pose = limber.pose(skel, 1), limber.pose(skel, 1)
    local ctl = controller.new({ pose = pose, clips = clips, locals = true })
    local alone = controller.new({ pose = alone_pose, clips = clips, locals = true })
    -- at Walk's point: exactly Walk, frame after frame
    ctl:play_space(1, 1, space, 1, { phase = 0.25 })
    local walk = clips[2]
    assert.equal("Walk", walk:name())
    alone:play(1, 1, "Walk", { time = 0.25 * walk:duration() })
    for f = 1, 20 do
      ctl:update(f == 1 and 0 or 1 / 60)
      alone:update(f == 1 and 0 or 1 / 60)
      for j = 1, skel:joint_count() do
        assert.same({ alone_pose:trs(1, j) }, { pose:trs(1, j) }, ("frame %d joint %d"):format(f, j))
      end
    end
    -- between points: linear weights, and every clip at one normalised phase
    local durations = {}
    for _, c in ipairs(clips) do durations[c:name()] = c:duration() end
    for f = 1, 200 do
      local x = H.rand(-0.5, 3.5)
      ctl:set_param(1, 1, x)
      ctl:update(H.rand(0, 0.05))
      local w = {}
      local phase
      for _, e in ipairs(ctl:sources(1)) do
        w[e.clip:name()] = e.weight
        local ph = e.time / durations[e.clip:name()]
        if phase then assert.near(phase, ph, 1e-6, "frame " .. f) end
        phase = ph
      end
      local xs = math.max(0, math.min(3, x))
      local want = xs <= 1 and { Survey = 1 - xs, Walk = xs, Run = 0 }
        or { Survey = 0, Walk = 1 - (xs - 1) / 2, Run = (xs - 1) / 2 }
      for name, v in pairs(want) do assert.near(v, w[name] or 0, 1e-6, name .. " at " .. x) end
    end
    -- without sync every clip runs at rate 1
    local free = controller.blend1d({ { clip = 1, at = 0 }, { clip = 2, at = 1 } }, { sync = false })
    ctl:play_space(1, 1, free, 0.5)
    for _, e in ipairs(ctl:sources(1)) do
      if e.weight > 0 and e.time == e.prev then assert.equal(1, e.rate) end
    end
    assert.error_matches(function() ctl:set_param(1, 1, 0 / 0) end, "x must be a number", 1, true)
    assert.error_matches(function() controller.blend1d({ { clip = 1, at = 1 }, { clip = 2, at = 1 } }) end,
      "two points at 1", 1, true)
    assert.error_matches(function() ctl:play_space(1, 1, {}, 0) end,
      "bad argument #4 to 'limber.Controller:play_space'", 1, true)
  end)

  it("plays a 2D blend space: barycentric inside, the nearest hull point outside, exact at points",
    function()
      local skel = limber.skeleton({ { name = "root" } })
      local clips = {}
      for k = 1, 7 do
        clips[k] = anim.clip({ name = "c" .. k, tracks = { { joint = 1, path = "translation",
          times = { 0, 0.5 + 0.1 * k }, values = { 0, 0, 0, k, 0, 0 } } } }, skel)
      end
      local ctl = controller.new({ pose = limber.pose(skel, 1), clips = clips, sources = 8 })
      for round = 1, 40 do
        local n = math.random(1, 7)
        local pts = {}
        for k = 1, n do
          pts[k] = { clip = k, at = { math.random(-4, 4) * 0.5, math.random(-4, 4) * 0.5 } }
          for j = 1, k - 1 do -- distinct points
            if pts[j].at[1] == pts[k].at[1] and pts[j].at[2] == pts[k].at[2] then
              pts[k].at[1] = pts[k].at[1] + 7 + k
            end
          end
        end
        local space = controller.blend2d(pts)
        ctl:play_space(1, 1, space, { pts[1].at[1], pts[1].at[2] })
        local function weights(x, y)
          ctl:set_param(1, 1, { x, y })
          local w, sum, count = {}, 0, 0
          for _, e in ipairs(ctl:sources(1)) do
            local k = tonumber(e.clip:name():sub(2))
            w[k] = e.weight
            sum, count = sum + e.weight, count + 1
          end
          return w, sum, count
        end
        -- exactly one clip at each point
        for k, p in ipairs(pts) do
          local w, sum, count = weights(p.at[1], p.at[2])
          assert.equal(1, w[k], ("round %d point %d"):format(round, k))
          assert.equal(1, count)
          assert.equal(1, sum)
        end
        -- anywhere: weights >= 0 summing to 1, at most 3 clips; the weighted
        -- points are the query where it lies inside the hull, else no farther
        -- than the nearest clip point
        for _ = 1, 30 do
          local x, y = H.rand(-3, 3), H.rand(-3, 3)
          local w, sum, count = weights(x, y)
          assert.near(1, sum, 1e-6)
          assert.is_true(count >= 1 and count <= 3)
          local px, py, nearest = 0, 0, math.huge
          for k, p in ipairs(pts) do
            px, py = px + (w[k] or 0) * p.at[1], py + (w[k] or 0) * p.at[2]
            nearest = math.min(nearest, (p.at[1] - x) ^ 2 + (p.at[2] - y) ^ 2)
          end
          local d2 = (px - x) ^ 2 + (py - y) ^ 2
          -- the weights are floats (about 6e-8 relative), points up to 16 away
          assert.is_true(math.sqrt(d2) <= math.sqrt(nearest) + 1e-5, ("round %d (%g, %g)"):format(round, x, y))
          if count == 3 then assert.is_true(math.sqrt(d2) < 1e-5) end
          -- continuous: a step of 1e-7 moves the weights by little
          local w2 = weights(x + 1e-7, y - 1e-7)
          for k = 1, n do assert.is_true(math.abs((w[k] or 0) - (w2[k] or 0)) < 1e-4) end
        end
      end
      assert.error_matches(function() ctl:set_param(1, 1, 3) end, "x must be { x, y }", 1, true)
      assert.error_matches(function()
        controller.blend2d({ { clip = 1, at = { 0, 0 } }, { clip = 2, at = { 0, 0 } } })
      end, "two points at (0, 0)", 1, true)
    end)

  it("moves state machines by parameters, triggers, clip ends and phases, by priority", function()
    local skel, clips, pose = walker_setup()
    local once = anim.clip({ name = "once", tracks = { { joint = 1, path = "translation",
      times = { 0, 0.5 }, values = { 0, 0, 0, 1, 0, 0 } } } }, skel)
    clips[#clips + 1] = once
    local m = controller.machine({
      initial = "idle",
      states = { idle = { clip = "slow" }, run = { clip = "fast" }, hit = { clip = "once", loop = false },
                 lap = { clip = "slow" } },
      transitions = {
        { from = "idle", to = "run", fade = 0.1, when = { { "speed", ">", 1 }, { "ok", "==", true } } },
        { from = "run", to = "idle", fade = 0.1, when = { { "speed", "<=", 1 } } },
        { from = "any", to = "hit", trigger = "hit", priority = 5 },
        { from = "hit", to = "idle", at_end = true },
        { from = "run", to = "lap", at_phase = 0.5, when = { { "lap", "==", true } } },
      } })
    local ctl = controller.new({ pose = pose, clips = clips })
    ctl:set_machine(1, 1, m)
    assert.equal("idle", ctl:state(1, 1))
    local dt = 1 / 50
    local function step(n) for _ = 1, n do ctl:update(dt) end end
    ctl:set(1, "speed", 2)
    step(3)
    assert.equal("idle", ctl:state(1, 1)) -- "ok" is not set: a condition missing holds nothing
    ctl:set(1, "ok", true)
    step(1)
    assert.equal("run", ctl:state(1, 1))
    ctl:set(1, "speed", 0.5)
    step(1)
    assert.equal("idle", ctl:state(1, 1))
    -- a trigger: any state, highest priority, consumed when it fires
    ctl:set(1, "speed", 2)
    ctl:trigger(1, "hit")
    step(1)
    assert.equal("hit", ctl:state(1, 1))
    step(1)
    assert.equal("hit", ctl:state(1, 1)) -- consumed: "any" does not fire again
    -- at the end of the non-looping clip (0.5 s: 25 steps of 0.02 s) back to idle
    local frames = 1
    while ctl:state(1, 1) == "hit" and frames < 100 do
      step(1)
      frames = frames + 1
    end
    assert.equal("idle", ctl:state(1, 1))
    assert.is_true(frames >= 24 and frames <= 27, frames)
    -- at a phase: "run" (1 s loop) goes to "lap" when its phase crosses 0.5
    step(1)
    assert.equal("run", ctl:state(1, 1))
    ctl:set(1, "lap", true)
    -- it fires in the step that takes "fast" across phase 0.5, not before
    local function fast_phase()
      for _, e in ipairs(ctl:sources(1)) do
        if e.clip:name() == "fast" then return (e.time % e.clip:duration()) / e.clip:duration() end
      end
    end
    local t, before = 0, nil
    while ctl:state(1, 1) == "run" and t < 2 do
      before = fast_phase() -- nil in the first step: its weight is still 0
      assert.is_true(before == nil or before < 0.5 or before > 0.5 + 2 * dt) -- not crossed yet
      step(1)
      t = t + dt
    end
    assert.equal("lap", ctl:state(1, 1))
    local d = clips[2]:duration() -- "fast"
    assert.equal("fast", clips[2]:name())
    assert.is_true(before < 0.5 and before + dt / d >= 0.5 - 1e-6, before)
  end)

  it("runs a machine with a synced blend space in anim_dump without a pop", function()
    local ok, out = H.run(H.lua_env() .. " " .. H.lua_exe .. " examples/anim_dump.lua "
      .. "examples/scenarios/fox_machine.lua")
    assert.is_true(ok, out)
    local d = require("cjson").decode(out)
    local states = {}
    for _, f in ipairs(d.frames) do states[f.frame] = f.state end
    assert.equal("idle", states[29])
    assert.equal("move", states[30])
    assert.equal("idle", states[150])
    assert.equal("move", states[151]) -- speed still 1.6: back to moving
    assert.equal("idle", states[161])
    -- continuity: no frame changes a joint more than 1.5x the fastest clip alone
    local fastest = 0
    for _, n in ipairs({ "Walk", "Run", "Survey" }) do
      fastest = math.max(fastest, run_chain({ { 0, n, 0 } }, 60, 4))
    end
    local worst = 0
    for k = 2, #d.frames do
      local a, b = d.frames[k - 1].joints, d.frames[k].joints
      for name, j in pairs(b) do
        local q1, q2 = a[name].rotation, j.rotation
        local d1, d2 = 0, 0
        for c = 1, 4 do
          d1 = math.max(d1, math.abs(q1[c] - q2[c]))
          d2 = math.max(d2, math.abs(q1[c] + q2[c]))
        end
        worst = math.max(worst, math.min(d1, d2))
      end
    end
    assert.is_true(worst <= 1.5 * fastest + 1e-4, ("%.4f vs %.4f"):format(worst, fastest))
  end)

  it("runs a space synced by markers in anim_dump: both clips' feet in the same frames",
    function()
      local ok, out = H.run(H.lua_env() .. " " .. H.lua_exe .. " examples/anim_dump.lua "
        .. "examples/scenarios/fox_markers.lua")
      assert.is_true(ok, out)
      local d = require("cjson").decode(out)
      local steps, halted = 0, nil
      for _, f in ipairs(d.frames) do
        local by = { Walk = {}, Run = {} }
        for _, e in ipairs(f.events) do
          if e.weight > 0 then table.insert(by[e.clip], e.name) end
        end
        -- speed 1.2 then 1.7 until frame 150: both clips have weight, and
        -- every foot-down of one is one of the other, in the same frame
        if f.frame >= 12 and f.frame < 150 then
          assert.same(by.Walk, by.Run, "frame " .. f.frame)
          steps = steps + #by.Walk
        end
        -- halted at 150: back to idle at the first left foot-down after it
        if f.frame >= 150 and not halted then
          local left = by.Walk[1] == "L" or by.Run[1] == "L"
          assert.equal(left and "idle" or "move", f.state, "frame " .. f.frame)
          if left then halted = f.frame end
        end
      end
      assert.is_true(steps >= 4)
      assert.truthy(halted, "never went back to idle")
      -- markers on a state without a space, or on a prebuilt space, are refused
      assert.matches("markers need a space", select(2, pcall(controller.machine,
        { initial = "a", states = { a = { clip = 1, markers = "L" } } })))
      local sp = controller.blend1d({ { clip = 1, at = 0 } })
      assert.matches("markers belong to its space", select(2, pcall(controller.machine,
        { initial = "a", states = { a = { space = sp, param = "x", markers = "L" } } })))
    end)

  it("reports root motion after a step beyond the float range, without raising", function()
    local skel = limber.skeleton({ { name = "root" } })
    local a = anim.clip({ name = "A", tracks = { { joint = 1, path = "translation",
      times = { 0, 1 }, values = { 0, 0, 0, 1, 0, 0 } } } }, skel)
    local ctl = controller.new({ pose = limber.pose(skel, 1), clips = { a } })
    ctl:play(1, "base", "A", { rate = 2 })
    ctl:update(3e38) -- 6e38 s of clip: counted as the float range's end
    local dx = ctl:root_motion(1)
    assert.is_true(dx > 1e38 and dx < math.huge)
    ctl:update(1 / 60)
    assert.near(2 / 60, (ctl:root_motion(1)), 1e-6)
  end)

  it("refuses bad machine definitions by name", function()
    local cases = {
      { {}, "states must be a table" },
      { { states = { a = { clip = 1 } } }, "initial must name a state" },
      { { initial = "a", states = { a = {} } }, "state 'a' needs a clip or a space" },
      { { initial = "a", states = { a = { clip = 1, colour = 1 } } }, "unknown field 'colour'" },
      { { initial = "a", states = { a = { clip = 1 } }, transitions = { { from = "a", to = "b" } } },
        "to must name a state" },
      { { initial = "a", states = { a = { clip = 1 } }, transitions = { { from = "a", to = "a",
        when = { { "x", "<>", 1 } } } } }, "when[1]" },
      { { initial = "a", states = { a = { clip = 1 } }, transitions = { { from = "a", to = "a",
        at_phase = 2 } } }, "at_phase" },
      { { initial = "a", states = { a = { space = { { clip = 1, at = 0 } } } } }, "needs a param" },
    }
    for k, c in ipairs(cases) do
      local ok, err = pcall(controller.machine, c[1])
      assert.is_false(ok, "case " .. k)
      assert.matches("bad argument #1 to 'limber.controller.machine'", tostring(err), 1, true)
      assert.matches(c[2], tostring(err), 1, true)
    end
  end)

  it("keeps machines and blend spaces as made: handles read-only, forged ones refused", function()
    local _, clips, pose = walker_setup(2)
    local states = { idle = { clip = "slow" }, run = { clip = "fast" } }
    local def = { initial = "idle", states = states, transitions = {
      { from = "idle", to = "run", when = { { "speed", ">", 1 } } },
      { from = "run", to = "idle", when = { { "speed", "<=", 1 } } } } }
    local m = controller.machine(def)
    local sp = controller.blend1d({ { clip = "slow", at = 0 }, { clip = "fast", at = 1 } })
    -- the tables it was made from, changed afterwards: nothing changes
    states.idle.clip, def.transitions[1].when[1][3] = "fast", 100
    -- the handles: a write raises; a read gives a copy; raw fields are ignored
    for _, h in ipairs({ m, sp }) do
      local ok, err = pcall(function() h.states = {} end)
      assert.is_false(ok)
      assert.matches("read-only (field 'states')", tostring(err), 1, true)
    end
    local pts = sp.points
    pts[1].at, pts[2].clip = 5, "slow"
    assert.equal(0, sp.points[1].at)
    assert.equal("fast", sp.points[2].clip)
    assert.equal("idle", m.initial)
    assert.equal(1, sp.dims)
    rawset(m, "states", {})
    rawset(m, "by_from", { idle = {} })
    rawset(sp, "points", { { clip = "nope", at = 0 } })
    local ctl = controller.new({ pose = pose, clips = clips, sources = 4 })
    ctl:set_machine(1, 1, m)
    ctl:play_space(2, 1, sp, 0.25)
    local function weight_of(i, name)
      local w = 0
      for _, e in ipairs(ctl:sources(i)) do
        if e.clip:name() == name then w = w + e.weight end
      end
      return w
    end
    ctl:update(1 / 30)
    assert.equal("idle", ctl:state(1, 1))
    assert.near(1, weight_of(1, "slow"), 1e-6) -- the state plays "slow", as made
    assert.near(0.75, weight_of(2, "slow"), 1e-6)
    assert.near(0.25, weight_of(2, "fast"), 1e-6)
    ctl:set(1, "speed", 2) -- the condition as made (> 1), not > 100
    ctl:update(1 / 30)
    assert.equal("run", ctl:state(1, 1))
    -- a table given a handle's metatable is not a handle
    local fm = setmetatable({ initial = "idle", states = {} }, getmetatable(m))
    local fs = setmetatable({ points = {}, dims = 1 }, getmetatable(sp))
    local ok, err = pcall(ctl.set_machine, ctl, 1, 1, fm)
    assert.is_false(ok)
    assert.matches("bad argument #4 to 'limber.Controller:set_machine' (machine made by "
      .. "limber.controller.machine expected, got limber.Machine)", tostring(err), 1, true)
    ok, err = pcall(ctl.play_space, ctl, 2, 1, fs, 0)
    assert.is_false(ok)
    assert.matches("bad argument #4 to 'limber.Controller:play_space' (blend space made by",
      tostring(err), 1, true)
    assert.equal("run", ctl:state(1, 1))
    -- in a machine, a forged space is read as an inline list of points: it has none
    ok, err = pcall(controller.machine, { initial = "a", states = { a = { space = fs, param = "x" } } })
    assert.is_false(ok)
    assert.matches("limber.controller.blend1d' (non-empty array of points expected", tostring(err),
      1, true)
  end)

  it("gives each handler call its own event record; the payload is the clip's", function()
    local skel, clips = walker_setup()
    local payload = { foot = "left" }
    clips[1] = anim.clip({ name = "slow", events = { { time = 0.5, name = "step", data = payload } },
      tracks = { { joint = 1, path = "translation", times = { 0, 1 },
        values = { 0, 0, 0, 1, 0, 0 } } } }, skel)
    local ctl = controller.new({ pose = limber.pose(skel, 1), clips = clips })
    local seen = {}
    for k = 1, 3 do
      ctl:on({ event = "step" }, function(_, r)
        seen[k] = { name = r.name, time = r.time, clip = r.clip, data = r.data }
        r.name, r.time, r.clip, r.data = "changed", -1, "other", nil
      end)
    end
    ctl:play(1, 1, "slow")
    ctl:update(0)
    for _ = 1, 20 do ctl:update(1 / 30) end
    for k = 1, 3 do
      assert.same({ name = "step", time = 0.5, clip = "slow" },
        { name = seen[k].name, time = seen[k].time, clip = seen[k].clip })
      assert.equal(payload, seen[k].data)
    end
  end)

  it("names the function and the argument on bad input", function()
    local _, clips, pose = walker_setup()
    local ctl = controller.new({ pose = pose, clips = clips })
    local cases = {
      { function() controller.new(5) end, "bad argument #1 to 'limber.controller'" },
      { function() controller.new({ pose = pose, clips = clips, bogus = 1 }) end,
        "unknown field 'bogus'" },
      { function() controller.new({ pose = pose, clips = {} }) end, "desc.clips" },
      { function() controller.new({ pose = pose, clips = clips, sources = 0 }) end, "desc.sources" },
      { function() controller.new({ pose = pose, clips = clips, layers = { { nme = 1 } } }) end,
        "unknown field 'nme'" },
      { function() ctl:play(1, "nope", 1) end, "no layer 'nope'" },
      { function() ctl:play(1, 1, "nope") end, "no clip 'nope'" },
      { function() ctl:play(2, 1, 1) end, "instance 2 out of range" },
      { function() ctl:play(1, 1, 1, { fade = -1 }) end, "option 'fade'" },
      { function() ctl:play(1, 1, 1, { fad = 1 }) end, "unknown option 'fad'" },
      { function() ctl:set_weight(1, 1, 2) end, "limber.Controller:set_weight" },
      { function() ctl:update(0 / 0) end, "limber.Controller:update" },
      { function() controller.new({}).play() end, "desc.pose" },
    }
    for k, c in ipairs(cases) do
      local ok, err = pcall(c[1])
      assert.is_false(ok, "case " .. k)
      assert.matches(c[2], tostring(err), 1, true)
    end
  end)
end)

describe("examples/controller.lua", function()
  it("runs its seven scenes and prints what they did", function()
    local ok, out = H.run(H.lua_env() .. " " .. H.lua_exe .. " examples/controller.lua")
    assert.is_true(ok, out)
    -- four sources in the interrupted fade, their shares summing to 1
    local shares = out:match("at frame 82 the base layer blends ([^\n]*)")
    local sum, n = 0, 0
    for w in shares:gmatch("(%d%.%d%d)") do sum, n = sum + tonumber(w), n + 1 end
    assert.equal(4, n)
    assert.near(1, sum, 0.02)
    assert.truthy(tonumber(out:match("largest change of a joint between two frames: (%S+)")) < 0.32)
    -- the blend space's clips share one phase
    for a, b in out:gmatch("Walk w %S+ phase (%S+), Run w %S+ phase (%S+)") do assert.equal(a, b) end
    assert.truthy(out:find("machine: states in order: idle -> move -> idle", 1, true), out)
    -- foot-down markers found in both clips; synced by them, the left feet
    -- come down together, where normalised time lets them drift apart
    assert.truthy(out:find("markers: Walk %([%d.]+ s%): %a at [%d.]+ s, %a at [%d.]+ s"), out)
    local downs, alone = out:match("sync by markers: (%d+) frames with a left foot down, (%d+)")
    assert.truthy(tonumber(downs) >= 8, out)
    assert.equal("0", alone)
    local _, alone_t = out:match("sync by normalised time: (%d+) frames with a left foot down, (%d+)")
    assert.truthy(tonumber(alone_t) > 0, out)
    -- the 2D space: barycentric weights, exactly Walk at its point
    assert.truthy(out:find("2D space at (0.2, 0.3): Survey 0.50, Walk 0.20, Run 0.30", 1, true), out)
    assert.truthy(out:find("2D space at (1.0, 0.0): Walk 1.00\n", 1, true), out)
    -- callbacks: steps (event at 0.3 s) and laps of Walk in 2 s at rate r,
    -- as plain arithmetic counts them
    local d = fox_clips(fox_asset())[2]:duration()
    for i = 1, 3 do
      local r = 0.5 * i
      local steps, laps = math.floor((2 * r - 0.3) / d) + 1, math.floor(2 * r / d)
      assert.truthy(out:find(("callbacks: fox %d (rate %.1f): %d steps (left foot), %d laps in 2 s")
        :format(i, r, steps, laps), 1, true), out)
    end
    -- the crowd moved by its root motion: each fox's distance is the hips'
    -- displacement over 2 s of Walk at its rate (the plain-Lua rule), and
    -- its steps as above
    -- (the example's clips: packed, as a glTF load makes them by default)
    local walk = fox_clips(gltf.load(H.assets .. "Fox/Fox.glb"))[2]
    local N = 40
    for _, i in ipairs({ 1, N / 2, N }) do
      local r = 0.5 + i / N
      local dist, steps = out:match(("crowd: fox %d %%(rate %.3f%%): root motion (%%S+) units along z, (%%d+) steps")
        :format(i, r))
      assert.truthy(dist, out)
      local _, _, z1 = limber.anim._root_pos(walk, 3, 2 * r, true, walk:duration())
      local _, _, z0 = limber.anim._root_pos(walk, 3, 0, true, walk:duration())
      assert.near(z1 - z0, tonumber(dist), 1e-3 * math.abs(z1 - z0) + 1e-3)
      assert.truthy(math.abs(z1 - z0) > 0.1) -- (the Fox walks nearly in place)
      assert.equal(math.floor((2 * r - 0.3) / d) + 1, tonumber(steps))
    end
  end)
end)

describe("examples/anim_dump.lua", function()
  it("runs the scenario format and prints the issue's JSON", function()
    local ok, out = H.run(H.lua_env() .. " " .. H.lua_exe .. " examples/anim_dump.lua "
      .. "examples/scenarios/fox_fades.lua")
    assert.is_true(ok, out)
    local json = require "cjson"
    local d = json.decode(out)
    assert.equal(240, #d.frames)
    local f = d.frames[96]
    assert.equal(95, f.frame)
    assert.near(95 / 60, f.t, 1e-6)
    assert.equal(json.null, f.state)
    assert.equal(4, #f.root_motion)
    local j = f.joints.b_Spine01_02
    assert.equal(3, #j.translation)
    assert.equal(4, #j.rotation)
    assert.equal(3, #j.scale)
    -- frame 95: the upper layer plays Walk from 0.2 s, 5 frames in, at weight 1
    local a = fox_asset()
    local walk
    for _, an in ipairs(a.animations) do if an.name == "Walk" then walk = an.clips[1] end end
    local skel = a.skeletons[1].skeleton
    local q = { walk:sample_joint(skel:find("b_Spine01_02"), "rotation", 0.2 + 5 / 60) }
    local d1, d2 = 0, 0
    for c = 1, 4 do
      d1 = math.max(d1, math.abs(q[c] - j.rotation[c]))
      d2 = math.max(d2, math.abs(q[c] + j.rotation[c]))
    end
    assert.is_true(math.min(d1, d2) < 1e-5)
    -- an unknown key is an error
    local bad = os.tmpname()
    local fh = io.open(bad, "w")
    fh:write("return { model = 'examples/assets/Fox/Fox.glb', fps = 60, frames = 2, colour = 1 }")
    fh:close()
    local ok2, msg = H.run(H.lua_env() .. " " .. H.lua_exe .. " examples/anim_dump.lua " .. bad)
    os.remove(bad)
    assert.is_nil(ok2)
    assert.matches("unknown key 'colour'", msg, 1, true)
  end)
end)
