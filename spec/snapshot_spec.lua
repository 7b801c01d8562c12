-- Binary snapshots (issue 17): limber.snapshot.save / load / read / write.
-- Every bundled model, loaded with packed and with exact clips, survives
-- the round trip: the loaded value has the same graph (tables, shared and
-- cyclic references, numbers to the bit, strings) and equal objects
-- (buffers byte for byte, skeletons, skins, clips sampled at many times on
-- every path, their events), and saves back to the very same bytes. Random
-- value graphs and random clips round-trip too. Hostile blobs (every
-- truncation, random byte and field damage, a newer version, the other
-- byte order) are refused by name or, when the damage is harmless, give
-- objects that work; values a snapshot cannot hold are refused by name.
local H = require "spec.helper"
local limber = require "limber"
local anim = require "limber.anim"
local gltf = require "limber.gltf"
local snapshot = require "limber.snapshot"
local skinning = require "limber.skinning"

H.seed("snapshot")

local MODELS = {
  "CesiumMan/CesiumMan.gltf", "Fox/Fox.glb", "RiggedFigure/RiggedFigure.glb",
  "RiggedSimple/RiggedSimple.gltf", "SimpleSkin/SimpleSkin.gltf",
  "InterpolationTest/InterpolationTest.gltf",
}

-- ---- comparing value graphs --------------------------------------------------

local function class_of(v)
  local mt = getmetatable(v)
  return type(mt) == "table" and mt.__name or type(v)
end

local function same_number(a, b)
  if a ~= a then return b ~= b end
  if H.math_type(a) ~= H.math_type(b) then return false end
  return a == b and (a ~= 0 or 1 / a == 1 / b)
end

local function same_list(a, b)
  if #a ~= #b then return false end
  for k = 1, #a do if not same_number(a[k], b[k]) then return false end end
  return true
end

local TIMES = { 0, 0.001, 0.1, 0.25, 1 / 3, 0.5, 0.77, 1, 1.5, 2.2, 3.4, 7.9, 100 }

-- Objects a and b (one class) hold the same data; fails with `path`.
local function same_object(a, b, path)
  local cls = class_of(a)
  if cls == "limber.Buffer" then
    assert.equal(a:bytes(), b:bytes(), path .. ": buffer bytes")
    assert.equal(a:width(), b:width(), path)
    assert.equal(a:element_count(), b:element_count(), path)
  elseif cls == "limber.Skeleton" then
    assert.equal(a:joint_count(), b:joint_count(), path)
    assert.equal(a:rig_hash(), b:rig_hash(), path)
    for j = 1, a:joint_count() do
      assert.equal(a:parent(j), b:parent(j), path)
      assert.equal(a:name(j), b:name(j), path)
      if a:name(j) then assert.equal(j, b:find(a:name(j)), path) end
      local ta, ra, sa = a:rest_trs(j)
      local tb, rb, sb = b:rest_trs(j)
      assert.is_true(same_list(ta, tb) and same_list(ra, rb) and same_list(sa, sb),
        path .. ": rest " .. j)
      assert.is_true(same_list(a:inverse_bind(j), b:inverse_bind(j)), path .. ": ibm " .. j)
    end
  elseif cls == "limber.Skin" then
    assert.equal(a:joint_count(), b:joint_count(), path)
    for k = 1, a:joint_count() do
      assert.equal(a:joint(k), b:joint(k), path)
      assert.is_true(same_list(a:inverse_bind(k), b:inverse_bind(k)), path)
    end
    assert.equal(a:skeleton():rig_hash(), b:skeleton():rig_hash(), path)
  elseif cls == "limber.SkinMesh" then
    for _, m in ipairs({ "vertex_count", "has_normals", "has_tangents", "joint_limit" }) do
      assert.equal(a[m](a), b[m](b), path .. ": mesh:" .. m .. "()")
    end
    assert.same(a:influence_counts(), b:influence_counts(), path)
    assert.equal(a:gpu_permutation_buffer():bytes(), b:gpu_permutation_buffer():bytes(), path)
    assert.equal(a:gpu_inverse_permutation_buffer():bytes(),
      b:gpu_inverse_permutation_buffer():bytes(), path)
    local ia, ib = a:gpu_index_buffer(), b:gpu_index_buffer()
    assert.equal(ia and ia:bytes(), ib and ib:bytes(), path)
    assert.equal(a:skin() == nil, b:skin() == nil, path)
  elseif cls == "limber.Clip" then
    for _, m in ipairs({ "duration", "name", "joint_span", "key_count", "track_count", "dense",
                         "packed", "bytes", "rig_hash" }) do
      assert.is_true(a[m](a) == b[m](b), path .. ": clip:" .. m .. "()")
    end
    assert.same(a:error(), b:error(), path)
    assert.same(a:node_tracks(), b:node_tracks(), path)
    assert.same(anim.events(a), anim.events(b), path .. ": events")
    for _, t in ipairs(TIMES) do
      for _, loop in ipairs({ true, false }) do
        for j = 1, a:joint_span() do
          for _, p in ipairs({ "translation", "rotation", "scale" }) do
            local x = { a:sample_joint(j, p, t, loop) }
            local y = { b:sample_joint(j, p, t, loop) }
            assert.is_true(same_list(x, y), ("%s: joint %d %s at %s"):format(path, j, p, t))
          end
        end
        for k = 1, #a:node_tracks() do
          assert.is_true(same_list({ a:sample_node(k, t, loop) }, { b:sample_node(k, t, loop) }),
            path .. ": node track " .. k)
        end
      end
    end
  else
    error(path .. ": unexpected class " .. cls)
  end
