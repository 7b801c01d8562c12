--- gltf_dump: prints joint matrices, skinned vertices and node transforms
-- of a glTF model as JSON, in the schema of the reference data
-- (spec/reference/README.md), so limber can be diffed against any other
-- implementation.
--
--   lua5.4 examples/gltf_dump.lua MODEL [--anim I | --rest] [--times t1,t2,...]
--          [--loop clamp|repeat] [--skinned] [--nodes] [--tolerance T [--distance D]]
--   lua5.4 examples/gltf_dump.lua MODEL --info     (what is in the file, as text)
--
-- --anim I samples animation I (0-based glTF index) at the given times
-- (default: the reference times -0.1, 0, 0.13d, 0.37d, 0.5d, 0.71d, 0.93d,
-- d, d + 0.25 for duration d); --rest (default) prints the file's own pose.
-- Joint world and skin matrices come from limber poses and palettes.
-- The clips are exact unless --tolerance T (model units) packs them with
-- that error bound (limber.anim.pack; --distance D sets its virtual
-- distance, default the rig-relative one), so a packed clip can be
-- compared with another runtime.
-- Skinned vertices come from limber.skinning (`plain_skinning` in D.dump
-- selects the plain Lua reference below instead). Requiring this file
-- returns the functions instead of running.
if arg and arg[0] and arg[0]:find("gltf_dump%.lua$") then
  -- run as a program: find limber in this checkout (see examples/common.lua)
  package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
  require "common"
end
local gltf = require "limber.gltf"
local lmath = require "limber.math"
local anim_mod = require "limber.anim"

local D = {}

-- Lua 5.1 to 5.4 and LuaJIT: this file is also loaded by the specs with
-- dofile (without examples/common.lua), so it keeps its own fallbacks for
-- the library calls newer than 5.1.
-- luacheck: push ignore 143 (the fallbacks below test for calls newer than 5.1)
local pack = table.pack or function(...) return { n = select("#", ...), ... } end
local function move(t, first, last, into, dest)
  if table.move then return table.move(t, first, last, into, dest) end
  for k = 0, last - first do dest[into + k] = t[first + k] end
  return dest
end
-- before 5.3 there are no integers: integral floats are written as such below
local function is_integer(v) return math.type ~= nil and math.type(v) == "integer" end
local tointeger = math.tointeger or function(v) -- an integral number of at most 2^53
  return type(v) == "number" and v == math.floor(v) and math.abs(v) <= 2 ^ 53 and v or nil
