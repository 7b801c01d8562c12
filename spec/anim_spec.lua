-- Blending against a plain Lua reference, additive layers, crowds:
-- cross-fades, events, root motion, no garbage per frame.
local H = require "spec.helper"
local limber = require "limber"
local anim = require "limber.anim"

H.seed("anim")

local function pack(...) return { ... } end

local rand_pose = H.rand_pose

-- plain Lua reference of limber's blend rules (see csrc/kernel/blend.h)
local function qmul(a, b)
  return {
    a[4] * b[1] + a[1] * b[4] + a[2] * b[3] - a[3] * b[2],
    a[4] * b[2] - a[1] * b[3] + a[2] * b[4] + a[3] * b[1],
    a[4] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[4],
    a[4] * b[4] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
  }
end
local function qnorm(q)
  local n = math.sqrt(q[1] ^ 2 + q[2] ^ 2 + q[3] ^ 2 + q[4] ^ 2)
  return { q[1] / n, q[2] / n, q[3] / n, q[4] / n }
end

local function ref_blend(rest, layers, i, j)
  local t, q, s, wsum = { 0, 0, 0 }, { 0, 0, 0, 0 }, { 0, 0, 0 }, 0
  for _, ly in ipairs(layers) do
    if not ly.additive then
      local w = ly.w[i] * (ly.mask and ly.mask[j] or 1)
      local v = ly.vals[i][j]
      local dot = q[1] * v[2][1] + q[2] * v[2][2] + q[3] * v[2][3] + q[4] * v[2][4]
      local wq = dot < 0 and -w or w
      wsum = wsum + w
      for c = 1, 3 do t[c], s[c] = t[c] + w * v[1][c], s[c] + w * v[3][c] end
      for c = 1, 4 do q[c] = q[c] + wq * v[2][c] end
    end
  end
  if wsum > 0 then
    for c = 1, 3 do t[c], s[c] = t[c] / wsum, s[c] / wsum end
    q = qnorm(q)
  else
    t, q, s = rest[1], rest[2], rest[3]
  end
  for _, ly in ipairs(layers) do
    if ly.additive then
      local w = ly.w[i] * (ly.mask and ly.mask[j] or 1)
      if w > 0 then
        local v, r = ly.vals[i][j], ly.ref[j]
        for c = 1, 3 do
          t[c] = t[c] + w * (v[1][c] - r[1][c])
          s[c] = s[c] * (1 + w * (v[3][c] / r[3][c] - 1))
        end
        local dq = qmul({ -r[2][1], -r[2][2], -r[2][3], r[2][4] }, v[2])
        if dq[4] < 0 then dq = { -dq[1], -dq[2], -dq[3], -dq[4] } end
        dq = qnorm({ w * dq[1], w * dq[2], w * dq[3], 1 - w + w * dq[4] })
        q = qnorm(qmul(q, dq))
      end
    end
  end
  return t, q, s
end

