-- IK as a stage of the frame plan (desc.ik, plan:set_ik, plan:follow_ik):
-- the plan's per-block IK against the stage-by-stage path (the same plan
-- without IK, then limber.ik's solvers on its pose, then a palette), on
-- random legs and spine chains with random targets, poles, weights and
-- roots; thread counts; dirty tracking; targets that follow scene nodes
-- against plain-Lua matrix formulas; refusals.
local H = require "spec.helper"
local limber = require "limber"
local anim = require "limber.anim"
local ik = require "limber.ik"
local scene = require "limber.scene"
local skinning = require "limber.skinning"

H.seed("ik_plan")

local NAMES = { "root", "hip", "knee", "twist", "foot", "toe", "spine", "neck", "head" }
local PARENT = { nil, 1, 2, 3, 4, 5, 1, 7, 8 }

local function rvec(s) return { H.rand(-s, s), H.rand(-s, s), H.rand(-s, s) } end

-- A leg and a spine chain with random rest transforms.
local function body()
  local desc = {}
  for j, name in ipairs(NAMES) do
    desc[j] = { name = name, parent = PARENT[j], translation = j == 1 and rvec(1) or rvec(1.2),
                rotation = H.rand_quat() }
  end
  return limber.skeleton(desc)
end

-- A clip turning every joint but the root through random rotations.
local function body_clip(skel)
  local tracks = {}
  for j = 2, #NAMES do
    local values = {}
    for _ = 1, 3 do
      for _, c in ipairs(H.rand_quat()) do values[#values + 1] = c end
    end
    tracks[#tracks + 1] = { joint = j, path = "rotation", times = { 0, 0.5, 1 }, values = values }
  end
  return anim.clip({ tracks = tracks }, skel)
end

local function solvers(skel, keep_tip)
  return {
    ik.two_bone(skel, "hip", "knee", "foot", { keep_tip = keep_tip, soften = 0.98 }),
    ik.aim(skel, "spine", { forward = { 0, 0, 1 }, up = { 0, 1, 0 }, effector = "head" }),
    ik.aim(skel, "neck", { forward = { 0, 0, 1 }, up = { 0, 1, 0 }, effector = "head",
                           limit = 0.8 }),
  }
end

local function rand_root()
  local q = H.rand_quat()
  local m = H.trs(rvec(4), q, { 1, 1, 1 })
  return m
end

-- Two plans over the same crowd inputs: `a` with the IK constraints, `b`
-- with b_constraints (nil: without; the stage path starts from its output).
local function twin_plans(skel, N, clip, constraints, b_constraints)
  local pa, pb = limber.pose(skel, N), limber.pose(skel, N)
  local pala = limber.palette(pa)
  local a = limber.plan { pose = pa, clips = { clip }, models = "all", locals = true,
                          palettes = { pala }, ik = constraints }
  local b = limber.plan { pose = pb, clips = { clip }, models = "all", locals = true,
                          ik = b_constraints }
  for i = 1, N do
    local t = H.rand(0, 1)
    a:play(i, 1, 1, 1, t)
    b:play(i, 1, 1, 1, t)
    local root = rand_root()
    pa:set_root(i, root)
    pb:set_root(i, root)
  end
  return a, b, pa, pb, pala
end

-- Random per-instance inputs of every constraint: off, full or partial
-- weight, with or without a pole; targets near the chain.
local function rand_inputs(N, pose, count)
  local set = {}
  for c = 1, count do
    set[c] = {}
    for i = 1, N do
      local r = math.random()
      if r > 0.2 then
        local near = pose:model(i, c == 1 and 2 or 9)
        local base = { near[13], near[14], near[15] }
        local target = { base[1] + H.rand(-2, 2), base[2] + H.rand(-2, 2), base[3] + H.rand(-2, 2) }
        local pole = math.random() < 0.6 and { base[1] + H.rand(-5, 5), base[2] + H.rand(-5, 5),
                                               base[3] + H.rand(-5, 5) } or nil
        local w = r > 0.6 and 1 or (r > 0.3 and H.rand(0, 1) or 0)
        set[c][i] = { target = target, pole = pole, weight = w }
      end
    end
  end
  return set
end

local function apply_inputs(plan, set)
  for c, per in ipairs(set) do
    for i = 1, plan:instance_count() do
      local s = per[i]
      if s then plan:set_ik(c, i, s.target, s.pole, s.weight) else plan:set_ik(c, i, nil) end
    end
  end
end

-- The stage path: the solvers, constraint by constraint, on pose b.
local function solve_stages(list, pb, set, N)
  for c, solver in ipairs(list) do
    for i = 1, N do
      local s = set[c][i]
      if s and s.weight > 0 then solver:solve(pb, s.target, s.pole, s.weight, i) end
    end
  end
end

local function compare_poses(skel, N, pa, pb, tol)
  for i = 1, N do
    for j = 1, skel:joint_count() do
      assert.near(pb:model(i, j), pa:model(i, j), tol, ("instance %d joint %d"):format(i, j))
      local ta, ra, sa = pa:trs(i, j)
      local tb, rb, sb = pb:trs(i, j)
      assert.near(tb, ta, tol)
      assert.near(sb, sa, tol)
      -- q and -q are the same rotation
      local d = ra[1] * rb[1] + ra[2] * rb[2] + ra[3] * rb[3] + ra[4] * rb[4]
      assert.near(1, math.abs(d), tol)
    end
  end
end

describe("limber.plan with IK", function()
  it("gives the stage path's pose: plan without IK, then the solvers, then a palette", function()
    for round = 1, 6 do
      local skel = body()
      local N = 8 * math.random(1, 3) + math.random(0, 7)
      local clip = body_clip(skel)
      local list = solvers(skel, round % 2 == 0)
      local a, b, pa, pb, pala = twin_plans(skel, N, clip, list)
      b:run(0)
      local set = rand_inputs(N, pb, #list)
      apply_inputs(a, set)
      assert.equal(N, a:run(0))
      solve_stages(list, pb, set, N)
      compare_poses(skel, N, pa, pb, 2e-5)
      local palb = limber.palette(pb)
      palb:update()
      for i = 1, N do
        for j = 1, skel:joint_count() do
          assert.near(palb:get(i, j), pala:get(i, j), 2e-5)
        end
      end
      -- a reachable two-bone target at weight 1 is reached
      for i = 1, N do
        local s = set[1][i]
        if s and s.weight == 1 then
          local A, T = pa:model(i, 2), s.target
          local B, C = pa:model(i, 3), pa:model(i, 5)
          local l1 = math.sqrt((B[13] - A[13]) ^ 2 + (B[14] - A[14]) ^ 2 + (B[15] - A[15]) ^ 2)
          local l2 = math.sqrt((C[13] - B[13]) ^ 2 + (C[14] - B[14]) ^ 2 + (C[15] - B[15]) ^ 2)
          local d = math.sqrt((T[1] - A[13]) ^ 2 + (T[2] - A[14]) ^ 2 + (T[3] - A[15]) ^ 2)
          if d < 0.9 * (l1 + l2) and d > math.abs(l1 - l2) * 1.1 + 0.05 then
            assert.near(T, { C[13], C[14], C[15] }, 1e-3 * (1 + l1 + l2))
          end
        end
      end
    end
  end)

  it("takes targets as Buffers for a run of instances, like the solvers", function()
    local skel = body()
    local N = 13
    local clip = body_clip(skel)
    local list = solvers(skel, true)
    local a, b, pa, pb = twin_plans(skel, N, clip, { list[1] })
    b:run(0)
    local T, P, W, set = {}, {}, {}, { {} }
    for i = 1, N do
      local m = pb:model(i, 2)
      local t, p = { m[13] + H.rand(-1, 1), m[14] - 1, m[15] + H.rand(-1, 1) }, rvec(5)
      for k = 1, 3 do T[#T + 1], P[#P + 1] = t[k], p[k] end
      W[i] = i % 4 == 0 and 0 or 1
      if i >= 3 then set[1][i] = { target = t, pole = p, weight = W[i] } end
    end
    -- instances 3 .. N from Buffers (the first two entries are not read)
    local function tail(v, per) return { H.tunpack(v, 2 * per + 1) } end
    a:set_ik(1, 3, limber.buffer("f32", 3, tail(T, 3)), limber.buffer("f32", 3, tail(P, 3)),
      limber.buffer("f32", 1, tail(W, 1)))
    a:run(0)
    solve_stages({ list[1] }, pb, set, N)
    compare_poses(skel, N, pa, pb, 2e-5)
    local t, w, p = a:ik(1, 5)
    local _
    assert.near({ T[13], T[14], T[15] }, t, 1e-6)
    assert.equal(1, w)
    assert.near({ P[13], P[14], P[15] }, p, 1e-6)
    _, w, p = a:ik(1, 1)
    assert.equal(0, w)
    assert.is_nil(p)
  end)

  it("gives the same bytes on 1 and 2 threads", function()
    local old = skinning.threads()
    finally(function() skinning.threads(old) end)
    local skel = body()
    local N = 37
    local clip = body_clip(skel)
    local list = solvers(skel, false)
    local a, b, pa, pb = twin_plans(skel, N, clip, list, list)
    b:run(0)
    local set = rand_inputs(N, pb, #list)
    apply_inputs(a, set)
    apply_inputs(b, set)
    skinning.threads(1)
    a:run(0)
    skinning.threads(2)
    b:run(0)
    assert.equal(pa:model_buffer():bytes(), pb:model_buffer():bytes())
  end)

  it("re-evaluates an instance only when its IK inputs change", function()
    local skel = body()
    local N = 9
    local clip = body_clip(skel)
    local list = solvers(skel, false)
    local a, b, pa, pb = twin_plans(skel, N, clip, list)
    b:run(0)
    a:run(0)
    assert.equal(0, a:run(0))
    local m = pa:model(4, 2)
    local t = { m[13] + 0.3, m[14] - 0.8, m[15] }
    a:set_ik(1, 4, t, nil, 1)
    assert.equal(1, a:run(0))
    a:set_ik(1, 4, t, nil, 1) -- the same inputs
    assert.equal(0, a:run(0))
    a:set_ik(1, 4, { t[1], t[2] + 0.1, t[3] }, nil, 1)
    assert.equal(1, a:run(0))
    assert.is_true(a:timings().ik > 0)
    -- off again: the plain animated pose, exactly
    a:set_ik(1, 4, nil)
    assert.equal(1, a:run(0))
    for j = 1, skel:joint_count() do assert.same(pb:model(4, j), pa:model(4, j)) end
    assert.equal(0, a:run(0))
    assert.equal(0, a:timings().ik)
  end)
end)

-- m^-1 v for an affine column-major matrix (plain Lua, float64).
local function inverse_point(m, v)
  local a, b, c = m[1], m[5], m[9]
  local d, e, f = m[2], m[6], m[10]
  local g, h, k = m[3], m[7], m[11]
  local det = a * (e * k - f * h) - b * (d * k - f * g) + c * (d * h - e * g)
  local x, y, z = v[1] - m[13], v[2] - m[14], v[3] - m[15]
  return {
    ((e * k - f * h) * x - (b * k - c * h) * y + (b * f - c * e) * z) / det,
    (-(d * k - f * g) * x + (a * k - c * g) * y - (a * f - c * d) * z) / det,
    ((d * h - e * g) * x - (a * h - b * g) * y + (a * e - b * d) * z) / det,
  }
end

describe("limber.plan IK targets from scene nodes", function()
  it("follows a node's world position in the frame node's space, each run", function()
    local skel = body()
    local N = 10
    local clip = body_clip(skel)
    local list = solvers(skel, true)
    local a, b, pa, pb = twin_plans(skel, N, clip, list)
    for i = 1, N do pa:set_root(i, nil) pb:set_root(i, nil) end
    b:run(0)
    local sc = scene.new()
    local holder = sc:create({ translation = rvec(3), rotation = H.rand_quat(), scale = { 2, 2, 2 } })
    local frame = sc:create({ translation = rvec(3), rotation = H.rand_quat(),
                              scale = { 1.5, 0.5, 1 } })
    local handle = sc:create({ parent = holder, translation = rvec(1) })
    local pole = sc:create({ translation = rvec(6) })
    sc:update()
    a:follow_ik(1, 3, sc, handle, { frame = frame, pole = pole })
    a:follow_ik(2, 3, sc, handle, { weight = 0.5 })
    a:run(0)
    local function expect()
      local fw, hw, pw = sc:world(frame), sc:world(handle), sc:world(pole)
      return inverse_point(fw, { hw[13], hw[14], hw[15] }),
        inverse_point(fw, { pw[13], pw[14], pw[15] }), { hw[13], hw[14], hw[15] }
    end
    local t, p, world = expect()
    local got, w, gp = a:ik(1, 3)
    assert.near(t, got, 1e-4)
    assert.near(p, gp, 1e-4)
    assert.equal(1, w)
    got, w, gp = a:ik(2, 3)
    assert.near(world, got, 1e-5)
    assert.equal(0.5, w)
    assert.is_nil(gp)
    -- the pose is what the stage path gives with those targets
    local set = { { [3] = { target = t, pole = p, weight = 1 } },
                  { [3] = { target = world, weight = 0.5 } }, {} }
    solve_stages(list, pb, set, N)
    compare_poses(skel, N, pa, pb, 2e-5)
    -- the door moves: the next run follows; an unchanged scene costs nothing
    assert.equal(0, a:run(0))
    sc:set_translation(holder, 1, 2, 3)
    sc:update()
    assert.equal(1, a:run(0))
    t = expect()
    assert.near(t, (a:ik(1, 3)), 1e-4)
    -- a destroyed node turns its constraint off
    sc:destroy(pole)
    a:run(0)
    local _
    _, w = a:ik(1, 3)
    assert.equal(0, w)
    _, w = a:ik(2, 3)
    assert.equal(0.5, w)
    -- stop following
    a:follow_ik(2, 3, sc, nil)
    a:run(0)
    _, w = a:ik(2, 3)
    assert.equal(0, w)
    b:invalidate()
    b:run(0)
    for j = 1, skel:joint_count() do assert.same(pb:model(3, j), pa:model(3, j)) end
  end)
end)

describe("limber.plan IK targets from scene nodes, edge cases", function()
  it("is off until the scene computed the nodes, while the frame is singular, and for good "
    .. "once a node is destroyed (a new node that takes its id is not followed)", function()
    local skel = body()
    local N = 3
    local clip = body_clip(skel)
    local list = solvers(skel, false)
    local a = twin_plans(skel, N, clip, list)
    local sc = scene.new()
    local target = sc:create({ translation = { 1, 2, 3 } })
    local frame = sc:create({ translation = { 0, 0, 5 } })
    a:follow_ik(1, 1, sc, target)
    a:follow_ik(1, 2, sc, target, { frame = frame, weight = 0.25 })
    a:run(0)
    local function state(i)
      local t, w = a:ik(1, i)
      return { t[1], t[2], t[3], w }
    end
    -- no scene:update yet: nothing computed, off
    assert.equal(0, state(1)[4])
    assert.equal(0, state(2)[4])
    sc:update()
    a:run(0)
    assert.same({ 1, 2, 3, 1 }, state(1))
    assert.same({ 1, 2, -2, 0.25 }, state(2))
    -- the frame scaled to 0 (a spawn animation): off while singular, then back
    sc:set_scale(frame, 0, 0, 0)
    sc:update()
    a:run(0)
    assert.same({ 1, 2, 3, 1 }, state(1))
    assert.equal(0, state(2)[4])
    sc:set_scale(frame, 1, 1, 1)
    sc:update()
    a:run(0)
    assert.same({ 1, 2, -2, 0.25 }, state(2))
    -- destroyed, and a new node takes the id: off, and stays off
    sc:destroy(target)
    local other = sc:create({ translation = { 7, 8, 9 } })
    assert.equal(target, other) -- ids are recycled
    sc:update()
    a:run(0)
    assert.equal(0, state(1)[4])
    assert.equal(0, state(2)[4])
    sc:set_translation(other, 1, 1, 1)
    sc:update()
    a:run(0)
    assert.equal(0, state(1)[4])
    -- following nothing any more, the plan may follow another scene's nodes
    local sc2 = scene.new()
    local n2 = sc2:create({ translation = { 4, 5, 6 } })
    sc2:update()
    a:follow_ik(2, 3, sc2, n2)
    a:run(0)
    local t, w = a:ik(2, 3)
    assert.same({ { 4, 5, 6 }, 1 }, { t, w })
  end)

  it("takes one number as the weight of every instance of a Buffer of targets", function()
    local skel = body()
    local N = 5
    local a = twin_plans(skel, N, body_clip(skel), solvers(skel, false))
    a:set_ik(1, 2, limber.buffer("f32", 3, { 1, 2, 3, 4, 5, 6, 7, 8, 9 }), nil, 0.5)
    for i = 2, 4 do
      local t, w = a:ik(1, i)
      assert.same({ { 3 * i - 5, 3 * i - 4, 3 * i - 3 }, 0.5 }, { t, w })
    end
    assert.equal(0, select(2, a:ik(1, 1)))
    assert.equal(0, select(2, a:ik(1, 5)))
  end)
end)

describe("limber.plan IK refusals", function()
  it("names the function, the argument and the problem, and changes nothing", function()
    local skel = body()
    local N = 4
    local clip = body_clip(skel)
    local list = solvers(skel, false)
    local a = twin_plans(skel, N, clip, list)
    local other = ik.two_bone(body(), "hip", "knee", "foot")
    local pose = limber.pose(skel, N)
    assert.has_error(function() limber.plan { pose = pose, clips = { clip }, ik = { other } } end,
      "limber.plan: ik[1] is a solver of another skeleton than the pose's")
    assert.has_error(function() limber.plan { pose = pose, clips = { clip }, ik = { {} } } end,
      "limber.plan: ik[1] must be a solver made by limber.ik.two_bone or limber.ik.aim (got table)")
    local function err(f, ...)
      local ok, e = pcall(f, ...)
      assert.is_false(ok)
      return e
    end
    a:set_ik(1, 1, { 1, 2, 3 }, nil, 0.5)
    local function unchanged()
      local t, w, p = a:ik(1, 1)
      assert.same({ 1, 2, 3 }, t)
      assert.equal(0.5, w)
      assert.is_nil(p)
    end
    assert.matches("bad argument #1 to 'limber.Plan:set_ik' %(constraint index 4 out of range %[1, 3%]%)",
      err(function() a:set_ik(4, 1, { 0, 0, 0 }) end))
    assert.matches("bad argument #2 .*instance index 5 out of range",
      err(function() a:set_ik(1, 5, { 0, 0, 0 }) end))
    assert.matches("bad argument #5 .*weight 2%.0* of instance 1 outside %[0, 1%]",
      err(function() a:set_ik(1, 1, { 0, 0, 0 }, nil, 2) end))
    assert.matches("bad argument #3 .*targets%[2%] is not a finite float",
      err(function() a:set_ik(1, 1, { 0, 0 / 0, 0 }) end))
    assert.matches("bad argument #4 .*2 poles for 1 targets",
      err(function() a:set_ik(1, 1, { 0, 0, 0 }, limber.buffer("f32", 3, 2)) end))
    assert.matches("bad argument #2 .*instances 4 %.%. 5 out of range %[1, 4%]",
      err(function() a:set_ik(1, 4, limber.buffer("f32", 3, 2)) end))
    assert.matches("bad argument #3 .*poles and weights need targets",
      err(function() a:set_ik(1, 1, nil, { 0, 0, 0 }) end))
    unchanged()
    local sc, sc2 = scene.new(), scene.new()
    local n1 = sc:create({})
    assert.matches("bad argument #3 .*limber.Scene expected",
      err(function() a:follow_ik(1, 1, {}, n1) end))
    assert.matches("bad argument #4 .*node must be a live node",
      err(function() a:follow_ik(1, 1, sc, 99) end))
    assert.matches("bad argument #5 .*option 'frame' must be a live node",
      err(function() a:follow_ik(1, 1, sc, n1, { frame = 42 }) end))
    assert.matches("bad argument #5 .*option 'weight' must be a number in %[0, 1%]",
      err(function() a:follow_ik(1, 1, sc, n1, { weight = 0 / 0 }) end))
    unchanged()
    a:follow_ik(1, 2, sc, n1)
    assert.matches("bad argument #3 .*another Scene",
      err(function() a:follow_ik(1, 1, sc2, sc2:create({})) end))
    unchanged()
    assert.equal(3, a:ik_count())
  end)

  it("refuses bad constraint descriptions in limber.core.plan by field", function()
    local skel = body()
    local pose = limber.pose(skel, 2)
    local clip = body_clip(skel)
    local function err(ik_list)
      local ok, e = pcall(limber.core.plan, { pose = pose, clips = { clip }, ik = ik_list })
      assert.is_false(ok)
      return tostring(e)
    end
    assert.matches("desc.ik must be an array", err(5))
    assert.matches("desc.ik%[1%] must be a table", err({ 7 }))
    assert.matches('desc.ik%[1%].kind must be "two_bone" or "aim"', err({ { kind = "fk" } }))
    assert.matches("desc.ik%[1%].mid must be a joint index in %[1, 9%]",
      err({ { kind = "two_bone", root = 2, mid = 10, tip = 5 } }))
    assert.matches("desc.ik%[1%].soften must be a finite number",
      err({ { kind = "two_bone", root = 2, mid = 3, tip = 5, soften = 0 / 0 } }))
    assert.matches("soften", err({ { kind = "two_bone", root = 2, mid = 3, tip = 5, soften = 2 } }))
    assert.matches("chain must go down the hierarchy",
      err({ { kind = "two_bone", root = 3, mid = 2, tip = 5 } }))
    assert.matches("desc.ik%[2%].forward is required", err({ { kind = "aim", joint = 9,
      forward = { 0, 0, 1 } }, { kind = "aim", joint = 9 } }))
    assert.matches("desc.ik%[1%].forward must be { x, y, z }",
      err({ { kind = "aim", joint = 9, forward = { 0, 1 } } }))
    assert.matches("forward axis is zero", err({ { kind = "aim", joint = 9, forward = { 0, 0, 0 } } }))
    local many = {}
    for k = 1, 33 do many[k] = { kind = "aim", joint = 9, forward = { 0, 0, 1 } } end
    assert.matches("33 constraints, at most 32", err(many))
  end)
end)
