-- Animation channels beyond joint transforms: glTF `weights` (morph target)
-- channels become float tracks of the node clip (one value per target) and
-- count toward the animation's duration (a loop wraps at the longest
-- channel); a weights channel limber cannot animate (a node without morph
-- targets) is skipped with a warning but still counts; an optional
-- KHR_animation_pointer channel is skipped with a warning, a required one
-- refuses the file by name.
local H = require "spec.helper"
local gltf = require "limber.gltf"
local cjson = require "cjson"

-- floats -> little-endian bytes
local function f32(t)
  return H.pack("<" .. ("f"):rep(#t), H.tunpack(t))
end

-- A node 0 (translated by a 2 s channel unless `no_translation`) with a mesh
-- (one triangle, one morph target) animated by a 4 s weights channel; extra
-- channels and document fields from `more`.
local function doc(opts)
  opts = opts or {}
  local parts = {
    f32 { 0, 2 }, -- 0: times, 2 s
    f32 { 0, 0, 0, 4, 0, 0 }, -- 1: translations
    f32 { 0, 4 }, -- 2: times, 4 s
    f32 { 0, 1 }, -- 3: weights
    f32 { 0, 0, 0, 1, 0, 0, 0, 1, 0 }, -- 4: positions
    f32 { 0, 0, 1, 0, 0, 1, 0, 0, 1 }, -- 5: morph target
  }
  local bin, views, off = table.concat(parts), {}, 0
  for k, p in ipairs(parts) do
    views[k] = { buffer = 0, byteOffset = off, byteLength = #p }
    off = off + #p
  end
  local accessors = {
    { bufferView = 0, componentType = 5126, count = 2, type = "SCALAR", min = { 0 }, max = { 2 } },
    { bufferView = 1, componentType = 5126, count = 2, type = "VEC3" },
    { bufferView = 2, componentType = 5126, count = 2, type = "SCALAR", min = { 0 }, max = { 4 } },
    { bufferView = 3, componentType = 5126, count = 2, type = "SCALAR" },
    { bufferView = 4, componentType = 5126, count = 3, type = "VEC3", min = { 0, 0, 0 }, max = { 1, 1, 0 } },
    { bufferView = 5, componentType = 5126, count = 3, type = "VEC3" },
  }
  local channels, samplers = {}, { { input = 0, output = 1 }, { input = 2, output = 3 } }
  if not opts.no_translation then
    channels[#channels + 1] = { sampler = 0, target = { node = 0, path = "translation" } }
  end
  channels[#channels + 1] = { sampler = 1, target = { node = 0, path = "weights" } }
  for _, c in ipairs(opts.channels or {}) do channels[#channels + 1] = c end
  local d = {
    asset = { version = "2.0" },
    buffers = { { byteLength = #bin, uri = "data:application/octet-stream;base64," .. H.base64(bin) } },
    bufferViews = views, accessors = accessors,
    meshes = { { primitives = { { attributes = { POSITION = 4 }, targets = { { POSITION = 5 } } } },
                 weights = { 0 } } },
    nodes = { { mesh = 0 } },
    scenes = { { nodes = { 0 } } },
    animations = { { channels = channels, samplers = samplers } },
  }
  for k, v in pairs(opts.more or {}) do d[k] = v end
  return cjson.encode(d)
end

describe("glTF weights and unsupported channels", function()
  it("sample weights channels as float tracks and count them toward the duration", function()
    local asset = gltf.load_bytes(doc())
    local an = asset.animations[1]
    assert.equal(4, an.duration)
    assert.equal(4, an.clip:duration())
    assert.equal(0, #asset.warnings)
    assert.same({ 0 }, asset.nodes[1].weights) -- the mesh's default weights
    local tracks = an.clip:node_tracks()
    assert.equal(2, #tracks)
    assert.equal("float", tracks[2].path)
    assert.near(0.75, an.clip:sample_node(2, 3, false), 1e-6)
    -- the 2 s translation holds its last key until 4 s, and the loop wraps at 4 s
    local x = an.clip:sample_node(1, 3, true)
    assert.near(4, x, 1e-6)
    x = an.clip:sample_node(1, 4.5, true)
    assert.near(1, x, 1e-6) -- 0.5 s into the loop: a quarter of the way to 4
    assert.near(0.125, an.clip:sample_node(2, 4.5, true), 1e-6)
  end)

  it("play an animation of only weights channels: gltf_dump gives the node's weights", function()
    local asset = gltf.load_bytes(doc { no_translation = true })
    local an = asset.animations[1]
    assert.equal(4, an.duration)
    assert.equal(4, an.clip:duration())
    assert.equal(1, #an.clip:node_tracks())
    local D = dofile(H.root .. "examples/gltf_dump.lua")
    local out = D.dump(asset, { animation = 1, times = { 0, 3, 5 }, loop = "repeat", nodes = true,
                                skinned = true })
    assert.equal(3, #out.frames)
    assert.equal(1, out.frames[3].clipTime)
    assert.near(0.75, out.frames[2].nodes[1].weights[1], 1e-6)
    assert.near(0.25, out.frames[3].nodes[1].weights[1], 1e-6)
    -- the unskinned morphed triangle: base + 0.75 x (0, 0, 1) per vertex
    local pos = out.frames[2].morphNodes[1].primitives[1].positionsLocal
    assert.near({ 0, 0, 0.75, 1, 0, 0.75, 0, 1, 0.75 }, pos, 1e-6)
  end)

  it("skip a weights channel on a node without morph targets, keeping its duration", function()
    local d = cjson.decode(doc { no_translation = true })
    d.meshes[1].primitives[1].targets = nil
    d.meshes[1].weights = nil
    local asset = gltf.load_bytes(cjson.encode(d))
    assert.equal(4, asset.animations[1].duration)
    assert.truthy(table.concat(asset.warnings, "\n"):find("node without morph targets", 1, true))
    -- and refuse weights that do not match the targets
    d = cjson.decode(doc())
    d.meshes[1].weights = { 0, 1 }
    local ok, err = pcall(gltf.load_bytes, cjson.encode(d))
    assert.is_false(ok)
    assert.truthy(err:find("weights has 2 numbers for 1 morph targets", 1, true), err)
    d.meshes[1].weights = { 0 }
    d.nodes[1].weights = { 1, 2, 3 }
    ok, err = pcall(gltf.load_bytes, cjson.encode(d))
    assert.is_false(ok)
    assert.truthy(err:find("nodes[0]: weights has 3 numbers for 1 morph targets", 1, true), err)
    d.nodes[1].weights = { 0.5 } -- a node's weights override its mesh's
    assert.same({ 0.5 }, gltf.load_bytes(cjson.encode(d)).nodes[1].weights)
  end)

  it("skip an optional KHR_animation_pointer channel with a warning", function()
    local pointer = { sampler = 1, target = { path = "pointer",
      extensions = { KHR_animation_pointer = { pointer = "/nodes/0/weights" } } } }
    local asset = gltf.load_bytes(doc { channels = { pointer },
      more = { extensionsUsed = { "KHR_animation_pointer" } } })
    assert.equal(2, #asset.animations[1].channels)
    assert.truthy(table.concat(asset.warnings, "\n"):find("KHR_animation_pointer", 1, true))
    local ok, err = pcall(gltf.load_bytes, doc { channels = { pointer },
      more = { extensionsUsed = { "KHR_animation_pointer" }, extensionsRequired = { "KHR_animation_pointer" } } })
    assert.is_false(ok)
    assert.truthy(err:find("KHR_animation_pointer", 1, true), err)
  end)
end)

describe("a clip's duration and damaged assets", function()
  local anim = require "limber.anim"
  local core = require "limber.core"
  local track = { { node = 1, path = "translation", times = { 0, 1 }, values = { 0, 0, 0, 1, 0, 0 } } }

  it("refuse a duration that is not a finite number >= 0", function()
    for _, d in ipairs { -1, 0 / 0, math.huge, 1e39, "4" } do
      assert.has_error(function() anim.clip({ tracks = track, duration = d }) end,
        nil, tostring(d))
      if type(d) == "number" then -- the core takes numeric strings, as Lua does
        local ok, err = pcall(core.clip, track, nil, true, d)
        assert.is_false(ok, tostring(d))
        assert.truthy(err:find("bad argument #4", 1, true), err)
      end
    end
    assert.equal(1, anim.clip({ tracks = track, duration = 0.5 }):duration()) -- never shorter than the keys
    assert.equal(3, anim.clip({ tracks = track, duration = 3 }):duration())
  end)

  it("name the function for an asset table its caller damaged", function()
    local asset = gltf.load_bytes(doc())
    local limber = require "limber"
    local skel = limber.skeleton { { name = "root" } }
    asset.skeletons[1] = { skeleton = skel, root_parent = 99 } -- no node 99
    local ok, err = pcall(function() local p = gltf.pose(asset, 1); return p end)
    assert.is_false(ok)
    assert.truthy(err:find("bad argument #1 to 'limber.gltf.pose' (malformed glTF asset:", 1, true), err)
    assert.truthy(err:find("gltf_channels_spec%.lua:%d+:"), err) -- the caller's line
    asset.skins = nil
    ok, err = pcall(gltf.palette, asset, limber.pose(skel))
    assert.is_false(ok)
    assert.truthy(err:find("bad argument #1 to 'limber.gltf.palette' (glTF asset expected", 1, true), err)
  end)
end)