describe("blender", function()
  it("matches a plain Lua reference: N layers, per-instance weights, masks, additive layers", function()
    for _, shape in ipairs({ { 5, 3 }, { 13, 17 }, { 30, 9 } }) do
      local J, N = shape[1], shape[2]
      local skel = limber.skeleton(H.rand_joints(J, 2))
      local out = limber.pose(skel, N)
      local layers, desc = {}, {}
      for l = 1, 4 do
        local pose, vals = rand_pose(skel, N)
        local ly = { pose = pose, vals = vals, w = {} }
        if l == 2 or l == 4 then
          ly.mask = {}
          for j = 1, J do ly.mask[j] = math.random() < 0.3 and 0 or H.rand(0, 1) end
        end
        if l == 4 then
          ly.additive = true
          local rp, rv = rand_pose(skel, 1)
          ly.reference, ly.ref = rp, rv[1]
        end
        layers[l] = ly
        desc[l] = { pose = pose, mask = ly.mask, additive = ly.additive, reference = ly.reference }
      end
      local bl = anim.blender(out, desc)
      for i = 1, N do
        for l = 1, 4 do
          local w = (math.random() < 0.2) and 0 or H.rand(0, 2)
          if i == 1 and l < 4 then w = 0 end -- all normal weights 0: rest pose
          layers[l].w[i] = w
          bl:set_weight(i, l, w)
        end
      end
      bl:run()
      for i = 1, N do
        assert.equal(1, out:dirty(i))
        for j = 1, J do
          local rt, rr, rs = skel:rest_trs(j)
          local et, eq, es = ref_blend({ rt, rr, rs }, layers, i, j)
          local t, q, s = out:trs(i, j)
          assert.near(et, t, 2e-5)
          assert.quat_near(eq, q, 2e-5)
          assert.near(es, s, 2e-5)
        end
      end
    end
  end)

  it("an additive layer equal to its reference changes nothing; weight 1 with one layer copies it", function()
    local skel = limber.skeleton(H.rand_joints(12, 1))
    local base, bv = rand_pose(skel, 5)
    local add = limber.pose(skel, 5)
    local ref = limber.pose(skel, 5)
    for i = 1, 5 do
      for j = 1, 12 do
        local t, r, s = H.rand_trs(true)
        add:set_trs(i, j, t, r, s)
        ref:set_trs(i, j, t, r, s)
      end
    end
    local out = limber.pose(skel, 5)
    local bl = anim.blender(out, { { pose = base }, { pose = add, additive = true, reference = ref } })
    bl:set_layer_weight(2, 1)
    bl:run()
    for i = 1, 5 do
      for j = 1, 12 do
        local t, q, s = out:trs(i, j)
        assert.near(bv[i][j][1], t, 1e-5)
        assert.quat_near(bv[i][j][2], q, 1e-5)
        assert.near(bv[i][j][3], s, 1e-5)
      end
    end
    assert.equal(1, bl:weight(3, 1))
  end)

  it("rejects bad layers and weights with clear errors", function()
    local skel = limber.skeleton(H.rand_joints(3, 1))
    local other = limber.skeleton(H.rand_joints(3, 1))
    local out, p = limber.pose(skel, 2), limber.pose(skel, 2)
    assert.error_matches(function() anim.blender(out, {}) end, "layer count 0 out of range [1, 64]", 1, true)
    assert.error_matches(function() anim.blender(out, { { pose = out } }) end,
      "layers[1].pose is the output pose", 1, true)
    assert.error_matches(function() anim.blender(out, { { pose = limber.pose(other, 2) } }) end,
      "layers[1].pose must have the output's skeleton and 2 instances", 1, true)
    assert.error_matches(function() anim.blender(out, { { pose = limber.pose(skel, 3) } }) end,
      "layers[1].pose must have the output's skeleton and 2 instances (it has 3)", 1, true)
    assert.error_matches(function()
      anim.blender(out, { { pose = p }, { pose = p, additive = true, reference = limber.pose(skel, 3) } })
    end, "layers[2].reference must have the output's skeleton and 1 or 2 instances (it has 3)", 1, true)
    assert.error_matches(function() anim.blender(out, { { pose = p, additive = true } }) end,
      "layers[1] is additive and needs a reference Pose", 1, true)
    assert.error_matches(function() anim.blender(out, { { pose = p, reference = p } }) end,
      "layers[1].reference is only for additive layers", 1, true)
    assert.error_matches(function() anim.blender(out, { { pose = p, mask = { 1, 1 } } }) end,
      "layers[1].mask has 2 weights, expected 3 (one per joint)", 1, true)
    assert.error_matches(function() anim.blender(out, { { pose = p, mask = { 1, 2, 1 } } }) end,
      "limber.anim.blender: layers[1].mask[2] (2) must be a number in [0, 1]", 1, true)
    local bl = anim.blender(out, { { pose = p } })
    assert.error_matches(function() bl:set_weight(1, 1, -1) end, "weight -1.0 must be >= 0", 1, true)
    assert.error_matches(function() bl:set_weight(3, 1, 1) end, "instance index 3 out of range [1, 2]", 1, true)
    assert.error_matches(function() bl:set_weight(1, 2, 1) end, "layer index 2 out of range [1, 1]", 1, true)
    assert.error_matches(function() bl:set_mask(1, { 0, 0.5, 7 }) end,
      "limber.Blender:set_mask: layers[1].mask[3] (7) must be a number in [0, 1]", 1, true)
    assert.equal(1, bl:weight(1, 1))
    bl:set_mask(1, { 0, 0.5, 1 })
    bl:set_mask(1, nil)
    p = nil -- luacheck: ignore
    collectgarbage()
    collectgarbage()
    bl:run()
    assert.equal(out, bl:output())
  end)
end)

-- ---- events -------------------------------------------------------------

