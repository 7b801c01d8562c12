-- Hostile glTF files (issue 13, items 11 to 13): external buffer files that
-- are FIFOs, devices, directories, symlinks out of the model's folder, or
-- shorter or longer than their byteLength; memory amplification (many
-- empty nodes, many channels, many clips) counted against max_bytes; node
-- world matrices in C (a long chain, and a random tree against the plain
-- Lua product); arrays given as JSON objects; skin.skeleton not a common
-- root; a skinned primitive without POSITION; wrong argument types to the
-- public functions of limber.gltf. Every file is generated here, at test
-- time, in a temporary folder.
local H = require "spec.helper"
local cjson = require "cjson"
local gltf = require "limber.gltf"
local lmath = require "limber.math"

local function refused(text, fn)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an error containing: " .. text)
  assert.is_string(err)
  assert.truthy(err:find(text, 1, true), ("%q does not contain %q"):format(err, text))
  return err
end

local function sh(cmd)
  local ok = os.execute(cmd)
  assert.is_true(ok == true or ok == 0, cmd)
end

local function write(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end

local function floats(t) return H.pack("<" .. ("f"):rep(#t), H.tunpack(t)) end

-- A .gltf whose one buffer is the external file `uri` of `len` bytes, with
-- a VEC2 float accessor over its first 8 bytes (a texcoord of a point).
local function external_doc(uri, len)
  return cjson.encode {
    asset = { version = "2.0" },
    buffers = { { uri = uri, byteLength = len } },
    bufferViews = { { buffer = 0, byteLength = 8 } },
    accessors = {
      { bufferView = 0, componentType = 5126, count = 1, type = "VEC2" },
      { componentType = 5126, count = 1, type = "VEC3" },
    },
    meshes = { { primitives = { { attributes = { POSITION = 1, TEXCOORD_0 = 0 } } } } },
    nodes = { { mesh = 0 } },
  }
end

-- ---- external buffer files ---------------------------------------------------

describe("hostile files: external buffers", function()
  local root, dir, outside
  setup(function()
    root = os.tmpname()
    os.remove(root)
    dir = root .. "/model/"
    outside = root .. "/other/"
    sh(("mkdir -p '%s' '%s'"):format(dir, outside))
    write(dir .. "ok.bin", floats { 0.25, 0.75 })
    write(outside .. "secret.bin", floats { 1, 2, 3, 4 })
    write(dir .. "short.bin", "1234")
    sh(("mkfifo '%sfifo.bin'"):format(dir))
    sh(("ln -s /dev/zero '%szero.bin'"):format(dir))
    sh(("ln -s /etc/passwd '%spasswd.bin'"):format(dir))
    sh(("ln -s '%ssecret.bin' '%sescape.bin'"):format(outside, dir))
    sh(("ln -s ../other/secret.bin '%srelescape.bin'"):format(dir))
    sh(("ln -s ok.bin '%sinside.bin'"):format(dir))
    sh(("mkdir '%ssub'"):format(dir))
    -- 64 MiB of (sparse) zeros after the 8 bytes that are used
    write(dir .. "long.bin", floats { 0.5, 1.5 })
    sh(("truncate -s 67108872 '%slong.bin'"):format(dir))
  end)
  teardown(function()
    if root and root:find("^/tmp/") then os.execute(("rm -rf '%s'"):format(root)) end
  end)

  local function load(uri, len, opts)
    opts = opts or {}
    opts.base_dir, opts.clips = dir, false
    return gltf.load_bytes(external_doc(uri, len or 8), opts)
  end

  it("reads a regular file inside the folder, also through a symlink that stays inside", function()
    for _, uri in ipairs { "ok.bin", "inside.bin", "./ok.bin", "sub/../ok.bin" } do
      if uri:find("%.%.") then
        refused("'..' segments are not allowed", function() load(uri) end)
      else
        local a = load(uri)
        assert.are.same({ 0.25, 0.75 }, a.meshes[1].primitives[1].texcoords[1][1])
      end
    end
  end)

  it("refuses a FIFO without hanging (in a child process with a 10 s limit)", function()
    local code = ([[
      package.path, package.cpath = %q, %q
      local gltf = require "limber.gltf"
      local ok, err = pcall(gltf.load_bytes, %q, { base_dir = %q, clips = false })
      io.write(ok and "loaded" or err)
    ]]):format(package.path, package.cpath, external_doc("fifo.bin", 8), dir)
    local script = root .. "/fifo.lua"
    write(script, code)
    local _, out, status = H.run(("timeout 10 %s '%s'"):format(H.lua_exe, script)) -- this run's Lua
    assert.are_not.equal(124, status, "the load hung on a FIFO: " .. out)
    assert.truthy(out:find("buffers[0]: '" .. dir .. "fifo.bin' is not a regular file", 1, true), out)
  end)

  it("refuses symlinks that resolve outside the folder: /dev/zero, /etc/passwd, a sibling folder", function()
    refused("resolves to '/dev/zero', outside the model's folder", function() load("zero.bin") end)
    refused("resolves to '/etc/passwd', outside the model's folder", function() load("passwd.bin") end)
    refused("secret.bin', outside the model's folder", function() load("escape.bin") end)
    refused("secret.bin', outside the model's folder", function() load("relescape.bin") end)
  end)

  it("refuses ../ and absolute URIs, directories and missing files", function()
    refused("'..' segments are not allowed", function() load("../other/secret.bin") end)
    refused("absolute paths are not allowed", function() load(outside .. "secret.bin") end)
    refused("absolute paths are not allowed", function() load("%2fetc%2fpasswd") end)
    refused("sub' is not a regular file", function() load("sub") end)
    refused("cannot open '" .. dir .. "missing.bin'", function() load("missing.bin") end)
  end)

  it("refuses a file shorter than byteLength", function()
    refused("buffers[0]: byteLength is 8 but '" .. dir .. "short.bin' has only 4 bytes", function()
      load("short.bin")
    end)
  end)

  it("reads only byteLength bytes of a longer file (64 MiB file, 8-byte buffer, 64 KiB budget)", function()
    local a = load("long.bin", 8, { max_bytes = 65536 })
    assert.are.same({ 0.5, 1.5 }, a.meshes[1].primitives[1].texcoords[1][1])
  end)
end)

describe("hostile files: the model path given to gltf.load", function()
  local root
  setup(function()
    root = os.tmpname()
    os.remove(root)
    sh(("mkdir -p '%s/models/sub' '%s/other'"):format(root, root))
    write(root .. "/models/ok.gltf", external_doc("ok.bin", 8))
    write(root .. "/models/ok.bin", floats { 0.25, 0.75 })
    write(root .. "/other/secret.bin", floats { 1, 2 })
    sh(("mkfifo '%s/models/fifo.gltf'"):format(root))
    sh(("ln -s ok.gltf '%s/models/link.gltf'"):format(root))
    sh(("ln -s ../other '%s/models/otherdir'"):format(root))
    write(root .. "/models/through_dir.gltf", external_doc("otherdir/secret.bin", 8))
    sh(("ln -s . '%s/models/alias'"):format(root))
    write(root .. "/models/through_alias.gltf", external_doc("alias/ok.bin", 8))
  end)
  teardown(function()
    if root and root:find("^/tmp/") then os.execute(("rm -rf '%s'"):format(root)) end
  end)

  it("refuses a FIFO at once, without waiting for a writer (child process, 10 s limit)", function()
    local code = ([[
      package.path, package.cpath = %q, %q
      local gltf = require "limber.gltf"
      local t0 = os.time()
      local ok, err = pcall(gltf.load, %q)
      io.write(ok and "loaded" or err, " seconds=", os.time() - t0)
    ]]):format(package.path, package.cpath, root .. "/models/fifo.gltf")
    local script = root .. "/fifo_model.lua"
    write(script, code)
    local _, out, status = H.run(("timeout 10 %s '%s'"):format(H.lua_exe, script)) -- this run's Lua
    assert.are_not.equal(124, status, "gltf.load hung on a FIFO: " .. out)
    assert.truthy(out:find("limber.gltf.load: '" .. root .. "/models/fifo.gltf' is not a regular file", 1, true), out)
    local secs = tonumber(out:match("seconds=(%d+)"))
    assert.is_true(secs ~= nil and secs <= 1, out)
  end)

  it("refuses a directory, /dev/zero and a missing file with a clear error", function()
    refused("limber.gltf.load: '" .. root .. "/models/sub' is not a regular file",
      function() gltf.load(root .. "/models/sub") end)
    refused("limber.gltf.load: '/dev/zero' is not a regular file", function() gltf.load("/dev/zero") end)
    refused("limber.gltf.load: cannot open '" .. root .. "/models/none.gltf'",
      function() gltf.load(root .. "/models/none.gltf") end)
  end)

  it("refuses a socket", function()
    local sock = root .. "/models/sock.gltf"
    local made = os.execute(("python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' '%s'"
      .. " >/dev/null 2>&1"):format(sock))
    if not made then return end -- no python3 here: nothing to test with
    refused("limber.gltf.load: cannot open '" .. sock .. "'", function() gltf.load(sock) end)
  end)

  it("follows a symlink given as the model path (the caller's choice)", function()
    local a = gltf.load(root .. "/models/link.gltf", { clips = false })
    assert.are.same({ 0.25, 0.75 }, a.meshes[1].primitives[1].texcoords[1][1])
    assert.are.equal("link", a.name)
  end)

  it("refuses a model file larger than opts.max_bytes before reading it", function()
    local size = #external_doc("ok.bin", 8)
    refused(("is %d bytes, over the limit of %d bytes (opts.max_bytes)"):format(size, size - 1),
      function() gltf.load(root .. "/models/ok.gltf", { max_bytes = size - 1 }) end)
  end)

  it("checks an external buffer's place on the open file: a symlinked folder out is refused", function()
    refused("secret.bin', outside the model's folder", function() gltf.load(root .. "/models/through_dir.gltf") end)
    -- a symlinked folder that stays inside is fine
    local a = gltf.load(root .. "/models/through_alias.gltf", { clips = false })
    assert.are.same({ 0.25, 0.75 }, a.meshes[1].primitives[1].texcoords[1][1])
  end)
end)

-- ---- amplification -------------------------------------------------------------

describe("hostile files: every derived structure counts against max_bytes", function()
  local function nodes_file(n)
    return '{"asset":{"version":"2.0"},"nodes":[' .. ("{},"):rep(n - 1) .. "{}]}"
  end

  it("refuses 2,000,000 empty nodes (6 MB) at the default budget, quickly", function()
    local text = nodes_file(2000000)
    local t0 = os.clock()
    local err = refused("opts.max_bytes", function() gltf.load_bytes(text) end)
    assert.truthy(err:find("^limber%.gltf: nodes: decoding needs %d+ bytes in all"), err)
    assert.is_true(os.clock() - t0 < 20, "took " .. (os.clock() - t0) .. " s")
  end)

  it("counts nodes: 100,000 empty nodes need more than 16 MB", function()
    refused("limber.gltf: nodes: decoding needs 102400000 bytes in all, over the limit of 16000000",
      function() gltf.load_bytes(nodes_file(100000), { max_bytes = 16000000 }) end)
    local a = gltf.load_bytes(nodes_file(1000), { max_bytes = 16000000 })
    assert.are.equal(1000, #a.nodes)
  end)

  -- one node per skin (each its own skeleton), one 2,000-key sampler
  -- shared by `nch` channels
  local function channels_file(nch, nskins)
    local times, values = {}, {}
    for k = 1, 2000 do
      times[k] = k / 30
      values[#values + 1], values[#values + 2], values[#values + 3] = k, 0, 0
    end
    local bytes = floats(times) .. floats(values)
    local doc = {
      asset = { version = "2.0" },
      buffers = { { byteLength = #bytes, uri = "data:application/octet-stream;base64," .. H.base64(bytes) } },
      bufferViews = { { buffer = 0, byteLength = 8000 }, { buffer = 0, byteOffset = 8000, byteLength = 24000 } },
      accessors = { { bufferView = 0, componentType = 5126, count = 2000, type = "SCALAR" },
                    { bufferView = 1, componentType = 5126, count = 2000, type = "VEC3" } },
      nodes = {}, skins = {},
    }
    for s = 1, nskins do
      doc.nodes[s] = { name = "j" .. s }
      doc.skins[s] = { joints = { s - 1 } }
    end
    if nskins == 0 then doc.nodes[1], doc.skins = {}, nil end
    local ch = {}
    for c = 1, nch do ch[c] = { sampler = 0, target = { node = (c - 1) % #doc.nodes, path = "translation" } } end
    doc.animations = { { samplers = { { input = 0, output = 1 } }, channels = ch } }
    return cjson.encode(doc)
  end

  it("counts channels: 100,000 channels sharing one 2,000-key sampler", function()
    local text = channels_file(100000, 0)
    refused("animations[0]: decoding needs", function()
      gltf.load_bytes(text, { max_bytes = 16000000, clips = false })
    end)
    local a = gltf.load_bytes(text, { max_bytes = 64000000, clips = false })
    assert.are.equal(100000, #a.animations[1].channels)
    assert.are.equal(a.animations[1].channels[1].times, a.animations[1].channels[100000].times)
  end)

  it("counts the clips built per skeleton: 20 skeletons x 10,000 channels", function()
    local text = channels_file(10000, 20)
    refused("animations[0]: decoding needs", function() gltf.load_bytes(text, { max_bytes = 16000000 }) end)
  end)

  it("counts the skeletons of skins deep in a long chain", function()
    -- a 5,000-node chain; skin k joins nodes k and 5,000 - k: 40 skins,
    -- each a separate skeleton of about 5,000 - 2k joints
    local n, doc = 5000, { asset = { version = "2.0" }, nodes = {}, skins = {} }
    for k = 1, n do doc.nodes[k] = k < n and { children = { k } } or { name = "leaf" } end
    for k = 1, 40 do doc.skins[k] = { joints = { k - 1, n - k } } end
    refused("skins[", function() gltf.load_bytes(cjson.encode(doc), { max_bytes = 20000000, clips = false }) end)
  end)
end)

-- ---- world matrices -------------------------------------------------------------

describe("hostile files: node world matrices (computed in C, one pass)", function()
  local function plain_world(nodes, i, locals)
    local node = nodes[i]
    local l = locals and locals[i] or node.local_matrix
    if not node.parent then return l end
    return lmath.mul(plain_world(nodes, node.parent, locals), l)
  end

  it("match the plain Lua product on random trees, in any node order (seed printed)", function()
    local seed = os.time()
    print("hostile_files world seed " .. seed)
    math.randomseed(seed)
    for _ = 1, 5 do
      local n = math.random(2, 60)
      local doc = { asset = { version = "2.0" }, nodes = {} }
      for k = 1, n do
        local q = { math.random() - 0.5, math.random() - 0.5, math.random() - 0.5, math.random() - 0.5 }
        doc.nodes[k] = { translation = { math.random() * 4 - 2, math.random() * 4 - 2, math.random() * 4 - 2 },
                         rotation = q, scale = { math.random() + 0.5, math.random() * 2 - 1, math.random() + 0.1 } }
        if math.random() < 0.3 then
          doc.nodes[k] = { matrix = lmath.trs_matrix({ k, 0, 1 }, { 0, 0, 0, 1 }, { 1, 2, 3 }) }
        end
      end
      -- a random forest: about 90% of the nodes get a parent earlier in a
      -- random order, so parents come before or after their children in the file
      local perm = {}
      for k = 1, n do perm[k] = k end
      for k = n, 2, -1 do
        local j = math.random(k)
        perm[k], perm[j] = perm[j], perm[k]
      end
      for k = 2, n do
        if math.random() < 0.9 then
          local p = perm[math.random(k - 1)]
          local c = doc.nodes[p]
          c.children = c.children or {}
          c.children[#c.children + 1] = perm[k] - 1
        end
      end
      local a = gltf.load_bytes(cjson.encode(doc))
      for i = 1, n do
        assert.near(plain_world(a.nodes, i), a.nodes[i].world, 1e-9)
        assert.are.equal(a.nodes[i].world, a.nodes[i].rest_world)
      end
      local locals = {}
      for i = 1, n, 2 do locals[i] = lmath.trs_matrix({ i, 1, 2 }, { 0, 0.6, 0, 0.8 }, { 1, 1, 2 }) end
      gltf.update_worlds(a, locals)
      for i = 1, n do assert.near(plain_world(a.nodes, i, locals), a.nodes[i].world, 1e-9) end
    end
  end)

  it("loads a 65,535-node chain fast and gets its bottom world right", function()
    local n = 65535
    local parts = {}
    for k = 1, n do
      parts[k] = k < n and ('{"translation":[0,0.5,0],"children":[%d]}'):format(k) or '{"translation":[0,0.5,0]}'
    end
    local text = '{"asset":{"version":"2.0"},"nodes":[' .. table.concat(parts, ",") .. "]}"
    local t0 = os.clock()
    local a = gltf.load_bytes(text)
    local t = os.clock() - t0
    assert.near({ 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, n * 0.5, 0, 1 }, a.nodes[n].world, 1e-9)
    -- generous bounds against a hang or a quadratic pass (speed is the
    -- benchmarks' job): 1.3 s to load and 0.2 s for update_worlds here
    assert.is_true(t < 60, "took " .. t .. " s")
    t0 = os.clock()
    gltf.update_worlds(a)
    assert.is_true(os.clock() - t0 < 20, "update_worlds took " .. (os.clock() - t0) .. " s")
  end)

  it("update_worlds checks everything before changing any node", function()
    local a = gltf.load_bytes(cjson.encode { asset = { version = "2.0" },
      nodes = { { children = { 1 } }, { translation = { 1, 2, 3 } } } })
    local w1, w2 = a.nodes[1].world, a.nodes[2].world
    refused("locals[2] must be a table of 16 finite numbers", function()
      gltf.update_worlds(a, { [1] = lmath.trs_matrix({ 5, 5, 5 }, { 0, 0, 0, 1 }, { 1, 1, 1 }), [2] = { 1, 2 } })
    end)
    local nan = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0 / 0, 0, 0, 1 }
    refused("locals[2] must be a table of 16 finite numbers", function() gltf.update_worlds(a, { [2] = nan }) end)
    assert.are.equal(w1, a.nodes[1].world)
    assert.are.equal(w2, a.nodes[2].world)
  end)
end)

-- ---- smaller ones ------------------------------------------------------------------

describe("hostile files: arrays, skins and scales", function()
  local function text(doc) return cjson.encode(doc) end

  it("refuses arrays given as JSON objects, empty or not", function()
    local base = '{"asset":{"version":"2.0"},%s}'
    refused("limber.gltf: nodes: nodes must be an array", function()
      gltf.load_bytes(base:format('"nodes": { }'))
    end)
    refused("limber.gltf: nodes: nodes must be an array", function()
      gltf.load_bytes(base:format('"nodes": {"a": {}}'))
    end)
    refused("limber.gltf: scenes: scenes must be an array", function()
      gltf.load_bytes(base:format('"nodes": [], "scenes": {}'))
    end)
    refused("limber.gltf: nodes[0]: children must be an array", function()
      gltf.load_bytes(base:format('"nodes": [{"children": {}}]'))
    end)
    refused("limber.gltf: buffers: buffers must be an array", function()
      gltf.load_bytes(base:format('"buffers": {}'))
    end)
    -- empty arrays, empty objects where objects belong, "{}" inside strings: fine
    local a = gltf.load_bytes(base:format('"nodes": [{"name": "{}", "extras": {}}], "scenes": [], "skins": []'))
    assert.are.equal("{}", a.nodes[1].name)
  end)

  -- joints: nodes 1 and 2 children of node 0; node 3 a separate root
  local function skin_doc(skeleton)
    return { asset = { version = "2.0" },
             nodes = { { children = { 1, 2 } }, { name = "a" }, { name = "b" }, { name = "other" } },
             skins = { { joints = { 1, 2 }, skeleton = skeleton } } }
  end

  it("checks that skin.skeleton is a common root of the joints", function()
    for _, s in ipairs { 0 } do
      assert.are.equal(s + 1, gltf.load_bytes(text(skin_doc(s))).skins[1].skeleton_node)
    end
    refused("skins[0]: skeleton node 3 is not an ancestor of joint 1 (joints[0])", function()
      gltf.load_bytes(text(skin_doc(3)))
    end)
    refused("skins[0]: skeleton node 1 is not an ancestor of joint 2 (joints[1])", function()
      gltf.load_bytes(text(skin_doc(1)))
    end)
    local doc = skin_doc(1)
    doc.skins[1].joints = { 1 }
    assert.are.equal(2, gltf.load_bytes(text(doc)).skins[1].skeleton_node) -- the joint itself
  end)

  it("refuses a skinned primitive without POSITION at load", function()
    local j = H.pack("<I2I2I2I2", 0, 0, 0, 0)
    local w = floats { 1, 0, 0, 0 }
    local bytes = j .. w
    local doc = {
      asset = { version = "2.0" },
      buffers = { { byteLength = #bytes, uri = "data:application/octet-stream;base64," .. H.base64(bytes) } },
      bufferViews = { { buffer = 0, byteLength = 8 }, { buffer = 0, byteOffset = 8, byteLength = 16 } },
      accessors = { { bufferView = 0, componentType = 5123, count = 1, type = "VEC4" },
                    { bufferView = 1, componentType = 5126, count = 1, type = "VEC4" } },
      meshes = { { primitives = { { attributes = { JOINTS_0 = 0, WEIGHTS_0 = 1 } } } } },
      nodes = { { name = "joint" }, { mesh = 0, skin = 0 } },
      skins = { { joints = { 0 } } },
    }
    refused("nodes[1]: skinned, but meshes[0].primitives[0] has no POSITION", function()
      gltf.load_bytes(text(doc))
    end)
    doc.nodes[2].skin = nil -- unskinned, the same primitive still loads
    assert.are.equal(1, gltf.load_bytes(text(doc)).meshes[1].primitives[1].vertex_count)
  end)

  it("gives matrix and TRS nodes with zero scales the same local matrix (seed printed)", function()
    local seed = os.time() + 1
    print("hostile_files zero-scale seed " .. seed)
    math.randomseed(seed)
    for _ = 1, 50 do
      local q = { math.random() - 0.5, math.random() - 0.5, math.random() - 0.5, math.random() - 0.5 }
      local len = math.sqrt(q[1] ^ 2 + q[2] ^ 2 + q[3] ^ 2 + q[4] ^ 2)
      for k = 1, 4 do q[k] = q[k] / len end
      local s = { math.random() * 3 - 1.5, math.random() * 3 - 1.5, math.random() * 3 - 1.5 }
      for k = 1, 3 do if math.random() < 0.5 then s[k] = 0 end end
      local t = { math.random(), math.random(), math.random() }
      local m = lmath.trs_matrix(t, q, s)
      local a = gltf.load_bytes(text { asset = { version = "2.0" },
        nodes = { { matrix = m }, { translation = t, rotation = q, scale = s } } })
      local mn, tn = a.nodes[1], a.nodes[2]
      assert.near(m, mn.local_matrix, 1e-6)
      assert.near(tn.local_matrix, mn.local_matrix, 1e-6)
      -- the matrix node's decomposition reproduces it
      assert.near(m, lmath.trs_matrix(mn.translation, mn.rotation, mn.scale), 1e-6)
    end
  end)
end)

-- ---- argument checks ---------------------------------------------------------------

describe("hostile files: wrong argument types to limber.gltf", function()
  local asset
  setup(function() asset = gltf.load(H.assets .. "SimpleSkin/SimpleSkin.gltf") end)

  local function bad(pattern, fn, ...)
    local ok, err = pcall(fn, ...)
    assert.is_false(ok)
    assert.is_string(err)
    assert.falsy(err:find("attempt to", 1, true), err)
    assert.truthy(err:find(pattern, 1, true), ("%q does not contain %q"):format(err, pattern))
  end

  it("raises bad argument errors, never raw Lua errors", function()
    bad("bad argument #1 to 'limber.gltf.info' (glTF asset expected, got nil)", gltf.info, nil)
    bad("bad argument #1 to 'limber.gltf.info' (glTF asset expected, got a table without 'nodes')", gltf.info, {})
    bad("bad argument #1 to 'limber.gltf.describe' (glTF asset expected, got number)", gltf.describe, 5)
    bad("bad argument #1 to 'limber.gltf.update_worlds' (glTF asset expected, got string)", gltf.update_worlds, "x")
    bad("bad argument #2 to 'limber.gltf.update_worlds' (table expected, got number)", gltf.update_worlds, asset, 3)
    bad("bad argument #1 to 'limber.gltf.pose' (glTF asset expected, got boolean)", gltf.pose, true)
    bad("bad argument #2 to 'limber.gltf.pose' (skeleton index (integer) expected, got string)", gltf.pose, asset, "1")
    bad("bad argument #2 to 'limber.gltf.pose' (skeleton index (integer) expected, got table)", gltf.pose, asset, {})
    bad("bad argument #3 to 'limber.gltf.pose' (instance count (integer) expected, got table)", gltf.pose, asset, 1, {})
    bad("bad argument #3 to 'limber.gltf.pose' (instance count must be at least 1, got 0)", gltf.pose, asset, 1, 0)
    bad("limber.gltf.pose: skeleton 2 does not exist (the asset has 1)", gltf.pose, asset, 2)
    bad("bad argument #3 to 'limber.gltf.pose' (instance count 1099511627776 out of range", gltf.pose, asset, 1,
      H.tointeger(2 ^ 40))
    bad("bad argument #1 to 'limber.gltf.palette' (glTF asset expected, got nil)", gltf.palette)
    bad("bad argument #2 to 'limber.gltf.palette' (limber.Pose expected, got nil)", gltf.palette, asset)
    local pose = gltf.pose(asset)
    bad("bad argument #2 to 'limber.gltf.palette' (limber.Pose expected, got number)", gltf.palette, asset, 1, pose)
    bad("bad argument #3 to 'limber.gltf.palette' (options table expected, got string)", gltf.palette, asset, pose,
      "mat4")
    bad("bad argument #3 to 'limber.gltf.palette' (unknown option 'layuot')", gltf.palette, asset, pose,
      { layuot = "mat4" })
    bad("bad argument #3 to 'limber.gltf.palette' (option 'skin' must be an integer, got string)", gltf.palette,
      asset, pose, { skin = "1" })
    bad("bad argument #3 to 'limber.gltf.palette' (option 'layout' must be a string, got number)", gltf.palette,
      asset, pose, { layout = 4 })
    bad("bad argument #3 to 'limber.gltf.palette' (option 'layout' must be \"mat4\" or \"mat3x4\", got \"mat5\")",
      gltf.palette, asset, pose, { layout = "mat5" })
    bad("limber.gltf.palette: skin 2 does not exist (the asset has 1)", gltf.palette, asset, pose, { skin = 2 })
    local other = require("limber").pose((require("limber").skeleton { { name = "x" } }))
    bad("bad argument #2 to 'limber.gltf.palette' (the pose is not of skin 1's skeleton", gltf.palette, asset, other)
    bad("bad argument #1 to 'limber.math.trs_matrix' (table of 3 finite numbers expected, got nil)", lmath.trs_matrix)
    bad("bad argument #2 to 'limber.math.trs_matrix' (table of 4 finite numbers expected, got table)", lmath.trs_matrix,
      { 0, 0, 0 }, { 0, 0, 0 }, { 1, 1, 1 })
    bad("bad argument #2 to 'limber.math.mul' (table of 16 finite numbers expected, got string)", lmath.mul,
      asset.nodes[1].world, "x")
    bad("bad argument #1 to 'limber.math.decompose' (table of 16 finite numbers expected, got nil)", lmath.decompose)
    bad("bad argument #1 to 'limber.gltf.load_bytes' (string expected, got nil)", gltf.load_bytes)
    bad("bad argument #2 to 'limber.gltf.load_bytes' (options table expected, got string)", gltf.load_bytes, "{}",
      "opts")
    bad("bad argument #1 to 'limber.gltf.load' (string expected, got table)", gltf.load, {})
    bad("bad argument #2 to 'limber.gltf.load' (options table expected, got number)", gltf.load, "x.gltf", 1)
    bad("bad argument #2 to 'limber.gltf.load' (unknown option 'clip')", gltf.load, "x.gltf", { clip = false })
    bad("bad argument #2 to 'limber.gltf.load_bytes' (option 'max_bytes' must be a number, got string)",
      gltf.load_bytes, "{}", { max_bytes = "big" })
    bad("bad argument #2 to 'limber.gltf.load_bytes' (option 'max_bytes' must be a non-negative number)",
      gltf.load_bytes, "{}", { max_bytes = -1 })
    bad("bad argument #2 to 'limber.gltf.load_bytes' (option 'base_dir' must be a string, got number)",
      gltf.load_bytes, "{}", { base_dir = 1 })
    bad("bad argument #2 to 'limber.gltf.load_bytes' (option 'clips' must be a boolean, got number)",
      gltf.load_bytes, "{}", { clips = 0 })
    -- the right types still work
    assert.are.equal(16, #lmath.mul(asset.nodes[1].world, asset.nodes[1].world))
    assert.is_string(gltf.describe(asset))
    local pal = gltf.palette(asset, pose, { layout = "mat3x4" })
    assert.are.equal("limber.Palette", require("limber.check").typename(pal))
  end)
end)
