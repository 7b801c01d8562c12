--- Sparse scene tree: a node knows only its parent and its slot.
--
-- A scene is a `limber.Scene` userdata (csrc/lua/lcore_scene.c over the
-- kernel csrc/kernel/hierarchy.h): every node's data lives there once, and
-- every method is a C function called directly. Nodes are integer ids, the
-- same on every side. The core data of a node is its parent (nil = none),
-- an optional slot on the parent (a name in the parent's slot table or
-- prefab, or a joint of the parent's pose), how much of the slot matrix it
-- follows, and a translation / rotation / scale relative to the base
-- (defaults 0, identity, 1). Derived: base = parent world x slot matrix,
-- world = base x T*R*S.
--
-- Per frame, `scene:update()` is one C call that builds the parent-first
-- order of exactly the nodes whose world can have changed (changed nodes,
-- followers of a pose whose model matrices changed, their descendants) and
-- computes them; leaves are left out and computed when read. `changed()`
-- lists every node whose world changed in the frame, leaves that moved with
-- their parent included. Reads (`world`, `gather`, `changed`, ...) first
-- catch up with a followed pose that changed after the update, so the order
-- of `scene:update()` and `pose:local_to_model()` in a frame does not
-- matter. See docs/scene.md for the algorithm, the figures and the
-- decisions (destroy takes the subtree, ids are recycled first in, first
-- out, ...), and docs/api.luadoc (Scene, Slots) for every method.
--
-- What stays in Lua: the constructor's options, slot tables and prefabs.
-- @module limber.scene
local core = require "limber.core"
local check = require "limber.check"
local lmath = require "limber.math"
local math_type, move = check.math_type, check.move
local typename = check.typename

local M = {}

local HUGE = 3.4e38
local fmt = string.format

local function fail(msg, level)
  error("limber.scene." .. msg, level + 1)
end

local function describe(v)
  if type(v) == "number" or type(v) == "string" then return fmt("%s %s", type(v), tostring(v)) end
  return type(v)
end

--- A new, empty scene: a `limber.Scene` (methods: docs/api.luadoc).
-- @tparam[opt] table opts `capacity` (initial node storage, grows by doubling;
--   default 1024), `stale_bound` (how many unchanged nodes the cached order
--   may keep before it is rebuilt; default 256)
-- @treturn limber.Scene
function M.new(opts)
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then
    error(fmt("bad argument #1 to 'limber.scene.new' (table expected, got %s)", typename(opts)), 2)
  end
  for k in pairs(opts) do
    if k ~= "capacity" and k ~= "stale_bound" then
      error(fmt("bad argument #1 to 'limber.scene.new' (unknown option %s)", describe(k)), 2)
    end
  end
  local cap = opts.capacity or 1024
  if math_type(cap) ~= "integer" or cap < 1 or cap > 2 ^ 26 then
    error("bad argument #1 to 'limber.scene.new' (capacity must be an integer in [1, 67108864])", 2)
  end
  local bound = opts.stale_bound or 256
  if math_type(bound) ~= "integer" or bound < 0 or bound > 0xFFFFFFFF then
    error("bad argument #1 to 'limber.scene.new' (stale_bound must be a non-negative integer)", 2)
  end
  return core.scene(cap, bound)
end

-- ---- slot tables and prefabs ---------------------------------------------------

-- a slot's translation / rotation / scale: nil (the default) or k finite numbers
local function slot_vec(name, what, v, k, default)
  if v == nil then return default end
  local ok = type(v) == "table"
  for j = 1, ok and k or 0 do
    local x = rawget(v, j)
    if type(x) ~= "number" or x ~= x or math.abs(x) > HUGE then ok = false end
  end
  if not ok then fail(fmt("slots: slot '%s': %s must be %d finite numbers", name, what, k), 4) end
  return { v[1], v[2], v[3], v[4] }
end

--- A static slot table (name -> matrix), shared by every node created with it.
-- @tparam table def name -> 16 numbers (column-major, affine) or a table
--   with `translation`, `rotation`, `scale`
-- @treturn limber.Slots
function M.slots(def)
  if type(def) ~= "table" then fail("slots: expected a table name -> matrix", 2) end
  local names = {}
  for k in pairs(def) do
    if type(k) ~= "string" then fail("slots: slot names must be strings", 2) end
    names[#names + 1] = k
  end
  if #names == 0 then fail("slots: no slots", 2) end
  table.sort(names)
  local flat = {}
  for i, name in ipairs(names) do
    local v = def[name]
    if type(v) ~= "table" then fail(fmt("slots: slot '%s' must be a table", name), 2) end
    if #v ~= 0 and #v ~= 16 then
      fail(fmt("slots: slot '%s' must be 16 numbers or a table of translation/rotation/scale",
        name), 2)
    end
    if #v == 16 then
      move(v, 1, 16, (i - 1) * 16 + 1, flat)
    else
      local t = slot_vec(name, "translation", v.translation, 3, { 0, 0, 0 })
      local r = slot_vec(name, "rotation", v.rotation, 4, { 0, 0, 0, 1 })
      local sc = slot_vec(name, "scale", v.scale, 3, { 1, 1, 1 })
      local n = math.sqrt(r[1] ^ 2 + r[2] ^ 2 + r[3] ^ 2 + r[4] ^ 2)
      if n <= 1e-12 then fail(fmt("slots: slot '%s': rotation is a zero quaternion", name), 3) end
      r = { r[1] / n, r[2] / n, r[3] / n, r[4] / n }
      move(lmath.trs_raw(t, r, sc), 1, 16, (i - 1) * 16 + 1, flat)
    end
  end
  local ok, s = pcall(core.slots, names, flat)
  if not ok then error(s, 2) end
  return s
end

--- Flattens a fixed hierarchy into a prefab: a slot table whose slots are
-- the inner nodes, with their matrices relative to the prefab's origin,
-- computed by the C kernel in one local-to-model pass.
-- @tparam table nodes as for `limber.sort_joints` (in any order): each with a
--   unique `name`, optional `parent` (name or index), `translation`, `rotation`,
--   `scale`
-- @treturn limber.Slots
function M.prefab(nodes)
  local limber = require "limber"  -- here: limber requires this module
  if type(nodes) ~= "table" then fail("prefab: expected a table of nodes", 2) end
  for i, nd in ipairs(nodes) do
    if type(nd) ~= "table" or type(nd.name) ~= "string" then
      fail(fmt("prefab: node %d must be a table with a string name", i), 2)
    end
  end
  -- slots are found by name, so the nodes may come in any order
  local ok, sorted = pcall(limber.sort_joints, nodes)
  local skel
  if ok then ok, skel = pcall(limber.skeleton, sorted) end
  if not ok then fail("prefab: " .. tostring(skel or sorted), 2) end
  local pose = limber.pose(skel, 1)
  pose:local_to_model()
  local names = {}
  for j = 1, #skel do names[j] = skel:name(j) end
  return core.slots_from_pose(pose, 1, names)
end

return M
