--- fuzz/make_seeds.lua: writes a libFuzzer seed corpus for every harness
-- in fuzz/ from the bundled models (examples/assets): whole GLB files (and
-- the .gltf JSON wrapped as GLB), the base64 text of data: URIs, one
-- accessor description plus its bufferView bytes per accessor, sparse
-- substitutions over those, JOINTS_0/WEIGHTS_0 of every skinned primitive,
-- and the joint hierarchy and rest pose of every skin.
-- Usage: lua5.4 fuzz/make_seeds.lua OUTDIR   (writes OUTDIR/<harness>/*), from the
-- repository's root, under any Lua from 5.1 (the same bytes on each; before 5.3,
-- string.pack and string.unpack are spec/helper.lua's plain-Lua ones).
local cjson = require "cjson"
local pack, unpack = string.pack, string.unpack
if not pack then
  local H = require "spec.helper"
  pack, unpack = H.pack, H.unpack
end
local floor = math.floor

local out = assert(arg[1], "usage: lua5.4 fuzz/make_seeds.lua OUTDIR")
local ASSETS = "examples/assets/"
local MODELS = {
  "SimpleSkin/SimpleSkin.gltf", "RiggedSimple/RiggedSimple.gltf", "CesiumMan/CesiumMan.gltf",
  "Fox/Fox.glb", "RiggedFigure/RiggedFigure.glb",
  "asset-generator/Animation_Skin/Animation_Skin_01.gltf",
  "asset-generator/Animation_SkinType/Animation_SkinType_01.gltf",
  "asset-generator/Animation_SkinType/Animation_SkinType_03.gltf",
}
local MAX_SLICE = 4096

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local written = {}
local function write(harness, name, bytes)
  if not written[harness] then assert(os.execute(("mkdir -p '%s/%s'"):format(out, harness))) end
  local f = assert(io.open(("%s/%s/%s"):format(out, harness, name), "wb"))
  f:write(bytes)
  f:close()
  written[harness] = (written[harness] or 0) + 1
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function unbase64(s)
  local vals, o, acc, bits = {}, {}, 0, 0
  for i = 1, #B64 do vals[B64:byte(i)] = i - 1 end
  for i = 1, #s do
    local v = vals[s:byte(i)]
    if v then
      -- acc keeps the `bits` bits not yet written
      acc, bits = acc * 64 + v, bits + 6
      if bits >= 8 then
        bits = bits - 8
        o[#o + 1] = string.char(floor(acc / 2 ^ bits))
        acc = acc % 2 ^ bits
      end
    end
  end
  return table.concat(o)
end

local function glb_wrap(json, bin)
  local function pad(s, c) return s .. c:rep((4 - #s % 4) % 4) end
  json = pad(json, " ")
  local body = pack("<I4I4", #json, 0x4E4F534A) .. json
  if bin then
    bin = pad(bin, "\0")
    body = body .. pack("<I4I4", #bin, 0x004E4942) .. bin
  end
  return pack("<c4I4I4", "glTF", 2, 12 + #body) .. body
end

local TYPE_INDEX = { [5120] = 0, [5121] = 1, [5122] = 2, [5123] = 3, [5125] = 4, [5126] = 5 }
local COMPS = { SCALAR = 1, VEC2 = 2, VEC3 = 3, VEC4 = 4, MAT2 = 4, MAT3 = 9, MAT4 = 16 }
local CSIZE = { [5120] = 1, [5121] = 1, [5122] = 2, [5123] = 2, [5125] = 4, [5126] = 4 }

local function small(v) return pack("<BI4", 3, v) end

-- A fz_accessor description (fuzz/fuzz_access.h) over bytes starting at 0.
local function describe(acc, view_len, stride, count, want_int)
  local matrix = acc.type:sub(1, 3) == "MAT"
  local comps = COMPS[acc.type]
  local flags = 1 + (want_int and 2 or 0) + (matrix and 4 or 0) + (acc.normalized and 8 or 0)
    + (stride > 0 and 16 or 0)
  local ccode = matrix and ({ [4] = 0, [9] = 1, [16] = 2 })[comps] or comps - 1
  local d = pack("BBB", flags, TYPE_INDEX[acc.componentType], ccode) .. small(0)
    .. small(view_len)
  if stride > 0 then d = d .. small(stride) end
  return d .. small(0) .. small(count)
end

local function element_size(acc)
  local cs, comps = CSIZE[acc.componentType], COMPS[acc.type]
  if acc.type:sub(1, 3) == "MAT" then
    local rows = math.floor(math.sqrt(comps) + 0.5)
    return (floor((rows * cs + 3) / 4) * 4) * rows
  end
  return cs * comps
end

-- Decoded numbers of an accessor (plain Lua, tightly packed or strided).
local function values(doc, bufs, acc, limit)
  local view = doc.bufferViews[acc.bufferView + 1]
  local data = bufs[view.buffer + 1]
  local fmt = ({ [5120] = "<i1", [5121] = "<I1", [5122] = "<i2", [5123] = "<I2",
    [5125] = "<I4", [5126] = "<f" })[acc.componentType]
  local es, cs = element_size(acc), CSIZE[acc.componentType]
  local stride = view.byteStride or es
  local base = (view.byteOffset or 0) + (acc.byteOffset or 0)
  local o = {}
  for i = 0, math.min(acc.count, limit) - 1 do
    local e = {}
    for c = 0, COMPS[acc.type] - 1 do
      e[#e + 1] = unpack(fmt, data, base + i * stride + c * cs + 1)
    end
    o[#o + 1] = e
  end
  return o
end

for _, model in ipairs(MODELS) do
  local path = ASSETS .. model
  local tag = model:match("([^/]+)%.%a+$")
  local bytes = read(path)
  local doc, bin
  if model:match("%.glb$") then
    write("glb", tag .. ".glb", bytes)
    local jlen = unpack("<I4", bytes, 13)
    doc = cjson.decode(bytes:sub(21, 20 + jlen))
    local blen = unpack("<I4", bytes, 21 + jlen)
    bin = bytes:sub(29 + jlen, 28 + jlen + blen)
  else
    doc = cjson.decode(bytes)
    write("glb", tag .. "-json.glb", glb_wrap(bytes:sub(1, 8192)))
  end
  local bufs = {}
  for i, b in ipairs(doc.buffers or {}) do
    if not b.uri then
      bufs[i] = bin
    elseif b.uri:match("^data:") then
      local text = b.uri:match(",(.*)$")
      write("base64", ("%s-%d.b64"):format(tag, i), text:sub(1, 4096))
      bufs[i] = unbase64(text)
    else
      bufs[i] = read(path:match("^(.*/)") .. b.uri)
    end
  end
  if not model:match("%.glb$") and bufs[1] then
    write("glb", tag .. ".glb", glb_wrap(bytes:sub(1, 8192), bufs[1]:sub(1, 8192)))
  end

  for i, acc in ipairs(doc.accessors or {}) do
    if acc.bufferView and TYPE_INDEX[acc.componentType] then
      local view = doc.bufferViews[acc.bufferView + 1]
      local start = (view.byteOffset or 0) + (acc.byteOffset or 0)
      local slice = bufs[view.buffer + 1]:sub(start + 1, start + MAX_SLICE)
      local es, stride = element_size(acc), view.byteStride or 0
      local step = stride > 0 and stride or es
      local count = math.min(acc.count, 2048, floor((#slice - es) / step) + 1)
      local want_int = acc.componentType ~= 5126 and not acc.normalized
      local desc = describe(acc, #slice, stride, count, want_int)
      write("accessor", ("%s-%d"):format(tag, i), desc .. ("\0"):rep(40 - #desc) .. slice)
      if i % 3 == 1 and count >= 4 and not want_int then
        -- sparse: 3 indices (u8) then 3 replacement elements
        local n, c = 3, math.min(count, 255)
        local idx = string.char(0, floor(c / 2), c - 1)
        local vals = slice:sub(1, n * es)
        local buf = idx .. ("\0"):rep(4 - #idx) .. vals
        local base = describe(acc, #buf, 0, math.min(count, 255), false)
        base = base:sub(1, 3) .. small(0) .. small(#buf) .. small(0) .. small(c)
        local head = base .. small(n) .. pack("B", 0) .. small(0) .. small(#idx) .. small(0)
          .. small(4) .. small(#vals) .. small(0)
        write("sparse", ("%s-%d"):format(tag, i), head .. ("\0"):rep(96 - #head) .. buf)
      end
    end
  end

  for m, mesh in ipairs(doc.meshes or {}) do
    for p, prim in ipairs(mesh.primitives) do
      local ja, wa = prim.attributes.JOINTS_0, prim.attributes.WEIGHTS_0
      if ja and wa then
        local js = values(doc, bufs, doc.accessors[ja + 1], 300)
        local ws = values(doc, bufs, doc.accessors[wa + 1], 300)
        local o = { string.char(0) }
        for v = 1, #js do
          for k = 1, 4 do
            o[#o + 1] = pack("<I2B", js[v][k], 0)
            local w = ws[v][k]
            if doc.accessors[wa + 1].componentType == 5121 then w = w / 255 end
            if doc.accessors[wa + 1].componentType == 5123 then w = w / 65535 end
            o[#o + 1] = pack("<f", w)
          end
        end
        write("influences", ("%s-%d-%d"):format(tag, m, p), table.concat(o))
      end
    end
  end

  local parent = {}
  for n, node in ipairs(doc.nodes or {}) do
    for _, c in ipairs(node.children or {}) do parent[c + 1] = n end
  end
  for s, skin in ipairs(doc.skins or {}) do
    local pos = {}
    for k, j in ipairs(skin.joints) do pos[j + 1] = k - 1 end
    local o = { pack("<BI2", 0x40, #skin.joints) }
    for _, j in ipairs(skin.joints) do
      local p = parent[j + 1]
      o[#o + 1] = pack("<I2", p and pos[p] or 0xffff)
    end
    for _, j in ipairs(skin.joints) do
      local node = doc.nodes[j + 1]
      local t, r, sc = node.translation or { 0, 0, 0 }, node.rotation or { 0, 0, 0, 1 },
        node.scale or { 1, 1, 1 }
      o[#o + 1] = pack("<ffffffffff", t[1], t[2], t[3], r[1], r[2], r[3], r[4],
        sc[1], sc[2], sc[3])
    end
    write("skeleton", ("%s-%d"):format(tag, s), table.concat(o))
  end
end

-- hand-made seeds for what the models do not have
write("skeleton", "chain-reverse", pack("<BI2", 0x41, 4000))
write("skeleton", "cycle", pack("<BBI2I2I2", 0, 3, 2, 0, 1))
write("base64", "padding", "QUJDRA==")
write("influences", "two-sets", string.char(5) .. ("\1\0\0\64"):rep(16 * 4))

for h, n in pairs(written) do print(("%s: %d seeds"):format(h, n)) end
