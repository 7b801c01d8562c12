--- limber.gltf: glTF 2.0 import (.gltf with external or data: buffers, .glb).
--
-- The JSON is parsed with lua-cjson (Debian package `lua-cjson`); every byte
-- of binary data, the model file's and external buffers' included, is read
-- and decoded in C (`limber.core`) with bounds checks. The loaded asset is a
-- plain Lua table (see docs/gltf.md): nodes, scenes, limber skeletons
-- and skins, mesh primitives as limber Buffers in the form
-- `limber.skinning.mesh` takes, and animations as raw channels plus limber
-- clips (`limber.anim`).
--
-- Indices in the asset are 1-based: glTF node n is `asset.nodes[n + 1]`,
-- and every node reference (parent, children, joints, channel targets) is
-- 1-based too. Each object also keeps its glTF index in `gltf_index`.
--
-- Malformed input raises `limber.gltf: <where>: <what>` (for example
-- `limber.gltf: accessors[12]: bufferView 9 does not exist`) and returns
-- nothing half-built. Wrong arguments raise
-- `bad argument #k to 'limber.gltf.load' (...)`.
--
-- This file is the loader. The functions that use a loaded asset (`info`,
-- `describe`, `pose`, `palette`, `update_worlds`) are in
-- `limber.gltf.asset` and re-exported here.
-- @module limber.gltf
local core = require "limber.core"
local check = require "limber.check"
local lmath = require "limber.math"
local limber = require "limber"
local anim_mod = require "limber.anim"
local asset_fns = require "limber.gltf.asset"
local cjson = require "cjson"
local tointeger, move = check.tointeger, check.move

local M = {}

local json = cjson.new()
json.decode_invalid_numbers(false)
json.decode_max_depth(64)

--- Default limit on the bytes a load may decode (buffers, accessor
-- outputs, and every structure derived from the file at the costs in
-- `M.COSTS`): 64 MiB plus 16 times the size of the input. Override with
-- `opts.max_bytes`. (The decoded JSON itself, about 40 bytes per byte of
-- a file of empty objects, is not counted.)
M.DEFAULT_BASE_BYTES = 64 * 1024 * 1024

--- Largest model file `load` reads when `opts.max_bytes` is not given
-- (1 GiB); with `opts.max_bytes`, the file may not be larger than that.
M.MAX_FILE_BYTES = 1024 * 1024 * 1024

