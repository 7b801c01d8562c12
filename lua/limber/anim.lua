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

local M = {}

local floor <const> = math.floor

-- clip -> { times = {...}, names = {...}, loop_times = {...}, loop_names = {...} }
local events_of = setmetatable({}, { __mode = "k" })

local function fail(msg, level)
  error("limber.anim." .. msg, (level or 1) + 1)
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
-- `desc.events` = { { time =, name = }, ... } (optional),
-- `desc.ignore_missing` drops tracks naming joints the skeleton lacks
-- instead of raising. Rotation keys are normalised; key times must be
-- strictly increasing (equal times are rejected, as glTF requires).
-- `desc.dense = false` skips the frame-major copy that clips keyed on one
-- uniform time grid get for O(1) sampling (it costs memory, about as much
-- as the keys themselves).
-- @tparam table desc
-- @tparam[opt] limber.Skeleton skeleton resolves joint names and checks indices
-- @treturn limber.Clip
function M.clip(desc, skeleton)
  if type(desc) ~= "table" then fail("clip: expected a description table", 2) end
  if type(desc.tracks) ~= "table" then fail("clip: desc.tracks must be an array of tracks", 2) end
  if desc.name ~= nil and type(desc.name) ~= "string" then fail("clip: desc.name must be a string", 2) end
  local tracks, missing = {}, {}
  local J = skeleton and skeleton:count()
  for k, tr in ipairs(desc.tracks) do
    if type(tr) ~= "table" then fail(("clip: tracks[%d] must be a table"):format(k), 2) end
    local joint = tr.joint
    if type(joint) == "string" then
      if not skeleton then
        fail(("clip: tracks[%d]: joint name '%s' needs a skeleton"):format(k, joint), 2)
      end
      local j = skeleton:find(joint)
      if not j then missing[#missing + 1] = joint end
      joint = j
    elseif joint ~= nil and J and (math.type(joint) ~= "integer" or joint < 1 or joint > J) then
      fail(("clip: tracks[%d]: joint %s out of range [1, %d]"):format(k, tostring(joint), J), 2)
    end
    if joint or tr.node ~= nil or tr.joint == nil then
      tracks[#tracks + 1] = { joint = joint, node = tr.node, path = tr.path, width = tr.width,
        interpolation = tr.interpolation, times = tr.times, values = tr.values }
    end
  end
  if #missing > 0 and not desc.ignore_missing then
    fail(("clip: the skeleton has no joint named %s"):format("'" .. table.concat(missing, "', '") .. "'"), 2)
  end
  local events = desc.events
  if events ~= nil and type(events) ~= "table" then fail("clip: desc.events must be an array", 2) end
  local ok, clip = pcall(core.clip, tracks, desc.name, desc.dense ~= false)
  if not ok then error(clip, 2) end
  if events and #events > 0 then
    local d = clip:duration()
    local list = {}
    for k, e in ipairs(events) do
      if type(e) ~= "table" or type(e.name) ~= "string" or type(e.time) ~= "number" then
        fail(("clip: events[%d] must be { time = number, name = string }"):format(k), 2)
      end
      if e.time ~= e.time or e.time < 0 or e.time > d then
        fail(("clip: events[%d] ('%s') time %s is outside the clip [0, %s]")
          :format(k, e.name, tostring(e.time), tostring(d)), 2)
      end
      list[k] = { time = e.time, name = e.name, k = k }
    end
    local function by_time(a, b) return a.time < b.time or (a.time == b.time and a.k < b.k) end
    table.sort(list, by_time)
    local ev = { times = {}, names = {}, loop_times = {}, loop_names = {} }
    for k, e in ipairs(list) do ev.times[k], ev.names[k] = e.time, e.name end
    -- in loop mode an event at the duration happens at 0, before the events at 0
    for _, e in ipairs(list) do if e.time >= d then e.time, e.k = 0, e.k - #list end end
    table.sort(list, by_time)
    for k, e in ipairs(list) do ev.loop_times[k], ev.loop_names[k] = e.time, e.name end
    events_of[clip] = ev
  end
  return clip
end

--- The events of a clip, sorted by time: array of { time =, name = }.
-- @tparam limber.Clip clip
function M.events(clip)
  local ev, out = events_of[clip], {}
  if ev then
    for k = 1, #ev.times do out[k] = { time = ev.times[k], name = ev.names[k] } end
  end
  return out
end

--- Moves a clip time by `delta` and reports every event crossed.
-- Forward, an event at e is crossed when t0 < e <= t1; backward when
-- t1 <= e < t0 (so an event is reported once per crossing, also at loop
-- wraps: each lap reports it again). With `loop` the result is wrapped
-- into [0, d) (t - d floor(t / d)), otherwise clamped into [0, d].
-- `fn(arg, name, time)` is called in playback order.
-- @tparam limber.Clip clip
-- @tparam number t0 current clip time
-- @tparam number delta signed time step (rate * dt)
-- @tparam boolean loop
-- @tparam[opt] function fn event callback
-- @param[opt] arg first argument of fn
-- @treturn number the new clip time
function M.step(clip, t0, delta, loop, fn, arg)
  local d = clip:duration()
  local ev = fn and events_of[clip]
  if not loop or d <= 0 then
    local a = t0 < 0 and 0 or (t0 > d and d or t0)
    local b = a + delta
    b = b < 0 and 0 or (b > d and d or b)
    if ev then
      local times, names = ev.times, ev.names
      if b > a then
        for k = 1, #times do
          local e = times[k]
          if e > a and e <= b then fn(arg, names[k], e) end
        end
      elseif b < a then
        for k = #times, 1, -1 do
          local e = times[k]
          if e < a and e >= b then fn(arg, names[k], e) end
        end
      end
    end
    return b
  end
  local a = t0 - d * floor(t0 / d)
  local b = a + delta
  if ev then
    local times, names, n = ev.loop_times, ev.loop_names, #ev.loop_times
    local laps = 0
    if delta > 0 then
      local base = 0
      while base <= b and laps < 10000 do
        for k = 1, n do
          local e = base + times[k]
          if e > a and e <= b then fn(arg, names[k], times[k]) end
        end
        base, laps = base + d, laps + 1
      end
    elseif delta < 0 then
      local base = 0
      while base + d > b and laps < 10000 do
        for k = n, 1, -1 do
          local e = base + times[k]
          if e < a and e >= b then fn(arg, names[k], times[k]) end
        end
        base, laps = base - d, laps + 1
      end
    end
  end
  return b - d * floor(b / d)
end

--- A one-instance pose of `skeleton` holding `clip` sampled at `time`:
-- the reference of an additive layer.
-- @tparam limber.Skeleton skeleton
-- @tparam limber.Clip clip
-- @tparam[opt=0] number time
-- @treturn limber.Pose
function M.reference_pose(skeleton, clip, time)
  local pose = core.pose(skeleton, 1)
  local s = core.sampler(pose, { clip })
  s:set(1, 1, time or 0, false)
  s:run()
  return pose
end

--- Low-level batched sampler (see `limber.core.sampler`): plays one clip
-- of `clips` per instance of `pose`.
-- @function sampler
-- @tparam limber.Pose pose
-- @tparam table clips array of limber.Clip that fit the pose's skeleton
-- @treturn limber.Sampler
M.sampler = core.sampler
--- Low-level blender (see `limber.core.blender`): blends layer poses into
-- `out` with per-instance weights, masks and additive layers.
-- @function blender
-- @tparam limber.Pose out
-- @tparam table layers `{ pose =, mask =, additive =, reference = }` entries
-- @treturn limber.Blender
M.blender = core.blender

-- ---- players ----------------------------------------------------------

local Player = {}
Player.__index = Player
Player.__name = "limber.anim.Player"

local Crowd = {}
Crowd.__index = Crowd
Crowd.__name = "limber.anim.Crowd"

local function yaw_of(x, y, z, w)
  return math.atan(2 * (w * y + x * z), 1 - 2 * (y * y + x * x))
end

local function wrap_angle(a)
  return a - 2 * math.pi * floor((a + math.pi) / (2 * math.pi))
end

-- Root displacement at unwrapped position x (loop) or clamped x: F(x).
local function root_pos(clip, j, x, loop, d)
  local laps = 0
  if loop and d > 0 then
    laps = floor(x / d)
    x = x - laps * d
  else
    x = x < 0 and 0 or (x > d and d or x)
  end
  local px, py, pz = clip:sample_joint(j, "translation", x)
  if not px then return 0, 0, 0, 0 end
  local qx, qy, qz, qw = clip:sample_joint(j, "rotation", x)
  local yaw = qx and yaw_of(qx, qy, qz, qw) or 0
  if laps ~= 0 then
    local ex, ey, ez = clip:sample_joint(j, "translation", d)
    local sx, sy, sz = clip:sample_joint(j, "translation", 0)
    px, py, pz = px + laps * (ex - sx), py + laps * (ey - sy), pz + laps * (ez - sz)
    if qx then
      local a0 = yaw_of(clip:sample_joint(j, "rotation", 0))
      local a1 = yaw_of(clip:sample_joint(j, "rotation", d))
      yaw = yaw + laps * wrap_angle(a1 - a0)
    end
  end
  return px, py, pz, yaw
end

--- The instance this player animates (1-based).
function Player:instance() return self.i end

--- The clip playing (nil when stopped), its time, rate, loop flag and weight.
-- @treturn limber.Clip|nil clip
-- @treturn number time in seconds
-- @treturn number rate
-- @treturn boolean loop
-- @treturn number weight
function Player:state()
  local c = self.crowd
  return self.k and c.clips[self.k], self.t, self.rate, self.loop, self.w
end

--- The current clip time in seconds.
function Player:time() return self.t end

--- Starts `clip` (a Clip of the crowd's set, its 1-based number or its name).
-- `opts`: `time` (default 0), `rate` (default: keep, initially 1; negative
-- plays backwards), `loop` (default true), `fade` (cross-fade duration in
-- seconds from the clip playing now, default 0).
-- @tparam limber.Clip|integer|string clip
-- @tparam[opt] table opts
-- @return self
function Player:play(clip, opts)
  local crowd = self.crowd
  local k = crowd.index[clip]
  if not k then fail("Player:play: clip is not in the crowd's clip set: " .. tostring(clip), 2) end
  opts = opts or {}
  local fade = opts.fade or 0
  if type(fade) ~= "number" or fade < 0 or fade ~= fade then
    fail("Player:play: fade must be a number >= 0", 2)
  end
  if opts.rate ~= nil and type(opts.rate) ~= "number" then fail("Player:play: rate must be a number", 2) end
  if fade > 0 and self.k then
    self.from_k, self.from_t, self.from_rate, self.from_loop = self.k, self.t, self.rate, self.loop
    self.fade_t, self.fade_d = 0, fade
    self.slot = 3 - self.slot
  else
    self.from_k, self.fade_d = nil, 0
  end
  self.k = k
  self.t = opts.time or 0
  self.rate = opts.rate or self.rate
  if opts.loop == nil then self.loop = true else self.loop = opts.loop and true or false end
  self.dirty = true
  return self
end

--- Stops the player (its layer weight for this instance becomes 0).
function Player:stop()
  self.k, self.from_k, self.fade_d = nil, nil, 0
  self.dirty = true
end

--- Jumps to clip time `t`. With `report`, every event between the old and
-- the new time (direct path, no wrap) is reported, as if playing there.
-- @tparam number t clip time in seconds
-- @tparam[opt] boolean report
function Player:seek(t, report)
  if type(t) ~= "number" or t ~= t then fail("Player:seek: time must be a number", 2) end
  if not self.k then fail("Player:seek: no clip playing", 2) end
  local crowd = self.crowd
  local clip = crowd.clips[self.k]
  if report and crowd.on_event then
    local d = clip:duration()
    local target = self.loop and d > 0 and (t - d * floor(t / d)) or t
    M.step(clip, self.t, target - self.t, false, crowd.on_event, self)
  end
  local d = clip:duration()
  if self.loop then self.t = d > 0 and t - d * floor(t / d) or 0
  else self.t = t < 0 and 0 or (t > d and d or t) end
  self.seeked = true
  self.dirty = true
end

--- Sets the playback rate (negative plays backwards).
-- @tparam number r
function Player:set_rate(r)
  if type(r) ~= "number" or r ~= r then fail("Player:set_rate: rate must be a number", 2) end
  self.rate = r
end

--- Sets loop (true) or clamp (false) mode.
-- @tparam boolean loop
function Player:set_loop(loop) self.loop = loop and true or false; self.dirty = true end

--- Sets the player's weight (>= 0) in its layer's blend.
-- @tparam number w
function Player:set_weight(w)
  if type(w) ~= "number" or w ~= w or w < 0 then fail("Player:set_weight: weight must be a number >= 0", 2) end
  self.w = w
  self.dirty = true
end

--- True while a cross-fade runs; also returns its progress in [0, 1].
-- @treturn boolean fading
-- @treturn number progress (1 when no fade runs)
function Player:fading()
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
  return self.rdx, self.rdy, self.rdz, self.ryaw
end

--- Builds a crowd: players for every instance of `pose` over a set of clips.
-- `opts.layers` (default one normal layer) is an array of { `name`,
-- `mask` (one weight per joint), `additive` (bool), `reference` (a Pose
-- for additive layers, e.g. `anim.reference_pose`) }; each layer gets one
-- player per instance. `opts.on_event(player, name, time)` receives events;
-- `opts.root_motion` = { joint = j, yaw = bool } extracts the root joint's
-- motion (player:root_delta()) and removes it from the pose.
-- @tparam limber.Pose pose output pose batch
-- @tparam table clips array of Clips
-- @tparam[opt] table opts
-- @treturn Crowd
function M.crowd(pose, clips, opts)
  opts = opts or {}
  if type(clips) ~= "table" or #clips == 0 then fail("crowd: clips must be a non-empty array of Clips", 2) end
  local skel = pose:skeleton()
  local N = pose:instances()
  local layers = opts.layers or { { name = "base" } }
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
      if opts.root_motion then smp:set_root_motion(opts.root_motion.joint, true, opts.root_motion.yaw) end
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
        dirty = true }, Player)
    end
    crowd.players[l] = players
  end
  local ok, bl = pcall(core.blender, pose, blend_layers)
  if not ok then error(bl, 2) end
  crowd.blender = bl
  for b = 1, #blend_layers do bl:set_layer_weight(b, 0) end
  crowd.root = opts.root_motion and opts.root_motion.joint
  return crowd
