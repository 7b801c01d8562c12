-- CPU skinning against a plain scalar Lua reference (four weighted full 4x4
-- matrices summed per vertex), on random meshes with random influence counts.
local H = require "spec.helper"
local limber = require "limber"
local core = limber.core
local sk = require "limber.skinning"

H.seed("skinning")

local random_palette, entry = H.skin_palette, H.palette_entry
local random_mesh, mesh_desc = H.skin_random_mesh, H.skin_mesh_desc

local xform, normalize = H.xform, H.normalize3

-- The article's naive version: every vertex as four influences, four
-- weighted full 4x4 matrices summed. Returns file-order arrays per instance.
local function reference(m, pal, i)
  local out = { pos = {}, nrm = {}, tan = {} }
  for v = 1, m.V do
    local S, sum = {}, 0
    for e = 1, 16 do S[e] = 0 end
    for q = 1, 4 do sum = sum + m.wgt[(v - 1) * 4 + q] end
    for q = 1, 4 do
      local w = m.wgt[(v - 1) * 4 + q] / sum
      local M = entry(pal, i, m.jnt[(v - 1) * 4 + q] + 1)
      for e = 1, 16 do S[e] = S[e] + w * M[e] end
    end
    local b = (v - 1) * 3
    out.pos[v] = { xform(S, m.pos[b + 1], m.pos[b + 2], m.pos[b + 3], 1) }
    out.nrm[v] = { normalize(xform(S, m.nrm[b + 1], m.nrm[b + 2], m.nrm[b + 3], 0)) }
    local t = (v - 1) * 4
    local tx, ty, tz = normalize(xform(S, m.tan[t + 1], m.tan[t + 2], m.tan[t + 3], 0))
    out.tan[v] = { tx, ty, tz, m.tan[t + 4] }
  end
  return out
end

local function sub(t, n)
  local o = {}
  for c = 1, n do o[c] = t[c] end
  return o
end

