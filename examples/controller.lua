--- The controller in seven short scenes on the Fox (limber.controller,
-- docs/controller.md), each printing what a game would look at:
--   1. fades that never pop: Walk -> Run, interrupted by Survey, then Walk;
--   2. a 1D blend space by speed (Walk at 0.5, Run at 2), its clips synced;
--   3. a state machine: idle / move by a speed parameter, a trigger;
--   4. foot-down markers found in the clips (where each hind foot comes
--      down), and the blend space synced by them: the feet of Walk and Run
--      come down in the same frame, where normalised time lets them drift;
--   5. a 2D blend space (Survey, Walk and Run on a plane), its weights;
--   6. callbacks (a step event by name, with its payload; laps of Walk)
--      over a small crowd, after each update;
--   7. a crowd moved by its root motion and counting its steps, each read
--      for every fox in one C pass (root_motions, crowd_events).
--
--   lua5.4 examples/controller.lua
package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local C = require "common"
local limber = require "limber"
local controller = require "limber.controller"

local fox = limber.gltf.load(C.root .. "/examples/assets/Fox/Fox.glb")
local skel = fox.skeletons[1].skeleton
local clips = {}
for _, an in ipairs(fox.animations) do clips[#clips + 1] = an.clips[1] end
local DT = 1 / 60

local function new()
  local pose = limber.pose(skel, 1)
  return controller.new({ pose = pose, clips = clips, locals = true }), pose
end

-- The largest change of a joint's rotation (a quaternion component, up to
-- sign) between two frames.
local function rotations(pose)
  local out = {}
  for j = 1, skel:joint_count() do out[j] = select(2, pose:trs(1, j)) end
  return out
end
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

