--- ik_dump: the joints of a glTF model's first skin after an IK constraint,
-- as JSON, for checking limber.ik from outside.
--
--   lua5.4 examples/ik_dump.lua MODEL [--anim I --time T]
--     [--two-bone ROOT,MID,END --target X,Y,Z [--pole X,Y,Z] [--weight W]]
--     [--aim JOINT --forward X,Y,Z --target X,Y,Z [--weight W]]
--
-- prints {"joints": [{"name": ..., "node": ..., "world": [16 numbers,
-- column-major]}, ...]} for every joint of the first skin (skin.joints
-- order), in glTF world space (gltf_dump's skins[].joints[].world), after
-- the constraints (two-bone first, then aim). Joints are named by their
-- glTF node name or node index; targets and poles are in glTF world space;
-- --forward is a direction in the aimed joint's local frame. --anim samples
-- animation I (0-based) at clip time T (clamped to the clip); without it the
-- rest pose is used. Options after --two-bone / --aim belong to that
-- constraint. Unknown options and missing joints are errors (exit 2 for
-- usage, 1 for other errors).
if arg and arg[0] and arg[0]:find("ik_dump%.lua$") then
  -- run as a program: find limber in this checkout (see examples/common.lua)
  package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
  require "common"
end
local gltf = require "limber.gltf"
local anim_mod = require "limber.anim"
local ik = require "limber.ik"
-- gltf_dump (next to this file) for its JSON writer and its node sampler
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local D = dofile(here .. "/gltf_dump.lua")

local I = {}

local function usage(msg)
  io.stderr:write(("ik_dump: %s\nusage: lua5.4 examples/ik_dump.lua MODEL [--anim I --time T] "
    .. "[--two-bone ROOT,MID,END --target X,Y,Z [--pole X,Y,Z] [--weight W]] "
    .. "[--aim JOINT --forward X,Y,Z --target X,Y,Z [--weight W]]\n"):format(msg))
  os.exit(2)
end

local function vec(s, what)
  local v, n = {}, 0
  for x in ((s or "") .. ","):gmatch("([^,]*),") do
    n = n + 1
    local num = tonumber(x)
    if not num or num ~= num or math.abs(num) == math.huge then
      usage(what .. " needs X,Y,Z: three finite numbers")
    end
    v[n] = num
  end
  if n ~= 3 then usage(what .. " needs X,Y,Z: three finite numbers") end
  return v
end

--- Parses the command line into options (raises through usage()).
function I.parse(args)
  local o = { anim = nil, time = nil }
  local current -- the constraint that --target, --pole, --weight, --forward belong to
  local k = 1
  local seen = {}
  local function value()
    k = k + 1
    if args[k] == nil or args[k]:sub(1, 2) == "--" then usage(args[k - 1] .. " needs a value") end
    return args[k]
  end
  while k <= #args do
    local a = args[k]
    -- an option given twice (for its constraint) is an error, not a silent replacement
    local key = a
    if a == "--target" or a == "--weight" then key = (current == o.aim and "aim" or "two") .. a end
    if a:sub(1, 2) == "--" and seen[key] then usage(a .. " given twice") end
    seen[key] = true
    if a == "--anim" then
      o.anim = tonumber(value())
      if not o.anim or o.anim < 0 or o.anim % 1 ~= 0 or o.anim > 2 ^ 31 then
        usage("--anim needs an index >= 0")
      end
    elseif a == "--time" then
      o.time = tonumber(value())
      if not o.time or o.time ~= o.time or math.abs(o.time) == math.huge then
        usage("--time needs a finite number")
      end
    elseif a == "--two-bone" then
      local names = {}
      for n in value():gmatch("[^,]+") do names[#names + 1] = n end
      if #names ~= 3 then usage("--two-bone needs ROOT,MID,END") end
      o.two_bone = { joints = names }
      current = o.two_bone
    elseif a == "--aim" then
      o.aim = { joint = value() }
      current = o.aim
    elseif a == "--target" or a == "--pole" or a == "--forward" then
      if not current then usage(a .. " must follow --two-bone or --aim") end
      if a == "--pole" and current ~= o.two_bone then usage("--pole belongs to --two-bone") end
      if a == "--forward" and current ~= o.aim then usage("--forward belongs to --aim") end
      current[a:sub(3)] = vec(value(), a)
    elseif a == "--weight" then
      if not current then usage("--weight must follow --two-bone or --aim") end
      local w = tonumber(value())
      if not w or not (w >= 0 and w <= 1) then usage("--weight needs a number in [0, 1]") end
      current.weight = w
    elseif a:sub(1, 2) == "--" then
      usage("unknown option " .. a)
    elseif o.model then
      usage("one model only (got " .. o.model .. " and " .. a .. ")")
    else
      o.model = a
    end
    k = k + 1
  end
  if not o.model then usage("no model given") end
  if (o.anim == nil) ~= (o.time == nil) then usage("--anim and --time go together") end
  if o.two_bone and not o.two_bone.target then usage("--two-bone needs --target") end
  if o.aim and not (o.aim.target and o.aim.forward) then
    usage("--aim needs --forward and --target")
  end
  return o
end

-- The skeleton joint of a node named `s` (or with glTF index s) of the
-- skin's skeleton.
local function joint(asset, skel, s)
  local node
  for _, n in ipairs(skel.nodes) do -- the skeleton's joints first
    if asset.nodes[n].name == s then node = n break end
  end
  if not node and s:match("^%d+$") then node = tonumber(s) + 1 end
  local j = node and skel.joint_of[node]
  if not j then error(("ik_dump: no joint '%s' in the skeleton of skin 0"):format(s), 0) end
  return j
end

--- The JSON table of a parsed command line.
function I.run(o)
  local asset = gltf.load(o.model, { tolerance = 0 })
  local skin = asset.skins[1]
  if not skin then error("ik_dump: the model has no skin", 0) end
  local s = skin.skeleton
  local skel = asset.skeletons[s]
  local pose = gltf.pose(asset, s, 1)
  local locals
  if o.anim then
    local an = asset.animations[o.anim + 1]
    if not an then
      error(("ik_dump: animation %d does not exist (the file has %d)"):format(o.anim,
        #asset.animations), 0)
    end
    local t = math.min(math.max(o.time, 0), an.duration)
    if an.clips and an.clips[s] then
      local sampler = anim_mod.sampler(pose, { an.clips[s] })
      sampler:set(1, 1, t, false)
      sampler:run()
    end
    -- the nodes above the skeleton may be animated too
    locals = {}
    local lmath = require "limber.math"
    for n, v in pairs(D.clip_sampler(an, t, nil)) do
      local node = asset.nodes[n]
      locals[n] = lmath.trs_matrix(v.translation or node.translation,
        v.rotation or node.rotation, v.scale or node.scale)
    end
  end
  gltf.update_worlds(asset, locals)
  pose:set_root(1, skel.root_parent and asset.nodes[skel.root_parent].world or nil)
  pose:local_to_model()
  local sk = skel.skeleton
  if o.two_bone then
    local c = o.two_bone
    local solver = ik.two_bone(sk, joint(asset, skel, c.joints[1]), joint(asset, skel, c.joints[2]),
      joint(asset, skel, c.joints[3]))
    solver:solve(pose, c.target, c.pole, c.weight)
  end
  if o.aim then
    local c = o.aim
    ik.aim(sk, joint(asset, skel, c.joint), { forward = c.forward })
      :solve(pose, c.target, nil, c.weight)
  end
  local out = { joints = D.array() }
  for k, n in ipairs(skin.joints) do
    out.joints[k] = { name = asset.nodes[n].name or D.NULL, node = n - 1,
                      world = pose:model(1, skin.skin_joints[k]) }
  end
  gltf.update_worlds(asset)
  return out
end

function I.main(args)
  local o = I.parse(args)
  local ok, res = pcall(I.run, o)
  if not ok then
    io.stderr:write(tostring(res), "\n")
    os.exit(1)
  end
  io.write(D.encode(res), "\n")
end

if arg and arg[0] and arg[0]:find("ik_dump%.lua$") then
  I.main(arg)
else
  return I
end