end

-- a and b are the same graph: a bijection between their tables and objects,
-- equal scalars (to the bit), equal objects. Iterative (deep graphs); a
-- pair whose key is a table not matched yet waits until it is.
local function same_graph(a, b)
  local map, back = {}, {}
  local todo, waiting = { { a, b, "root" } }, {}
  local function pair(y, k, v, path)
    local kk = k
    if type(k) == "table" or type(k) == "userdata" then kk = map[k] end
    local w = rawget(y, kk)
    assert.is_not_nil(w, path .. "." .. tostring(k) .. " missing")
    todo[#todo + 1] = { v, w, path .. "." .. tostring(k) }
  end
  while #todo > 0 or #waiting > 0 do
    if #todo == 0 then
      local still = {}
      for _, e in ipairs(waiting) do
        if map[e[2]] ~= nil then pair(e[1], e[2], e[3], e[4]) else still[#still + 1] = e end
      end
      assert.is_true(#still < #waiting, "table keys never matched")
      waiting = still
    else
      local x, y, path = H.tunpack(table.remove(todo))
      local tx, ty = type(x), type(y)
      assert.equal(tx, ty, path .. ": type")
      if tx == "number" then
        assert.is_true(same_number(x, y), path .. (": %s vs %s"):format(tostring(x), tostring(y)))
      elseif tx == "table" or tx == "userdata" then
        if map[x] ~= nil or back[y] ~= nil then
          assert.is_true(map[x] == y and back[y] == x, path .. ": sharing differs")
        else
          map[x], back[y] = y, x
          if tx == "userdata" then
            assert.equal(class_of(x), class_of(y), path)
            same_object(x, y, path)
          else
            assert.is_nil(getmetatable(y), path)
            local n, m = 0, 0
            for k, v in pairs(x) do
              n = n + 1
              if (type(k) == "table" or type(k) == "userdata") and map[k] == nil then
                waiting[#waiting + 1] = { y, k, v, path }
              else
                pair(y, k, v, path)
              end
            end
            for _ in pairs(y) do m = m + 1 end
            assert.equal(n, m, path .. ": key count")
          end
        end
      else
        assert.equal(x, y, path)
      end
    end
  end
end

-- Every pose a sampler writes from clips `a` equals the one from `b`, bit
-- for bit, on both SIMD levels.
local function same_sampling(skel, a, b)
  local was = limber.core.simd()
  for _, simd in ipairs({ false, true }) do
    limber.core.simd(simd)
    local N = #a
    local pa, pb = limber.pose(skel, N), limber.pose(skel, N)
    local sa, sb = anim.sampler(pa, a), anim.sampler(pb, b)
    for i = 1, N do
      sa:set(i, i, 0, true)
      sb:set(i, i, 0, true)
    end
    for _ = 1, 6 do
      local dt = H.rand(0, 0.3)
      sa:advance(dt)
      sb:advance(dt)
      sa:run()
      sb:run()
      for i = 1, N do
        for j = 1, skel:joint_count() do
          local T1, R1, S1 = pa:trs(i, j)
          local T2, R2, S2 = pb:trs(i, j)
          assert.is_true(same_list(T1, T2) and same_list(R1, R2) and same_list(S1, S2),
            ("instance %d joint %d"):format(i, j))
        end
      end
    end
  end
  limber.core.simd(was)
end

-- ---- random values ------------------------------------------------------------

local EDGE = { 0, -0.0, 1, -1, 0.5, 1 / 0, -1 / 0, 0 / 0, 2 ^ 53, -2 ^ 53, 1e308, 5e-324,
               H.int_max, H.int_min, 3.4e38 }

local function rand_scalar()
  local r = math.random(1, 5)
  if r == 1 then return EDGE[math.random(#EDGE)] end
  if r == 2 then return math.random(-1000, 1000) end
  if r == 3 then return H.rand(-1e6, 1e6) end
  if r == 4 then return math.random() < 0.5 end
  local s = {}
  for k = 1, math.random(0, 40) do s[k] = string.char(math.random(0, 255)) end
  return table.concat(s)
end

-- A random graph of tables: nesting, sharing and cycles; and whether some
-- table is a key (such a graph may save back to other bytes: the order of
-- table keys is the order Lua gives them).
local function rand_graph(n)
  local tables, table_keys = {}, false
  for k = 1, n do tables[k] = {} end
  for k = 1, n do
    local t = tables[k]
    t.next = tables[k + 1] -- every table reachable through values
    for _ = 1, math.random(0, 8) do
      local key, val
      local r = math.random()
      if r < 0.4 then key = #t + 1 elseif r < 0.9 then key = rand_scalar() else
        key, table_keys = tables[math.random(n)], true
      end
      if key ~= key or key == nil then key = "nan" end
      val = math.random() < 0.3 and tables[math.random(n)] or rand_scalar()
      t[key] = val
    end
  end
  return tables[1], table_keys
end

-- ---- specs -------------------------------------------------------------------

describe("limber.snapshot", function()
  local tmp = H.tmpdir(setup, teardown)

  it("round-trips every bundled model, packed and exact: same graph, same objects, same bytes",
    function()
      for _, m in ipairs(MODELS) do
        for _, tol in ipairs({ false, 0 }) do
          local a = gltf.load(H.assets .. m, { tolerance = tol or nil })
          local blob = snapshot.save(a)
          local b = snapshot.load(blob)
          same_graph(a, b)
          assert.equal(blob, snapshot.save(b), m .. ": saves back to other bytes")
          -- the loaded asset works: poses, palettes and clips as the original's
          for si, s in ipairs(a.skeletons) do
            local clips, clips_b = {}, {}
            for _, an in ipairs(a.animations) do
              if an.clips and an.clips[si] then clips[#clips + 1] = an.clips[si] end
            end
            for _, an in ipairs(b.animations) do
              if an.clips and an.clips[si] then clips_b[#clips_b + 1] = an.clips[si] end
            end
            assert.equal(#clips, #clips_b)
            if #clips > 0 then same_sampling(s.skeleton, clips, clips_b) end
          end
          if #a.skins > 0 then
            local pa, pb = gltf.pose(a, 1, 3), gltf.pose(b, 1, 3)
            local la, lb = gltf.palette(a, pa), gltf.palette(b, pb)
            la:update()
            lb:update()
            assert.equal(la:matrix_buffer():bytes(), lb:matrix_buffer():bytes(), m .. ": palettes")
            -- skin meshes (with their skin, and without) round-trip and skin the same
            local sn = a.skinned_nodes[1]
            local prim = a.meshes[sn.mesh].primitives[1]
            local skin = a.skins[sn.skin].skin
            local meshes = {
              skinning.mesh({ positions = prim.positions, normals = prim.normals,
                              gpu_joints = prim.gpu_joints, weights = prim.weights,
                              gpu_indices = prim.gpu_indices, skin = skin }),
              skinning.mesh({ positions = prim.positions, gpu_joints = prim.gpu_joints,
                              weights = prim.weights }) }
            local again = snapshot.load(snapshot.save({ skin = skin, meshes = meshes }))
            same_graph({ skin = skin, meshes = meshes }, again)
            -- one random pose on both skeletons, palettes of both skins
            local sks = { skin:skeleton(), again.skin:skeleton() }
            local poses = { limber.pose(sks[1], 3), limber.pose(sks[2], 3) }
            for i = 1, 3 do
              for j = 1, sks[1]:joint_count() do
                local t, r, sc = H.rand_trs()
                for _, p in ipairs(poses) do p:set_trs(i, j, t, r, sc) end
              end
            end
            for k = 1, 2 do
              local outs = {}
              for w, mesh in ipairs({ meshes[k], again.meshes[k] }) do
                poses[w]:local_to_model()
                local pal = limber.palette(poses[w], { skin = ({ skin, again.skin })[w] })
                pal:update()
                local tg = skinning.target({ mesh = mesh, instances = 3, positions = true })
                skinning.run(mesh, pal, tg)
                outs[w] = tg:position_buffer():bytes()
              end
              assert.equal(outs[1], outs[2], m .. ": skinned positions")
            end
          end
        end
      end
    end)

  it("round-trips random value graphs (sharing, cycles, every kind of number and string)",
    function()
      for _ = 1, 60 do
        local v, table_keys = rand_graph(math.random(1, 30))
        local blob = snapshot.save(v)
        local w = snapshot.load(blob)
        same_graph(v, w)
        if not table_keys then assert.is_true(blob == snapshot.save(w)) end
      end
    end)

  it("round-trips clips built in Lua: exact, packed, node tracks, events and their payloads, "
    .. "every interpolation",
    function()
      local skel = limber.skeleton(H.rand_joints(12, 2))
      local clips = {}
      for k = 1, 8 do
        local tracks = {}
        local n = math.random(2, 12)
        local times = {}
        for i = 1, n do times[i] = (i - 1) * 0.1 end
        for j = 1, 12 do
          if math.random() < 0.7 then
            local interp = ({ "LINEAR", "STEP", "CUBICSPLINE" })[math.random(1, k <= 4 and 3 or 2)]
            local per = interp == "CUBICSPLINE" and 3 or 1
            local tv, rv = {}, {}
            for _ = 1, n * per do
              for _ = 1, 3 do tv[#tv + 1] = H.rand(-1, 1) end
              local q = H.rand_quat()
              for c = 1, 4 do rv[#rv + 1] = q[c] end
            end
            tracks[#tracks + 1] = { joint = j, path = "translation", interpolation = interp,
                                    times = times, values = tv }
            tracks[#tracks + 1] = { joint = j, path = "rotation", interpolation = interp,
                                    times = times, values = rv }
          end
        end
        tracks[#tracks + 1] = { node = 7, path = "translation", times = { 0, 1 },
                                values = { 0, 0, 0, 1, 2, 3 } }
        -- payloads: a table on some clips' events, a string on one, none on the rest
        local data = k % 2 == 0 and { foot = "left", strength = k, tags = { "a", "b" } }
          or (k == 3 and "whoosh" or nil)
        local clip = anim.clip({ name = "clip" .. k, tracks = tracks, pack = false, events = {
          { time = 0, name = "start" }, { time = 0.05 * k, name = "mid", data = data },
          { time = 1, name = "end" } } }, skel)
        if data ~= nil then assert.same(data, anim.events(clip)[2].data) end
        clips[#clips + 1] = clip
        if k > 4 then clips[#clips + 1] = anim.pack(clip, skel, { tolerance = 1e-3 }) end
      end
      local blob = snapshot.save({ skel = skel, clips = clips })
      local v = snapshot.load(blob)
      same_graph({ skel = skel, clips = clips }, v)
      same_sampling(v.skel, clips, v.clips)
      -- the same bytes again: events a packed clip shares with its source
      -- stay shared through the load (they once came back as two tables)
      assert.is_true(blob == snapshot.save(v))
      for _, c in ipairs(v.clips) do assert.is_true(anim.fits(c, v.skel)) end
    end)

  it("writes and reads files; refuses FIFOs, directories and missing files at once", function()
    local a = gltf.load(H.assets .. "CesiumMan/CesiumMan.gltf")
    local path = tmp() .. "/cesium.snap"
    snapshot.write(path, a)
    same_graph(a, snapshot.read(path))
    os.execute(("ln -s '%s' '%s/link.snap'"):format(path, tmp()))
    same_graph(a, snapshot.read(tmp() .. "/link.snap"))
    assert.error_matches(function() snapshot.read(path, { max_bytes = 100 }) end,
      "over the limit of 100 bytes", 1, true)
    assert(os.execute(("mkfifo '%s/fifo'"):format(tmp())))
    assert.error_matches(function() snapshot.read(tmp() .. "/fifo") end,
      "limber.snapshot.read: '.*' is not a regular file")
    assert.error_matches(function() snapshot.write(tmp() .. "/fifo", a) end,
      "limber.snapshot.write: cannot write")
    assert.error_matches(function() snapshot.read(tmp()) end, "not a regular file")
    assert.error_matches(function() snapshot.write(tmp(), a) end, "limber.snapshot.write: cannot write")
    assert.error_matches(function() snapshot.read(tmp() .. "/none") end,
      "limber.snapshot.read: cannot open")
    -- a write replaces the file in one rename: the old bytes or the new,
    -- never a part; a failed write leaves no temporary file behind
    local small = snapshot.save({ 1, 2, 3 })
    snapshot.write(path, { 1, 2, 3 })
    local f = assert(io.open(path, "rb"))
    assert.is_true(f:read("*a") == small)
    f:close()
    assert.error_matches(function() snapshot.write(tmp() .. "/none/x.snap", a) end,
      "limber.snapshot.write: cannot write")
    local p = assert(io.popen(("ls -A '%s'"):format(tmp())))
    local listing = p:read("*a")
    p:close()
    assert.is_nil(listing:find("XXXX", 1, true) or listing:find("%.snap%.%w%w%w%w%w%w"), listing)
  end)

  it("refuses values a snapshot cannot hold, naming them", function()
    local skel = limber.skeleton({ { name = "a" } })
    local cases = {
      { { f = print }, "cannot store a function" },
      { { co = coroutine.create(function() end) }, "cannot store a thread" },
      { { setmetatable({}, {}) }, "cannot store a table with a metatable" },
      { { limber.pose(skel, 1) }, "cannot store a limber.Pose" },
      { { io.stdout }, "cannot store a " .. (getmetatable(io.stdout).__name or "userdata") },
    }
    for _, c in ipairs(cases) do
      assert.error_matches(function() snapshot.save(c[1]) end, "limber.snapshot.save: " .. c[2], 1,
        true)
    end
    assert.error_matches(function() snapshot.save(nil) end, "bad argument #1 to 'limber.snapshot.save'",
      1, true)
    assert.error_matches(function() snapshot.load(5) end, "bad argument #1 to 'limber.snapshot.load'",
      1, true)
    assert.error_matches(function() snapshot.read({}) end, "bad argument #1 to 'limber.snapshot.read'",
      1, true)
    assert.error_matches(function() snapshot.read("x", { max = 1 }) end, "unknown option 'max'", 1,
      true)
    -- a value that is not a table is fine
    assert.equal("x", snapshot.load(snapshot.save("x")))
    assert.equal(skel:rig_hash(), snapshot.load(snapshot.save(skel)):rig_hash())
  end)

  -- A damaged blob is refused, or (harmless damage) loads into objects that work.
  local function survives(blob)
    local ok, v = pcall(snapshot.load, blob)
    if not ok then
      assert.matches("^[^\n]*limber%.snapshot%.load: ", v)
      return false
    end
    -- use whatever came out
    local todo, seen = { v }, {}
    while #todo > 0 do
      local x = table.remove(todo)
      if type(x) == "table" and not seen[x] then
        seen[x] = true
        for k, w in pairs(x) do todo[#todo + 1] = k; todo[#todo + 1] = w end
      elseif type(x) == "userdata" and not seen[x] then
        seen[x] = true
        local cls = class_of(x)
        if cls == "limber.Clip" then
          for _, t in ipairs({ 0, 0.3, 1e9 }) do
            for j = 1, math.min(x:joint_span(), 30) do x:sample_joint(j, "rotation", t) end
          end
          x:error()
          anim.events(x)
        elseif cls == "limber.Skeleton" then
          x:rig_hash()
          local p = limber.pose(x, 2)
          p:reset()
        elseif cls == "limber.Skin" then
          x:skeleton()
        elseif cls == "limber.Buffer" then
          x:bytes()
        end
      end
    end
    return true
  end

  it("renormalises a packed constant rotation a blob made not unit", function()
    -- a one-key rotation is the one stream a sampler does not interpolate: a
    -- blob from elsewhere may hold any finite value there, and what comes
    -- out must still be a unit rotation
    local J = 8
    local desc, tracks = {}, {}
    for j = 1, J do
      desc[j] = { parent = j > 1 and j - 1 or nil, translation = { 0, 1, 0 } }
      tracks[j] = { joint = j, path = "rotation", times = { 0 }, values = { 0.6, 0, 0, 0.8 } }
    end
    local skel = limber.skeleton(desc)
    local packed = assert(anim.pack(anim.clip({ tracks = tracks, pack = false }, skel), skel))
    assert.is_true(packed:packed())
    local blob = snapshot.save({ clip = packed, skel = skel })
    local at = blob:find(H.pack("<f", 0.6):rep(8), 1, true) -- the x row of the chunk
    assert.truthy(at, "the constant x row is in the blob")
    local v = snapshot.load(blob:sub(1, at - 1) .. H.pack("<f", 3):rep(8) .. blob:sub(at + 32))
    local pose = limber.pose(v.skel, 1)
    local s = anim.sampler(pose, { v.clip })
    s:set(1, 1, 0, false)
    local old = limber.core.simd()
    finally(function() limber.core.simd(old) end)
    for _, simd in ipairs { true, false } do
      limber.core.simd(simd)
      s:run()
      for j = 1, J do
        local _, r = pose:trs(1, j)
        assert.near(1, math.sqrt(r[1] ^ 2 + r[2] ^ 2 + r[3] ^ 2 + r[4] ^ 2), 1e-6)
        assert.near(1, r[1], 1e-6) -- (3, 0, 0, w) with w derived from x, y, z: 0
      end
    end
  end)

  it("reads version 1 blobs, whose packed streams store every lane", function()
    -- version 2 keeps a stream's skip mask (lanes without bits) in a word
    -- version 1 wrote as 0: a version 1 blob reads as every lane stored
    local J = 8
    local desc, tracks, times = {}, {}, { 0, 0.25, 0.5, 0.75, 1 }
    for j = 1, J do
      desc[j] = { parent = j > 1 and j - 1 or nil, translation = { 0, 1, 0 } }
      local v = {}
      for k = 1, #times do
        local a = 0.3 * math.sin(3 * times[k] + j)
        v[#v + 1], v[#v + 2], v[#v + 3], v[#v + 4] = math.sin(a), 0, 0, math.cos(a)
      end
      tracks[j] = { joint = j, path = "rotation", times = times, values = v }
    end
    local skel = limber.skeleton(desc)
    local packed = assert(anim.pack(anim.clip({ tracks = tracks, pack = false }, skel), skel))
    assert.is_true(packed:packed())
    local blob = snapshot.save({ clip = packed })
    assert.equal(snapshot.VERSION, H.unpack("<I4", blob, 9))
    local v1 = snapshot.load(blob:sub(1, 8) .. H.pack("<I4", 1) .. blob:sub(13)).clip
    for _, t in ipairs({ 0, 0.1, 0.4, 0.9 }) do
      for j = 1, J do
        assert.same({ packed:sample_joint(j, "rotation", t) }, { v1:sample_joint(j, "rotation", t) })
      end
    end
  end)

  it("refuses a packed stream whose skip mask, its padding or its record size is damaged", function()
    -- 3 joints in one chunk of 8 lanes: every stream skips lanes 4 to 8
    -- (mask 0xF8). A changed mask changes the record size the rows need, so
    -- the stored one no longer matches and the clip is refused before any
    -- read; the rest of the mask's word and the record size's high byte
    -- must be zero
    local desc, tracks, times = {}, {}, { 0, 0.25, 0.5, 0.75, 1 }
    for j = 1, 3 do
      desc[j] = { parent = j > 1 and j - 1 or nil, translation = { 0, 1, 0 } }
      local r, t = {}, {}
      for k = 1, #times do
        local a = 0.4 * math.sin(3 * times[k] + j)
        r[#r + 1], r[#r + 2], r[#r + 3], r[#r + 4] = math.sin(a), 0, 0, math.cos(a)
        t[#t + 1], t[#t + 2], t[#t + 3] = a, 1, -a
      end
      tracks[#tracks + 1] = { joint = j, path = "rotation", times = times, values = r }
      tracks[#tracks + 1] = { joint = j, path = "translation", times = times, values = t }
    end
    local skel = limber.skeleton(desc)
    local packed = assert(anim.pack(anim.clip({ tracks = tracks, pack = false }, skel), skel,
      { tolerance = 1e-4 }))
    local blob = snapshot.save({ clip = packed })
    same_graph({ clip = packed }, snapshot.load(blob))
    local function with(at, bytes) return blob:sub(1, at - 1) .. bytes .. blob:sub(at + #bytes) end
    -- the mask words of the T and R streams (the S stream skips every lane: 0xFF)
    local words, at = 0, 1
    while true do
      local w = blob:find("\248\0\0\0\0\0\0\0", at, true)
      if not w then break end
      words, at = words + 1, w + 1
      assert.error_matches(function() snapshot.load(with(w, "\0")) end,
        "keys, step or offsets out of range")
      assert.error_matches(function() snapshot.load(with(w + 1, "\1")) end,
        "stream padding is not zero")
      assert.error_matches(function() snapshot.load(with(w - 5, "\1")) end,
        "stream record size 2%d+ is out of range")
    end
    assert.equal(2, words)
  end)

  it("refuses a row's damaged width word or component word by name", function()
    local function axis_angle(ax, a)
      local n = math.sqrt(ax[1] ^ 2 + ax[2] ^ 2 + ax[3] ^ 2)
      local sn = math.sin(a / 2) / n
      return { ax[1] * sn, ax[2] * sn, ax[3] * sn, math.cos(a / 2) }
    end
    local function rotations(desc, amp_axis_turn)
      local skel = limber.skeleton(desc)
      local times, tracks = {}, {}
      for k = 1, 61 do times[k] = (k - 1) / 30 end
      for j = 2, #desc do
        local ax, amp, turn = amp_axis_turn(j)
        local v = {}
        for k, t in ipairs(times) do
          local q = axis_angle(ax, turn + amp * math.sin(2.1 * t + j))
          for c = 1, 4 do v[(k - 1) * 4 + c] = q[c] end
        end
        tracks[#tracks + 1] = { joint = j, path = "rotation", times = times, values = v }
      end
      local packed = anim.pack(anim.clip({ tracks = tracks, pack = false }, skel), skel,
        { tolerance = 1e-4, distance = 0.1 })
      assert.is_true(packed:packed())
      return packed, snapshot.save({ clip = packed })
    end
    local function replaced(blob, at, v)
      return blob:sub(1, at - 1) .. H.pack("<f", v) .. blob:sub(at + 4)
    end
    -- a V row (a width per joint): joint 1 has no track (lane 1 skipped),
    -- joint 2 swings 90 degrees, the others a degree or less; w is derived
    -- and rows 1 to 3 hold x y z. The row's width word: per lane, 3 bits
    -- of reduction from the row's widest lane
    local desc = { { translation = { 0, 0, 0 } } }
    for j = 2, 8 do desc[j] = { parent = 1, translation = { 0.3 * j, 0, 0 } } end
    local packed, blob = rotations(desc, function(j)
      return { 0.3, 1, 0.2 * j }, j == 2 and math.pi / 2 or math.rad(1) / (j - 2), 0
    end)
    local found = 0
    for c = 1, 3 do
      local bits, b, same = {}, 0, true
      for j = 2, 8 do
        bits[j] = select(4, packed:track_keys(j, "rotation"))[c]
        b = math.max(b, bits[j])
        same = same and bits[j] == bits[2]
      end
      assert.equal(0, select(4, packed:track_keys(2, "rotation"))[4]) -- w derived
      if not same and b < 16 then
        local word = 0
        for j = 2, 8 do word = word + math.min(b - bits[j], 7) * 8 ^ (j - 1) end
        local at = blob:find(H.pack("<f", word), 1, true)
        if at then
          found = found + 1
          same_graph({ clip = packed }, snapshot.load(replaced(blob, at, word)))
          for _, bad in ipairs({ word + 1, word + 2 ^ 24, 2 ^ 31, -word, 0.5 }) do
            -- +1: a reduction on the skipped lane; 0.5: not an integer
            assert.error_matches(function() snapshot.load(replaced(blob, at, bad)) end,
              "limber.snapshot.load: .*a row's width word .* is not valid")
          end
        end
      end
    end
    assert.is_true(found > 0, "no V row's width word found in the blob")
    -- a lane's reduction larger than the row's width: the stream's row
    -- kinds (V(b) = 32 + b, bytes 21 to 24 of its 24) made narrower
    local kinds, red = {}, 0
    for c = 1, 3 do
      local b = 0
      for j = 2, 8 do b = math.max(b, select(4, packed:track_keys(j, "rotation"))[c]) end
      kinds[c] = 32 + b
      if c == 1 then
        for j = 2, 8 do red = math.max(red, b - select(4, packed:track_keys(j, "rotation"))[c]) end
      end
    end
    red = math.min(red, 7)
    assert.is_true(red >= 2, "row 1's largest reduction " .. red)
    local at = blob:find(string.char(kinds[1], kinds[2], kinds[3]), 1, true)
    assert.truthy(at, "the rotation stream's kinds are in the blob")
    assert.error_matches(function()
      snapshot.load(blob:sub(1, at - 1) .. string.char(32 + red - 1) .. blob:sub(at + 1))
    end, "limber.snapshot.load: .*a row's width word .* is not valid")
    -- a rotation row 4 that derives a component per lane: joints 2 to 5
    -- turn near 180 degrees about x (x derived: component 0), joints 6 to
    -- 9 a little (w: component 3); the word holds 2 bits per lane
    desc = { { translation = { 0, 0, 0 } } }
    for j = 2, 9 do desc[j] = { parent = j - 1, translation = { 0, 0.2, 0 } } end
    packed, blob = rotations(desc, function(j)
      if j <= 5 then return { 1, 0.05 * j, 0.1 }, 0.3, math.pi end
      return { 0.2, 1, 0.1 * j }, 0.3, 0
    end)
    for j = 2, 9 do
      local bits = select(4, packed:track_keys(j, "rotation"))
      assert.equal(0, bits[j <= 5 and 1 or 4], "joint " .. j)
    end
    -- chunk 1 holds joints 1 to 8: lanes 2 to 5 derive x (0), 6 to 8 w
    -- (3); lane 1 (no track) keeps w, the default
    local word = 3 * (1 + 4 ^ 5 + 4 ^ 6 + 4 ^ 7)
    at = blob:find(H.pack("<f", word), 1, true)
    assert.truthy(at, "the component word is in the blob")
    for _, bad in ipairs({ 65536, word + 0.5, -1 }) do
      assert.error_matches(function() snapshot.load(replaced(blob, at, bad)) end,
        "limber.snapshot.load: .*a row's component word .* is not valid")
    end
  end)

  it("loads SAME rows (uniform scales) and refuses them where no row x precedes", function()
    local desc, tracks, times = {}, {}, { 0, 0.25, 0.5, 0.75, 1 }
    for j = 1, 4 do
      desc[j] = { parent = j > 1 and j - 1 or nil, translation = { 0, 1, 0 } }
      local v = {}
      for k = 1, #times do
        local a = 1 + 0.3 * math.sin(3 * times[k] + j)
        v[#v + 1], v[#v + 2], v[#v + 3] = a, a, a
      end
      tracks[j] = { joint = j, path = "scale", times = times, values = v }
    end
    local skel = limber.skeleton(desc)
    local packed = assert(anim.pack(anim.clip({ tracks = tracks, pack = false }, skel), skel,
      { tolerance = 1e-4 }))
    assert.same(0, select(4, packed:track_keys(1, "scale"))[2])
    local blob = snapshot.save({ clip = packed })
    same_graph({ clip = packed }, snapshot.load(blob))
    -- the scale stream's row kinds: row x, then SAME (7) twice, then none
    local at = blob:find("\7\7\0", 1, true)
    assert.truthy(at, "the scale stream's kinds are in the blob")
    assert.error_matches(function()
      snapshot.load(blob:sub(1, at - 2) .. "\7" .. blob:sub(at))
    end, "limber.snapshot.load: .*row kind 7 is not valid")
    -- and in row w of a stream with three rows (none there)
    assert.error_matches(function()
      snapshot.load(blob:sub(1, at + 1) .. "\7" .. blob:sub(at + 3))
    end, "limber.snapshot.load: .*row kind 7 is not valid")
  end)

  it("refuses hostile blobs by name: truncated, damaged, newer, other byte order", function()
    local skel = limber.skeleton(H.rand_joints(5, 1))
    local clip = anim.clip({ pack = false, events = { { time = 0.5, name = "e" } }, tracks = {
      { joint = 2, path = "rotation", times = { 0, 0.5, 1 },
        values = { 0, 0, 0, 1, 0, 0.7071068, 0, 0.7071068, 0, 0, 0, 1 } },
      { joint = 5, path = "translation", times = { 0, 1 }, values = { 0, 0, 0, 1, 2, 3 } },
      { node = 3, path = "scale", times = { 0, 1 }, values = { 1, 1, 1, 2, 2, 2 } } } }, skel)
    local packed = assert(anim.pack(clip, skel, { tolerance = 1e-3 }))
    local value = { skel = skel, skin = limber.skin(skel), clip = clip, packed = packed,
                    buf = limber.core.buffer("f32", 3, { 1, 2, 3, 4, 5, 6 }), s = "name" }
    local blob = snapshot.save(value)
    same_graph(value, snapshot.load(blob))
    -- every truncation
    for n = 0, #blob - 1 do
      assert.is_false(pcall(snapshot.load, blob:sub(1, n)), "truncated at " .. n)
    end
    assert.error_matches(function() snapshot.load(blob .. "\0") end, "truncated or padded")
    -- the version, the byte order, the magic
    local function with(at, bytes) return blob:sub(1, at - 1) .. bytes .. blob:sub(at + #bytes) end
    assert.error_matches(function() snapshot.load(with(9, H.pack("<I4", snapshot.VERSION + 1))) end,
      "snapshot version " .. (snapshot.VERSION + 1) .. " is newer than this limber's")
    assert.error_matches(function() snapshot.load(with(13, H.pack(">I4", 0x01020304))) end,
      "other byte order")
    assert.error_matches(function() snapshot.load(with(1, "X")) end, "not a limber snapshot")
    -- random damage: bytes, words, and sizes set to extremes
    local hostile = { 0, 1, 0xff, 0x7f, 0x80 }
    local refused, loaded = 0, 0
    for _ = 1, 3000 do
      local b = blob
      for _ = 1, math.random(1, 3) do
        local at = math.random(17, #b)
        local r = math.random()
        local bytes
        if r < 0.5 then
          bytes = string.char(math.random(0, 255))
        elseif r < 0.8 then
          bytes = H.pack("<I4", ({ 0, 1, 0xffffffff, 0x7fffffff, 0x10000, math.random(0, 4096) })
            [math.random(1, 6)])
        else
          bytes = string.rep(string.char(hostile[math.random(#hostile)]), 8)
        end
        b = b:sub(1, at - 1) .. bytes .. b:sub(at + #bytes)
        b = b:sub(1, #blob)
      end
      if survives(b) then loaded = loaded + 1 else refused = refused + 1 end
    end
    assert.is_true(refused > 100 and loaded > 10, ("refused %d, loaded %d"):format(refused, loaded))
  end)
end)
