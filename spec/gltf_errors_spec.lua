-- Bad input: every class of malformed glTF gets a Lua error naming the
-- problem and where, built by corrupting real files.
local H = require "spec.helper"
local cjson = require "cjson"
local gltf = require "limber.gltf"

local read = H.read

local SIMPLE = H.assets .. "SimpleSkin/SimpleSkin.gltf"
local SKIN00_DIR = H.assets .. "asset-generator/Animation_Skin/"
local FOX = H.assets .. "Fox/Fox.glb"

-- A fresh decoded SimpleSkin document (self-contained: data: buffers).
local function simple() return cjson.decode(read(SIMPLE)) end

local function load_doc(doc, opts)
  return gltf.load_bytes(cjson.encode(doc), opts)
end

local function fails(text, fn)
  assert.error_matches(fn, text, 1, true)
  local _, err = pcall(fn)
  assert.are.equal("limber.gltf: ", err:sub(1, 13)) -- no source position: the location is in the file
end

-- Appends a data: buffer with `bytes`, a bufferView over it, and returns
-- the bufferView index (0-based).
local function add_view(doc, bytes)
  doc.buffers[#doc.buffers + 1] = {
    byteLength = #bytes,
    uri = "data:application/octet-stream;base64," .. (require "mime_b64")(bytes),
  }
  doc.bufferViews[#doc.bufferViews + 1] = { buffer = #doc.buffers - 1, byteLength = #bytes }
  return #doc.bufferViews - 1
end

-- Minimal base64 encoder for the specs (the loader's decoder is in C).
package.preload["mime_b64"] = function()
  local abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
  return function(s)
    local out = {}
    for i = 1, #s, 3 do
      local a, b, c = s:byte(i, i + 2)
      local n = a * 65536 + (b or 0) * 256 + (c or 0)
      local q = {}
      for k = 3, 0, -1 do
        local d = math.floor(n / 2 ^ (6 * k)) % 64 + 1
        q[#q + 1] = abc:sub(d, d)
      end
      if not b then q[3], q[4] = "=", "=" elseif not c then q[4] = "=" end
      out[#out + 1] = table.concat(q)
    end
    return table.concat(out)
  end
end

local function add_accessor(doc, acc)
  doc.accessors[#doc.accessors + 1] = acc
  return #doc.accessors - 1
end

describe("glTF bad input", function()
  it("loads the unmodified files (sanity check for the corruptions below)", function()
    assert.is_table(load_doc(simple()))
    assert.is_table(gltf.load_bytes(read(FOX)))
    assert.is_table(gltf.load_bytes(read(SKIN00_DIR .. "Animation_Skin_00.gltf"), { base_dir = SKIN00_DIR }))
  end)

  describe("GLB container", function()
    local fox = read(FOX)
    it("truncated file", function()
      fails("limber.gltf: GLB: header length 162852 but the file has 1000 bytes", function()
        gltf.load_bytes(fox:sub(1, 1000))
      end)
      fails("shorter than the 12-byte header", function() gltf.load_bytes(fox:sub(1, 8)) end)
    end)
    it("chunk longer than the file", function()
      local bad = fox:sub(1, 12) .. H.pack("<I4", 0x7fffffff) .. fox:sub(17)
      fails("GLB: chunk 0 length 2147483647 runs past the end of the file", function() gltf.load_bytes(bad) end)
    end)
    it("truncated chunk header and length mismatch after editing", function()
      local cut = fox:sub(1, 8) .. H.pack("<I4", 16) .. fox:sub(13, 16)
      fails("GLB: chunk 0 header truncated", function() gltf.load_bytes(cut) end)
    end)
    it("wrong magic", function()
      fails("limber.gltf: GLB: wrong magic", function() gltf.load_bytes("glTX" .. fox:sub(5)) end)
      fails("limber.gltf: GLB: wrong magic", function() gltf.load_bytes("\0\0\0\0" .. fox:sub(5)) end)
    end)
    it("wrong version", function()
      fails("limber.gltf: GLB: unsupported version 3", function()
        gltf.load_bytes(fox:sub(1, 4) .. H.pack("<I4", 3) .. fox:sub(9))
      end)
    end)
    it("first chunk not JSON", function()
      fails("first chunk is not JSON", function()
        gltf.load_bytes(fox:sub(1, 16) .. "XXXX" .. fox:sub(21))
      end)
    end)
  end)

  it("JSON syntax errors", function()
    local text = read(SIMPLE)
    fails("limber.gltf: JSON: syntax error", function() gltf.load_bytes(text:sub(1, -3)) end)
    fails("limber.gltf: JSON: syntax error", function() gltf.load_bytes((text:gsub("%[", "(", 1))) end)
    fails("limber.gltf: JSON: syntax error", function() gltf.load_bytes('{"asset": {"version": NaN}}') end)
    fails("limber.gltf: JSON: top level must be an object", function() gltf.load_bytes("[1, 2]") end)
  end)

  it("asset version", function()
    local doc = simple()
    doc.asset.version = "1.0"
    fails("limber.gltf: asset: version '1.0' is not glTF 2.x", function() load_doc(doc) end)
  end)

  describe("indices out of range", function()
    local cases = {
      { "accessors[0]: bufferView 9 does not exist", function(d) d.accessors[1].bufferView = 9 end },
      { "bufferViews[1]: buffer 7 does not exist", function(d) d.bufferViews[2].buffer = 7 end },
      { "nodes[0].children[0]: node 40 does not exist", function(d) d.nodes[1].children = { 40 } end },
      { "nodes[0]: mesh 3 does not exist", function(d) d.nodes[1].mesh = 3 end },
      { "nodes[0]: skin 1 does not exist", function(d) d.nodes[1].skin = 1 end },
      { "meshes[0].primitives[0].attributes.POSITION: accessor 20 does not exist",
        function(d) d.meshes[1].primitives[1].attributes.POSITION = 20 end },
      { "meshes[0].primitives[0]: indices accessor 20 does not exist",
        function(d) d.meshes[1].primitives[1].indices = 20 end },
      { "skins[0]: inverseBindMatrices accessor 30 does not exist",
        function(d) d.skins[1].inverseBindMatrices = 30 end },
      { "skins[0]: skeleton node 9 does not exist", function(d) d.skins[1].skeleton = 9 end },
      { "animations[0].channels[0]: sampler 4 does not exist",
        function(d) d.animations[1].channels[1].sampler = 4 end },
      { "animations[0].channels[0]: target node 3 does not exist",
        function(d) d.animations[1].channels[1].target.node = 3 end },
      { "animations[0].samplers[0]: input accessor 99 does not exist",
        function(d) d.animations[1].samplers[1].input = 99 end },
      { "scenes[0].nodes[0]: node 5 does not exist", function(d) d.scenes[1].nodes = { 5 } end },
      { "scene: scene 2 does not exist", function(d) d.scene = 2 end },
      { "accessors[0]: bufferView must be an index (got -1)", function(d) d.accessors[1].bufferView = -1 end },
    }
    for _, c in ipairs(cases) do
      it(c[1], function()
        local doc = simple()
        c[2](doc)
        fails("limber.gltf: " .. c[1], function() load_doc(doc) end)
      end)
    end

    it("vertex index past the vertex count", function()
      local doc = simple()
      local v = add_view(doc, H.pack("<I2I2I2", 0, 1, 99))
      doc.meshes[1].primitives[1].indices = add_accessor(doc,
        { bufferView = v, componentType = 5123, count = 3, type = "SCALAR" })
      fails("limber.gltf: meshes[0].primitives[0]: index 99 out of range (vertex count 10)",
        function() load_doc(doc) end)
    end)

    it("JOINTS_0 naming a joint the skin does not have", function()
      local doc = simple()
      local v = add_view(doc, string.rep(H.pack("<I2I2I2I2", 0, 5, 0, 0), 10))
      doc.meshes[1].primitives[1].attributes.JOINTS_0 = add_accessor(doc,
        { bufferView = v, componentType = 5123, count = 10, type = "VEC4" })
      fails("limber.gltf: nodes[0]: meshes[0].primitives[0] names joint 5 but skin 0 has 2 joints",
        function() load_doc(doc) end)
    end)
  end)

  it("accessor ranges past the bufferView and bufferViews past the buffer", function()
    local doc = simple()
    doc.accessors[2].count = 11
    fails("limber.gltf: accessors[1]: 11 elements of 12 bytes (stride 12) from byteOffset 0 run past the end "
      .. "of the bufferView (120 bytes)", function() load_doc(doc) end)
    doc = simple()
    doc.accessors[2].byteOffset = 124
    fails("limber.gltf: accessors[1]: byteOffset 124 is past the end of its bufferView (120 bytes)",
      function() load_doc(doc) end)
    doc = simple()
    doc.bufferViews[2].byteLength = 200
    fails("limber.gltf: bufferViews[1]: range [48, 248) is past the end of buffer 0 (168 bytes)",
      function() load_doc(doc) end)
    doc = simple()
    doc.buffers[1].byteLength = 500
    fails("limber.gltf: buffers[0]: byteLength is 500 but only 168 bytes are available",
      function() load_doc(doc) end)
  end)

  it("counts that would overflow, and the size limits", function()
    local doc = simple()
    doc.accessors[2].count = 2 ^ 40
    -- 2^40 VEC3 floats plus the fixed cost of each accessor and bufferView (gltf.COSTS)
    fails("limber.gltf: accessors[1]: decoding needs 131941395", function() load_doc(doc) end)
    fails("limber.gltf: accessors[1]: count 1099511627776 exceeds the limit of 67108864 elements",
      function() load_doc(doc, { max_bytes = 2 ^ 50 }) end)
    doc = simple()
    doc.accessors[2].count = 2 ^ 62
    fails("limber.gltf: accessors[1]: count must be a non-negative integer", function() load_doc(doc) end)
    -- a tiny file asking for 50 million zero vertices: refused before allocating
    doc = simple()
    doc.accessors[2].bufferView = nil
    doc.accessors[2].count = 50000000
    fails("limber.gltf: accessors[1]: decoding needs", function() load_doc(doc) end)
    fails("over the limit of 1000 (opts.max_bytes)", function() load_doc(simple(), { max_bytes = 1000 }) end)
  end)

  it("strides smaller than the element", function()
    local doc = simple()
    doc.bufferViews[3].byteStride = 4
    fails("limber.gltf: accessors[2]: byteStride 4 is smaller than the element (8 bytes)",
      function() load_doc(doc) end)
    doc = simple()
    doc.bufferViews[3].byteStride = 6
    fails("limber.gltf: bufferViews[2]: byteStride 6 must be a multiple of 4 in [4, 252]",
      function() load_doc(doc) end)
  end)

  it("a node that is its own ancestor", function()
    local doc = simple()
    doc.nodes[1].children = nil -- cjson writes an empty table as {}, an object
    doc.nodes[3].children = { 1 }
    fails("limber.gltf: nodes[1]: node is its own ancestor", function() load_doc(doc) end)
    doc = simple()
    doc.nodes[2].children = { 1 }
    fails("limber.gltf: nodes[1]: node is its own ancestor (listed in its own children)",
      function() load_doc(doc) end)
    doc = simple()
    doc.nodes[3].children = { 1 }
    fails("limber.gltf: nodes[1]: node is a child of both node 0 and node 2", function() load_doc(doc) end)
  end)

  it("a skin joint that is not a node, or listed twice", function()
    local doc = simple()
    doc.skins[1].joints = { 1, 7 }
    fails("limber.gltf: skins[0].joints[1]: node 7 does not exist", function() load_doc(doc) end)
    doc = simple()
    doc.skins[1].joints = { 1, 1 }
    fails("limber.gltf: skins[0].joints[1]: node 1 is listed twice", function() load_doc(doc) end)
  end)

  it("animation samplers whose input and output counts disagree", function()
    local doc = simple()
    doc.accessors[7].count = 11
    fails("limber.gltf: animations[0].samplers[0]: input has 12 keys but output has 11 values (LINEAR needs 12)",
      function() load_doc(doc) end)
    doc = simple()
    doc.animations[1].samplers[1].interpolation = "CUBICSPLINE"
    fails("(CUBICSPLINE needs 36)", function() load_doc(doc) end)
    doc = simple()
    doc.animations[1].samplers[1].interpolation = "SMOOTH"
    fails("interpolation 'SMOOTH' is not LINEAR, STEP or CUBICSPLINE", function() load_doc(doc) end)
  end)

  it("key times not increasing (sparse substitution into the real times)", function()
    local doc = simple()
    local vi = add_view(doc, H.pack("<I2", 5))
    local vv = add_view(doc, H.pack("<f", 0.25))
    doc.accessors[6].sparse = { count = 1, indices = { bufferView = vi, componentType = 5123 },
                                values = { bufferView = vv } }
    fails("limber.gltf: animations[0].samplers[0]: key times not increasing at key 5", function() load_doc(doc) end)
  end)

  it("NaN and infinite values", function()
    local doc = simple()
    local vi = add_view(doc, H.pack("<I2", 3))
    local vv = add_view(doc, H.pack("<ffff", 0, 0 / 0, 0, 1))
    doc.accessors[7].sparse = { count = 1, indices = { bufferView = vi, componentType = 5123 },
                                values = { bufferView = vv } }
    fails("limber.gltf: accessors[6].sparse.values: element 0 is NaN or infinite", function() load_doc(doc) end)
    doc = simple()
    local v = add_view(doc, H.pack("<fff", 1, math.huge, 0) .. string.rep("\0", 108))
    doc.meshes[1].primitives[1].attributes.POSITION = add_accessor(doc,
      { bufferView = v, componentType = 5126, count = 10, type = "VEC3" })
    fails("limber.gltf: accessors[7]: element 0 is NaN or infinite", function() load_doc(doc) end)
    local text = read(SIMPLE):gsub('"translation"%s*:%s*%[%s*0%.0', '"translation" : [ 1e999', 1)
    assert.truthy(text:find("1e999", 1, true))
    fails("limber.gltf: nodes[1]: translation[0] is not a finite number", function() gltf.load_bytes(text) end)
  end)

  it("unsupported required extensions, listed by name", function()
    local doc = simple()
    doc.extensionsRequired = { "KHR_draco_mesh_compression", "KHR_mesh_quantization", "EXT_meshopt_compression" }
    fails("limber.gltf: extensionsRequired: unsupported extensions KHR_draco_mesh_compression, "
      .. "EXT_meshopt_compression", function() load_doc(doc) end)
  end)

  describe("external URIs", function()
    local text = read(SKIN00_DIR .. "Animation_Skin_00.gltf")
    local function with_uri(uri, opts)
      local doc = cjson.decode(text)
      doc.buffers[1].uri = uri
      return function() load_doc(doc, opts or { base_dir = SKIN00_DIR }) end
    end
    it("refuses paths outside the model's directory and URL schemes", function()
      fails("buffers[0]: uri '../Animation_Skin/Animation_Skin_00.bin': '..' segments are not allowed",
        with_uri("../Animation_Skin/Animation_Skin_00.bin"))
      fails("uri 'sub/%2e%2e/x.bin': '..' segments are not allowed", with_uri("sub/%2e%2e/x.bin"))
      fails("uri '/etc/passwd': absolute paths are not allowed", with_uri("/etc/passwd"))
      fails("uri 'http://example.com/a.bin': only relative paths and data: URIs are allowed",
        with_uri("http://example.com/a.bin"))
      fails("uri 'file:///etc/passwd': only relative paths", with_uri("file:///etc/passwd"))
      fails("uri 'C:\\x.bin': only relative paths", with_uri("C:\\x.bin"))
      fails("no base directory is known", with_uri("Animation_Skin_00.bin", {}))
      fails("cannot open", with_uri("missing.bin"))
      local doc = cjson.decode(text)
      doc.buffers[1].uri = "Animation_Skin"
      fails("buffers[0]: '" .. H.assets .. "asset-generator/Animation_Skin' is not a regular file", function()
        load_doc(doc, { base_dir = H.assets .. "asset-generator/" })
      end)
    end)
    it("refuses malformed data: URIs", function()
      fails("buffers[0]: data: URI must be base64 encoded", with_uri("data:application/octet-stream,abc"))
      fails("buffers[0]: base64: invalid character at position 2", with_uri("data:;base64,AA*A"))
    end)
  end)
end)

describe("glTF random corruption", function()
  -- Random byte edits of real files: every load either succeeds or raises a
  -- "limber.gltf:" error; never a crash (the sanitizer run checks memory).
  -- One load in 8 packs the clips of what loaded (damaged key values
  -- included); the others keep them exact, as packing would take most of
  -- the time (a Fox load packs three clips).
  H.seed("gltf corruption")
  local sources = {
    { read(FOX), {}, { tolerance = 0 } },
    { read(SIMPLE), {}, { tolerance = 0 } },
    { read(SKIN00_DIR .. "Animation_Skin_08.gltf"), { base_dir = SKIN00_DIR },
      { base_dir = SKIN00_DIR, tolerance = 0 } },
  }
  it("raises limber.gltf errors or loads, for 600 corrupted files", function()
    local loaded, failed = 0, 0
    for n = 1, 600 do
      local src = sources[n % #sources + 1]
      local bytes = src[1]
      local edits = math.random(1, 4)
      for _ = 1, edits do
        local at = math.random(1, #bytes)
        local r = math.random()
        if r < 0.6 then
          bytes = bytes:sub(1, at - 1) .. string.char(math.random(0, 255)) .. bytes:sub(at + 1)
        elseif r < 0.8 then
          bytes = bytes:sub(1, at - 1) .. bytes:sub(at + math.random(1, 8))
        else
          local digit = tostring(math.random(0, 9))
          bytes = bytes:sub(1, at - 1) .. digit .. bytes:sub(at)
        end
      end
      local ok, err = pcall(gltf.load_bytes, bytes, n % 8 == 0 and src[2] or src[3])
      if ok then
        loaded = loaded + 1
      else
        failed = failed + 1
        assert.is_string(err)
        assert.truthy(err:find("^limber%.gltf: "), err) -- skeleton/skin errors are wrapped too
      end
    end
    assert.is_true(failed > 0)
    assert.are.equal(600, loaded + failed)
  end)
end)