local function event_clip()
  return anim.clip({ name = "ev", tracks = {
    { joint = 1, path = "translation", times = { 0, 2 }, values = { 0, 0, 0, 2, 0, 0 } } },
    events = { { time = 0, name = "start" }, { time = 0.5, name = "a" }, { time = 1.5, name = "b" },
      { time = 2, name = "end" } } })
end

describe("events", function()
  local clip = event_clip()
  local got
  local function rec(_, name, t) got[#got + 1] = name .. "@" .. t end
  local function step(t0, delta, loop)
    got = {}
    local t = anim.step(clip, t0, delta, loop, rec)
    return t, got
  end

  it("are listed sorted", function()
    assert.same({ { time = 0, name = "start" }, { time = 0.5, name = "a" }, { time = 1.5, name = "b" },
      { time = 2, name = "end" } }, anim.events(clip))
  end)

  it("forward: t0 < e <= t1, once", function()
    local t, g = step(0.2, 0.3, true)
    assert.near(0.5, t, 1e-12)
    assert.same({ "a@0.5" }, g)
    t, g = step(0.5, 0.5, true)
    assert.same({}, g)
    assert.near(1, t, 1e-12)
  end)

  it("across a loop wrap (the event at the duration is the one at 0)", function()
    local t, g = step(1.4, 1.2, true)
    assert.near(0.6, t, 1e-12)
    assert.same({ "b@1.5", "end@0", "start@0", "a@0.5" }, g)
    t, g = step(1.9, 4.0, true) -- two laps
    assert.near(1.9, t, 1e-12)
    assert.same({ "end@0", "start@0", "a@0.5", "b@1.5", "end@0", "start@0", "a@0.5", "b@1.5" }, g)
  end)

  it("backward: t1 <= e < t0, also across the wrap", function()
    local t, g = step(1.6, -0.2, true)
    assert.same({ "b@1.5" }, g)
    assert.near(1.4, t, 1e-12)
    t, g = step(0.6, -1.0, true)
    assert.same({ "a@0.5", "start@0", "end@0" }, g)
    assert.near(1.6, t, 1e-12)
  end)

  it("clamp mode stops at the ends and reports the end event once", function()
    local t, g = step(1.8, 1, false)
    assert.equal(2, t)
    assert.same({ "end@2" }, g)
    t, g = step(2, 1, false)
    assert.same({}, g)
    assert.equal(2, t)
    t, g = step(0.3, -1, false)
    assert.same({ "start@0" }, g)
    assert.equal(0, t)
  end)

  it("random forward and backward steps cross each event exactly once per crossing", function()
    for _ = 1, 20 do
      local d = clip:duration()
      local counts = {}
      local function count(_, name) counts[name] = (counts[name] or 0) + 1 end
      local pos = H.rand(0, d)
      local t, start = pos, pos
      local dir = math.random() < 0.5 and 1 or -1
      for _ = 1, 200 do
        local delta = dir * H.rand(0, 0.3)
        t = anim.step(clip, t, delta, true, count)
        pos = pos + delta
      end
      -- expected crossings of event e: integers m with e + m d in (start, pos] (or [pos, start))
      local function expected(e)
        local lo, hi = math.min(start, pos), math.max(start, pos)
        if dir > 0 then return math.floor((hi - e) / d) - math.floor((lo - e) / d) end
        return math.ceil((hi - e) / d) - math.ceil((lo - e) / d)
      end
      assert.equal(expected(0), counts.start or 0)
      assert.equal(expected(0), counts["end"] or 0)
      assert.equal(expected(0.5), counts.a or 0)
      assert.equal(expected(1.5), counts.b or 0)
    end
  end)
end)

-- ---- crowds ---------------------------------------------------------------

describe("crowd", function()
  local skel = limber.skeleton({ { name = "root" }, { name = "spine", parent = "root" },
    { name = "arm", parent = "spine" } })
  local walk = anim.clip({ name = "walk", tracks = {
    { joint = "root", path = "translation", times = { 0, 1 }, values = { 0, 0, 0, 1, 0, 0 } },
    { joint = "spine", path = "rotation", times = { 0, 1 }, values = { 0, 0, 0, 1, 0, 0, 0.3826834, 0.9238795 } },
  }, events = { { time = 0.25, name = "step" }, { time = 0.75, name = "step" } } }, skel)
  local wave = anim.clip({ name = "wave", tracks = {
    { joint = "arm", path = "translation", times = { 0, 2 }, values = { 0, 0, 0, 0, 4, 0 } },
    { joint = "spine", path = "rotation", times = { 0, 2 }, values = { 0, 0.3826834, 0, 0.9238795, 0, 0, 0, 1 } },
  } }, skel)

  local function sample(clip, t, loop, j, path)
    return pack(clip:sample_joint(j, path, t, loop))
  end

  it("plays each instance's clip at its time, rates incl. negative, loop and clamp", function()
    local pose = limber.pose(skel, 3)
    local crowd = anim.crowd(pose, { walk, wave })
    crowd:player(1):play(walk)
    crowd:player(2):play("wave", { rate = -1, time = 0.5 })
    crowd:player(3):play(1, { loop = false, time = 0.9 })
    for _ = 1, 6 do crowd:advance(0.1) end
    crowd:evaluate()
    assert.near(0.6, crowd:player(1):time(), 1e-9)
    assert.near(1.9, crowd:player(2):time(), 1e-9)
    assert.near(1, crowd:player(3):time(), 1e-9)
    assert.near(sample(walk, 0.6, true, 1, "translation"), (pose:trs(1, 1)), 1e-6)
    assert.near(sample(wave, 1.9, true, 3, "translation"), (pose:trs(2, 3)), 1e-6)
    assert.near({ 1, 0, 0 }, (pose:trs(3, 1)), 1e-6)
    -- untracked joints keep the rest pose
    assert.near({ 0, 0, 0 }, (pose:trs(2, 1)), 0)
    assert.error_matches(function() crowd:player(1):play({}) end, "clip is not in the crowd's clip set", 1, true)
    assert.error_matches(function() crowd:player(9) end, "instance 9 out of range [1, 3]", 1, true)
  end)

  it("cross-fades: starts at the old clip's pose, ends at the new one's", function()
    local pose = limber.pose(skel, 2)
    local crowd = anim.crowd(pose, { walk, wave })
    local p = crowd:player(2)
    p:play(walk, { time = 0.3 })
    crowd:advance(0)
    p:play(wave, { fade = 0.5, time = 1 })
    crowd:advance(0)
    crowd:evaluate()
    local _, q = pose:trs(2, 2)
    assert.quat_near(sample(walk, 0.3, true, 2, "rotation"), q, 1e-6)
    assert.is_true((p:fading()))
    crowd:advance(0.25)
    crowd:evaluate()
    _, q = pose:trs(2, 2)
    -- halfway: normalised sum of the two rotations
    local a, b = sample(walk, 0.55, true, 2, "rotation"), sample(wave, 1.25, true, 2, "rotation")
    local dot = a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4]
    local sg = dot < 0 and -1 or 1
    local m = qnorm({ a[1] + sg * b[1], a[2] + sg * b[2], a[3] + sg * b[3], a[4] + sg * b[4] })
    assert.quat_near(m, q, 1e-5)
    crowd:advance(0.25)
    crowd:evaluate()
    assert.is_false((p:fading()))
    _, q = pose:trs(2, 2)
    assert.quat_near(sample(wave, 1.5, true, 2, "rotation"), q, 1e-6)
    assert.near(sample(wave, 1.5, true, 3, "translation"), (pose:trs(2, 3)), 1e-6)
    -- instance 1 never played: rest pose
    assert.near({ 0, 0, 0 }, (pose:trs(1, 3)), 0)
  end)

  it("layers with masks: an upper-body layer only moves masked joints", function()
    local pose = limber.pose(skel, 1)
    local crowd = anim.crowd(pose, { walk, wave }, { layers = { { name = "base" },
      { name = "upper", mask = { 0, 0, 1 } } } })
    crowd:player(1):play(walk, { time = 0.5 })
    crowd:player(1, "upper"):play(wave, { time = 1 })
    crowd:advance(0)
    crowd:evaluate()
    assert.near(sample(walk, 0.5, true, 1, "translation"), (pose:trs(1, 1)), 1e-6)
    -- arm: base (rest, untracked in walk) and wave averaged 50/50
    local wt = sample(wave, 1, true, 3, "translation")
    assert.near({ wt[1] / 2, wt[2] / 2, wt[3] / 2 }, (pose:trs(1, 3)), 1e-6)
    crowd:player(1):set_weight(0)
    crowd:advance(0)
    crowd:evaluate()
    assert.near(wt, (pose:trs(1, 3)), 1e-6)
  end)

  it("additive layers add the difference to a reference pose", function()
    local pose = limber.pose(skel, 1)
    local ref = anim.reference_pose(skel, wave, 0)
    local crowd = anim.crowd(pose, { walk, wave }, { layers = { { name = "base" },
      { name = "add", additive = true, reference = ref } } })
    crowd:player(1):play(walk, { time = 0.5 })
    crowd:player(1, "add"):play(wave, { time = 1 })
    crowd:player(1, "add"):set_weight(0.5)
    crowd:advance(0)
    crowd:evaluate()
    local wt = sample(wave, 1, true, 3, "translation")
    assert.near({ 0, wt[2] * 0.5, 0 }, (pose:trs(1, 3)), 1e-6)
  end)

  it("reports events once per crossing through players, with seeks", function()
    local pose = limber.pose(skel, 2)
    local log = {}
    local crowd = anim.crowd(pose, { walk }, { on_event = function(player, name, t)
      log[#log + 1] = ("%d:%s@%g"):format(player:instance(), name, t)
    end })
    crowd:player(1):play(walk, { time = 0.1 })
    crowd:player(2):play(walk, { time = 0.9, rate = -1 })
    crowd:advance(0.2)
    assert.same({ "1:step@0.25", "2:step@0.75" }, log)
    log = {}
    crowd:advance(0.5)
    assert.same({ "1:step@0.75", "2:step@0.25" }, log)
    log = {}
    crowd:player(1):seek(0.1, true) -- back from 0.8 over 0.75 and 0.25
    assert.same({ "1:step@0.75", "1:step@0.25" }, log)
    log = {}
    crowd:player(1):seek(0.9) -- silent
    assert.same({}, log)
    crowd:advance(0.4) -- 0.9 -> 1.3 = 0.3 wraps
    assert.same({ "1:step@0.25" }, log)
  end)

  it("passes each event's payload to anim.step, players and anim.events", function()
    local left, right = { foot = "left" }, { foot = "right" }
    local clip = anim.clip({ tracks = { { joint = 1, path = "translation", times = { 0, 1 },
      values = { 0, 0, 0, 1, 0, 0 } } }, events = { { time = 0.75, name = "step", data = right },
      { time = 0.25, name = "step", data = left }, { time = 1, name = "lap", data = 7 },
      { time = 0.5, name = "mid" } } }, skel)
    local ev = anim.events(clip)
    assert.same({ left, "mid", right, 7 }, { ev[1].data, ev[2].name, ev[3].data, ev[4].data })
    assert.is_nil(ev[2].data)
    local got = {}
    local function log(_, name, t, data)
      got[#got + 1] = ("%s@%g:%s"):format(name, t, type(data) == "table" and data.foot
        or tostring(data))
    end
    anim.step(clip, 0.1, 1.2, true, log)       -- 0.1 -> 1.3: a lap, 'lap' at 0 after it
    assert.same({ "step@0.25:left", "mid@0.5:nil", "step@0.75:right", "lap@0:7",
                  "step@0.25:left" }, got)
    got = {}
    anim.step(clip, 0.9, -0.8, false, log)     -- backward, clamped
    assert.same({ "step@0.75:right", "mid@0.5:nil", "step@0.25:left" }, got)
    got = {}
    local pose = limber.pose(skel, 1)
    local crowd = anim.crowd(pose, { clip }, { on_event = function(player, name, t, data)
      log(player, name, t, data)
    end })
    crowd:player(1):play(clip, { time = 0.6 })
    crowd:advance(0.3)
    assert.same({ "step@0.75:right" }, got)
  end)

  it("extracts root motion across wraps and removes it from the pose", function()
    local pose = limber.pose(skel, 1)
    local crowd = anim.crowd(pose, { walk }, { root_motion = { joint = 1 } })
    local p = crowd:player(1)
    p:play(walk, { time = 0.9 })
    crowd:advance(0.3) -- crosses the loop: 0.9 -> 0.2, moved 0.3 m
    local dx, dy, dz = p:root_delta()
    assert.near(0.3, dx, 1e-6)
    assert.near(0, dy, 1e-9)
    assert.near(0, dz, 1e-9)
    crowd:evaluate()
    assert.near({ 0, 0, 0 }, (pose:trs(1, 1)), 1e-6)
    p:set_rate(-2)
    crowd:advance(0.25) -- 0.2 -> -0.3 = 0.7, moved -0.5 m
    dx = p:root_delta()
    assert.near(-0.5, dx, 1e-6)
  end)

  it("extracts and removes yaw too (rotation about +Y)", function()
    local sk = limber.skeleton({ { name = "root", translation = { 0, 1, 0 } }, { name = "leg", parent = "root" } })
    local h = math.sin(math.pi / 4 / 2)
    local turn = anim.clip({ tracks = {
      { joint = 1, path = "translation", times = { 0, 1 }, values = { 0, 1, 0, 2, 1.5, 0 } },
      { joint = 1, path = "rotation", times = { 0, 1 }, values = { 0, 0, 0, 1, 0, h, 0, math.cos(math.pi / 8) } },
    } })
    local pose = limber.pose(sk, 1)
    local crowd = anim.crowd(pose, { turn }, { root_motion = { joint = 1, yaw = true } })
    local p = crowd:player(1)
    p:play(turn, { time = 0.9 })
    crowd:advance(0.3) -- 0.9 -> 0.2 across the wrap: 45 degrees per lap
    local dx, dy, _, dyaw = p:root_delta()
    assert.near(math.rad(45) * 0.3, dyaw, 1e-5)
    assert.near(0.6, dx, 1e-6)
    assert.near(0.15, dy, 1e-6)
    crowd:evaluate()
    local t, q = pose:trs(1, 1)
    assert.near({ 0, 1.1, 0 }, t, 1e-6) -- x, z back to time 0, y kept
    assert.quat_near({ 0, 0, 0, 1 }, q, 1e-6) -- the yaw gained since time 0 removed
  end)

  it("extracts yaw past 90 degrees on every Lua (atan of y and x, not of y / x)", function()
    local sk = limber.skeleton({ { name = "root" } })
    local a = math.rad(170)
    local turn = anim.clip({ tracks = {
      { joint = 1, path = "translation", times = { 0, 1 }, values = { 0, 0, 0, 0, 0, 0 } },
      { joint = 1, path = "rotation", times = { 0, 1 },
        values = { 0, 0, 0, 1, 0, math.sin(a / 2), 0, math.cos(a / 2) } },
    } })
    local pose = limber.pose(sk, 1)
    local crowd = anim.crowd(pose, { turn }, { root_motion = { joint = 1, yaw = true } })
    local p = crowd:player(1)
    p:play(turn, { time = 0.5 })
    crowd:advance(0.25)
    local _, _, _, dyaw = p:root_delta()
    -- the yaw of a rotation about +Y from its quaternion, without atan
    local function yaw_at(t)
      local _, qy, _, qw = turn:sample_joint(1, "rotation", t, false)
      return 2 * math.acos(qw) * (qy < 0 and -1 or 1)
    end
    assert.is_true(yaw_at(0.75) > math.pi / 2) -- where atan(y / x) lands in the wrong half
    assert.near(yaw_at(0.75) - yaw_at(0.5), dyaw, 1e-5)
  end)

  it("makes no Lua garbage per frame", function()
    local N = 40
    local pose = limber.pose(skel, N)
    local n = 0
    local crowd = anim.crowd(pose, { walk, wave }, { on_event = function() n = n + 1 end,
      layers = { { name = "base" }, { name = "upper", mask = { 0, 1, 1 } } }, root_motion = { joint = 1 } })
    for i = 1, N do
      crowd:player(i):play(i % 2 == 0 and walk or wave, { time = i * 0.1, rate = i % 3 == 0 and -1 or 1 })
      crowd:player(i, "upper"):play(wave, { time = i * 0.05 })
    end
    for i = 1, N, 2 do crowd:player(i):play(walk, { fade = 10 }) end
    local function frame()
      crowd:advance(1 / 60)
      crowd:evaluate()
      pose:local_to_model()
    end
    H.interpreted(finally) -- LuaJIT: compiling traces allocates trace objects on the Lua heap
    local before, after
    collectgarbage()
    collectgarbage("stop")
    -- warm-up frames after the collection, from the measuring loop's stack slots: a full
    -- collection shrinks the Lua stack (5.1 to 5.3, LuaJIT), which calls then grow again
    for _ = 1, 10 do frame() end
    before = collectgarbage("count")
    for _ = 1, 300 do frame() end
    after = collectgarbage("count")
    collectgarbage("restart")
    assert.is_true(n > 0)
    assert.equal(before, after)
  end)
end)
