-- glTF import: accessor decoding against a plain Lua decoder on random
-- data, skin influences, loading paths (.gltf + .bin, data: URIs, .glb,
-- bytes in memory), skeleton building and what the asset reports.
local H = require "spec.helper"
local cjson = require "cjson"
local limber = require "limber"
local gltf = require "limber.gltf"
local core = limber.core

H.seed("gltf")

local read = H.read

local base64 = H.base64

-- component type -> string.pack format, normalisation divisor, random value,
-- size in bytes (math.random(m, n) takes C ints on 5.1: the u32 values are
-- drawn as floor(random() * (2^31 + 1)), 0 to 2^31)
local CT = {
  [5120] = { "i1", 127, function() return math.random(-128, 127) end, 1 },
  [5121] = { "I1", 255, function() return math.random(0, 255) end, 1 },
  [5122] = { "i2", 32767, function() return math.random(-32768, 32767) end, 2 },
  [5123] = { "I2", 65535, function() return math.random(0, 65535) end, 2 },
  [5125] = { "I4", nil, function() return math.floor(math.random() * (2 ^ 31 + 1)) end, 4 },
  [5126] = { "f", nil, function() return H.rand(-100, 100) end, 4 },
}
local WIDTH = { SCALAR = 1, VEC2 = 2, VEC3 = 3, VEC4 = 4 }

-- Plain decoder: what glTF says the value of a stored component is.
local function expected(ct, v, normalized)
  if ct == 5126 or ct == 5125 then return (H.unpack("<f", H.pack("<f", v))) end
  if normalized then return math.max(v / CT[ct][2], -1) end
  return v
end

