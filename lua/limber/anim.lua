--- Animation: clips, batched sampling and blending, players for crowds.
--
-- Clips are immutable C objects (`limber.Clip`) built from key arrays.
-- A crowd drives one pose batch (`limber.Pose`): every instance has one
-- player per layer (clip, time, rate, loop or clamp, weight, cross-fades,
-- events, root motion). `crowd:advance(dt)` moves every player (in Lua,
-- no garbage), `crowd:evaluate()` samples and blends all instances with
-- one C call per layer slot and one blend call.
-- @module limber.anim
local core = require "limber.core"
local check = require "limber.check"
local snapshot, typename, is_a = check.snapshot, check.typename, check.is_a
local math_type, rawlen = check.math_type, check.rawlen

local M = {}

local floor = math.floor
-- atan of y and x: math.atan takes both from 5.3 on; before, its second
-- argument is ignored and math.atan2 is the one (luacheck: std min has neither)
local atan2 = math.atan2 or math.atan -- luacheck: ignore 143

-- clip -> { times = {...}, names = {...}, loop_times = {...}, loop_names = {...} }
local events_of = setmetatable({}, { __mode = "k" })


local function fail(msg, level)
  error("limber.anim." .. msg, (level or 1) + 1)
end

-- Largest magnitude of times, rates and dt (the float range the C side keeps).
local MAX_FLOAT = 3.4e38
-- Largest player weight (the blender's bound: sums of 64 layers stay finite).
local MAX_WEIGHT = 1e6


-- The public name of a function of this module or a method of its classes.
local METHOD_OF = { play = "Player", seek = "Player", set_rate = "Player",
                            set_weight = "Player", advance = "Crowd" }
local function qualified(fname)
  local class = METHOD_OF[fname]
  return class and ("limber.anim.%s:%s"):format(class, fname) or "limber.anim." .. fname
end

-- Raises "bad argument #n to 'limber.anim.fname' (expected expected, got
-- <type>)" at the caller of the function that called arg_error.
local function arg_error(n, fname, expected, v, level)
  check.arg_error(n, qualified(fname), expected, v, level or 3)
end

local function finite(v)
  return type(v) == "number" and v == v and v >= -MAX_FLOAT and v <= MAX_FLOAT
end

-- A finite number in float range (times, rates, dt), else a bad argument.
local function check_finite(v, n, fname, what)
  if not finite(v) then
    if type(v) ~= "number" then arg_error(n, fname, "number", v, 4) end
    error(("bad argument #%d to '%s' (%s must be a finite number of magnitude <= 3.4e38, got %s)")
      :format(n, qualified(fname), what, tostring(v)), 3)
  end
  return v
end

-- The loop wrap t - d floor(t / d) into [0, d) (exact fmod where that
-- rounds outside, e.g. for huge t).
local function wrap(t, d)
  local r = t - d * floor(t / d)
  if not (r >= 0 and r < d) then
    r = math.fmod(t, d)
    if r ~= r then return 0 end
    if r < 0 then r = r + d end
    if r >= d then r = 0 end
  end
  return r
end

