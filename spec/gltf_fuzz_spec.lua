-- Lua-level fuzzing of limber.gltf: structured mutations of the bundled
-- models (bit flips, truncation, byte runs, and JSON edits that change
-- numbers, indices and arrays, re-packed into GLB containers with their
-- BIN chunk). Every load is either an asset that passes check_asset below
-- or a Lua error string starting "limber.gltf: "; never a crash, hang or
-- sanitizer report. spec/gltf_errors_spec.lua adds 600 plain byte edits.
--
-- The untagged test runs a few hundred mutations; the #slow one runs
-- LIMBER_FUZZ_ITERATIONS (default 20000): busted --run=dev -t slow spec/gltf_fuzz_spec.lua
local H = require "spec.helper"
local cjson = require "cjson"
local gltf = require "limber.gltf"
local core = require "limber.core"

local read = H.read

local SKIN_DIR = H.assets .. "asset-generator/Animation_Skin/"
local TYPE_DIR = H.assets .. "asset-generator/Animation_SkinType/"
local SOURCES = {
  { path = H.assets .. "SimpleSkin/SimpleSkin.gltf" },
  { path = H.assets .. "RiggedSimple/RiggedSimple.gltf" },
  { path = H.assets .. "RiggedFigure/RiggedFigure.glb" },
  { path = H.assets .. "Fox/Fox.glb" },
  { path = SKIN_DIR .. "Animation_Skin_05.gltf", base_dir = SKIN_DIR },
  { path = TYPE_DIR .. "Animation_SkinType_02.gltf", base_dir = TYPE_DIR },
}

local function finite(v) return type(v) == "number" and v == v and v > -math.huge and v < math.huge end

