-- Two-bone and aim IK (limber.ik) on random chains, against plain Lua
-- float64 formulas: where the mid joint and the tip must land, bone lengths,
-- the bend plane and side, weights, limits, and the joints left alone.
local H = require "spec.helper"
local limber = require "limber"
local ik = require "limber.ik"

H.seed("ik")

local function sub(a, b) return { a[1] - b[1], a[2] - b[2], a[3] - b[3] } end
local function add(a, b) return { a[1] + b[1], a[2] + b[2], a[3] + b[3] } end
local function scale(a, s) return { a[1] * s, a[2] * s, a[3] * s } end
local function dot(a, b) return a[1] * b[1] + a[2] * b[2] + a[3] * b[3] end
local function len(a) return math.sqrt(dot(a, a)) end
local function unit(a) return scale(a, 1 / len(a)) end
local function cross(a, b)
  return { a[2] * b[3] - a[3] * b[2], a[3] * b[1] - a[1] * b[3], a[1] * b[2] - a[2] * b[1] }
end

local function pos(pose, i, j)
  local m = pose:model(i, j)
  return { m[13], m[14], m[15] }
end

local function axis(pose, i, j, v) -- a local direction of joint j in model space
  local m = pose:model(i, j)
  return unit({ m[1] * v[1] + m[5] * v[2] + m[9] * v[3], m[2] * v[1] + m[6] * v[2] + m[10] * v[3],
                m[3] * v[1] + m[7] * v[2] + m[11] * v[3] })
end

-- hip (under a root) -> knee -> (twist) -> foot -> toe, and a sibling of the hip
local function random_leg(n)
  local function q()
    local v = { H.rand(-1, 1), H.rand(-1, 1), H.rand(-1, 1), H.rand(-1, 1) }
    local l = math.sqrt(v[1] ^ 2 + v[2] ^ 2 + v[3] ^ 2 + v[4] ^ 2)
    return { v[1] / l, v[2] / l, v[3] / l, v[4] / l }
  end
  local function t(s) return { H.rand(-s, s), H.rand(-s, s), H.rand(-s, s) } end
  local skel = limber.skeleton {
    { name = "root", translation = t(2), rotation = q() },
    { name = "hip", parent = 1, translation = t(1), rotation = q() },
    { name = "knee", parent = 2, translation = t(1.5), rotation = q() },
    { name = "twist", parent = 3, translation = t(0.8), rotation = q() },
    { name = "foot", parent = 4, translation = t(0.8), rotation = q() },
    { name = "toe", parent = 5, translation = t(0.5), rotation = q() },
    { name = "other", parent = 1, translation = t(1), rotation = q() },
  }
  local pose, roots = limber.pose(skel, n), {}
  for i = 1, n do
    for j = 1, 7 do pose:set_trs(i, j, nil, q(), nil) end
    roots[i] = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, H.rand(-3, 3), H.rand(-3, 3), H.rand(-3, 3), 1 }
    pose:set_root(i, roots[i])
  end
  pose:local_to_model()
  return skel, pose, roots
end

-- A copy of instances of a pose (locals and roots) as a new pose.
local function copy_pose(skel, pose, roots)
  local n = #roots
  local c = limber.pose(skel, n)
  for i = 1, n do
    for j = 1, skel:joint_count() do c:set_trs(i, j, pose:trs(i, j)) end
    c:set_root(i, roots[i])
  end
  c:local_to_model()
  return c
end

