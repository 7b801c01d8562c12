--- limber.ik: two-bone and aim inverse kinematics on pose batches.
--
-- A solver is described once (its joints, by name or 1-based index, and
-- its settings) and then solves any number of instances of a pose in one
-- call: `targets` (and `poles`) are `{ x, y, z }` for one instance or an f32
-- Buffer of width 3 with one entry per instance, `weights` a number in
-- [0, 1] or an f32 Buffer of width 1, and the instances start at `first`
-- (default 1). Targets and poles are in the pose's model space (the world,
-- when the pose has root matrices). A solve brings the model matrices up to
-- date first, turns the chain's joints (their local rotations change) and
-- updates the model matrices of the joints below them, so a palette or a
-- scene reads the solved pose. See `csrc/kernel/ik.h` for the exact rules.
--
--     local leg = limber.ik.two_bone(skeleton, "thigh_l", "knee_l", "foot_l",
--                                    { keep_tip = true })
--     pose:local_to_model()
--     leg:solve(pose, { 0.1, 0, 0.3 }, { 0.1, 0.5, 2 }) -- target, pole
-- @module limber.ik
local core = require "limber.core"
local check = require "limber.check"

local M = {}

local TwoBone, Aim = {}, {}
TwoBone.__index, Aim.__index = TwoBone, Aim
TwoBone.__name, Aim.__name = "limber.ik.TwoBone", "limber.ik.Aim"

-- A joint of `skel` by name or 1-based index (argument n of fname).
local function joint_of(skel, v, n, fname)
  if type(v) == "string" then
    local j = skel:find(v)
    if not j then check.arg_fail(n, fname, ("no joint named '%s'"):format(v), 3) end
    return j
  end
  local j = check.tointeger(v)
  if not j or j < 1 or j > skel:joint_count() then
    check.arg_fail(n, fname, ("joint must be a name or an index in [1, %d], got %s")
      :format(skel:joint_count(), type(v) == "number" and tostring(v) or check.typename(v)), 3)
  end
  return j
end

local function check_skeleton(skel, fname)
  if not check.is_a(skel, "limber.Skeleton") then
    check.arg_error(1, fname, "limber.Skeleton", skel, 3)
  end
end

-- A vector option: nil or 3 finite numbers (copied).
local function vec3(v, name, n, fname)
  if v == nil then return nil end
  if type(v) ~= "table" or check.rawlen(v) ~= 3 then
    check.arg_fail(n, fname, ("option '%s' must be { x, y, z }"):format(name), 3)
  end
  local o = {}
  for k = 1, 3 do
    local x = rawget(v, k)
    if type(x) ~= "number" or x ~= x or x == math.huge or x == -math.huge then
      check.arg_fail(n, fname, ("option '%s' must hold 3 finite numbers"):format(name), 3)
    end
    o[k] = x
  end
  return o
end

--- A two-bone solver (thigh-knee-foot, shoulder-elbow-hand) on a skeleton.
-- @tparam limber.Skeleton skeleton
-- @param root the chain's first joint (name or index)
-- @param mid its middle joint, below root
-- @param tip its end joint, below mid
-- @tparam[opt] table opts `soften` (in (0, 1], default 1: none; e.g. 0.97
--   eases the last 3% of the reach so the knee never snaps straight) and
--   `keep_tip` (true: the tip keeps its model-space rotation, a foot stays
--   as the animation had it)
-- @treturn limber.ik.TwoBone
function M.two_bone(skeleton, root, mid, tip, opts)
  local fname = "limber.ik.two_bone"
  check_skeleton(skeleton, fname)
  local o = check.options(5, fname, opts, { soften = "number", keep_tip = "boolean" }, 2)
  local s = {
    root = joint_of(skeleton, root, 2, fname), mid = joint_of(skeleton, mid, 3, fname),
    tip = joint_of(skeleton, tip, 4, fname), soften = o.soften or 1, keep_tip = o.keep_tip == true,
    skeleton = skeleton,
  }
  if not (s.soften > 0 and s.soften <= 1) then
    check.arg_fail(5, fname, "option 'soften' must be in (0, 1]", 2)
  end
  local par, r = skeleton:parents(), s.root
  local function below(j, a)
    while j and j ~= a do j = par[j] ~= 0 and par[j] or nil end
    return j == a
  end
  if s.mid == r or s.tip == s.mid or not below(s.mid, r) or not below(s.tip, s.mid) then
    check.fail(fname, "the chain must go down the hierarchy: mid below root, tip below mid", 2)
  end
  return setmetatable(s, TwoBone)
