--- anim_dump: runs a scripted animation scenario on one character through
-- limber.controller and prints one JSON document, so the controller can be
-- checked from outside (issue 18).
--
--   lua5.4 examples/anim_dump.lua SCENARIO.lua
--
-- A scenario is a Lua file returning a table (an unknown key anywhere is an
-- error):
--
--   return {
--     model = "examples/assets/Fox/Fox.glb", -- relative to the current directory, or absolute
--     fps = 60, frames = 240,                -- frames 0 .. frames - 1, frame f at f / fps s
--     layers = {                             -- bottom first (default: one layer "base")
--       { name = "base" },
--       { name = "upper", mode = "override", -- or "additive"
--         weight = 1,                        -- initial layer weight (default 1)
--         mask = { root = "b_Spine01_02" } },-- the joint and its subtree (weight 1)
--     },
--     params = { speed = 0 },                -- parameters (machine conditions, blend spaces)
--     events = {                             -- optional: events (markers) set on clips by name
--       Walk = { { time = 0.1, name = "L" }, { time = 0.45, name = "R" } } },
--     machine = {                            -- optional: a state machine on one layer
--       layer = "base",                      -- (default the first layer)
--       initial = "idle",
--       states = { idle = { clip = "Survey" },
--                  move = { space = { { clip = "Walk", at = 0.5 }, { clip = "Run", at = 2 } },
--                           param = "speed",
--                           markers = { "L", "R" } } },  -- optional: synced by these events
--       transitions = {
--         { from = "idle", to = "move", fade = 0.3, when = { { "speed", ">", 0.1 } } },
--         { from = "move", to = "idle", fade = 0.3, when = { { "speed", "<=", 0.1 } } },
--         { from = "any", to = "idle", trigger = "stop", priority = 1 } } },
--     script = {                             -- applied at the start of the given frame
--       { frame = 0, layer = "base", play = "Walk" },        -- at once, from time 0
--       { frame = 60, layer = "base", play = "Run", fade = 0.5, time = 0.2, rate = 1,
--         loop = true },
--       { frame = 100, layer = "upper", weight = 0, fade = 0.25 }, -- the layer's weight
--       { frame = 120, set = { speed = 1.2 } },            -- parameters (triggers: true)
--     },
--   }
--
-- Clips are named as in the file (Fox: Survey, Walk, Run) and kept exact
-- (no packing). A `play` or `weight` without `fade` takes effect at once; a
-- `play` without `time` starts at 0. Each frame after frame 0 first moves
-- every clip and fade by 1 / fps, then applies that frame's entries, then
-- evaluates. Output:
--
--   {"frames": [{"frame": f, "t": seconds,
--     "joints": {"<name>": {"translation": [x,y,z], "rotation": [x,y,z,w],
--                           "scale": [x,y,z]}, ...},
--     "root_motion": [dx, dy, dz, dyaw],
--     "events": [{"clip": ..., "name": ..., "time": ..., "weight": ...}],
--     "state": null}, ...]}
--
-- joints: every named joint's local transform after the frame's
-- evaluation. root_motion: the displacement of the root-motion joint (the
-- first joint, in skeleton order, that a clip moves with a translation
-- track) over the frame's step, summed over the playing clips by their
-- effective weight (yaw about y, radians). events: the clip events crossed
-- in the step, with the weight of the clip that crossed them. state: the
-- machine's state after the frame (null without a machine). The machine
-- format is limber.controller.machine's (docs/controller.md), plus `layer`;
-- a transition starts at the update after its condition holds.
if arg and arg[0] and arg[0]:find("anim_dump%.lua$") then
  package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
  require "common"
end
local limber = require "limber"
local gltf = require "limber.gltf"
local controller = require "limber.controller"
local anim = require "limber.anim"
local D = dofile((debug.getinfo(1, "S").source:match("^@(.*)anim_dump%.lua$") or "./")
  .. "gltf_dump.lua")

local A = {}

local function fail(msg) error("anim_dump: " .. msg, 0) end

local KEYS = { model = true, fps = true, frames = true, layers = true, params = true,
               script = true, machine = true, events = true }
local LAYER_KEYS = { name = true, mode = true, weight = true, mask = true }
local ENTRY_KEYS = { frame = true, layer = true, play = true, fade = true, time = true,
                     rate = true, loop = true, weight = true, set = true }

local function is_int(v) return type(v) == "number" and v == math.floor(v) end

-- Checks a scenario table; returns it.
local function check(sc)
  if type(sc) ~= "table" then fail("the scenario must return a table") end
  for k in pairs(sc) do
    if not KEYS[k] then fail(("unknown key '%s' in the scenario"):format(tostring(k))) end
  end
  if sc.machine ~= nil and type(sc.machine) ~= "table" then fail("'machine' must be a table") end
  if type(sc.model) ~= "string" then fail("'model' must be a path") end
  if not (type(sc.fps) == "number" and sc.fps > 0 and sc.fps < 1e6) then
    fail("'fps' must be a number > 0")
  end
  if not (is_int(sc.frames) and sc.frames >= 1 and sc.frames <= 1e6) then
    fail("'frames' must be an integer >= 1")
  end
  for n, ly in ipairs(sc.layers or {}) do
    if type(ly) ~= "table" then fail(("layers[%d] must be a table"):format(n)) end
    for k in pairs(ly) do
      if not LAYER_KEYS[k] then fail(("unknown key '%s' in layers[%d]"):format(tostring(k), n)) end
    end
  end
  if sc.params ~= nil and type(sc.params) ~= "table" then fail("'params' must be a table") end
  if sc.events ~= nil and type(sc.events) ~= "table" then
    fail("'events' must map clip names to arrays of { time =, name = }")
  end
  if type(sc.script or {}) ~= "table" then fail("'script' must be an array") end
  for n, e in ipairs(sc.script or {}) do
    if type(e) ~= "table" then fail(("script[%d] must be a table"):format(n)) end
    for k in pairs(e) do
      if not ENTRY_KEYS[k] then fail(("unknown key '%s' in script[%d]"):format(tostring(k), n)) end
    end
    if not (is_int(e.frame) and e.frame >= 0) then
      fail(("script[%d].frame must be an integer >= 0"):format(n))
    end
    if (e.play ~= nil or e.weight ~= nil) and e.layer == nil then
      fail(("script[%d] needs a layer"):format(n))
    end
    if e.set ~= nil and type(e.set) ~= "table" then
      fail(("script[%d].set must be a table"):format(n))
    end
  end
  return sc