describe("limber.ik.two_bone", function()
  it("lands the mid joint and the tip where the float64 formulas put them", function()
    local n = 11 -- two lane blocks
    for _ = 1, 20 do
      local skel, pose = random_leg(n)
      local leg = ik.two_bone(skel, "hip", "knee", "foot")
      local before, targets, poles, want = {}, {}, {}, {}
      for i = 1, n do
        local A, B, C = pos(pose, i, 2), pos(pose, i, 3), pos(pose, i, 5)
        local l1, l2 = len(sub(B, A)), len(sub(C, B))
        -- reachable, unreachable and too-close targets (not closer than 0.05:
        -- the direction of a target 1e-5 away is lost in float rounding)
        local kind = i % 3
        if kind == 2 and math.abs(l1 - l2) < 0.1 then kind = 0 end
        local r = kind == 0 and H.rand(math.abs(l1 - l2) * 1.05 + 1e-3, (l1 + l2) * 0.95)
            or kind == 1 and (l1 + l2) * H.rand(1.1, 3) or H.rand(0.05, math.abs(l1 - l2) * 0.9)
        local u = unit({ H.rand(-1, 1), H.rand(-1, 1), H.rand(-1, 1) })
        local T = add(A, scale(u, r))
        local P = add(A, { H.rand(-5, 5), H.rand(-5, 5), H.rand(-5, 5) })
        targets[i], poles[i] = T, P
        before[i] = { A = A, toe = len(sub(pos(pose, i, 6), C)), other = pose:model(i, 7),
                      l1 = l1, l2 = l2, twist = len(sub(pos(pose, i, 4), B)) }
        -- the formulas: tip at d along u, mid at x along u and h toward the pole
        local d = math.min(math.max(r, math.abs(l1 - l2)), l1 + l2)
        local v = unit(sub(sub(P, A), scale(u, dot(sub(P, A), u))))
        local x = (l1 * l1 - l2 * l2 + d * d) / (2 * d)
        local h = math.sqrt(math.max(0, l1 * l1 - x * x))
        want[i] = { B = add(A, add(scale(u, x), scale(v, h))), C = add(A, scale(u, d)) }
      end
      for i = 1, n do leg:solve(pose, targets[i], poles[i], 1, i) end
      for i = 1, n do
        local A, B, C = pos(pose, i, 2), pos(pose, i, 3), pos(pose, i, 5)
        local b = before[i]
        assert.near(b.A, A, 1e-5)
        assert.near(b.l1, len(sub(B, A)), 1e-4)
        assert.near(b.l2, len(sub(C, B)), 1e-4)
        assert.near(want[i].C, C, 2e-4 * (1 + b.l1 + b.l2))
        assert.near(want[i].B, B, 2e-4 * (1 + b.l1 + b.l2))
        -- joints below move rigidly; a branch outside the chain does not move
        assert.near(b.toe, len(sub(pos(pose, i, 6), C)), 1e-4)
        assert.near(b.twist, len(sub(pos(pose, i, 4), B)), 1e-4)
        assert.near(b.other, pose:model(i, 7), 1e-5)
      end
    end
  end)

  it("solves a crowd in one call: Buffers, weights, first; weight 0 changes nothing", function()
    local n = 9
    local skel, pose, roots = random_leg(n)
    local leg = ik.two_bone(skel, 2, 3, 5, { keep_tip = true })
    local T, P, W = {}, {}, {}
    local rot0 = {}
    for i = 1, n do
      local A = pos(pose, i, 2)
      local t = add(A, { H.rand(-1, 1), H.rand(-1, 1), H.rand(-1, 1) })
      local p = add(A, { H.rand(-4, 4), H.rand(-4, 4), H.rand(-4, 4) })
      for c = 1, 3 do T[#T + 1], P[#P + 1] = t[c], p[c] end
      W[i] = i == 1 and 0 or (i == 2 and 0.5 or 1)
      rot0[i] = pose:model(i, 5)
    end
    local ref = copy_pose(skel, pose, roots)
    local before1 = pose:model(1, 6)
    leg:solve(pose, limber.buffer("f32", 3, T), limber.buffer("f32", 3, P), limber.buffer("f32", 1, W))
    assert.same(before1, pose:model(1, 6)) -- weight 0
    for i = 3, n do
      -- the same as one instance at a time
      ref:local_to_model()
      leg:solve(ref, { T[i * 3 - 2], T[i * 3 - 1], T[i * 3] }, { P[i * 3 - 2], P[i * 3 - 1], P[i * 3] }, 1, i)
      assert.near(ref:model(i, 6), pose:model(i, 6), 1e-6)
      -- keep_tip: the foot keeps its model rotation
      local m0, m1 = rot0[i], pose:model(i, 5)
      for e = 1, 11 do assert.near(m0[e], m1[e], 2e-5) end
    end
    -- half weight: the tip lands between where it was and where full weight puts it
    local A, C = pos(pose, 2, 2), pos(pose, 2, 5)
    assert.is_true(len(sub(C, { T[4], T[5], T[6] })) > 1e-4 or len(sub(C, A)) < 1e-3)
  end)

  it("refuses bad chains and arguments, naming the function", function()
    local skel, pose = random_leg(2)
    local function fails(pat, fn) assert.error_matches(fn, pat, 1, true) end
    fails("bad argument #1 to 'limber.ik.two_bone' (limber.Skeleton expected, got nil)",
      function() ik.two_bone(nil, 1, 2, 3) end)
    fails("no joint named 'nope'", function() ik.two_bone(skel, "nope", 2, 3) end)
    fails("joint must be a name or an index in [1, 7], got 8", function() ik.two_bone(skel, 1, 2, 8) end)
    fails("mid below root, tip below mid", function() ik.two_bone(skel, "knee", "hip", "foot") end)
    fails("mid below root, tip below mid", function() ik.two_bone(skel, "hip", "knee", "other") end)
    fails("option 'soften' must be in (0, 1]", function() ik.two_bone(skel, 2, 3, 5, { soften = 0 }) end)
    fails("unknown option 'bend'", function() ik.two_bone(skel, 2, 3, 5, { bend = 1 }) end)
    local leg = ik.two_bone(skel, 2, 3, 5)
    local other = limber.pose(limber.skeleton { { name = "a" } }, 1)
    fails("bad argument #2 to 'limber.ik.TwoBone:solve' (limber.Pose of the solver's skeleton expected)",
      function() leg:solve(other, { 0, 0, 0 }) end)
    fails("bad argument #3 to 'limber.ik.TwoBone:solve' (targets must be { x, y, z }",
      function() leg:solve(pose, 5) end)
    fails("targets[2] is not a finite float", function() leg:solve(pose, { 0, 0 / 0, 0 }) end)
    fails("weight 2 outside [0, 1]", function() leg:solve(pose, { 0, 0, 0 }, nil, 2) end)
    fails("instances 2 .. 3 out of range [1, 2]",
      function() leg:solve(pose, limber.buffer("f32", 3, { 0, 0, 0, 1, 1, 1 }), nil, nil, 2) end)
    fails("weights must be an f32 Buffer of width 1",
      function() leg:solve(pose, { 0, 0, 0 }, nil, limber.buffer("f32", 3, 1)) end)
    fails("first 3 out of range [1, 2]", function() leg:solve(pose, { 0, 0, 0 }, nil, nil, 3) end)
    fails("1 poles for 2 targets",
      function() leg:solve(pose, limber.buffer("f32", 3, { 0, 0, 0, 1, 1, 1 }), { 0, 0, 1 }) end)
    -- nothing changed by the refused calls
    local m = pose:model(2, 6)
    pcall(leg.solve, leg, pose, { 0, 0, 0 }, nil, 2)
    assert.same(m, pose:model(2, 6))
  end)

  it("softens near full extension and never snaps straight", function()
    local skel, pose, roots = random_leg(1)
    local leg = ik.two_bone(skel, "hip", "knee", "foot", { soften = 0.9 })
    local A, B, C = pos(pose, 1, 2), pos(pose, 1, 3), pos(pose, 1, 5)
    local L = len(sub(B, A)) + len(sub(C, B))
    local u = unit({ 1, 2, 3 })
    local last = 0
    for _, f in ipairs({ 0.5, 0.85, 0.95, 1.0, 1.2, 3 }) do
      local ref = copy_pose(skel, pose, roots)
      leg:solve(ref, add(A, scale(u, f * L)))
      local d = len(sub(pos(ref, 1, 5), A))
      local ds = 0.9 * L
      local want = f * L <= ds and f * L or ds + (L - ds) * (1 - math.exp(-(f * L - ds) / (L - ds)))
      want = math.max(want, math.abs(len(sub(B, A)) - len(sub(C, B)))) -- no closer than |l1 - l2|
      assert.near(want, d, 1e-4 * L)
      assert.is_true(d <= L * (1 + 1e-6) and d >= last - 1e-6 * L)
      last = d
    end
  end)
end)

describe("limber.ik on hostile poses", function()
  it("keeps every rotation a finite unit quaternion with zero and huge scales and far targets", function()
    local skel = limber.skeleton { { name = "a", scale = { 0, 1, 1 } },
      { name = "b", parent = 1, translation = { 0, 1, 0 }, scale = { 1e30, 1e30, 1e30 } },
      { name = "c", parent = 2, translation = { 0, 1, 0 }, scale = { 0, 0, 0 } },
      { name = "d", parent = 3, translation = { 1, 0, 0 } } }
    local pose = limber.pose(skel, 2)
    pose:local_to_model()
    local leg = ik.two_bone(skel, 1, 2, 3, { keep_tip = true })
    local aim = ik.aim(skel, 2, { forward = { 0, 1, 0 }, up = { 1, 0, 0 }, effector = 4, limit = 3 })
    for _, t in ipairs({ { 1e30, 0, 0 }, { 0, 0, 0 }, { 1, 2, 3 }, { -3e38, 3e38, 1 } }) do
      leg:solve(pose, t, { 0, 0, 1 }, 1, 2)
      aim:solve(pose, t, { 1e38, 0, 0 })
      for i = 1, 2 do
        for j = 1, 4 do
          local _, r = pose:trs(i, j)
          local n = math.sqrt(r[1] ^ 2 + r[2] ^ 2 + r[3] ^ 2 + r[4] ^ 2)
          assert.near(1, n, 1e-5)
        end
      end
    end
  end)
end)

describe("limber.ik.aim", function()
  it("points the forward axis at the target, within limits, twisted toward the pole", function()
    for _ = 1, 20 do
      local n = 9
      local skel, pose = random_leg(n)
      local fwd = unit({ H.rand(-1, 1), H.rand(-1, 1), H.rand(-1, 1) })
      local up = unit(cross(fwd, unit({ H.rand(-1, 1), H.rand(-1, 1), H.rand(-1, 1) })))
      local head = ik.aim(skel, "foot", { forward = fwd, up = up })
      local limited = ik.aim(skel, "foot", { forward = fwd, limit = 0.3 })
      for i = 1, n do
        local E = pos(pose, i, 5)
        local T = add(E, { H.rand(-3, 3), H.rand(-3, 3), H.rand(-3, 3) })
        local P = add(E, { H.rand(-3, 3), H.rand(-3, 3), H.rand(-3, 3) })
        if i % 2 == 0 then
          local F0 = axis(pose, i, 5, fwd)
          local need = math.acos(math.max(-1, math.min(1, dot(F0, unit(sub(T, E))))))
          limited:solve(pose, T, nil, nil, i)
          local F = axis(pose, i, 5, fwd)
          local turned = math.acos(math.max(-1, math.min(1, dot(F0, F))))
          assert.near(math.min(need, 0.3), turned, 1e-4)
        else
          head:solve(pose, T, P, nil, i)
          local F = axis(pose, i, 5, fwd)
          local D = unit(sub(T, E))
          assert.near(1, dot(F, D), 1e-5)
          -- up lies in the plane of D and the pole, on the pole's side
          local U = axis(pose, i, 5, up)
          local pp = sub(sub(P, E), scale(D, dot(sub(P, E), D)))
          if len(pp) > 1e-3 then
            assert.near(1, dot(unit(sub(U, scale(D, dot(U, D)))), unit(pp)), 1e-4)
          end
        end
        assert.near(E, pos(pose, i, 5), 1e-5) -- the joint turns in place
      end
    end
  end)

  it("twists a half turn about the aimed axis when up points away from the pole", function()
    local skel = limber.skeleton { { name = "neck" }, { name = "head", parent = 1, translation = { 0, 1, 0 } } }
    local pose = limber.pose(skel, 1)
    pose:local_to_model()
    -- the target straight ahead (+z), the pole straight below: up (+y) must flip
    ik.aim(skel, "head", { forward = { 0, 0, 1 }, up = { 0, 1, 0 } }):solve(pose, { 0, 1, 5 }, { 0, -5, 0 })
    assert.near({ 0, 0, 1 }, axis(pose, 1, 2, { 0, 0, 1 }), 1e-6)
    assert.near({ 0, -1, 0 }, axis(pose, 1, 2, { 0, 1, 0 }), 1e-6)
    -- and a forward that must turn a half turn turns about up, keeping it
    local p2 = limber.pose(skel, 1)
    p2:local_to_model()
    ik.aim(skel, "head", { forward = { 0, 0, 1 }, up = { 0, 1, 0 } }):solve(p2, { 0, 1, -5 })
    assert.near({ 0, 0, -1 }, axis(p2, 1, 2, { 0, 0, 1 }), 1e-6)
    assert.near({ 0, 1, 0 }, axis(p2, 1, 2, { 0, 1, 0 }), 1e-6)
  end)

  it("shares a turn along a chain: the last joint, at full weight, points the effector", function()
    local skel, pose = random_leg(1)
    local fwd = { 0, 0, 1 }
    local T = add(pos(pose, 1, 6), { 2, 1, -1 })
    local w = { 0.3, 0.5, 1 }
    for k, joint in ipairs({ "hip", "knee", "foot" }) do
      ik.aim(skel, joint, { forward = fwd, effector = "foot" }):solve(pose, T, nil, w[k])
    end
    assert.near(1, dot(axis(pose, 1, 5, fwd), unit(sub(T, pos(pose, 1, 5)))), 1e-5)
  end)

  it("refuses bad settings", function()
    local skel, pose = random_leg(1)
    local function fails(pat, fn) assert.error_matches(fn, pat, 1, true) end
    fails("options with 'forward' expected", function() ik.aim(skel, "foot") end)
    fails("option 'forward' must be { x, y, z }", function() ik.aim(skel, "foot", { forward = { 1, 2 } }) end)
    fails("option 'limit' must be in [0, pi]", function() ik.aim(skel, 5, { forward = { 0, 0, 1 }, limit = 4 }) end)
    fails("bad argument #3 to 'limber.ik.aim' (option 'forward' must not be zero)", function()
      ik.aim(skel, 5, { forward = { 0, 0, 0 } })
    end)
    fails("bad argument #3 to 'limber.ik.aim' (option 'effector' must be the joint or a joint below it)",
      function() ik.aim(skel, "foot", { forward = { 0, 0, 1 }, effector = "hip" }) end)
    fails("poles need the solver's 'up' axis", function()
      ik.aim(skel, 5, { forward = { 0, 0, 1 } }):solve(pose, { 1, 2, 3 }, { 0, 1, 0 })
    end)
    -- the kernel's own checks, reached through limber.core
    fails("the forward axis is zero", function()
      limber.core.ik_aim(pose, 5, 5, { 0, 0, 0 }, nil, { 1, 2, 3 })
    end)
    fails("the effector must be the joint or below it", function()
      limber.core.ik_aim(pose, 5, 2, { 0, 0, 1 }, nil, { 1, 2, 3 })
    end)
  end)
end)

describe("examples/ik_dump.lua", function()
  local cjson = require "cjson"
  local fox = H.root .. "examples/assets/Fox/Fox.glb"
  local function dump(args)
    local ok, text, code = H.run(H.example("ik_dump.lua", "'" .. fox .. "' " .. args))
    return ok and cjson.decode(text) or nil, text, code
  end
  local function world_pos(j) return { j.world[13], j.world[14], j.world[15] } end
  local function by_name(out, name)
    for _, j in ipairs(out.joints) do if j.name == name then return j end end
  end

  it("prints the sampled pose without a constraint (the reference's joint worlds)", function()
    local ref = H.read_json(H.reference .. "Fox/anim0.clamp.json")
    local f = ref.frames[4]
    local out = assert(dump(("--anim 0 --time %.17g"):format(f.clipTime)))
    local e = H.gltf_extent(require("limber.gltf").load(fox))
    assert.equal(#f.skins[1].joints, #out.joints)
    for k, rj in ipairs(f.skins[1].joints) do
      assert.equal(rj.node, out.joints[k].node)
      assert.near(rj.world, out.joints[k].world, 1e-5 * e)
    end
  end)

  it("reaches with two-bone IK and aims, in glTF world space", function()
    local rest = assert(dump(""))
    local hip, knee = by_name(rest, "b_LeftLeg01_015"), by_name(rest, "b_LeftLeg02_016")
    local foot = by_name(rest, "b_LeftFoot01_017")
    local A, B, C = world_pos(hip), world_pos(knee), world_pos(foot)
    local l1, l2 = len(sub(B, A)), len(sub(C, B))
    local T = add(A, scale(unit({ 0.3, -1, 0.4 }), 0.8 * (l1 + l2)))
    local P = add(A, { 0, 0, 100 })
    local out = assert(dump(("--two-bone b_LeftLeg01_015,b_LeftLeg02_016,b_LeftFoot01_017 "
      .. "--target %.9g,%.9g,%.9g --pole %.9g,%.9g,%.9g"):format(T[1], T[2], T[3], P[1], P[2], P[3])))
    local A2, B2, C2 = world_pos(by_name(out, "b_LeftLeg01_015")), world_pos(by_name(out, "b_LeftLeg02_016")),
        world_pos(by_name(out, "b_LeftFoot01_017"))
    assert.near(A, A2, 1e-3)
    assert.near(T, C2, 1e-3 * (l1 + l2))
    assert.near(l1, len(sub(B2, A2)), 1e-4 * l1)
    assert.near(l2, len(sub(C2, B2)), 1e-4 * l2)
    -- the knee bends toward +z (the pole's side of the hip-target line)
    local u = unit(sub(T, A2))
    local off = sub(sub(B2, A2), scale(u, dot(sub(B2, A2), u)))
    assert.is_true(dot(off, sub(P, A2)) > 0)
    -- aim: the head's local +y points at the target
    local head = world_pos(by_name(rest, "b_Head_05"))
    local T2 = add(head, { 30, 10, 40 })
    out = assert(dump(("--aim b_Head_05 --forward 0,1,0 --target %.9g,%.9g,%.9g"):format(T2[1], T2[2], T2[3])))
    local m = by_name(out, "b_Head_05").world
    local y = unit({ m[5], m[6], m[7] })
    assert.near(1, dot(y, unit(sub(T2, head))), 1e-5)
    -- weight 0: the rest pose
    out = assert(dump(("--aim b_Head_05 --forward 0,1,0 --target 1,2,3 --weight 0")))
    assert.near(by_name(rest, "b_Head_05").world, by_name(out, "b_Head_05").world, 1e-6)
  end)

  it("refuses unknown options and missing joints", function()
    local _, text, code = dump("--frobnicate")
    assert.equal(2, code)
    assert.truthy(text:find("unknown option --frobnicate", 1, true), text)
    _, text, code = dump("--two-bone a,b,c --target 1,2,3")
    assert.equal(1, code)
    assert.truthy(text:find("no joint 'a'", 1, true), text)
    _, text, code = dump("--two-bone a,b")
    assert.equal(2, code)
    assert.truthy(text:find("--two-bone needs ROOT,MID,END", 1, true), text)
    _, text, code = dump("--aim b_Head_05 --target 1,2,3")
    assert.equal(2, code)
    assert.truthy(text:find("--aim needs --forward and --target", 1, true), text)
  end)
end)
