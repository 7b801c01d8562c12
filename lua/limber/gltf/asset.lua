--- limber.gltf.asset: using a loaded glTF asset (re-exported by limber.gltf).
--
-- The loader (`limber.gltf`) turns a file into a plain Lua table; the
-- functions here read that table: `info` and `describe` say what is in it,
-- `pose` and `palette` make the limber objects to animate and skin it, and
-- `update_worlds` recomputes its nodes' world matrices. Call them through
-- `limber.gltf` (`gltf.pose(asset, 1, 100)`); their errors name them so:
-- `bad argument #2 to 'limber.gltf.palette' (limber.Pose expected, got nil)`.
--
-- An asset table damaged by its caller (a field removed or replaced) is an
-- argument error naming the function, never a Lua error from inside this
-- file.
-- @module limber.gltf.asset
local core = require "limber.core"
local check = require "limber.check"
local math_type, pack, unpack = check.math_type, check.pack, check.unpack
local limber = require "limber"

local M = {}

local arg_error, arg_fail = check.arg_error, check.arg_fail

local FIELDS = { "nodes", "roots", "scenes", "skins", "skeletons", "meshes", "animations",
                         "warnings" }

-- argument #n of fname must be an asset returned by load / load_bytes
-- (level: as for check.arg_fail, counted from check_asset's caller)
local function check_asset(n, fname, v)
  if type(v) ~= "table" then arg_error(n, fname, "glTF asset", v, 3) end
  for _, k in ipairs(FIELDS) do
    if type(rawget(v, k)) ~= "table" then
      arg_fail(n, fname, ("glTF asset expected, got a table without '%s'"):format(k), 3)
    end
  end
end

-- Runs f(...) for the public function fname whose argument #n is an asset:
-- a plain Lua error from a damaged asset comes out as a bad argument
-- naming the function, at the caller's line; limber's own errors pass
-- through with the caller's position.
local function asset_call(n, fname, f, ...)
  local res = pack(pcall(f, ...))
  if res[1] then return unpack(res, 2, res.n) end
  local err = res[2]
  if type(err) == "string" then
    err = err:gsub("^[^:]*%.lua:%d+: ", "")
    local own = err:find("^limber") or err:find("^bad argument #%d+ to 'limber")
    if not own and not err:find("not enough memory", 1, true) then
      arg_fail(n, fname, "malformed glTF asset: " .. err, 3)
    end
  end
  error(err, 3)
end

local function update_worlds(asset, locals)
  check_asset(1, "limber.gltf.update_worlds", asset)
  if locals ~= nil and type(locals) ~= "table" then
    arg_error(2, "limber.gltf.update_worlds", "table", locals)
  end
  -- in C, one pass; everything is checked before any node changes
  core.gltf_worlds("limber.gltf.update_worlds", asset.nodes, locals)
end

--- Recomputes `node.world` for every node of an asset from each node's
-- `local_matrix` (parents first; trees outside any scene from their root).
-- @tparam table asset
-- @tparam[opt] table locals node -> local matrix overriding node.local_matrix
function M.update_worlds(asset, locals)
  return (asset_call(1, "limber.gltf.update_worlds", update_worlds, asset, locals))
end

local function info(asset)
  check_asset(1, "limber.gltf.info", asset)
  local out = { nodes = #asset.nodes, scenes = #asset.scenes, skeletons = #asset.skeletons,
                skins = {}, meshes = {}, animations = {}, warnings = asset.warnings }
  for k, s in ipairs(asset.skins) do out.skins[k] = { name = s.name, joints = #s.joints } end
  for k, m in ipairs(asset.meshes) do
    local v = 0
    for _, p in ipairs(m.primitives) do v = v + p.vertex_count end
    out.meshes[k] = { name = m.name, primitives = #m.primitives, vertices = v }
  end
  for k, a in ipairs(asset.animations) do
    out.animations[k] = { name = a.name, duration = a.duration, channels = #a.channels }
  end
  return out
end

--- What is in an asset: counts and names.
-- @tparam table asset
-- @treturn table { nodes, scenes, skeletons, skins = {{name, joints}},
--   meshes = {{name, primitives, vertices}}, animations = {{name, duration, channels}} }
function M.info(asset) return (asset_call(1, "limber.gltf.info", info, asset)) end

local function describe(asset)
  check_asset(1, "limber.gltf.describe", asset)
  local t = info(asset)
  local out = { ("%s: %d nodes, %d scenes, %d skeletons"):format(asset.name or "glTF asset",
    t.nodes, t.scenes, t.skeletons) }
  for k, s in ipairs(t.skins) do
    out[#out + 1] = ("  skin %d %q: %d joints"):format(k - 1, s.name or "", s.joints)
  end
  for k, m in ipairs(t.meshes) do
    out[#out + 1] = ("  mesh %d %q: %d primitives, %d vertices"):format(k - 1, m.name or "",
      m.primitives, m.vertices)
  end
  for k, a in ipairs(t.animations) do
    out[#out + 1] = ("  animation %d %q: %.4f s, %d channels"):format(k - 1, a.name or "",
      a.duration, a.channels)
  end
  for _, w in ipairs(t.warnings) do out[#out + 1] = "  warning: " .. w end
  return table.concat(out, "\n")
end

--- A short human-readable summary of an asset (one line per item).
-- @tparam table asset
-- @treturn string
function M.describe(asset) return (asset_call(1, "limber.gltf.describe", describe, asset)) end

local function pose(asset, s, instances)
  local fname = "limber.gltf.pose"
  check_asset(1, fname, asset)
  if s ~= nil and math_type(s) ~= "integer" then
    arg_error(2, fname, "skeleton index (integer)", s)
  end
  if instances ~= nil and math_type(instances) ~= "integer" then
    arg_error(3, fname, "instance count (integer)", instances)
  end
  if instances ~= nil and instances < 1 then
    arg_fail(3, fname, ("instance count must be at least 1, got %d"):format(instances))
  end
  local entry = asset.skeletons[s or 1]
  if not entry then
    check.fail(fname, ("skeleton %s does not exist (the asset has %d)")
      :format(tostring(s or 1), #asset.skeletons))
  end
  local ok, p = pcall(limber.pose, entry.skeleton, instances or 1)
  if not ok then
    -- the instance count is the only argument limber.pose can refuse here
    local problem = type(p) == "string" and p:match("bad argument #2 to '[^']*' %((.*)%)$")
    if problem then arg_fail(3, fname, problem) end
    error(p, 0)
  end
  local root = entry.root_parent and asset.nodes[entry.root_parent].world
  if root then
    for i = 1, p:instance_count() do p:set_root(i, root) end
  end
  return p
end

--- A pose batch for skeleton `s` of an asset (default 1), every instance
-- at the rest pose with its root matrix set to the world matrix of the
-- skeleton root's parent node (identity when it has none).
-- @tparam table asset
-- @tparam[opt=1] integer s skeleton index
-- @tparam[opt=1] integer instances
-- @treturn limber.Pose
function M.pose(asset, s, instances)
  return (asset_call(1, "limber.gltf.pose", pose, asset, s, instances))
end

local PALETTE_OPTIONS = { skin = "integer", layout = "string" }
local LAYOUTS = { mat4 = true, mat3x4 = true }

local function palette(asset, p, opts)
  local fname = "limber.gltf.palette"
  check_asset(1, fname, asset)
  if not check.is_a(p, "limber.Pose") then arg_error(2, fname, "limber.Pose", p) end
  opts = check.options(3, fname, opts, PALETTE_OPTIONS)
  if opts.layout ~= nil and not LAYOUTS[opts.layout] then
    arg_fail(3, fname,
      ("option 'layout' must be \"mat4\" or \"mat3x4\", got %q"):format(opts.layout))
  end
  local k = opts.skin or 1
  local skin = asset.skins[k]
  if not skin then
    check.fail(fname, ("skin %d does not exist (the asset has %d)"):format(k, #asset.skins))
  end
  local entry = asset.skeletons[skin.skeleton]
  if not rawequal(p:skeleton(), entry.skeleton) then
    arg_fail(2, fname, ("the pose is not of skin %d's skeleton"
      .. " (make it with limber.gltf.pose(asset, %d))"):format(k, skin.skeleton))
  end
  return limber.palette(p, { skin = skin.skin, layout = opts.layout })
end

--- A palette for one skin of an asset over a pose of that skin's skeleton
-- (made with `limber.gltf.pose`): entry j of each instance is
-- world(joint j) * inverse bind j, ready for the mesh primitives whose
-- JOINTS_0 name the skin's slots.
-- @tparam table asset
-- @tparam limber.Pose p a pose of the skin's skeleton
-- @tparam[opt] table opts `skin` (integer, default 1: the skin's index in
--   `asset.skins`) and `layout` ("mat4", the default, or "mat3x4"), as for
--   `limber.palette`
-- @treturn limber.Palette
function M.palette(asset, p, opts)
  return (asset_call(1, "limber.gltf.palette", palette, asset, p, opts))
end

return M
