--- smoke: a short representative limber session for memory checkers
-- (scripts/valgrind.sh runs it under valgrind memcheck): skeletons, pose
-- batches on both kernel paths, palettes in both layouts, every bundled
-- glTF model loaded, posed and palettised, and
-- the error paths of each (bad input must not leak when it raises).
--
--   lua5.4 examples/smoke.lua [rounds]      (default 2)
local limber = require "limber"
local gltf = require "limber.gltf"
local core = limber.core

local rounds = tonumber(arg and arg[1]) or 2
local root = (arg and arg[0] or ""):match("^(.*)examples/smoke%.lua$") or "./"
local ASSETS = root .. "examples/assets/"
local MODELS = {
  "SimpleSkin/SimpleSkin.gltf", "RiggedSimple/RiggedSimple.gltf", "CesiumMan/CesiumMan.gltf",
  "Fox/Fox.glb", "RiggedFigure/RiggedFigure.glb",
}
for k = 0, 9 do
  MODELS[#MODELS + 1] = ("asset-generator/Animation_Skin/Animation_Skin_%02d.gltf"):format(k)
end
for k = 0, 3 do
  MODELS[#MODELS + 1] =
    ("asset-generator/Animation_SkinType/Animation_SkinType_%02d.gltf"):format(k)
end

math.randomseed(42)
local function rnd(a, b) return a + (b - a) * math.random() end
local function quat()
  local x, y, z, w = rnd(-1, 1), rnd(-1, 1), rnd(-1, 1), rnd(-1, 1)
  local n = math.sqrt(x * x + y * y + z * z + w * w)
  return { x / n, y / n, z / n, w / n }
end

local checksum, errors = 0, 0
local function expect_error(fn, ...)
  local ok = pcall(fn, ...)
  assert(not ok, "expected an error")
  errors = errors + 1
end

local function core_session()
  local joints = {}
  for i = 1, 60 do
    joints[i] = { name = "j" .. i, parent = i > 1 and math.random(1, i - 1) or nil,
                  translation = { rnd(-1, 1), rnd(-1, 1), rnd(-1, 1) }, rotation = quat(),
                  scale = { rnd(0.5, 1.5), rnd(-1.5, -0.5), 1 } }
  end
  -- reversed order: exercises the reordering (limber.sort_joints puts parents
  -- first; limber.skeleton no longer reorders)
  local rev = {}
  for i = 60, 1, -1 do
    local j = joints[i]
    rev[#rev + 1] = { name = j.name,
                      parent = joints[j.parent or 0] and joints[j.parent].name or nil,
                      translation = j.translation, rotation = j.rotation, scale = j.scale }
  end
  for _, desc in ipairs { joints, (limber.sort_joints(rev)) } do
    local skel = limber.skeleton(desc)
    local pose = limber.pose(skel, 37)
    for i = 1, 37, 3 do
      pose:set_trs(i, math.random(1, 60), { rnd(-1, 1), 0, 0 }, quat(), { 1, 2, 0 })
      pose:set_root(i, { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, rnd(-5, 5), 0, 0, 1 })
    end
    for _, simd in ipairs { false, true } do
      core.simd(simd)
      pose:local_to_model(true)
      checksum = checksum + pose:model(37, 60)[13]
      local skin = limber.skin(skel, { 1, 5, 9, 60 })
      for _, layout in ipairs { "mat4", "mat3x4" } do
        local pal = limber.palette(pose, { skin = skin, layout = layout })
        pal:update()
        checksum = checksum + pal:get(2, 4)[1]
      end
    end
    core.simd(true)
  end
  -- error paths
  expect_error(limber.skeleton, { { name = "a", parent = "b" }, { name = "b", parent = "a" } })
  expect_error(limber.skeleton, { { translation = { 0 / 0, 0, 0 } } })
  expect_error(limber.skeleton, { { rotation = { 0, 0, 0, 0 } } })
  local many = {}
  for i = 1, 65536 do many[i] = { parent = i < 65536 and i + 1 or nil } end
  expect_error(limber.skeleton, many)
  many[65536] = nil
  many[65535].parent = nil
  -- 65,535-deep, children first
  checksum = checksum + limber.skeleton((limber.sort_joints(many))):joint_count()
  local pose = limber.pose(limber.skeleton { {}, { parent = 1 } }, 2)
  expect_error(pose.set_local, pose, 1, 2, { math.huge, 0, 0 })
  expect_error(pose.set_root, pose, 1, { 1, 2, 3 })
  local b = limber.buffer("f32", 3, 10)
  expect_error(b.set, b, 11, { 1, 2, 3 })
end

local function gltf_session()
  for _, m in ipairs(MODELS) do
    local asset = gltf.load(ASSETS .. m)
    gltf.update_worlds(asset)
    for s = 1, #asset.skeletons do
      local pose = gltf.pose(asset, s, 3)
      pose:local_to_model()
      for k, skin in ipairs(asset.skins) do
        if skin.skeleton == s then
          local pal = gltf.palette(asset, pose, { skin = k, layout = "mat3x4" })
          pal:update()
          checksum = checksum + pal:get(3, 1)[4]
        end
      end
    end
    checksum = checksum + #gltf.describe(asset)
    -- the first mesh's position range
    local mesh = asset.meshes[1]
    local prim = mesh and mesh.primitives[1]
    if prim and prim.positions then
      local lo, hi = core.gltf_stats(prim.positions)
      checksum = checksum + hi - lo
    end
  end
  -- corrupted files: every one raises (and must free what it made), or
  -- loads (damage in the binary data). Their clips stay exact: packing
  -- (covered by the loads above) would take most of the run under valgrind
  local fox = assert(io.open(ASSETS .. "Fox/Fox.glb", "rb")):read("*a")
  for k = 1, 30 do
    local at = math.random(1, #fox)
    local bad = k % 3 == 0 and fox:sub(1, at)
      or fox:sub(1, at - 1) .. string.char(math.random(0, 255)) .. fox:sub(at + 1)
    if pcall(gltf.load_bytes, bad, { tolerance = 0 }) then
      checksum = checksum + 1
    else
      errors = errors + 1
    end
  end
  expect_error(gltf.load_bytes, '{"asset":{"version":"2.0"},"nodes":[{"children":[0]}]}')
  expect_error(gltf.load_bytes, '{"asset":{"version":"2.0"},'
    .. '"buffers":[{"byteLength":4,"uri":"data:;base64,@@@@"}]}')
  expect_error(core.gltf_glb, "glTF\2\0\0\0\20\0\0\0\255\255\255\255JSON")
end

for _ = 1, rounds do
  core_session()
  gltf_session()
  collectgarbage()
end
print(("smoke: %d rounds, %d models, %d errors raised as expected, checksum %.6g"):format(rounds,
  #MODELS, errors, checksum))
