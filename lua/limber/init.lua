--- limber: scene tree and skeletal animation runtime for Lua 5.4.
--
-- This facade turns friendly Lua descriptions into the flat objects of the
-- C core (`limber.core`) and gives access to the other modules
-- (`limber.anim`, `limber.gltf`, `limber.scene`, ...) as fields, loaded on
-- first use. Indices are 1-based; matrices are 16 numbers, column-major;
-- quaternions are {x, y, z, w}. Every function raises an error naming the
-- problem, before anything is changed.
-- @module limber
local core = require "limber.core"
local check = require "limber.check"
local math_type, tointeger = check.math_type, check.tointeger
local rawlen, move = check.rawlen, check.move
local snapshot, is_a = check.snapshot, check.is_a

local M = {}

--- The C module `limber.core` (flat objects and kernels; see its page).
M.core = core
--- Version string of the C module (for example "0.1.0").
M._VERSION = core._VERSION
--- Largest joint count of a skeleton or skin (65535).
M.MAX_JOINTS = core.MAX_JOINTS

local function fail(fname, msg, level)
  error(fname .. ": " .. msg, (level or 1) + 1)
end


-- Raises "bad argument #n to 'limber.<name>' (expected, got type)" at the
-- caller of the public function.
local function argcheck(ok, n, name, expected, v)
  if not ok then check.arg_error(n, "limber." .. name, expected, v, 3) end
end


local IDENTITY = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1 }

local function vec(v, n, default, what, level)
  if v == nil then return default end
  if type(v) ~= "table" or rawlen(v) ~= n then
    fail("limber.skeleton", ("%s must be a table of %d numbers"):format(what, n), level + 1)
  end
  local c = {}
  for k = 1, n do c[k] = rawget(v, k) end
  return c
end


-- The joints array of a skeleton description, each joint read once (raw)
-- and checked: a table, with a unique string name or none. Returns the
-- copies and name -> input index.
local function read_joints(desc, fname)
  if type(desc) ~= "table" then check.arg_error(1, fname, "table of joints", desc, 3) end
  local joints = rawget(desc, "joints") or desc
  if type(joints) ~= "table" then fail(fname, "joints must be a table of joints", 3) end
  local n = rawlen(joints)
  if n == 0 then fail(fname, "no joints", 3) end
  if n > 65535 then fail(fname, ("%d joints, more than the supported 65535"):format(n), 3) end
  local copies, by_name = {}, {}
  for i = 1, n do
    local j = rawget(joints, i)
    if type(j) ~= "table" then fail(fname, ("joint %d is not a table"):format(i), 3) end
    j = snapshot(j)
    copies[i] = j
    if j.name ~= nil then
      if type(j.name) ~= "string" then
        fail(fname, ("joint %d: name must be a string"):format(i), 3)
      end
      if by_name[j.name] then
        fail(fname, ("joints %d and %d share the name '%s'"):format(by_name[j.name], i, j.name), 3)
      end
      by_name[j.name] = i
    end
  end
  return copies, by_name
end

-- The input index of joint i's parent (0 for a root), from a name or an index.
local function parent_index(j, i, n, by_name, fname)
  local p = j.parent
  if p == nil then return 0 end
  if type(p) == "string" then
    local k = by_name[p]
    if not k then fail(fname, ("joint %d: parent '%s' is not a joint name"):format(i, p), 3) end
    return k
  end
  if math_type(p) ~= "integer" then
    fail(fname, ("joint %d: parent must be a name or an integer index"):format(i), 3)
  end
  if p < 1 or p > n then
    fail(fname, ("joint %d: parent %d out of range [1, %d]"):format(i, p, n), 3)
  end
  if p == i then fail(fname, ("joint %d is its own parent"):format(i), 3) end
  return p
end

local function joint_label(j, i)
  return j.name and ("%d ('%s')"):format(i, j.name) or tostring(i)
end

