-- Hostile input: allocation bombs, deep hierarchies, cycles, NaN and
-- infinities, zero and negative scales, degenerate quaternions, joint
-- count limits, all-zero weights and out-of-range joint indices, through
-- the Lua API (limber.skeleton / pose) and glTF files built here.
-- Every case either works (checked against the plain Lua reference in
-- spec/helper.lua) or is refused with an error naming the problem, and
-- leaves no state half-changed.
local H = require "spec.helper"
local cjson = require "cjson"
local limber = require "limber"
local gltf = require "limber.gltf"

local IDENTITY = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1 }
local NAN = 0 / 0

-- ---- tiny glTF builder ------------------------------------------------------

local base64 = H.base64

local function new_doc()
  return { asset = { version = "2.0" }, buffers = {}, bufferViews = {}, accessors = {}, nodes = {},
           meshes = {}, skins = {} }
end

-- Adds bytes as a data: buffer + bufferView + accessor; returns the accessor index.
local function add_data(doc, bytes, acc)
  doc.buffers[#doc.buffers + 1] = { byteLength = #bytes,
    uri = "data:application/octet-stream;base64," .. base64(bytes) }
  doc.bufferViews[#doc.bufferViews + 1] = { buffer = #doc.buffers - 1, byteLength = #bytes }
  acc.bufferView = #doc.bufferViews - 1
  doc.accessors[#doc.accessors + 1] = acc
  return #doc.accessors - 1
end

local function floats(t) return H.pack("<" .. ("f"):rep(#t), H.tunpack(t)) end

-- cjson writes an empty Lua table as {}, a JSON object, which the loader
-- refuses where an array belongs: leave the builder's empty lists out.
local function encode(doc)
  local out = {}
  for k, v in pairs(doc) do
    if type(v) ~= "table" or next(v) ~= nil then out[k] = v end
  end
  return cjson.encode(out)
end

local function load(doc, opts)
  return gltf.load_bytes(encode(doc), opts or { clips = false })
end

local function refused(text, fn)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an error containing: " .. text)
  assert.is_string(err)
  assert.are.equal("limber.gltf: ", err:sub(1, 13), err)
  assert.truthy(err:find(text, 1, true), ("%q does not contain %q"):format(err, text))
end

-- A skinned triangle: 3 vertices, JOINTS_0/WEIGHTS_0 given, one skin over
-- `njoints` root joints (nodes 1..njoints), mesh node last.
local function skinned_doc(joints, weights, njoints)
  local doc = new_doc()
  local pos = add_data(doc, floats { 0, 0, 0, 1, 0, 0, 0, 1, 0 },
    { componentType = 5126, count = 3, type = "VEC3", min = { 0, 0, 0 }, max = { 1, 1, 0 } })
  local jb = {}
  for _, j in ipairs(joints) do jb[#jb + 1] = H.pack("<I2", j) end
  local ja = add_data(doc, table.concat(jb), { componentType = 5123, count = 3, type = "VEC4" })
  local wa = add_data(doc, floats(weights), { componentType = 5126, count = 3, type = "VEC4" })
  doc.meshes[1] = { primitives = { { attributes = { POSITION = pos, JOINTS_0 = ja, WEIGHTS_0 = wa } } } }
  local sj = {}
  for k = 1, njoints do
    doc.nodes[k] = { name = "j" .. k }
    sj[k] = k - 1
  end
  doc.skins[1] = { joints = sj }
  doc.nodes[#doc.nodes + 1] = { mesh = 0, skin = 0 }
  return doc
end

-- ---- allocation bombs ---------------------------------------------------------

describe("hostile: allocation bombs", function()
  it("refuses a buffer declaring 2^50 bytes", function()
    local doc = new_doc()
    doc.buffers[1] = { byteLength = 2 ^ 50, uri = "data:application/octet-stream;base64,AAAA" }
    refused("buffers[0]: decoding needs", function() load(doc) end)
  end)

  it("refuses a buffer whose data is shorter than its byteLength", function()
    local doc = new_doc()
    doc.buffers[1] = { byteLength = 1000000, uri = "data:application/octet-stream;base64,AAAA" }
    refused("only 3 bytes are available", function() load(doc) end)
  end)

  it("refuses accessors of 2^40 and 2^26 + 1 zero elements without a bufferView", function()
    for _, count in ipairs { 2 ^ 40, 2 ^ 26 + 1 } do
      local doc = new_doc()
      doc.accessors[1] = { componentType = 5126, count = count, type = "VEC3" }
      doc.meshes[1] = { primitives = { { attributes = { POSITION = 0 } } } }
      doc.nodes[1] = { mesh = 0 }
      local ok, err = pcall(load, doc)
      assert.is_false(ok)
      assert.matches("^limber%.gltf: accessors%[0%]: ", err)
      assert.truthy(err:find("limit", 1, true), err)
    end
  end)

  it("stops many large zero accessors at the decode budget", function()
    local doc = new_doc()
    for k = 1, 40 do
      doc.accessors[k] = { componentType = 5126, count = 2 ^ 22, type = "VEC3" }
      doc.meshes[k] = { primitives = { { attributes = { POSITION = k - 1 } } } }
    end
    refused("over the limit of", function() load(doc) end)
    -- a smaller budget stops the first one
    refused("opts.max_bytes", function() load(doc, { max_bytes = 1000, clips = false }) end)
  end)

  it("refuses a sparse count larger than the accessor", function()
    local doc = new_doc()
    local a = add_data(doc, floats { 1, 2, 3, 4 }, { componentType = 5126, count = 4, type = "SCALAR" })
    doc.accessors[a + 1].sparse = { count = 2 ^ 40, indices = { bufferView = 0, componentType = 5125 },
                                    values = { bufferView = 0 } }
    doc.meshes[1] = { primitives = { { attributes = { POSITION = a } } } }
    local ok, err = pcall(load, doc)
    assert.is_false(ok)
    assert.matches("^limber%.gltf: ", err)
  end)

  it("refuses GLB chunks that claim more bytes than the file has", function()
    local json = cjson.encode(new_doc())
    json = json .. (" "):rep((4 - #json % 4) % 4)
    local glb = H.pack("<c4I4I4I4I4", "glTF", 2, 20 + #json + 8, #json, 0x4E4F534A) .. json
      .. H.pack("<I4I4", 0xfffffff0, 0x004E4942)
    refused("runs past the end of the file", function() gltf.load_bytes(glb) end)
  end)

  it("refuses JSON nested 100,000 deep without exhausting the C stack", function()
    local text = ("["):rep(100000) .. ("]"):rep(100000)
    refused("JSON", function() gltf.load_bytes(text) end)
    text = '{"asset":{"version":"2.0"},"extras":' .. ('{"a":'):rep(100000) .. "1" .. ("}"):rep(100001)
    refused("JSON", function() gltf.load_bytes(text) end)
  end)
end)

-- ---- deep hierarchies ---------------------------------------------------------

describe("hostile: deep hierarchies", function()
  local N = limber.MAX_JOINTS -- 65,535 joints: a 65,534-deep chain

  -- every joint one unit along x from its parent: joint k at x = k - 1
  -- (exact in float), below a root rotated 90 degrees about z
  local function check_chain(skel, remap)
    local pose = limber.pose(skel, 1)
    pose:set_root(1, { 0, 1, 0, 0, -1, 0, 0, 0, 0, 0, 1, 0, 5, 0, 0, 1 })
    pose:local_to_model()
    for _, k in ipairs { 1, 2, 1000, 40000, N } do
      local m = pose:model(1, remap and remap[k] or k)
      -- x axis maps to y: joint k sits at (5, k - 1, 0)
      assert.near({ 0, 1, 0, 0, -1, 0, 0, 0, 0, 0, 1, 0, 5, k - 1, 0, 1 }, m, 1e-6 * k)
    end
  end

  it("builds and poses a 65,534-deep chain from Lua, in order", function()
    local joints = {}
    for k = 1, N do joints[k] = { parent = k > 1 and k - 1 or nil, translation = { k > 1 and 1 or 0, 0, 0 } } end
    local skel = limber.skeleton(joints)
    assert.are.equal(N, skel:joint_count())
    check_chain(skel)
  end)

  it("builds and poses a 65,534-deep chain from Lua listed children first", function()
    local joints = {}
    for k = 1, N do
      -- input i holds chain joint N - i + 1, its parent is input i + 1
      joints[k] = { parent = k < N and k + 1 or nil, translation = { k < N and 1 or 0, 0, 0 } }
    end
    local sorted, remap = limber.sort_joints(joints)
    local skel = limber.skeleton(sorted)
    local chain = {}
    for k = 1, N do chain[k] = remap[N - k + 1] end
    check_chain(skel, chain)
  end)

  it("loads a 65,534-deep glTF skin chain and poses it", function()
    local doc = new_doc()
    local sj = {}
    for k = 1, N do
      doc.nodes[k] = { children = k < N and { k } or nil, translation = k > 1 and { 1, 0, 0 } or nil }
      sj[k] = k - 1
    end
    doc.skins[1] = { joints = sj }
    local asset = load(doc)
    assert.are.equal(1, #asset.skeletons)
    local entry = asset.skeletons[1]
    assert.are.equal(N, entry.skeleton:joint_count())
    local chain = {}
    for k = 1, N do chain[k] = entry.joint_of[k] end
    check_chain(entry.skeleton, chain)
  end)

  it("loads a 100,000-deep glTF node chain outside skins (world matrices iteratively)", function()
    local doc = new_doc()
    local n = 100000
    for k = 1, n do doc.nodes[k] = { children = k < n and { k } or nil, translation = { 0, 0.5, 0 } } end
    doc.scenes = { { nodes = { 0 } } }
    local asset = load(doc)
    assert.are.equal(n, #asset.nodes)
    gltf.update_worlds(asset)
    assert.near({ 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, n * 0.5, 0, 1 }, asset.nodes[n].world, 1e-9)
  end)

  it("refuses 65,536 joints from Lua and from glTF, but not 65,535", function()
    local joints = {}
    for k = 1, N + 1 do joints[k] = {} end
    assert.error_matches(function() limber.skeleton(joints) end,
      "limber.skeleton: 65536 joints, more than the supported 65535", 1, true)
    joints[N + 1] = nil
    assert.are.equal(N, limber.skeleton(joints):joint_count())
    local doc = new_doc()
    local sj = {}
    for k = 1, N + 1 do
      doc.nodes[k] = {}
      sj[k] = k - 1
    end
    doc.skins[1] = { joints = sj }
    refused("skins[0]: 65536 joints, more than 65535", function() load(doc) end)
  end)

  it("refuses a glTF skin whose skeleton needs 65,536 nodes (65,535 joints plus their common parent)", function()
    local doc = new_doc()
    local half = math.floor((N + 1) / 2)
    doc.nodes[1] = { children = { 1, half } } -- node 0: not a joint, parent of two chains
    local sj = {}
    for k = 2, N + 1 do
      local last_of_chain = k == half or k == N + 1
      doc.nodes[k] = { children = not last_of_chain and { k } or nil }
      sj[#sj + 1] = k - 1
    end
    doc.skins[1] = { joints = sj }
    refused("skins[0]: ", function() load(doc) end)
  end)
end)

-- ---- cycles -------------------------------------------------------------------

describe("hostile: cycles", function()
  it("refuses cycles in Lua skeletons", function()
    local cyc = { { name = "a", parent = "c" }, { name = "b", parent = "a" }, { name = "c", parent = "b" } }
    assert.error_matches(function() limber.skeleton(cyc) end, "comes before its parent", 1, true)
    assert.error_matches(function() limber.sort_joints(cyc) end, "is in a parent cycle", 1, true)
    -- a 50,000-long cycle is found without recursion
    local long = {}
    for k = 1, 50000 do long[k] = { parent = k % 50000 + 1 } end
    assert.error_matches(function() limber.sort_joints(long) end, "is in a parent cycle", 1, true)
    assert.error_matches(function() limber.skeleton { {}, { parent = 2 } } end, "own parent", 1, true)
  end)

  it("refuses glTF node cycles, long and short", function()
    local doc = new_doc()
    local n = 50000
    for k = 1, n do doc.nodes[k] = { children = { k % n } } end -- 0 -> 1 -> ... -> n-1 -> 0
    refused("ancestor", function() load(doc) end)
    doc = new_doc()
    doc.nodes[1] = { children = { 0 } }
    refused("nodes[0]: node is its own ancestor", function() load(doc) end)
    doc = new_doc()
    doc.nodes = { { children = { 1 } }, { children = { 1 } } }
    refused("nodes[1]", function() load(doc) end)
  end)

  it("refuses a scene listing a child node as a root", function()
    local doc = new_doc()
    doc.nodes = { { children = { 1 } }, {} }
    doc.scenes = { { nodes = { 0, 1 } } }
    refused("scenes[0].nodes[1]: node 1 is not a root node", function() load(doc) end)
  end)

  it("refuses a scene listing the same root twice", function()
    local doc = new_doc()
    doc.nodes = { {}, {} }
    doc.scenes = { { nodes = { 1, 0, 1 } } }
    refused("scenes[0].nodes[2]: node 1 is listed twice (nodes[0])", function() load(doc) end)
    doc.scenes = { { nodes = { 1, 0 } } }
    assert.equal(2, #load(doc).scenes[1].nodes)
  end)
end)

-- ---- NaN and infinities -------------------------------------------------------

describe("hostile: NaN and infinities", function()
  local bad = { NAN, math.huge, -math.huge, 1e39 }

  it("refuses them in skeleton rest poses and inverse binds", function()
    for _, v in ipairs(bad) do
      for _, field in ipairs { "translation", "rotation", "scale" } do
        local j = { translation = { 0, 0, 0 }, rotation = { 0, 0, 0, 1 }, scale = { 1, 1, 1 } }
        j[field][2] = v
        assert.error_matches(function() limber.skeleton { {}, j } end, "is not a finite float", 1, true)
      end
      local ibm = { H.tunpack(IDENTITY) }
      ibm[7] = v
      assert.error_matches(function() limber.skeleton { { inverse_bind = ibm } } end, "not a finite", 1, true)
    end
  end)

  it("refuses them in set_local and set_root, leaving the pose unchanged", function()
    local skel = limber.skeleton(H.rand_joints(5))
    local pose = limber.pose(skel, 3)
    pose:set_trs(2, 3, { 1, 2, 3 }, { 0, 0, 0.6, 0.8 }, { 2, 2, 2 })
    pose:local_to_model()
    local before = pose:model_buffer():bytes()
    for _, v in ipairs(bad) do
      assert.error_matches(function() pose:set_trs(2, 3, { v, 0, 0 }) end, "is not a finite float", 1, true)
      assert.error_matches(function() pose:set_trs(2, 3, nil, { 0, v, 0, 1 }) end, "is not a finite float", 1, true)
      assert.error_matches(function() pose:set_trs(2, 3, nil, nil, { 1, 1, v }) end, "is not a finite float", 1, true)
      local m = { H.tunpack(IDENTITY) }
      m[14] = v
      assert.error_matches(function() pose:set_root(2, m) end, "is not a finite float", 1, true)
    end
    local t, r, s = pose:trs(2, 3)
    assert.near({ 1, 2, 3 }, t, 0)
    assert.near({ 0, 0, 0.6, 0.8 }, r, 1e-7)
    assert.near({ 2, 2, 2 }, s, 0)
    pose:local_to_model()
    assert.are.equal(before, pose:model_buffer():bytes())
  end)

  it("refuses them in buffers", function()
    local b = limber.buffer("f32", 2, { 1, 2, 3, 4 })
    for _, v in ipairs(bad) do
      assert.error_matches(function() b:set(1, { 0, v }) end, "not a finite float", 1, true)
    end
    assert.near({ 1, 2 }, b:get(1), 0)
  end)

  it("refuses them in glTF accessors (positions, inverse binds, key frames)", function()
    for _, v in ipairs { NAN, math.huge, -math.huge } do
      local doc = new_doc()
      local a = add_data(doc, floats { 0, 0, 0, 1, v, 0, 0, 1, 0 }, { componentType = 5126, count = 3, type = "VEC3" })
      doc.meshes[1] = { primitives = { { attributes = { POSITION = a } } } }
      refused("element 1 is NaN or infinite", function() load(doc) end)

      doc = new_doc()
      local ibm = { H.tunpack(IDENTITY) }
      ibm[13] = v
      doc.nodes[1] = {}
      doc.skins[1] = { joints = { 0 }, inverseBindMatrices = add_data(doc, floats(ibm),
        { componentType = 5126, count = 1, type = "MAT4" }) }
      refused("element 0 is NaN or infinite", function() load(doc) end)

      doc = new_doc()
      doc.nodes[1] = {}
      local times = add_data(doc, floats { 0, 1 }, { componentType = 5126, count = 2, type = "SCALAR",
        min = { 0 }, max = { 1 } })
      local vals = add_data(doc, floats { 0, 0, 0, 1, v, 0 }, { componentType = 5126, count = 2, type = "VEC3" })
      doc.animations = { { samplers = { { input = times, output = vals } },
        channels = { { sampler = 0, target = { node = 0, path = "translation" } } } } }
      refused("NaN or infinite", function() load(doc) end)
    end
  end)

  it("refuses non-finite or float-overflowing numbers in glTF node transforms", function()
    -- JSON cannot spell NaN (refused as syntax); 1e39 is finite in JSON but not as a float
    refused("JSON", function()
      gltf.load_bytes('{"asset":{"version":"2.0"},"nodes":[{"translation":[NaN,0,0]}]}')
    end)
    for _, field in ipairs { "translation", "scale", "matrix" } do
      local doc = new_doc()
      local v = field == "matrix" and { H.tunpack(IDENTITY) } or { 1, 1, 1 }
      v[field == "matrix" and 13 or 2] = 1e39
      doc.nodes[1] = { [field] = v }
      doc.skins[1] = { joints = { 0 } }
      refused("nodes[0]", function() load(doc) end)
    end
  end)
end)

-- ---- scales and quaternions ---------------------------------------------------

describe("hostile: zero and negative scales, degenerate quaternions", function()
  H.seed("hostile scales")

  it("poses joints with zero and negative scales like the plain Lua reference", function()
    local joints = H.rand_joints(24, 2)
    local scales = { { 0, 0, 0 }, { -1, 1, 1 }, { -1, -1, -1 }, { 0, 1, 1 }, { 2, -0.5, 0 }, { -3, 2, 1 } }
    local parents, locals = {}, {}
    for k, j in ipairs(joints) do
      j.scale = scales[(k - 1) % #scales + 1]
      parents[k] = j.parent or 0
      locals[k] = { j.translation, j.rotation, j.scale }
    end
    local skel = limber.skeleton(joints)
    local pose = limber.pose(skel, 9)
    local root = H.mul(H.trs({ 1, 2, 3 }, H.rand_quat(), { -2, 0.5, 1 }), H.identity())
    pose:set_root(9, root)
    for _, simd in ipairs { false, true } do
      limber.core.simd(simd)
      pose:local_to_model(true)
      for _, inst in ipairs { 1, 9 } do
        local ref = H.reference_models(parents, locals, inst == 9 and root or nil)
        for k = 1, #joints do assert.near(ref[k], pose:model(inst, k), 2e-5) end
      end
    end
    limber.core.simd(true)
    -- set_local with zero and negative scales too
    pose:set_trs(3, 5, nil, nil, { 0, -2, 0 })
    locals[5] = { locals[5][1], locals[5][2], { 0, -2, 0 } }
    pose:local_to_model()
    local ref = H.reference_models(parents, locals)
    for k = 1, #joints do assert.near(ref[k], pose:model(3, k), 2e-5) end
  end)

  it("loads glTF nodes with zero and negative scales", function()
    local doc = new_doc()
    doc.nodes = { { children = { 1 }, scale = { -1, 1, 1 } }, { scale = { 0, 0, 0 }, translation = { 1, 0, 0 } } }
    doc.skins[1] = { joints = { 0, 1 } }
    local asset = load(doc)
    local pose = gltf.pose(asset, 1)
    pose:local_to_model()
    local j2 = asset.skeletons[1].joint_of[2]
    assert.near({ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0, 1 }, pose:model(1, j2), 1e-6)
    -- a mirroring node matrix decomposes with the reflection in scale x
    doc.nodes[1] = { children = { 1 }, matrix = { -1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1 } }
    asset = load(doc)
    assert.near({ -1, 1, 1 }, asset.nodes[1].scale, 1e-12)
    -- node matrices with zero-length axes (a part scaled to 0 to hide it)
    -- decompose into a TRS that gives the same matrix
    local q = { 0.2, -0.4, 0.1, 0.8 }
    for _, sc in ipairs { { 0, 2, 3 }, { 2, 0, 3 }, { 2, 3, 0 }, { 0, 0, 3 }, { 0, 3, 0 }, { 3, 0, 0 },
                          { 0, 0, 0 } } do
      local m = H.trs({ 1, 2, 3 }, q, sc)
      doc.nodes[1] = { children = { 1 }, matrix = m }
      asset = load(doc)
      local n = asset.nodes[1]
      assert.near(sc, { math.abs(n.scale[1]), math.abs(n.scale[2]), math.abs(n.scale[3]) }, 1e-6)
      assert.near(m, H.trs(n.translation, n.rotation, n.scale), 1e-6)
      assert.near(1, math.sqrt(n.rotation[1] ^ 2 + n.rotation[2] ^ 2 + n.rotation[3] ^ 2 + n.rotation[4] ^ 2),
        1e-12)
    end
  end)

  it("normalises tiny, huge and unnormalised quaternions and refuses zero ones", function()
    local skel = limber.skeleton { { rotation = { 0, 0, 1e-6, 1e-6 } }, { parent = 1, rotation = { 0, 0, 3e30, 0 } } }
    assert.quat_near({ 0, 0, math.sqrt(0.5), math.sqrt(0.5) }, select(2, skel:rest_trs(1)), 1e-6)
    assert.quat_near({ 0, 0, 1, 0 }, select(2, skel:rest_trs(2)), 1e-6)
    for _, q in ipairs { { 0, 0, 0, 0 }, { 0, 0, 0, 1e-30 }, { -0.0, 0, 0, 0 } } do
      assert.error_matches(function() limber.skeleton { { rotation = q } } end, "zero quaternion", 1, true)
    end
    local pose = limber.pose(skel, 1)
    pose:set_trs(1, 2, nil, { 0, 2, 0, 0 })
    assert.quat_near({ 0, 1, 0, 0 }, select(2, pose:trs(1, 2)), 1e-7)
    assert.error_matches(function() pose:set_trs(1, 2, nil, { 0, 0, 0, 0 }) end, "zero quaternion", 1, true)
    assert.quat_near({ 0, 1, 0, 0 }, select(2, pose:trs(1, 2)), 1e-7)
    local doc = new_doc()
    doc.nodes[1] = { rotation = { 0, 0, 0, 0 } }
    refused("nodes[0]: rotation is a zero quaternion", function() load(doc) end)
    doc.nodes[1] = { rotation = { 0, 0, 0, 5 } }
    assert.near({ 0, 0, 0, 1 }, load(doc).nodes[1].rotation, 1e-12)
  end)
end)

-- ---- weights and joint indices ------------------------------------------------

describe("hostile: skin weights and joint indices", function()
  it("gives all-zero weights to the first joint", function()
    local asset = load(skinned_doc({ 0, 1, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0 },
      { 0, 0, 0, 0, 0, 0, 0, 0, 0.5, 0.5, 0, 0 }, 2))
    local prim = asset.meshes[1].primitives[1]
    assert.near({ 1, 0, 0, 0 }, prim.weights:get(1), 0)
    assert.are.same({ 0, 1, 0, 0 }, prim.gpu_joints:get(1))
    assert.near({ 1, 0, 0, 0 }, prim.weights:get(2), 0)
    assert.are.same({ 1, 0, 0, 0 }, prim.gpu_joints:get(2))
    assert.near({ 0.5, 0.5, 0, 0 }, prim.weights:get(3), 1e-7)
  end)

  it("refuses mesh joint indices beyond the skin and beyond 65,534", function()
    refused("names joint 2 but skin 0 has 2 joints", function()
      load(skinned_doc({ 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0 }, { 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0 }, 2))
    end)
    refused("vertex 1 has a negative or infinite weight or a joint index above 65534", function()
      load(skinned_doc({ 0, 0, 0, 0, 65535, 0, 0, 0, 1, 0, 0, 0 }, { 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0 }, 2))
    end)
    refused("vertex 2 has a negative or infinite weight", function()
      load(skinned_doc({ 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0 }, { 1, 0, 0, 0, 1, 0, 0, 0, -1, 0, 0, 0 }, 2))
    end)
  end)
end)

-- ---- findings of spec/gltf_fuzz_spec.lua, kept as plain cases -------------------

describe("hostile: glTF fuzz findings", function()
  it("refuses a node matrix that is not affine (it used to load, then gltf.pose failed)", function()
    local doc = new_doc()
    doc.nodes = { { children = { 1 }, matrix = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0.5, 0, 0, 0, 1 } }, {} }
    doc.skins[1] = { joints = { 1 } }
    refused("nodes[0]: matrix is not affine (its last row must be 0 0 0 1)", function() load(doc) end)
    -- within 1e-6 it is accepted and made exact
    doc.nodes[1].matrix[12] = 1e-9
    local asset = load(doc)
    assert.are.equal(0, asset.nodes[1].matrix[12])
    gltf.pose(asset, 1):local_to_model()
  end)

  it("refuses JSON arrays where objects are expected (it used to raise a Lua type error)", function()
    local doc = skinned_doc({ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, { 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0 }, 1)
    doc.meshes[1].primitives[1].attributes = { 0, 1 }
    refused("meshes[0].primitives[0]: attributes must be an object", function() load(doc) end)
    doc = new_doc()
    doc.asset = { "2.0" }
    refused("asset: asset must be an object", function() load(doc) end)
  end)
end)

describe("hostile: clips and scenes", function()
  local anim = require "limber.anim"
  local scene = require "limber.scene"

  it("plays empty and single-key (zero-duration) clips, looping and backwards, to finite poses", function()
    local skel = limber.skeleton({ { name = "a", translation = { 1, 1, 1 } }, { name = "b", parent = "a" } })
    local empty = anim.clip({ tracks = {} }, skel)
    local one = anim.clip({ tracks = {
      { joint = 2, path = "translation", times = { 0 }, values = { 1, 2, 3 } },
      { joint = 1, path = "rotation", times = { 0 }, values = { 0, 0, 1, 1 } } } }, skel)
    assert.equal(0, empty:duration())
    assert.equal(0, one:duration())
    local pose = limber.pose(skel, 3)
    local crowd = anim.crowd(pose, { empty, one })
    crowd:player(1):play(1, { loop = true })
    crowd:player(2):play(2, { loop = true, rate = -1 })
    crowd:player(3):play(2, { loop = false, rate = 3 })
    for _ = 1, 5 do crowd:advance(1 / 60) crowd:evaluate() end
    pose:local_to_model()
    -- the empty clip leaves the rest pose, the single key holds its value at every time
    assert.near(H.reference_models({ 0, 1 }, { { { 1, 1, 1 }, { 0, 0, 0, 1 }, { 1, 1, 1 } },
      { { 0, 0, 0 }, { 0, 0, 0, 1 }, { 1, 1, 1 } } })[2], pose:model(1, 2), 1e-6)
    local ref = H.reference_models({ 0, 1 }, { { { 1, 1, 1 }, { 0, 0, 1, 1 }, { 1, 1, 1 } },
      { { 1, 2, 3 }, { 0, 0, 0, 1 }, { 1, 1, 1 } } })[2]
    assert.near(ref, pose:model(2, 2), 1e-5)
    assert.near(ref, pose:model(3, 2), 1e-5)
    assert.equal(0, crowd:player(2):time())
  end)

  it("updates a 100,000-deep scene chain without exhausting the C stack", function()
    local sc = scene.new({ capacity = 1024 })
    local id, first
    for _ = 1, 100000 do
      id = sc:create({ parent = id, translation = { 0, 1, 0 } })
      first = first or id
    end
    sc:update()
    assert.near({ 0, 100000, 0 }, { H.tunpack(sc:world(id), 13, 15) }, 1e-2)
    sc:set_translation(first, 5, 1, 0)            -- moves the whole chain
    sc:update()
    assert.near({ 5, 100000, 0 }, { H.tunpack(sc:world(id), 13, 15) }, 1e-2)
    assert.error_matches(function() sc:set_parent(first, id) end, "cycle refused", 1, true)
    assert.near({ 5, 100000, 0 }, { H.tunpack(sc:world(id), 13, 15) }, 1e-2)
    assert.equal(100000, sc:destroy(first))
  end)
end)