end

--- The player of instance `i` on layer `layer` (index or name, default 1).
-- @tparam integer i instance in [1, pose:instances()]
-- @tparam[opt=1] integer|string layer
-- @treturn Player
function Crowd:player(i, layer)
  local l = self.names[layer] or layer or 1
  local ps = self.players[l]
  if not ps then fail("Crowd:player: no layer " .. tostring(layer), 2) end
  local p = ps[i]
  if not p then fail(("Crowd:player: instance %s out of range [1, %d]"):format(tostring(i), self.n), 2) end
  return p
end

--- Advances every player of every layer by `dt` seconds: times (rate,
-- loop or clamp), cross-fades, events (on_event) and root motion.
-- @tparam number dt seconds
function Crowd:advance(dt)
  local on_event, root, bl = self.on_event, self.root, self.blender
  local step, clips = M.step, self.clips
  for l = 1, #self.players do
    local players, slots = self.players[l], self.layers[l]
    local b0 = 2 * l - 1
    for i = 1, self.n do
      local p = players[i]
      local k = p.k
      if k then
        local clip = clips[k]
        local t0, delta = p.t, p.rate * dt
        if p.seeked then p.seeked = false end
        p.t = step(clip, t0, delta, p.loop, on_event, p)
        if root then
          local d = clip:duration()
          local ax, ay, az, ayaw = root_pos(clip, root, t0, p.loop, d)
          local bx, by, bz, byaw = root_pos(clip, root, t0 + delta, p.loop, d)
          p.rdx, p.rdy, p.rdz, p.ryaw = bx - ax, by - ay, bz - az, byaw - ayaw
        end
        local f = 1
        if p.from_k then
          p.fade_t = p.fade_t + dt
          f = p.fade_t / p.fade_d
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
          slots[other]:set(i, 0, 0)
          bl:set_weight(i, b0 + other - 1, 0)
        end
      elseif p.dirty then
        slots[1]:set(i, 0, 0)
        slots[2]:set(i, 0, 0)
        bl:set_weight(i, b0, 0)
        bl:set_weight(i, b0 + 1, 0)
      end
      p.dirty = false
    end
  end
end

--- Samples every layer slot (one C call each, all instances) and blends
-- them into the crowd's pose (one call). Instances with no weight on any
-- normal layer get the rest pose.
function Crowd:evaluate()
  local s = self.samplers
  for k = 1, #s do s[k]:run() end
  self.blender:run()
end

--- The blender (limber.Blender) behind the crowd, for example to change masks.
-- @treturn limber.Blender
function Crowd:blend() return self.blender end

return M
