-- Morph targets in the skinning kernel (limber.skinning.morph) against a
-- plain Lua float64 reference: base + sum of weight x delta, then the
-- blended skin matrix; normals and tangents morphed, skinned, renormalised.
local H = require "spec.helper"
local limber = require "limber"
local core = limber.core
local sk = require "limber.skinning"

H.seed("morph")

local xform, normalize = H.xform, H.normalize3

-- Random targets for mesh data m: target 1 dense (positions and normals),
-- target 2 sparse (positions only, about a tenth of the vertices), target 3
-- positions and tangents on every other vertex.
local function random_targets(m, tangents)
  local T = { { positions = {}, normals = {} }, { positions = {} }, { positions = {} } }
  if tangents then T[3].tangents = {} end
  for v = 1, m.V do
    local sparse, half = math.random() < 0.1, v % 2 == 0
    for _ = 1, 3 do
      T[1].positions[#T[1].positions + 1] = H.rand(-0.3, 0.3)
      T[1].normals[#T[1].normals + 1] = H.rand(-0.2, 0.2)
      T[2].positions[#T[2].positions + 1] = sparse and H.rand(-1, 1) or 0
      T[3].positions[#T[3].positions + 1] = half and H.rand(-0.5, 0.5) or 0
      if tangents then T[3].tangents[#T[3].tangents + 1] = half and H.rand(-0.2, 0.2) or 0 end
    end
  end
  return T
end

-- Skinned file-order vertices of palette instance i with morph weights w.
local function reference(m, T, w, pal, i)
  local out = { pos = {}, nrm = {}, tan = {} }
  for v = 1, m.V do
    local S, sum = {}, 0
    for e = 1, 16 do S[e] = 0 end
    for q = 1, 4 do sum = sum + m.wgt[(v - 1) * 4 + q] end
    for q = 1, 4 do
      local wq = m.wgt[(v - 1) * 4 + q] / sum
      local M = H.palette_entry(pal, i, m.jnt[(v - 1) * 4 + q] + 1)
      for e = 1, 16 do S[e] = S[e] + wq * M[e] end
    end
    local b = (v - 1) * 3
    local p, n = { m.pos[b + 1], m.pos[b + 2], m.pos[b + 3] }, { m.nrm[b + 1], m.nrm[b + 2], m.nrm[b + 3] }
    local t = { m.tan[(v - 1) * 4 + 1], m.tan[(v - 1) * 4 + 2], m.tan[(v - 1) * 4 + 3] }
    for k, tg in ipairs(T) do
      for c = 1, 3 do
        p[c] = p[c] + w[k] * tg.positions[b + c]
        if tg.normals then n[c] = n[c] + w[k] * tg.normals[b + c] end
        if tg.tangents then t[c] = t[c] + w[k] * tg.tangents[b + c] end
      end
    end
    out.pos[v] = { xform(S, p[1], p[2], p[3], 1) }
    out.nrm[v] = { normalize(xform(S, n[1], n[2], n[3], 0)) }
    local tx, ty, tz = normalize(xform(S, t[1], t[2], t[3], 0))
    out.tan[v] = { tx, ty, tz, m.tan[(v - 1) * 4 + 4] }
  end
  return out
end

local function sub3(t) return { t[1], t[2], t[3] } end

local function levels()
  local best = select(4, core.simd())
  local out = {}
  for _, l in ipairs({ "avx512", "avx2", "portable" }) do
    if l == "portable" or l == best or (l == "avx2" and best == "avx512") then out[#out + 1] = l end
  end
  return out
end

-- Every output float of a target as one string (bit-exact comparisons).
local function bytes(tg)
  local parts = {}
  for _, b in ipairs({ tg:position_buffer(), tg:normal_buffer(), tg:tangent_buffer() }) do
    parts[#parts + 1] = b:bytes()
  end
  return table.concat(parts)
end

describe("limber.skinning.morph", function()
  local was
  setup(function() was = select(3, core.simd()) end)
  teardown(function() core.simd(was) end)

  for _, level in ipairs(levels()) do
    it("matches base + sum of weight x delta, then skinning (" .. level .. " kernel)", function()
      core.simd(level)
      for _, shape in ipairs({ { 5, 3, 3 }, { 2500, 20, 4 } }) do -- 2500: three kernel chunks
        local V, J, N = shape[1], shape[2], shape[3]
        for _, layout in ipairs({ "mat4", "mat3x4" }) do
          local pal = H.skin_palette(J, N, layout)
          local m = H.skin_random_mesh(V, J)
          local mesh = sk.mesh(H.skin_mesh_desc(m, { tangents = true }))
          local T = random_targets(m, true)
          local morph = sk.morph(mesh, T)
          assert.equal(3, morph:target_count())
          assert.equal(V, morph:vertex_count())
          assert.is_true(morph:has_normals() and morph:has_tangents())
          -- rows: random, zero, one target alone, negative and above 1
          local rows = { { H.rand(0, 1), H.rand(0, 1), H.rand(0, 1) }, { 0, 0, 0 },
                         { 0, 1, 0 }, { -0.7, 1.8, 0.3 } }
          local flat = {}
          for i = 1, N do
            for k = 1, 3 do flat[#flat + 1] = rows[i][k] end
          end
          local weights = core.buffer("f32", 3, flat)
          local tg = sk.target { mesh = mesh, instances = N, order = "file", positions = true,
                                 normals = true, tangents = true }
          sk.run(mesh, pal, tg, morph, weights)
          local P, Nn, Tn = tg:position_buffer(), tg:normal_buffer(), tg:tangent_buffer()
          for i = 1, N do
            local w = {}
            for k = 1, 3 do w[k] = weights[i][k] end -- as floats
            local ref = reference(m, T, w, pal, i)
            for f = 1, V do
              local e = (i - 1) * V + f
              assert.near(ref.pos[f], sub3(P[e]), 3e-4, "position " .. f)
              assert.near(ref.nrm[f], sub3(Nn[e]), 3e-4, "normal " .. f)
              assert.near(ref.tan[f], Tn[e], 3e-4, "tangent " .. f)
            end
          end
          -- a zero row is exactly the unmorphed skinning; a table of weights
          -- gives the Buffer's result
          local plain = sk.target { mesh = mesh, instances = N, order = "file", positions = true,
                                    normals = true, tangents = true }
          sk.run(mesh, pal, plain)
          local Pp = plain:position_buffer()
          for f = 1, V do assert.same(Pp[V + f], P[V + f]) end
          local tg2 = sk.target { mesh = mesh, instances = N, order = "file", positions = true,
                                  normals = true, tangents = true }
          sk.run(mesh, pal, tg2, morph, flat)
          assert.equal(bytes(tg), bytes(tg2))
          -- targets with positions only: normals and tangents are the
          -- mesh's own, skinned (every chunk reads its own vertices)
          local T2 = { { positions = T[2].positions }, { positions = T[3].positions } }
          local pmorph = sk.morph(mesh, T2)
          assert.is_false(pmorph:has_normals() or pmorph:has_tangents())
          local flat2 = {}
          for i = 1, N do flat2[#flat2 + 1], flat2[#flat2 + 2] = rows[i][1], rows[i][2] end
          sk.run(mesh, pal, tg2, pmorph, flat2)
          local P2, N2, T2b = tg2:position_buffer(), tg2:normal_buffer(), tg2:tangent_buffer()
          for i = 1, N do
            local ref = reference(m, T2, { flat2[2 * i - 1], flat2[2 * i] }, pal, i)
            for f = 1, V do
              local e = (i - 1) * V + f
              assert.near(ref.pos[f], sub3(P2[e]), 3e-4, "position " .. f)
              assert.near(ref.nrm[f], sub3(N2[e]), 3e-4, "normal " .. f)
              assert.near(ref.tan[f], T2b[e], 3e-4, "tangent " .. f)
            end
          end
        end
      end
    end)
  end

  it("gives the same bytes for any thread count, through run and batches", function()
    local V, J, N = 3000, 16, 24
    local pal = H.skin_palette(J, N, "mat3x4")
    local m = H.skin_random_mesh(V, J)
    local mesh = sk.mesh(H.skin_mesh_desc(m))
    local morph = sk.morph(mesh, random_targets(m))
    local flat = {}
    for _ = 1, N * 3 do flat[#flat + 1] = math.random() < 0.3 and 0 or H.rand(-1, 1.5) end
    local weights = core.buffer("f32", 3, flat)
    local threads = sk.threads()
    local outs = {}
    for _, n in ipairs({ 1, 2 }) do
      sk.threads(n)
      local tg = sk.target { mesh = mesh, instances = N, positions = true, normals = true }
      sk.run(mesh, pal, tg, morph, weights)
      local tb = sk.target { mesh = mesh, instances = N, positions = true, normals = true }
      local batch = sk.batch {
        { mesh = mesh, palette = pal, target = tb, count = 10, morph = morph, weights = weights },
        { mesh = mesh, palette = pal, target = tb, first = 11, morph = morph, weights = weights },
      }
      batch:run()
      outs[n] = tg:position_buffer():bytes() .. tg:normal_buffer():bytes()
      assert.equal(outs[n], tb:position_buffer():bytes() .. tb:normal_buffer():bytes())
    end
    -- the weights' Buffer may be the run's own output: the kernel reads a
    -- copy taken before it writes, so every thread count agrees with a run
    -- on a separate copy of the weights
    local both = {}
    for _, n in ipairs({ 1, 2 }) do
      sk.threads(n)
      local buf = core.buffer("f32", 3, N * V)
      for i = 1, N do buf:set(i, { 0.3, 0.5, 0.9 }) end
      local same = sk.target { mesh = mesh, instances = N, positions = buf }
      sk.run(mesh, pal, same, morph, buf)
      both[n] = buf:bytes()
    end
    local w2 = core.buffer("f32", 3, N)
    for i = 1, N do w2:set(i, { 0.3, 0.5, 0.9 }) end
    local sep = sk.target { mesh = mesh, instances = N, positions = true }
    sk.run(mesh, pal, sep, morph, w2)
    sk.threads(threads)
    assert.equal(outs[1], outs[2])
    assert.equal(both[1], both[2])
    assert.equal(sep:position_buffer():bytes(), both[1])
  end)

  it("keeps only the vertices a target moves; the GPU buffer holds every delta", function()
    local V, J = 300, 5
    local m = H.skin_random_mesh(V, J)
    local mesh = sk.mesh(H.skin_mesh_desc(m))
    local T = random_targets(m)
    local morph = sk.morph(mesh, T)
    local nonzero = 0
    for _, tg in ipairs(T) do
      for v = 1, V do
        local moved = false
        for _, s in ipairs({ "positions", "normals" }) do
          for c = 1, 3 do moved = moved or (tg[s] and tg[s][(v - 1) * 3 + c] ~= 0) end
        end
        if moved then nonzero = nonzero + 1 end
      end
    end
    assert.equal(nonzero, morph:delta_count())
    assert.is_true(morph:has_normals())
    assert.is_false(morph:has_tangents())
    for _, order in ipairs({ "sorted", "file" }) do
      local g = morph:gpu_delta_buffer(order)
      assert.equal(2 * 3 * V, #g)
      for s, name in ipairs({ "positions", "normals" }) do
        for t, tg in ipairs(T) do
          for f = 1, V do
            local v = order == "file" and f or mesh:sorted_index(f)
            local e = g[((s - 1) * 3 + (t - 1)) * V + v]
            for c = 1, 3 do
              local want = tg[name] and tg[name][(f - 1) * 3 + c] or 0
              assert.near(want, e[c], 1e-7)
            end
            assert.equal(0, e[4])
          end
        end
      end
    end
  end)

  it("refuses bad targets and weights with the function, the argument and the problem", function()
    local V, J, N = 20, 4, 2
    local pal = H.skin_palette(J, N)
    local m = H.skin_random_mesh(V, J)
    local mesh = sk.mesh(H.skin_mesh_desc(m))
    local other = sk.mesh(H.skin_mesh_desc(H.skin_random_mesh(V, J)))
    local T = random_targets(m)
    local morph = sk.morph(mesh, T)
    local tg = sk.target { mesh = mesh, instances = N, positions = true }
    local function fails(pat, fn, ...) assert.error_matches(fn, pat, 1, true, ...) end
    fails("bad argument #2 to 'limber.skinning.morph' (table expected, got nil)",
      function() sk.morph(mesh) end)
    fails("0 targets, expected 1 to 4096", function() sk.morph(mesh, {}) end)
    fails("targets[1] must be a table", function() sk.morph(mesh, { 1 }) end)
    fails("targets[1].positions has 3 vertices, the mesh 20",
      function() sk.morph(mesh, { { positions = { 1, 2, 3, 4, 5, 6, 7, 8, 9 } } }) end)
    local bad = { positions = {} }
    for k = 1, V * 3 do bad.positions[k] = 0 end
    bad.positions[7] = 0 / 0
    fails("targets[1].positions[7] is not a finite float", function() sk.morph(mesh, { bad }) end)
    local nomesh = sk.mesh(H.skin_mesh_desc(m, { no_normals = true }))
    fails("normal deltas but the mesh has no normals", function() sk.morph(nomesh, T) end)
    fails("morph targets need weights", function() sk.run(mesh, pal, tg, morph) end)
    fails("weights without morph targets", function() sk.run(mesh, pal, tg, nil, { 1, 2, 3 }) end)
    fails("morph must be a limber.SkinMorph", function() sk.run(mesh, pal, tg, mesh, { 1 }) end)
    fails("no morph weights for palette instances 1 .. 2: 1 rows",
      function() sk.run(mesh, pal, tg, morph, { 0, 0, 1 }) end)
    fails("4 morph weights are not rows of 3", function() sk.run(mesh, pal, tg, morph, { 0, 0, 1, 1 }) end)
    fails("bad argument #5 to 'limber.skinning.run' (limber.skinning.skin: weights[5] is not a finite float (inf))",
      function() sk.run(mesh, pal, tg, morph, { 0, 0, 1, 1, 1 / 0, 0 }) end)
    local tother = sk.target { mesh = other, instances = N, positions = true }
    fails("the morph targets belong to another mesh",
      function() sk.run(other, pal, tother, morph, { 0, 0, 0, 0, 0, 0 }) end)
    -- nothing was written by the refused calls
    local before = tg:position_buffer():bytes()
    pcall(sk.run, mesh, pal, tg, morph, { 0, 0, 1, 1, 0 / 0, 0 })
    assert.equal(before, tg:position_buffer():bytes())
    -- a batch reads its weights Buffer at every run (an f32 Buffer holds
    -- only finite floats, so what it reads is always valid)
    local wb = core.buffer("f32", 3, { 0, 0, 0, 0, 0, 0 })
    local batch = sk.batch { { mesh = mesh, palette = pal, target = tg, morph = morph, weights = wb } }
    batch:run()
    local unmorphed = tg:position_buffer():bytes()
    wb:set(2, { 1, 0, 0 }) -- the dense target
    batch:run()
    assert.are_not.equal(unmorphed, tg:position_buffer():bytes())
    sk.run(mesh, pal, tg, morph, { 0, 0, 0, 1, 0, 0 })
    local direct = tg:position_buffer():bytes()
    batch:run()
    assert.equal(direct, tg:position_buffer():bytes())
    fails("weights must be an f32 Buffer", function()
      sk.batch { { mesh = mesh, palette = pal, target = tg, morph = morph, weights = { 0, 0, 0, 0, 0, 0 } } }
    end)
    -- the mesh stays alive while its targets are
    local m2 = sk.morph(sk.mesh(H.skin_mesh_desc(m)), T)
    collectgarbage()
    collectgarbage()
    assert.equal(V, m2:mesh():vertex_count())
    assert.matches("limber.SkinMorph%(3 targets, 20 vertices", tostring(m2))
  end)
end)

describe("morph weights through the frame plan", function()
  it("blends a mesh's weights tracks by source and layer weights, as plain Lua does", function()
    local gltf = require "limber.gltf"
    local man = gltf.load(H.assets .. "CesiumMan/CesiumManMorph.gltf", { tolerance = 0 })
    local node = man.skinned_nodes[1].node
    local defaults = man.meshes[man.skinned_nodes[1].mesh].weights
    local c1, c2 = man.animations[1].clips[1], man.animations[2].clips[1]
    -- the weights channels went with the skeleton's clips, as node tracks
    local function track_of(c)
      for k, tr in ipairs(c:node_tracks()) do
        if tr.node == node and tr.path == "float" then return k end
      end
    end
    assert.truthy(track_of(c1) and track_of(c2))
    local function value(c, t) return { c:sample_node(track_of(c), t, true) } end
    local pose = gltf.pose(man, 1, 5)
    local plan = limber.plan({ pose = pose, clips = { c1, c2 },
      layers = { { name = "base", sources = 2 }, { name = "over", mode = "override" },
                 { name = "add", mode = "additive" } } })
    plan:play(1, "base", 1, 1, 0.5)
    plan:play(2, "base", 1, 2, 1.2)
    plan:play(3, "base", 1, 1, 0.3)
    plan:play(3, "base", 2, 2, 2.1)
    plan:set_weight(3, "base", 1, 0.3)
    plan:set_weight(3, "base", 2, 0.7)
    plan:play(4, "base", 1, 1, 1.1)
    plan:play(4, "over", 1, 2, 0.4)
    plan:set_layer_weight(4, "over", 0.25)
    plan:play(4, "add", 1, 2, 0.9)
    plan:set_layer_weight(4, "add", 0.5)
    plan:set_weight(5, "base", 1, 0) -- nothing plays: the defaults
    plan:run(0)
    local w = plan:morph_weights(node, defaults)
    assert.equal(5, #w)
    local function near_row(want, i) assert.near(want, w[i], 1e-5, "instance " .. i) end
    near_row(value(c1, 0.5), 1)
    near_row(value(c2, 1.2), 2)
    local a, b = value(c1, 0.3), value(c2, 2.1)
    near_row({ 0.3 * a[1] + 0.7 * b[1], 0.3 * a[2] + 0.7 * b[2], 0.3 * a[3] + 0.7 * b[3] }, 3)
    local base, over, add = value(c1, 1.1), value(c2, 0.4), value(c2, 0.9)
    local want = {}
    for c = 1, 3 do
      want[c] = base[c] + 0.25 * (over[c] - base[c]) + 0.5 * (add[c] - defaults[c])
    end
    near_row(want, 4)
    near_row(defaults, 5)
    -- into a Buffer of the caller's, and straight to the skinning
    local out = limber.buffer("f32", 3, 5)
    assert.equal(out, plan:morph_weights(node, defaults, out))
    assert.same(w:bytes(), out:bytes())
    local prim = man.meshes[1].primitives[1]
    local mesh = sk.mesh(prim)
    local morph = sk.morph(mesh, prim.targets)
    local pal = gltf.palette(man, pose, { skin = 1 })
    plan:run(0)
    pose:local_to_model()
    pal:update()
    local tg = sk.target { mesh = mesh, instances = 5, positions = true, order = "file" }
    sk.run(mesh, pal, tg, morph, out)
    -- instance 5 plays nothing: its mesh-space positions are base + the defaults' deltas
    local flat = tg:position_buffer()
    local bare = sk.target { mesh = mesh, instances = 5, positions = true, order = "file" }
    sk.run(mesh, pal, bare, morph, limber.buffer("f32", 3, 5))
    bare = bare:position_buffer()
    local moved = 0
    for v = 1, mesh:vertex_count() do
      local fa, fb = flat[4 * mesh:vertex_count() + v], bare[4 * mesh:vertex_count() + v]
      local d = math.abs(fa[1] - fb[1]) + math.abs(fa[2] - fb[2]) + math.abs(fa[3] - fb[3])
      if d > 1e-6 then moved = moved + 1 end
    end
    assert.is_true(moved > 0) -- the default weights (0.2 inflate) moved the mesh
    assert.error_matches(function() plan:morph_weights(node, { 0, 0 }) end,
      "clip 1's track on node " .. node .. " has 3 values per key, defaults 2", 1, true)
    assert.error_matches(function() plan:morph_weights(node, {}) end,
      "defaults must hold 1 to 16 numbers", 1, true)
    assert.error_matches(function() plan:morph_weights(node, defaults, limber.buffer("f32", 3, 4)) end,
      "out must be a writable f32 Buffer of width 3 with 5 elements", 1, true)
    assert.error_matches(function() plan:morph_weights(-1, defaults) end,
      "bad argument #1 to 'limber.Plan:morph_weights' (node must be an integer", 1, true)
    assert.error_matches(function() plan:morph_weights(node, { 0, 0 / 0, 0 }) end,
      "defaults[2] is not a finite float", 1, true)
    -- a node without tracks: the defaults everywhere
    local none = plan:morph_weights(node + 100, { 0.5 })
    for i = 1, 5 do assert.near(0.5, none[i], 0) end
  end)
end)
