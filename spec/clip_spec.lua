-- Clips: interpolation against hand-computed values, the InterpolationTest
-- reference data and a plain Lua sampler; batched sampling; cursors against
-- binary search; every build-time error.
local H = require "spec.helper"
local limber = require "limber"
local anim = require "limber.anim"
local cjson = require "cjson"

H.seed("clip")

-- ---- plain Lua reference sampler (double precision) ---------------------

local qnorm, slerp = H.qnorm, H.slerp

-- Value of key k (1-based) of a track description as a table.
local function key(tr, k, part)
  local w = tr.path == "rotation" and 4 or 3
  local per = tr.interpolation == "CUBICSPLINE" and 3 * w or w
  local off = (k - 1) * per + (tr.interpolation == "CUBICSPLINE" and (part or 1) * w or 0)
  local v = {}
  for m = 1, w do v[m] = tr.values[off + m] end
  if w == 4 and (part or 1) == 1 then v = qnorm(v) end
  return v
end

local function ref_sample(tr, t)
  local times, n = tr.times, #tr.times
  if n == 1 or t <= times[1] then return key(tr, 1) end
  if t >= times[n] then return key(tr, n) end
  local k = 1
  while times[k + 1] <= t do k = k + 1 end
  local t0, t1 = times[k], times[k + 1]
  local s = (t - t0) / (t1 - t0)
  local interp = tr.interpolation or "LINEAR"
  if interp == "STEP" then return key(tr, k) end
  local a, b = key(tr, k), key(tr, k + 1)
  if interp == "LINEAR" then
    if #a == 4 then return slerp(a, b, s) end
    return { a[1] + (b[1] - a[1]) * s, a[2] + (b[2] - a[2]) * s, a[3] + (b[3] - a[3]) * s }
  end
  local dt = t1 - t0
  local out0, in1 = key(tr, k, 2), key(tr, k + 1, 0)
  local s2, s3 = s * s, s * s * s
  local v = {}
  for m = 1, #a do
    v[m] = (2 * s3 - 3 * s2 + 1) * a[m] + (s3 - 2 * s2 + s) * dt * out0[m] +
      (-2 * s3 + 3 * s2) * b[m] + (s3 - s2) * dt * in1[m]
  end
  if #v == 4 then v = qnorm(v) end
  return v
end

local function wrap(t, d, loop)
  if loop then return d > 0 and t - d * math.floor(t / d) or 0 end
  return math.max(0, math.min(d, t))
end

local function pack(...) return { ... } end
local function f32(x) return (H.unpack("<f", H.pack("<f", x))) end