end
-- The scalars of a width-3 f32 Buffer of n elements, flat.
local function floats(buf, n)
  if string.unpack then
    local out = { string.unpack("<" .. ("f"):rep(3 * n), buf:bytes()) }
    out[#out] = nil
    return out
  end
  local out = {}
  for v = 1, n do
    local e = buf:get(v)
    out[3 * v - 2], out[3 * v - 1], out[3 * v] = e[1], e[2], e[3]
  end
  return out
end
-- luacheck: pop

-- ---- a small JSON writer (arrays stay arrays even when empty) ------------

local ARRAY = {}
D.NULL = setmetatable({}, { __name = "null" })

local function array(t) return setmetatable(t or {}, ARRAY) end
D.array = array

local function num(v)
  if is_integer(v) then return tostring(v) end
  if v ~= v or v == math.huge or v == -math.huge then return "null" end
  if v == math.floor(v) and math.abs(v) < 1e15 then return ("%d"):format(v) end
  return ("%.7g"):format(v)
end

local function encode(v, out)
  local t = type(v)
  if v == nil or v == D.NULL then
    out[#out + 1] = "null"
  elseif t == "number" then
    out[#out + 1] = num(v)
  elseif t == "boolean" then
    out[#out + 1] = tostring(v)
  elseif t == "string" then
    out[#out + 1] = ('"%s"'):format(v:gsub('[%c"\\]', function(c)
      return ("\\u%04x"):format(c:byte())
    end))
  elseif getmetatable(v) == ARRAY or (#v > 0) then
    out[#out + 1] = "["
    for k = 1, #v do
      if k > 1 then out[#out + 1] = "," end
      encode(v[k], out)
    end
    out[#out + 1] = "]"
  else
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys)
    out[#out + 1] = "{"
    for i, k in ipairs(keys) do
      if i > 1 then out[#out + 1] = "," end
      out[#out + 1] = ('"%s":'):format(k)
      encode(v[k], out)
    end
    out[#out + 1] = "}"
  end
end

--- JSON text of a dump table.
function D.encode(v)
  local out = {}
  encode(v, out)
  return table.concat(out)
end

-- ---- plain reference skinning --------------------------------------------

local function inverse3(m)
  -- inverse of the upper-left 3x3 of a column-major 4x4, as a 3x3 column-major
  local a, b, c = m[1], m[5], m[9]
  local d, e, f = m[2], m[6], m[10]
  local g, h, i = m[3], m[7], m[11]
  local A, B, C = e * i - f * h, -(d * i - f * g), d * h - e * g
  local det = a * A + b * B + c * C
  if det == 0 then return nil end
  local inv = {
    A / det, B / det, C / det,
    -(b * i - c * h) / det, (a * i - c * g) / det, -(a * h - b * g) / det,
    (b * f - c * e) / det, -(a * f - c * d) / det, (a * e - b * d) / det,
  }
  return inv -- column-major: inv[col*3 + row + 1]
end

local function normalize3(x, y, z)
  local n = math.sqrt(x * x + y * y + z * z)
  if n == 0 then return 0, 0, 0 end
  return x / n, y / n, z / n
end

-- The mesh node's correction of a blended normal (bx, by, bz), as the
-- reference computes normalsWorld: into the node's local space with its
-- inverse, normalised, back with its normal matrix, normalised.
local function world_normal(winv, wit, bx, by, bz)
  if winv then
    local lx, ly, lz = normalize3(winv[1] * bx + winv[4] * by + winv[7] * bz,
      winv[2] * bx + winv[5] * by + winv[8] * bz, winv[3] * bx + winv[6] * by + winv[9] * bz)
    bx, by, bz = wit[1] * lx + wit[4] * ly + wit[7] * lz, wit[2] * lx + wit[5] * ly + wit[8] * lz,
        wit[3] * lx + wit[6] * ly + wit[9] * lz
  end
  return normalize3(bx, by, bz)
end

local function normal_mats(mesh_world)
  local winv = inverse3(mesh_world)
  if not winv then return nil, nil end
  return winv, { winv[1], winv[4], winv[7], winv[2], winv[5], winv[8], winv[3], winv[6], winv[9] }
end

--- Position v (1-based) of a primitive with its morph targets applied at
-- `weights` (base + sum of weight x delta; the base without targets).
function D.morphed(prim, v, weights)
  local p = prim.positions[v]
  if not (prim.targets and weights) then return p end
  local x, y, z = p[1], p[2], p[3]
  for t, target in ipairs(prim.targets) do
    local w = weights[t]
    if w ~= 0 and target.positions then
      local d = target.positions[v]
      x, y, z = x + w * d[1], y + w * d[2], z + w * d[3]
    end
  end
  return { x, y, z }
end

--- Plain Lua skinning of one primitive (the "obviously correct" reference):
-- positions sum_k w_k * S[j_k] * p in world space, and normals as the
-- reference computes them (blended matrix, then the mesh node's inverse and
-- normal matrix). `mats[k]` is the skin matrix of skin joint slot k - 1;
-- `mesh_world` the skinned node's world matrix.
-- @treturn table positions (flat), table normals (flat or nil)
function D.reference_skin(prim, mats, mesh_world, weights)
  local P, N, J, W = prim.positions, prim.normals, prim.gpu_joints, prim.weights
  local pos, nor = {}, N and {} or nil
  local winv, wit = normal_mats(mesh_world)
  for v = 1, #P do
    local p, j, w = D.morphed(prim, v, weights), J[v], W[v]
    local m = {}
    for e = 1, 16 do m[e] = 0 end
    for k = 1, 4 do
      local wk = w[k]
      if wk ~= 0 then
        local s = mats[j[k] + 1]
        for e = 1, 16 do m[e] = m[e] + wk * s[e] end
      end
    end
    local x, y, z = p[1], p[2], p[3]
    pos[#pos + 1] = m[1] * x + m[5] * y + m[9] * z + m[13]
    pos[#pos + 1] = m[2] * x + m[6] * y + m[10] * z + m[14]
    pos[#pos + 1] = m[3] * x + m[7] * y + m[11] * z + m[15]
    if N then
      local n = N[v]
      local nx, ny, nz = world_normal(winv, wit, m[1] * n[1] + m[5] * n[2] + m[9] * n[3],
        m[2] * n[1] + m[6] * n[2] + m[10] * n[3], m[3] * n[1] + m[7] * n[2] + m[11] * n[3])
      nor[#nor + 1], nor[#nor + 2], nor[#nor + 3] = nx, ny, nz
    end
  end
  return pos, nor
end

--- The same through limber.skinning (the real kernel): the primitive's
-- influence-sorted mesh is built once and cached on it; results are read
-- back in file order.
function D.limber_skin(prim, palette, mesh_world, weights)
  local sk = require "limber.skinning"
  if not prim.limber_mesh then
    prim.limber_mesh = sk.mesh(prim)
    prim.limber_target = sk.target({ mesh = prim.limber_mesh, instances = 1, order = "file",
                                     positions = true, normals = prim.normals ~= nil })
    if prim.targets then prim.limber_morph = sk.morph(prim.limber_mesh, prim.targets) end
  end
  if prim.limber_morph and weights then
    sk.run(prim.limber_mesh, palette, prim.limber_target, prim.limber_morph, weights)
  else
    sk.run(prim.limber_mesh, palette, prim.limber_target)
  end
  local n = prim.vertex_count
  local pos = floats(prim.limber_target:position_buffer(), n)
  local nor
  if prim.normals then
    local raw = floats(prim.limber_target:normal_buffer(), n)
    local winv, wit = normal_mats(mesh_world)
    nor = {}
    for v = 0, n - 1 do
      nor[v * 3 + 1], nor[v * 3 + 2], nor[v * 3 + 3] =
        world_normal(winv, wit, raw[v * 3 + 1], raw[v * 3 + 2], raw[v * 3 + 3])
    end
  end
  return pos, nor
end

-- ---- sampling through limber.anim ----------------------------------------

--- Default sampler: values of every channel of animation `anim` at clip
-- time t, through the animation's clips (limber.anim): the node clip's
-- node tracks and, with the asset, the joint tracks of the clips bound to
-- its skeletons. Returns node -> { translation =, rotation =, scale = }.
function D.clip_sampler(anim, t, asset)
  local clip = anim.clip
  if not clip then
    if #anim.channels == 0 then return {} end -- nothing to play (no channels, duration 0)
    error("gltf_dump: the animation has no clip (the asset was loaded with clips = false)", 0)
  end
  local out = {}
  local function put(node, path, v)
    out[node] = out[node] or {}
    -- float tracks of a glTF asset are its morph weights
    out[node][path == "float" and "weights" or path] = type(v[1]) == "table" and v[1]
        or move(v, 1, v.n, 1, {})
  end
  for k, tr in ipairs(clip:node_tracks()) do
    put(tr.node, tr.path, pack(clip:sample_node(k, t, false))) -- t is already the clip time
  end
  for s, c in ipairs(asset and anim.clips or {}) do
    local nodes = asset.skeletons[s].nodes
    for _, tr in ipairs(c:joint_tracks()) do
      put(nodes[tr.joint], tr.path, pack(c:sample_joint(tr.joint, tr.path, t, false)))
    end
    for k, tr in ipairs(c:node_tracks()) do -- a skinned mesh's morph weights
      put(tr.node, tr.path, pack(c:sample_node(k, t, false)))
    end
  end
  return out
end

--- The reference sample times for duration d.
function D.reference_times(d)
  return { -0.1, 0, 0.13 * d, 0.37 * d, 0.5 * d, 0.71 * d, 0.93 * d, d, d + 0.25 }
end

local function copy(t)
  return move(t, 1, #t, 1, {})
end

--- Builds the dump table of an asset.
-- opts: `animation` (1-based, nil for rest), `times`, `loop` ("clamp" or
-- "repeat"), `skinned`, `nodes`, `sampler` (function(anim, t) -> node ->
-- {translation, rotation, scale}; default D.clip_sampler).
function D.dump(asset, opts)
  opts = opts or {}
  local anim = opts.animation and asset.animations[opts.animation]
  if opts.animation and not anim then
    error(("gltf_dump: animation %d does not exist (the file has %d)"):format(opts.animation - 1,
      #asset.animations), 0)
  end
  local loop = opts.loop or "clamp"
  local d = anim and anim.duration or 0
  local times = opts.times or (anim and D.reference_times(d) or { 0 })
  local sampler = opts.sampler or D.clip_sampler
  local nodes = asset.nodes

  local out = {
    model = asset.name or D.NULL, mode = anim and "animation" or "rest",
    animation = anim
        and { index = anim.gltf_index, name = anim.name or D.NULL, duration = d, loop = loop }
        or D.NULL,
    skins = array(), skinnedNodes = array(), frames = array(),
  }
  for s, skin in ipairs(asset.skins) do
    local joints, ibms = array(), array()
    for k, n in ipairs(skin.joints) do
      joints[k] = { node = n - 1, name = nodes[n].name or D.NULL }
      ibms[k] = skin.skin:inverse_bind(k)
    end
    out.skins[s] = { index = s - 1, name = skin.name or D.NULL,
                     skeleton = skin.skeleton_node and skin.skeleton_node - 1 or D.NULL,
                     joints = joints, inverseBindMatrices = ibms }
  end
  for k, sn in ipairs(asset.skinned_nodes) do
    local prims = array()
    for p, prim in ipairs(asset.meshes[sn.mesh].primitives) do
      prims[p] = { primitive = p - 1, vertexCount = prim.vertex_count,
                   hasNormals = prim.normals ~= nil }
    end
    out.skinnedNodes[k] = { node = sn.node - 1, name = nodes[sn.node].name or D.NULL,
                            skin = sn.skin - 1, mesh = sn.mesh - 1, primitives = prims }
  end

  -- one pose and palette per skeleton / skin; with limber's clips (the
  -- default sampler), skeleton joints are sampled by the batched sampler
  local poses, palettes, samplers = {}, {}, {}
  for s in ipairs(asset.skeletons) do
    poses[s] = gltf.pose(asset, s, 1)
    if anim and not opts.sampler and anim.clips and anim.clips[s] then
      samplers[s] = anim_mod.sampler(poses[s], { anim.clips[s] })
    end
  end
  for s, skin in ipairs(asset.skins) do
    palettes[s] = gltf.palette(asset, poses[skin.skeleton], { skin = s })
  end

  for f, t in ipairs(times) do
    local clip_time = 0
    local trs = {}
    for i, node in ipairs(nodes) do
      trs[i] = { translation = node.translation, rotation = node.rotation, scale = node.scale,
                 weights = node.weights }
    end
    local locals
    if anim then
      if loop == "repeat" then
        clip_time = d > 0 and t - d * math.floor(t / d) or 0
      else
        clip_time = math.min(math.max(t, 0), d)
      end
      locals = {}
      for n, v in pairs(sampler(anim, clip_time, asset)) do
        local e = trs[n]
        trs[n] = { translation = v.translation or e.translation,
                   rotation = v.rotation or e.rotation, scale = v.scale or e.scale,
                   weights = v.weights or e.weights }
        if v.translation or v.rotation or v.scale then
          locals[n] = lmath.trs_matrix(trs[n].translation, trs[n].rotation, trs[n].scale)
        end
      end
    end
    gltf.update_worlds(asset, locals)
    for s, skel in ipairs(asset.skeletons) do
      local pose = poses[s]
      pose:reset(1)
      if samplers[s] then
        samplers[s]:set(1, 1, clip_time, false)
        samplers[s]:run()
      elseif anim then
        for j, n in ipairs(skel.nodes) do
          if locals[n] then
            pose:set_trs(1, j, trs[n].translation, trs[n].rotation, trs[n].scale)
          end
        end
      end
      pose:set_root(1, skel.root_parent and nodes[skel.root_parent].world or nil)
      pose:local_to_model()
    end
    local frame = { t = t, clipTime = anim and clip_time or D.NULL, skins = array() }
    local mats = {}
    for s, skin in ipairs(asset.skins) do
      local pal, pose = palettes[s], poses[skin.skeleton]
      pal:update()
      local joints = array()
      mats[s] = {}
      for k, n in ipairs(skin.joints) do
        mats[s][k] = pal:get(1, k)
        joints[k] = { node = n - 1, name = nodes[n].name or D.NULL,
                      world = pose:model(1, skin.skin_joints[k]), skinMatrix = mats[s][k] }
      end
      frame.skins[s] = { index = s - 1, joints = joints }
    end
    if opts.skinned then
      frame.skinnedNodes = array()
      for k, sn in ipairs(asset.skinned_nodes) do
        local prims = array()
        for p, prim in ipairs(asset.meshes[sn.mesh].primitives) do
          local pos, nor
          local w = trs[sn.node].weights
          if opts.plain_skinning then
            pos, nor = D.reference_skin(prim, mats[sn.skin], nodes[sn.node].world, w)
          else
            pos, nor = D.limber_skin(prim, palettes[sn.skin], nodes[sn.node].world, w)
          end
          prims[p] = { primitive = p - 1, vertexCount = prim.vertex_count,
                       positionsWorld = array(pos), normalsWorld = nor and array(nor) or D.NULL }
        end
        frame.skinnedNodes[k] = { node = sn.node - 1, skin = sn.skin - 1,
                                  nodeWorld = copy(nodes[sn.node].world), primitives = prims }
      end
    end
    if opts.skinned then
      -- meshes with morph targets and no skin: mesh-local morphed positions
      frame.morphNodes = array()
      for i, node in ipairs(nodes) do
        if node.mesh and not node.skin and asset.meshes[node.mesh].target_count > 0 then
          local prims = array()
          for p, prim in ipairs(asset.meshes[node.mesh].primitives) do
            local pos = array()
            for v = 1, prim.vertex_count do
              local q = D.morphed(prim, v, trs[i].weights)
              pos[#pos + 1], pos[#pos + 2], pos[#pos + 3] = q[1], q[2], q[3]
            end
            prims[p] = { primitive = p - 1, vertexCount = prim.vertex_count, positionsLocal = pos }
          end
          frame.morphNodes[#frame.morphNodes + 1] = { node = i - 1, nodeWorld = copy(node.world),
                                                      primitives = prims }
        end
      end
    end
    if opts.nodes then
      frame.nodes = array()
      for i, node in ipairs(nodes) do
        frame.nodes[i] = { node = i - 1, name = node.name or D.NULL,
                           translation = copy(trs[i].translation),
                           rotation = copy(trs[i].rotation), scale = copy(trs[i].scale),
                           world = copy(node.world),
                           weights = trs[i].weights and array(copy(trs[i].weights)) or nil }
      end
    end
    out.frames[f] = frame
  end
  gltf.update_worlds(asset)
  return out
end

local function usage(msg)
  io.stderr:write(("gltf_dump: %s\nusage: lua5.4 examples/gltf_dump.lua MODEL [--anim I | --rest] "
    .. "[--times t1,t2,...] [--loop clamp|repeat] [--skinned] [--nodes] "
    .. "[--tolerance T [--distance D]]\n"):format(msg))
  os.exit(2)
end

--- Command-line entry point.
function D.main(args)
  local opts, path = {}, nil
  local k = 1
  while k <= #args do
    local a = args[k]
    if a == "--anim" then
      k = k + 1
      opts.animation = tointeger(tonumber(args[k]))
      if not opts.animation or opts.animation < 0 then
        usage("--anim needs an animation index (0-based)")
      end
      opts.animation = opts.animation + 1
    elseif a == "--rest" then
      opts.animation = nil
    elseif a == "--times" then
      k = k + 1
      opts.times = {}
      for v in (args[k] or ""):gmatch("[^,]+") do
        local n = tonumber(v)
        if not n then usage("--times needs numbers separated by commas") end
        opts.times[#opts.times + 1] = n
      end
    elseif a == "--loop" then
      k = k + 1
      opts.loop = args[k]
      if opts.loop ~= "clamp" and opts.loop ~= "repeat" then
        usage("--loop must be clamp or repeat")
      end
    elseif a == "--skinned" then
      opts.skinned = true
    elseif a == "--nodes" then
      opts.nodes = true
    elseif a == "--info" then
      opts.info = true
    elseif a == "--tolerance" or a == "--distance" then
      k = k + 1
      local v = tonumber(args[k])
      if not v or v ~= v or v < 0 or v == math.huge then
        usage(a .. " needs a finite number >= 0 (model units)")
      end
      opts[a:sub(3)] = v
    elseif a:sub(1, 2) == "--" then
      usage("unknown option " .. a)
    else
      path = a
    end
    k = k + 1
  end
  if not path then usage("no model given") end
  local ok, res = pcall(function()
    local asset = gltf.load(path, { tolerance = opts.tolerance or 0, distance = opts.distance })
    if opts.info then return gltf.describe(asset) end
    return D.encode(D.dump(asset, opts))
  end)
  if not ok then
    io.stderr:write(tostring(res), "\n")
    os.exit(1)
  end
  io.write(res, "\n")
end

if arg and arg[0] and arg[0]:find("gltf_dump%.lua$") then
  D.main(arg)
else
  return D
end