end

-- The first joint a clip moves with a translation track (1 if none).
local function motion_joint(skel, clips)
  for j = 1, skel:joint_count() do
    for _, c in ipairs(clips) do
      if c:sample_joint(j, "translation", 0) then return j end
    end
  end
  return 1
end

--- Runs a checked scenario; returns the dump table (D.encode gives JSON).
function A.run(sc)
  check(sc)
  local asset = gltf.load(sc.model, { tolerance = 0 })
  if #asset.skeletons == 0 then fail("the model has no skeleton") end
  local skel = asset.skeletons[1].skeleton
  local clips = {}
  for _, an in ipairs(asset.animations) do
    if an.clips and an.clips[1] then clips[#clips + 1] = an.clips[1] end
  end
  if #clips == 0 then fail("the model has no animation of its skeleton") end
  for name, list in pairs(sc.events or {}) do
    local clip
    for _, c in ipairs(clips) do if c:name() == name then clip = c end end
    if not clip then fail(("events: no clip named '%s'"):format(tostring(name))) end
    local oke, err = pcall(anim.set_events, clip, list)
    if not oke then fail("events: " .. tostring(err)) end
  end
  local pose = limber.pose(skel, 1)
  local layers = {}
  for n, ly in ipairs(sc.layers or { { name = "base" } }) do
    layers[n] = { name = ly.name, mode = ly.mode, weight = ly.weight, mask = ly.mask }
  end
  local ok, ctl = pcall(controller.new, { pose = pose, clips = clips, layers = layers,
                                          locals = true })
  if not ok then fail(tostring(ctl)) end
  for k, v in pairs(sc.params or {}) do
    local okp, err = pcall(ctl.set, ctl, 1, k, v)
    if not okp then fail("params: " .. tostring(err)) end
  end
  local machine_layer
  if sc.machine then
    local def = {}
    for k, v in pairs(sc.machine) do if k ~= "layer" then def[k] = v end end
    machine_layer = sc.machine.layer or layers[1].name or 1
    local okm, m = pcall(controller.machine, def)
    if not okm then fail("machine: " .. tostring(m)) end
    local oks, err = pcall(ctl.set_machine, ctl, 1, machine_layer, m)
    if not oks then fail("machine: " .. tostring(err)) end
  end
  local by_frame = {}
  for _, e in ipairs(sc.script or {}) do
    by_frame[e.frame] = by_frame[e.frame] or {}
    table.insert(by_frame[e.frame], e)
  end
  local mj = motion_joint(skel, clips)
  local J = skel:joint_count()
  local out = { frames = D.array() }
  local dt = 1 / sc.fps
  for f = 0, sc.frames - 1 do
    local rm, events = { 0, 0, 0, 0 }, D.array()
    if f > 0 then
      ctl:update(dt)
      local x, y, z, yaw = ctl:root_motion(1, mj)
      rm = { x, y, z, yaw }
      for _, e in ipairs(ctl:events(1)) do
        events[#events + 1] = { clip = e.clip or D.NULL, name = e.name, time = e.time,
                                weight = e.weight }
      end
    end
    for _, e in ipairs(by_frame[f] or {}) do
      local okp, err = pcall(function()
        if e.play ~= nil then
          ctl:play(1, e.layer, e.play, { fade = e.fade, time = e.time, rate = e.rate,
                                         loop = e.loop })
        end
        if e.weight ~= nil then ctl:set_weight(1, e.layer, e.weight, e.fade) end
        for k, v in pairs(e.set or {}) do ctl:set(1, k, v) end
      end)
      if not okp then fail(("frame %d: %s"):format(f, tostring(err))) end
    end
    ctl:update(0)
    local joints = {}
    for j = 1, J do
      local name = skel:name(j)
      if name then
        local t, r, s = pose:trs(1, j)
        joints[name] = { translation = D.array(t), rotation = D.array(r), scale = D.array(s) }
      end
    end
    local state = machine_layer and ctl:state(1, machine_layer)
    out.frames[#out.frames + 1] = { frame = f, t = f * dt, joints = joints,
                                    root_motion = D.array(rm), events = events,
                                    state = state or D.NULL }
  end
  return out
end

--- Command-line entry point.
function A.main(args)
  if #args ~= 1 then
    io.stderr:write("usage: lua5.4 examples/anim_dump.lua SCENARIO.lua\n")
    os.exit(2)
  end
  local ok, res = pcall(function()
    local chunk, err = loadfile(args[1])
    if not chunk then fail(err) end
    return A.run(chunk())
  end)
  if not ok then
    io.stderr:write(tostring(res), "\n")
    os.exit(1)
  end
  io.write(D.encode(res), "\n")
end

if arg and arg[0] and arg[0]:find("anim_dump%.lua$") then
  A.main(arg)
else
  return A
end