-- Sorts and checks a clip's events ({ time =, name = [, data = ] } each;
-- errors are raised `level` levels above the caller) and attaches them to
-- the clip. `data` (any value, the event's payload) is kept as given; the
-- payloads go in `data` / `loop_data` only when some event has one.
local function attach_events(clip, events, level)
  local d = clip:duration()
  local list, any_data = {}, false
  for k, e in ipairs(events) do
    if type(e) ~= "table" or type(e.name) ~= "string" or type(e.time) ~= "number" then
      fail(("clip: events[%d] must be { time = number, name = string } (data = payload optional)")
        :format(k), level + 1)
    end
    if e.time ~= e.time or e.time < 0 or e.time > d then
      fail(("clip: events[%d] ('%s') time %s is outside the clip [0, %s]")
        :format(k, e.name, tostring(e.time), tostring(d)), level + 1)
    end
    list[k] = { time = e.time, name = e.name, k = k, data = e.data }
    any_data = any_data or e.data ~= nil
  end
  local function by_time(a, b) return a.time < b.time or (a.time == b.time and a.k < b.k) end
  table.sort(list, by_time)
  local ev = { times = {}, names = {}, loop_times = {}, loop_names = {} }
  if any_data then ev.data, ev.loop_data = {}, {} end
  for k, e in ipairs(list) do
    ev.times[k], ev.names[k] = e.time, e.name
    if any_data then ev.data[k] = e.data end
  end
  -- in loop mode an event at the duration happens at 0, before the events at 0
  for _, e in ipairs(list) do if e.time >= d then e.time, e.k = 0, e.k - #list end end
  table.sort(list, by_time)
  for k, e in ipairs(list) do
    ev.loop_times[k], ev.loop_names[k] = e.time, e.name
    if any_data then ev.loop_data[k] = e.data end
  end
  events_of[clip] = ev
end

--- Builds an immutable clip (`limber.Clip`).
-- `desc.tracks[k]` = { `joint` = index or name (names need `skeleton`) |
-- `node` = id, `path` = "translation" | "rotation" | "scale" | "float"
-- (float: node targets only, `width` values per key, 1 .. 16, default 1: e.g.
-- morph weights; kept in the clip and sampled with `clip:sample_node`),
-- `interpolation` = "STEP" | "LINEAR" (default) | "CUBICSPLINE",
-- `times` = table or f32 Buffer (seconds, strictly increasing),
-- `values` = flat table or f32 Buffer (3 or 4 floats per key; CUBICSPLINE
-- in-tangent, value, out-tangent per key) }. `desc.name` (optional),
-- `desc.events` = { { time =, name =, data = payload (optional, any value
-- a snapshot can hold) }, ... } (optional),
-- `desc.ignore_missing` drops tracks naming joints the skeleton lacks
-- instead of raising. Rotation keys are normalised; key times must be
-- strictly increasing (equal times are rejected, as glTF requires).
-- `desc.duration` makes the clip last at least that long (loops wrap there;
-- the tracks hold their last keys): glTF animations whose `weights` channels
-- run longer than their joint channels use it.
-- `desc.dense = false` skips the frame-major copy that clips keyed on one
-- uniform time grid get for O(1) sampling (it costs memory, about as much
-- as the keys themselves). With a skeleton, the clip is packed for it
-- (`pack`, at the default tolerance) unless `desc.pack = false`: a
-- compressed clip, or the exact one when no packing meets the tolerance or
-- the clip animates no joint. `desc.pack = { tolerance =, distance = }`
-- packs with those options (`tolerance = 0` keeps the clip exact); without
-- a skeleton the clip is exact and `desc.pack` must be nil or false.
-- @tparam table desc
-- @tparam[opt] limber.Skeleton skeleton resolves joint names and checks indices
-- @treturn limber.Clip
function M.clip(desc, skeleton)
  if type(desc) ~= "table" then fail("clip: expected a description table", 2) end
  if skeleton ~= nil and not is_a(skeleton, "limber.Skeleton") then
    arg_error(2, "clip", "limber.Skeleton or nil", skeleton)
  end
  -- the description is read once, raw, into plain copies (a table whose
  -- __index or __len answers differently each time cannot pass the checks
  -- with one answer and be used with another)
  desc = snapshot(desc)
  if type(desc.tracks) ~= "table" then fail("clip: desc.tracks must be an array of tracks", 2) end
  if desc.name ~= nil and type(desc.name) ~= "string" then
    fail("clip: desc.name must be a string", 2)
  end
  local tracks, missing = {}, {}
  local J = skeleton and skeleton:joint_count()
  local given = desc.tracks
  for k = 1, rawlen(given) do
    local tr = rawget(given, k)
    if type(tr) ~= "table" then fail(("clip: tracks[%d] must be a table"):format(k), 2) end
    tr = snapshot(tr)
    local joint = tr.joint
    if type(joint) == "string" then
      if not skeleton then
        fail(("clip: tracks[%d]: joint name '%s' needs a skeleton"):format(k, joint), 2)
      end
      local j = skeleton:find(joint)
      if not j then missing[#missing + 1] = joint end
      joint = j
    elseif joint ~= nil and J and (math_type(joint) ~= "integer" or joint < 1 or joint > J) then
      fail(("clip: tracks[%d]: joint %s out of range [1, %d]"):format(k, tostring(joint), J), 2)
    end
    if joint or tr.node ~= nil or tr.joint == nil then
      tracks[#tracks + 1] = { joint = joint, node = tr.node, path = tr.path, width = tr.width,
        interpolation = tr.interpolation, times = tr.times, values = tr.values }
    end
  end
  if #missing > 0 and not desc.ignore_missing then
    fail(("clip: the skeleton has no joint named %s")
      :format("'" .. table.concat(missing, "', '") .. "'"), 2)
  end
  local events = desc.events
  if events ~= nil and type(events) ~= "table" then
    fail("clip: desc.events must be an array", 2)
  end
  if events then
    local ev = {}
    for k = 1, rawlen(events) do
      local e = rawget(events, k)
      ev[k] = type(e) == "table" and snapshot(e) or e
    end
    events = ev
  end
  local duration = desc.duration
  if duration ~= nil
      and not (type(duration) == "number" and duration >= 0 and duration <= MAX_FLOAT) then
    fail("clip: desc.duration must be a finite number >= 0", 2)
  end
  local pack = desc.pack
  local by_default = pack == nil and skeleton ~= nil -- packed unless asked not to
  if pack ~= nil and pack ~= false then
    if pack ~= true and type(pack) ~= "table" then
      fail("clip: desc.pack must be true or { tolerance =, distance = }", 2)
    end
    if not skeleton then fail("clip: desc.pack needs the skeleton (argument 2)", 2) end
  end
  local ok, clip = pcall(core.clip, tracks, desc.name, desc.dense ~= false, duration)
  if not ok then error(clip, 2) end
  if events and #events > 0 then attach_events(clip, events, 2) end
  if by_default and clip:joint_span() > 0 then pack = true end
  if pack ~= nil and pack ~= false then
    local okp, packed = pcall(M.pack, clip, skeleton, pack ~= true and pack or nil)
    if not okp then
      local msg = tostring(packed):gsub("^[^\n:]*:%d+: ", "")
      msg = msg:match("^bad argument #%d+ to '[^']*' %((.*)%)$")
        or msg:gsub("^limber%.anim%.pack: ", "")
      fail("clip: desc.pack: " .. msg, 2)
    end
    return packed -- the exact clip when no packing meets the tolerance
  end
  return clip
end

-- ---- packed clips --------------------------------------------------------------

--- Default packing tolerance, as a fraction of the rig's size (`rig_size`):
-- 2e-4 is 0.36 mm on a 1.8 m character.
M.PACK_TOLERANCE = 2e-4
--- Default virtual distance (points that far from each joint, along its
-- axes, are measured as well as the joint), as a fraction of the rig's
-- size: 0.05 is 9 cm on a 1.8 m character.
M.PACK_DISTANCE = 0.05

--- The size of a skeleton's rest pose: the largest extent (x, y or z) of
-- its joints' model-space origins, or 1 when every joint sits at one point.
-- @tparam limber.Skeleton skeleton
-- @treturn number
function M.rig_size(skeleton)
  if not is_a(skeleton, "limber.Skeleton") then
    arg_error(1, "rig_size", "limber.Skeleton", skeleton)
  end
  local pose = core.pose(skeleton, 1)
  pose:local_to_model()
  local lo, hi = { math.huge, math.huge, math.huge }, { -math.huge, -math.huge, -math.huge }
  for j = 1, skeleton:joint_count() do
    local m = pose:model(1, j)
    for c = 1, 3 do
      local v = m[12 + c]
      if v < lo[c] then lo[c] = v end
      if v > hi[c] then hi[c] = v end
    end
  end
  local size = math.max(hi[1] - lo[1], hi[2] - lo[2], hi[3] - lo[3])
  return size > 0 and size or 1
end

local PACK_OPTIONS = { tolerance = "number", distance = "number", cache_bytes = "integer",
                       source_keys = "boolean" }

--- Packs (compresses) a clip for a skeleton within an error bound.
--
-- The packed clip's joints stay within `tolerance` (model units) of the
-- exact clip's, in model space, at every joint and at points `distance`
-- from each joint along its axes (so a joint's rotation error counts at
-- the size of what hangs from it), measured at every key time and every
-- midpoint between key times. Every sampling path (samplers, stacks,
-- plans, `sample_joint`) reads packed clips as it reads exact ones.
-- `clip:error()` reports the error reached and `clip:bytes()` the memory.
-- The compressor shares its error measures and its choices of the streams'
-- encodings among the worker pool's threads (`limber.skinning.threads`);
-- the packed clip is the same, byte for byte, whatever their number.
-- @tparam limber.Clip clip an exact clip (joints of `skeleton`)
-- @tparam limber.Skeleton skeleton the skeleton it animates
-- @tparam[opt] table opts `tolerance` (default `PACK_TOLERANCE` times
--   `rig_size(skeleton)`; 0 returns the clip itself, exact) and `distance`
--   (default `PACK_DISTANCE` times the rig size), both in model units;
--   `cache_bytes` (default 32 MB): the most memory the compressor keeps the
--   exact clip's samples in while it tries encodings; a clip that needs
--   more is sampled again for each try (the same packed clip, packed more
--   slowly: a long clip packed where memory is short); `source_keys`
--   (default false): keep every key at the exact clip's value at its time.
--   By default, a stream that keeps a key only every few frames (or at
--   frames of its own) is also tried with fitted keys: the values whose
--   interpolation best follows every frame between them (least squares, the
--   first and last keys held), which often allow fewer keys for the same
--   bound; the packed clip then passes near, not through, the source's
--   poses at those keys (within the tolerance like everywhere else)
-- @treturn limber.Clip the packed clip, or `clip` itself when the
--   tolerance is 0 or no packing meets it
-- @treturn[opt] string why the clip was kept exact (no packing met the tolerance)
function M.pack(clip, skeleton, opts)
  if not is_a(clip, "limber.Clip") then arg_error(1, "pack", "limber.Clip", clip) end
  if not is_a(skeleton, "limber.Skeleton") then
    arg_error(2, "pack", "limber.Skeleton", skeleton)
  end
  opts = check.options(3, "limber.anim.pack", opts, PACK_OPTIONS, 2)
  local tol, dist = opts.tolerance, opts.distance
  if tol ~= nil and not (finite(tol) and tol >= 0) then
    check.arg_fail(3, "limber.anim.pack", "option 'tolerance' must be a finite number >= 0", 2)
  end
  if dist ~= nil and not (finite(dist) and dist >= 0) then
    check.arg_fail(3, "limber.anim.pack", "option 'distance' must be a finite number >= 0", 2)
  end
  if opts.cache_bytes ~= nil and opts.cache_bytes < 0 then
    check.arg_fail(3, "limber.anim.pack", "option 'cache_bytes' must be >= 0", 2)
  end
  if tol == 0 then return clip end
  local size
  if tol == nil or dist == nil then size = M.rig_size(skeleton) end
  tol = tol or M.PACK_TOLERANCE * size
  dist = dist or M.PACK_DISTANCE * size
  local ok, packed, why = pcall(core.clip_pack, clip, skeleton, tol, dist, opts.cache_bytes,
    opts.source_keys)
  if not ok then check.rethrow(packed, "limber.anim.pack", "clip_pack", 2) end
  if not packed then return clip, why end
  events_of[packed] = events_of[clip]
  return packed
end

--- Whether a clip can play on a skeleton (hot reload: check before swapping
-- a clip in). A packed clip must come from a skeleton of the same rig (same
-- joints, parents and names: `skeleton:rig_hash()`); any clip must animate
-- only joints the skeleton has.
-- @tparam limber.Clip clip
-- @tparam limber.Skeleton skeleton
-- @treturn boolean
-- @treturn[opt] string why not
function M.fits(clip, skeleton)
  if not is_a(clip, "limber.Clip") then arg_error(1, "fits", "limber.Clip", clip) end
  if not is_a(skeleton, "limber.Skeleton") then
    arg_error(2, "fits", "limber.Skeleton", skeleton)
  end
  local J = skeleton:joint_count()
  if clip:joint_span() > J then
    return false, ("the clip animates joint %d of a %d-joint skeleton"):format(clip:joint_span(), J)
  end
  local h = clip:rig_hash()
  if h and h ~= skeleton:rig_hash() then
    return false, ("the clip was packed for rig %s, the skeleton is rig %s"):format(h,
      skeleton:rig_hash())
  end
  return true
end

--- Replaces the events of any clip (built here, loaded from glTF, packed
-- or read from a snapshot): `events` as `desc.events` of `clip`
-- ({ { time =, name =, data = }, ... }); nil or an empty array removes them.
-- Markers are events: a synced blend space (`limber.controller.blend1d`,
-- option `markers`) keeps its clips' markers of one name in step. On an
-- error the clip keeps its events. Returns the clip.
-- @tparam limber.Clip clip
-- @tparam[opt] table events
-- @treturn limber.Clip
function M.set_events(clip, events)
  if not is_a(clip, "limber.Clip") then arg_error(1, "set_events", "limber.Clip", clip) end
  if events ~= nil and type(events) ~= "table" then
    arg_error(2, "set_events", "array of events or nil", events)
  end
  local ev = {}
  for k = 1, events and rawlen(events) or 0 do
    local e = rawget(events, k)
    ev[k] = type(e) == "table" and snapshot(e) or e
  end
  if #ev == 0 then
    events_of[clip] = nil
  else
    local ok, err = pcall(attach_events, clip, ev, 1)
    if not ok then
      error(tostring(err):gsub("^[^\n:]*:%d+: ", ""):gsub("^limber%.anim%.clip: ",
        "limber.anim.set_events: "), 2)
    end
  end
  return clip
end

--- The events of a clip, sorted by time: array of { time =, name =, data = }
-- (data: the payload given with the event, or nil).
-- @tparam limber.Clip clip
function M.events(clip)
  if not is_a(clip, "limber.Clip") then arg_error(1, "events", "limber.Clip", clip) end
  local ev, out = events_of[clip], {}
  if ev then
    local data = ev.data
    for k = 1, #ev.times do
      out[k] = { time = ev.times[k], name = ev.names[k], data = data and data[k] }
    end
  end
  return out
end

local step_core

--- Moves a clip time by `delta` and reports every event crossed.
-- Forward, an event at e is crossed when t0 < e <= t1; backward when
-- t1 <= e < t0 (so an event is reported once per crossing, also at loop
-- wraps: each lap reports it again). With `loop` the result is wrapped
-- into [0, d) (t - d floor(t / d)), otherwise clamped into [0, d].
-- `fn(arg, name, time, data)` is called in playback order (data: the
-- event's payload, or nil).
-- @tparam limber.Clip clip
-- @tparam number t0 current clip time
-- @tparam number delta signed time step (rate * dt)
-- @tparam boolean loop
-- @tparam[opt] function fn event callback
-- @param[opt] arg first argument of fn
-- @treturn number the new clip time
function M.step(clip, t0, delta, loop, fn, arg)
  if not is_a(clip, "limber.Clip") then arg_error(1, "step", "limber.Clip", clip) end
  if type(t0) ~= "number" or t0 ~= t0 or t0 == math.huge or t0 == -math.huge then
    arg_error(2, "step", "finite number", t0)
  end
  if type(delta) ~= "number" or delta ~= delta or delta == math.huge or delta == -math.huge then
    arg_error(3, "step", "finite number", delta)
  end
  if fn ~= nil and type(fn) ~= "function" then arg_error(5, "step", "function or nil", fn) end
  return step_core(clip, t0, delta, loop, fn, arg)
end

-- M.step without the argument checks (the crowd's per-frame loop: its
-- arguments are its own, checked where they were set).
step_core = function(clip, t0, delta, loop, fn, arg)
  local d = clip:duration()
  local ev = fn and events_of[clip]
  if not loop or d <= 0 then
    local a = t0 < 0 and 0 or (t0 > d and d or t0)
    local b = a + delta
    b = b < 0 and 0 or (b > d and d or b)
    if ev then
      local times, names, data = ev.times, ev.names, ev.data
      if b > a then
        for k = 1, #times do
          local e = times[k]
          if e > a and e <= b then fn(arg, names[k], e, data and data[k]) end
        end
      elseif b < a then
        for k = #times, 1, -1 do
          local e = times[k]
          if e < a and e >= b then fn(arg, names[k], e, data and data[k]) end
        end
      end
    end
    return b
  end
  local a = wrap(t0, d)
  local b = a + delta
  if ev then
    local times, names, n = ev.loop_times, ev.loop_names, #ev.loop_times
    local data = ev.loop_data
    local laps = 0
    if delta > 0 then
      local base = 0
      while base <= b and laps < 10000 do
        for k = 1, n do
          local e = base + times[k]
          if e > a and e <= b then fn(arg, names[k], times[k], data and data[k]) end
        end
        base, laps = base + d, laps + 1
      end
    elseif delta < 0 then
      local base = 0
      while base + d > b and laps < 10000 do
        for k = n, 1, -1 do
          local e = base + times[k]
          if e < a and e >= b then fn(arg, names[k], times[k], data and data[k]) end
        end
        base, laps = base - d, laps + 1
      end
    end
  end
  return wrap(b, d)
end

--- A one-instance pose of `skeleton` holding `clip` sampled at `time`:
-- the reference of an additive layer.
-- @tparam limber.Skeleton skeleton
-- @tparam limber.Clip clip
-- @tparam[opt=0] number time
-- @treturn limber.Pose
function M.reference_pose(skeleton, clip, time)
  if not is_a(skeleton, "limber.Skeleton") then
    arg_error(1, "reference_pose", "limber.Skeleton", skeleton)
  end
  if not is_a(clip, "limber.Clip") then arg_error(2, "reference_pose", "limber.Clip", clip) end
  if time ~= nil then check_finite(time, 3, "reference_pose", "time") end
  local pose = core.pose(skeleton, 1)
  local ok, s = pcall(core.sampler, pose, { clip })
  if not ok then check.rethrow(s, "limber.anim.reference_pose", "sampler") end
  s:set(1, 1, time or 0, false)
  s:run()
  return pose
end

--- Low-level batched sampler (see `limber.core.sampler`): plays one clip
-- of `clips` per instance of `pose`.
-- @tparam limber.Pose pose
-- @tparam table clips array of limber.Clip that fit the pose's skeleton
-- @treturn limber.Sampler
function M.sampler(pose, clips)
  local ok, s = pcall(core.sampler, pose, clips)
  if not ok then check.rethrow(s, "limber.anim.sampler", "sampler") end
  return s
end
--- Low-level blender (see `limber.core.blender`): blends layer poses into
-- `out` with per-instance weights, masks and additive layers.
-- @tparam limber.Pose out
-- @tparam table layers `{ pose =, mask =, additive =, reference = }` entries
-- @treturn limber.Blender
function M.blender(out, layers)
  local ok, b = pcall(core.blender, out, layers)
  if not ok then check.rethrow(b, "limber.anim.blender", "blender") end
  return b
end

-- ---- players ----------------------------------------------------------

local Player = {}
Player.__index = Player
Player.__name = "limber.anim.Player"

local Crowd = {}
Crowd.__index = Crowd
Crowd.__name = "limber.anim.Crowd"

-- The player or crowd `self` of method `name`, else a bad-self error.
local function check_self(self, class, name)
  if getmetatable(self) ~= class or type(self) ~= "table" then
    error(("calling '%s:%s' on bad self (%s expected, got %s)"):format(class.__name, name,
      class.__name, typename(self)), 3)
  end
end


local function yaw_of(x, y, z, w)
  return atan2(2 * (w * y + x * z), 1 - 2 * (y * y + x * x))
end

local function wrap_angle(a)
  return a - 2 * math.pi * floor((a + math.pi) / (2 * math.pi))
end

-- Root displacement at unwrapped position x (loop) or clamped x: F(x).
local function root_pos(clip, j, x, loop, d)
  local laps = 0
  if loop and d > 0 then
    laps = floor(x / d)
    x = wrap(x, d) -- x - laps * d can round outside [0, d) for a large x
  else
    x = x < 0 and 0 or (x > d and d or x)
  end
  local px, py, pz = clip:sample_joint(j, "translation", x, false)
  if not px then return 0, 0, 0, 0 end
  local qx, qy, qz, qw = clip:sample_joint(j, "rotation", x, false)
  local yaw = qx and yaw_of(qx, qy, qz, qw) or 0
  if laps ~= 0 then
    local ex, ey, ez = clip:sample_joint(j, "translation", d, false)
    local sx, sy, sz = clip:sample_joint(j, "translation", 0, false)
    px, py, pz = px + laps * (ex - sx), py + laps * (ey - sy), pz + laps * (ez - sz)
    if qx then
      local a0 = yaw_of(clip:sample_joint(j, "rotation", 0, false))
      local a1 = yaw_of(clip:sample_joint(j, "rotation", d, false))
      yaw = yaw + laps * wrap_angle(a1 - a0)
    end
  end
  return px, py, pz, yaw
end

--- The instance this player animates (1-based).
function Player:instance() check_self(self, Player, "instance"); return self.i end

--- The clip playing (nil when stopped), its time, rate, loop flag and weight.
-- @treturn limber.Clip|nil clip
-- @treturn number time in seconds
-- @treturn number rate
-- @treturn boolean loop
-- @treturn number weight
function Player:state()
  check_self(self, Player, "state")
  local c = self.crowd
  return self.k and c.clips[self.k], self.t, self.rate, self.loop, self.w
end

--- The current clip time in seconds.
function Player:time() check_self(self, Player, "time"); return self.t end

--- Starts `clip` (a Clip of the crowd's set, its 1-based number or its name).
-- `opts`: `time` (default 0), `rate` (default: keep, initially 1; negative
-- plays backwards), `loop` (default true), `fade` (cross-fade duration in
-- seconds from the clip playing now, default 0).
-- @tparam limber.Clip|integer|string clip
-- @tparam[opt] table opts
-- @return self
function Player:play(clip, opts)
  check_self(self, Player, "play")
  local crowd = self.crowd
  local k = clip ~= nil and clip == clip and crowd.index[clip]
  if not k then fail("Player:play: clip is not in the crowd's clip set: " .. tostring(clip), 2) end
  if opts ~= nil and type(opts) ~= "table" then arg_error(2, "play", "table or nil", opts) end
  opts = opts or {}
  -- each option read once, raw: a table whose __index answers differently on
  -- a second read cannot slip a value past the checks below
  local fade, rate, time, loop = rawget(opts, "fade"), rawget(opts, "rate"), rawget(opts, "time"),
    rawget(opts, "loop")
  fade = fade or 0
  if type(fade) ~= "number" or not (fade >= 0 and fade <= MAX_FLOAT) then
    fail("Player:play: fade must be a finite number >= 0", 2)
  end
  if rate ~= nil and not finite(rate) then
    fail("Player:play: rate must be a finite number of magnitude <= 3.4e38", 2)
  end
  if time ~= nil and not finite(time) then
    fail("Player:play: time must be a finite number of magnitude <= 3.4e38", 2)
  end
  if fade > 0 and self.k then
    self.from_k, self.from_t, self.from_rate, self.from_loop = self.k, self.t, self.rate, self.loop
    self.fade_t, self.fade_d = 0, fade
    self.slot = 3 - self.slot
  else
    self.from_k, self.fade_d = nil, 0
  end
  self.k = k
  self.t = time or 0
  self.rate = rate or self.rate
  if loop == nil then self.loop = true else self.loop = loop and true or false end
  self.dirty = true
  return self
end

--- Stops the player (its layer weight for this instance becomes 0).
function Player:stop()
  check_self(self, Player, "stop")
  self.k, self.from_k, self.fade_d = nil, nil, 0
  self.dirty = true
end

--- Jumps to clip time `t`. With `report`, every event between the old and
-- the new time (direct path, no wrap) is reported, as if playing there,
-- after the player moved: an error raised by on_event leaves it at `t`
-- and drops the later events (a second seek reports none twice).
-- @tparam number t clip time in seconds
-- @tparam[opt] boolean report
function Player:seek(t, report)
  check_self(self, Player, "seek")
  check_finite(t, 1, "seek", "time")
  if not self.k then fail("Player:seek: no clip playing", 2) end
  local crowd = self.crowd
  local clip = crowd.clips[self.k]
  local d, t0 = clip:duration(), self.t
  if self.loop then self.t = d > 0 and wrap(t, d) or 0
  else self.t = t < 0 and 0 or (t > d and d or t) end
  self.seeked = true
  self.dirty = true
  -- the player has moved before its events are reported: an on_event that
  -- raises leaves it at `t`, so calling seek again reports nothing twice
  if report and crowd.on_event then
    local target = self.loop and d > 0 and wrap(t, d) or t
    M.step(clip, t0, target - t0, false, crowd.on_event, self)
  end
end

--- Sets the playback rate (negative plays backwards).
-- @tparam number r
function Player:set_rate(r)
  check_self(self, Player, "set_rate")
  check_finite(r, 1, "set_rate", "rate")
  self.rate = r
end

--- Sets loop (true) or clamp (false) mode.
-- @tparam boolean loop
function Player:set_loop(loop)
  check_self(self, Player, "set_loop")
  self.loop = loop and true or false
  self.dirty = true
end

--- Sets the player's weight (>= 0) in its layer's blend.
-- @tparam number w
function Player:set_weight(w)
  check_self(self, Player, "set_weight")
  if type(w) ~= "number" then arg_error(1, "set_weight", "number", w) end
  if not (w >= 0 and w <= MAX_WEIGHT) then
    fail("Player:set_weight: weight must be a number in [0, 1e6] (got " .. tostring(w) .. ")", 2)
  end
  self.w = w
  self.dirty = true
end

--- True while a cross-fade runs; also returns its progress in [0, 1].
-- @treturn boolean fading
-- @treturn number progress (1 when no fade runs)
function Player:fading()
  check_self(self, Player, "fading")
  if self.from_k then return true, self.fade_t / self.fade_d end
  return false, 1
end

--- Root motion of the last advance (root joint translation delta x, y, z
-- in the root's parent space, and yaw delta in radians), across loop wraps.
-- Zero unless the crowd was made with `root_motion`.
-- @treturn number dx
-- @treturn number dy
-- @treturn number dz
-- @treturn number yaw
function Player:root_delta()
  check_self(self, Player, "root_delta")
  return self.rdx, self.rdy, self.rdz, self.ryaw
end

--- Builds a crowd: players for every instance of `pose` over a set of clips.
-- `opts.layers` (default one normal layer) is an array of { `name`,
-- `mask` (one weight per joint), `additive` (bool), `reference` (a Pose
-- for additive layers, e.g. `anim.reference_pose`) }; each layer gets one
-- player per instance. `opts.on_event(player, name, time, data)` receives
-- events (data: the event's payload or nil);
-- `opts.root_motion` = { joint = j, yaw = bool } extracts the root joint's
-- motion (player:root_delta()) and removes it from the pose.
-- @tparam limber.Pose pose output pose batch
-- @tparam table clips array of Clips
-- @tparam[opt] table opts
-- @treturn Crowd
function M.crowd(pose, clips, opts)
  if not is_a(pose, "limber.Pose") then arg_error(1, "crowd", "limber.Pose", pose) end
  if type(clips) ~= "table" then arg_error(2, "crowd", "table", clips) end
  if opts ~= nil and type(opts) ~= "table" then arg_error(3, "crowd", "table or nil", opts) end
  -- options read once, raw, into plain copies used from here on
  opts = snapshot(opts or {})
  if type(opts.root_motion) == "table" then opts.root_motion = snapshot(opts.root_motion) end
  if type(opts.layers) == "table" then
    local ls = {}
    for l = 1, rawlen(opts.layers) do
      local ly = rawget(opts.layers, l)
      ls[l] = type(ly) == "table" and snapshot(ly) or ly
    end
    opts.layers = ls
  end
  -- the caller's array is read once, raw, into a private copy used from here on
  local list = {}
  for k = 1, rawlen(clips) do
    local c = rawget(clips, k)
    if not is_a(c, "limber.Clip") then
      fail(("crowd: clips[%d] must be a limber.Clip (got %s)"):format(k, typename(c)), 2)
    end
    list[k] = c
  end
  clips = list
  if #clips == 0 then fail("crowd: clips must be a non-empty array of Clips", 2) end
  if opts.on_event ~= nil and type(opts.on_event) ~= "function" then
    fail("crowd: opts.on_event must be a function", 2)
  end
  local rm = opts.root_motion
  if rm ~= nil and (type(rm) ~= "table" or math_type(rm.joint) ~= "integer") then
    fail("crowd: opts.root_motion must be { joint = integer, yaw = boolean }", 2)
  end
  local skel = pose:skeleton()
  local N = pose:instance_count()
  local layers = opts.layers or { { name = "base" } }
  if type(layers) ~= "table" then fail("crowd: opts.layers must be an array of layer tables", 2) end
  for l, ly in ipairs(layers) do
    if type(ly) ~= "table" then fail(("crowd: layers[%d] must be a table"):format(l), 2) end
  end
  local crowd = setmetatable({ pose = pose, clips = clips, index = {}, n = N, layers = {},
    samplers = {}, on_event = opts.on_event, players = {}, names = {} }, Crowd)
  for k, c in ipairs(clips) do
    crowd.index[c], crowd.index[k] = k, k
    local nm = c:name()
    if nm then crowd.index[nm] = crowd.index[nm] or k end
  end
  local blend_layers = {}
  for l, ly in ipairs(layers) do
    crowd.names[ly.name or l] = l
    local slots = {}
    for s = 1, 2 do
      local p = core.pose(skel, N)
      local ok, smp = pcall(core.sampler, p, clips)
      if not ok then error(smp, 2) end
      if rm then
        local ok2, err = pcall(smp.set_root_motion, smp, rm.joint, true, rm.yaw)
        if not ok2 then error(err, 2) end
      end
      slots[s] = smp
      crowd.samplers[#crowd.samplers + 1] = smp
      blend_layers[#blend_layers + 1] = { pose = p, mask = ly.mask, additive = ly.additive,
        reference = ly.reference }
    end
    crowd.layers[l] = slots
    local players = {}
    for i = 1, N do
      players[i] = setmetatable({ crowd = crowd, layer = l, i = i, slot = 1, t = 0, rate = 1,
        loop = true, w = 1, fade_t = 0, fade_d = 0, rdx = 0, rdy = 0, rdz = 0, ryaw = 0,
        dirty = true, eclip = false, e0 = 0, ed = 0, eloop = true }, Player)
    end
    crowd.players[l] = players
  end
  local ok, bl = pcall(core.blender, pose, blend_layers)
  if not ok then error(bl, 2) end
  crowd.blend_job = bl
  for b = 1, #blend_layers do bl:set_layer_weight(b, 0) end
  crowd.root = opts.root_motion and opts.root_motion.joint
  return crowd
end

--- The player of instance `i` on layer `layer` (index or name, default 1).
-- @tparam integer i instance in [1, pose:instance_count()]
-- @tparam[opt=1] integer|string layer
-- @treturn Player
function Crowd:player(i, layer)
  check_self(self, Crowd, "player")
  local l = layer == nil and 1 or (layer == layer and self.names[layer]) or layer
  local ps = self.players[l]
  if not ps then fail("Crowd:player: no layer " .. tostring(layer), 2) end
  local p = ps[i]
  if not p then
    fail(("Crowd:player: instance %s out of range [1, %d]"):format(tostring(i), self.n), 2)
  end
  return p
end

-- The events of Crowd:advance: every player has moved; each step is
-- replayed for its events only.
local function deliver_events(self, on_event)
  local step = step_core
  for l = 1, #self.players do
    local players = self.players[l]
    for i = 1, self.n do
      local p = players[i]
      local clip = p.eclip
      if clip then
        p.eclip = false
        step(clip, p.e0, p.ed, p.eloop, on_event, p)
      end
    end
  end
end

--- Advances every player of every layer by `dt` seconds: times (rate,
-- loop or clamp), cross-fades, events (on_event) and root motion.
-- All or nothing: `dt` is checked first and nothing after can fail, so
-- either every player moves or none does. Events are reported after every
-- player has moved, in player order (an error raised by on_event leaves
-- the crowd advanced and drops that frame's later events). Calling
-- advance from on_event raises: the frame's later events would be lost.
-- @tparam number dt seconds (finite, magnitude <= 3.4e38)
function Crowd:advance(dt)
  check_self(self, Crowd, "advance")
  check_finite(dt, 1, "advance", "dt")
  if self.delivering then
    fail("Crowd:advance: called from on_event (advance the crowd after its events)", 2)
  end
  local on_event, root, bl = self.on_event, self.root, self.blend_job
  local step, clips = step_core, self.clips
  for l = 1, #self.players do
    local players, slots = self.players[l], self.layers[l]
    local b0 = 2 * l - 1
    for i = 1, self.n do
      local p = players[i]
      -- events left by a frame whose on_event raised are dropped, not replayed late
      p.eclip = false
      local k = p.k
      if k then
        local clip = clips[k]
        local t0, delta = p.t, p.rate * dt
        if p.seeked then p.seeked = false end
        p.t = step(clip, t0, delta, p.loop)
        if on_event then p.eclip, p.e0, p.ed, p.eloop = clip, t0, delta, p.loop end
        if root then
          local d = clip:duration()
          local ax, ay, az, ayaw = root_pos(clip, root, t0, p.loop, d)
          local bx, by, bz, byaw = root_pos(clip, root, t0 + delta, p.loop, d)
          p.rdx, p.rdy, p.rdz, p.ryaw = bx - ax, by - ay, bz - az, byaw - ayaw
        end
        local f = 1
        if p.from_k then
          -- a negative dt moves a fade back, but never before its start
          local ft = p.fade_t + dt
          if ft < 0 then ft = 0 end
          p.fade_t = ft
          f = ft / p.fade_d
          if f >= 1 then
            f, p.from_k, p.fade_d = 1, nil, 0
          else
            p.from_t = step(clips[p.from_k], p.from_t, p.from_rate * dt, p.from_loop)
          end
        end
        local cur, other = p.slot, 3 - p.slot
        slots[cur]:set(i, k, p.t, p.loop)
        bl:set_weight(i, b0 + cur - 1, p.w * f)
        if p.from_k then
          slots[other]:set(i, p.from_k, p.from_t, p.from_loop)
          bl:set_weight(i, b0 + other - 1, p.w * (1 - f))
        else
          slots[other]:set(i, nil, 0)
          bl:set_weight(i, b0 + other - 1, 0)
        end
      elseif p.dirty then
        slots[1]:set(i, nil, 0)
        slots[2]:set(i, nil, 0)
        bl:set_weight(i, b0, 0)
        bl:set_weight(i, b0 + 1, 0)
      end
      p.dirty = false
    end
  end
  if not on_event then return end
  self.delivering = true
  local ok, err = pcall(deliver_events, self, on_event)
  self.delivering = false
  if not ok then error(err, 0) end
end

--- Samples every layer slot (one C call each, all instances) and blends
-- them into the crowd's pose (one call). Instances with no weight on any
-- normal layer get the rest pose.
function Crowd:evaluate()
  check_self(self, Crowd, "evaluate")
  local s = self.samplers
  for k = 1, #s do s[k]:run() end
  self.blend_job:run()
end

--- The blender (limber.Blender) behind the crowd, for example to change masks.
-- @treturn limber.Blender
function Crowd:blender() check_self(self, Crowd, "blender"); return self.blend_job end

--- limber.snapshot's access to the clips' events (not part of the API):
-- the table it stores with each clip.
-- @local
M._snapshot_events = events_of

--- Whether a clip has events (limber.controller's dispatch: which clips'
-- steps can report any; not part of the API).
-- @local
function M._has_events(clip) return events_of[clip] ~= nil end

--- What identifies a clip's events as they are (a new value after each
-- `set_events`; nil without events): limber.controller's marker cache (not
-- part of the API).
-- @local
function M._events_key(clip) return events_of[clip] end

--- The way back from a loaded snapshot (not part of the API): the stored
-- events of a clip, checked as events given to `clip`, attached to it.
-- `seen` (side table -> events) keeps events that clips shared (a packed
-- clip and its source) shared, so the value saves back to the same bytes.
-- @local
function M._restore_events(clip, side, seen)
  if not is_a(clip, "limber.Clip") then arg_error(1, "_restore_events", "limber.Clip", clip) end
  if type(side) ~= "table" or type(rawget(side, "times")) ~= "table"
      or type(rawget(side, "names")) ~= "table" then
    fail("clip: the snapshot's events are damaged", 3)
  end
  local shared = seen and seen[side]
  if shared and shared.duration == clip:duration() then -- checked for this very duration
    events_of[clip] = shared.events
    return
  end
  local list, times, names = {}, rawget(side, "times"), rawget(side, "names")
  local data = rawget(side, "data")
  if data ~= nil and type(data) ~= "table" then
    fail("clip: the snapshot's events are damaged", 3)
  end
  for k = 1, rawlen(times) do
    list[k] = { time = rawget(times, k), name = rawget(names, k), data = data and rawget(data, k) }
  end
  if #list > 0 then attach_events(clip, list, 2) end
  if seen and not shared then
    seen[side] = { events = events_of[clip], duration = clip:duration() }
  end
end

--- A clip's root displacement and yaw at unwrapped time x (laps of a
-- looping clip add its whole displacement), as the players report root
-- motion; for limber.controller (not part of the API).
-- @local
function M._root_pos(clip, j, x, loop, d)
  local fname = "limber.anim._root_pos"
  if not is_a(clip, "limber.Clip") then arg_error(1, "_root_pos", "limber.Clip", clip) end
  if math_type(j) ~= "integer" or j < 1 or j > 65535 then
    check.arg_fail(2, fname, "joint must be an integer in [1, 65535]", 2)
  end
  if not finite(x) then check.arg_fail(3, fname, "x must be a finite number", 2) end
  if not finite(d) or d < 0 then check.arg_fail(5, fname, "d must be a finite number >= 0", 2) end
  return root_pos(clip, j, x, loop and true or false, d)
end

return M