-- 1. interrupted fades
do
  local ctl, pose = new()
  ctl:play(1, "base", "Walk")
  ctl:update(0)
  local prev, worst = rotations(pose), 0
  for f = 1, 180 do
    if f == 60 then ctl:play(1, "base", "Run", { fade = 0.5 }) end
    if f == 75 then ctl:play(1, "base", "Survey", { fade = 0.5 }) end
    if f == 80 then ctl:play(1, "base", "Walk", { fade = 0.5 }) end
    ctl:update(DT)
    local cur = rotations(pose)
    worst = math.max(worst, change(prev, cur))
    prev = cur
    if f == 82 then
      local parts = {}
      for _, e in ipairs(ctl:sources(1)) do
        parts[#parts + 1] = ("%s %.2f"):format(e.clip:name(), e.effective)
      end
      print("fades: at frame 82 the base layer blends " .. table.concat(parts, ", "))
    end
  end
  print(("fades: the largest change of a joint between two frames: %.3f"):format(worst))
end

-- 2. a blend space
do
  local ctl = new()
  local walk_run = controller.blend1d({ { clip = "Walk", at = 0.5 }, { clip = "Run", at = 2 } })
  ctl:play_space(1, "base", walk_run, 0.5)
  for f = 1, 120 do
    ctl:set_param(1, "base", 0.5 + 1.5 * f / 120) -- speed up from walk to run
    ctl:update(DT)
    if f % 40 == 0 then
      local parts = {}
      for _, e in ipairs(ctl:sources(1)) do
        parts[#parts + 1] = ("%s w %.2f phase %.3f"):format(e.clip:name(), e.weight,
          e.time / e.clip:duration())
      end
      print(("blend space: speed %.2f: %s"):format(0.5 + 1.5 * f / 120, table.concat(parts, ", ")))
    end
  end
end

-- 3. a state machine
do
  local ctl = new()
  local m = controller.machine({
    initial = "idle",
    states = { idle = { clip = "Survey" },
               move = { space = { { clip = "Walk", at = 0.5 }, { clip = "Run", at = 2 } },
                        param = "speed" } },
    transitions = {
      { from = "idle", to = "move", fade = 0.3, when = { { "speed", ">", 0.1 } } },
      { from = "move", to = "idle", fade = 0.3, when = { { "speed", "<=", 0.1 } } },
      { from = "any", to = "idle", fade = 0.25, trigger = "stop", priority = 1 },
    } })
  ctl:set(1, "speed", 0)
  ctl:set_machine(1, "base", m)
  local seen = { ctl:state(1, "base") }
  for f = 1, 200 do
    if f == 20 then ctl:set(1, "speed", 1.2) end
    if f == 100 then ctl:trigger(1, "stop") end
    if f == 101 then ctl:set(1, "speed", 0) end
    ctl:update(DT)
    local st = ctl:state(1, "base")
    if st ~= seen[#seen] then seen[#seen + 1] = st end
  end
  print("machine: states in order: " .. table.concat(seen, " -> "))
end

-- 4. sync by markers
do
  local anim = require "limber.anim"
  local pose = limber.pose(skel, 1)
  local ctl = controller.new({ pose = pose, clips = clips, models = "all" })
  local feet = { L = 19, R = 23 } -- b_LeftFoot02, b_RightFoot02 (hind feet)
  local named = {}
  for _, c in ipairs(clips) do named[c:name()] = c end
  -- where a foot comes down: the last time before its lowest point at which
  -- it sank below a fifth of its height range (240 samples of the cycle)
  local function touch_down(name, joint)
    local d, h = named[name]:duration(), {}
    for s = 0, 239 do
      ctl:play(1, "base", name, { time = d * s / 240 })
      ctl:update(0)
      h[s] = pose:model(1, joint)[14]
    end
    local lo, hi, low = math.huge, -math.huge, 0
    for s = 0, 239 do
      if h[s] < lo then lo, low = h[s], s end
      hi = math.max(hi, h[s])
    end
    local s = low
    while h[(s - 1) % 240] <= lo + 0.2 * (hi - lo) and (s - 1) % 240 ~= low do s = (s - 1) % 240 end
    return d * s / 240
  end
  for _, name in ipairs({ "Walk", "Run" }) do
    local ev = {}
    for foot, joint in pairs(feet) do
      ev[#ev + 1] = { time = touch_down(name, joint), name = foot }
    end
    anim.set_events(named[name], ev)
    local ts = anim.events(named[name])
    print(("markers: %s (%.3f s): %s at %.3f s, %s at %.3f s"):format(name,
      named[name]:duration(), ts[1].name, ts[1].time, ts[2].name, ts[2].time))
  end
  -- the same walk-run blend, synced by normalised time and by markers: in
  -- how many frames does one clip's left foot come down without the other's?
  for _, opts in ipairs({ {}, { markers = { "L", "R" } } }) do
    local space = controller.blend1d({ { clip = "Walk", at = 0.5 }, { clip = "Run", at = 2 } },
      opts)
    ctl:play_space(1, "base", space, 1.25)
    local alone, downs = 0, 0
    for _ = 1, 600 do
      ctl:update(DT)
      local by = {}
      for _, e in ipairs(ctl:events(1)) do
        if e.name == "L" then by[e.clip] = true end
      end
      if by.Walk or by.Run then downs = downs + 1 end
      if (by.Walk or false) ~= (by.Run or false) then alone = alone + 1 end
    end
    print(("markers: sync by %s: %d frames with a left foot down, %d of them only one clip's")
      :format(opts.markers and "markers" or "normalised time", downs, alone))
  end
end

-- 5. a 2D blend space: barycentric weights inside the triangle, exactly a
-- clip at its point
do
  local ctl = new()
  local plane = controller.blend2d({ { clip = "Survey", at = { 0, 0 } },
                                     { clip = "Walk", at = { 1, 0 } },
                                     { clip = "Run", at = { 0, 1 } } })
  for _, p in ipairs({ { 0.2, 0.3 }, { 1, 0 }, { 0.5, 0.5 } }) do
    ctl:play_space(1, "base", plane, p)
    ctl:update(0)
    local parts = {}
    for _, e in ipairs(ctl:sources(1)) do
      parts[#parts + 1] = ("%s %.2f"):format(e.clip:name(), e.weight)
    end
    print(("2D space at (%.1f, %.1f): %s"):format(p[1], p[2], table.concat(parts, ", ")))
  end
end

-- 6. callbacks: three foxes walking at different rates; a step event with
-- a payload on Walk, and Walk's laps, counted after each update
do
  local ctl = controller.new({ pose = limber.pose(skel, 3), clips = clips })
  local named = {}
  for _, c in ipairs(clips) do named[c:name()] = c end
  limber.anim.set_events(named.Walk, { { time = 0.3, name = "step", data = { foot = "left" } } })
  local steps, laps, foot = { 0, 0, 0 }, { 0, 0, 0 }, nil
  ctl:on({ event = "step" }, function(i, e) steps[i], foot = steps[i] + 1, e.data.foot end)
  ctl:on({ loop = "Walk" }, function(i, r) laps[i] = laps[i] + r.laps end)
  for i = 1, 3 do ctl:play(i, "base", "Walk", { rate = 0.5 * i }) end
  for _ = 1, 120 do ctl:update(DT) end
  for i = 1, 3 do
    print(("callbacks: fox %d (rate %.1f): %d steps (%s foot), %d laps in 2 s")
      :format(i, 0.5 * i, steps[i], foot, laps[i]))
  end
end

-- 7. a crowd of foxes walking at different rates: each update, every fox's
-- root motion (the hips, joint 3) in one pass moves it on, and the crowd's
-- step events come in one pass too
do
  local N = 40
  local ctl = controller.new({ pose = limber.pose(skel, N), clips = clips })
  local named = {}
  for _, c in ipairs(clips) do named[c:name()] = c end
  limber.anim.set_events(named.Walk, { { time = 0.3, name = "step" } })
  local z, steps, motion = {}, {}, nil
  for i = 1, N do
    z[i], steps[i] = 0, 0
    ctl:play(i, "base", "Walk", { rate = 0.5 + i / N })
  end
  for _ = 1, 120 do
    ctl:update(DT)
    motion = ctl:root_motions(3, motion) -- dx, dy, dz, dyaw per fox
    for i = 1, N do z[i] = z[i] + motion:get(i)[3] end
    for _, e in ipairs(ctl:crowd_events()) do steps[e.instance] = steps[e.instance] + 1 end
  end
  for _, i in ipairs({ 1, N / 2, N }) do
    print(("crowd: fox %d (rate %.3f): root motion %.3f units along z, %d steps in 2 s")
      :format(i, 0.5 + i / N, z[i], steps[i]))
  end
  limber.anim.set_events(named.Walk, nil)
end