local function all_finite(t, n, what)
  assert(#t == n, ("%s has %d numbers, expected %d"):format(what, #t, n))
  for k = 1, n do assert(finite(t[k]), ("%s[%d] = %s"):format(what, k, tostring(t[k]))) end
end

-- The promises a loaded asset makes (docs/gltf.md), checked the
-- plain way: references in range, decoded data finite and consistent,
-- poses and palettes computable and finite.
local function check_asset(asset)
  local nodes = asset.nodes
  for i, node in ipairs(nodes) do
    if node.parent then assert(nodes[node.parent], "node parent out of range") end
    for _, c in ipairs(node.children) do
      assert(nodes[c] and nodes[c].parent == i, "child/parent mismatch at node " .. i)
    end
    all_finite(node.local_matrix, 16, "local_matrix")
    if node.world then all_finite(node.world, 16, "world") end
  end
  for _, mesh in ipairs(asset.meshes) do
    for _, prim in ipairs(mesh.primitives) do
      assert(prim.vertex_count >= 1)
      for name, buf in pairs(prim.attributes) do
        assert.are.equal(prim.vertex_count, #buf, name)
        local lo, hi = core.gltf_stats(buf)
        assert(finite(lo) and finite(hi), name .. " not finite")
      end
      if prim.gpu_indices then
        local lo, hi = core.gltf_stats(prim.gpu_indices)
        assert(lo >= 0 and hi < prim.vertex_count, "index out of range")
      end
      if prim.gpu_joints then
        assert.are.equal(prim.vertex_count, #prim.gpu_joints)
        local _, hi = core.gltf_stats(prim.gpu_joints)
        assert.are.equal(prim.max_joint, H.tointeger(hi))
        for v = 1, #prim.weights, math.max(1, math.floor(#prim.weights / 64)) do
          local w = prim.weights:get(v)
          local s = 0
          for k = 1, 4 do
            assert(w[k] >= 0 and w[k] <= 1, "weight outside [0, 1]")
            s = s + w[k]
          end
          assert(math.abs(s - 1) < 1e-4, "weights sum to " .. s)
        end
      end
    end
  end
  for _, skin in ipairs(asset.skins) do
    for _, n in ipairs(skin.joints) do assert(nodes[n], "skin joint out of range") end
    assert(asset.skeletons[skin.skeleton], "skin without skeleton")
    assert.are.equal(#skin.joints, #skin.skin)
  end
  for _, sn in ipairs(asset.skinned_nodes) do
    for _, prim in ipairs(asset.meshes[sn.mesh].primitives) do
      assert(prim.max_joint < #asset.skins[sn.skin].joints, "mesh joint beyond its skin")
    end
  end
  -- Poses and palettes must always compute; their values must be finite
  -- when the inputs are moderate (a valid file may hold an inverse bind or
  -- scale of 3e38, whose products overflow float: garbage in, inf out).
  local function moderate_nodes(entry)
    -- largest |scale| accumulated down each chain, and translations, below 1e6
    local root = entry.root_parent and nodes[entry.root_parent].world
    local reach = { [0] = 1 }
    if root then
      for k = 1, 16 do
        if math.abs(root[k]) > 1e6 then return false end
        reach[0] = math.max(reach[0], math.abs(root[k]))
      end
    end
    for j, p in ipairs(entry.skeleton:parents()) do
      local node = nodes[entry.nodes[j]]
      local sc = 1
      for k = 1, 3 do
        if math.abs(node.translation[k]) > 1e6 then return false end
        sc = math.max(sc, math.abs(node.scale[k]))
      end
      reach[j] = reach[p] * sc
      if reach[j] > 1e6 then return false end
    end
    return true
  end
  for s, entry in ipairs(asset.skeletons) do
    local pose = gltf.pose(asset, s, 2)
    pose:local_to_model()
    local moderate = moderate_nodes(entry)
    for j = 1, entry.skeleton:joint_count(), math.max(1, math.floor(entry.skeleton:joint_count() / 32)) do
      local m = pose:model(2, j)
      if moderate then all_finite(m, 16, "model matrix") end
    end
    for k, skin in ipairs(asset.skins) do
      if skin.skeleton == s then
        local pal = gltf.palette(asset, pose, { skin = k })
        pal:update()
        local ibm_ok = true
        if skin.inverse_binds then
          local lo, hi = core.gltf_stats(skin.inverse_binds)
          ibm_ok = math.abs(lo) <= 1e6 and math.abs(hi) <= 1e6
        end
        if moderate and ibm_ok then all_finite(pal:get(1, 1), 16, "palette") end
      end
    end
  end
  for _, anim in ipairs(asset.animations) do
    for _, ch in ipairs(anim.channels) do
      assert(nodes[ch.node], "channel target out of range")
      local lo, hi, not_increasing = core.gltf_stats(ch.times)
      assert(finite(lo) and finite(hi) and not not_increasing, "key times")
    end
  end
  assert.is_string(gltf.describe(asset))
end

-- ---- mutations ------------------------------------------------------------

local function glb_split(bytes)
  local jlen = H.unpack("<I4", bytes, 13)
  local json = bytes:sub(21, 20 + jlen)
  local bin
  if #bytes >= 28 + jlen then
    local blen = H.unpack("<I4", bytes, 21 + jlen)
    bin = bytes:sub(29 + jlen, 28 + jlen + blen)
  end
  return json, bin
end

local function glb_pack(json, bin)
  json = json .. (" "):rep((4 - #json % 4) % 4)
  local body = H.pack("<I4I4", #json, 0x4E4F534A) .. json
  if bin then
    bin = bin .. ("\0"):rep((4 - #bin % 4) % 4)
    body = body .. H.pack("<I4I4", #bin, 0x004E4942) .. bin
  end
  return H.pack("<c4I4I4", "glTF", 2, 12 + #body) .. body
end

-- Every (table, key) holding a number or a table, depth first.
local function slots(doc)
  local nums, tabs = {}, {}
  local function walk(t, depth)
    if depth > 12 then return end
    for k, v in pairs(t) do
      if type(v) == "number" then
        nums[#nums + 1] = { t, k }
      elseif type(v) == "table" then
        tabs[#tabs + 1] = { t, k }
        walk(v, depth + 1)
      end
    end
  end
  walk(doc, 0)
  return nums, tabs
end

local SPECIAL = { 0, -1, 1, 2, 3, 4, 255, 256, 65534, 65535, 65536, 2 ^ 31 - 1, 2 ^ 31,
  2 ^ 32, 2 ^ 32 + 1, 2 ^ 53, 2 ^ 60, 1e30, -1e30, 1e300, 0.5, -0.0, 1e-40, 5120, 5121, 5123,
  5125, 5126, 7 }

local function edit_json(doc)
  local nums, tabs = slots(doc)
  for _ = 1, math.random(1, 3) do
    local r = math.random()
    if r < 0.55 and #nums > 0 then
      local s = nums[math.random(#nums)]
      local v = tonumber(s[1][s[2]]) or 0
      local m = math.random(4)
      if m == 1 then s[1][s[2]] = v + math.random(-3, 3)
      elseif m == 2 then s[1][s[2]] = -v
      elseif m == 3 then s[1][s[2]] = v * (2 ^ math.random(-8, 40))
      else s[1][s[2]] = SPECIAL[math.random(#SPECIAL)] end
    elseif r < 0.7 and #tabs > 0 then -- drop a key or an element
      local s = tabs[math.random(#tabs)]
      local t = s[1][s[2]]
      if type(t) == "table" and #t > 0 then
        table.remove(t, math.random(#t))
      elseif type(t) == "table" then -- (t may have been replaced by an earlier edit)
        local keys = {}
        for k in pairs(t) do keys[#keys + 1] = k end
        if #keys > 0 then t[keys[math.random(#keys)]] = nil end
      end
    elseif r < 0.8 and #tabs > 0 then -- duplicate an array element
      local t = tabs[math.random(#tabs)]
      t = t[1][t[2]]
      if type(t) == "table" and #t > 0 then table.insert(t, math.random(#t + 1), t[math.random(#t)]) end
    elseif r < 0.9 and #tabs > 1 then -- move a subtree somewhere else
      local a, b = tabs[math.random(#tabs)], tabs[math.random(#tabs)]
      a[1][a[2]] = b[1][b[2]]
    elseif #nums > 0 then -- a number becomes a string, boolean or table
      local s = nums[math.random(#nums)]
      s[1][s[2]] = ({ "1", true, {}, cjson.null })[math.random(4)]
    end
  end
  local ok, text = pcall(cjson.encode, doc)
  return ok and text or nil
end

local function edit_bytes(bytes)
  for _ = 1, math.random(1, 4) do
    local r = math.random()
    local at = math.random(1, #bytes)
    if r < 0.45 then -- bit flips (b xor 2^k, without 5.3's operators)
      local b, bit = bytes:byte(at), 2 ^ math.random(0, 7)
      b = math.floor(b / bit) % 2 == 1 and b - bit or b + bit
      bytes = bytes:sub(1, at - 1) .. string.char(b) .. bytes:sub(at + 1)
    elseif r < 0.6 then -- truncation
      bytes = bytes:sub(1, at)
    elseif r < 0.8 then -- a run of one byte value
      local n = math.random(1, 16)
      bytes = bytes:sub(1, at - 1) .. string.char(({ 0, 0xff, 0x7f, 0x80 })[math.random(4)]):rep(n)
        .. bytes:sub(at + n)
    else -- a 32-bit little-endian value somewhere (lengths, counts)
      local v = ({ 0, 0xffffffff, 0x7fffffff, 0x80000000, math.random(0, 2 ^ 20) })[math.random(5)]
      bytes = bytes:sub(1, at - 1) .. H.pack("<I4", v) .. bytes:sub(at + 4)
    end
  end
  return bytes
end

-- One mutated file from a random source: { bytes, opts, how }.
local function mutant(sources)
  local src = sources[math.random(#sources)]
  local opts = { base_dir = src.base_dir, clips = false }
  local r = math.random()
  if r < 0.5 then
    local text = src.json
    local doc = cjson.decode(text)
    local edited = edit_json(doc)
    if not edited then return { src.bytes, opts, "json (unencodable, original)" } end
    return { src.bin and glb_pack(edited, src.bin) or edited, opts, "json" }
  elseif r < 0.65 and src.bin then -- BIN chunk damage inside a well-formed container
    return { glb_pack(src.json, edit_bytes(src.bin)), opts, "bin" }
  end
  return { edit_bytes(src.bytes), opts, "bytes" }
end

local function load_sources()
  local out = {}
  for _, s in ipairs(SOURCES) do
    local bytes = read(s.path)
    local entry = { bytes = bytes, base_dir = s.base_dir }
    if s.path:match("%.glb$") then
      entry.json, entry.bin = glb_split(bytes)
    else
      entry.json = bytes
    end
    out[#out + 1] = entry
  end
  return out
end

local function run(iterations)
  local sources = load_sources()
  local loaded, failed = 0, 0
  for n = 1, iterations do
    local m = mutant(sources)
    local ok, res = pcall(gltf.load_bytes, m[1], m[2])
    if ok then
      local okc, err = pcall(check_asset, res)
      if not okc then
        local name = os.tmpname()
        local f = io.open(name, "wb")
        f:write(m[1])
        f:close()
        error(("mutant %d (%s) loaded but fails its checks: %s (saved as %s)"):format(n, m[3],
          tostring(err), name))
      end
      loaded = loaded + 1
    else
      failed = failed + 1
      if type(res) ~= "string" or res:sub(1, 13) ~= "limber.gltf: " then
        local name = os.tmpname()
        local f = io.open(name, "wb")
        f:write(m[1])
        f:close()
        error(("mutant %d (%s): error not naming limber.gltf: %s (saved as %s)"):format(n, m[3],
          tostring(res), name))
      end
    end
  end
  return loaded, failed
end

describe("glTF structured fuzzing", function()
  it("loads the unmutated sources and they pass check_asset", function()
    for _, s in ipairs(SOURCES) do check_asset(gltf.load(s.path, { clips = false })) end
  end)

  it("loads or refuses 300 mutants with limber.gltf errors", function()
    H.seed("gltf fuzz quick")
    local loaded, failed = run(300)
    assert.are.equal(300, loaded + failed)
    assert.is_true(failed > 0 and loaded > 0, ("loaded %d, failed %d"):format(loaded, failed))
  end)

  it("loads or refuses many mutants #slow", function()
    H.seed("gltf fuzz long")
    local n = tonumber(os.getenv("LIMBER_FUZZ_ITERATIONS")) or 20000
    local loaded, failed = run(n)
    io.stderr:write(("[gltf fuzz: %d loaded, %d refused]\n"):format(loaded, failed))
    assert.are.equal(n, loaded + failed)
  end)
end)