local function rand_track(target, path, interp, nkeys, node)
  local times, values, t = {}, {}, H.rand(0, 0.3)
  local w = path == "rotation" and 4 or 3
  local q = H.rand_quat()
  for k = 1, nkeys do
    times[k] = f32(t) -- float32, as stored
    t = t + H.rand(0.01, 0.4)
    local parts = interp == "CUBICSPLINE" and 3 or 1
    for part = 1, parts do
      if w == 4 and (parts == 1 or part == 2) then
        -- random walk of rotations (some keys far apart, some close), random signs
        local r = H.rand_quat()
        local s = H.rand(0, 1) < 0.3 and 0.02 or 0.6
        q = qnorm({ q[1] + s * r[1], q[2] + s * r[2], q[3] + s * r[3], q[4] + s * r[4] })
        local sign = math.random() < 0.3 and -1 or 1
        for m = 1, 4 do values[#values + 1] = sign * q[m] * H.rand(0.5, 2) end
      else
        for _ = 1, w do values[#values + 1] = H.rand(-2, 2) end
      end
    end
  end
  return { joint = not node and target or nil, node = node and target or nil, path = path,
    interpolation = interp, times = times, values = values }
end

local PATHS = { "translation", "rotation", "scale" }
local INTERPS = { "STEP", "LINEAR", "CUBICSPLINE" }

local function rand_clip_desc(joints, coverage)
  local tracks = {}
  for j = 1, joints do
    for _, path in ipairs(PATHS) do
      if math.random() < coverage then
        tracks[#tracks + 1] = rand_track(j, path, INTERPS[math.random(1, 3)], math.random(1, 12))
      end
    end
  end
  -- exact: these specs compare with the key formulas (a packed clip, the
  -- default with a skeleton, is compared with its own decoding in pack_spec)
  return { tracks = tracks, pack = false }
end

local function check_value(path, expected, actual, tol)
  if path == "rotation" then
    assert.quat_near(expected, actual, tol)
  else
    assert.near(expected, actual, tol)
  end
end

-- ---- hand-computed values ----------------------------------------------

describe("clip sampling (hand-computed)", function()
  local s2 = math.sqrt(0.5)
  local clip = anim.clip({ name = "hand", tracks = {
    { joint = 1, path = "translation", interpolation = "STEP", times = { 1, 2, 4 },
      values = { 0, 0, 0, 1, 2, 3, 5, 5, 5 } },
    { joint = 2, path = "translation", times = { 1, 2, 4 }, values = { 0, 0, 0, 1, 2, 3, 5, 6, 7 } },
    { joint = 2, path = "rotation", times = { 0, 2 }, values = { 0, 0, 0, 1, 0, 0, s2, s2 } },
    { joint = 3, path = "rotation", times = { 0, 1 }, values = { 0, 0, 0, 2, 0, 0, -1, 0 } },
    { joint = 3, path = "scale", interpolation = "CUBICSPLINE", times = { 0, 2 },
      values = { 9, 9, 9, 1, 1, 1, 1, 1, 1, 0, 0, 0, 3, 3, 3, 9, 9, 9 } },
  } })

  it("has the largest key time as duration and a name", function()
    assert.equal(4, clip:duration())
    assert.equal("hand", clip:name())
    assert.equal(0, #clip:node_tracks())
    assert.equal(5, #clip:joint_tracks())
  end)

  it("STEP holds key k on [t_k, t_k+1), first before and last after", function()
    for _, c in ipairs({ { 0, { 0, 0, 0 } }, { 1, { 0, 0, 0 } }, { 1.99, { 0, 0, 0 } }, { 2, { 1, 2, 3 } },
      { 3.999, { 1, 2, 3 } }, { 4, { 5, 5, 5 } }, { 9, { 5, 5, 5 } }, { -1, { 0, 0, 0 } } }) do
      assert.near(c[2], pack(clip:sample_joint(1, "translation", c[1], false)), 0)
    end
  end)

  it("LINEAR lerps translations; clamps outside the keys", function()
    assert.near({ 0, 0, 0 }, pack(clip:sample_joint(2, "translation", 0.5, false)), 0)
    assert.near({ 0.25, 0.5, 0.75 }, pack(clip:sample_joint(2, "translation", 1.25, false)), 1e-6)
    assert.near({ 3, 4, 5 }, pack(clip:sample_joint(2, "translation", 3, false)), 1e-6)
    assert.near({ 5, 6, 7 }, pack(clip:sample_joint(2, "translation", 4, false)), 0)
    assert.near({ 5, 6, 7 }, pack(clip:sample_joint(2, "translation", 100, false)), 0)
  end)

  it("LINEAR slerps rotations (90 degrees about z: 45 at the middle)", function()
    local a = math.pi / 8
    assert.quat_near({ 0, 0, math.sin(a), math.cos(a) }, pack(clip:sample_joint(2, "rotation", 1, false)), 1e-6)
    local a3 = math.rad(27) / 2
    assert.quat_near({ 0, 0, math.sin(a3), math.cos(a3) }, pack(clip:sample_joint(2, "rotation", 0.6, false)), 1e-6)
  end)

  it("takes the shortest path and normalises keys at build", function()
    -- keys (0,0,0,2) -> identity and (0,0,-1,0): -q is (0,0,1,0), 180 degrees about z
    -- either way; check the rotation stays on the z axis and unit length
    local q = pack(clip:sample_joint(3, "rotation", 0.5, false))
    assert.near(0, q[1], 1e-6)
    assert.near(0, q[2], 1e-6)
    assert.near(1, q[3] ^ 2 + q[4] ^ 2, 1e-6)
    assert.near(math.sqrt(0.5), math.abs(q[3]), 1e-6)
    -- a key pair 350 degrees apart "forward" goes 10 degrees the short way
    local c2 = anim.clip({ tracks = { { joint = 1, path = "rotation", times = { 0, 1 },
      values = { 0, 0, 0, 1, 0, 0, math.sin(math.rad(175)), math.cos(math.rad(175)) } } } })
    local mid = pack(c2:sample_joint(1, "rotation", 0.5, false))
    local ang = 2 * math.deg(math.acos(math.min(1, math.abs(mid[4]))))
    assert.near(5, ang, 1e-3) -- half of the short 10-degree path (175 deg quaternion = 350 deg)
  end)

  it("CUBICSPLINE is the Hermite spline with tangents times the key interval", function()
    -- v0 = 1, out0 = 1 (per second), v1 = 3, in1 = 0, dt = 2
    for _, t in ipairs({ 0, 0.3, 1, 1.7, 2 }) do
      local s = t / 2
      local e = (2 * s ^ 3 - 3 * s ^ 2 + 1) * 1 + (s ^ 3 - 2 * s ^ 2 + s) * 2 * 1 + (-2 * s ^ 3 + 3 * s ^ 2) * 3
      local v = pack(clip:sample_joint(3, "scale", t, false))
      assert.near({ e, e, e }, v, 1e-5)
    end
    assert.near({ 3, 3, 3 }, pack(clip:sample_joint(3, "scale", 3, false)), 0)
  end)

  it("loops with t - d floor(t / d): t = d gives the pose at 0, negative times wrap", function()
    local function tr(t, loop) return pack(clip:sample_joint(2, "translation", t, loop)) end
    assert.near(tr(0, false), tr(4, true), 0)
    assert.near(tr(3, false), tr(-1, true), 1e-6)
    local function at(t, loop) return pack(clip:sample_joint(2, "translation", t, loop)) end
    assert.near(at(1.5), at(9.5, true), 1e-6)
    assert.near(at(2.5), at(-5.5, true), 1e-6)
    assert.near({ 5, 6, 7 }, pack(clip:sample_joint(2, "translation", 4, false)), 0)
    assert.is_nil(clip:sample_joint(1, "scale", 1, false))
  end)
end)

-- ---- InterpolationTest reference ----------------------------------------

describe("InterpolationTest reference (three.js)", function()
  local dir = H.assets .. "InterpolationTest/"
  local function read(path)
    local f = assert(io.open(path, "rb"))
    local s = f:read("*a")
    f:close()
    return s
  end
  local gltf = cjson.decode(read(dir .. "InterpolationTest.gltf"))
  local bin = read(dir .. gltf.buffers[1].uri)
  local NCOMP = { SCALAR = 1, VEC3 = 3, VEC4 = 4 }
  -- test-only accessor reader: float accessors, tightly packed or strided
  local function accessor(i)
    local a = gltf.accessors[i + 1]
    local view = gltf.bufferViews[a.bufferView + 1]
    assert.equal(5126, a.componentType)
    local nc = NCOMP[a.type]
    local stride = view.byteStride or nc * 4
    local base = (view.byteOffset or 0) + (a.byteOffset or 0)
    local out = {}
    for k = 0, a.count - 1 do
      for m = 0, nc - 1 do
        out[#out + 1] = H.unpack("<f", bin, base + k * stride + m * 4 + 1)
      end
    end
    return out
  end

  for ai, a in ipairs(gltf.animations) do
    local ch = a.channels[1]
    local smp = a.samplers[ch.sampler + 1]
    local clip = anim.clip({ name = a.name, tracks = { { node = ch.target.node, path = ch.target.path,
      interpolation = smp.interpolation, times = accessor(smp.input), values = accessor(smp.output) } } })
    for _, mode in ipairs({ "clamp", "repeat" }) do
      it(("%s (%s, %s) at every reference time"):format(a.name, smp.interpolation, mode), function()
        local ref = cjson.decode(read(("%sInterpolationTest/anim%d.%s.json"):format(H.reference, ai - 1, mode)))
        assert.equal(a.name, ref.animation.name)
        assert.near(ref.animation.duration, clip:duration(), 1e-6)
        local nt = clip:node_tracks()
        assert.same({ node = ch.target.node, path = ch.target.path, interpolation = smp.interpolation,
          keys = #accessor(smp.input) }, nt[1])
        assert.is_true(#ref.frames >= 9)
        for _, f in ipairs(ref.frames) do
          local node
          for _, n in ipairs(f.nodes) do if n.node == ch.target.node then node = n end end
          local v = pack(clip:sample_node(1, f.t, mode == "repeat"))
          check_value(ch.target.path, node[ch.target.path], v, 2e-5)
          -- the batched joint path gives the same values
          local c2 = anim.clip({ tracks = { { joint = 1, path = ch.target.path, interpolation = smp.interpolation,
            times = accessor(smp.input), values = accessor(smp.output) } } })
          check_value(ch.target.path, node[ch.target.path],
            pack(c2:sample_joint(1, ch.target.path, f.t, mode == "repeat")), 2e-5)
        end
      end)
    end
  end
end)

-- ---- random clips vs the plain Lua sampler ------------------------------

describe("clip sampling (random, against a plain Lua sampler)", function()
  it("matches for every interpolation, path and time, incl. outside the keys", function()
    for _ = 1, 40 do
      local desc = rand_clip_desc(4, 0.8)
      local clip = anim.clip(desc)
      local d = clip:duration()
      for _ = 1, 30 do
        local t = H.rand(-0.5, d + 0.5)
        local tr = desc.tracks[math.random(1, #desc.tracks)]
        local k = math.random(1, #tr.times)
        local choices = { f32(t), tr.times[k], f32(tr.times[k] + 1e-4), f32(tr.times[k] - 1e-4) }
        for _, tt in ipairs(choices) do
          for _, loop in ipairs({ false, true }) do
            local e = ref_sample(tr, wrap(tt, d, loop))
            check_value(tr.path, e, pack(clip:sample_joint(tr.joint, tr.path, tt, loop)), 2e-5)
          end
        end
      end
    end
  end)

  it("accepts Buffers for times and values", function()
    local tr = rand_track(1, "rotation", "CUBICSPLINE", 6)
    local c1 = anim.clip({ tracks = { tr } })
    local c2 = anim.clip({ tracks = { { joint = 1, path = "rotation", interpolation = "CUBICSPLINE",
      times = limber.buffer("f32", 1, tr.times), values = limber.buffer("f32", 4, tr.values) } } })
    for _ = 1, 20 do
      local t = H.rand(0, c1:duration())
      assert.near(pack(c1:sample_joint(1, "rotation", t, false)), pack(c2:sample_joint(1, "rotation", t, false)), 0)
    end
  end)
end)

-- ---- batched sampling ---------------------------------------------------

local function skeleton(n)
  return limber.skeleton(H.rand_joints(n, 1))
end

describe("batched sampler", function()
  it("samples every instance with its own clip and time; untracked joints keep the rest pose", function()
    local J, N = 9, 21
    local skel = skeleton(J)
    local descs, clips = {}, {}
    for k = 1, 3 do
      descs[k] = rand_clip_desc(J, k == 1 and 1 or 0.4)
      clips[k] = anim.clip(descs[k], skel)
    end
    local pose = limber.pose(skel, N)
    local s = anim.sampler(pose, clips)
    local set = {}
    for round = 1, 3 do
      for i = 1, N do
        local k = math.random(0, 3)
        local loop = math.random() < 0.5
        local t = f32(H.rand(-3, 6))
        s:set(i, k ~= 0 and k or nil, t, loop) -- 0: no clip
        set[i] = { k, t, loop }
        if round == 1 then pose:set_trs(i, 1, { 9, 9, 9 }) end
      end
      s:run()
      for i = 1, N do
        local k, t, loop = set[i][1], set[i][2], set[i][3]
        for j = 1, J do
          local lt, lr, ls = pose:trs(i, j)
          local got = { translation = lt, rotation = lr, scale = ls }
          local rt, rr, rs = skel:rest_trs(j)
          local exp = { translation = rt, rotation = rr, scale = rs }
          if k > 0 then
            local d = clips[k]:duration()
            for _, tr in ipairs(descs[k].tracks) do
              if tr.joint == j then exp[tr.path] = ref_sample(tr, f32(wrap(t, d, loop))) end
            end
            for _, path in ipairs(PATHS) do check_value(path, exp[path], got[path], 3e-5) end
          end
        end
        if k > 0 then assert.equal(1, pose:dirty(i)) end
      end
      pose:local_to_model()
    end
  end)

  it("rejects clips that do not fit the skeleton and bad arguments, changing nothing", function()
    local skel = skeleton(3)
    local pose = limber.pose(skel, 4)
    local big = anim.clip({ tracks = { rand_track(5, "translation", "LINEAR", 2) } })
    assert.error_matches(function() anim.sampler(pose, { big }) end,
      "clips[1] animates joint 5 but the skeleton has 3 joints", 1, true)
    assert.error_matches(function() anim.sampler(pose, { {} }) end, "clips[1] is not a limber.Clip", 1, true)
    assert.error_matches(function() anim.sampler(pose, {}) end, "clip count 0 out of range [1, 65535]", 1, true)
    local c = anim.clip({ tracks = { rand_track(2, "translation", "LINEAR", 3) } })
    local s = anim.sampler(pose, { c })
    s:set(2, 1, 0.5, true, 2)
    assert.error_matches(function() s:set(5, 1, 0) end, "instance index 5 out of range [1, 4]", 1, true)
    assert.error_matches(function() s:set(2, 2, 0) end, "clip index 2 out of range [1, 1]", 1, true)
    assert.error_matches(function() s:set(2, 1, 0 / 0) end, "time is not a finite number", 1, true)
    -- every time argument goes through one check (lcore_check_time)
    assert.error_matches(function() s:set_time(2, math.huge) end,
      "#2 to 'limber.Sampler:set_time' (time is not a finite number", 1, true)
    assert.error_matches(function() c:sample_joint(2, "translation", -math.huge) end,
      "to 'limber.Clip:sample_joint' (time is not a finite number", 1, true)
    assert.error_matches(function() s:run(1, 9) end, "count 9 out of range [0, 4]", 1, true)
    assert.same({ 1, 0.5, true, 2 }, pack(s:get(2)))
  end)

  it("advance moves times by rate * dt, wrapping or clamping", function()
    local skel = skeleton(2)
    local pose = limber.pose(skel, 3)
    local c = anim.clip({ tracks = { { joint = 1, path = "translation", times = { 0, 2 },
      values = { 0, 0, 0, 2, 0, 0 } } } })
    local s = anim.sampler(pose, { c })
    s:set(1, 1, 1.5, true, 1)
    s:set(2, 1, 0.25, true, -1)
    s:set(3, 1, 1.5, false, 1)
    s:advance(1)
    assert.near(0.5, select(2, s:get(1)), 1e-6)
    assert.near(1.25, select(2, s:get(2)), 1e-6)
    assert.near(2, select(2, s:get(3)), 1e-6)
    s:run()
    assert.near({ 0.5, 0, 0 }, (pose:trs(1, 1)), 1e-6)
    assert.near({ 1.25, 0, 0 }, (pose:trs(2, 1)), 1e-6)
    assert.near({ 2, 0, 0 }, (pose:trs(3, 1)), 1e-6)
  end)
end)

describe("AVX2 lanes and the portable sampler", function()
  local core = limber.core
  local old
  setup(function() old = core.simd() end)
  teardown(function() core.simd(old) end)

  it("give the same poses (every interpolation, far and near rotation keys, clamps, seeks)", function()
    local J, N = 7, 45
    local skel = skeleton(J)
    local descs, clips = {}, {}
    for k = 1, 2 do
      descs[k] = rand_clip_desc(J, 0.9)
      clips[k] = anim.clip(descs[k], skel)
    end
    local pa, pb = limber.pose(skel, N), limber.pose(skel, N)
    local sa, sb = anim.sampler(pa, clips), anim.sampler(pb, clips)
    local set = {}
    for i = 1, N do
      local k = i % 11 == 0 and 0 or (i % 5 == 0 and 2 or 1)
      set[i] = { k, f32(H.rand(-1, 5)), i % 3 ~= 0 }
    end
    for frame = 1, 40 do
      for i = 1, N do
        local st = set[i]
        st[2] = frame % 7 == 0 and f32(H.rand(-1, 5)) or f32(st[2] + (i % 4 == 0 and -1 or 1) / 60)
        local k = st[1] ~= 0 and st[1] or nil -- 0: no clip
        sa:set(i, k, st[2], st[3])
        sb:set(i, k, st[2], st[3])
      end
      core.simd(true)
      sa:run()
      core.simd(false)
      sb:run()
      for i = 1, N do
        local k = set[i][1]
        for j = 1, J do
          local ta, ra, xa = pa:trs(i, j)
          local tb, rb, xb = pb:trs(i, j)
          assert.near(tb, ta, 2e-6)
          assert.quat_near(rb, ra, 2e-6)
          assert.near(xb, xa, 2e-6)
          if k > 0 and frame % 10 == 0 then
            local d = clips[k]:duration()
            for _, tr in ipairs(descs[k].tracks) do
              if tr.joint == j then
                local got = tr.path == "translation" and ta or tr.path == "rotation" and ra or xa
                check_value(tr.path, ref_sample(tr, f32(wrap(set[i][2], d, set[i][3]))), got, 3e-5)
              end
            end
          end
        end
      end
    end
  end)
end)

describe("key lookup (cursors)", function()
  local function long_clip(nkeys, rate)
    local times, tv, rv = {}, {}, {}
    for k = 1, nkeys do
      times[k] = (k - 1) / rate
      tv[#tv + 1], tv[#tv + 2], tv[#tv + 3] = math.sin(k * 0.01), k * 0.001, math.cos(k * 0.02)
      local a = k * 0.003
      rv[#rv + 1], rv[#rv + 2], rv[#rv + 3], rv[#rv + 4] = 0, math.sin(a), 0, math.cos(a)
    end
    -- uniform keys: dense = false keeps this clip on the cursor path
    return limber.core.clip({
      { joint = 1, path = "translation", times = times, values = tv },
      { joint = 2, path = "rotation", times = times, values = rv } }, nil, false)
  end

  it("random seeks, backward and sequential playback all equal a fresh binary search (36,000 keys)", function()
    local clip = long_clip(36000, 120)
    local skel = skeleton(2)
    local N = 8
    local a, b = limber.pose(skel, N), limber.pose(skel, N)
    local sa, sb = anim.sampler(a, { clip }), anim.sampler(b, { clip })
    local d = clip:duration()
    local times = {}
    for i = 1, N do times[i] = H.rand(-d, 2 * d) end
    local function compare()
      sa:run()
      sb:reset_cursors()
      sb:run()
      for i = 1, N do
        local ta, ra = a:trs(i, 1)
        local tb, rb = b:trs(i, 1)
        assert.near(tb, ta, 0)
        assert.near(rb, ra, 0)
        local _, qa = a:trs(i, 2)
        local _, qb = b:trs(i, 2)
        assert.near(qb, qa, 0)
      end
    end
    for frame = 1, 300 do
      for i = 1, N do
        local mode = (i + frame) % 4
        if mode == 0 then times[i] = times[i] + 1 / 60
        elseif mode == 1 then times[i] = times[i] - 1 / 60
        elseif mode == 2 then times[i] = H.rand(-d, 2 * d)
        else times[i] = times[i] + H.rand(0, 1) end
        sa:set(i, 1, times[i], i % 3 ~= 0)
        sb:set(i, 1, times[i], i % 3 ~= 0)
      end
      compare()
    end
    -- and against the plain formula at a few times
    local pose = limber.pose(skel, 1)
    local s = anim.sampler(pose, { clip })
    for _ = 1, 50 do
      local t = f32(H.rand(0, d))
      s:set(1, 1, t, false)
      s:run()
      local k = math.floor(t * 120) + 1
      if f32((k - 1) / 120) > t then k = k - 1 end
      if f32(k / 120) <= t then k = k + 1 end
      local u = (t - f32((k - 1) / 120)) / (f32(k / 120) - f32((k - 1) / 120))
      local x = math.sin(k * 0.01) + (math.sin((k + 1) * 0.01) - math.sin(k * 0.01)) * u
      assert.near(x, (pose:trs(1, 1))[1], 2e-5)
    end
  end)
end)

-- ---- dense clips (uniform key grids) -------------------------------------

-- A clip whose tracks all share the key grid t0 + k dt (float32 times).
-- Rotations: random walk with large steps (slerp) and small ones (nlerp).
local function uniform_desc(joints, coverage, interp, nkeys, t0, dt)
  local times = {}
  for k = 1, nkeys do times[k] = f32(t0 + (k - 1) * dt) end
  local tracks = {}
  for j = 1, joints do
    for _, path in ipairs(PATHS) do
      if math.random() < coverage or (j == 1 and path == "rotation") then
        local tr = rand_track(j, path, interp, nkeys)
        tr.times = times
        tracks[#tracks + 1] = tr
      end
    end
  end
  return { tracks = tracks, pack = false } -- exact: these specs test the dense form
end

-- The same description as a clip without the dense form (cursor path).
local function cursor_clip(desc)
  return limber.core.clip(desc.tracks, desc.name, false)
end

describe("dense clips (uniform key grid)", function()
  local core = limber.core
  local old
  setup(function() old = core.simd() end)
  teardown(function() core.simd(old) end)

  -- Samples `clips` (per instance set[i] = { clip, time, loop }) with the
  -- AVX2 and the portable kernels; checks both against the Lua sampler and
  -- returns the AVX2 pose.
  local function run_both(skel, clips, descs, set, tol)
    local J, N = skel:joint_count(), #set
    local poses = {}
    for _, simd in ipairs({ true, false }) do
      local pose = limber.pose(skel, N)
      for i = 1, N do pose:set_trs(i, 1, { 7, 7, 7 }) end
      local s = anim.sampler(pose, clips)
      for i = 1, N do s:set(i, set[i][1] ~= 0 and set[i][1] or nil, set[i][2], set[i][3]) end -- 0: no clip
      core.simd(simd)
      s:run()
      poses[#poses + 1] = pose
      for i = 1, N do
        local k, t, loop = set[i][1], set[i][2], set[i][3]
        for j = 1, J do
          local lt, lr, ls = pose:trs(i, j)
          local got = { translation = lt, rotation = lr, scale = ls }
          if k == 0 then
            if j == 1 then assert.near({ 7, 7, 7 }, lt, 0) end
          else
            local rt, rr, rs = skel:rest_trs(j)
            local exp = { translation = rt, rotation = rr, scale = rs }
            local d = clips[k]:duration()
            for _, tr in ipairs(descs[k].tracks) do
              if tr.joint == j then exp[tr.path] = ref_sample(tr, f32(wrap(t, d, loop))) end
            end
            for _, path in ipairs(PATHS) do check_value(path, exp[path], got[path], tol or 3e-5) end
          end
        end
      end
    end
    for i = 1, N do
      for j = 1, J do
        local ta, ra, xa = poses[1]:trs(i, j)
        local tb, rb, xb = poses[2]:trs(i, j)
        assert.near(tb, ta, 2e-6)
        assert.quat_near(rb, ra, 2e-6)
        assert.near(xb, xa, 2e-6)
      end
    end
    return poses[1]
  end

  it("are built for uniform LINEAR / STEP clips and equal the cursor path and the Lua sampler", function()
    for round = 1, 12 do
      local J = ({ 1, 5, 8, 9, 13, 17 })[(round - 1) % 6 + 1]
      local skel = skeleton(J)
      local interp = round % 3 == 0 and "STEP" or "LINEAR"
      local nkeys = math.random(2, 40)
      local desc = uniform_desc(J, 0.7, interp, nkeys, round % 2 == 0 and 0 or H.rand(0, 0.5),
        H.rand(0.01, 0.5))
      local dense, cursor = anim.clip(desc, skel), cursor_clip(desc)
      assert.is_true(dense:dense())
      assert.is_false(cursor:dense())
      desc.dense = false
      assert.is_false(anim.clip(desc, skel):dense())   -- the opt-out through limber.anim
      desc.dense = nil
      local d = dense:duration()
      local N = math.random(1, 27)
      local set = {}
      for i = 1, N do
        local t = f32(H.rand(-0.5 * d, 1.5 * d + 0.5))
        if i % 5 == 0 then t = desc.tracks[1].times[math.random(1, nkeys)] end -- exactly on a key
        set[i] = { 1, t, math.random() < 0.5 }
      end
      local pd = run_both(skel, { dense }, { desc }, set)
      local pc = run_both(skel, { cursor }, { desc }, set)
      for i = 1, N do
        for j = 1, J do
          local ta, ra, xa = pd:trs(i, j)
          local tb, rb, xb = pc:trs(i, j)
          assert.near(tb, ta, 2e-6)
          assert.quat_near(rb, ra, 2e-6)
          assert.near(xb, xa, 2e-6)
        end
      end
    end
  end)

  it("slerp keys 0.05 to 70 degrees apart within 2e-6 of a float64 slerp (nlerp, near-key and acos weights)", function()
    -- Every rotation key turns a random walk by a random angle up to maxdeg:
    -- up to 3.6 degrees, lanes mix nlerp with the near-key polynomial; up to
    -- 40, every chunk of 8 joints takes the polynomial; up to 70, chunks mix
    -- it with acos and sin. Random signs check the shorter arc.
    for round = 1, 9 do
      local J = ({ 8, 16, 13 })[(round - 1) % 3 + 1]
      local maxdeg = ({ 3.6, 40, 70 })[math.floor((round - 1) / 3) + 1]
      local skel = skeleton(J)
      local nkeys = 9
      local times = {}
      for k = 1, nkeys do times[k] = f32((k - 1) / 30) end
      local tracks = {}
      for j = 1, J do
        local q, values = H.rand_quat(), {}
        for _ = 1, nkeys do
          local axis, deg = H.qnorm({ H.rand(-1, 1), H.rand(-1, 1), H.rand(-1, 1), 0 }), H.rand(0.05, maxdeg)
          local h = math.rad(deg) / 2
          q = H.qnorm(H.qmul(q, { axis[1] * math.sin(h), axis[2] * math.sin(h), axis[3] * math.sin(h),
            math.cos(h) }))
          local sign = math.random() < 0.3 and -1 or 1
          for m = 1, 4 do values[#values + 1] = sign * q[m] end
        end
        tracks[j] = { joint = j, path = "rotation", interpolation = "LINEAR", times = times, values = values }
      end
      local desc = { tracks = tracks, pack = false }
      local clip = anim.clip(desc, skel)
      assert.is_true(clip:dense())
      local set = {}
      for i = 1, 19 do set[i] = { 1, f32(H.rand(0, clip:duration())), false } end
      run_both(skel, { clip }, { desc }, set, 2e-6)
    end
  end)

  it("are not built for jittered, mixed-grid, mixed-interpolation or CUBICSPLINE clips", function()
    local skel = skeleton(4)
    -- one key 1% of the interval off the grid
    local desc = uniform_desc(4, 1, "LINEAR", 20, 0, 0.1)
    local times = {}
    for k, t in ipairs(desc.tracks[1].times) do times[k] = t end
    times[7] = f32(times[7] + 0.001)
    for _, tr in ipairs(desc.tracks) do tr.times = times end
    local jittered = anim.clip(desc, skel)
    assert.is_false(jittered:dense())
    local set = {}
    for i = 1, 11 do set[i] = { 1, f32(H.rand(-0.5, 2.5)), i % 2 == 0 } end
    run_both(skel, { jittered }, { desc }, set)
    -- a tiny deviation (float rounding of the grid) still qualifies
    local desc2 = uniform_desc(4, 1, "LINEAR", 20, 0, 0.1)
    local t2 = {}
    for k, t in ipairs(desc2.tracks[1].times) do t2[k] = t end
    t2[7] = t2[7] * (1 + 2 ^ -23)
    for _, tr in ipairs(desc2.tracks) do tr.times = t2 end
    assert.is_true(anim.clip(desc2, skel):dense())
    -- two grids: T at 10 Hz, R at 20 Hz
    local two = uniform_desc(1, 1, "LINEAR", 11, 0, 0.1)
    local r20 = rand_track(1, "rotation", "LINEAR", 21)
    r20.times = {}
    for k = 1, 21 do r20.times[k] = f32((k - 1) * 0.05) end
    two.tracks = { two.tracks[1], r20 }
    assert.is_false(anim.clip(two, skel):dense())
    -- STEP and LINEAR tracks in one clip
    local mixed = uniform_desc(2, 1, "LINEAR", 5, 0, 0.2)
    mixed.tracks[2].interpolation = "STEP"
    assert.is_false(anim.clip(mixed, skel):dense())
    assert.is_false(anim.clip(uniform_desc(2, 1, "CUBICSPLINE", 5, 0, 0.2), skel):dense())
    -- only single keys: nothing to sample densely
    assert.is_false(anim.clip(uniform_desc(2, 1, "LINEAR", 1, 0, 0.2), skel):dense())
    -- single-key tracks (constant, any interpolation, any time) fit any grid
    local const = uniform_desc(3, 1, "LINEAR", 12, 0, 0.1)
    const.tracks[2] = rand_track(1, "rotation", "CUBICSPLINE", 1)
    const.tracks[2].times = { 0.35 }
    const.tracks[6] = rand_track(2, "scale", "STEP", 1)
    local cc = anim.clip(const, skel)
    assert.is_true(cc:dense())
    local cset = {}
    for i = 1, 13 do cset[i] = { 1, f32(H.rand(-0.5, 1.6)), i % 2 == 0 } end
    run_both(skel, { cc }, { const }, cset)
  end)

  it("mix with cursor clips, smaller clips and idle lanes in one pose block", function()
    local J = 19
    local skel = skeleton(J)
    local descs = {
      uniform_desc(J, 0.8, "LINEAR", 31, 0, 1 / 30),    -- dense, every chunk
      rand_clip_desc(J, 0.7),                            -- cursor path
      uniform_desc(6, 1, "LINEAR", 9, 0.1, 0.25),       -- dense, one chunk of 8 joints
      uniform_desc(11, 0.6, "STEP", 14, 0, 0.07),       -- dense STEP, two chunks
    }
    local clips = {}
    for k, desc in ipairs(descs) do clips[k] = anim.clip(desc, skel) end
    assert.is_true(clips[1]:dense())
    assert.is_false(clips[2]:dense())
    assert.is_true(clips[3]:dense())
    assert.is_true(clips[4]:dense())
    for _ = 1, 6 do
      local N = math.random(9, 40)
      local set = {}
      for i = 1, N do
        local k = math.random(0, 4)
        local d = k > 0 and clips[k]:duration() or 1
        set[i] = { k, f32(H.rand(-0.3 * d, 1.3 * d)), math.random() < 0.5 }
      end
      run_both(skel, clips, descs, set)
    end
  end)

  it("play forward, backward and seek like the cursor path (long clip, root motion)", function()
    local J, N = 10, 16
    local skel = skeleton(J)
    local desc = uniform_desc(J, 0.9, "LINEAR", 600, 0, 1 / 120)
    local dense, cursor = anim.clip(desc, skel), cursor_clip(desc)
    assert.is_true(dense:dense())
    local pa, pb = limber.pose(skel, N), limber.pose(skel, N)
    local sa, sb = anim.sampler(pa, { dense }), anim.sampler(pb, { cursor })
    sa:set_root_motion(1, true, true)
    sb:set_root_motion(1, true, true)
    local d = dense:duration()
    for i = 1, N do
      local t, rate = H.rand(0, d), i % 3 == 0 and -1.5 or 1
      sa:set(i, 1, t, i % 4 ~= 0, rate)
      sb:set(i, 1, t, i % 4 ~= 0, rate)
    end
    for frame = 1, 60 do
      if frame % 9 == 0 then
        for i = 1, N do
          local t = H.rand(-d, 2 * d)
          sa:set_time(i, t)
          sb:set_time(i, t)
        end
      end
      sa:advance(1 / 60)
      sb:advance(1 / 60)
      core.simd(frame % 2 == 0)
      sa:run()
      sb:run()
      for i = 1, N do
        for j = 1, J do
          local ta, ra, xa = pa:trs(i, j)
          local tb, rb, xb = pb:trs(i, j)
          -- the root's yaw removal (atan2 of the sampled rotation's forward
          -- axis on the ground) turns a rounding difference d of the sampled
          -- rotation into a yaw difference of about d / r, r the length of that
          -- projection: near a vertical forward axis (r -> 0) the yaw is
          -- ill-conditioned (seed 1796157897 on Lua 5.3: r = 0.002, 6e-5 off)
          local tol = 2e-6
          if j == 1 then
            local x, y, z, w = ra[1], ra[2], ra[3], ra[4]
            local r = math.sqrt((2 * (w * y + x * z)) ^ 2 + (1 - 2 * (y * y + x * x)) ^ 2)
            tol = 2e-5 + 4e-6 / math.max(r, 1e-3)
          end
          assert.near(tb, ta, tol)
          assert.quat_near(rb, ra, tol)
          assert.near(xb, xa, tol)
        end
      end
    end
  end)

  it("sample ranges of instances (run(first, count)) like one whole run", function()
    local J, N = 12, 37
    local skel = skeleton(J)
    local descs = { uniform_desc(J, 0.9, "LINEAR", 20, 0, 0.1), rand_clip_desc(J, 0.5) }
    local clips = { anim.clip(descs[1], skel), anim.clip(descs[2], skel) }
    for _, simd in ipairs({ true, false }) do
      core.simd(simd)
      for _ = 1, 5 do
        local pa, pb = limber.pose(skel, N), limber.pose(skel, N)
        local sa, sb = anim.sampler(pa, clips), anim.sampler(pb, clips)
        for i = 1, N do
          local k, t = math.random(0, 2), f32(H.rand(-0.5, 2.5))
          local kk = k ~= 0 and k or nil -- 0: no clip
          sa:set(i, kk, t)
          sb:set(i, kk, t)
        end
        sa:run()
        local first = 1
        while first <= N do
          local count = math.min(N - first + 1, math.random(1, 20))
          sb:run(first, count)
          first = first + count
        end
        for i = 1, N do
          for j = 1, J do
            local ta, ra, xa = pa:trs(i, j)
            local tb, rb, xb = pb:trs(i, j)
            assert.near(ta, tb, 2e-6)
            assert.quat_near(ra, rb, 2e-6)
            assert.near(xa, xb, 2e-6)
          end
        end
      end
    end
  end)

  it("keep their frames alive while a sampler uses the clip", function()
    local skel = skeleton(3)
    local desc = uniform_desc(3, 1, "LINEAR", 50, 0, 0.1)
    local s = anim.sampler(limber.pose(skel, 9), { anim.clip(desc, skel) })
    collectgarbage()
    collectgarbage()
    assert.is_true(s:clips()[1]:dense())
    for i = 1, 9 do s:set(i, 1, 0.1 * i + 0.05) end
    s:run()
    for i = 1, 9 do
      check_value("rotation", ref_sample(desc.tracks[2], f32(0.1 * i + 0.05)),
        select(2, s:pose():trs(i, 1)), 3e-5)
    end
  end)

  it("rejects a non-boolean dense flag", function()
    assert.error_matches(function() limber.core.clip({}, nil, 1) end, "boolean expected", 1, true)
  end)

  it("are not built for a few joints of a wide span (the frames would dwarf the keys)", function()
    -- one track on joint 2000: the dense form would keep 250 chunks a frame
    local times, values = {}, {}
    for k = 1, 300 do
      times[k] = (k - 1) / 30
      values[3 * k - 2], values[3 * k - 1], values[3 * k] = k, 0, 0
    end
    local sparse = limber.core.clip({ { joint = 2000, path = "translation", times = times,
      values = values } })
    assert.is_false(sparse:dense())
    assert.is_true(sparse:bytes() < 64 * 1024, sparse:bytes())
    -- every joint of that span animated: dense
    local tracks = {}
    for j = 1, 16 do
      tracks[j] = { joint = j, path = "translation", times = times, values = values }
    end
    assert.is_true(limber.core.clip(tracks):dense())
    -- and the values agree with the cursor path
    local x, y, z = sparse:sample_joint(2000, "translation", 1.234)
    assert.near(1.234 * 30 + 1, x, 1e-4)
    assert.same({ 0, 0 }, { y, z })
  end)
end)

describe("glTF sample clips take the dense path", function()
  local gltf = require "limber.gltf"
  it("Fox Survey and Walk, CesiumMan, RiggedFigure; Fox Run (a 0.2 s gap between keys) does not", function()
    local exact = { tolerance = 0 } -- loads pack clips by default
    local fox = gltf.load(H.assets .. "Fox/Fox.glb", exact)
    local dense = {}
    for _, a in ipairs(fox.animations) do dense[a.name] = a.clips[1]:dense() end
    assert.same({ Survey = true, Walk = true, Run = false }, dense)
    assert.is_true(gltf.load(H.assets .. "CesiumMan/CesiumMan.gltf", exact).animations[1].clips[1]
      :dense())
    assert.is_true(gltf.load(H.assets .. "RiggedFigure/RiggedFigure.glb", exact).animations[1]
      .clips[1]:dense())
  end)
end)

-- ---- build errors -------------------------------------------------------

describe("clip build errors", function()
  local function T(over)
    local t = { joint = 1, path = "translation", times = { 0, 1 }, values = { 0, 0, 0, 1, 1, 1 } }
    for k, v in pairs(over) do t[k] = v end
    if over.joint == false then t.joint = nil end
    return t
  end
  local cases = {
    { "not a table", function() anim.clip(5) end, "limber.anim.clip: expected a description table" },
    { "no tracks", function() anim.clip({}) end, "desc.tracks must be an array of tracks" },
    { "track not a table", function() anim.clip({ tracks = { 3 } }) end, "tracks[1] must be a table" },
    { "no target", function() anim.clip({ tracks = { T({ joint = false }) } }) end,
      "tracks[1] needs exactly one of joint or node" },
    { "both targets", function() anim.clip({ tracks = { T({ node = 3 }) } }) end,
      "tracks[1] needs exactly one of joint or node" },
    { "joint 0", function() anim.clip({ tracks = { T({ joint = 0 }) } }) end,
      "tracks[1]: joint must be an integer in [1, 65535]" },
    { "bad path", function() anim.clip({ tracks = { T({ path = "weights" }) } }) end,
      "tracks[1]: path must be \"translation\", \"rotation\", \"scale\" or \"float\" (got weights)" },
    { "bad interpolation", function() anim.clip({ tracks = { T({ interpolation = "CUBIC" }) } }) end,
      "interpolation must be \"STEP\", \"LINEAR\" or \"CUBICSPLINE\" (got CUBIC)" },
    { "times type", function() anim.clip({ tracks = { T({ times = "x" }) } }) end,
      "tracks[1]: times must be a table of numbers or an f32 Buffer (got string)" },
    { "u16 buffer", function() anim.clip({ tracks = { T({ times = limber.buffer("u16", 1, { 0, 1 }) }) } }) end,
      "tracks[1]: times Buffer must be f32" },
    { "no keys", function() anim.clip({ tracks = { T({ times = {}, values = {} }) } }) end, "tracks[1]: no key times" },
    { "count", function() anim.clip({ tracks = { T({ values = { 1, 2, 3 } }) } }) end,
      "tracks[1]: 3 values for 2 keys, expected 6 (3 per key)" },
    { "cubic count", function() anim.clip({ tracks = { T({ interpolation = "CUBICSPLINE" }) } }) end,
      "6 values for 2 keys, expected 18 (9 per key: in-tangent, value, out-tangent)" },
    { "rotation count", function() anim.clip({ tracks = { T({ path = "rotation" }) } }) end,
      "6 values for 2 keys, expected 8 (4 per key)" },
    { "non-number value", function() anim.clip({ tracks = { T({ values = { 0, 0, 0, 1, "a", 1 } }) } }) end,
      "tracks[1]: values[5] must be a number (got string)" },
    { "nan value", function() anim.clip({ tracks = { T({ values = { 0, 0, 0, 1, 0 / 0, 1 } }) } }) end,
      "tracks[1]: values[5] is not a finite float" },
    { "inf time", function() anim.clip({ tracks = { T({ times = { 0, math.huge } }) } }) end,
      "tracks[1]: times[2] is not a finite float" },
    { "negative time", function() anim.clip({ tracks = { T({ times = { -1, 1 } }) } }) end,
      "tracks[1] (joint 1 translation): times[1] (-1) is not a finite time >= 0" },
    { "decreasing", function() anim.clip({ tracks = { T({}), T({ joint = 2, times = { 1, 0.5 } }) } }) end,
      "tracks[2] (joint 2 translation): times[2] (0.5) is not greater than the key time before it (1)" },
    { "equal times", function() anim.clip({ tracks = { T({ times = { 1, 1 } }) } }) end,
      "times[2] (1) is not greater than the key time before it (1): key times must be strictly increasing" },
    { "zero rotation", function()
      anim.clip({ tracks = { T({ path = "rotation", values = { 0, 0, 0, 1, 0, 0, 0, 0 } }) } }) end,
      "tracks[1] (joint 1 rotation): rotation key 2 is a zero quaternion (length 0, at most 1e-6)" },
    { "zero cubic rotation", function()
      anim.clip({ tracks = { T({ path = "rotation", interpolation = "CUBICSPLINE", times = { 0 },
        values = { 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1 } }) } }) end,
      "tracks[1] (joint 1 rotation): rotation key 1 is a zero quaternion" },
    { "duplicate", function() anim.clip({ tracks = { T({}), T({ joint = 2 }), T({}) } }) end,
      "tracks[1] and tracks[3] both animate joint 1 translation" },
    { "name type", function() anim.clip({ name = 3, tracks = {} }) end, "desc.name must be a string" },
    { "name without skeleton", function() anim.clip({ tracks = { T({ joint = "hips" }) } }) end,
      "tracks[1]: joint name 'hips' needs a skeleton" },
    { "event time", function() anim.clip({ tracks = { T({}) }, events = { { time = 2, name = "x" } } }) end,
      -- the duration is a float, printed by Lua's tostring ("1.0" from 5.3, "1" before)
      "events[1] ('x') time 2 is outside the clip [0, " .. tostring(1.0) .. "]" },
    { "event shape", function() anim.clip({ tracks = { T({}) }, events = { { time = 0.5 } } }) end,
      "events[1] must be { time = number, name = string }" },
  }
  for _, c in ipairs(cases) do
    it("raises for " .. c[1], function()
      assert.error_matches(c[2], c[3], 1, true)
    end)
  end

  it("lists every joint name the skeleton lacks, or ignores them on request", function()
    local skel = limber.skeleton({ { name = "hips" }, { name = "spine", parent = "hips" } })
    local desc = { tracks = { T({ joint = "hips" }), T({ joint = "tail" }), T({ joint = "ear" }),
      T({ joint = "spine", path = "scale" }) } }
    assert.error_matches(function() anim.clip(desc, skel) end,
      "limber.anim.clip: the skeleton has no joint named 'tail', 'ear'", 1, true)
    desc.ignore_missing = true
    local clip = anim.clip(desc, skel)
    assert.equal(2, #clip:joint_tracks())
    assert.same({ joint = 2, path = "scale", interpolation = "LINEAR", keys = 2 }, clip:joint_tracks()[2])
    assert.error_matches(function() anim.clip({ tracks = { T({ joint = 3 }) } }, skel) end,
      "tracks[1]: joint 3 out of range [1, 2]", 1, true)
  end)

  it("keeps node tracks in input order after the joint tracks", function()
    local clip = anim.clip({ tracks = { T({ joint = false, node = 7 }), T({ joint = 2 }), T({ joint = false, node = 0,
      path = "scale", interpolation = "STEP" }) } })
    local nt = clip:node_tracks()
    assert.same({ node = 7, path = "translation", interpolation = "LINEAR", keys = 2 }, nt[1])
    assert.same({ node = 0, path = "scale", interpolation = "STEP", keys = 2 }, nt[2])
    assert.near({ 1, 1, 1 }, pack(clip:sample_node(2, 1, false)), 0)
    assert.error_matches(function() clip:sample_node(3, 0, false) end, "node track index 3 out of range [1, 2]",
      1, true)
    assert.matches("limber.Clip%(unnamed, 1.0 s, 3 tracks%)", tostring(clip))
  end)

  it("survives garbage collection of everything but the sampler", function()
    local skel = skeleton(2)
    local s = anim.sampler(limber.pose(skel, 2), { anim.clip({ tracks = { T({}) } }) })
    skel = nil -- luacheck: ignore
    collectgarbage()
    collectgarbage()
    s:set(1, 1, 0.5)
    s:run()
    assert.near({ 0.5, 0.5, 0.5 }, (s:pose():trs(1, 1)), 1e-6)
    assert.equal(1, #s:clips())
  end)
end)

describe("float tracks on nodes", function()
  local anim_mod = require "limber.anim"

  -- plain glTF sampling of one float track at clip time t (clamped)
  local function ref(times, values, w, interp, t)
    local n = #times
    local per = interp == "CUBICSPLINE" and 3 * w or w
    local off = interp == "CUBICSPLINE" and w or 0
    local function val(k, m) return values[(k - 1) * per + off + m] end
    local out = {}
    if t <= times[1] then for m = 1, w do out[m] = val(1, m) end return out end
    if t >= times[n] then for m = 1, w do out[m] = val(n, m) end return out end
    local k = 1
    while times[k + 1] <= t do k = k + 1 end
    local dt = times[k + 1] - times[k]
    local s = (t - times[k]) / dt
    for m = 1, w do
      if interp == "STEP" then
        out[m] = val(k, m)
      elseif interp == "LINEAR" then
        out[m] = val(k, m) + (val(k + 1, m) - val(k, m)) * s
      else
        local s2, s3 = s * s, s * s * s
        local outtan = values[(k - 1) * per + 2 * w + m]
        local intan = values[k * per + m]
        out[m] = (2 * s3 - 3 * s2 + 1) * val(k, m) + (s3 - 2 * s2 + s) * dt * outtan
          + (-2 * s3 + 3 * s2) * val(k + 1, m) + (s3 - s2) * dt * intan
      end
    end
    return out
  end

  it("keep any width of values per key and sample like a plain reference", function()
    for _ = 1, 40 do
      local w = math.random(1, 16)
      local interp = ({ "STEP", "LINEAR", "CUBICSPLINE" })[math.random(3)]
      local n = math.random(1, 12)
      local times, values, t = {}, {}, H.rand(0, 0.3)
      for k = 1, n do
        times[k] = f32(t)   -- the clip keeps float32 times: the reference must see the same keys
        t = t + H.rand(0.05, 0.5)
        for _ = 1, (interp == "CUBICSPLINE" and 3 or 1) * w do values[#values + 1] = f32(H.rand(-2, 2)) end
      end
      local clip = anim_mod.clip({ tracks = {
        { node = 3, path = "rotation", times = { 0, 0.1 }, values = { 0, 0, 0, 1, 0, 0, 1, 0 } },
        { node = 9, path = "float", width = w, interpolation = interp, times = times, values = values } } })
      assert.near(math.max(0.1, times[n]), clip:duration(), 1e-6)
      local tracks = clip:node_tracks()
      assert.equal("float", tracks[2].path)
      for _ = 1, 10 do
        local tq = H.rand(-0.2, times[n] + 0.3)
        local got = { clip:sample_node(2, tq, false) }
        assert.equal(w, #got)
        assert.near(ref(times, values, w, interp, math.max(0, math.min(tq, clip:duration()))), got, 2e-4,
          ("%s w=%d n=%d t=%g"):format(interp, w, n, tq))
      end
    end
  end)

  it("refuse joint targets, bad widths and mismatched value counts", function()
    local cases = {
      { { joint = 1, path = "float", times = { 0 }, values = { 1 } }, "float tracks need a node target" },
      { { node = 1, path = "float", width = 0, times = { 0 }, values = {} }, "width must be an integer in [1, 16]" },
      { { node = 1, path = "float", width = 2.5, times = { 0 }, values = { 1, 2 } }, "width must be an integer" },
      { { node = 1, path = "float", width = 2, times = { 0, 1 }, values = { 1, 2, 3 } },
        "3 values for 2 keys, expected 4" },
      { { node = 1, path = "float", times = { 0 }, values = { 0 / 0 } }, "is not a finite float" },
    }
    for _, c in ipairs(cases) do
      assert.error_matches(function() anim_mod.clip({ tracks = { c[1] } }) end, c[2], 1, true)
    end
  end)
end)
