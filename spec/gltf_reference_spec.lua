-- glTF import checked against the reference data of an independent
-- implementation (spec/reference/, three.js r187): joint world matrices,
-- skin matrices, skinned vertices and node transforms at rest.
local H = require "spec.helper"
local gltf = require "limber.gltf"
local D = dofile(H.root .. "examples/gltf_dump.lua")

local MODELS = {
  { "CesiumMan", "CesiumMan/CesiumMan.gltf" },
  { "Fox", "Fox/Fox.glb" },
  { "RiggedFigure", "RiggedFigure/RiggedFigure.glb" },
  { "RiggedSimple", "RiggedSimple/RiggedSimple.gltf" },
  { "SimpleSkin", "SimpleSkin/SimpleSkin.gltf" },
  { "SimpleMorph", "SimpleMorph/SimpleMorph.gltf" },
  { "CesiumManMorph", "CesiumMan/CesiumManMorph.gltf" },
}
-- InterpolationTest is bundled by the clip work; used when present.
local probe = io.open(H.reference .. "InterpolationTest/rest.json")
if probe then
  probe:close()
  MODELS[#MODELS + 1] = { "InterpolationTest", "InterpolationTest/InterpolationTest.gltf" }
end
for k = 0, 9 do
  MODELS[#MODELS + 1] = { ("Animation_Skin_%02d"):format(k),
                          ("asset-generator/Animation_Skin/Animation_Skin_%02d.gltf"):format(k) }
end
for k = 0, 3 do
  MODELS[#MODELS + 1] = { ("Animation_SkinType_%02d"):format(k),
                          ("asset-generator/Animation_SkinType/Animation_SkinType_%02d.gltf"):format(k) }
end

local read_json = H.read_json

local extent = H.gltf_extent

-- Compares frames of a dump with reference frames.
local function compare_frames(ref, got, tol_m, tol_p, what)
  assert.are.equal(#ref.frames, #got.frames)
  for f, rf in ipairs(ref.frames) do
    local gf = got.frames[f]
    assert.near(rf.t, gf.t, 1e-9)
    assert.are.equal(#rf.skins, #gf.skins)
    for s, rs in ipairs(rf.skins) do
      for k, rj in ipairs(rs.joints) do
        local gj = gf.skins[s].joints[k]
        assert.are.equal(rj.node, gj.node)
        assert.near(rj.world, gj.world, tol_m, what .. " frame " .. f .. " joint world " .. k)
        assert.near(rj.skinMatrix, gj.skinMatrix, tol_m, what .. " frame " .. f .. " skin matrix " .. k)
      end
    end
    local rsn = rf.skinnedNodes
    if rsn and gf.skinnedNodes and #rsn > 0 and rsn[1].primitives[1].positionsWorld then
      for s, rs in ipairs(rf.skinnedNodes) do
        local gs = gf.skinnedNodes[s]
        assert.are.equal(rs.node, gs.node)
        for p, rp in ipairs(rs.primitives) do
          local gp = gs.primitives[p]
          assert.near(rp.positionsWorld, gp.positionsWorld, tol_p, what .. " positions")
          if type(rp.normalsWorld) == "table" then
            assert.near(rp.normalsWorld, gp.normalsWorld, 1e-3, what .. " normals")
          end
        end
      end
    end
    if rf.nodes and gf.nodes then
      for n, rn in ipairs(rf.nodes) do
        local gn = gf.nodes[n]
        assert.are.equal(rn.node, gn.node)
        assert.near(rn.translation, gn.translation, tol_m)
        assert.quat_near(rn.rotation, gn.rotation, 1e-5)
        assert.near(rn.scale, gn.scale, 1e-5)
        assert.near(rn.world, gn.world, tol_m, what .. " node world " .. n)
        assert.equal(rn.weights == nil, gn.weights == nil)
        if rn.weights then assert.near(rn.weights, gn.weights, 1e-6, what .. " node weights " .. n) end
      end
    end
    H.compare_morph_nodes(rf, gf, tol_p)
  end
end

describe("glTF reference (rest pose)", function()
  for _, m in ipairs(MODELS) do
    local name, file = m[1], m[2]
    it(name .. ": joints, skin matrices, skinned vertices and nodes", function()
      local asset = gltf.load(H.assets .. file, { tolerance = 0 })
      local ref = read_json(H.reference .. name .. "/rest.json")
      local e = extent(asset)
      local tol_m = name == "Fox" and 1e-5 * e or 1e-5
      local got = D.dump(asset, { skinned = true, nodes = true })
      -- header: skins, joints and inverse binds in skin.joints order
      assert.are.equal(#ref.skins, #got.skins)
      for s, rs in ipairs(ref.skins) do
        assert.are.equal(#rs.joints, #got.skins[s].joints)
        for k, rj in ipairs(rs.joints) do
          assert.are.equal(rj.node, got.skins[s].joints[k].node)
          assert.near(rs.inverseBindMatrices[k], got.skins[s].inverseBindMatrices[k], 1e-5 * e)
        end
      end
      assert.are.equal(#ref.skinnedNodes, #got.skinnedNodes)
      compare_frames(ref, got, tol_m, 1e-5 * e, name)
    end)
  end
end)
