--- limber.controller: clips played by name on layers, with transitions that
-- never pop, over the frame plan.
--
-- A controller drives a crowd through a `limber.plan` (one C call per
-- frame: times, fades, sampling, the layer fold, palettes). Each layer keeps
-- a few source slots (`sources`, default 4): `play` starts a clip in a free
-- slot and fades it in while every other source of the layer fades out from
-- its current weight, so a transition can start while others are in flight
-- (A fading to B, interrupted by C, then A again) and the pose stays
-- continuous: weights inside a layer are normalised, and all of them move
-- linearly to their targets. When every slot is busy the source with the
-- smallest weight makes room (a pop of that weight; more slots avoid it).
--
-- Events and root motion come from every source that contributes, with its
-- effective weight (its share of its layer times the layer's weight, times
-- what the layers above leave of it at the root joint). They are computed
-- on request, per instance, for the last `update` (`events(i)`,
-- `root_motion(i)`), so a frame costs one C call for the whole crowd.
--
-- `on(what, fn)` registers callbacks for events by name or clip, loops and
-- finished clips; they run after each `update`, once the whole crowd was
-- evaluated, in instance order.
--
-- Blend spaces with `markers` keep their clips at one marker phase (the
-- markers passed and the way to the next), so foot-downs stay together;
-- transitions may wait for a marker (`at_marker`).
--
-- State machines and blend spaces step in C for the whole crowd after each
-- run (`limber.core.machines`): parameters, conditions, clip ends and
-- phases, and the weights and synced rates of blend spaces that follow a
-- parameter. Lua only enters the states whose transitions fire and syncs
-- the spaces that sync by markers.
--
-- Events and root motion are found in C as well (`crowd_events`,
-- `root_motions`: the whole crowd in one pass).
-- @module limber.controller
local limber = require "limber"
local anim = require "limber.anim"
local check = require "limber.check"

local M = {}

local Controller = {}
Controller.__index = Controller
Controller.__name = "limber.Controller"

local floor, abs = math.floor, math.abs
local core = limber.core

local function fail(fname, msg, level)
  error(fname .. ": " .. msg, (level or 1) + 1)
end

-- A caller's table read once, raw (no metamethods): a plain copy of its
-- fields, or of its array part 1 .. n (until the first nil); non-tables
-- pass through, to be refused by the checks that follow.
local function raw(t)
  return type(t) == "table" and check.snapshot(t) or t
end
local function rawlist(t)
  if type(t) ~= "table" then return t end
  local out = {}
  local k = 1
  while rawget(t, k) ~= nil do
    out[k] = rawget(t, k)
    k = k + 1
  end
  return out
end

local function check_self(self, name)
  if getmetatable(self) ~= Controller then
    check.arg_error(1, "limber.Controller:" .. name, "limber.Controller", self, 3)
  end
end

local FIELDS = { pose = true, clips = true, layers = true, sources = true, palettes = true,
                 slots = true, models = true, locals = true, root_motion = true,
                 event_weight = true, ik = true }

--- Creates a controller (and its plan).
-- `desc` = { `pose` = Pose (the crowd), `clips` = { Clip, ... } (played by
-- Clip, 1-based index or name), `layers` = { { `name`, `mode` = "override"
-- | "additive", `weight` (default 1), `mask` (as in `limber.plan`),
-- `reference`, `event_weight` (the layer's own: default the controller's)
-- }, ... } (default one "base" layer), `sources` = slots per layer (default
-- 4), `event_weight` = the effective weight at or below which a source's
-- events are not reported (default 0), and the plan's `palettes`,
-- `slots`, `models`, `locals`, `root_motion`, `ik` (IK constraints: set
-- their targets on `ctl:plan()`) }.
-- @tparam table desc
-- @treturn limber.Controller
function M.new(desc)
  local fname = "limber.controller"
  if type(desc) ~= "table" then check.arg_error(1, fname, "table", desc, 2) end
  desc = raw(desc)
  for k in pairs(desc) do
    if not FIELDS[k] then fail(fname, ("unknown field '%s'"):format(tostring(k)), 2) end
  end
  local pose = desc.pose
  if not check.is_a(pose, "limber.Pose") then
    fail(fname, "desc.pose must be a limber.Pose", 2)
  end
  local clips = rawlist(desc.clips)
  if type(clips) ~= "table" or #clips == 0 then
    fail(fname, "desc.clips must be a non-empty array of limber.Clip", 2)
  end
  local by_name, index = {}, {}
  for k, c in ipairs(clips) do
    if not check.is_a(c, "limber.Clip") then
      fail(fname, ("desc.clips[%d] must be a limber.Clip"):format(k), 2)
    end
    index[c] = k
    local n = c:name()
    if n and by_name[n] == nil then by_name[n] = k end
  end
  local S = desc.sources or 4
  if check.math_type(S) ~= "integer" or S < 1 or S > 16 then
    fail(fname, "desc.sources must be an integer in [1, 16]", 2)
  end
  local ew = desc.event_weight or 0
  if type(ew) ~= "number" or ew ~= ew or ew < 0 then
    fail(fname, "desc.event_weight must be a number >= 0", 2)
  end
  local layers = rawlist(desc.layers or { { name = "base" } })
  if type(layers) ~= "table" or #layers == 0 then
    fail(fname, "desc.layers must be a non-empty array", 2)
  end
  local skel = pose:skeleton()
  local pl, names, masks, ews = {}, {}, {}, {}
  for n, ly in ipairs(layers) do
    ly = raw(ly)
    if type(ly) ~= "table" then fail(fname, ("desc.layers[%d] must be a table"):format(n), 2) end
    for k in pairs(ly) do
      if k ~= "name" and k ~= "mode" and k ~= "weight" and k ~= "mask" and k ~= "reference"
          and k ~= "event_weight" then
        fail(fname, ("desc.layers[%d]: unknown field '%s'"):format(n, tostring(k)), 2)
      end
    end
    local lew = ly.event_weight or ew
    if type(lew) ~= "number" or lew ~= lew or lew < 0 then
      fail(fname, ("desc.layers[%d].event_weight must be a number >= 0"):format(n), 2)
    end
    ews[n] = lew
    local name = ly.name or ("layer" .. n)
    if names[name] then fail(fname, ("two layers named '%s'"):format(tostring(name)), 2) end
    names[name] = n
    local mask = ly.mask
    if type(mask) == "table" and mask.root ~= nil then mask = limber.mask(skel, mask) end
    masks[n] = mask
    pl[n] = { name = name, mode = ly.mode, weight = ly.weight, mask = mask,
              reference = ly.reference, sources = S }
  end
  local pdesc = { pose = pose, clips = clips, layers = pl }
  for _, k in ipairs({ "palettes", "slots", "models", "locals", "root_motion", "ik" }) do
    pdesc[k] = desc[k]
  end
  local ok, plan = pcall(limber.plan, pdesc)
  if not ok then error(tostring(plan):gsub("^[^\n:]*:%d+: ", ""), 2) end
  local self = setmetatable({
    plan_ = plan, pose = pose, clips = clips, by_name = by_name, index = index, S = S,
    L = #pl, layer_index = names, masks = masks, modes = {},
    target = {}, held = {}, spaces = {}, machines = {}, params = {},
    synced = {}, ms = core.machines(plan), pids = {}, npids = 0, acts = {},
    cdefs = {}, cspaces = {}, evkeys = {}, hits = {}, due = {},
    last_dt = 0, event_weight = ews, handlers = {},
    N = pose:instance_count(), dropped_ = 0,
  }, Controller)
  for n, ly in ipairs(pl) do self.modes[n] = ly.mode or "override" end
  -- a plan starts every layer's first source at weight 1: here every slot
  -- starts empty, and play fills them
  for i = 1, self.N do
    for n = 1, self.L do plan:set_weight(i, n, 1, 0) end
  end
  return self
end

setmetatable(M, { __call = function(_, desc) return M.new(desc) end })

-- The layer number of `layer` (name or 1-based number), or an argument error.
local function layer_of(self, layer, n, fname)
  local k = self.layer_index[layer] or (check.math_type(layer) == "integer" and layer >= 1
    and layer <= self.L and layer)
  if not k then check.arg_fail(n, fname, ("no layer '%s'"):format(tostring(layer)), 3) end
  return k
end

local function instance_of(self, i, fname)
  if check.math_type(i) ~= "integer" or i < 1 or i > self.N then
    check.arg_fail(2, fname, ("instance %s out of range [1, %d]"):format(tostring(i), self.N), 3)
  end
  return i
end