--- Memory counted against `max_bytes` for each structure the loader
-- derives from the file, besides decoded bytes (estimates of what the Lua
-- 5.4 tables and limber objects of each take, so a small file of many
-- small objects is refused as a large one is): `node` (its table, children,
-- TRS, local and world matrices: 1 to 1.5 KiB measured), `scene_node` (a
-- scene's root entry), `accessor`, `view` (a bufferView), `primitive`,
-- `skin_joint` (joint list, inverse bind and skin entries), `path_step` (a
-- node on a skin's path to its root, walked to find the skeleton),
-- `skeleton_joint` (a joint of a built limber skeleton), `channel` and
-- `track` (one clip track; each animation gets one clip plus one per
-- skeleton, and each clip also holds a copy of its keys, which is counted).
M.COSTS = {
  node = 1024, scene_node = 48, accessor = 512, view = 256, primitive = 512, skin_joint = 256,
  path_step = 32, skeleton_joint = 256, channel = 384, track = 256,
}

--- Required extensions limber can load (they only change data limber
-- decodes anyway, or materials, which limber ignores).
M.SUPPORTED_EXTENSIONS = {
  KHR_mesh_quantization = true,
  KHR_materials_unlit = true,
  KHR_texture_transform = true,
  KHR_materials_emissive_strength = true,
}

-- the identity matrix (column-major), for skins without inverse binds
local IDENTITY = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1 }

-- A content error: "limber.gltf: <where>: <what>", no source position (the
-- position that matters is the JSON path).
local function fail(where, fmt, ...)
  error("limber.gltf: " .. where .. ": " .. fmt:format(...), 0)
end

local function at(where, key, i)
  if i then return ("%s.%s[%d]"):format(where, key, i) end
  return where .. "." .. key
end

-- ---- JSON value checks ----------------------------------------------------

local function show(v)
  if type(v) == "number" and tointeger(v) then return tostring(tointeger(v)) end
  return tostring(v)
end

local function is_int(v)
  return type(v) == "number" and v == math.floor(v) and v >= 0 and v <= 2 ^ 53
end

local function int(v, where, what, min)
  if not is_int(v) then fail(where, "%s must be a non-negative integer (got %s)", what, show(v)) end
  v = tointeger(v)
  if min and v < min then fail(where, "%s must be at least %d (got %d)", what, min, v) end
  return v
end

local function opt_int(v, where, what, default, min)
  if v == nil then return default end
  return int(v, where, what, min)
end

-- core.gltf_mark_empty writes each empty JSON object as {"\0": null}, so
-- that it is not taken for an empty array; object() removes the marker.
local EMPTY_MARK = "\0"

local function list(v, where, what)
  if v == nil then return {} end
  -- a JSON object decodes to a table too: its keys are names, not 1..n
  if type(v) ~= "table" or type(next(v)) == "string" then
    fail(where, "%s must be an array", what)
  end
  return v
end

local function object(v, where, what)
  -- a JSON array decodes to a table too: its keys are integers, not names
  if type(v) ~= "table" or next(v) ~= nil and type(next(v)) ~= "string" then
    fail(where, "%s must be an object", what)
  end
  if rawget(v, EMPTY_MARK) == cjson.null then v[EMPTY_MARK] = nil end
  return v
end

--- Checks a 0-based reference into `arr` and returns it 1-based.
local function ref(v, arr, where, what)
  if not is_int(v) then fail(where, "%s must be an index (got %s)", what, show(v)) end
  v = tointeger(v)
  if v >= #arr then fail(where, "%s %d does not exist", what, v) end
  return v + 1
end

local function numbers(v, n, where, what)
  if type(v) ~= "table" or #v ~= n then
    fail(where, "%s must be an array of %d numbers", what, n)
  end
  local out = {}
  for k = 1, n do
    local x = v[k]
    -- limber stores transforms as floats: 1e39 is finite here but not there
    if type(x) ~= "number" or x ~= x or math.abs(x) > 3.4028234663852886e38 then
      fail(where, "%s[%d] is not a finite number within float range", what, k - 1)
    end
    out[k] = x
  end
  return out
end

-- Transform math: limber.math (double precision, column-major).
local trs_matrix = lmath.trs_raw

local function normalize4(q, where, what)
  local n = math.sqrt(q[1] * q[1] + q[2] * q[2] + q[3] * q[3] + q[4] * q[4])
  if n <= 1e-12 or n ~= n then fail(where, "%s is a zero quaternion", what) end
  return { q[1] / n, q[2] / n, q[3] / n, q[4] / n }
end

local function decompose(m, where)
  local t, r, sc = lmath.decompose_raw(m)
  if not t then fail(where, "matrix rotation is a zero quaternion") end
  return t, r, sc
end

-- ---- URIs and files ----------------------------------------------------------

local function percent_decode(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

--- Resolves a relative URI inside base_dir, refusing anything else.
local function resolve_uri(uri, base_dir, where)
  local path = percent_decode(uri)
  if path:find("^%a[%w+.-]*:") then
    fail(where, "uri '%s': only relative paths and data: URIs are allowed", uri)
  end
  if path == "" or path:find("^[/\\]") or path:find("%z") then
    fail(where, "uri '%s': absolute paths are not allowed", uri)
  end
  for seg in path:gmatch("[^/\\]+") do
    if seg == ".." then fail(where, "uri '%s': '..' segments are not allowed", uri) end
  end
  if not base_dir then
    fail(where, "uri '%s' names an external file but no base directory is known"
      .. " (opts.base_dir)", uri)
  end
  return base_dir .. path
end

-- The first `len` bytes of an external buffer file (core.gltf_read_file:
-- a regular file whose resolved path, symlinks followed, is inside
-- base_dir, checked on the open descriptor; never more than len bytes are
-- read; a shorter file fails).
local function read_file(base_dir, path, where, len)
  return core.gltf_read_file(where, base_dir, path, len)
end

-- ---- loading ------------------------------------------------------------------

local TYPES = { SCALAR = 1, VEC2 = 2, VEC3 = 3, VEC4 = 4, MAT2 = 4, MAT3 = 9, MAT4 = 16 }
local COMPONENT = { [5120] = 1, [5121] = 1, [5122] = 2, [5123] = 2, [5125] = 4, [5126] = 4 }
local PATHS = { translation = 3, rotation = 4, scale = 3, weights = 0 }
-- morph weights per animated node: clip float tracks hold at most 16 values (LMB_FLOAT_WIDTH)
local MAX_FLOAT_WIDTH = 16
local INTERP = { LINEAR = true, STEP = true, CUBICSPLINE = true }

local Loader = {}
Loader.__index = Loader

--- Counts `bytes` against opts.max_bytes; raises when over the limit.
-- @local
function Loader:take(where, bytes)
  self.used = self.used + bytes
  if self.used > self.max_bytes then
    fail(where, "decoding needs %d bytes in all, over the limit of %d (opts.max_bytes)",
      math.floor(self.used), self.max_bytes)
  end
end

--- Reads every buffer (GLB BIN chunk, data: URI or file) into self.buf.
-- @local
function Loader:buffers()
  local doc = self.doc
  self.buf = {}
  for i, b in ipairs(list(doc.buffers, "buffers", "buffers")) do
    local where = ("buffers[%d]"):format(i - 1)
    object(b, where, "buffer")
    local len = int(b.byteLength, where, "byteLength", 1)
    self:take(where, len)
    local data
    if b.uri == nil then
      if i ~= 1 or not self.bin then fail(where, "no uri, and no GLB BIN chunk to use") end
      data = self.bin
    elseif type(b.uri) ~= "string" then
      fail(where, "uri must be a string")
    elseif b.uri:sub(1, 5) == "data:" then
      local head, payload = b.uri:match("^data:([^,]*),(.*)$")
      if not head or not head:find(";base64$") then
        fail(where, "data: URI must be base64 encoded (data:<type>;base64,...)")
      end
      data = core.gltf_base64(where, payload)
    else
      data = read_file(self.base_dir, resolve_uri(b.uri, self.base_dir, where), where, len)
    end
    if #data < len then
      fail(where, "byteLength is %d but only %d bytes are available", len, #data)
    end
    self.buf[i] = { data = data, len = len }
  end
  self.views = {}
  local views = list(doc.bufferViews, "bufferViews", "bufferViews")
  self:take("bufferViews", #views * M.COSTS.view)
  for i, v in ipairs(views) do
    local where = ("bufferViews[%d]"):format(i - 1)
    object(v, where, "bufferView")
    local b = ref(v.buffer, self.buf, where, "buffer")
    local off = opt_int(v.byteOffset, where, "byteOffset", 0)
    local len = int(v.byteLength, where, "byteLength", 1)
    local stride = opt_int(v.byteStride, where, "byteStride", 0)
    if v.byteStride ~= nil and (stride < 4 or stride > 252 or stride % 4 ~= 0) then
      fail(where, "byteStride %d must be a multiple of 4 in [4, 252]", stride)
    end
    if off + len > self.buf[b].len then
      fail(where, "range [%d, %d) is past the end of buffer %d (%d bytes)", off, off + len, b - 1,
        self.buf[b].len)
    end
    self.views[i] = { buffer = self.buf[b], offset = off, length = len, stride = stride }
  end
end

--- Where a bufferView's bytes are, as the C decoder wants them.
-- @local
function Loader:place(desc, view_index, offset)
  local v = self.views[view_index]
  desc.data, desc.data_len = v.buffer.data, v.buffer.len
  desc.view_offset, desc.view_length, desc.view_stride = v.offset, v.length, v.stride
  desc.offset = offset
  return desc
end

--- Checks every accessor (types, counts, views, sparse) into self.acc.
-- @local
function Loader:accessors()
  self.acc = {}
  local accs = list(self.doc.accessors, "accessors", "accessors")
  self:take("accessors", #accs * M.COSTS.accessor)
  for i, a in ipairs(accs) do
    local where = ("accessors[%d]"):format(i - 1)
    object(a, where, "accessor")
    local ct = int(a.componentType, where, "componentType")
    if not COMPONENT[ct] then fail(where, "componentType %d is not a glTF component type", ct) end
    local width = TYPES[a.type]
    if not width then fail(where, "type '%s' is not a glTF accessor type", tostring(a.type)) end
    if a.normalized ~= nil and type(a.normalized) ~= "boolean" then
      fail(where, "normalized must be a boolean")
    end
    local desc = {
      component_type = ct, components = width, is_matrix = a.type:sub(1, 3) == "MAT",
      normalized = a.normalized == true, count = int(a.count, where, "count", 1),
    }
    local offset = opt_int(a.byteOffset, where, "byteOffset", 0)
    if a.bufferView ~= nil then
      self:place(desc, ref(a.bufferView, self.views, where, "bufferView"), offset)
    elseif offset ~= 0 then
      fail(where, "byteOffset without a bufferView")
    end
    if a.sparse ~= nil then
      local sw = where .. ".sparse"
      object(a.sparse, sw, "sparse")
      local si, sv = object(a.sparse.indices, sw, "indices"), object(a.sparse.values, sw, "values")
      desc.sparse = {
        count = int(a.sparse.count, sw, "count", 1),
        indices = self:place(
          { component_type = int(si.componentType, sw .. ".indices", "componentType") },
          ref(si.bufferView, self.views, sw .. ".indices", "bufferView"),
          opt_int(si.byteOffset, sw .. ".indices", "byteOffset", 0)),
        values = self:place({}, ref(sv.bufferView, self.views, sw .. ".values", "bufferView"),
          opt_int(sv.byteOffset, sw .. ".values", "byteOffset", 0)),
      }
    end
    self.acc[i] = { desc = desc, type = a.type, where = where, cache = {} }
  end
end

--- Decodes accessor i (1-based) as "f32" or "u32"; `types` lists allowed
-- glTF types; `float_only` refuses integer component types.
-- @local
function Loader:decode(i, kind, where, what, types, float_only)
  local a = self.acc[i]
  local ok_type = false
  for _, t in ipairs(types) do ok_type = ok_type or t == a.type end
  if not ok_type then
    fail(where, "%s: accessor %d has type %s, expected %s", what, i - 1, a.type,
      table.concat(types, " or "))
  end
  if float_only and a.desc.component_type ~= 5126 then
    fail(where, "%s: accessor %d must have float components (componentType 5126)", what, i - 1)
  end
  local buf = a.cache[kind]
  if not buf then
    self:take(a.where, a.desc.count * a.desc.components * 4)
    buf = core.gltf_accessor(a.where, a.desc, kind)
    a.cache[kind] = buf
  end
  return buf
end

--- Checks the node tree (children, matrix or TRS, no cycles) into asset.nodes.
-- @local
function Loader:nodes()
  local nodes = {}
  local raw = list(self.doc.nodes, "nodes", "nodes")
  self:take("nodes", #raw * M.COSTS.node)
  for i = 1, #raw do nodes[i] = { gltf_index = i - 1, children = {} } end
  for i, n in ipairs(raw) do
    local where = ("nodes[%d]"):format(i - 1)
    object(n, where, "node")
    local node = nodes[i]
    node.name = type(n.name) == "string" and n.name or nil
    for k, c in ipairs(list(n.children, where, "children")) do
      local ci = ref(c, raw, at(where, "children", k - 1), "node")
      if ci == i then fail(where, "node is its own ancestor (listed in its own children)") end
      if nodes[ci].parent then
        fail(("nodes[%d]"):format(ci - 1), "node is a child of both node %d and node %d",
          nodes[ci].parent - 1, i - 1)
      end
      nodes[ci].parent = i
      node.children[#node.children + 1] = ci
    end
    if n.mesh ~= nil then
      node.mesh = ref(n.mesh, list(self.doc.meshes, "meshes", "meshes"), where, "mesh")
    end
    if n.skin ~= nil then
      node.skin = ref(n.skin, list(self.doc.skins, "skins", "skins"), where, "skin")
    end
    if n.weights ~= nil then -- morph weights overriding the mesh's (checked by meshes())
      if type(n.weights) ~= "table" then fail(where, "weights must be an array of numbers") end
      node.weights = numbers(n.weights, #n.weights, where,
        "weights")
    end
    if n.matrix ~= nil then
      if n.translation or n.rotation or n.scale then fail(where, "has both matrix and TRS") end
      node.matrix = numbers(n.matrix, 16, where, "matrix")
      local m = node.matrix
      if math.abs(m[4]) > 1e-6 or math.abs(m[8]) > 1e-6 or math.abs(m[12]) > 1e-6
          or math.abs(m[16] - 1) > 1e-6 then
        fail(where, "matrix is not affine (its last row must be 0 0 0 1)")
      end
      m[4], m[8], m[12], m[16] = 0, 0, 0, 1
      node.translation, node.rotation, node.scale = decompose(node.matrix, where)
    else
      node.translation = n.translation and numbers(n.translation, 3, where, "translation")
          or { 0, 0, 0 }
      node.rotation = n.rotation
          and normalize4(numbers(n.rotation, 4, where, "rotation"), where, "rotation")
          or { 0, 0, 0, 1 }
      node.scale = n.scale and numbers(n.scale, 3, where, "scale") or { 1, 1, 1 }
    end
    node.local_matrix = node.matrix or trs_matrix(node.translation, node.rotation, node.scale)
  end
  -- cycles: with one parent per node, a cycle is a walk up that meets
  -- itself; each node is walked once (stamp = the walk that reached it)
  local stamp = {}
  for i = 1, #nodes do
    local x = i
    while x and not stamp[x] do
      stamp[x] = i
      x = nodes[x].parent
    end
    if x and stamp[x] == i then fail(("nodes[%d]"):format(x - 1), "node is its own ancestor") end
  end
  self.asset.nodes = nodes
  self.asset.roots = {}
  for i = 1, #nodes do
    if not nodes[i].parent then self.asset.roots[#self.asset.roots + 1] = i end
  end
  core.gltf_worlds("nodes", nodes)
  for i = 1, #nodes do nodes[i].rest_world = nodes[i].world end
  -- scenes
  local scenes = {}
  for s, sc in ipairs(list(self.doc.scenes, "scenes", "scenes")) do
    local where = ("scenes[%d]"):format(s - 1)
    object(sc, where, "scene")
    local roots, listed = {}, {}
    local sn = list(sc.nodes, where, "nodes")
    self:take(where, #sn * M.COSTS.scene_node)
    for k, n in ipairs(sn) do
      local ni = ref(n, nodes, at(where, "nodes", k - 1), "node")
      if nodes[ni].parent then
        fail(at(where, "nodes", k - 1), "node %d is not a root node", ni - 1)
      end
      if listed[ni] then
        fail(at(where, "nodes", k - 1), "node %d is listed twice (nodes[%d])", ni - 1,
          listed[ni] - 1)
      end
      listed[ni] = k
      roots[#roots + 1] = ni
    end
    scenes[s] = { name = type(sc.name) == "string" and sc.name or nil, nodes = roots,
                  gltf_index = s - 1 }
  end
  self.asset.scenes = scenes
  if self.doc.scene ~= nil then self.asset.scene = ref(self.doc.scene, scenes, "scene", "scene") end
end

local ATTR_TYPES = {
  POSITION = { "VEC3" }, NORMAL = { "VEC3" }, TANGENT = { "VEC4" }, COLOR_0 = { "VEC3", "VEC4" },
}

--- Checks and decodes every mesh primitive into asset.meshes.
-- @local
function Loader:meshes()
  local meshes = {}
  for m, mesh in ipairs(list(self.doc.meshes, "meshes", "meshes")) do
    local mw = ("meshes[%d]"):format(m - 1)
    object(mesh, mw, "mesh")
    local prims = {}
    local raw = list(mesh.primitives, mw, "primitives")
    if #raw == 0 then fail(mw, "mesh has no primitives") end
    self:take(mw, #raw * M.COSTS.primitive)
    for p, prim in ipairs(raw) do
      local where = at(mw, "primitives", p - 1)
      object(prim, where, "primitive")
      local out = { gltf_index = p - 1, attributes = {}, texcoords = {},
                    mode = opt_int(prim.mode, where, "mode", 4) }
      if out.mode > 6 then fail(where, "mode %d is not a glTF primitive mode", out.mode) end
      local count
      local attrs = object(prim.attributes, where, "attributes")
      local names = {}
      for name in pairs(attrs) do names[#names + 1] = name end
      table.sort(names)
      for _, name in ipairs(names) do
        local ai = ref(attrs[name], self.acc, at(where, "attributes") .. "." .. name, "accessor")
        local buf
        if name:find("^JOINTS_%d+$") then
          buf = self:decode(ai, "u32", where, name, { "VEC4" })
        elseif name:find("^WEIGHTS_%d+$") or name:find("^TEXCOORD_%d+$") then
          buf = self:decode(ai, "f32", where, name,
            name:sub(1, 1) == "W" and { "VEC4" } or { "VEC2" })
        else
          buf = self:decode(ai, "f32", where, name,
            ATTR_TYPES[name] or { "SCALAR", "VEC2", "VEC3", "VEC4" })
        end
        if count and #buf ~= count then
          fail(where, "attribute %s has %d elements, others have %d", name, #buf, count)
        end
        count = #buf
        out.attributes[name] = buf
        local tc = name:match("^TEXCOORD_(%d+)$")
        if tc then out.texcoords[tonumber(tc) + 1] = buf end
      end
      if not count then fail(where, "primitive has no attributes") end
      out.vertex_count = count
      out.positions, out.normals, out.tangents = attrs.POSITION and out.attributes.POSITION,
          out.attributes.NORMAL, out.attributes.TANGENT
      out.colors = out.attributes.COLOR_0
      if prim.indices ~= nil then
        local ai = ref(prim.indices, self.acc, where, "indices accessor")
        out.gpu_indices = self:decode(ai, "u32", where, "indices", { "SCALAR" })
        local _, hi = core.gltf_stats(out.gpu_indices)
        if hi >= count then
          fail(where, "index %d out of range (vertex count %d)", math.floor(hi), count)
        end
      end
      local a = out.attributes
      if a.JOINTS_0 or a.WEIGHTS_0 then
        if not (a.JOINTS_0 and a.WEIGHTS_0) then
          fail(where, "JOINTS_0 and WEIGHTS_0 must come together")
        end
        local j1, w1 = a.JOINTS_1, a.WEIGHTS_1
        if (j1 == nil) ~= (w1 == nil) then
          fail(where, "JOINTS_1 and WEIGHTS_1 must come together")
        end
        out.gpu_joints, out.weights, out.max_joint =
          core.gltf_influences(where, a.JOINTS_0, a.WEIGHTS_0, j1, w1)
        self:take(where, count * 24)
      end
      if prim.targets ~= nil then out.targets = self:targets(prim.targets, where, count) end
      local nt = out.targets and #out.targets or 0
      if p > 1 and nt ~= (prims[1].targets and #prims[1].targets or 0) then
        fail(where, "has %d morph targets, primitive 0 has %d (glTF: every primitive of a mesh "
          .. "has the same number)", nt, prims[1].targets and #prims[1].targets or 0)
      end
      prims[p] = out
    end
    local nt = prims[1].targets and #prims[1].targets or 0
    if mesh.weights ~= nil and type(mesh.weights) ~= "table" then
      fail(mw, "weights must be an array of numbers")
    end
    local nw = type(mesh.weights) == "table" and #mesh.weights or 0
    local weights = mesh.weights ~= nil and numbers(mesh.weights, nw, mw, "weights") or nil
    if weights and #weights ~= nt then
      fail(mw, "weights has %d numbers for %d morph targets", #weights, nt)
    end
    if nt > 0 and not weights then
      weights = {}
      for t = 1, nt do weights[t] = 0 end
    end
    meshes[m] = { name = type(mesh.name) == "string" and mesh.name or nil, primitives = prims,
                  gltf_index = m - 1, target_count = nt, weights = weights }
  end
  self.asset.meshes = meshes
  -- a node's own weights override its mesh's, and need as many
  for i, node in ipairs(self.asset.nodes) do
    local nt = node.mesh and meshes[node.mesh].target_count or 0
    if node.weights and #node.weights ~= nt then
      fail(("nodes[%d]"):format(i - 1), "weights has %d numbers for %d morph targets",
        #node.weights, nt)
    end
    if nt > 0 then node.weights = node.weights or meshes[node.mesh].weights end
  end
end

local TARGET_ATTRS = { POSITION = "positions", NORMAL = "normals", TANGENT = "tangents" }

--- Checks and decodes the morph targets of a primitive with `count`
-- vertices: a list of { positions =, normals =, tangents = } f32 Buffers
-- (VEC3 deltas; sparse accessors decoded whole). Other attributes
-- (TEXCOORD_n, COLOR_n deltas) are skipped with a warning.
-- @local
function Loader:targets(raw, where, count)
  local out = {}
  local targets = list(raw, where, "targets")
  if #targets == 0 then fail(where, "targets is empty") end
  for t, target in ipairs(targets) do
    local tw = at(where, "targets", t - 1)
    object(target, tw, "target")
    local names = {}
    for name in pairs(target) do names[#names + 1] = tostring(name) end
    table.sort(names)
    local o = {}
    for _, name in ipairs(names) do
      local field = TARGET_ATTRS[name]
      if field then
        local ai = ref(target[name], self.acc, tw .. "." .. name, "accessor")
        local buf = self:decode(ai, "f32", tw, name, { "VEC3" })
        if #buf ~= count then
          fail(tw, "%s has %d elements, the primitive %d vertices", name, #buf, count)
        end
        o[field] = buf
      else
        self.asset.warnings[#self.asset.warnings + 1] = tw .. ": morph target attribute "
          .. name .. " is not supported (ignored)"
      end
    end
    out[t] = o
  end
  return out
end

--- Numbers the node forest depth first (iteratively): self.tin[n] and
-- self.tout[n] are n's entry and exit counts.
-- @local
function Loader:number_tree()
  local nodes, tin, tout, clock = self.asset.nodes, {}, {}, 0
  local stack = {}
  for _, r in ipairs(self.asset.roots) do
    stack[1], stack[2] = r, 0 -- node, next child position
    local top = 2
    clock = clock + 1
    tin[r] = clock
    while top > 0 do
      local n, c = stack[top - 1], stack[top] + 1
      local kids = nodes[n].children
      if c <= #kids then
        stack[top] = c
        local k = kids[c]
        clock = clock + 1
        tin[k] = clock
        stack[top + 1], stack[top + 2] = k, 0
        top = top + 2
      else
        clock = clock + 1
        tout[n] = clock
        stack[top - 1], stack[top] = nil, nil
        top = top - 2
      end
    end
  end
  self.tin, self.tout = tin, tout
end

--- Checks every skin (joints, inverse bind matrices) into asset.skins.
-- @local
function Loader:skins()
  local nodes = self.asset.nodes
  local skins = {}
  for s, sk in ipairs(list(self.doc.skins, "skins", "skins")) do
    local where = ("skins[%d]"):format(s - 1)
    object(sk, where, "skin")
    local joints, seen = {}, {}
    local raw = list(sk.joints, where, "joints")
    if #raw == 0 then fail(where, "skin has no joints") end
    if #raw > limber.MAX_JOINTS then
      fail(where, "%d joints, more than %d", #raw, limber.MAX_JOINTS)
    end
    self:take(where, #raw * M.COSTS.skin_joint)
    for k, j in ipairs(raw) do
      local n = ref(j, nodes, at(where, "joints", k - 1), "node")
      if seen[n] then fail(at(where, "joints", k - 1), "node %d is listed twice", n - 1) end
      seen[n] = true
      joints[k] = n
    end
    local skin = { name = type(sk.name) == "string" and sk.name or nil, joints = joints,
                   gltf_index = s - 1 }
    if sk.skeleton ~= nil then
      local sn = ref(sk.skeleton, nodes, where, "skeleton node")
      -- the skeleton node must be an ancestor of (or one of) every joint:
      -- with DFS entry/exit numbers, a is an ancestor of b when
      -- tin[a] <= tin[b] and tout[b] <= tout[a]
      if not self.tin then self:number_tree() end
      local tin, tout = self.tin, self.tout
      for k, n in ipairs(joints) do
        if not (tin[sn] <= tin[n] and tout[n] <= tout[sn]) then
          fail(where, "skeleton node %d is not an ancestor of joint %d (joints[%d])", sn - 1,
            n - 1, k - 1)
        end
      end
      skin.skeleton_node = sn
    end
    if sk.inverseBindMatrices ~= nil then
      local ai = ref(sk.inverseBindMatrices, self.acc, where, "inverseBindMatrices accessor")
      local ibm = self:decode(ai, "f32", where, "inverseBindMatrices", { "MAT4" }, true)
      if #ibm < #joints then
        fail(where, "inverseBindMatrices has %d matrices for %d joints", #ibm, #joints)
      end
      skin.inverse_binds = ibm
    end
    skins[s] = skin
  end
  self.asset.skins = skins
end

-- ---- skeletons: one per group of skins that share joints --------------------

--- Groups the skins that share joints (union-find over joint nodes).
-- @tparam table skins asset.skins
-- @treturn table the groups in order of their first skin, each a list of
--   skin indices in increasing order
-- @local
local function group_skins(skins)
  local group = {}
  for s = 1, #skins do group[s] = s end
  local function find(s)
    while group[s] ~= s do
      group[s] = group[group[s]] -- path halving
      s = group[s]
    end
    return s
  end
  local owner = {}
  for s, skin in ipairs(skins) do
    for _, n in ipairs(skin.joints) do
      if owner[n] then group[find(s)] = find(owner[n]) else owner[n] = s end
    end
  end
  local groups, order = {}, {}
  for s = 1, #skins do
    local g = find(s)
    if not groups[g] then
      groups[g] = {}
      order[#order + 1] = groups[g]
    end
    table.insert(groups[g], s)
  end
  return order
end

--- The nodes of the skeleton of a group of skins: every node on the paths
-- from their joints up to the joints' lowest common ancestor (included)
-- when they all hang from one tree, else up to each tree's root. The
-- steps walked are counted against max_bytes.
-- @tparam table members skin indices (a group of `group_skins`)
-- @tparam string where the group's first skin, for errors
-- @treturn table set of nodes (node -> true)
-- @treturn ?integer the lowest common ancestor (nil for several trees)
-- @local
function Loader:skeleton_nodes(members, where)
  local nodes, skins = self.asset.nodes, self.asset.skins
  local joints = {}
  for _, t in ipairs(members) do
    for _, n in ipairs(skins[t].joints) do joints[n] = true end
  end
  -- every node on the joints' paths to their tree roots (each node visited once)
  local set, steps = {}, 0
  local budget = math.floor((self.max_bytes - self.used) / M.COSTS.path_step)
  for n in pairs(joints) do
    local x = n
    while x and not set[x] do
      set[x] = true
      x = nodes[x].parent
      steps = steps + 1
      if steps > budget then self:take(where, steps * M.COSTS.path_step) end
    end
  end
  self:take(where, steps * M.COSTS.path_step)
  local tops = {}
  for n in pairs(set) do
    if not nodes[n].parent then tops[#tops + 1] = n end
  end
  if #tops ~= 1 then return set, nil end
  -- one tree: descend from its root to the lowest common ancestor, i.e.
  -- while the node is not a joint and exactly one child is on a path
  local lca = tops[1]
  while not joints[lca] do
    local next_node, on_path = nil, 0
    for _, c in ipairs(nodes[lca].children) do
      if set[c] then on_path, next_node = on_path + 1, c end
    end
    if on_path ~= 1 then break end
    set[lca] = nil
    lca = next_node
  end
  return set, lca
end

--- Builds the limber skeleton of a node set: one joint per node, with the
-- node's name unless an earlier node (by index) has the same name, and
-- the node's rest TRS.
-- @tparam table set node -> true (from `skeleton_nodes`)
-- @tparam string where for errors
-- @treturn limber.Skeleton
-- @treturn table joint index of each node: node -> joint
-- @treturn table node of each joint: joint -> node
-- @local
function Loader:build_skeleton(set, where)
  local nodes = self.asset.nodes
  local list_nodes = {}
  for n in pairs(set) do list_nodes[#list_nodes + 1] = n end
  self:take(where, #list_nodes * M.COSTS.skeleton_joint)
  table.sort(list_nodes)
  local desc, pos, names = {}, {}, {}
  for k, n in ipairs(list_nodes) do pos[n] = k end
  for k, n in ipairs(list_nodes) do
    local node = nodes[n]
    local name = node.name
    if name and names[name] then name = nil end
    if name then names[name] = true end
    desc[k] = { name = name, parent = node.parent and pos[node.parent] or nil,
                translation = node.translation, rotation = node.rotation, scale = node.scale }
  end
  -- glTF lists children anywhere: order the joints parents first
  local ok, sorted, remap = pcall(limber.sort_joints, desc)
  local skel
  if ok then ok, skel = pcall(limber.skeleton, sorted) end
  if not ok then fail(where, "%s", skel or sorted) end
  local joint_of, node_of = {}, {}
  for k, n in ipairs(list_nodes) do
    node_of[remap[k]] = n
    joint_of[n] = remap[k]
  end
  return skel, joint_of, node_of
end

--- Builds the limber Skin of skin t over skeleton si of the asset (the
-- glTF inverse bind matrices, or identity ones when the file has none).
-- @tparam integer t skin index
-- @tparam integer si skeleton index
-- @local
function Loader:bind_skin(t, si)
  local skin, entry = self.asset.skins[t], self.asset.skeletons[si]
  skin.skeleton = si
  local idx, ibm = {}, {}
  for k, n in ipairs(skin.joints) do
    idx[k] = entry.joint_of[n]
    move(skin.inverse_binds and skin.inverse_binds[k] or IDENTITY, 1, 16,
      (k - 1) * 16 + 1, ibm)
  end
  local ok, lskin = pcall(limber.skin, entry.skeleton, idx, ibm)
  if not ok then fail(("skins[%d]"):format(t - 1), "%s", lskin) end
  skin.skin = lskin
  skin.skin_joints = idx
end

--- Checks every skinned node against its skin (a mesh with POSITION and
-- JOINTS_0/WEIGHTS_0 whose joint indices fit the skin) into
-- asset.skinned_nodes.
-- @local
function Loader:check_skinned_nodes()
  local asset = self.asset
  asset.skinned_nodes = {}
  for i, node in ipairs(asset.nodes) do
    if node.skin then
      local where = ("nodes[%d]"):format(i - 1)
      if not node.mesh then fail(where, "has a skin but no mesh") end
      local skin = asset.skins[node.skin]
      for p, prim in ipairs(asset.meshes[node.mesh].primitives) do
        if not prim.positions then
          fail(where, "skinned, but meshes[%d].primitives[%d] has no POSITION", node.mesh - 1,
            p - 1)
        end
        if not prim.gpu_joints then
          fail(where, "skinned, but meshes[%d].primitives[%d] has no JOINTS_0/WEIGHTS_0",
            node.mesh - 1, p - 1)
        end
        if prim.max_joint >= #skin.joints then
          fail(where, "meshes[%d].primitives[%d] names joint %d but skin %d has %d joints",
            node.mesh - 1, p - 1, prim.max_joint, node.skin - 1, #skin.joints)
        end
      end
      asset.skinned_nodes[#asset.skinned_nodes + 1] =
        { node = i, skin = node.skin, mesh = node.mesh }
    end
  end
end

--- Builds one limber skeleton per group of skins that share joints (every
-- node on the paths from the joints up to their lowest common ancestor,
-- parent-before-child) and a limber Skin per skin, into asset.skeletons
-- and skin.skin; then checks the skinned nodes.
-- @local
function Loader:skeletons()
  local asset = self.asset
  asset.skeletons = {}
  for _, members in ipairs(group_skins(asset.skins)) do
    local where = ("skins[%d]"):format(members[1] - 1)
    local set, lca = self:skeleton_nodes(members, where)
    local skel, joint_of, node_of = self:build_skeleton(set, where)
    local si = #asset.skeletons + 1
    asset.skeletons[si] = { skeleton = skel, nodes = node_of, joint_of = joint_of, skins = members,
                            root_parent = lca and asset.nodes[lca].parent or nil }
    for _, t in ipairs(members) do self:bind_skin(t, si) end
  end
  self:check_skinned_nodes()
end

--- Checks every animation (samplers, channels) into asset.animations.
-- @local
function Loader:animations()
  local asset, nodes = self.asset, self.asset.nodes
  local anims = {}
  for a, an in ipairs(list(self.doc.animations, "animations", "animations")) do
    local aw = ("animations[%d]"):format(a - 1)
    object(an, aw, "animation")
    local samplers = list(an.samplers, aw, "samplers")
    local decoded = {}
    local function sampler(si, path, width)
      local where = at(aw, "samplers", si - 1)
      local s = object(samplers[si], where, "sampler")
      local interp = s.interpolation or "LINEAR"
      if not INTERP[interp] then
        fail(where, "interpolation '%s' is not LINEAR, STEP or CUBICSPLINE", tostring(interp))
      end
      local key = si .. path .. (width or "")
      if decoded[key] then return decoded[key] end
      local ii = ref(s.input, self.acc, where, "input accessor")
      local oi = ref(s.output, self.acc, where, "output accessor")
      local times = self:decode(ii, "f32", where, "input", { "SCALAR" }, true)
      local lo, hi, bad = core.gltf_stats(times)
      if bad then fail(where, "key times not increasing at key %d", bad - 1) end
      if lo < 0 then fail(where, "negative key time %g", lo) end
      local vtype = path == "rotation" and "VEC4" or path == "weights" and "SCALAR" or "VEC3"
      local values = self:decode(oi, "f32", where, "output", { vtype },
        path ~= "rotation" and path ~= "weights")
      local od = self.acc[oi].desc
      if od.component_type ~= 5126 and not od.normalized then -- glTF: float or normalized
        fail(where, "output: accessor %d must have float or normalized integer components",
          oi - 1)
      end
      local need = #times * (interp == "CUBICSPLINE" and 3 or 1) * (width or 1)
      if #values ~= need then
        fail(where, "input has %d keys but output has %d values (%s%s needs %d)", #times, #values,
          interp, width and (" with %d morph targets"):format(width) or "", need)
      end
      decoded[key] = { interpolation = interp, times = times, values = values, duration = hi }
      return decoded[key]
    end
    -- the last key time of a sampler's input (channels limber does not
    -- sample still set the animation's duration)
    local function input_duration(si)
      local where = at(aw, "samplers", si - 1)
      local s = object(samplers[si], where, "sampler")
      local key = si .. "#input"
      if decoded[key] then return decoded[key] end
      local ii = ref(s.input, self.acc, where, "input accessor")
      local times = self:decode(ii, "f32", where, "input", { "SCALAR" }, true)
      local lo, hi, bad = core.gltf_stats(times)
      if bad then fail(where, "key times not increasing at key %d", bad - 1) end
      if lo < 0 then fail(where, "negative key time %g", lo) end
      decoded[key] = hi
      return hi
    end
    local anim = { name = type(an.name) == "string" and an.name or nil, channels = {},
                   unsupported = {}, duration = 0, gltf_index = a - 1 }
    local chans = list(an.channels, aw, "channels")
    self:take(aw, #chans * M.COSTS.channel)
    for c, ch in ipairs(chans) do
      local where = at(aw, "channels", c - 1)
      object(ch, where, "channel")
      local si = ref(ch.sampler, samplers, where, "sampler")
      local target = object(ch.target, where, "target")
      local path = target.path
      local ext = type(target.extensions) == "table" and target.extensions or {}
      if path == "pointer" or ext.KHR_animation_pointer ~= nil then
        -- optional KHR_animation_pointer (a required one was refused with extensionsRequired)
        anim.unsupported[#anim.unsupported + 1] = where
          .. ": KHR_animation_pointer channels are not supported (skipped)"
      elseif PATHS[path] == nil then
        fail(where, "target.path '%s' is not a glTF path", tostring(path))
      elseif target.node == nil then
        anim.unsupported[#anim.unsupported + 1] = where
          .. ": channel without a target node (ignored)"
      elseif path == "weights" then
        local node = ref(target.node, nodes, where, "target node")
        local nt = nodes[node].mesh and asset.meshes[nodes[node].mesh].target_count or 0
        if nt == 0 or nt > MAX_FLOAT_WIDTH then
          local d = input_duration(si)
          if d > anim.duration then anim.duration = d end
          anim.unsupported[#anim.unsupported + 1] = where .. (nt == 0
            and ": 'weights' channel on a node without morph targets"
            or (": 'weights' channel of %d morph targets (at most %d are animated)")
              :format(nt, MAX_FLOAT_WIDTH))
            .. " (skipped; its keys count toward the animation's duration)"
        else
          local s = sampler(si, path, nt)
          anim.channels[#anim.channels + 1] = {
            node = node, path = path, interpolation = s.interpolation, width = nt,
            times = s.times, values = s.values, gltf_channel = c - 1 }
          if s.duration > anim.duration then anim.duration = s.duration end
        end
      else
        local node = ref(target.node, nodes, where, "target node")
        local s = sampler(si, path)
        anim.channels[#anim.channels + 1] = {
          node = node, path = path, interpolation = s.interpolation,
          times = s.times, values = s.values, gltf_channel = c - 1 }
        if s.duration > anim.duration then anim.duration = s.duration end
      end
    end
    for _, w in ipairs(anim.unsupported) do asset.warnings[#asset.warnings + 1] = w end
    anims[a] = anim
  end
  asset.animations = anims
end

-- ---- clips --------------------------------------------------------------------

--- Builds limber clips for every animation: animation.clips[s] is bound
-- to asset.skeletons[s] and holds the channels on its joints (as joint
-- tracks, packed within the load's tolerance); animation.clip holds every
-- other channel (as node tracks, exact). Each channel is in one clip.
-- @local
function Loader:clips()
  local asset = self.asset
  for a, an in ipairs(asset.animations) do
    local where = ("animations[%d]"):format(a - 1)
    -- an animation of only weights channels still gets (empty) clips of its
    -- duration, so a player or gltf_dump plays the rest pose for that long
    if #an.channels > 0 or an.duration > 0 then
      -- 1 + #skeletons clips, each with a track per channel and a copy of
      -- the animation's distinct keys (at most 4 floats per value)
      local keys, seen = 0, {}
      for _, ch in ipairs(an.channels) do
        if not seen[ch.times] then
          seen[ch.times] = true
          keys = keys + #ch.times * 4
        end
        if not seen[ch.values] then
          seen[ch.values] = true
          keys = keys + #ch.values * 16
        end
      end
      self:take(where, (1 + #asset.skeletons) * (#an.channels * M.COSTS.track + keys))
      local owner = {} -- channel -> skeleton whose joint it animates
      for k, ch in ipairs(an.channels) do
        -- the morph weights of a skinned mesh node go with its skeleton's
        -- clip (a plan playing it blends them: plan:morph_weights)
        local skin = ch.path == "weights" and asset.nodes[ch.node].skin
        if skin then owner[k] = asset.skins[skin].skeleton end
        for s, skel in ipairs(asset.skeletons) do
          if not owner[k] and ch.path ~= "weights" and skel.joint_of[ch.node] then owner[k] = s end
        end
      end
      -- the channels of skeleton s (joint tracks), or (s nil) of no skeleton (node tracks)
      local function tracks(s)
        local t = {}
        for k, ch in ipairs(an.channels) do
          if owner[k] == s then
            local j = s and ch.path ~= "weights" and asset.skeletons[s].joint_of[ch.node] or nil
            -- morph weights: a float track of one value per target, on the node
            t[#t + 1] = { joint = j, node = not j and ch.node or nil,
                          path = ch.path == "weights" and "float" or ch.path, width = ch.width,
                          interpolation = ch.interpolation, times = ch.times, values = ch.values }
          end
        end
        return t
      end
      local okc, clip = pcall(anim_mod.clip,
        { name = an.name, tracks = tracks(nil), duration = an.duration })
      if not okc then fail(where, "%s", clip) end
      an.clip = clip
      an.clips = {}
      for s, skel in ipairs(asset.skeletons) do
        local okk, c = pcall(anim_mod.clip,
          { name = an.name, tracks = tracks(s), duration = an.duration, pack = false },
          skel.skeleton) -- packed below, with the load's tolerance
        if not okk then fail(where, "%s", c) end
        if self.tolerance ~= 0 and c:joint_span() > 0 then
          local packed, why = anim_mod.pack(c, skel.skeleton,
            { tolerance = self.tolerance, distance = self.distance,
              source_keys = self.source_keys })
          if why then
            asset.warnings[#asset.warnings + 1] =
              ("%s: the clip of skeleton %d is kept exact (%s)"):format(where, s - 1, why)
          end
          c = packed
        end
        an.clips[s] = c
      end
    end
  end
end

-- ---- load --------------------------------------------------------------------

-- GLB when it says so, or when the header looks binary (so a damaged
-- magic is reported as such rather than as a JSON error).
local function is_glb(bytes)
  return bytes:sub(1, 4) == "glTF" or bytes:sub(1, 12):find("%z") ~= nil
end

local LOAD_OPTIONS = { base_dir = "string", name = "string", max_bytes = "number",
                               clips = "boolean", tolerance = "number", distance = "number",
                               source_keys = "boolean" }

-- the options of load / load_bytes (argument #2 of fname), checked and copied
local function load_options(fname, opts)
  opts = check.options(2, fname, opts, LOAD_OPTIONS, 3)
  local mb = opts.max_bytes
  if mb ~= nil and (mb ~= mb or mb < 0) then
    check.arg_fail(2, fname, "option 'max_bytes' must be a non-negative number", 3)
  end
  for _, k in ipairs({ "tolerance", "distance" }) do
    local v = opts[k]
    if v ~= nil and not (v >= 0 and v < math.huge) then
      check.arg_fail(2, fname, ("option '%s' must be a finite number >= 0"):format(k), 3)
    end
  end
  return opts
end

-- load_bytes after its arguments are checked
local function load_bytes(bytes, opts)
  local self = setmetatable({
    base_dir = opts.base_dir, used = 0, tolerance = opts.tolerance, distance = opts.distance,
    source_keys = opts.source_keys,
    max_bytes = opts.max_bytes or (M.DEFAULT_BASE_BYTES + 16 * #bytes),
  }, Loader)
  local text = bytes
  if is_glb(bytes) then
    text, self.bin = core.gltf_glb(bytes)
    text = text:gsub("%z+$", "") -- some writers pad the JSON chunk with NULs, not spaces
  end
  if text:sub(1, 3) == "\239\187\191" then text = text:sub(4) end -- UTF-8 byte order mark
  text = core.gltf_mark_empty(text)
  local ok, doc = pcall(json.decode, text)
  if not ok then fail("JSON", "syntax error: %s", tostring(doc):gsub("^.-:%d+: ", "")) end
  if type(doc) ~= "table" or doc[1] ~= nil then fail("JSON", "top level must be an object") end
  object(doc, "JSON", "top level")
  self.doc = doc
  local asset_info = object(doc.asset, "asset", "asset")
  local version = asset_info.version
  if type(version) ~= "string" or not version:find("^2%.%d+$") then
    fail("asset", "version '%s' is not glTF 2.x", tostring(version))
  end
  local missing = {}
  for _, e in ipairs(list(doc.extensionsRequired, "extensionsRequired", "extensionsRequired")) do
    if not M.SUPPORTED_EXTENSIONS[e] then missing[#missing + 1] = tostring(e) end
  end
  if #missing > 0 then
    fail("extensionsRequired", "unsupported extension%s %s", #missing > 1 and "s" or "",
      table.concat(missing, ", "))
  end
  self.asset = {
    name = opts.name, version = version, generator = asset_info.generator,
    copyright = asset_info.copyright, warnings = {}, glb = self.bin ~= nil,
  }
  self:buffers()
  self:accessors()
  self:nodes()
  self:meshes()
  self:skins()
  self:skeletons()
  self:animations()
  self.asset.has_clips = opts.clips ~= false
  if self.asset.has_clips then self:clips() end
  return self.asset
end

--- Loads a glTF 2.0 asset from bytes in memory (.gltf JSON or .glb).
-- @tparam string bytes the file content
-- @tparam[opt] table opts `base_dir` (directory of external buffers, with
--   a trailing slash; without it only data: URIs and GLB chunks work),
--   `name` (reported as asset.name), `max_bytes` (decode budget),
--   `clips` (false: do not build limber clips), `tolerance`, `distance`
--   and `source_keys` (the skeleton clips are packed with
--   `limber.anim.pack` and these options, model units; default: its
--   rig-relative defaults and fitted keys; tolerance 0 keeps them exact).
--   Unknown options and options of the wrong type are errors.
-- @treturn table the asset
function M.load_bytes(bytes, opts)
  if type(bytes) ~= "string" then check.arg_error(1, "limber.gltf.load_bytes", "string", bytes) end
  return load_bytes(bytes, load_options("limber.gltf.load_bytes", opts))
end

--- Loads a .gltf or .glb file.
--
-- The model file is opened as given (a symlink is followed: the caller
-- chose the path) and must be a regular file: a FIFO, a directory, a
-- device or a socket is refused at once, without reading or waiting. At
-- most `opts.max_bytes` (default `M.MAX_FILE_BYTES`) bytes are read.
-- External buffers are read from the file's directory only: regular files
-- whose resolved path (symlinks followed) is inside that directory,
-- checked on the open file, and only their first byteLength bytes.
-- @tparam string path
-- @tparam[opt] table opts as for load_bytes (base_dir defaults to the file's directory)
-- @treturn table the asset
function M.load(path, opts)
  if type(path) ~= "string" then check.arg_error(1, "limber.gltf.load", "string", path) end
  local o = load_options("limber.gltf.load", opts)
  o.base_dir = o.base_dir or (path:match("^(.*[/\\])") or "./")
  o.name = o.name or path:match("([^/\\]+)%.[^.]*$") or path
  local limit = math.floor(math.min(o.max_bytes or M.MAX_FILE_BYTES, 2 ^ 53))
  local bytes = core.gltf_read_model("limber.gltf.load", path, limit)
  return load_bytes(bytes, o)
end

-- ---- using a loaded asset (limber.gltf.asset) ----------------------------------

M.info = asset_fns.info
M.describe = asset_fns.describe
M.pose = asset_fns.pose
M.palette = asset_fns.palette
M.update_worlds = asset_fns.update_worlds

return M