--- Builds a skeleton from joints listed parents first.
-- `desc` is an array of joints, or a table with such an array in `joints`.
-- Each joint is a table with optional fields: `name` (string, unique),
-- `parent` (a joint name or the 1-based index of an earlier joint; nil for
-- a root), `translation` {x,y,z}, `rotation` {x,y,z,w}, `scale` {x,y,z}
-- (the rest pose; defaults identity) and `inverse_bind` (16 numbers,
-- column-major; default identity).
-- Joint k of the skeleton is joint k of `desc`: every index a clip, a skin
-- or a mesh gives means the same joint here. A joint listed before its
-- parent is an error; `limber.sort_joints` orders such a list and says
-- where each joint went.
-- @tparam table desc
-- @treturn limber.Skeleton skeleton
function M.skeleton(desc)
  local fname = "limber.skeleton"
  local joints, by_name = read_joints(desc, fname)
  local n = #joints
  local parents, names, rest, ibm = {}, {}, {}, {}
  for i = 1, n do
    local j = joints[i]
    local p = parent_index(j, i, n, by_name, fname)
    if p > i then
      fail(fname, ("joint %s comes before its parent %s: list parents first, or order the "
        .. "joints with limber.sort_joints")
        :format(joint_label(j, i), joint_label(joints[p], p)), 2)
    end
    parents[i] = p
    names[i] = j.name or false
    local t = vec(j.translation, 3, { 0, 0, 0 }, "translation of joint " .. i, 2)
    local r = vec(j.rotation, 4, { 0, 0, 0, 1 }, "rotation of joint " .. i, 2)
    local sc = vec(j.scale, 3, { 1, 1, 1 }, "scale of joint " .. i, 2)
    local b = vec(j.inverse_bind, 16, IDENTITY, "inverse_bind of joint " .. i, 2)
    local o = (i - 1) * 10
    rest[o + 1], rest[o + 2], rest[o + 3] = t[1], t[2], t[3]
    rest[o + 4], rest[o + 5], rest[o + 6], rest[o + 7] = r[1], r[2], r[3], r[4]
    rest[o + 8], rest[o + 9], rest[o + 10] = sc[1], sc[2], sc[3]
    for k = 1, 16 do ibm[(i - 1) * 16 + k] = b[k] end
  end
  local ok, skel = pcall(core.skeleton, parents, names, rest, ibm)
  if not ok then check.rethrow(skel, fname, "skeleton") end
  return skel
end