local function clip_of(self, clip, fname)
  local k = self.index[clip] or self.by_name[clip]
    or (check.math_type(clip) == "integer" and clip >= 1 and clip <= #self.clips and clip)
  if not k then
    check.arg_fail(4, fname, ("no clip '%s' in the controller"):format(tostring(clip)), 3)
  end
  return k
end

-- Fade targets of (i, layer): a flat array, slot s at [base + s].
local function tslot(self, i, n)
  return ((i - 1) * self.L + (n - 1)) * self.S
end

-- The slots a new source (or a blend space's sources) may take on layer n
-- of instance i: free ones (no weight, not fading in, not held by a blend
-- space), else those with the least weight (dropped: counted).
local function free_slots(self, i, n, count)
  local plan, base = self.plan_, tslot(self, i, n)
  local free, taken = {}, {}
  for s = 1, self.S do
    local w = select(5, plan:source(i, n, s))
    if w == 0 and (self.target[base + s] or 0) == 0 and not self.held[base + s] then
      free[#free + 1] = s
    end
  end
  while #free < count do -- drop the lightest of the others
    for _, s in ipairs(free) do taken[s] = true end
    local least
    for s = 1, self.S do
      local w = select(5, plan:source(i, n, s))
      if not taken[s] and (not least or w < least[2]) then least = { s, w } end
    end
    free[#free + 1] = least[1]
    self.dropped_ = self.dropped_ + 1
  end
  for k = count + 1, #free do free[k] = nil end
  return free
end

local marker_rates -- (sync by markers, below)

-- Every source of layer n playing or fading in (not in `keep`) fades out
-- from its current weight over `fade`; those fading out keep their fade. A
-- blend space playing there lets its slots go.
local function fade_out_others(self, i, n, keep, fade)
  local base = tslot(self, i, n)
  for s = 1, self.S do
    if not keep[s] and ((self.target[base + s] or 0) > 0 or self.held[base + s]) then
      self.plan_:set_weight(i, n, s, 0, fade)
      self.target[base + s] = 0
      self.held[base + s] = nil
    end
  end
  local sp = self.spaces[(i - 1) * self.L + n]
  if sp and sp.restore then marker_rates(self, i, n, sp) end -- fading at its rates
  if sp then
    self.ms:bind(i, n, nil)
    self.ms:set_marker(i, n, nil)
  end
  self.spaces[(i - 1) * self.L + n] = nil
  self.synced[(i - 1) * self.L + n] = nil
end

--- Plays `clip` on `layer` of instance i. `opts`: `fade` (seconds: the clip
-- fades in and every other source of the layer fades out from its current
-- weight; default 0, at once), `time` (default 0), `rate` (default 1),
-- `loop` (default true).
-- @tparam integer i instance
-- @param layer name or number
-- @param clip Clip, index or name
-- @tparam[opt] table opts
-- @treturn integer the source slot now playing it
function Controller:play(i, layer, clip, opts)
  check_self(self, "play")
  local fname = "limber.Controller:play"
  instance_of(self, i, fname)
  local n = layer_of(self, layer, 3, fname)
  local k = clip_of(self, clip, fname)
  opts = check.options(5, fname, opts, { fade = "number", time = "number", rate = "number",
    loop = "boolean" }, 2)
  local fade = opts.fade or 0
  if fade ~= fade or fade < 0 or fade > 3.4e38 then
    check.arg_fail(5, fname, "option 'fade' must be a finite number >= 0", 2)
  end
  local plan, base = self.plan_, tslot(self, i, n)
  local pick = free_slots(self, i, n, 1)[1]
  local ok, err = pcall(plan.play, plan, i, n, pick, k, opts.time or 0, opts.rate or 1,
    opts.loop ~= false)
  if not ok then check.rethrow(err, fname, "play", 2) end
  fade_out_others(self, i, n, { [pick] = true }, fade)
  plan:set_weight(i, n, pick, 0)
  plan:set_weight(i, n, pick, 1, fade)
  self.target[base + pick] = 1
  return pick
end

-- Blend spaces and machines are opaque handles: what Lua holds is an empty
-- table; the definition it stands for lives in a private table keyed by
-- that handle, so changing or forging a handle after a controller took it
-- cannot change what the controller runs. Reading a field gives a copy.
local SPACES = setmetatable({}, { __mode = "k" })
local MACHINES = setmetatable({}, { __mode = "k" })

local function copy(v)
  if type(v) ~= "table" then return v end
  local c = {}
  for k, x in next, v do c[k] = copy(x) end
  return c
end

-- The metatable of a handle class: `fields` may be read (as copies).
local function handle_mt(name, defs, fields)
  return {
    __name = name,
    __index = function(h, k)
      local d = defs[h]
      if d and fields[k] then return copy(d[k]) end
      return nil
    end,
    __newindex = function(_, k)
      error(("%s is read-only (field '%s')"):format(name, tostring(k)), 2)
    end,
  }
end

local SPACE_MT = handle_mt("limber.BlendSpace", SPACES,
  { points = true, dims = true, sync = true, tris = true, edges = true })
local MACHINE_MT = handle_mt("limber.Machine", MACHINES, { initial = true })

local function new_handle(mt, defs, data)
  local h = setmetatable({}, mt)
  defs[h] = data
  return h
end

-- The `markers` option of a blend space: nil, or { set = { name = true },
-- names = { ... } } from a name or an array of 1 to 16 names.
local function markers_opt(fname, opts, level)
  local m = opts.markers
  if m == nil then return nil end
  local names = type(m) == "string" and { m } or (type(m) == "table" and rawlist(m))
  local ok = type(names) == "table" and #names >= 1 and #names <= 16
  local set = {}
  for k = 1, ok and #names or 0 do
    if type(names[k]) ~= "string" or names[k] == "" then ok = false end
    set[names[k] or k] = true
  end
  if not ok then
    check.arg_fail(2, fname, "option 'markers' must be an event name or an array of 1 to 16",
      level + 1)
  end
  if opts.sync == false then
    check.arg_fail(2, fname, "option 'markers' needs sync", level + 1)
  end
  return { set = set, names = names }
end

--- A 1D blend space: clips placed along one parameter (a speed, say),
-- weighted linearly between the two clips around the parameter's value
-- (clamped at the ends), so at a clip's point it plays exactly that clip.
-- With `sync` (default true) the clips play at one normalised phase: each
-- runs at rate duration / (the weighted mean duration), so cycles of
-- different lengths (a walk and a run) keep their feet in step.
-- @tparam table points { { clip = Clip | index | name, at = number }, ... }
-- (at least one, `at` strictly increasing once sorted)
-- With `markers` (an event name or an array of names) they play at one
-- marker phase instead: every clip with those events needs the same
-- sequence of them (from where its cycle starts; a clip without any plays
-- as if they were evenly spaced from its start), and each runs between two
-- markers at the rate that brings all of them to their next marker at once (see
-- docs/controller.md, "Sync by markers").
-- @tparam[opt] table opts `sync` (boolean), `markers` (string or array)
-- @treturn table the blend space (a read-only handle; pass it to `Controller:play_space`)
function M.blend1d(points, opts)
  local fname = "limber.controller.blend1d"
  points = rawlist(points)
  if type(points) ~= "table" or #points == 0 then
    check.arg_error(1, fname, "non-empty array of points", points, 2)
  end
  opts = check.options(2, fname, opts, { sync = "boolean", markers = "any" }, 2)
  local markers = markers_opt(fname, opts, 2)
  local list = {}
  for k, p in ipairs(points) do
    p = raw(p)
    if type(p) ~= "table" or p.clip == nil or type(p.at) ~= "number" or p.at ~= p.at
        or math.abs(p.at) > 3.4e38 then
      check.arg_fail(1, fname, ("points[%d] must be { clip =, at = finite number }"):format(k), 2)
    end
    list[k] = { clip = p.clip, at = p.at }
  end
  table.sort(list, function(a, b) return a.at < b.at end)
  for k = 2, #list do
    if list[k].at == list[k - 1].at then
      check.arg_fail(1, fname, ("two points at %g"):format(list[k].at), 2)
    end
  end
  return new_handle(SPACE_MT, SPACES,
    { points = list, sync = opts.sync ~= false, dims = 1, markers = markers })
end

-- ---- 2D blend spaces: a Delaunay triangulation of the points ----------------

-- Whether p lies inside the circumcircle of triangle (a, b, c) (any winding).
local function in_circle(a, b, c, p)
  local ax, ay, bx, by, cx, cy = a[1] - p[1], a[2] - p[2], b[1] - p[1], b[2] - p[2],
    c[1] - p[1], c[2] - p[2]
  local det = (ax * ax + ay * ay) * (bx * cy - cx * by) - (bx * bx + by * by) * (ax * cy - cx * ay)
    + (cx * cx + cy * cy) * (ax * by - bx * ay)
  local orient = (b[1] - a[1]) * (c[2] - a[2]) - (b[2] - a[2]) * (c[1] - a[1])
  return orient > 0 and det > 0 or orient < 0 and det < 0
end

-- Triangles {i, j, k} (indices into pts) of the Delaunay triangulation
-- (Bowyer-Watson); none when the points are collinear.
local function triangulate(pts)
  local minx, miny, maxx, maxy = math.huge, math.huge, -math.huge, -math.huge
  for _, p in ipairs(pts) do
    minx, maxx = math.min(minx, p[1]), math.max(maxx, p[1])
    miny, maxy = math.min(miny, p[2]), math.max(maxy, p[2])
  end
  local span = math.max(maxx - minx, maxy - miny, 1e-9) * 20
  local cx, cy = (minx + maxx) / 2, (miny + maxy) / 2
  local v = {}
  for k, p in ipairs(pts) do v[k] = p end
  local n = #pts
  v[n + 1], v[n + 2], v[n + 3] = { cx - span, cy - span }, { cx + span, cy - span },
    { cx, cy + span }
  local tris = { { n + 1, n + 2, n + 3 } }
  for k = 1, n do
    local bad, edges = {}, {}
    for t = #tris, 1, -1 do
      local tr = tris[t]
      if in_circle(v[tr[1]], v[tr[2]], v[tr[3]], v[k]) then
        bad[#bad + 1] = tr
        table.remove(tris, t)
      end
    end
    for _, tr in ipairs(bad) do
      for e = 1, 3 do
        local a, b = tr[e], tr[e % 3 + 1]
        local key = math.min(a, b) .. ":" .. math.max(a, b)
        if edges[key] == nil then edges[key] = { a, b } else edges[key] = false end
      end
    end
    for _, e in pairs(edges) do
      if e then tris[#tris + 1] = { e[1], e[2], k } end
    end
  end
  local out = {}
  for _, tr in ipairs(tris) do
    if tr[1] <= n and tr[2] <= n and tr[3] <= n then
      local a, b, c = pts[tr[1]], pts[tr[2]], pts[tr[3]]
      local area = (b[1] - a[1]) * (c[2] - a[2]) - (b[2] - a[2]) * (c[1] - a[1])
      if math.abs(area) > 1e-12 * span * span then out[#out + 1] = tr end
    end
  end
  return out
end

-- The edges weights fall back to outside the triangles: the hull's (the
-- edges of one triangle only), or, without triangles (collinear points),
-- the segments between neighbours along the line.
local function hull_edges(pts, tris)
  local count, edges = {}, {}
  for _, tr in ipairs(tris) do
    for e = 1, 3 do
      local a, b = tr[e], tr[e % 3 + 1]
      local key = math.min(a, b) .. ":" .. math.max(a, b)
      count[key] = (count[key] or 0) + 1
      if count[key] == 1 then edges[key] = { a, b } end
    end
  end
  local out = {}
  for key, e in pairs(edges) do
    if count[key] == 1 then out[#out + 1] = e end
  end
  table.sort(out, function(p, q) return p[1] < q[1] or (p[1] == q[1] and p[2] < q[2]) end)
  if #tris > 0 or #pts < 2 then return out end
  -- collinear: order along the direction between the two farthest points
  local a, b, far = 1, 2, -1
  for i = 1, #pts do
    for j = i + 1, #pts do
      local d = (pts[i][1] - pts[j][1]) ^ 2 + (pts[i][2] - pts[j][2]) ^ 2
      if d > far then a, b, far = i, j, d end
    end
  end
  local dx, dy = pts[b][1] - pts[a][1], pts[b][2] - pts[a][2]
  local order = {}
  for i = 1, #pts do order[i] = i end
  table.sort(order, function(p, q)
    return (pts[p][1] * dx + pts[p][2] * dy) < (pts[q][1] * dx + pts[q][2] * dy)
  end)
  for i = 1, #order - 1 do out[#out + 1] = { order[i], order[i + 1] } end
  return out
end

--- A 2D blend space: clips placed on a plane of two parameters (direction
-- and speed, say), triangulated (Delaunay); inside a triangle the three
-- clips are weighted by barycentric coordinates, outside the hull the
-- nearest point of the hull's edges is used, so at a clip's point it plays
-- exactly that clip. Synced like `blend1d`.
-- @tparam table points { { clip =, at = { x, y } }, ... } (distinct points)
-- @tparam[opt] table opts `sync` (boolean, default true), `markers` (as blend1d)
-- @treturn table the blend space (a read-only handle)
function M.blend2d(points, opts)
  local fname = "limber.controller.blend2d"
  points = rawlist(points)
  if type(points) ~= "table" or #points == 0 then
    check.arg_error(1, fname, "non-empty array of points", points, 2)
  end
  opts = check.options(2, fname, opts, { sync = "boolean", markers = "any" }, 2)
  local markers = markers_opt(fname, opts, 2)
  local list, seen = {}, {}
  for k, p in ipairs(points) do
    p = raw(p)
    local at = type(p) == "table" and rawlist(p.at)
    local ok = type(at) == "table" and p.clip ~= nil and type(at[1]) == "number"
      and type(at[2]) == "number" and math.abs(at[1]) <= 1e12 and math.abs(at[2]) <= 1e12
    if not ok then
      check.arg_fail(1, fname,
        ("points[%d] must be { clip =, at = { x, y } } (|x|, |y| <= 1e12)"):format(k), 2)
    end
    local key = at[1] .. ":" .. at[2]
    if seen[key] then
      check.arg_fail(1, fname, ("two points at (%g, %g)"):format(at[1], at[2]), 2)
    end
    seen[key] = true
    list[k] = { clip = p.clip, at = { at[1], at[2] } }
  end
  local pts = {}
  for k, p in ipairs(list) do pts[k] = p.at end
  local tris = triangulate(pts)
  return new_handle(SPACE_MT, SPACES, { points = list, sync = opts.sync ~= false, dims = 2,
                                       tris = tris, edges = hull_edges(pts, tris),
                                       markers = markers })
end

-- The closest point to (x, y) on segment a b: parameter t in [0, 1], squared distance.
-- x as a parameter value for the space (a number, or a fresh { x, y } read
-- raw, once), or nil when it is not one.
local function param_of(space, x)
  if space.dims == 1 then return (type(x) == "number" and x == x) and x or nil end
  if type(x) ~= "table" then return nil end
  local a, b = rawget(x, 1), rawget(x, 2)
  if type(a) == "number" and type(b) == "number" and math.abs(a) <= 1e15
      and math.abs(b) <= 1e15 then
    return { a, b }
  end
end

-- Keeps instance i's sources as the last run played them, before a machine
-- or a marker space changes them (see `ran`).
local keep_run

-- ---- sync by markers --------------------------------------------------------
-- A space with `markers` plays its clips at one marker phase psi in [0, K):
-- the integer part counts the markers passed since the first clip's first
-- marker, the fraction is how far the clip is between that marker and the
-- next. Between two markers every clip runs at a constant rate (its
-- segment's length over the weighted mean of the clips' segment lengths),
-- so all of them reach their next marker at once; there the controller
-- sets the next segment's rates (and moves each clip to the phase, undoing
-- the part of the step it made at the old rate).

-- The markers of a clip: its events named in `set`, as { times (sorted, in
-- [0, d)), names, seg (seg[j]: from marker j to the next, wrapping), d };
-- nil when it has none. `ref` (a clip's markers): a clip without markers
-- gets as many, evenly spaced from its start, with ref's names.
local function clip_markers(clip, set, fname, ref, n)
  local d, list = clip:duration(), {}
  local label = tostring(clip:name() or "?")
  if d <= 0 then
    check.arg_fail(n, fname, ("clip '%s' lasts 0 s: a space synced by markers cannot play it")
      :format(label), 4)
  end
  local at = {} -- a marker at the duration is the one at 0 (once, when both are there)
  for _, e in ipairs(anim.events(clip)) do
    local t = e.time >= d and 0 or e.time
    if set[e.name] and at[t] ~= e.name then
      list[#list + 1] = { t, e.name }
      at[t] = at[t] or e.name
    end
  end
  if #list == 0 then
    if not ref then return nil end
    for j, name in ipairs(ref.names) do list[j] = { (j - 1) * d / #ref.names, name } end
  end
  table.sort(list, function(a, b) return a[1] < b[1] end)
  local m = { times = {}, names = {}, seg = {}, d = d }
  for j, e in ipairs(list) do
    if j > 1 and e[1] == list[j - 1][1] then
      check.arg_fail(n, fname, ("clip '%s' has two markers at %g s"):format(label, e[1]), 4)
    end
    m.times[j], m.names[j] = e[1], e[2]
  end
  local K = #list
  for j = 1, K do
    m.seg[j] = (j < K and m.times[j + 1] or m.times[1] + d) - m.times[j]
  end
  return m
end

-- How far clip m's marker j is from the leader's: the smallest o with the
-- clip's names from marker 1 + o on (wrapping) the leader's, or nil.
local function marker_offset(lead, m)
  local K = #lead.names
  if #m.names ~= K then return nil end
  for o = 0, K - 1 do
    local same = true
    for j = 1, K do
      if m.names[(j - 1 + o) % K + 1] ~= lead.names[j] then same = false; break end
    end
    if same then return o end
  end
end

-- Marker phase of clip m at time t (the leader's numbering).
local function psi_of(m, t)
  local times, K = m.times, #m.times
  local j, from = K, times[K] - m.d
  for q = K, 1, -1 do
    if times[q] <= t then j, from = q, times[q]; break end
  end
  local f = (t - from) / m.seg[j]
  f = f < 0 and 0 or (f >= 1 and 1 - 1e-12 or f)
  return (j - 1 - m.off) % K + f
end

-- The time of clip m at marker phase psi.
local function time_of(m, psi)
  local g = floor(psi)
  local j = (g + m.off) % #m.times + 1
  local t = m.times[j] + (psi - g) * m.seg[j]
  return t >= m.d and t - m.d or t
end

-- The space's length of segment g (0-based, the leader's numbering): the
-- clips' segments weighted by the space's weights.
local function seg_len(sp, g)
  local L = 0
  for k, m in ipairs(sp.mk) do L = L + sp.w[k] * m.seg[(g + m.off) % #m.times + 1] end
  return L
end

-- The marker phase `el` seconds after phase psi (before, when el < 0),
-- segment by segment at the space's current weights: unwrapped (psi's
-- numbering), and the whole cycles of K markers passed besides (laps: the
-- phase is psi + laps * K, kept apart so that a long step keeps its
-- fraction).
local function marker_walk(sp, psi, el)
  local K = #sp.mk[1].times
  local cycle = sp.cycle -- (kept until the weights change)
  if not cycle then
    cycle = 0
    for g = 0, K - 1 do cycle = cycle + seg_len(sp, g) end
    sp.cycle = cycle
  end
  if not (cycle > 0) then return psi, 0 end -- luacheck: ignore
  local laps = 0
  if abs(el) >= cycle then
    laps = el > 0 and floor(el / cycle) or -floor(-el / cycle)
    el = math.fmod(el, cycle)
  end
  for _ = 1, 2 * K + 2 do
    if el == 0 then break end
    local g = floor(psi)
    if el < 0 and psi == g then g = g - 1 end
    local L = seg_len(sp, g % K)
    local rem = el > 0 and (g + 1 - psi) * L or (psi - g) * L
    if abs(el) < rem then
      psi = psi + el / L
      break
    end
    psi = el > 0 and g + 1 or g
    el = el > 0 and el - rem or el + rem
  end
  return psi, laps
end

-- Clip m's time at unwrapped marker phase psi, unwrapped too (increasing
-- with psi; a cycle of K markers is one duration).
local function unwrapped_time(m, psi)
  local K, g = #m.times, floor(psi)
  local j0 = g + m.off
  local j = j0 % K + 1
  return (j0 - j + 1) / K * m.d + m.times[j] + (psi - g) * m.seg[j]
end

-- The rate of clip k of space sp in segment g (L: the segment's length).
local function seg_rate(sp, k, g, L)
  local m = sp.mk[k]
  return m.seg[(g + m.off) % #m.times + 1] / L
end

-- Records that marker space sp is at phase psi (in [0, K)) now: the
-- seconds to its next marker (hi) and back to its previous one (lo), and
-- the time since (el, moved by every update's dt: no absolute clock).
local function marker_due(sp, psi)
  local g = floor(psi)
  local L = seg_len(sp, g)
  sp.psi, sp.g, sp.el = psi, g, 0
  sp.hi, sp.lo = (g + 1 - psi) * L, (psi - g) * L
end

-- The space's phase now (unwrapped: psi's numbering), from its record.
local function marker_now(sp)
  return sp.psi + sp.el / seg_len(sp, sp.g)
end

-- Where clip k of space sp is against where the phase puts it (seconds,
-- wrapped into [-d/2, d/2)): float drift, or a move made on the plan.
local function marker_drift(self, i, n, sp, k, psi)
  local m = sp.mk[k]
  local _, cur = self.plan_:source(i, n, sp.slots[k])
  local drift = (time_of(m, psi % #m.times) - cur) % m.d
  if drift >= m.d / 2 then drift = drift - m.d end
  return drift
end

-- Sets the rates of marker space sp's clips for the segment it is in. With
-- `dt` (the step the coming run makes), a clip off its place by more than
-- float drift since a landing (rates are floats: a long step lands a little
-- off) also gets that difference back over the step, and the space stays
-- marked for a restore.
marker_rates = function(self, i, n, sp, dt)
  local L, again = seg_len(sp, sp.g), false
  dt = sp.long and dt -- only a long landing step can miss by more than float drift
  local psi = dt and marker_now(sp)
  for k, s in ipairs(sp.slots) do
    local rate = seg_rate(sp, k, sp.g, L)
    if dt and dt ~= 0 then -- more than float drift (1e-7 s) off: made up over this step
      local drift = marker_drift(self, i, n, sp, k, psi)
      local fix = drift / dt
      if abs(drift) > 1e-7 and abs(fix) < 1e3 * (abs(rate) + 1) then
        rate, again = rate + fix, true
      end
    end
    self.plan_:set_rate(i, n, s, rate)
  end
  sp.restore, sp.long = again or nil, again or nil
  self.ms:set_restore(i, n, again)
end

-- Puts the clips of marker space sp (layer n of instance i) at the first
-- clip's marker phase (from its time, or rec: the phase its record gives),
-- with the rates of the segment it is in (after a run: a parameter changed
-- the weights; the space follows a clip moved on the plan).
local function marker_sync(self, i, n, sp, rec)
  local plan = self.plan_
  local _, t = plan:source(i, n, sp.slots[1])
  local psi = psi_of(sp.mk[1], t)
  -- the phase it was at (rec), unless the first clip was moved since: a
  -- phase taken again from a clip's time would take its float drift too
  if rec and abs(marker_drift(self, i, n, sp, 1, rec)) <= 1e-6 then
    psi = rec % #sp.mk[1].times
  end
  if seg_len(sp, floor(psi)) <= 0 then return end
  keep_run(self, i)
  for k, s in ipairs(sp.slots) do
    if k > 1 and abs(marker_drift(self, i, n, sp, k, psi)) > 1e-7 then
      plan:set_time(i, n, s, time_of(sp.mk[k], psi))
    end
  end
  marker_due(sp, psi)
  self.ms:set_marker(i, n, sp.hi, sp.lo)
  marker_rates(self, i, n, sp)
  sp.i, sp.n = i, n
  self.synced[(i - 1) * self.L + n] = sp
end

-- Before a run of dt (not 0) that passes a marker of space sp: each clip
-- gets, for this step only, the rate that takes it along its own path from
-- where it is to its time at the phase the segments give, so the run
-- crosses exactly the markers and events on the way (no seek: events, laps
-- and root motion see the step the pose made). The next update puts the
-- segment's rates back. A clip moved on the plan since (set_time, set_rate:
-- more than float drift) is followed when it is the first clip, and put
-- back in place by a seek when it is another.
local function marker_land(self, i, n, sp, dt)
  local plan, K = self.plan_, #sp.mk[1].times
  local psi0 = marker_now(sp)
  local lead = marker_drift(self, i, n, sp, 1, psi0)
  if abs(lead) > 1e-6 then -- the first clip was moved: the space follows it
    local _, t = plan:source(i, n, sp.slots[1])
    local p = psi_of(sp.mk[1], t)
    local dp = (p - psi0) % K
    psi0 = psi0 + (dp >= K / 2 and dp - K or dp)
    lead = marker_drift(self, i, n, sp, 1, psi0)
  end
  local psi1, laps = marker_walk(sp, psi0, dt)
  -- a step that ends on a marker ends a hair past it, so that every clip's
  -- step includes its marker (float landings could fall on either side)
  local near = floor(psi1 + 0.5)
  if abs(psi1 - near) < 1e-6 then psi1 = near + (dt > 0 and 1e-6 or -1e-6) end
  for k, s in ipairs(sp.slots) do
    local m = sp.mk[k]
    local drift = k == 1 and lead or marker_drift(self, i, n, sp, k, psi0)
    if abs(drift) > 1e-6 then -- moved on the plan: back in place, not played
      plan:set_time(i, n, s, time_of(m, psi0 % K))
      drift = 0
    end
    local travel = laps * m.d + (unwrapped_time(m, psi1) - unwrapped_time(m, psi0)) + drift
    local rate = travel / dt
    if not (abs(rate) < 1e30) then -- luacheck: ignore (a step too short to carry it)
      local g = floor(psi1 % K)
      rate = seg_rate(sp, k, g, seg_len(sp, g))
    end
    plan:set_rate(i, n, s, rate)
  end
  marker_due(sp, psi1 % K)
  sp.restore, sp.long = true, abs(dt) > 0.5 or nil
  self.ms:set_marker(i, n, sp.hi, sp.lo)
  self.ms:set_restore(i, n, true)
end

-- The markers of every clip of a space with `markers` (clip indices ks),
-- or nil for a space without; raises argument n of fname when they do not
-- fit (errors at the caller of the caller).
local function space_markers(self, space, ks, fname, n)
  if not space.markers then return nil end
  -- the same space on the same clips with the same events: what was found
  -- (a space is shared by a crowd, which enters it again and again)
  local ev = {}
  for k = 1, #ks do ev[k] = anim._events_key(self.clips[ks[k]]) or false end
  local cache = space.mk_cache
  if not cache then
    cache = setmetatable({}, { __mode = "k" })
    space.mk_cache = cache
  end
  local c = cache[self]
  if c and #c.ks == #ks then
    local same = true
    for k = 1, #ks do
      if c.ks[k] ~= ks[k] or c.ev[k] ~= ev[k] then same = false; break end
    end
    if same then return c.mk end
  end
  local mk = {}
  local set, ref, rk = space.markers.set, nil, nil
  for k = 1, #ks do -- the first clip with markers numbers them
    ref = clip_markers(self.clips[ks[k]], set, fname, nil, n)
    if ref then rk = k; break end
  end
  -- no clip has them: one marker at each clip's start (normalised time)
  ref = ref or { names = { "" } }
  for k = 1, #ks do
    local m = clip_markers(self.clips[ks[k]], set, fname, ref, n)
    m.off = k == rk and 0 or marker_offset(ref, m)
    if not m.off then
      check.arg_fail(n, fname, ("the markers of clip '%s' (%s) do not follow those of '%s' (%s)")
        :format(tostring(self.clips[ks[k]]:name()), table.concat(m.names, ", "),
          tostring(self.clips[ks[rk]]:name()), table.concat(ref.names, ", ")), 3)
    end
    mk[k] = m
  end
  local kcopy = {}
  for k = 1, #ks do kcopy[k] = ks[k] end
  cache[self] = { ks = kcopy, ev = ev, mk = mk }
  return mk
end

-- Sets the weights (and, synced, the rates) of the space playing on layer n.
-- (weights and rates in C: limber.core.machines)
local function apply_space(self, i, n, sp, x, fade)
  local two = type(x) == "table"
  local px, py = two and x[1] or x, two and x[2] or 0
  local el = self.ms:apply(i, n, px, py, fade)
  sp.x = two and { px, py } or x
  if sp.mk then
    local rec = sp.psi and sp.psi + el / seg_len(sp, sp.g) -- (at the weights before)
    sp.w, sp.cycle = sp.cspace:weights(px, py), nil
    marker_sync(self, i, n, sp, rec)
  end
end

-- The space as limber.core.blend_space for this controller's clips (made
-- once per space).
local function cspace_of(self, space, ks)
  local c = self.cspaces[space]
  if c then return c end
  local at, durations = {}, {}
  for k, p in ipairs(space.points) do
    at[k] = space.dims == 1 and p.at or { p.at[1], p.at[2] }
    durations[k] = self.clips[ks[k]]:duration()
  end
  c = core.blend_space({ dims = space.dims, at = at, durations = durations,
                         tris = space.tris, edges = space.edges, sync = space.sync })
  self.cspaces[space] = c
  return c
end

--- Plays a blend space (`limber.controller.blend1d`) on `layer` of instance
-- i at parameter value x: one source per clip of the space, faded in over
-- `fade` while what played fades out (as `play`). `opts`: `fade`, `phase`
-- (the normalised time every clip starts at, default 0). The layer needs
-- a slot per clip of the space (see `sources`).
-- @tparam integer i
-- @param layer
-- @tparam table space
-- @tparam number x
-- @tparam[opt] table opts
function Controller:play_space(i, layer, space, x, opts)
  check_self(self, "play_space")
  local fname = "limber.Controller:play_space"
  instance_of(self, i, fname)
  local n = layer_of(self, layer, 3, fname)
  local handle = space
  space = SPACES[handle]
  if not space then
    check.arg_error(4, fname, "blend space made by limber.controller.blend1d or blend2d", handle, 2)
  end
  local px = param_of(space, x)
  if px == nil then
    check.arg_fail(5, fname, space.dims == 1 and "x must be a number"
      or "x must be { x, y } (numbers, |x|, |y| <= 1e15)", 2)
  end
  x = px
  opts = check.options(6, fname, opts, { fade = "number", phase = "number" }, 2)
  local fade, phase = opts.fade or 0, opts.phase or 0
  if fade ~= fade or fade < 0 or fade > 3.4e38 then
    check.arg_fail(6, fname, "option 'fade' must be a finite number >= 0", 2)
  end
  if phase ~= phase or math.abs(phase) > 3.4e38 then
    check.arg_fail(6, fname, "option 'phase' must be a finite number", 2)
  end
  local pts = space.points
  if #pts > self.S then
    check.arg_fail(4, fname, ("the space has %d clips, the layer %d sources")
      :format(#pts, self.S), 2)
  end
  local ks = {}
  for k, p in ipairs(pts) do ks[k] = clip_of(self, p.clip, fname) end
  -- every clip's markers, checked before anything changes
  local sp = { space = space, mk = space_markers(self, space, ks, fname, 4),
               cspace = cspace_of(self, space, ks) }
  local slots = free_slots(self, i, n, #pts)
  local keep = {}
  for _, s in ipairs(slots) do keep[s] = true end
  fade_out_others(self, i, n, keep, fade)
  sp.slots = slots
  local base = tslot(self, i, n)
  local psi = sp.mk and psi_of(sp.mk[1], phase * sp.mk[1].d - floor(phase) * sp.mk[1].d)
  for k, s in ipairs(slots) do
    local d = self.clips[ks[k]]:duration()
    self.plan_:play(i, n, s, ks[k], sp.mk and time_of(sp.mk[k], psi) or phase * d, 1, true)
    self.plan_:set_weight(i, n, s, 0)
    self.held[base + s] = true
  end
  self.spaces[(i - 1) * self.L + n] = sp
  self.ms:bind(i, n, sp.cspace, slots, sp.mk ~= nil)
  apply_space(self, i, n, sp, x, fade)
end

--- Moves the blend space playing on `layer` of instance i to parameter
-- value x (weights at once, or over `fade` seconds; synced rates at once).
-- @tparam integer i
-- @param layer
-- @tparam number x
-- @tparam[opt] number fade
function Controller:set_param(i, layer, x, fade)
  check_self(self, "set_param")
  local fname = "limber.Controller:set_param"
  instance_of(self, i, fname)
  local n = layer_of(self, layer, 3, fname)
  fade = fade or 0
  if type(fade) ~= "number" or fade ~= fade or fade < 0 then
    check.arg_fail(5, fname, "fade must be a number >= 0", 2)
  end
  local sp = self.spaces[(i - 1) * self.L + n]
  if not sp then check.arg_fail(3, fname, "no blend space plays on that layer", 2) end
  local px = param_of(sp.space, x)
  if px == nil then
    check.arg_fail(4, fname, sp.space.dims == 1 and "x must be a number"
      or "x must be { x, y } (numbers, |x|, |y| <= 1e15)", 2)
  end
  apply_space(self, i, n, sp, px, fade)
end

-- ---- state machines ---------------------------------------------------------

local OPS = {
  ["<"] = function(a, b) return a < b end, ["<="] = function(a, b) return a <= b end,
  [">"] = function(a, b) return a > b end, [">="] = function(a, b) return a >= b end,
  ["=="] = function(a, b) return a == b end, ["~="] = function(a, b) return a ~= b end,
}
local STATE_KEYS = { clip = true, space = true, param = true, loop = true, rate = true,
                     smooth = true, markers = true }
local TRANSITION_KEYS = { from = true, to = true, fade = true, when = true, trigger = true,
                          at_end = true, at_phase = true, at_marker = true, priority = true }

--- A state machine definition, shared by every instance that runs it
-- (`Controller:set_machine`). `def` = { `initial` = state name, `states` =
-- { name = { `clip` = clip (Clip, index or name), `loop` (default true),
-- `rate` } or { `space` = { { clip =, at = }, ... } (a 1D blend space; with
-- `markers` = name(s), synced by them) or
-- `limber.controller.blend1d` space, `param` = parameter name driving it,
-- `smooth` = seconds its weights take to follow a change (default 0.2) }
-- }, `transitions` = { { `from` = state or "any", `to` = state, `fade` =
-- seconds, `when` = { { param, op, value }, ... } (every condition holds;
-- op one of < <= > >= == ~=), `trigger` = name (a boolean parameter: holds
-- when true, set false when the transition fires; `Controller:trigger`
-- sets it), `at_end` =
-- true (the state's clip reached its end, or finished a lap when looping,
-- in the last step), `at_phase` = p (the clip's normalised phase crossed p
-- in the last step), `at_marker` = event name (the state's clip, or a clip
-- of its space with weight, crossed such an event in the last step),
-- `priority` (higher first; then list order) }, ... } }.
-- A transition fires when all its conditions hold; one per update; "any"
-- never re-enters the current state.
-- @tparam table def
-- @treturn table the machine (a read-only handle)
function M.machine(def)
  local fname = "limber.controller.machine"
  local function bad(msg) check.arg_fail(1, fname, msg, 3) end
  if type(def) ~= "table" then check.arg_error(1, fname, "table", def, 2) end
  def = raw(def)
  for k in pairs(def) do
    if k ~= "initial" and k ~= "states" and k ~= "transitions" then
      bad(("unknown field '%s'"):format(tostring(k)))
    end
  end
  if type(def.states) ~= "table" then bad("states must be a table of states by name") end
  local states = {}
  for name, st in pairs(raw(def.states)) do
    st = raw(st)
    if type(name) ~= "string" or type(st) ~= "table" then bad("states must map names to tables") end
    for k in pairs(st) do
      if not STATE_KEYS[k] then
        bad(("state '%s': unknown field '%s'"):format(name, tostring(k)))
      end
    end
    local space = st.space
    if space ~= nil then
      if not SPACES[space] then
        local p1 = type(space) == "table" and rawget(space, 1)
        local two = type(p1) == "table" and type(rawget(p1, "at")) == "table"
        space = (two and M.blend2d or M.blend1d)(space,
          st.markers ~= nil and { markers = st.markers } or nil)
      elseif st.markers ~= nil then
        bad(("state '%s': markers belong to its space (blend1d / blend2d options)"):format(name))
      end
      if type(st.param) == "table" then st.param = rawlist(st.param) end
      local dims = SPACES[space].dims
      local pok = dims == 1 and type(st.param) == "string"
        or dims == 2 and type(st.param) == "table" and type(st.param[1]) == "string"
          and type(st.param[2]) == "string"
      if not pok then
        bad(("state '%s': a space needs a param (two names for a 2D space)"):format(name))
      end
    elseif st.clip == nil then
      bad(("state '%s' needs a clip or a space"):format(name))
    elseif st.markers ~= nil then
      bad(("state '%s': markers need a space"):format(name))
    end
    if st.rate ~= nil and (type(st.rate) ~= "number" or st.rate ~= st.rate) then
      bad(("state '%s': rate must be a number"):format(name))
    end
    local smooth = st.smooth or 0.2
    if type(smooth) ~= "number" or smooth ~= smooth or smooth < 0 then
      bad(("state '%s': smooth must be a number >= 0"):format(name))
    end
    states[name] = { name = name, clip = st.clip, handle = space, space = SPACES[space],
                     param = st.param,
                     loop = st.loop ~= false, rate = st.rate or 1, smooth = smooth }
  end
  if not states[def.initial] then bad("initial must name a state") end
  local list = {}
  local transitions = rawlist(def.transitions or {})
  if type(transitions) ~= "table" then bad("transitions must be an array") end
  for k, tr in ipairs(transitions) do
    local where = ("transitions[%d]"):format(k)
    tr = raw(tr)
    if type(tr) ~= "table" then bad(where .. " must be a table") end
    for key in pairs(tr) do
      if not TRANSITION_KEYS[key] then
        bad(("%s: unknown field '%s'"):format(where, tostring(key)))
      end
    end
    if tr.from ~= "any" and not states[tr.from] then
      bad(where .. ": from must name a state or be 'any'")
    end
    if not states[tr.to] then bad(where .. ": to must name a state") end
    local fade = tr.fade or 0
    if type(fade) ~= "number" or fade ~= fade or fade < 0 then
      bad(where .. ": fade must be >= 0")
    end
    local when = {}
    local conds = rawlist(tr.when or {})
    if type(conds) ~= "table" then bad(where .. ".when must be an array") end
    for c, cond in ipairs(conds) do
      cond = rawlist(cond)
      if type(cond) ~= "table" or type(cond[1]) ~= "string" or not OPS[cond[2]]
          or (type(cond[3]) ~= "number" and type(cond[3]) ~= "boolean") then
        bad(("%s.when[%d] must be { param, op, number or boolean }"):format(where, c))
      end
      when[c] = { cond[1], OPS[cond[2]], cond[3], cond[2] }
    end
    if tr.trigger ~= nil and type(tr.trigger) ~= "string" then
      bad(where .. ": trigger must be a name")
    end
    local ph = tr.at_phase
    if ph ~= nil and (type(ph) ~= "number" or ph ~= ph or ph < 0 or ph > 1) then
      bad(where .. ": at_phase must be in [0, 1]")
    end
    if tr.at_marker ~= nil and type(tr.at_marker) ~= "string" then
      bad(where .. ": at_marker must be an event name")
    end
    list[#list + 1] = { k = k, from = tr.from, to = tr.to, fade = fade, when = when,
                        trigger = tr.trigger, at_end = tr.at_end == true, at_phase = tr.at_phase,
                        at_marker = tr.at_marker, priority = tonumber(tr.priority) or 0 }
  end
  table.sort(list, function(a, b)
    if a.priority ~= b.priority then return a.priority > b.priority end
    return a.k < b.k
  end)
  -- per state, the transitions that can leave it, in firing order
  local by_from = {}
  for name in pairs(states) do
    local l = {}
    for _, tr in ipairs(list) do
      if tr.from == name or (tr.from == "any" and tr.to ~= name) then l[#l + 1] = tr end
    end
    by_from[name] = l
  end
  return new_handle(MACHINE_MT, MACHINES, { initial = def.initial, states = states,
                                           transitions = list, by_from = by_from })
end

-- The value of a space state's parameter(s) in params (0 where unset).
local function space_param(st, params)
  local function num(name) -- clamped as play_space wants it
    local v = params[name]
    if type(v) ~= "number" or v ~= v then return 0 end
    return v < -1e15 and -1e15 or (v > 1e15 and 1e15 or v)
  end
  if st.space.dims == 1 then return num(st.param) end
  return { num(st.param[1]), num(st.param[2]) }
end

-- The number of parameter `name` in this controller (limber.core.machines
-- keeps parameters by number), given on first use; nil past the most.
local function pid_of(self, name)
  local id = self.pids[name]
  if id == nil and self.npids < 4096 then
    self.npids = self.npids + 1
    id = self.npids
    self.pids[name] = id
  end
  return id
end

-- The machine as limber.core.machine_def for this controller (made once per
-- machine): states numbered in name order, each with the transitions that
-- can leave it in firing order. nil, message when it needs more parameter
-- names than a controller holds.
local function compile(self, machine)
  local c = self.cdefs[machine]
  if c then return c end
  local names, index, states = {}, {}, {}
  for name in pairs(machine.states) do names[#names + 1] = name end
  table.sort(names)
  for k, name in ipairs(names) do index[name] = k end
  -- names not yet known get the next numbers here, and are kept only once
  -- the definition is made (a refused machine leaves the controller as it was)
  local fresh, nfresh = {}, 0
  local function pid(name)
    local id = self.pids[name] or fresh[name]
    if not id then
      nfresh = nfresh + 1
      id = self.npids + nfresh
      fresh[name] = id
    end
    return id
  end
  for k, name in ipairs(names) do
    local st, list = machine.states[name], machine.by_from[name]
    local trs = {}
    for t, tr in ipairs(list) do
      local when = {}
      for w, cond in ipairs(tr.when) do when[w] = { pid(cond[1]), cond[4], cond[3] } end
      trs[t] = { when = when, trigger = tr.trigger and pid(tr.trigger), at_end = tr.at_end,
                 at_phase = tr.at_phase, at_marker = tr.at_marker ~= nil }
    end
    local params
    if st.space then
      params = st.space.dims == 1 and { pid(st.param) } or { pid(st.param[1]), pid(st.param[2]) }
    end
    states[k] = { transitions = trs, space = st.space ~= nil,
                  params = params, smooth = st.smooth }
  end
  if self.npids + nfresh > 4096 then
    return nil, "more than 4096 parameter names in one controller"
  end
  c = { def = core.machine_def({ states = states }), index = index }
  for name, id in pairs(fresh) do self.pids[name] = id end
  self.npids = self.npids + nfresh
  self.cdefs[machine] = c
  return c
end

-- Enters state `st` of the machine running on layer n of instance i.
local function enter(self, i, n, run, st, fade)
  local ok, slot = pcall(function()
    if st.space then
      self:play_space(i, n, st.handle, space_param(st, run.params), { fade = fade })
      return nil
    end
    return self:play(i, n, st.clip, { fade = fade, rate = st.rate, loop = st.loop })
  end)
  if not ok then -- the machine stays where it was (events set since set_machine, say)
    error(("instance %d, layer %d: cannot enter state '%s': %s"):format(i, n, st.name,
      (tostring(slot):gsub("^[^\n:]*:%d+: ", ""))), 0)
  end
  run.slot = slot
  run.state = st.name
  -- looked at in the next step: its transitions may hold already
  self.ms:set_run(i, n, run.c.def, run.c.index[st.name], slot)
end

--- Runs a state machine (`limber.controller.machine`) on `layer` of
-- instance i, from its initial state (entered at once, or over `fade`).
-- `update` then moves it: after each step, the first transition whose
-- conditions hold fires (one per update).
-- @tparam integer i
-- @param layer
-- @tparam table machine
-- @tparam[opt] number fade
function Controller:set_machine(i, layer, machine, fade)
  check_self(self, "set_machine")
  local fname = "limber.Controller:set_machine"
  instance_of(self, i, fname)
  local n = layer_of(self, layer, 3, fname)
  local handle = machine
  machine = MACHINES[handle]
  if not machine then
    check.arg_error(4, fname, "machine made by limber.controller.machine", handle, 2)
  end
  for _, st in pairs(machine.states) do -- every clip and space's clip known here
    if st.clip ~= nil then clip_of(self, st.clip, fname) end
    if st.space then
      local ks = {}
      for k, p in ipairs(st.space.points) do ks[k] = clip_of(self, p.clip, fname) end
      if #ks > self.S then
        check.arg_fail(4, fname, ("state '%s': its space has %d clips, the layer %d sources")
          :format(st.name, #ks, self.S), 2)
      end
      space_markers(self, st.space, ks, fname, 4) -- the markers fit (as they are now)
    end
  end
  local c, msg = compile(self, machine)
  if not c then check.arg_fail(4, fname, msg, 2) end
  self.params[i] = self.params[i] or {}
  local run = { machine = machine, params = self.params[i], c = c }
  local key = (i - 1) * self.L + n
  local old = self.machines[key]
  self.machines[key] = run
  local ok, err = pcall(enter, self, i, n, run, machine.states[machine.initial], fade or 0)
  if not ok then
    self.machines[key] = old
    error(fname .. ": " .. tostring(err), 2)
  end
end

--- Sets parameter `name` of instance i (read by its machines' conditions
-- and blend-space states).
-- @tparam integer i
-- @tparam string name
-- @param value number or boolean
function Controller:set(i, name, value)
  check_self(self, "set")
  instance_of(self, i, "limber.Controller:set")
  if type(name) ~= "string" then check.arg_error(3, "limber.Controller:set", "string", name, 2) end
  if type(value) ~= "number" and type(value) ~= "boolean" then
    check.arg_error(4, "limber.Controller:set", "number or boolean", value, 2)
  end
  local id = pid_of(self, name)
  if not id then
    check.arg_fail(3, "limber.Controller:set", "more than 4096 parameter names", 2)
  end
  self.ms:set_param(i, id, value) -- (its machines are looked at in the next step)
  self.params[i] = self.params[i] or {}
  self.params[i][name] = value
end

--- Sets trigger `name` of instance i (the boolean parameter `name` to
-- true): the next transition that waits for it fires and sets it false.
-- @tparam integer i
-- @tparam string name
function Controller:trigger(i, name)
  check_self(self, "trigger")
  instance_of(self, i, "limber.Controller:trigger")
  if type(name) ~= "string" then
    check.arg_error(3, "limber.Controller:trigger", "string", name, 2)
  end
  self:set(i, name, true)
end

--- The current state of the machine on `layer` of instance i (nil: none).
-- @tparam integer i
-- @param layer
-- @treturn string|nil
function Controller:state(i, layer)
  check_self(self, "state")
  instance_of(self, i, "limber.Controller:state")
  local n = layer_of(self, layer, 3, "limber.Controller:state")
  local run = self.machines[(i - 1) * self.L + n]
  return run and run.state
end

-- Whether the state's clip (a space state: one of its clips with weight)
-- crossed an event named `name` in the last step of dt (as the run played
-- it: a marker space may have moved its clips since).
local function crossed_marker(self, i, n, run, name, dt)
  if dt == 0 then return false end
  local sp = self.spaces[(i - 1) * self.L + n]
  local slots = run.slot and { run.slot } or (sp and sp.slots) or {}
  local found = false
  local function hit(_, ev) if ev == name then found = true end end
  for _, s in ipairs(slots) do
    local k, t, rate, loop, w, prev = self.ms:source(i, n, s) -- (as the run played it)
    local clip = k and self.clips[k]
    if clip and w > 0 then
      anim.step(clip, prev, loop and rate * dt or t - prev, loop, hit)
      if found then return true end
    end
  end
  return false
end

-- Whether transition tr holds for the machine run on layer n of instance i
-- after a step of dt.
local function holds(self, i, n, run, tr, dt)
  local when, params = tr.when, run.params
  for k = 1, #when do
    local c = when[k]
    local v = params[c[1]]
    if v == nil or type(v) ~= type(c[3]) then return false end
    if type(v) == "boolean" then
      if not c[2](v and 1 or 0, c[3] and 1 or 0) then return false end
    elseif not c[2](v, c[3]) then
      return false
    end
  end
  if tr.trigger and run.params[tr.trigger] ~= true then return false end
  if tr.at_marker and not crossed_marker(self, i, n, run, tr.at_marker, dt) then return false end
  if tr.at_end or tr.at_phase then
    if not run.slot or dt == 0 then return false end
    local k, t, rate, loop, _, prev = self.plan_:source(i, n, run.slot)
    if not k then return false end
    local d = self.clips[k]:duration()
    if d <= 0 then return tr.at_end end
    local p0, p1
    if loop then
      p0 = prev / d
      p1 = p0 + rate * dt / d
    else
      p0, p1 = prev / d, t / d
    end
    if tr.at_end then
      if loop then
        if math.floor(p1) == math.floor(p0) then return false end
      elseif not (p1 >= 1 and p0 < 1) and not (rate < 0 and p1 <= 0 and p0 > 0) then
        return false
      end
    end
    if tr.at_phase then
      local a, b = math.min(p0, p1), math.max(p0, p1)
      local q = math.floor(a) + tr.at_phase
      if q <= a then q = q + 1 end
      if q > b then return false end
    end
  end
  return true
end

-- Moves the machines after a step of dt: one C pass (limber.core.machines)
-- looks at those whose parameters changed or that entered a state since,
-- and those in a state with a transition on the clip's time; it moves the
-- blend spaces that follow a parameter and reports the transitions that
-- fire (and the marker spaces to move, the transitions that wait for a
-- marker), which are entered here.
local function step_machines(self, dt, count)
  local acts = self.acts
  if count == 0 then return nil end
  local machines, spaces, L = self.machines, self.spaces, self.L
  local failed -- the first transition that could not enter its state
  for a = 1, 2 * count, 2 do
    local key, code = acts[a], acts[a + 1]
    local run = machines[key]
    local i, n = floor((key - 1) / L) + 1, (key - 1) % L + 1
    if code == 0 then -- a space synced by markers follows its parameter(s)
      local st = run.machine.states[run.state]
      keep_run(self, i)
      apply_space(self, i, n, spaces[key], space_param(st, run.params), st.smooth)
    else
      local list = run.machine.by_from[run.state]
      local k = code < 0 and -code or code
      local tr = list[k]
      if code < 0 and not crossed_marker(self, i, n, run, tr.at_marker, dt) then
        tr = nil -- the next that holds, if any
        for k2 = k + 1, #list do
          if holds(self, i, n, run, list[k2], dt) then
            tr = list[k2]
            break
          end
        end
      end
      if tr then
        keep_run(self, i)
        local ok, err = pcall(enter, self, i, n, run, run.machine.states[tr.to], tr.fade)
        if ok then
          if tr.trigger then
            run.params[tr.trigger] = false
            self.ms:set_param(i, self.pids[tr.trigger], false, true)
          end
        else -- stays in its state, tried again next update; the others go on
          self.ms:touch(i, n)
          failed = failed or err
        end
      end
    end
  end
  return failed
end

--- Stops every source of `layer` (fading out over `fade` seconds).
-- @tparam integer i
-- @param layer
-- @tparam[opt] number fade
function Controller:stop(i, layer, fade)
  check_self(self, "stop")
  local fname = "limber.Controller:stop"
  instance_of(self, i, fname)
  local n = layer_of(self, layer, 3, fname)
  fade = fade or 0
  if type(fade) ~= "number" or fade ~= fade or fade < 0 then
    check.arg_fail(4, fname, "fade must be a number >= 0", 2)
  end
  fade_out_others(self, i, n, {}, fade)
  local base = tslot(self, i, n)
  for s = 1, self.S do -- those fading out already: over `fade` too
    self.plan_:set_weight(i, n, s, 0, fade)
    self.target[base + s] = 0
  end
end

--- Sets the weight of `layer` for instance i, at once or over `fade` seconds.
-- @tparam integer i
-- @param layer
-- @tparam number w in [0, 1]
-- @tparam[opt] number fade
function Controller:set_weight(i, layer, w, fade)
  check_self(self, "set_weight")
  local fname = "limber.Controller:set_weight"
  instance_of(self, i, fname)
  local n = layer_of(self, layer, 3, fname)
  local ok, err = pcall(self.plan_.set_layer_weight, self.plan_, i, n, w, fade)
  if not ok then check.rethrow(err, fname, "set_layer_weight", 2) end
end

local dispatch -- after Controller:events (below)

-- The step of an update, while update's `stepping` flag is up: the marker
-- spaces, found in one C pass (those that landed in the last step get their
-- segment's rates back; those whose step passes a marker now land: a step
-- that ends within 1e-9 s of one reaches it), then one C call (the plan's
-- run: times, fades, the crowd's evaluation; then the machines' step, which
-- also forgets what the last update kept), then the transitions it
-- reported. Returns true and the first state that could not be entered, or
-- false and the C call's error.
local function step_all(self, dt)
  if next(self.synced) and dt == dt and abs(dt) <= 3.4e38 then
    local due, synced = self.due, self.synced
    for a = 1, 3 * self.ms:markers(dt, due), 3 do
      local sp, code = synced[due[a]], due[a + 1]
      sp.el = due[a + 2]
      if code % 2 == 1 then marker_rates(self, sp.i, sp.n, sp, dt) end
      if code >= 2 then marker_land(self, sp.i, sp.n, sp, dt) end
    end
  end
  local ok, count = pcall(self.ms.update, self.ms, dt, self.acts)
  if not ok then return false, count end
  self.last_dt = dt
  return true, step_machines(self, dt, count)
end

--- Advances every instance by dt seconds, evaluates the crowd and steps
-- every state machine and blend space, in one C call (`Machines:update`:
-- `plan:run(dt)`, then `Machines:step`; spaces synced by markers take one
-- C pass more, before). A transition starts its fade there: the pose shows
-- it from the next update.
-- @tparam number dt
function Controller:update(dt)
  check_self(self, "update")
  if type(dt) ~= "number" then check.arg_error(2, "limber.Controller:update", "number", dt, 2) end
  dt = dt + 0.0 -- (an integer such as math.mininteger, as a float)
  if self.stepping then
    -- from a __gc run by an allocation of the step: the buffers of markers
    -- and transitions (self.due, self.acts) would be refilled under it
    error("limber.Controller:update: called while this controller steps its machines"
      .. " (from a __gc?)", 2)
  end
  self.stepping = true
  local ok, ran, res = pcall(step_all, self, dt)
  self.stepping = false
  if not ok then error(ran, 0) end
  if not ran then check.rethrow(res, "limber.Controller:update", "update", 2) end
  local failed = res
  -- every handler call is made, even after one raised; then the first
  -- error: a state that could not be entered, else the first handler's
  local raised, herr
  if self.handlers[1] then raised, herr = dispatch(self) end
  if failed then
    error("limber.Controller:update: " .. tostring(failed)
      .. (raised and " (and a handler raised: " .. tostring(herr) .. ")" or ""), 2)
  end
  if raised then error(herr, 0) end
end

--- How many times `play` found every slot of a layer busy and dropped the
-- source with the least weight (a small pop: give the layers more `sources`).
-- @treturn integer
function Controller:dropped() check_self(self, "dropped"); return self.dropped_ end

--- The controller's plan (for palettes, slots, LOD: `plan:set_lod`).
-- @treturn limber.Plan
function Controller:plan() check_self(self, "plan"); return self.plan_ end

-- The mask weight of layer n at joint j (1 without a mask).
local function mask_at(self, n, j)
  local m = self.masks[n]
  if m == nil then return 1 end
  if type(m) == "table" then return m[j] or 0 end
  return (m:get(j))
end

-- The plan's state of instance i's sources: per layer its weight and the
-- sources with weight ({ layer, slot, clip, time, rate, loop, weight, prev }).
local function source_state(self, i, as_ran)
  local plan, state = as_ran and self.ms or self.plan_, {}
  for n = 1, self.L do
    local list = {}
    for s = 1, self.S do
      local k, t, rate, loop, w, prev = plan:source(i, n, s)
      if k and w > 0 then
        list[#list + 1] = { layer = n, slot = s, clip = self.clips[k], time = t, rate = rate,
                            loop = loop, weight = w, prev = prev }
      end
    end
    state[n] = { weight = plan:layer_weight(i, n), list = list }
  end
  return state
end

-- The sources of a state (source_state) with their effective weights (see
-- Controller:sources), written into its entries.
local function effective(self, state, joint)
  local out = {}
  for n = 1, self.L do
    local list, sum = {}, 0
    for _, e in ipairs(state[n].list) do
      list[#list + 1] = e
      sum = sum + e.weight
    end
    local f = state[n].weight * (joint and mask_at(self, n, joint) or 1)
    if #list > 0 and f > 0 then
      if joint and self.modes[n] == "override" then
        for _, e in ipairs(out) do e.effective = e.effective * (1 - f) end
      end
      for _, e in ipairs(list) do
        e.effective = f * e.weight / sum
        out[#out + 1] = e
      end
    end
  end
  return out
end

--- The sources of instance i with weight, bottom layer first: { layer =,
-- slot =, clip =, time =, prev = (the time before the last update's step),
-- rate =, loop =, weight = (in its layer, as set), effective = }. With a
-- `joint`, effective is the source's share of the pose at that joint: its
-- share of its layer times the layer weight times the layer's mask there,
-- times what the override layers above leave. Without, it is the share of
-- its layer times the layer weight (what events report).
-- @tparam integer i
-- @tparam[opt] integer joint
-- @treturn table
function Controller:sources(i, joint)
  check_self(self, "sources")
  instance_of(self, i, "limber.Controller:sources")
  return effective(self, source_state(self, i), joint)
end

-- The sources of instance i as the last update's run played them: a
-- machine that switched after the run (at once, or with new rates) changed
-- the plan's sources since; its instance's state was kept before.
local function ran(self, i, joint)
  return effective(self, source_state(self, i, true), joint)
end

keep_run = function(self, i) self.ms:keep(i) end

-- The step a source made in the last update: its time before, and the
-- signed distance moved (unwrapped: a looping clip may cross its end).
local function step_of(e, dt)
  if e.loop then return e.prev, e.rate * dt end
  return e.prev, e.time - e.prev
end

-- The clips' events as limber.core.machines has them, given again after
-- `limber.anim.set_events` changed them.
local function sync_events(self)
  local keys, ms = self.evkeys, self.ms
  for k, clip in ipairs(self.clips) do
    local ev = anim._events_key(clip) or false
    if keys[k] ~= ev then
      if ev then ms:set_events(k, ev.times, ev.loop_times) else ms:set_events(k, nil) end
      keys[k] = ev
    end
  end
end

-- The events crossed in the last update (by instance i, or by every
-- instance), found in C: records { instance =, layer =, slot =, clip =
-- name, name =, time =, weight =, data = } in instance, source, then
-- playback order.
local function crossed(self, i)
  local out = {}
  if self.last_dt == 0 then return out end
  sync_events(self)
  local hits = self.hits
  local n = self.ms:events(self.event_weight, hits, i)
  for h = 0, n - 1 do
    local b = h * 6
    local clip = self.clips[hits[b + 4]]
    local ev, k = anim._events_key(clip), hits[b + 5]
    local times, names, data = ev.times, ev.names, ev.data
    if k < 0 then k, times, names, data = -k, ev.loop_times, ev.loop_names, ev.loop_data end
    out[h + 1] = { instance = hits[b + 1], layer = hits[b + 2], slot = hits[b + 3],
                   clip = clip:name(), name = names[k], time = times[k], weight = hits[b + 6],
                   data = data and data[k] }
  end
  return out
end

--- The events the sources of instance i crossed in the last `update`, with
-- their effective weight (sources below `event_weight` left out): an array
-- of { clip = name, name =, time =, weight =, data = payload or nil } in
-- source order. Read it (and `root_motion`) before changing the instance's
-- sources with `play`, `set_param` or `set_weight`: those may change the
-- rates and weights it reads (machines and handlers keep what the run
-- played).
-- @tparam integer i
-- @treturn table
function Controller:events(i)
  check_self(self, "events")
  instance_of(self, i, "limber.Controller:events")
  local out = crossed(self, i)
  for _, r in ipairs(out) do r.instance, r.layer, r.slot = nil, nil, nil end
  return out
end

--- The events every instance's sources crossed in the last `update` (as
-- `events`), found in one C pass over the crowd: an array of { instance =,
-- layer =, clip = name, name =, time =, weight =, data = } in instance
-- order, then source order, then playback order.
-- @treturn table
function Controller:crowd_events()
  check_self(self, "crowd_events")
  local out = crossed(self, nil)
  for _, r in ipairs(out) do r.slot = nil end
  return out
end

local ON_KEYS = { event = true, clip = true, loop = true, finished = true }

--- Calls `fn` after every `update` for what `what` selects, once the whole
-- crowd was evaluated and the machines moved (never in the middle of the
-- batch), in instance order, then source order (bottom layer first), then
-- time; handlers in the order they were registered. Sources count as for
-- `events` (effective weight above `event_weight`).
-- `what`: `{ event = name or true, clip = name }` (either or both): the
-- events crossed, `fn(i, { clip =, name =, time =, weight =, layer =,
-- data = the event's payload })`;
-- `{ loop = true or clip name }`: a looping source passed its end (or its
-- start, played backward), `fn(i, { clip =, layer =, weight =, laps = })`
-- (laps: how many times, signed); `{ finished = true or clip name }`: a
-- source that does not loop reached its end (its start, backward),
-- `fn(i, { clip =, layer =, weight = })`.
-- With no handler, an update costs nothing more; with some, one C pass
-- (`plan:stepped`) finds the instances whose sources passed a clip's end
-- or moved on a clip with events, and only those are looked at in Lua.
-- @tparam table what
-- @tparam function fn
-- @return a handle for `off`
function Controller:on(what, fn)
  check_self(self, "on")
  local fname = "limber.Controller:on"
  if type(what) ~= "table" then check.arg_error(1, fname, "table", what, 2) end
  if type(fn) ~= "function" then check.arg_error(2, fname, "function", fn, 2) end
  what = raw(what)
  for k in pairs(what) do
    if not ON_KEYS[k] then
      check.arg_fail(1, fname, ("unknown key '%s' (event, clip, loop, finished)")
        :format(tostring(k)), 2)
    end
  end
  local kind = what.loop ~= nil and "loop" or what.finished ~= nil and "finished" or "event"
  local clip = what.clip
  if kind ~= "event" then
    if what.event ~= nil or clip ~= nil or (what.loop ~= nil and what.finished ~= nil) then
      check.arg_fail(1, fname, "give one of { event =, clip = }, { loop = } or { finished = }", 2)
    end
    clip = what[kind]
    if clip == true then clip = nil end
  elseif what.event == nil and clip == nil then
    check.arg_fail(1, fname, "give event = name (or true), clip = name, loop = or finished =", 2)
  end
  if clip ~= nil and (type(clip) ~= "string" or not self.by_name[clip]) then
    check.arg_fail(1, fname, ("no clip named '%s'"):format(tostring(clip)), 2)
  end
  local event = what.event
  if event ~= nil and event ~= true and type(event) ~= "string" then
    check.arg_fail(1, fname, "event must be a name or true", 2)
  end
  local h = { kind = kind, clip = clip, event = event ~= true and event or nil, fn = fn }
  self.handlers[#self.handlers + 1] = h
  return h
end

--- Removes a handler `on` returned.
-- @param handle
function Controller:off(handle)
  check_self(self, "off")
  for k, h in ipairs(self.handlers) do
    if h == handle then
      table.remove(self.handlers, k)
      h.removed = true -- no more calls, those of a running dispatch included
      return
    end
  end
  check.arg_fail(1, "limber.Controller:off", "not a handler of this controller", 2)
end

-- Runs the handlers for the last update: first every call is collected
-- over the crowd, then made (a handler that plays or sets something
-- changes the next update, not the calls of this one; one that `off`s a
-- handler stops its later calls). A call that raises does not stop the
-- others: returns true and the first error when one did.
dispatch = function(self)
  local dt = self.last_dt
  if dt == 0 then return end
  local hs, calls = self.handlers, {}
  local want = {}
  for _, h in ipairs(hs) do want[h.kind] = true end
  local function add(kind, clip, name, i, rec)
    local shared = false
    for _, h in ipairs(hs) do
      if h.kind == kind and (h.clip == nil or h.clip == clip)
          and (h.event == nil or h.event == name) then
        -- each call its own record: the first takes rec, the others a copy
        -- (`data` stays the clip's payload itself)
        calls[#calls + 1] = { h, i, shared and check.snapshot(rec) or rec }
        shared = true
      end
    end
  end
  -- the instances that can have a call: one C pass finds those whose
  -- sources passed a clip's end or moved on a clip with events, and those
  -- whose sources a machine changed after the run (kept) are added
  local flags
  if want.event then
    flags = {}
    for k, c in ipairs(self.clips) do flags[k] = anim._has_events(c) end
  end
  local list, seen = self.plan_:stepped(flags), {}
  for _, i in ipairs(list) do seen[i] = true end
  for _, i in ipairs(self.ms:kept()) do
    if not seen[i] then list[#list + 1] = i; seen[i] = true end
  end
  -- the events: one C pass over the crowd, by (instance, layer, slot)
  local hits = {}
  if want.event then
    for _, r in ipairs(crossed(self, nil)) do
      local key = ((r.instance - 1) * self.L + r.layer - 1) * self.S + r.slot
      local l = hits[key]
      if not l then l = {}; hits[key] = l end
      l[#l + 1] = r
      if not seen[r.instance] then list[#list + 1] = r.instance; seen[r.instance] = true end
    end
  end
  table.sort(list)
  local ews = self.event_weight
  for _, i in ipairs(list) do
    for _, e in ipairs(ran(self, i)) do
      local ew = ews[e.layer]
      if e.effective > ew or (ew == 0 and e.effective > 0) then
        local name, d = e.clip:name(), e.clip:duration()
        local t0, delta = step_of(e, dt)
        for _, r in ipairs(hits[((i - 1) * self.L + e.layer - 1) * self.S + e.slot] or {}) do
          add("event", name, r.name, i, { clip = name, name = r.name, time = r.time,
                                          weight = r.weight, layer = e.layer, data = r.data })
        end
        if e.loop and want.loop and d > 0 then
          local laps = floor((t0 + delta) / d) - floor(t0 / d)
          if laps ~= 0 then
            add("loop", name, nil, i, { clip = name, layer = e.layer, weight = e.effective,
                                        laps = laps })
          end
        elseif not e.loop and want.finished then
          if (delta > 0 and e.time >= d and e.prev < d)
              or (delta < 0 and e.time <= 0 and e.prev > 0) then
            add("finished", name, nil, i, { clip = name, layer = e.layer, weight = e.effective })
          end
        end
      end
    end
  end
  local raised, first
  for _, c in ipairs(calls) do
    local h = c[1]
    if not h.removed then
      local ok, err = pcall(h.fn, c[2], c[3])
      if not ok and not raised then raised, first = true, err end
    end
  end
  return raised, first
end

-- The root-motion joint argument (default 1), checked.
local function joint_of(self, joint, arg, fname)
  joint = joint or 1
  local J = self.pose:joint_count()
  if check.math_type(joint) ~= "integer" or joint < 1 or joint > J then
    check.arg_fail(arg, fname, ("joint must be an integer in [1, %d]"):format(J), 3)
  end
  return joint
end

--- The root motion of instance i in the last `update`: every source's
-- displacement of joint `joint` (default 1) over its step (clip space),
-- summed by effective weight (additive layers left out). A clip started
-- or moved with set_time in between moved nothing by it. Computed in C
-- (`Machines:root_motion`); `root_motions` gives every instance's at once.
-- @tparam integer i
-- @tparam[opt=1] integer joint
-- @treturn number dx
-- @treturn number dy
-- @treturn number dz
-- @treturn number dyaw (radians about y)
function Controller:root_motion(i, joint)
  check_self(self, "root_motion")
  instance_of(self, i, "limber.Controller:root_motion")
  return self.ms:root_motion(joint_of(self, joint, 2, "limber.Controller:root_motion"), i)
end

--- The root motion of every instance in the last `update` (as
-- `root_motion`), in one C pass: an f32 Buffer of width 4 (dx, dy, dz,
-- dyaw) with one element per instance (`out`, filled, or new).
-- @tparam[opt=1] integer joint
-- @param[opt] out f32 Buffer, width 4, one element per instance
-- @return the Buffer
function Controller:root_motions(joint, out)
  check_self(self, "root_motions")
  local fname = "limber.Controller:root_motions"
  joint = joint_of(self, joint, 1, fname)
  local ok, b = pcall(self.ms.root_motions, self.ms, joint, out)
  if not ok then
    check.arg_fail(2, fname, "out must be a writable f32 Buffer of width 4, one element per "
      .. "instance", 2)
  end
  return b
end

return M
