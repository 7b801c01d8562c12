-- Markers (issue 18): events set on any clip (limber.anim.set_events), blend
-- spaces synced by markers, and transitions at a marker.
--
-- Sync is checked against a plain-Lua model of what the issue asks: every
-- clip of a space sits at one marker phase psi (the integer part counts the
-- markers passed, the fraction is the way to the next one), and psi moves
-- through segment g at 1 / (the weighted mean of the clips' segment g
-- lengths). The model integrates that exactly, step by step, with the
-- weights the parameter gives; after every update each clip's time must be
-- that phase's time, and each clip's markers must be crossed in the same
-- update as the first clip's.
local H = require "spec.helper"
local limber = require "limber"
local anim = require "limber.anim"
local gltf = require "limber.gltf"
local controller = require "limber.controller"

H.seed("markers")

-- A Fox of its own (events set here stay here).
local function fox()
  local a = gltf.load(H.assets .. "Fox/Fox.glb", { tolerance = 0 })
  local clips = {}
  for _, an in ipairs(a.animations) do clips[#clips + 1] = an.clips[1] end
  return a.skeletons[1].skeleton, clips
end

-- Marker phase of time t for a clip whose markers (sorted times in [0, d))
-- are `m`, numbered from marker 1 + off.
local function psi_of(m, d, off, t)
  local K = #m
  local j, from = K, m[K] - d
  for q = K, 1, -1 do
    if m[q] <= t then j, from = q, m[q]; break end
  end
  local to = j < K and m[j + 1] or m[1] + d
  if from < m[1] and j == K then to = m[1] end
  return (j - 1 - off) % K + (t - from) / (to - from)
end

-- Length of segment g (0-based, the first clip's numbering) of a clip.
local function seg(m, d, off, g)
  local K = #m
  local j = (g + off) % K + 1
  return (j < K and m[j + 1] or m[1] + d) - m[j]
end

-- Phase distance on a cycle of K.
local function pdist(a, b, K)
  local x = math.abs(a - b) % K
  return math.min(x, K - x)
end

-- Time distance on a clip of d seconds.
local tdist = pdist

-- The time of a clip (markers m, d, numbered from 1 + off) at phase psi.
local function clip_time(m, d, off, psi)
  local g = math.floor(psi)
  return (m[(g + off) % #m + 1] + (psi - g) * seg(m, d, off, g)) % d
end

-- K random marker times in [0, d), at least 0.05 s apart.
local function random_markers(K, d)
  while true do
    local t = {}
    for k = 1, K do t[k] = math.random() * d end
    table.sort(t)
    local ok = true
    for k = 1, K do
      local nx = k < K and t[k + 1] or t[1] + d
      if nx - t[k] < 0.05 then ok = false end
    end
    if ok then return t end
  end
end

describe("limber.anim.set_events", function()
  it("sets, replaces and removes the events of a loaded clip, and refuses bad ones", function()
    local _, clips = fox()
    local walk = clips[2]
    assert.same({}, anim.events(walk))
    assert.equal(walk, anim.set_events(walk, { { time = 0.4, name = "r", data = { 7 } },
                                               { time = 0.1, name = "l" } }))
    local ev = anim.events(walk)
    assert.equal(2, #ev)
    assert.same({ 0.1, "l" }, { ev[1].time, ev[1].name })
    assert.same({ 0.4, "r", 7 }, { ev[2].time, ev[2].name, ev[2].data[1] })
    local seen = {}
    anim.step(walk, 0, 0.5, true, function(_, name) seen[#seen + 1] = name end)
    assert.same({ "l", "r" }, seen)
    -- errors name the function and leave the events as they were
    for _, bad in ipairs({
      { { { time = 5, name = "x" } }, "outside the clip" },
      { { { time = -1, name = "x" } }, "outside the clip" },
      { { { time = 0 / 0, name = "x" } }, "outside the clip" },
      { { { time = 0.1 } }, "events[1] must be" },
      { { 3 }, "events[1] must be" },
      { 7, "array of events or nil expected" },
    }) do
      local ok, err = pcall(anim.set_events, walk, bad[1])
      assert.is_false(ok)
      assert.matches("limber.anim.set_events", tostring(err), 1, true)
      assert.matches(bad[2], tostring(err), 1, true)
      assert.equal(2, #anim.events(walk))
    end
    assert.has_error(function() anim.set_events({}, {}) end)
    anim.set_events(walk, {})
    assert.same({}, anim.events(walk))
    anim.set_events(walk, { { time = 0.2, name = "a" } })
    anim.set_events(walk, nil)
    assert.same({}, anim.events(walk))
  end)

  it("keeps events set on a packed clip through a snapshot", function()
    local a = gltf.load(H.assets .. "Fox/Fox.glb")
    local run = a.animations[3].clips[1]
    assert.is_true(run:packed())
    anim.set_events(run, { { time = 0.3, name = "foot", data = "left" } })
    local back = limber.snapshot.load(limber.snapshot.save(a))
    local ev = anim.events(back.animations[3].clips[1])
    assert.equal(1, #ev)
    assert.same({ 0.3, "foot", "left" }, { ev[1].time, ev[1].name, ev[1].data })
  end)
end)

describe("blend spaces synced by markers", function()
  -- Plays a 1D space of Walk (at 0.5) and Run (at 2) with random markers
  -- at random parameters and random steps; checks each update against the
  -- model. `names`: the marker names of Walk and of Run, in time order.
  local function check_1d(K, names_w, names_r, off_r)
    local skel, clips = fox()
    local walk, run = clips[2], clips[3]
    local dw, dr = walk:duration(), run:duration()
    local mw, mr = random_markers(K, dw), random_markers(K, dr)
    local ew, er = {}, {}
    for k = 1, K do
      ew[k] = { time = mw[k], name = names_w[k] }
      er[k] = { time = mr[k], name = names_r[k] }
    end
    -- and an event that is no marker, once per Walk cycle
    local snd = math.random() * dw
    ew[K + 1] = { time = snd, name = "snd" }
    -- Walk's time at unwrapped marker phase p (a cycle of K markers is dw)
    local function walk_time(p)
      local g = math.floor(p)
      local cyc = math.floor(g / K)
      local j = g - cyc * K
      return cyc * dw + mw[j + 1] + (p - g) * seg(mw, dw, 0, j)
    end
    anim.set_events(walk, ew)
    anim.set_events(run, er)
    local set = {}
    for _, n in ipairs(names_w) do set[#set + 1] = n end
    local space = controller.blend1d({ { clip = "Walk", at = 0.5 }, { clip = "Run", at = 2 } },
      { markers = set })
    local pose = limber.pose(skel, 1)
    local ctl = controller.new({ pose = pose, clips = clips, locals = true })
    local x = 0.5 + math.random() * 1.5
    local phase = math.random()
    ctl:play_space(1, "base", space, x, { phase = phase })
    local psi = psi_of(mw, dw, 0, phase * dw)
    local function weights(v)
      local u = math.max(0, math.min(1, (v - 0.5) / 1.5))
      return 1 - u, u
    end
    local worst, crossings, sounds, expected = 0, 0, 0, 0
    local is_marker = {}
    for _, nm in ipairs(names_w) do is_marker[nm] = true end
    for f = 1, 900 do
      if f % 53 == 0 then
        x = math.random() < 0.2 and (math.random() < 0.5 and 0.5 or 2) or 0.5 + math.random() * 1.5
        ctl:set_param(1, "base", x, 0.2)
      end
      -- now and then a hitch: a step over several markers
      local dt = f % 97 == 50 and 0.4 + math.random() or (0.3 + 1.4 * math.random()) / 60
      ctl:update(dt)
      -- the model: psi through the segments at the target weights
      local a, b = weights(x)
      local el = dt
      local from = psi
      while el > 0 do
        local g = math.floor(psi)
        local L = a * seg(mw, dw, 0, g) + b * seg(mr, dr, off_r, g)
        local rem = (g + 1 - psi) * L
        if el < rem then
          psi, el = psi + el / L, 0
        else
          psi, el = g + 1, el - rem
        end
      end
      -- the "snd" crossings of this step along Walk's own path
      local t0, t1 = walk_time(from), walk_time(psi)
      local want_snd = math.floor((t1 - snd) / dw) - math.floor((t0 - snd) / dw)
      psi = psi % K
      local tw, tr
      for _, e in ipairs(ctl:sources(1)) do
        if e.clip == walk then tw = e.time elseif e.clip == run then tr = e.time end
      end
      -- each clip's time against the model's (seconds: the same float
      -- noise in a clip's time is a larger phase on a shorter segment)
      if tw then worst = math.max(worst, tdist(tw, clip_time(mw, dw, 0, psi), dw)) end
      if tr then worst = math.max(worst, tdist(tr, clip_time(mr, dr, off_r, psi), dr)) end
      -- markers of both clips in the same update, the same names
      local by = { [walk:name()] = {}, [run:name()] = {} }
      local got_snd, walk_on = 0, false
      for _, e in ipairs(ctl:events(1)) do
        if is_marker[e.name] then table.insert(by[e.clip], e.name) end
        if e.name == "snd" then got_snd = got_snd + 1 end
      end
      for _, e in ipairs(ctl:sources(1)) do walk_on = walk_on or e.clip == walk end
      if walk_on then
        assert.equal(want_snd, got_snd, "frame " .. f)
        sounds, expected = sounds + got_snd, expected + want_snd
      end
      if tw and tr then
        table.sort(by.Walk)
        table.sort(by.Run)
        assert.same(by.Walk, by.Run, "frame " .. f)
        crossings = crossings + #by.Walk
      end
    end
    assert.is_true(worst < 1e-6, ("a clip's time off the model by %g s"):format(worst))
    assert.is_true(crossings > 10)
    -- the other event as often as Walk's own path crossed it, frame by
    -- frame: never twice, never skipped (a step that passes a marker moves
    -- each clip along its own path, hitches too)
    assert.is_true(sounds > 5)
  end

  it("keeps one marker phase in 1D spaces, as a plain-Lua model integrates it", function()
    for _ = 1, 3 do
      local K = math.random(1, 3)
      local names = {}
      for k = 1, K do names[k] = "m" .. k end
      check_1d(K, names, names, 0)
    end
  end)

  it("matches markers by name: a run starting on the other foot", function()
    -- Walk: L then R; Run: R then L (in time order): Run's R follows Walk's R
    check_1d(2, { "L", "R" }, { "R", "L" }, 1)
  end)

  it("syncs a 2D space by markers, and a machine's space state", function()
    local skel, clips = fox()
    for k = 1, 3 do
      anim.set_events(clips[k], { { time = 0.1 * k, name = "down" },
                                  { time = 0.1 * k + clips[k]:duration() / 2, name = "down" } })
    end
    local space = controller.blend2d({ { clip = "Survey", at = { 0, 0 } },
                                       { clip = "Walk", at = { 1, 0 } },
                                       { clip = "Run", at = { 0, 1 } } }, { markers = "down" })
    local m = controller.machine({ initial = "move", states = {
      move = { space = space, param = { "vx", "vy" }, smooth = 0.1 } } })
    local ctl = controller.new({ pose = limber.pose(skel, 1), clips = clips, locals = true })
    ctl:set(1, "vx", 0.3)
    ctl:set(1, "vy", 0.3)
    ctl:set_machine(1, "base", m)
    local worst = 0
    for f = 1, 400 do
      if f % 61 == 0 then ctl:set(1, "vx", math.random()); ctl:set(1, "vy", math.random()) end
      ctl:update(1 / 60)
      local ph = {}
      for _, e in ipairs(ctl:sources(1)) do
        local k = e.clip == clips[1] and 1 or (e.clip == clips[2] and 2 or 3)
        local d = e.clip:duration()
        ph[#ph + 1] = psi_of({ 0.1 * k, 0.1 * k + d / 2 }, d, 0, e.time)
      end
      for q = 2, #ph do worst = math.max(worst, pdist(ph[q], ph[1], 2)) end
    end
    assert.is_true(worst < 1e-5, "clips apart by " .. worst)
  end)

  it("refuses bad markers by name and leaves the layer playing", function()
    local skel, clips = fox()
    local ctl = controller.new({ pose = limber.pose(skel, 1), clips = clips, locals = true })
    ctl:play(1, "base", "Survey")
    for _, o in ipairs({ { markers = 3 }, { markers = {} }, { markers = { "a", 4 } },
                         { markers = "" }, { markers = "a", sync = false } }) do
      local ok, err = pcall(controller.blend1d, { { clip = "Walk", at = 0 } }, o)
      assert.is_false(ok)
      assert.matches("bad argument #2 to 'limber.controller.blend1d'", tostring(err), 1, true)
      ok, err = pcall(controller.blend2d, { { clip = "Walk", at = { 0, 0 } } }, o)
      assert.is_false(ok)
      assert.matches("bad argument #2 to 'limber.controller.blend2d'", tostring(err), 1, true)
    end
    local space = controller.blend1d({ { clip = "Walk", at = 0 }, { clip = "Run", at = 1 } },
      { markers = { "L", "R" } })
    local function refused(what)
      local ok, err = pcall(ctl.play_space, ctl, 1, "base", space, 0.5)
      assert.is_false(ok)
      assert.matches("bad argument #4 to 'limber.Controller:play_space'", tostring(err), 1, true)
      assert.matches(what, tostring(err), 1, true)
      local srcs = ctl:sources(1)
      assert.equal(1, #srcs)
      assert.equal("Survey", srcs[1].clip:name())
    end
    anim.set_events(clips[2], { { time = 0.1, name = "L" }, { time = 0.4, name = "R" } })
    anim.set_events(clips[3], { { time = 0.1, name = "L" } })
    refused("the markers of clip 'Run' (L) do not follow those of 'Walk' (L, R)")
    anim.set_events(clips[3], { { time = 0.1, name = "L" }, { time = 0.3, name = "L" } })
    refused("the markers of clip 'Run' (L, L) do not follow those of 'Walk' (L, R)")
    anim.set_events(clips[3], { { time = 0.1, name = "L" }, { time = 0.1, name = "R" } })
    refused("clip 'Run' has two markers at 0.1 s")
    anim.set_events(clips[3], { { time = 0.2, name = "R" }, { time = 0.6, name = "L" } })
    ctl:play_space(1, "base", space, 0.5)
    assert.equal(2, #ctl:sources(1))
  end)
end)

describe("blend spaces synced by markers, clips without them", function()
  it("plays a clip without the markers as if they were evenly spaced from its start", function()
    local skel, clips = fox()
    local walk, run = clips[2], clips[3]
    local dw, dr = walk:duration(), run:duration()
    anim.set_events(run, { { time = 0.2, name = "L" }, { time = 0.9, name = "R" } })
    -- Walk first in the space but without markers: Run's numbering holds
    local space = controller.blend1d({ { clip = "Walk", at = 0 }, { clip = "Run", at = 1 } },
      { markers = { "L", "R" } })
    local ctl = controller.new({ pose = limber.pose(skel, 1), clips = clips, locals = true })
    ctl:play_space(1, "base", space, 0.4)
    local worst = 0
    for _ = 1, 300 do
      ctl:update(1 / 60)
      local tw, tr
      for _, e in ipairs(ctl:sources(1)) do
        if e.clip == walk then tw = e.time else tr = e.time end
      end
      local pr = psi_of({ 0.2, 0.9 }, dr, 0, tr)
      local pw = psi_of({ 0, dw / 2 }, dw, 0, tw)
      worst = math.max(worst, pdist(pr, pw, 2))
    end
    assert.is_true(worst < 1e-5, "apart by " .. worst)
    -- no clip with markers: one at each start, that is normalised time
    local none = controller.blend1d({ { clip = "Survey", at = 0 }, { clip = "Walk", at = 1 } },
      { markers = "nothing" })
    ctl:play_space(1, "base", none, 0.3, { phase = 0.25 })
    for _ = 1, 100 do
      ctl:update(1 / 60)
      local ph = {}
      for _, e in ipairs(ctl:sources(1)) do ph[#ph + 1] = e.time / e.clip:duration() end
      assert.equal(2, #ph)
      assert.is_true(pdist(ph[1], ph[2], 1) < 1e-6)
    end
  end)
end)

describe("blend spaces synced by markers, odd steps", function()
  local function setup()
    local skel, clips = fox()
    anim.set_events(clips[2], { { time = 0.0, name = "L" }, { time = 0.3, name = "R" } })
    anim.set_events(clips[3], { { time = 0.1, name = "L" }, { time = 0.58, name = "R" } })
    local ctl = controller.new({ pose = limber.pose(skel, 1), clips = clips })
    ctl:play_space(1, "base", controller.blend1d({ { clip = "Walk", at = 0.5 },
      { clip = "Run", at = 2 } }, { markers = { "L", "R" } }), 1.2)
    local function spread()
      local src = ctl:sources(1)
      local a = psi_of({ 0.0, 0.3 }, clips[2]:duration(), 0, src[1].time)
      local b = psi_of({ 0.1, 0.58 }, clips[3]:duration(), 0, src[2].time)
      return pdist(a, b, 2)
    end
    return ctl, spread
  end

  it("keeps going in step after enormous steps and tiny ones", function()
    local ctl, spread = setup()
    local steps = { 1e6, 1e15, -1e9, 1e-300, 1e-17, 3.3e38, -9.2e18 }
    local minint = rawget(math, "mininteger") -- (Lua 5.3 and later)
    if minint then steps[#steps + 1] = minint end
    for _, big in ipairs(steps) do
      ctl:update(big)
      local before = ctl:sources(1)[1].time
      local worst = 0
      for _ = 1, 60 do
        ctl:update(1 / 60)
        worst = math.max(worst, spread())
      end
      assert.is_true(worst < 1e-4, ("after %g: apart by %g"):format(big, worst))
      assert.are_not.equal(before, ctl:sources(1)[1].time) -- still moving
    end
  end)

  it("changes rates only at markers: the step that lands and the one after", function()
    local ctl = setup()
    local prev, changes, marks = nil, 0, 0
    for _ = 1, 600 do
      ctl:update(1 / 60)
      local src = ctl:sources(1)
      local rates = src[1].rate .. " " .. src[2].rate
      if prev and rates ~= prev then changes = changes + 1 end
      prev = rates
      local walk_marked = false
      for _, e in ipairs(ctl:events(1)) do
        if e.clip == "Walk" then walk_marked = true end
      end
      if walk_marked then marks = marks + 1 end
    end
    assert.is_true(marks >= 10)
    assert.is_true(changes <= 2 * marks + 2, ("%d rate changes, %d markers"):format(changes, marks))
  end)

  it("follows the first clip moved on the plan, never playing the move back", function()
    local ctl, spread = setup()
    for _ = 1, 10 do ctl:update(1 / 60) end
    local plan = ctl:plan()
    local k, t = plan:source(1, 1, 1)
    assert.truthy(k)
    plan:set_time(1, 1, 1, t + 0.2) -- the user jumps the first clip ahead
    local worst = 0
    for f = 1, 120 do
      ctl:update(1 / 60)
      for _, e in ipairs(ctl:sources(1)) do
        assert.is_true(e.rate >= 0, "frame " .. f .. ": a rate of " .. e.rate)
      end
      if f > 40 then worst = math.max(worst, spread()) end
    end
    assert.is_true(worst < 1e-5, "apart by " .. worst)
  end)
end)

describe("machines with marker spaces", function()
  it("refuses markers that do not fit at set_machine, and fails an update cleanly", function()
    local skel, clips = fox()
    anim.set_events(clips[2], { { time = 0.1, name = "L" }, { time = 0.4, name = "R" } })
    anim.set_events(clips[3], { { time = 0.1, name = "L" } })
    local sp = controller.blend1d({ { clip = "Walk", at = 0.5 }, { clip = "Run", at = 2 } },
      { markers = { "L", "R" } })
    local m = controller.machine({ initial = "idle", states = { idle = { clip = "Survey" },
      move = { space = sp, param = "speed" } }, transitions = {
        { from = "idle", to = "move", trigger = "go" } } })
    local ctl = controller.new({ pose = limber.pose(skel, 3), clips = clips })
    local ok, err = pcall(ctl.set_machine, ctl, 1, "base", m)
    assert.is_false(ok)
    assert.matches("bad argument #4 to 'limber.Controller:set_machine' (the markers of clip 'Run'",
      tostring(err), 1, true)
    assert.is_nil(ctl:state(1, "base"))
    -- markers that fit when the machine is set, changed before it enters
    -- the space: that update raises, the machine stays where it was (its
    -- trigger kept), the other instances move on
    anim.set_events(clips[3], { { time = 0.2, name = "R" }, { time = 0.6, name = "L" } })
    for i = 1, 3 do ctl:set_machine(i, "base", m) end
    ctl:update(1 / 60)
    anim.set_events(clips[3], { { time = 0.1, name = "L" } })
    ctl:trigger(2, "go")
    ok, err = pcall(ctl.update, ctl, 1 / 60)
    assert.is_false(ok)
    assert.matches("limber.Controller:update: instance 2, layer 1: cannot enter state 'move'",
      tostring(err), 1, true)
    assert.equal("idle", ctl:state(2, "base"))
    assert.equal("Survey", ctl:sources(2)[1].clip:name())
    anim.set_events(clips[3], { { time = 0.2, name = "R" }, { time = 0.6, name = "L" } })
    ctl:trigger(3, "go")
    ctl:update(1 / 60) -- both enter now: 2's trigger was kept
    assert.equal("move", ctl:state(2, "base"))
    assert.equal("move", ctl:state(3, "base"))
    assert.equal("idle", ctl:state(1, "base"))
  end)

  it("takes a marker at the clip's end as the one at its start", function()
    local skel, clips = fox()
    local d = clips[2]:duration()
    anim.set_events(clips[2], { { time = 0, name = "L" }, { time = 0.3, name = "R" },
                                { time = d, name = "L" } })
    anim.set_events(clips[3], { { time = 0.2, name = "L" }, { time = 0.7, name = "R" } })
    local ctl = controller.new({ pose = limber.pose(skel, 1), clips = clips })
    ctl:play_space(1, "base", controller.blend1d({ { clip = "Walk", at = 0 },
      { clip = "Run", at = 1 } }, { markers = { "L", "R" } }), 0.5)
    local worst = 0
    for _ = 1, 200 do
      ctl:update(1 / 60)
      local src = ctl:sources(1)
      local a = psi_of({ 0, 0.3 }, d, 0, src[1].time)
      local b = psi_of({ 0.2, 0.7 }, clips[3]:duration(), 0, src[2].time)
      worst = math.max(worst, pdist(a, b, 2))
    end
    assert.is_true(worst < 1e-5, "apart by " .. worst)
  end)
end)

describe("transitions at a marker", function()
  it("fire in the update whose step crosses the marker, on clips and space states", function()
    local skel, clips = fox()
    anim.set_events(clips[2], { { time = 0.3, name = "down" } })
    anim.set_events(clips[3], { { time = 0.9, name = "down" } })
    local m = controller.machine({ initial = "walk", states = {
      walk = { clip = "Walk" },
      move = { space = { { clip = "Walk", at = 0 }, { clip = "Run", at = 1 } }, param = "speed" },
    }, transitions = {
      { from = "walk", to = "move", at_marker = "down", when = { { "go", "==", true } } },
      { from = "move", to = "walk", at_marker = "down", when = { { "go", "==", false } } },
    } })
    local ctl = controller.new({ pose = limber.pose(skel, 1), clips = clips, locals = true })
    ctl:set(1, "speed", 0.7)
    ctl:set(1, "go", false)
    ctl:set_machine(1, "base", m)
    local fired = 0
    for f = 1, 600 do
      if f == 20 then ctl:set(1, "go", true) end
      if f == 200 then ctl:set(1, "go", false) end
      local before = ctl:state(1, "base")
      ctl:update(1 / 60)
      -- the reference: did a source of the state cross "down" in this update?
      local crossed = false
      for _, e in ipairs(ctl:events(1)) do
        if e.name == "down" then crossed = true end
      end
      local want = (before == "walk" and f >= 20 and f < 200)
        or (before == "move" and f >= 200)
      if ctl:state(1, "base") ~= before then
        fired = fired + 1
        assert.is_true(crossed and want, "frame " .. f)
      else
        assert.is_false(crossed and want, "frame " .. f)
      end
    end
    assert.equal(2, fired)
  end)

  it("refuses a marker that is not a name", function()
    local ok, err = pcall(controller.machine, { initial = "a", states = { a = { clip = 1 } },
      transitions = { { from = "a", to = "a", at_marker = 3 } } })
    assert.is_false(ok)
    assert.matches("at_marker must be an event name", tostring(err), 1, true)
  end)
end)