end

--- Solves instances of a pose of the solver's skeleton.
-- @tparam limber.Pose pose
-- @param targets `{ x, y, z }` or an f32 Buffer of width 3 (one per instance)
-- @param[opt] poles the same shape: the knee points toward the pole
-- @param[opt] weights a number in [0, 1] or an f32 Buffer of width 1
-- @tparam[opt=1] integer first the first instance
function TwoBone:solve(pose, targets, poles, weights, first)
  if getmetatable(self) ~= TwoBone then
    check.arg_error(1, "limber.ik.TwoBone:solve", "limber.ik.TwoBone", self, 2)
  end
  if not check.is_a(pose, "limber.Pose") or pose:skeleton() ~= self.skeleton then
    check.arg_fail(2, "limber.ik.TwoBone:solve", "limber.Pose of the solver's skeleton expected", 2)
  end
  local ok, err = pcall(core.ik_two_bone, pose, self.root, self.mid, self.tip, targets, poles,
    weights, first, self.soften, self.keep_tip)
  if not ok then
    -- the core counts (pose, root, mid, tip, targets ...); here self is #1,
    -- pose #2, targets #3
    err = tostring(err):gsub("^bad argument #(%d+)", function(k)
      return "bad argument #" .. (tonumber(k) - 2)
    end)
    check.rethrow(err, "limber.ik.TwoBone:solve", "ik_two_bone")
  end
end

--- An aim (look-at) solver: turns `joint` so that `forward` of the
-- effector points at the target.
-- @tparam limber.Skeleton skeleton
-- @param joint the joint that turns (name or index)
-- @tparam table opts `forward` ({ x, y, z }, required: the effector's
--   local axis that should point at the target), `effector` (joint or below
--   it whose axis is aimed; default the joint), `up` ({ x, y, z } in the
--   effector's frame: with a pole, twisted toward it), `limit` (largest turn
--   in radians, in [0, pi]; 0: none)
-- @treturn limber.ik.Aim
function M.aim(skeleton, joint, opts)
  local fname = "limber.ik.aim"
  check_skeleton(skeleton, fname)
  if opts == nil then check.arg_fail(3, fname, "options with 'forward' expected", 2) end
  local o = check.options(3, fname, opts,
    { forward = "table", up = "table", effector = "any", limit = "number" }, 2)
  local a = {
    joint = joint_of(skeleton, joint, 2, fname), skeleton = skeleton,
    forward = vec3(o.forward, "forward", 3, fname), up = vec3(o.up, "up", 3, fname),
    limit = o.limit or 0,
  }
  if not a.forward then check.arg_fail(3, fname, "option 'forward' is required", 2) end
  if a.forward[1] == 0 and a.forward[2] == 0 and a.forward[3] == 0 then
    check.arg_fail(3, fname, "option 'forward' must not be zero", 2)
  end
  if not (a.limit >= 0 and a.limit <= math.pi) then
    check.arg_fail(3, fname, "option 'limit' must be in [0, pi]", 2)
  end
  a.effector = o.effector and joint_of(skeleton, o.effector, 3, fname) or a.joint
  local par, e = skeleton:parents(), a.effector
  while e ~= 0 and e ~= a.joint do e = par[e] end
  if e ~= a.joint then
    check.arg_fail(3, fname, "option 'effector' must be the joint or a joint below it", 2)
  end
  return setmetatable(a, Aim)
end

--- Solves instances of a pose (arguments as `TwoBone:solve`; poles twist
-- the `up` axis toward them).
function Aim:solve(pose, targets, poles, weights, first)
  if getmetatable(self) ~= Aim then
    check.arg_error(1, "limber.ik.Aim:solve", "limber.ik.Aim", self, 2)
  end
  if not check.is_a(pose, "limber.Pose") or pose:skeleton() ~= self.skeleton then
    check.arg_fail(2, "limber.ik.Aim:solve", "limber.Pose of the solver's skeleton expected", 2)
  end
  if poles ~= nil and not self.up then
    check.arg_fail(3, "limber.ik.Aim:solve", "poles need the solver's 'up' axis", 2)
  end
  local ok, err = pcall(core.ik_aim, pose, self.joint, self.effector, self.forward, self.up,
    targets, poles, weights, first, self.limit)
  if not ok then
    err = tostring(err):gsub("^bad argument #(%d+)", function(k)
      return "bad argument #" .. (tonumber(k) - 3)
    end)
    check.rethrow(err, "limber.ik.Aim:solve", "ik_aim")
  end
end

return M