--- Orders a list of joints parents first, for `limber.skeleton`.
-- Joints keep their input order, except that a joint listed before its
-- parent comes after it (with the parent's ancestors): a list already in
-- order is returned in the same order. The copies' `parent` fields are
-- rewritten as indices into the new list (names stay names). Use the remap
-- for every other index that referred to the old order (clip tracks, skin
-- joints, mesh joint slots).
-- @tparam table joints as for `limber.skeleton`
-- @treturn table the joints (shallow copies), parents first
-- @treturn table remap: remap[old index] = new index
function M.sort_joints(joints)
  local fname = "limber.sort_joints"
  local copies, by_name = read_joints(joints, fname)
  local n = #copies
  local parent = {}
  for i = 1, n do parent[i] = parent_index(copies[i], i, n, by_name, fname) end
  -- stable: joints keep their input order, except that a joint listed before
  -- its parent pulls the parent's unplaced ancestors in front of it
  local order, remap, state, chain = {}, {}, {}, {}
  for i = 1, n do
    local k = i
    while k ~= 0 and not state[k] do -- walk up to a placed ancestor or a root
      state[k] = "walking"
      chain[#chain + 1] = k
      k = parent[k]
    end
    if k ~= 0 and state[k] == "walking" then
      fail(fname, ("joint %s is in a parent cycle"):format(joint_label(copies[k], k)), 2)
    end
    for c = #chain, 1, -1 do
      local j = chain[c]
      order[#order + 1] = j
      remap[j] = #order
      state[j] = "placed"
      chain[c] = nil
    end
  end
  local out = {}
  for k, i in ipairs(order) do
    local j = copies[i]
    if parent[i] ~= 0 and type(j.parent) ~= "string" then j.parent = remap[parent[i]] end
    out[k] = j
  end
  return out, remap
end

--- A batch of `instances` poses of one skeleton, at the rest pose.
-- Local transforms are set per joint (`pose:set_trs`) or by samplers and
-- blenders in one call for all instances; `pose:local_to_model()` computes
-- every model matrix in one call.
-- @tparam limber.Skeleton skeleton
-- @tparam[opt=1] integer instances in [1, 2^24]
-- @treturn limber.Pose
function M.pose(skeleton, instances)
  argcheck(is_a(skeleton, "limber.Skeleton"), 1, "pose", "limber.Skeleton", skeleton)
  if instances == nil then instances = 1 end
  argcheck(tointeger(instances) ~= nil, 2, "pose", "integer", instances)
  local ok, pose = pcall(core.pose, skeleton, instances)
  if not ok then check.rethrow(pose, "limber.pose", "pose") end
  return pose
end

--- A skin: which skeleton joints a mesh uses and their inverse bind matrices.
-- @tparam limber.Skeleton skeleton
-- @tparam[opt] table joints skeleton joints as indices or names (default: all, in order)
-- @tparam[opt] table inverse_binds one 16-number matrix per skin joint
--   (array of arrays, or one flat array); default: the skeleton's
-- @treturn limber.Skin
function M.skin(skeleton, joints, inverse_binds)
  argcheck(is_a(skeleton, "limber.Skeleton"), 1, "skin", "limber.Skeleton", skeleton)
  local idx
  if joints ~= nil then
    if type(joints) ~= "table" then argcheck(false, 2, "skin", "table or nil", joints) end
    idx = {}
    for k, j in ipairs(joints) do
      if type(j) == "string" then
        local found = skeleton:find(j)
        if not found then
          fail("limber.skin", ("joints[%d]: no joint named '%s'"):format(k, j), 2)
        end
        idx[k] = found
      else
        idx[k] = j
      end
    end
  end
  local flat
  if inverse_binds ~= nil then
    if type(inverse_binds) ~= "table" then
      argcheck(false, 3, "skin", "table or nil", inverse_binds)
    end
    if type(inverse_binds[1]) == "table" then
      flat = {}
      for k, m in ipairs(inverse_binds) do
        if type(m) ~= "table" or #m ~= 16 then
          fail("limber.skin", ("inverse_binds[%d] must have 16 numbers"):format(k), 2)
        end
        move(m, 1, 16, (k - 1) * 16 + 1, flat)
      end
    else
      flat = inverse_binds
    end
  end
  local ok, skin = pcall(core.skin, skeleton, idx, flat)
  if not ok then check.rethrow(skin, "limber.skin", "skin") end
  return skin
end

--- Palette storage for every instance of a pose.
-- `palette:update()` computes `model[joint] * inverse_bind` for every skin
-- joint of every instance, in the layout chosen here: "mat4" (16 floats,
-- column-major, for uniform arrays) or "mat3x4" (three rows of 4 floats,
-- one RGBA32F texel each, for float textures).
-- @tparam limber.Pose pose
-- @tparam[opt] table opts `skin` (default: every joint, skeleton inverse binds), `layout`
-- @treturn limber.Palette
function M.palette(pose, opts)
  argcheck(is_a(pose, "limber.Pose"), 1, "palette", "limber.Pose", pose)
  if opts == nil then opts = {} end
  argcheck(type(opts) == "table", 2, "palette", "table", opts)
  for k in next, opts do -- a misspelt option must not be silently ignored
    if k ~= "skin" and k ~= "layout" then
      error(("bad argument #2 to 'limber.palette' (unknown option '%s'; options are skin, layout)")
        :format(tostring(k)), 2)
    end
  end
  local skin, layout = rawget(opts, "skin"), rawget(opts, "layout")
  argcheck(skin == nil or is_a(skin, "limber.Skin"), 2, "palette", "opts.skin: limber.Skin", skin)
  argcheck(layout == nil or type(layout) == "string", 2, "palette", "opts.layout: string", layout)
  local ok, pal = pcall(core.palette, pose, skin, layout)
  if not ok then check.rethrow(pal, "limber.palette", "palette") end
  return pal
end

--- A new typed buffer: `type` "f32", "u8", "u16" or "u32", `width` scalars
-- per element, and a count or a flat table of values (see `limber.core.buffer`).
-- @tparam string type_name "f32", "u8", "u16" or "u32"
-- @tparam integer width scalars per element, in [1, 64]
-- @tparam integer|table count_or_values element count (zeroed), or a flat
-- table whose length is a multiple of width
-- @treturn limber.Buffer
function M.buffer(type_name, width, count_or_values)
  local ok, b = pcall(core.buffer, type_name, width, count_or_values)
  if not ok then check.rethrow(b, "limber.buffer", "buffer") end
  return b
end

-- A joint given by index or name, as a 1-based index.
local function joint_index(skel, j, fname, what)
  if type(j) == "string" then
    local k = skel:find(j)
    if not k then fail(fname, ("%s: the skeleton has no joint named '%s'"):format(what, j), 4) end
    return k
  end
  return j -- integers are checked by the core
end

-- A mask: an array or Buffer passes unchanged; { root = joint, weight = 1,
-- other = 0 } becomes one weight per joint: `weight` on the joint and its
-- whole subtree, `other` elsewhere.
local function resolve_mask(skel, mask, fname, what)
  if type(mask) ~= "table" or rawget(mask, "root") == nil then return mask end
  local m = snapshot(mask)
  for k in next, m do
    if k ~= "root" and k ~= "weight" and k ~= "other" then
      fail(fname, ("%s: unknown field '%s' (root, weight, other)"):format(what, tostring(k)), 3)
    end
  end
  local root = joint_index(skel, m.root, fname, what .. ".root")
  local J = skel:joint_count()
  if math_type(root) ~= "integer" or root < 1 or root > J then
    fail(fname, ("%s.root must be a joint name or an index in [1, %d]"):format(what, J), 3)
  end
  local w, other = m.weight == nil and 1 or m.weight, m.other == nil and 0 or m.other
  if type(w) ~= "number" or type(other) ~= "number" then
    fail(fname, what .. ".weight and .other must be numbers", 3)
  end
  local parents, inside, out = skel:parents(), {}, {}
  for j = 1, J do
    inside[j] = j == root or (parents[j] ~= 0 and inside[parents[j]]) or false
    out[j] = inside[j] and w or other
  end
  return out
end

-- Copies of a layers array with masks resolved (names, subtrees).
local function resolve_layers(skel, layers, fname)
  if type(layers) ~= "table" then return layers end
  local out = {}
  for k = 1, rawlen(layers) do
    local ly = rawget(layers, k)
    if type(ly) == "table" then
      ly = snapshot(ly)
      ly.mask = resolve_mask(skel, ly.mask, fname, ("layers[%d].mask"):format(k))
    end
    out[k] = ly
  end
  return out
end

--- A joint mask for a layer: one weight per joint, `weight` (default 1) on
-- `root` and its whole subtree and `other` (default 0) elsewhere. The same
-- as `mask = { root = ..., weight = ..., other = ... }` in `limber.plan` and
-- `limber.stack`; for `set_mask`, which takes arrays and Buffers.
-- @tparam limber.Skeleton skeleton
-- @tparam table spec `{ root = joint name or index, weight = 1, other = 0 }`
-- @treturn table one weight per joint
function M.mask(skeleton, spec)
  argcheck(is_a(skeleton, "limber.Skeleton"), 1, "mask", "limber.Skeleton", skeleton)
  argcheck(type(spec) == "table" and rawget(spec, "root") ~= nil, 2, "mask",
    "table with a root joint", spec)
  return resolve_mask(skeleton, spec, "limber.mask", "spec")
end

--- A layer stack: the blend stage with the layer semantics games expect
-- (see `limber.core.stack` and docs/frame.md). `layers[k]` = { `mode` =
-- "override" (default) | "additive", `sources` = { Pose, ... }, `mask` =
-- per-joint weights, an f32 Buffer or { root = joint, weight = 1, other = 0 },
-- `reference` = Pose | { clip =, time = } (additive), `weight`, `name` }.
-- @tparam limber.Pose out the pose written by `stack:run()`
-- @tparam table layers bottom first
-- @treturn limber.Stack
function M.stack(out, layers)
  argcheck(is_a(out, "limber.Pose"), 1, "stack", "limber.Pose", out)
  argcheck(type(layers) == "table", 2, "stack", "table of layers", layers)
  local skel = out:skeleton()
  local ok, st = pcall(core.stack, out, resolve_layers(skel, layers, "limber.stack"))
  if not ok then check.rethrow(st, "limber.stack", "stack") end
  return st
end

local PLAN_FIELDS = { pose = true, clips = true, layers = true, palettes = true, slots = true,
  models = true, locals = true, root_motion = true, ik = true }

-- desc.ik of limber.plan: the solvers (limber.ik.two_bone / aim of the
-- pose's skeleton) as the core's plain constraint tables.
local function resolve_ik(skel, list)
  if type(list) ~= "table" then return list end
  local out = {}
  for k = 1, rawlen(list) do
    local s = rawget(list, k)
    local mt = getmetatable(s)
    local name = type(mt) == "table" and rawget(mt, "__name")
    if name ~= "limber.ik.TwoBone" and name ~= "limber.ik.Aim" then
      fail("limber.plan", ("ik[%d] must be a solver made by limber.ik.two_bone or limber.ik.aim"
        .. " (got %s)"):format(k, check.typename(s)), 3)
    end
    if rawget(s, "skeleton") ~= skel then
      fail("limber.plan", ("ik[%d] is a solver of another skeleton than the pose's"):format(k), 3)
    end
    if name == "limber.ik.TwoBone" then
      out[k] = { kind = "two_bone", root = s.root, mid = s.mid, tip = s.tip, soften = s.soften,
                 keep_tip = s.keep_tip }
    else
      out[k] = { kind = "aim", joint = s.joint, effector = s.effector, forward = s.forward,
                 up = s.up, limit = s.limit }
    end
  end
  return out
end

--- The frame plan: evaluates a whole crowd with one call per frame
-- (`plan:run(dt)`): sample every source -> fold the layer stack ->
-- local-to-model -> palettes, in blocks of 8 instances over the worker
-- pool, with animation LOD. See docs/frame.md.
-- `desc` = { `pose` = Pose, `clips` = { Clip, ... }, `layers` = { { `name`,
-- `mode`, `sources` = count, `mask`, `reference`, `weight` }, ... },
-- `palettes` = { Palette, ... }, `slots` = { joint (index or name), ... },
-- `models` = "slots" | "all", `locals` = true (the evaluated local
-- transforms are written to `pose` too, for `pose:trs()`), `root_motion` =
-- { joint =, xz =, yaw = }, `ik` = { solver, ... } (`limber.ik.two_bone` /
-- `limber.ik.aim` solvers of the pose's skeleton, run in this order per
-- block after local-to-model; per instance they are off until
-- `plan:set_ik` or `plan:follow_ik` gives a target) }.
-- @tparam table desc
-- @treturn limber.Plan
function M.plan(desc)
  argcheck(type(desc) == "table", 1, "plan", "table", desc)
  local d = snapshot(desc)
  for k in next, d do
    if not PLAN_FIELDS[k] then
      fail("limber.plan", ("unknown field '%s' (pose, clips, layers, palettes, slots, models, "
        .. "locals, root_motion, ik)"):format(tostring(k)), 2)
    end
  end
  if is_a(d.pose, "limber.Pose") then
    local skel = d.pose:skeleton()
    d.layers = resolve_layers(skel, d.layers, "limber.plan")
    if type(d.slots) == "table" then
      local slots = {}
      for k = 1, rawlen(d.slots) do
        slots[k] = joint_index(skel, rawget(d.slots, k), "limber.plan", ("slots[%d]"):format(k))
      end
      d.slots = slots
    end
    d.ik = resolve_ik(skel, d.ik)
    if type(d.root_motion) == "table" then
      local rm = snapshot(d.root_motion)
      rm.joint = joint_index(skel, rm.joint, "limber.plan", "root_motion.joint")
      d.root_motion = rm
    end
  end
  local ok, plan = pcall(core.plan, d)
  if not ok then check.rethrow(plan, "limber.plan", "plan") end
  return plan
end

local submodules = { anim = true, gltf = true, scene = true, skinning = true, snapshot = true,
  controller = true, ik = true, retarget = true }

return setmetatable(M, {
  __index = function(t, k)
    if submodules[k] then
      local m = require("limber." .. k)
      rawset(t, k, m)
      return m
    end
  end,
})