-- Every kernel level this CPU runs: the best (AVX-512 where present), AVX2
-- (so a machine with AVX-512 still tests the AVX2 kernel) and portable C.
local levels = {}
do
  local best = select(4, core.simd())
  for _, l in ipairs({ "avx512", "avx2", "portable" }) do
    if l == "portable" or l == best or (l == "avx2" and best == "avx512") then levels[#levels + 1] = l end
  end
end

local function with_level(level, fn)
  local _, _, was = core.simd()
  core.simd(level)
  local ok, err = pcall(fn)
  core.simd(was)
  if not ok then error(err, 0) end
end

for _, level in ipairs(levels) do
  describe("skinning (" .. level .. " kernel)", function()
    local was
    setup(function()
      was = select(3, core.simd())
      core.simd(level)
      assert.equal(level, select(3, core.simd()))
    end)
    teardown(function() core.simd(was) end)

    for _, layout in ipairs({ "mat4", "mat3x4" }) do
      it("matches the scalar reference on random meshes (" .. layout .. " palettes)", function()
        for _, shape in ipairs({ { 1, 1, 1 }, { 7, 3, 2 }, { 150, 12, 3 }, { 1500, 30, 2 } }) do
          local V, J, N = shape[1], shape[2], shape[3]
          local pal = random_palette(J, N, layout)
          local m = random_mesh(V, J)
          local mesh = sk.mesh(mesh_desc(m, { tangents = true }))
          local c1, c2, c3, c4 = H.tunpack(mesh:influence_counts())
          assert.equal(V, c1 + c2 + c3 + c4)
          for _, order in ipairs({ "file", "sorted" }) do
            for _, width in ipairs({ 3, 4 }) do
              local tg = sk.target { mesh = mesh, instances = N, order = order,
                                     positions = core.buffer("f32", width, N * V),
                                     normals = core.buffer("f32", width, N * V), tangents = true }
              sk.run(mesh, pal, tg)
              local P, Nn, T = tg:position_buffer(), tg:normal_buffer(), tg:tangent_buffer()
              for i = 1, N do
                local ref = reference(m, pal, i)
                for f = 1, V do
                  local o = order == "file" and f or mesh:sorted_index(f)
                  local e = (i - 1) * V + o
                  local p, n = P[e], Nn[e]
                  assert.near(ref.pos[f], sub(p, 3), 2e-4)
                  assert.near(ref.nrm[f], sub(n, 3), 2e-5)
                  assert.near(ref.tan[f], T[e], 2e-5)
                  if width == 4 then
                    assert.equal(1, p[4])
                    assert.equal(0, n[4])
                  end
                end
              end
            end
          end
        end
      end)
    end

    it("sorts vertices by influence count and keeps triangles identical", function()
      local V, J = 400, 10
      local pal = random_palette(J, 2)
      local m = random_mesh(V, J, { tris = 300 })
      local mesh = sk.mesh(mesh_desc(m))
      local counts = mesh:influence_counts()
      -- influences of sorted vertices are non-decreasing and match the counts
      local seen = { 0, 0, 0, 0 }
      local last = 1
      for s = 1, V do
        local f = mesh:file_index(s)
        assert.equal(s, mesh:sorted_index(f))
        assert.equal(f - 1, mesh:gpu_permutation_buffer()[s])
        assert.equal(s - 1, mesh:gpu_inverse_permutation_buffer()[f])
        local k = 0
        for q = 1, 4 do if m.wgt[(f - 1) * 4 + q] ~= 0 then k = k + 1 end end
        assert.is_true(k >= last)
        last = k
        seen[k] = seen[k] + 1
      end
      assert.same(counts, seen)
      -- corners through the remapped index buffer equal the file-order corners
      local sorted = sk.target { mesh = mesh, instances = 2, positions = true, normals = true }
      local file = sk.target { mesh = mesh, instances = 2, positions = true, normals = true, order = "file" }
      sk.run(mesh, pal, sorted)
      sk.run(mesh, pal, file)
      local idx = mesh:gpu_index_buffer()
      assert.equal(#m.idx, #idx)
      for i = 1, 2 do
        for c = 1, #m.idx do
          assert.equal(mesh:sorted_index(m.idx[c] + 1) - 1, idx[c])
          local f, s = (i - 1) * V + m.idx[c] + 1, (i - 1) * V + idx[c] + 1
          assert.same(file:position_buffer()[f], sorted:position_buffer()[s])
          assert.same(file:normal_buffer()[f], sorted:normal_buffer()[s])
        end
      end
    end)

    it("gives bit-identical results for 1, 2 and 3 threads", function()
      -- 25 and 185 work items (instances x 1024-vertex chunks): threads
      -- claim runs of items of shrinking length; a skipped item would stay
      -- zero in the fresh target
      local V, J = 5000, 40
      local m = random_mesh(V, J)
      local mesh = sk.mesh(mesh_desc(m, { tangents = true }))
      local old_threads = sk.threads()
      for _, N in ipairs({ 5, 37 }) do
        local pal = random_palette(J, N)
        local results = {}
        for _, t in ipairs({ 1, 2, 3 }) do
          local _, _, threaded = sk.threads(t)
          assert.equal(threaded and t or 1, (sk.threads()))
          local tg = sk.target { mesh = mesh, instances = N, positions = true, normals = true, tangents = true }
          sk.run(mesh, pal, tg)
          results[t] = tg:position_buffer():bytes() .. tg:normal_buffer():bytes() .. tg:tangent_buffer():bytes()
        end
        assert.is_true(results[1] == results[2], N)
        assert.is_true(results[1] == results[3], N)
        -- and the result itself is complete: no vertex left at zero
        local tg = sk.target { mesh = mesh, instances = N, positions = true }
        sk.threads(3)
        sk.run(mesh, pal, tg)
        local P, zeros = tg:position_buffer(), 0
        for v = 1, N * V do
          local p = P[v]
          if p[1] == 0 and p[2] == 0 and p[3] == 0 then zeros = zeros + 1 end
        end
        assert.equal(0, zeros)
      end
      sk.threads(old_threads)
    end)

    it("writes interleaved vertex buffers equal to separate streams", function()
      local V, J, N = 300, 8, 3
      local pal = random_palette(J, N)
      local m = random_mesh(V, J)
      local mesh = sk.mesh(mesh_desc(m, { tangents = true }))
      local sep = sk.target { mesh = mesh, instances = N, positions = true, normals = true, tangents = true }
      sk.run(mesh, pal, sep)
      local layouts = {
        { stride = 40, position = 0, normal = 12, tangent = 24 },     -- packed
        { stride = 48, position = 16, normal = 32, tangent = 0 },     -- tangent first
        { stride = 64, position = 4, normal = 20, tangent = 40 },     -- gaps
        { stride = 24, position = 12, normal = 0 },                   -- no tangents
        { stride = 24, position = 0, normal = 12 },                   -- normal ends the stride
        { stride = 28, position = 0, normal = 16 },                   -- normal ends, gap before
        { stride = 44, position = 28, normal = 0, tangent = 12 },     -- position ends the stride
      }
      for _, l in ipairs(layouts) do
        local floats = math.floor(l.stride / 4)
        local buf = core.buffer("f32", floats, N * V)
        local sentinel = {}
        for c = 1, floats do sentinel[c] = -7 end
        for e = 1, N * V do buf:set(e, sentinel) end
        local tg = sk.target { mesh = mesh, instances = N, buffer = buf, stride = l.stride,
                               position = l.position, normal = l.normal, tangent = l.tangent }
        sk.run(mesh, pal, tg)
        for e = 1, N * V do
          local row = buf[e]
          local used = {}
          local function check(off, want, n)
            local o = math.floor(off / 4)
            for c = 1, n do
              assert.equal(want[c], row[o + c])
              used[o + c] = true
            end
          end
          check(l.position, sep:position_buffer()[e], 3)
          check(l.normal, sep:normal_buffer()[e], 3)
          if l.tangent then check(l.tangent, sep:tangent_buffer()[e], 4) end
          for c = 1, floats do
            if not used[c] then assert.equal(-7, row[c]) end -- gaps untouched
          end
        end
      end
    end)

    it("skins batches of jobs with different meshes, palettes and slots", function()
      local palA = random_palette(6, 4)
      local palB = random_palette(9, 3, "mat3x4")
      local mA, mB = random_mesh(120, 6), random_mesh(70, 9)
      local meshA, meshB = sk.mesh(mesh_desc(mA)), sk.mesh(mesh_desc(mB))
      local tA = sk.target { mesh = meshA, instances = 6, positions = true, normals = true }
      local tB = sk.target { mesh = meshB, instances = 3, positions = true, normals = true }
      local batch = sk.batch {
        { mesh = meshA, palette = palA, target = tA, first = 2, count = 3, slot = 4 },
        { mesh = meshA, palette = palA, target = tA, first = 1, count = 1, slot = 1 },
        { mesh = meshB, palette = palB, target = tB },
      }
      assert.equal(3, #batch)
      batch:run()
      local function check(m, mesh, pal, tg, i, slot)
        local ref = reference(m, pal, i)
        for f = 1, m.V do
          local e = (slot - 1) * m.V + mesh:sorted_index(f)
          assert.near(ref.pos[f], tg:position_buffer()[e], 2e-4)
          assert.near(ref.nrm[f], tg:normal_buffer()[e], 2e-5)
        end
      end
      for q = 0, 2 do check(mA, meshA, palA, tA, 2 + q, 4 + q) end
      check(mA, meshA, palA, tA, 1, 1)
      for i = 1, 3 do check(mB, meshB, palB, tB, i, i) end
      for f = 1, mA.V do -- slots 2 and 3 were not written
        assert.same({ 0, 0, 0 }, tA:position_buffer()[mA.V + f])
        assert.same({ 0, 0, 0 }, tA:position_buffer()[2 * mA.V + f])
      end
    end)
  end)
end

describe("skinning", function()
  it("agrees between the portable and every SIMD kernel within rounding", function()
    local V, J, N = 2001, 25, 2
    local pal = random_palette(J, N)
    local m = random_mesh(V, J)
    local mesh = sk.mesh(mesh_desc(m, { tangents = true }))
    local out = {}
    for _, level in ipairs(levels) do
      with_level(level, function()
        for _, order in ipairs({ "sorted", "file" }) do
          local tg = sk.target { mesh = mesh, instances = N, positions = true, normals = true,
                                 tangents = true, order = order }
          sk.run(mesh, pal, tg)
          out[level .. order] = tg
        end
      end)
    end
    for _, level in ipairs(levels) do
      for _, order in ipairs({ "sorted", "file" }) do
        local a, b = out["portable" .. order], out[level .. order]
        for e = 1, N * V do
          assert.near(a:position_buffer()[e], b:position_buffer()[e], 2e-5)
          -- normals: FMA vs separate rounding in the blend, amplified by the
          -- normalisation when random weights blend a short vector (seen: 2.4e-6)
          assert.near(a:normal_buffer()[e], b:normal_buffer()[e], 1e-5)
          assert.near(a:tangent_buffer()[e], b:tangent_buffer()[e], 1e-5)
        end
      end
    end
  end)

  it("core.simd takes a level name, capped by the CPU, and rejects unknown names", function()
    local _, _, was, best, default = core.simd()
    local rank = { portable = 0, avx2 = 1, avx512 = 2 }
    for _, l in ipairs({ "portable", "avx2", "avx512" }) do
      local active, _, now = core.simd(l)
      local want = rank[l] <= rank[best] and l or best
      assert.equal(want, now)
      assert.equal(now ~= "portable", active)
    end
    assert.equal("portable", select(3, core.simd(false)))
    -- true: the level that runs fastest here, the best the CPU allows except where
    -- AVX-512 runs in 256-bit halves (then AVX2); "avx512" still selects AVX-512
    assert.equal(default, select(3, core.simd(true)))
    assert.truthy(default == best or (best == "avx512" and default == "avx2"), default)
    -- where Linux says which CPU this is: AVX2 exactly on AMD family 19h with AVX-512
    local f = io.open("/proc/cpuinfo")
    if f then
      local info = f:read("*a")
      f:close()
      local vendor = info:match("vendor_id%s*:%s*(%S+)")
      local family = info:match("cpu family%s*:%s*(%d+)")
      if vendor and family then
        local halves = vendor == "AuthenticAMD" and tonumber(family) == 0x19
        assert.equal(best == "avx512" and halves and "avx2" or best, default)
      end
    end
    assert.equal(default, select(5, core.simd()))
    assert.error_matches(function() core.simd("sse9") end, "invalid option 'sse9'")
    assert.error_matches(function() core.simd(1) end, "boolean or level name expected, got number")
    assert.equal(default, select(3, core.simd()))
    core.simd(was)
  end)

  it("accepts Lua tables (1-based joints and indices) and u8 / u16 buffers", function()
    local pal = random_palette(4, 1)
    local m = random_mesh(30, 4, { tris = 10 })
    local jt, it_ = {}, {}
    for q = 1, #m.jnt do jt[q] = m.jnt[q] + 1 end
    for q = 1, #m.idx do it_[q] = m.idx[q] + 1 end
    local a = sk.mesh { positions = m.pos, normals = m.nrm, joints = jt, weights = m.wgt, indices = it_ }
    local b = sk.mesh(mesh_desc(m))
    local wq = {}
    for q = 1, #m.wgt do wq[q] = math.floor(m.wgt[q] * 200 + 0.5) end
    for v = 0, m.V - 1 do -- keep every vertex with at least one non-zero quantised weight
      if wq[v * 4 + 1] + wq[v * 4 + 2] + wq[v * 4 + 3] + wq[v * 4 + 4] == 0 then wq[v * 4 + 1] = 1 end
    end
    local c = sk.mesh { positions = core.buffer("f32", 3, m.pos), gpu_joints = core.buffer("u8", 4, m.jnt),
                        weights = core.buffer("u8", 4, wq) }
    assert.equal(b:gpu_index_buffer():bytes(), a:gpu_index_buffer():bytes())
    assert.equal(b:gpu_permutation_buffer():bytes(), a:gpu_permutation_buffer():bytes())
    local ta = sk.target { mesh = a, positions = true, normals = true }
    local tb = sk.target { mesh = b, positions = true, normals = true }
    sk.run(a, pal, ta)
    sk.run(b, pal, tb)
    assert.equal(tb:position_buffer():bytes(), ta:position_buffer():bytes())
    assert.equal(tb:normal_buffer():bytes(), ta:normal_buffer():bytes())
    local tc = sk.target { mesh = c, positions = true }
    sk.run(c, pal, tc)
    assert.is_nil(c:gpu_index_buffer())
    local has_n = c:has_normals()
    assert.is_false(has_n)
  end)

  it("makes no Lua garbage per frame", function()
    local pal = random_palette(10, 4)
    local m = random_mesh(500, 10)
    local mesh = sk.mesh(mesh_desc(m))
    local tg = sk.target { mesh = mesh, instances = 4, positions = true, normals = true }
    local batch = sk.batch { { mesh = mesh, palette = pal, target = tg } }
    sk.run(mesh, pal, tg)
    batch:run()
    -- LuaJIT's trace compiler keeps the traces it makes of this loop in the
    -- GC heap: it is off while the frames are counted
    local jit = rawget(_G, "jit")
    if jit then jit.off() end
    collectgarbage("collect")
    collectgarbage("stop")
    local before = collectgarbage("count")
    for _ = 1, 200 do
      sk.run(mesh, pal, tg)
      batch:run()
    end
    local after = collectgarbage("count")
    collectgarbage("restart")
    if jit then jit.on() end
    assert.equal(before, after)
  end)

  it("shuts the worker pool down when the Lua state closes", function()
    local script = ([[
      package.path = %q
      package.cpath = %q
      local limber = require "limber"
      local sk = limber.skinning
      local skel = limber.skeleton({ {}, { parent = 1 } })
      local pose = limber.pose(skel, 8)
      pose:local_to_model()
      local pal = limber.palette(pose)
      pal:update()
      local n, w, j = {}, {}, {}
      for v = 1, 3000 do
        n[#n + 1], n[#n + 2], n[#n + 3] = v, 0, 0
        w[#w + 1], w[#w + 2], w[#w + 3], w[#w + 4] = 1, v %% 2, 0, 0
        j[#j + 1], j[#j + 2], j[#j + 3], j[#j + 4] = 1, 2, 1, 1
      end
      local mesh = sk.mesh { positions = n, joints = j, weights = w }
      local tg = sk.target { mesh = mesh, instances = 8, positions = true }
      sk.threads(3)
      for _ = 1, 20 do sk.run(mesh, pal, tg) end
      sk.threads(2)
      sk.run(mesh, pal, tg)
      io.write("done")
      -- os.exit closes the state from 5.2 on; 5.1 and LuaJIT ignore its
      -- second argument, so there the script ends and the interpreter closes it
      if _VERSION ~= "Lua 5.1" then os.exit(0, true) end
    ]]):format(package.path, package.cpath)
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write(script)
    f:close()
    local ok, out, code = H.run(H.lua_exe .. " " .. path) -- this run's interpreter
    os.remove(path)
    assert.equal("done", out)
    assert.is_true(ok, "exit status " .. tostring(code))
  end)

  it("keeps meshes, palettes and buffers alive while targets and batches use them", function()
    local pal = random_palette(5, 2)
    local m = random_mesh(64, 5)
    local mesh = sk.mesh(mesh_desc(m))
    local batch = sk.batch { { mesh = mesh, palette = pal,
      target = sk.target { mesh = mesh, instances = 2, positions = core.buffer("f32", 3, 128) } } }
    mesh, pal = nil, nil -- luacheck: ignore
    collectgarbage("collect")
    collectgarbage("collect")
    batch:run()
  end)

  describe("errors", function()
    local pal, m, mesh, tg
    before_each(function()
      pal = random_palette(6, 3)
      m = random_mesh(50, 6)
      mesh = sk.mesh(mesh_desc(m))
      tg = sk.target { mesh = mesh, instances = 3, positions = true, normals = true }
      sk.run(mesh, pal, tg)
    end)

    -- Runs fn, expects an error containing msg, and checks the target kept its contents.
    local function fails(fn, msg)
      local before = tg:position_buffer():bytes() .. tg:normal_buffer():bytes()
      assert.error_matches(fn, msg, 1, true)
      assert.equal(before, tg:position_buffer():bytes() .. tg:normal_buffer():bytes())
    end

    it("rejects a palette of another skin", function()
      local _, skel, pose = random_palette(6, 3)
      local skinA, skinB = limber.skin(skel), limber.skin(skel)
      local bound = sk.mesh(mesh_desc(m, { skin = skinA }))
      assert.equal(skinA, bound:skin())
      local other = limber.palette(pose, { skin = skinB })
      other:update()
      local t2 = sk.target { mesh = bound, instances = 3, positions = true, normals = true }
      assert.error_matches(function() sk.run(bound, other, t2) end,
        "the palette belongs to another skin than the mesh", 1, true)
      fails(function() sk.run(bound, pal, tg) end, "the palette belongs to another skin than the mesh")
      local ok_pal = limber.palette(pose, { skin = skinA })
      ok_pal:update()
      sk.run(bound, ok_pal, t2)
    end)

    it("rejects joint slots beyond the palette", function()
      local small = random_palette(4, 3) -- mesh uses slots up to 5
      assert.is_true(mesh:joint_limit() > 4)
      fails(function() sk.run(mesh, small, tg) end, "but the palette has 4 joints")
      local skel = limber.skeleton(H.rand_joints(3))
      assert.error_matches(function() sk.mesh(mesh_desc(m, { skin = limber.skin(skel) })) end,
        "beyond the skin's 3 joints", 1, true)
    end)

    it("rejects mismatched instance counts and ranges", function()
      local pal2 = random_palette(6, 2)
      fails(function() sk.run(mesh, pal2, tg) end, "mismatched instance counts: the palette has 2, the target 3")
      assert.error_matches(function()
        sk.batch { { mesh = mesh, palette = pal, target = tg, first = 2, count = 3 } }
      end, "palette instances 2 .. 4 out of range [1, 3]", 1, true)
      assert.error_matches(function()
        sk.batch { { mesh = mesh, palette = pal, target = tg, first = 1, count = 2, slot = 3 } }
      end, "target too small: instances 3 .. 4, the target holds 3", 1, true)
      assert.error_matches(function()
        sk.batch { { mesh = mesh, palette = pal, target = tg, first = 1, count = 2 },
                   { mesh = mesh, palette = pal, target = tg, first = 3, count = 1, slot = 2 } }
      end, "jobs 1 and 2 write the same target instance 2", 1, true)
      local other = sk.mesh(mesh_desc(random_mesh(51, 6)))
      fails(function() sk.run(other, pal, tg) end, "the target holds 50 vertices per instance, the mesh has 51")
      local bare = sk.mesh(mesh_desc(m, { no_normals = true }))
      fails(function() sk.run(bare, pal, tg) end, "the target wants normals but the mesh has none")
    end)

    it("rejects output buffers that are too small or unusable", function()
      assert.error_matches(function()
        sk.target { mesh = mesh, instances = 3, positions = core.buffer("f32", 3, 149) }
      end, "positions buffer too small: 149 elements, need 150", 1, true)
      assert.error_matches(function()
        sk.target { mesh = mesh, instances = 3, buffer = core.buffer("f32", 6, 149), stride = 24,
                    position = 0, normal = 12 }
      end, "buffer too small", 1, true)
      assert.error_matches(function()
        sk.target { mesh = mesh, buffer = core.buffer("f32", 6, 50), stride = 24, position = 0, normal = 8 }
      end, "position and normal offsets overlap", 1, true)
      assert.error_matches(function()
        sk.target { mesh = mesh, buffer = core.buffer("f32", 6, 50), stride = 24, position = 16 }
      end, "position offset 16 must be a multiple of 4 in [0, 12] (stride 24)", 1, true)
      assert.error_matches(function()
        sk.target { mesh = mesh, positions = pal:matrix_buffer() }
      end, "positions is a read-only Buffer", 1, true)
      assert.error_matches(function()
        sk.target { mesh = mesh, normals = core.buffer("f32", 2, 50) }
      end, "normals must be an f32 Buffer of width 3 or 4", 1, true)
      assert.error_matches(function() sk.target { mesh = mesh } end, "no output stream", 1, true)
    end)

    it("names the value and the bound of a target's error (the kernel's rules)", function()
      local function target_fails(desc, msg)
        assert.error_matches(function() sk.target(desc) end, "limber.skinning.target: " .. msg, 1, true)
      end
      local buf = core.buffer("f32", 6, 100)
      target_fails({ mesh = mesh, buffer = buf, stride = 22, position = 0 },
        "stride 22 must be a multiple of 4 bytes in [4, 4096]")
      target_fails({ mesh = mesh, buffer = buf, stride = 24, position = 4, normal = 12 },
        "position and normal offsets overlap (bytes 4 and 12 of the stride)")
      target_fails({ mesh = mesh, buffer = buf, stride = 24, tangent = -1 },
        "tangent offset -1 must be a multiple of 4 in [0, 8] (stride 24)")
      target_fails({ mesh = mesh, instances = 3, buffer = core.buffer("f32", 6, 149), stride = 24, position = 0 },
        "buffer too small: 3576 bytes, need 3588 (150 vertices x stride 24)")
      target_fails({ mesh = mesh, instances = 3, tangents = core.buffer("f32", 3, 150) },
        "tangents must be an f32 Buffer of width 4 (got width 3)")
      target_fails({ vertices = 0, positions = true }, "vertex count 0 out of range [1, 268435456]")
      target_fails({ vertices = 4, instances = H.tointeger(2 ^ 25), positions = true },
        "instance count 33554432 out of range [1, 16777216]")
    end)

    it("rejects bad mesh data", function()
      local function desc_with(field, value)
        local d = mesh_desc(m)
        d[field] = value
        -- one index base per field: joints / indices are 1-based tables,
        -- gpu_joints / gpu_indices 0-based Buffers
        local other = field:match("^gpu_(.*)") or ("gpu_" .. field)
        if field:find("joints$") or field:find("indices$") then d[other] = nil end
        return d
      end
      local w = {}
      for q = 1, #m.wgt do w[q] = m.wgt[q] end
      w[9], w[10], w[11], w[12] = 0, 0, 0, 0
      assert.error_matches(function() sk.mesh(desc_with("weights", w)) end, "vertex 3: every weight is zero", 1, true)
      w[9] = -1
      assert.error_matches(function() sk.mesh(desc_with("weights", w)) end, "vertex 3: negative weight", 1, true)
      -- the kernel names the influence and the value, and each cause on its own
      assert.error_matches(function() sk.mesh(desc_with("weights", w)) end,
        "limber.skinning.mesh: vertex 3: negative weight 1 (-1)", 1, true)
      local jt, wt = {}, {}
      for q = 1, #m.jnt do jt[q], wt[q] = m.jnt[q] + 1, m.wgt[q] end
      jt[10], wt[10] = 0, 0.25 -- no joint (0 in a 1-based table) for a non-zero weight
      local d = desc_with("joints", jt)
      d.weights = wt
      assert.error_matches(function() sk.mesh(d) end,
        "vertex 3: influence 2 has a non-zero weight but no joint", 1, true)
      jt[10] = 70000
      assert.error_matches(function() sk.mesh(d) end, "vertex 3: joint slot 69999 out of range [0, 65534]", 1, true)
      assert.error_matches(function() sk.mesh(desc_with("normals", core.buffer("f32", 3, 49))) end,
        "normals has 49 vertices, positions have 50", 1, true)
      assert.error_matches(function() sk.mesh(desc_with("gpu_indices", core.buffer("u32", 1, { 0, 50 }))) end,
        "indices[2] = 51 (1-based) out of range [1, 50]", 1, true)
      assert.error_matches(function() sk.mesh(desc_with("positions", nil)) end, "positions are required", 1, true)
      assert.error_matches(function() sk.mesh(desc_with("gpu_joints", core.buffer("f32", 4, 50))) end,
        "gpu_joints must be a u8/u16/u32 Buffer of width 4 (0-based; a table of 1-based indices goes in joints)",
        1, true)
      -- the index base follows the field, never the container
      assert.error_matches(function() sk.mesh(desc_with("joints", core.buffer("u16", 4, 50))) end,
        "joints must be a flat table of 1-based indices (a Buffer of 0-based ones goes in gpu_joints)", 1, true)
      assert.error_matches(function() sk.mesh(desc_with("gpu_indices", { 1, 2, 3 })) end,
        "gpu_indices must be a u8/u16/u32 Buffer of width 1", 1, true)
      local both = desc_with("indices", { 1, 2, 3 })
      both.gpu_indices = core.buffer("u32", 1, { 0, 1, 2 })
      assert.error_matches(function() sk.mesh(both) end,
        "give indices (1-based table) or gpu_indices (0-based Buffer), not both", 1, true)
      assert.error_matches(function() sk.mesh(desc_with("positions", { 1, 2 })) end,
        "not a multiple of 3", 1, true)
      -- zero-weight slots may hold anything
      local j = {}
      for q = 1, #m.jnt do j[q] = m.wgt[q] == 0 and 65535 or m.jnt[q] end
      local ok = sk.mesh(desc_with("gpu_joints", core.buffer("u16", 4, j)))
      assert.equal(mesh:joint_limit(), ok:joint_limit())
    end)

    it("checks the thread count", function()
      assert.error_matches(function() sk.threads(0) end, "thread count 0 out of range [1, 65]", 1, true)
    end)
  end)
end)