-- A self-contained document over one data: buffer.
local function make_doc(bytes, views, accessors, attributes, extra)
  local doc = {
    asset = { version = "2.0" },
    buffers = { { byteLength = #bytes, uri = "data:application/octet-stream;base64," .. base64(bytes) } },
    bufferViews = views, accessors = accessors,
    meshes = { { primitives = { { attributes = attributes } } } },
    nodes = { { mesh = 0 } }, scenes = { { nodes = { 0 } } }, scene = 0,
  }
  for k, v in pairs(extra or {}) do doc[k] = v end
  return doc
end

describe("glTF accessors", function()
  it("decode every component type, normalized or not, with strides and offsets", function()
    for _ = 1, 30 do
      local specs, chunks, views, accessors, attributes = {}, {}, {}, {}, {}
      local pos = 0
      for ct, info in pairs(CT) do
        for tname, w in pairs(WIDTH) do
          local normalized = info[2] ~= nil and math.random() < 0.5
          local cs = info[4]
          local es = cs * w
          local stride = math.random() < 0.5 and 0 or math.floor((es + 3) / 4) * 4 + 4 * math.random(0, 3)
          local count = math.random(1, 7)
          local offset = cs * math.random(0, 3)
          local vals, bytes = {}, { string.rep("\0", offset) }
          for i = 1, count do
            local elem = {}
            for c = 1, w do
              local v = info[3]()
              elem[c] = expected(ct, v, normalized)
              bytes[#bytes + 1] = H.pack("<" .. info[1], v)
            end
            vals[i] = elem
            if stride > 0 and i < count then bytes[#bytes + 1] = string.rep("\0", stride - es) end
          end
          local blob = table.concat(bytes)
          local pad = (4 - (pos % 4)) % 4
          chunks[#chunks + 1] = string.rep("\0", pad) .. blob
          pos = pos + pad
          views[#views + 1] = { buffer = 0, byteOffset = pos, byteLength = #blob,
                                byteStride = stride > 0 and stride or nil }
          pos = pos + #blob
          accessors[#accessors + 1] = { bufferView = #views - 1, byteOffset = offset, componentType = ct,
                                        normalized = normalized or nil, count = count, type = tname }
          attributes["_A" .. #accessors] = #accessors - 1
          specs[#specs + 1] = { name = "_A" .. #accessors, vals = vals, ct = ct }
        end
      end
      -- every attribute of a primitive has the same count: one primitive per accessor
      local doc = make_doc(table.concat(chunks), views, accessors, {})
      doc.meshes[1].primitives = {}
      for k, s in ipairs(specs) do
        doc.meshes[1].primitives[k] = { attributes = { [s.name] = attributes[s.name] } }
      end
      local asset = gltf.load_bytes(cjson.encode(doc))
      for k, s in ipairs(specs) do
        local buf = asset.meshes[1].primitives[k].attributes[s.name]
        assert.are.equal(#s.vals, #buf)
        for i, e in ipairs(s.vals) do
          local got = buf[i]
          if type(got) == "number" then got = { got } end
          assert.near(e, got, 1e-6)
        end
      end
    end
  end)

  it("decode integer indices of every unsigned type and check them against the vertex count", function()
    for _, ct in ipairs({ 5121, 5123, 5125 }) do
      local fmt = CT[ct][1]
      local idx = { 0, 2, 1, 2, 1, 0 }
      local ib = {}
      for _, v in ipairs(idx) do ib[#ib + 1] = H.pack("<" .. fmt, v) end
      local ibytes = table.concat(ib)
      local pad = string.rep("\0", (4 - #ibytes % 4) % 4)
      local pbytes = H.pack("<fffffffff", 0, 0, 0, 1, 0, 0, 0, 1, 0)
      local doc = make_doc(ibytes .. pad .. pbytes,
        { { buffer = 0, byteLength = #ibytes }, { buffer = 0, byteOffset = #ibytes + #pad, byteLength = 36 } },
        { { bufferView = 0, componentType = ct, count = 6, type = "SCALAR" },
          { bufferView = 1, componentType = 5126, count = 3, type = "VEC3" } },
        { POSITION = 1 })
      doc.meshes[1].primitives[1].indices = 0
      local prim = gltf.load_bytes(cjson.encode(doc)).meshes[1].primitives[1]
      local n, w, t = #prim.gpu_indices, prim.gpu_indices:width(), prim.gpu_indices:scalar_type()
      assert.are.same({ 6, 1, "u32" }, { n, w, t })
      for k = 1, 6 do assert.are.equal(idx[k], prim.gpu_indices[k]) end
      assert.near({ 1, 0, 0 }, prim.positions[2], 0)
    end
  end)

  it("fill accessors without a bufferView with zeros, then apply sparse values", function()
    local ib = H.pack("<I2I2", 1, 3)
    local vb = H.pack("<ffffff", 1, 2, 3, 4, 5, 6)
    local doc = make_doc(ib .. vb, { { buffer = 0, byteLength = 4 }, { buffer = 0, byteOffset = 4, byteLength = 24 } },
      { { componentType = 5126, count = 5, type = "VEC3" },
        { componentType = 5126, count = 5, type = "VEC3",
          sparse = { count = 2, indices = { bufferView = 0, componentType = 5123 }, values = { bufferView = 1 } } } },
      { POSITION = 0, NORMAL = 1 })
    local prim = gltf.load_bytes(cjson.encode(doc)).meshes[1].primitives[1]
    for k = 1, 5 do assert.are.same({ 0, 0, 0 }, prim.positions[k]) end
    assert.are.same({ 0, 0, 0 }, prim.normals[1])
    assert.are.same({ 1, 2, 3 }, prim.normals[2])
    assert.are.same({ 0, 0, 0 }, prim.normals[3])
    assert.are.same({ 4, 5, 6 }, prim.normals[4])
    -- sparse indices must increase and stay below count
    doc.accessors[2].sparse.count = 2
    local bad = make_doc(H.pack("<I2I2", 3, 1) .. vb, doc.bufferViews, doc.accessors, { NORMAL = 1 })
    assert.error_matches(function() gltf.load_bytes(cjson.encode(bad)) end,
      "limber.gltf: accessors[1].sparse.indices: index 1 (1) is out of range or not increasing (count 5)", 1, true)
  end)

  it("refuses normalized float or u32 and float indices", function()
    local doc = make_doc(string.rep("\0", 12), { { buffer = 0, byteLength = 12 } },
      { { bufferView = 0, componentType = 5126, normalized = true, count = 1, type = "VEC3" } }, { POSITION = 0 })
    assert.error_matches(function() gltf.load_bytes(cjson.encode(doc)) end,
      "limber.gltf: accessors[0]: normalized is only allowed for 8- and 16-bit integers", 1, true)
    doc.accessors[1].normalized = nil
    doc.meshes[1].primitives[1].indices = 0
    assert.error_matches(function() gltf.load_bytes(cjson.encode(doc)) end,
      "limber.gltf: meshes[0].primitives[0]: indices: accessor 0 has type VEC3, expected SCALAR", 1, true)
    doc.accessors[1].type = "SCALAR"
    doc.accessors[1].count = 3
    doc.meshes[1].primitives[1].attributes.POSITION = nil
    doc.meshes[1].primitives[1].attributes._X = 0
    assert.error_matches(function() gltf.load_bytes(cjson.encode(doc)) end,
      "limber.gltf: accessors[0]: integer data expected, componentType 5126", 1, true)
  end)
end)

describe("glTF skin influences", function()
  it("renormalise weights to sum 1 (CesiumMan has sums down to 0.18)", function()
    local asset = gltf.load(H.assets .. "CesiumMan/CesiumMan.gltf")
    local prim = asset.meshes[1].primitives[1]
    local raw = prim.attributes.WEIGHTS_0
    local lowest = 1
    for v = 1, #prim.weights do
      local w, r = prim.weights[v], raw[v]
      local s, rs = w[1] + w[2] + w[3] + w[4], r[1] + r[2] + r[3] + r[4]
      lowest = math.min(lowest, rs)
      assert.near(1, s, 1e-6)
      for k = 1, 4 do assert.near(r[k] / rs, w[k], 1e-6) end
    end
    assert.is_true(lowest < 0.2)
    local n, w, t = #prim.gpu_joints, prim.gpu_joints:width(), prim.gpu_joints:scalar_type()
    assert.are.same({ 3273, 4, "u16" }, { n, w, t })
  end)

  it("merge JOINTS_1/WEIGHTS_1: keep the 4 largest weights, renormalised", function()
    for _ = 1, 50 do
      local nv = math.random(1, 9)
      local j0, w0, j1, w1 = {}, {}, {}, {}
      local infl = {}
      for v = 1, nv do
        infl[v] = {}
        for k = 1, 8 do
          local j, w = math.random(0, 30), math.random() < 0.2 and 0 or H.rand(0, 1)
          infl[v][k] = { j, w }
          if k <= 4 then j0[#j0 + 1], w0[#w0 + 1] = j, w else j1[#j1 + 1], w1[#w1 + 1] = j, w end
        end
      end
      local oj, ow, maxj = core.gltf_influences("t", limber.buffer("u32", 4, j0), limber.buffer("f32", 4, w0),
        limber.buffer("u32", 4, j1), limber.buffer("f32", 4, w1))
      local mj = 0
      for v = 1, nv do
        local list = {}
        for k = 1, 8 do
          list[k] = { infl[v][k][1], H.unpack("<f", H.pack("<f", infl[v][k][2])), k }
          mj = math.max(mj, infl[v][k][1])
        end
        table.sort(list, function(a, b) return a[2] > b[2] or (a[2] == b[2] and a[3] < b[3]) end)
        local s = list[1][2] + list[2][2] + list[3][2] + list[4][2]
        for k = 1, 4 do
          assert.are.equal(list[k][1], oj[v][k])
          assert.near(s > 0 and list[k][2] / s or (k == 1 and 1 or 0), ow[v][k], 1e-6)
        end
      end
      assert.are.equal(mj, maxj)
    end
  end)

  it("accept u8 joints and normalized u8/u16 weights (Animation_SkinType)", function()
    local ref
    for k = 0, 3 do
      local a = gltf.load(H.assets .. ("asset-generator/Animation_SkinType/Animation_SkinType_%02d.gltf"):format(k))
      local prim = a.meshes[1].primitives[1]
      local flat = {}
      for v = 1, #prim.weights do
        for c = 1, 4 do flat[#flat + 1] = prim.weights[v][c]; flat[#flat + 1] = prim.gpu_joints[v][c] end
      end
      if ref then assert.near(ref, flat, 3e-3) else ref = flat end
    end
  end)
end)

describe("glTF loading", function()
  it("loads .gltf with an external .bin from a path or from bytes with a base_dir", function()
    local dir = H.assets .. "asset-generator/Animation_Skin/"
    local a = gltf.load(dir .. "Animation_Skin_01.gltf")
    local b = gltf.load_bytes(read(dir .. "Animation_Skin_01.gltf"), { base_dir = dir })
    assert.are.equal("Animation_Skin_01", a.name)
    assert.are.same(gltf.info(a), gltf.info(b))
    assert.are.equal(a.meshes[1].primitives[1].positions:bytes(), b.meshes[1].primitives[1].positions:bytes())
  end)

  it("loads .glb from a path and from bytes", function()
    local a = gltf.load(H.assets .. "Fox/Fox.glb")
    local b = gltf.load_bytes(read(H.assets .. "Fox/Fox.glb"))
    assert.is_true(a.glb)
    assert.are.same(gltf.info(a), gltf.info(b))
  end)

  it("builds a GLB around JSON padded with NULs, skips unknown chunks, accepts a byte order mark", function()
    local json = read(H.assets .. "SimpleSkin/SimpleSkin.gltf")
    local padded = json .. string.rep("\0", (4 - #json % 4) % 4 + 4)
    local extra = H.pack("<I4I4", 4, 0x12345678) .. "abcd"
    local body = H.pack("<I4I4", #padded, 0x4E4F534A) .. padded .. extra
    local glb = "glTF" .. H.pack("<I4I4", 2, 12 + #body) .. body
    local a = gltf.load_bytes(glb)
    local b = gltf.load_bytes("\239\187\191" .. json)
    assert.are.same(gltf.info(a), gltf.info(b))
    assert.are.equal(2, gltf.info(a).skins[1].joints)
  end)

  it("reports what is in the asset", function()
    local info = gltf.info(gltf.load(H.assets .. "Fox/Fox.glb"))
    assert.are.equal(26, info.nodes)
    assert.are.equal(1, #info.skins)
    assert.are.equal(24, info.skins[1].joints)
    assert.are.same({ name = "fox1", primitives = 1, vertices = 1728 }, { name = info.meshes[1].name,
      primitives = info.meshes[1].primitives, vertices = info.meshes[1].vertices })
    local names, durations = {}, {}
    for k, an in ipairs(info.animations) do names[k], durations[k] = an.name, an.duration end
    assert.are.same({ "Survey", "Walk", "Run" }, names)
    assert.near({ 3.4167, 0.7083, 1.1583 }, durations, 1e-4)
    local rs = gltf.info(gltf.load(H.assets .. "RiggedSimple/RiggedSimple.gltf"))
    assert.near(2.0833, rs.animations[1].duration, 1e-4) -- largest key time; first key is not at 0
  end)

  it("extracts every animation channel as raw data", function()
    local a = gltf.load(H.assets .. "CesiumMan/CesiumMan.gltf")
    local anim = a.animations[1]
    assert.are.equal(57, #anim.channels)
    local paths = {}
    for _, ch in ipairs(anim.channels) do
      paths[ch.path] = (paths[ch.path] or 0) + 1
      assert.are.equal("LINEAR", ch.interpolation)
      assert.are.equal(#ch.times, #ch.values)
      local w = ch.values:width()
      assert.are.equal(ch.path == "rotation" and 4 or 3, w)
    end
    assert.are.same({ translation = 19, rotation = 19, scale = 19 }, paths)
  end)

  it("reports weights channels as unsupported without failing", function()
    local doc = cjson.decode(read(H.assets .. "SimpleSkin/SimpleSkin.gltf"))
    doc.animations[1].channels[2] = { sampler = 0, target = { node = 2, path = "weights" } }
    local a = gltf.load_bytes(cjson.encode(doc))
    assert.are.equal(1, #a.animations[1].channels)
    assert.are.equal(1, #a.animations[1].unsupported)
    assert.truthy(a.warnings[1]:find("'weights'", 1, true))
  end)
end)

describe("glTF skins to skeletons", function()
  local function skel_nodes(entry)
    local out = {}
    for j, n in ipairs(entry.nodes) do out[j] = n - 1 end
    return out
  end

  it("orders joints parent-before-child and maps skin slots to skeleton joints (CesiumMan)", function()
    local a = gltf.load(H.assets .. "CesiumMan/CesiumMan.gltf")
    local entry = a.skeletons[1]
    local skel = entry.skeleton
    local parents = skel:parents()
    for j = 1, skel:joint_count() do
      assert.is_true(parents[j] < j)
      local node = a.nodes[entry.nodes[j]]
      if parents[j] > 0 then assert.are.equal(node.parent, entry.nodes[parents[j]]) end
      assert.are.equal(node.name, skel:name(j))
    end
    local skin = a.skins[1]
    for k, n in ipairs(skin.joints) do
      assert.are.equal(n, entry.nodes[skin.skin:joint(k)])
    end
  end)

  it("keeps non-joint nodes between joints (Animation_Skin_08)", function()
    local a = gltf.load(H.assets .. "asset-generator/Animation_Skin/Animation_Skin_08.gltf")
    assert.are.same({ 1, 2, 3, 4, 5 }, skel_nodes(a.skeletons[1]))
    assert.are.equal(4, #a.skins[1].joints)
    assert.is_nil(a.skeletons[1].root_parent)
  end)

  it("shares one skeleton between two skins over the same joints (Animation_Skin_06)", function()
    local a = gltf.load(H.assets .. "asset-generator/Animation_Skin/Animation_Skin_06.gltf")
    assert.are.equal(1, #a.skeletons)
    assert.are.equal(1, a.skins[1].skeleton)
    assert.are.equal(1, a.skins[2].skeleton)
    assert.are.equal(2, #a.skinned_nodes)
  end)

  it("roots the skeleton under a non-joint parent through the pose root (SimpleSkin)", function()
    local a = gltf.load(H.assets .. "SimpleSkin/SimpleSkin.gltf")
    assert.are.same({ 1, 2 }, skel_nodes(a.skeletons[1]))
    assert.are.equal(1, a.skeletons[1].root_parent) -- node 0, the skinned mesh node
  end)
end)

describe("glTF clips through limber.anim", function()
  -- Records what the importer asks limber.anim.clip for (the real clip
  -- function still builds each clip).
  local function with_clip_spy(fn)
    local anim_mod = require "limber.anim"
    local calls = {}
    local saved = anim_mod.clip
    anim_mod.clip = function(desc, skel)
      local clip = saved(desc, skel)
      calls[#calls + 1] = { desc = desc, skel = skel, clip = clip }
      return clip
    end
    local ok, err = pcall(fn, calls)
    anim_mod.clip = saved
    if not ok then error(err, 0) end
  end

  it("binds joint tracks to each skeleton and keeps other channels as node tracks", function()
    with_clip_spy(function(calls)
      local a = gltf.load(H.assets .. "asset-generator/Animation_Skin/Animation_Skin_08.gltf",
        { tolerance = 0 })
      assert.is_true(a.has_clips)
      local anim = a.animations[1]
      assert.are.equal(2, #calls) -- the node clip and one clip per skeleton
      assert.are.equal(anim.clip, calls[1].clip)
      assert.are.equal(anim.clips[1], calls[2].clip) -- tolerance 0: exact, not packed
      assert.is_false(anim.clips[1]:packed())
      assert.is_nil(calls[1].skel)
      assert.are.equal(a.skeletons[1].skeleton, calls[2].skel)
      -- each channel is in exactly one clip: on a joint, the skeleton's clip
      local nn, nj = 0, 0
      for _, ch in ipairs(anim.channels) do
        local j = a.skeletons[1].joint_of[ch.node]
        local list = j and calls[2].desc.tracks or calls[1].desc.tracks
        local k = j and nj + 1 or nn + 1
        if j then nj = k else nn = k end
        local tr = list[k]
        assert.are.same({ ch.path, ch.interpolation }, { tr.path, tr.interpolation })
        assert.are.equal(j, tr.joint)
        assert.are.equal(not j and ch.node or nil, tr.node)
        assert.are.equal(ch.times, tr.times)
        assert.are.equal(ch.values, tr.values)
      end
      assert.are.equal(nn, #calls[1].desc.tracks)
      assert.are.equal(nj, #calls[2].desc.tracks)
      -- gltf_dump samples every channel through the clips: at the first key
      -- time, the first key's value
      local D = dofile(H.root .. "examples/gltf_dump.lua")
      local ch = anim.channels[1]
      local t0 = ch.times[1]
      if type(t0) == "table" then t0 = t0[1] end
      local out = D.dump(a, { animation = 1, times = { t0 }, nodes = true })
      local first = ch.values[ch.interpolation == "CUBICSPLINE" and 2 or 1]
      assert.near(first, out.frames[1].nodes[ch.node][ch.path], 1e-6)
    end)
  end)

  it("packs the skeleton clips by default (tolerance 0: exact)", function()
    local a = gltf.load(H.assets .. "CesiumMan/CesiumMan.gltf")
    local b = gltf.load(H.assets .. "CesiumMan/CesiumMan.gltf", { tolerance = 0 })
    local pc, ec = a.animations[1].clips[1], b.animations[1].clips[1]
    assert.is_true(pc:packed())
    assert.is_false(ec:packed())
    assert.is_true(pc:bytes() < ec:bytes() / 4)
    local e = pc:error()
    assert.is_true(e.max_error_distance > 0)
    local sk = a.skeletons[1].skeleton
    assert.is_true(e.max_error_distance <= require("limber.anim").PACK_TOLERANCE
      * require("limber.anim").rig_size(sk) * (1 + 1e-6))
    -- a looser tolerance: fewer bytes, a larger (still bounded) error
    local c = gltf.load(H.assets .. "CesiumMan/CesiumMan.gltf", { tolerance = 0.005 })
    local lc = c.animations[1].clips[1]
    assert.is_true(lc:bytes() < pc:bytes())
    assert.is_true(lc:error().max_error_distance <= 0.005)
    for _, bad in ipairs({ -1, 0 / 0, math.huge }) do
      assert.error_matches(function()
        gltf.load(H.assets .. "CesiumMan/CesiumMan.gltf", { tolerance = bad })
      end, "option 'tolerance' must be a finite number >= 0", 1, true)
    end
    -- source_keys reaches limber.anim.pack: Fox's Survey packed from the
    -- exact clip with source keys, byte for byte, and not the default's
    local anim = require "limber.anim"
    local fx = gltf.load(H.assets .. "Fox/Fox.glb", { tolerance = 0 })
    local fs = gltf.load(H.assets .. "Fox/Fox.glb", { source_keys = true })
    local fd = gltf.load(H.assets .. "Fox/Fox.glb")
    local fsk = fx.skeletons[1].skeleton
    local want = anim.pack(fx.animations[1].clips[1], fsk, { source_keys = true })
    local got = fs.animations[1].clips[1]
    assert.is_true(got:packed())
    assert.equal(want:bytes(), got:bytes())
    assert.equal(limber.snapshot.save(want), limber.snapshot.save(got))
    assert.are_not.equal(fd.animations[1].clips[1]:bytes(), got:bytes())
    assert.error_matches(function()
      gltf.load(H.assets .. "Fox/Fox.glb", { source_keys = 1 })
    end, "option 'source_keys' must be a boolean", 1, true)
  end)

  it("loads without clips when opts.clips is false", function()
    local a = gltf.load(H.assets .. "SimpleSkin/SimpleSkin.gltf", { clips = false })
    assert.is_false(a.has_clips)
    assert.is_nil(a.animations[1].clip)
    assert.are.equal(1, #a.animations[1].channels)
    assert.is_true(gltf.load(H.assets .. "SimpleSkin/SimpleSkin.gltf").has_clips)
  end)
end)

describe("examples/gltf_dump.lua", function()
  -- runs under this run's interpreter and module paths
  local function run(args)
    local _, out, code = H.run(H.example("gltf_dump.lua", args))
    return out, code
  end

  it("prints the reference schema for --rest (RiggedSimple)", function()
    local out, code = run(H.assets .. "RiggedSimple/RiggedSimple.gltf --rest --skinned --nodes")
    assert.are.equal(0, code, out)
    local got = cjson.decode(out)
    local f = assert(io.open(H.reference .. "RiggedSimple/rest.json"))
    local ref = cjson.decode(f:read("*a"))
    f:close()
    assert.are.equal("rest", got.mode)
    assert.are.equal(ref.skins[1].skeleton, got.skins[1].skeleton)
    local rj, gj = ref.frames[1].skins[1].joints, got.frames[1].skins[1].joints
    for k = 1, #rj do
      assert.are.equal(rj[k].node, gj[k].node)
      assert.near(rj[k].world, gj[k].world, 1e-5)
      assert.near(rj[k].skinMatrix, gj[k].skinMatrix, 1e-5)
    end
    local rp = ref.frames[1].skinnedNodes[1].primitives[1]
    local gp = got.frames[1].skinnedNodes[1].primitives[1]
    assert.near(rp.positionsWorld, gp.positionsWorld, 1e-5)
    assert.near(rp.normalsWorld, gp.normalsWorld, 1e-3)
    assert.are.equal(#ref.frames[1].nodes, #got.frames[1].nodes)
  end)

  it("refuses an --anim that is not a non-negative integer, with its usage", function()
    for _, bad in ipairs({ "1.5", "x", "-1", "inf" }) do
      local out, code = run(H.assets .. "RiggedSimple/RiggedSimple.gltf --anim " .. bad)
      assert.are.equal(2, code, out)
      assert.truthy(out:find("gltf_dump: --anim needs an animation index (0-based)\nusage: ", 1, true), out)
    end
  end)

  it("describes a model with --info", function()
    local out, code = run(H.assets .. "Fox/Fox.glb --info")
    assert.are.equal(0, code, out)
    assert.truthy(out:find("Fox: 26 nodes, 1 scenes, 1 skeletons", 1, true))
    assert.truthy(out:find('skin 0 "": 24 joints', 1, true))
    assert.truthy(out:find('mesh 0 "fox1": 1 primitives, 1728 vertices', 1, true))
    assert.truthy(out:find('animation 1 "Walk": 0.7083 s, 21 channels', 1, true))
  end)

  it("fails clearly on bad arguments and bad files", function()
    local out, code = run("")
    assert.are.equal(2, code)
    assert.truthy(out:find("no model given", 1, true))
    out, code = run(H.assets .. "SimpleSkin/SimpleSkin.gltf --anim 7")
    assert.are.equal(1, code)
    assert.truthy(out:find("animation 7 does not exist", 1, true))
    out, code = run(H.root .. "README.md")
    assert.are.equal(1, code)
    assert.truthy(out:find("limber.gltf: JSON: syntax error", 1, true))
  end)
end)

describe("glTF skeleton rest poses", function()
  -- pose model matrices at rest must equal the node world matrices
  -- computed in plain Lua, for every bundled model
  local files = {
    "CesiumMan/CesiumMan.gltf", "Fox/Fox.glb", "RiggedFigure/RiggedFigure.glb",
    "RiggedSimple/RiggedSimple.gltf", "SimpleSkin/SimpleSkin.gltf",
  }
  for k = 0, 9 do files[#files + 1] = ("asset-generator/Animation_Skin/Animation_Skin_%02d.gltf"):format(k) end

  local function check(a, tol)
    for _, entry in ipairs(a.skeletons) do
      local pose = limber.pose(entry.skeleton, 1)
      pose:set_root(1, entry.root_parent and a.nodes[entry.root_parent].world or nil)
      pose:local_to_model()
      for j, n in ipairs(entry.nodes) do
        assert.near(a.nodes[n].world, pose:model(1, j), tol)
      end
    end
  end

  it("match the node world matrices", function()
    for _, f in ipairs(files) do
      local a = gltf.load(H.assets .. f)
      check(a, f:find("Fox") and 2e-4 or 2e-5)
    end
  end)

  it("handle skin joints in separate node trees (no common ancestor)", function()
    local doc = cjson.decode(read(H.assets .. "SimpleSkin/SimpleSkin.gltf"))
    doc.nodes[2].children = nil
    doc.nodes[3].translation = { 0.5, 0.25, 0 }
    doc.scenes[1].nodes = { 0, 2 }
    doc.nodes[1].translation = { 1, 2, 3 }
    local a = gltf.load_bytes(cjson.encode(doc))
    local entry = a.skeletons[1]
    local nodes = {}
    for j, n in ipairs(entry.nodes) do nodes[j] = n - 1 end
    assert.are.same({ 0, 1, 2 }, nodes) -- node 0 carries node 1 to its world place
    assert.is_nil(entry.root_parent)
    assert.are.same({ 0, 1, 0 }, entry.skeleton:parents())
    check(a, 1e-6)
  end)
end)

describe("glTF poses and palettes for an asset", function()
  it("set each instance's root and give skin matrices equal to world(joint) * IBM", function()
    local a = gltf.load(H.assets .. "SimpleSkin/SimpleSkin.gltf")
    local pose = gltf.pose(a, 1, 3)
    local pal = gltf.palette(a, pose, { skin = 1, layout = "mat4" })
    pose:local_to_model()
    pal:update()
    for i = 1, 3 do
      for k, n in ipairs(a.skins[1].joints) do
        local expect = H.mul(a.nodes[n].world, a.skins[1].inverse_binds[k])
        assert.near(expect, pal:get(i, k), 1e-6)
      end
    end
    assert.error_matches(function() gltf.pose(a, 2) end,
      "limber.gltf.pose: skeleton 2 does not exist (the asset has 1)", 1, true)
    assert.error_matches(function() gltf.palette(a, pose, { skin = 3 }) end,
      "limber.gltf.palette: skin 3 does not exist (the asset has 1)", 1, true)
  end)
end)

describe("glTF deep hierarchies", function()
  it("build a skeleton from a 3000-node chain with joints listed in random order", function()
    local n = 3000
    local nodes = {}
    for i = 1, n do nodes[i] = { children = i < n and { i } or nil, translation = { 0, 0.001, 0 }, name = "n" .. i } end
    local joints = {}
    for i = 1, n - 1 do joints[i] = i end -- nodes 1 .. n-1; node 0 is a non-joint parent
    H.shuffle(joints)
    local doc = { asset = { version = "2.0" }, nodes = nodes, skins = { { joints = joints } },
                  scenes = { { nodes = { 0 } } } }
    local a = gltf.load_bytes(cjson.encode(doc))
    local entry = a.skeletons[1]
    assert.are.equal(n - 1, entry.skeleton:joint_count())
    assert.are.equal(1, entry.root_parent)
    for k, node in ipairs(joints) do
      assert.are.equal(node + 1, entry.nodes[a.skins[1].skin:joint(k)])
    end
    local pose = limber.pose(entry.skeleton, 1)
    pose:set_root(1, a.nodes[1].world)
    pose:local_to_model()
    local last = entry.joint_of[n]
    assert.near(0.001 * n, pose:model(1, last)[14], 1e-4)
  end)
end)
