-- Packed clips (issue 17): limber.anim.pack against the exact clips it
-- packs. The error every packed clip reports is recomputed here in plain
-- Lua (model matrices from what a sampler plays, at the key times and the
-- quarter points between them) and must match and stay within the
-- tolerance, on random skeletons and clips (uniform and irregular key
-- times, LINEAR, STEP, CUBICSPLINE, constant and rest-pose tracks) and on
-- every bundled clip; every sampling path (sampler, portable and AVX2,
-- sample_joint, the frame plan) gives the packed clip's values; node
-- tracks and events stay exact; bad arguments are refused by name.
local H = require "spec.helper"
local limber = require "limber"
local anim = require "limber.anim"
local gltf = require "limber.gltf"

H.seed("pack")

-- ---- random skeletons and clips ------------------------------------------

local function rand_skeleton(n)
  return limber.skeleton(H.rand_joints(n, math.random(1, 2)))
end

local qmul = H.qmul

local function axis_angle(ax, a)
  local n = math.sqrt(ax[1] ^ 2 + ax[2] ^ 2 + ax[3] ^ 2)
  local s = math.sin(a / 2) / n
  return { ax[1] * s, ax[2] * s, ax[3] * s, math.cos(a / 2) }
end

-- Key times: a uniform grid (most clips) or irregular ones.
local function rand_times(n, uniform, step)
  local t, dt = {}, step or H.rand(1 / 40, 1 / 8)
  local at = H.rand(0, 0.3)
  for k = 1, n do
    t[k] = at
    at = at + (uniform and dt or H.rand(0.2, 1.8) * dt)
  end
  if uniform then -- exactly k * dt, as exporters write them
    for k = 1, n do t[k] = t[1] + (k - 1) * dt end
  end
  return t
end

-- A random clip for skel: smooth motion around the rest pose (sines of a
-- few frequencies), constant tracks and tracks equal to the rest pose.
local function rand_clip(skel, opts)
  opts = opts or {}
  local J = skel:joint_count()
  local n = opts.keys or math.random(2, 40)
  local uniform = opts.uniform ~= false and (opts.uniform or math.random() < 0.7)
  local interp = opts.interpolation or (math.random() < 0.85 and "LINEAR" or "STEP")
  local times = rand_times(n, uniform, opts.step)
  local tracks = {}
  for j = 1, J do
    local rt, rr, rs = skel:rest_trs(j)
    local ph, w = H.rand(0, 6), H.rand(0.5, 6)
    local kind = math.random(1, 10) -- 1: equal to rest, 2: constant, else moving
    local function add(path, p)
      local v = {}
      for k = 1, n do
        local t = times[k]
        local x
        if kind == 1 then
          x = path == "translation" and rt or path == "rotation" and rr or rs
        elseif kind == 2 then
          x = p(0.7)
        else
          x = p(t)
        end
        for c = 1, #x do v[#v + 1] = x[c] end
      end
      tracks[#tracks + 1] = { joint = j, path = path, interpolation = interp, times = times,
                              values = v }
    end
    if math.random() < 0.6 then
      local amp = H.rand(0, 0.3)
      add("translation", function(t)
        return { rt[1] + amp * math.sin(w * t + ph), rt[2] + amp * math.cos(1.3 * w * t), rt[3] }
      end)
    end
    if math.random() < 0.9 then
      local ax = { H.rand(-1, 1), H.rand(-1, 1), H.rand(-1, 1) }
      if ax[1] == 0 and ax[2] == 0 and ax[3] == 0 then ax[1] = 1 end
      local amp = H.rand(0, 1.2)
      add("rotation", function(t) return qmul(rr, axis_angle(ax, amp * math.sin(w * t + ph))) end)
    end
    if math.random() < 0.3 then
      local amp = H.rand(0, 0.2)
      add("scale", function(t)
        local f = 1 + amp * math.sin(w * t)
        return { rs[1] * f, rs[2] * f, rs[3] }
      end)
    end
  end
  return anim.clip({ name = "random", tracks = tracks, pack = false }, skel), times
end

-- ---- the plain-Lua measure -------------------------------------------------

local function f32(x) return (H.unpack("<f", H.pack("<f", x))) end

-- The local TRS of joint j of a clip at t (the rest pose where it has no track).
local function local_trs(clip, skel, j, t)
  local rt, rr, rs = skel:rest_trs(j)
  local tv = { clip:sample_joint(j, "translation", t, false) }
  local rv = { clip:sample_joint(j, "rotation", t, false) }
  local sv = { clip:sample_joint(j, "scale", t, false) }
  return { #tv > 0 and tv or rt, #rv > 0 and rv or rr, #sv > 0 and sv or rs }
end

-- Sorted distinct key times of a list of time arrays (glTF channels: the
-- float values the clip holds).
local function key_times(lists)
  local seen, list = {}, {}
  for _, times in ipairs(lists) do
    for k = 1, #times do -- a table or an f32 Buffer
      local t = times[k]
      t = f32(type(t) == "table" and t[1] or t)
      if not seen[t] then
        seen[t] = true
        list[#list + 1] = t
      end
    end
  end
  table.sort(list)
  return list
end

-- Max error (at the joints, and at `d` along their axes) of `packed`
-- against `exact` at the key times and the points 1/4, 1/2, 3/4 between.
-- The packed side is what a sampler plays (one instance per sample time):
-- where the packed clip drops a track equal to the rest pose but keeps the
-- joint's chunk row for others, it plays the row's decoded value, within
-- the bound but not the rest pose's exact floats that sample_joint's nil
-- stands for.
local function lua_error(exact, packed, skel, times, d)
  local parents = {}
  for j = 1, skel:joint_count() do parents[j] = skel:parent(j) or 0 end
  local J = skel:joint_count()
  local samples = {}
  for k = 1, #times do
    samples[#samples + 1] = times[k]
    if k < #times then
      local a, b = f32(times[k]), f32(times[k + 1])
      for q = 1, 3 do samples[#samples + 1] = f32(a + (b - a) * f32(q / 4)) end
    end
  end
  local played = limber.pose(skel, #samples)
  local sampler = anim.sampler(played, { packed })
  for n, t in ipairs(samples) do sampler:set(n, 1, t, false) end
  sampler:run()
  local max_j, max_d = 0, 0
  for n, t in ipairs(samples) do
    local le, lp = {}, {}
    for j = 1, J do
      le[j] = local_trs(exact, skel, j, t)
      lp[j] = { played:trs(n, j) }
    end
    local me, mp = H.reference_models(parents, le), H.reference_models(parents, lp)
    for j = 1, J do
      local a, b = me[j], mp[j]
      local ej = math.sqrt((a[13] - b[13]) ^ 2 + (a[14] - b[14]) ^ 2 + (a[15] - b[15]) ^ 2)
      local ed = ej
      for c = 0, 2 do
        local s = 0
        for i = 1, 3 do
          s = s + ((a[12 + i] + d * a[c * 4 + i]) - (b[12 + i] + d * b[c * 4 + i])) ^ 2
        end
        ed = math.max(ed, math.sqrt(s))
      end
      max_j, max_d = math.max(max_j, ej), math.max(max_d, ed)
    end
  end
  return max_j, max_d
end

local function quat_close(a, b, tol)
  local dot = a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4]
  return math.abs(math.abs(dot) - 1) <= tol
end

local function near_list(a, b, tol)
  for k = 1, #a do
    if not (math.abs(a[k] - b[k]) <= tol) then return false end -- luacheck: ignore 581 (NaN fails)
  end
  return #a == #b
end

-- Every instance of `pose` holds clip k of `clips` at its time (sampler state).
local function check_pose(pose, skel, sampler, clips, tol)
  for i = 1, pose:instance_count() do
    local k, t, loop = sampler:get(i)
    if k then
      local c = clips[k]
      local tt = t
      if loop ~= false then
        local d = c:duration()
        tt = d > 0 and t - d * math.floor(t / d) or 0
      end
      for j = 1, skel:joint_count() do
        local T, R, S = pose:trs(i, j)
        local want = local_trs(c, skel, j, tt)
        assert.is_true(near_list(T, want[1], tol), ("instance %d joint %d translation"):format(i, j))
        assert.is_true(quat_close(R, want[2], tol), ("instance %d joint %d rotation"):format(i, j))
        assert.is_true(near_list(S, want[3], tol), ("instance %d joint %d scale"):format(i, j))
      end
    end
  end
end

-- ---- specs -------------------------------------------------------------------

-- Poses of skel with the clip sampled at times[i] for instance i, on the
-- portable sampler and on the AVX2 one (where the CPU has it).
local function sample_both(skel, clip, times)
  local was, poses = limber.core.simd(), {}
  for k, simd in ipairs({ false, true }) do
    limber.core.simd(simd)
    poses[k] = limber.pose(skel, #times)
    local s = anim.sampler(poses[k], { clip })
    for i = 1, #times do s:set(i, 1, times[i], false) end
    local ok, err = pcall(s.run, s)
    if not ok then
      limber.core.simd(was)
      error(err, 0)
    end
  end
  limber.core.simd(was)
  return poses[1], poses[2]
end

describe("limber.anim.pack", function()
  it("reports the error plain Lua measures, within the tolerance, on random clips", function()
    local packed_count = 0
    for _ = 1, 14 do
      local J = math.random(2, 24)
      local skel = rand_skeleton(J)
      local clip, times = rand_clip(skel)
      local tol, d = H.rand(1e-4, 3e-2), H.rand(0, 0.3)
      local packed, why = anim.pack(clip, skel, { tolerance = tol, distance = d })
      if why then
        -- STEP keys on an irregular grid can defeat any packing: the clip comes back exact
        assert.equal(clip, packed)
        assert.matches("no packing meets tolerance", why, 1, true)
      else
        packed_count = packed_count + 1
        assert.is_true(packed:packed())
        local e = packed:error()
        assert.is_true(e.max_error_distance <= tol, ("%g > %g"):format(e.max_error_distance, tol))
        assert.is_true(e.max_error <= e.max_error_distance)
        assert.is_true(e.p99_error_distance <= e.max_error_distance)
        assert.near(tol, e.tolerance, tol * 1e-6)
        assert.near(d, e.distance, 1e-6)
        -- (limber also samples between the packed grid's frames: at least as large)
        local mj, md = lua_error(clip, packed, skel, key_times({ times }), f32(d))
        -- (float rounding of the two measurements: 1e-3 of the error)
        assert.is_true(md <= e.max_error_distance * (1 + 1e-3) + 1e-6,
          ("plain Lua %.9g, reported %.9g"):format(md, e.max_error_distance))
        assert.is_true(md <= tol)
        assert.is_true(mj <= e.max_error * (1 + 1e-3) + 1e-6,
          ("at the joint: plain Lua %.9g, reported %.9g"):format(mj, e.max_error))
        assert.is_true(md >= 0.25 * e.max_error_distance or e.max_error_distance < 1e-6)
        -- and measured again against the source on demand
        local again = packed:error(clip, skel, d)
        assert.near(e.max_error_distance, again.max_error_distance, 1e-9)
        assert.equal(packed:bytes(), again.bytes)
      end
    end
    assert.is_true(packed_count >= 8)
  end)

  it("keeps every bundled clip within the default tolerance in fewer bytes", function()
    for _, f in ipairs({ "CesiumMan/CesiumMan.gltf", "Fox/Fox.glb", "RiggedFigure/RiggedFigure.glb",
                         "RiggedSimple/RiggedSimple.gltf", "SimpleSkin/SimpleSkin.gltf",
                         "asset-generator/Animation_Skin/Animation_Skin_01.gltf" }) do
      local exact = gltf.load(H.assets .. f, { tolerance = 0 })
      local packed = gltf.load(H.assets .. f)
      for a, an in ipairs(packed.animations) do
        for s, c in ipairs(an.clips) do
          local ec = exact.animations[a].clips[s]
          local skel = packed.skeletons[s].skeleton
          local tol = anim.PACK_TOLERANCE * anim.rig_size(skel)
          if ec:joint_span() > 0 then
            assert.is_true(c:packed(), f)
            local e = c:error()
            assert.is_true(e.max_error_distance <= tol, f)
            assert.is_true(c:bytes() < ec:bytes(), f)
            local lists = {}
            for _, ch in ipairs(an.channels) do lists[#lists + 1] = ch.times end
            local mj, md = lua_error(ec, c, skel, key_times(lists), f32(e.distance))
            assert.is_true(mj <= e.max_error * (1 + 1e-3) + 1e-6)
            assert.is_true(md <= e.max_error_distance + 1e-4 * tol + 1e-6)
          end
        end
      end
    end
  end)

  -- Packs clip for skel with opts (tolerance tol, distance d) and checks the
  -- report: within the tolerance, every sample time measured, and (check)
  -- plain Lua at a run of `run` key times (and the points between) erring
  -- no more than it says. Returns the packed clip and its report.
  local REPORT = { "max_error", "max_error_distance", "p99_error_distance", "worst_joint",
                   "worst_time", "samples" }
  local function pack_checked(clip, times, skel, opts, tol, d, run)
    opts.tolerance, opts.distance = tol, d
    local packed, why = anim.pack(clip, skel, opts)
    assert.is_nil(why)
    assert.is_true(packed:packed())
    local e = packed:error()
    assert.is_true(e.max_error_distance <= tol)
    assert.is_true(e.samples >= 4 * (#times - 1) + 1)
    if run then
      local at = math.random(1, #times - run)
      local some = {}
      for k = at, at + run - 1 do some[#some + 1] = f32(times[k]) end
      local mj, md = lua_error(clip, packed, skel, some, f32(d))
      assert.is_true(md <= e.max_error_distance * (1 + 1e-3) + 1e-6)
      assert.is_true(mj <= e.max_error * (1 + 1e-3) + 1e-6)
    end
    return packed, e
  end
  -- The same packed clip: bytes, report and the keys of `paths` at joints js.
  local function same_packing(a, ea, b, eb, js, paths, what)
    assert.equal(a:bytes(), b:bytes(), what)
    for _, k in ipairs(REPORT) do assert.equal(ea[k], eb[k], what .. ": " .. k) end
    for _, j in ipairs(js) do
      for _, path in ipairs(paths) do
        assert.same(a:track_keys(j, path), b:track_keys(j, path),
                    what .. ": joint " .. j .. " " .. path)
      end
    end
  end

  -- #once: no interpreter changes the compressor (the Lua 5.4 pass and the
  -- sanitized pass run it)
  it("packs the same clip whatever it keeps of the source (cache_bytes) #once", function()
    -- 9 joints x 300 frames. The compressor keeps the exact clip's model
    -- matrices (9 x 96 bytes per sample time, 4 sample times per key
    -- interval) when cache_bytes holds at least 4 x 300 + 1 of them, else
    -- samples the exact clip again for each try: the same packed clip and
    -- the same measure either way (a 10,000-frame clip took the default past
    -- 32 MB; cache_bytes gets there with 300)
    local skel = limber.skeleton(H.rand_joints(9, 1))
    local clip, times = rand_clip(skel, { keys = 300, uniform = true, interpolation = "LINEAR",
                                          step = 1 / 60 })
    local tol, d = 2e-3, 0.05
    local room = (4 * #times + 1) * 9 * 96
    local first, fe = pack_checked(clip, times, skel, {}, tol, d, 60)
    -- measured again (clip:error keeps the default cache): the same
    local again = first:error(clip, skel, d)
    assert.near(fe.max_error_distance, again.max_error_distance, 1e-9)
    assert.near(fe.p99_error_distance, again.p99_error_distance, 1e-9)
    for r, opts in ipairs({ { cache_bytes = 0 }, { cache_bytes = room - 1 },
                            { cache_bytes = room }, { cache_bytes = H.int_max } }) do
      local packed, e = pack_checked(clip, times, skel, opts, tol, d)
      same_packing(first, fe, packed, e, { 1, 2, 3, 4, 5, 6, 7, 8, 9 },
                   { "translation", "rotation", "scale" }, "run " .. r)
    end
  end)

  -- #once, as above
  it("packs and measures the same clip on any number of threads #once", function()
    -- each measure's sample times are shared out among the pool's threads
    -- in runs (797 sample times: up to 12 runs), and so are a long grid's
    -- positions when a candidate stream is checked (8,397 positions: runs
    -- of 4,096 at least); the packed clip and every figure of its report,
    -- worst joint and time included, do not depend on how many threads, nor
    -- does a later clip:error measure
    for _, case in ipairs({ { joints = 20, keys = 200, threads = { 1, 2, 3 } },
                            { joints = 3, keys = 2100, threads = { 1, 3 } } }) do
    local skel = limber.skeleton(H.rand_joints(case.joints, 1))
    local clip, times = rand_clip(skel, { keys = case.keys, uniform = true,
                                          interpolation = "LINEAR", step = 1 / 60 })
    local tol, d = 1e-3, 0.05
    local old = limber.core.threads()
    local ok, err = pcall(function()
      local first, fe, measured
      for _, t in ipairs(case.threads) do
        local _, _, threaded = limber.core.threads(t)
        assert.equal(threaded and t or 1, (limber.core.threads()))
        local packed, e = pack_checked(clip, times, skel, {}, tol, d, t == 1 and 40 or nil)
        local again = packed:error(clip, skel, d)
        if t == 1 then
          first, fe, measured = packed, e, again
          for _, k in ipairs(REPORT) do assert.near(e[k], again[k], 1e-9 * (1 + math.abs(e[k])), k) end
        else
          local js = case.joints == 3 and { 1, 2, 3 } or { 1, 5, 9, 13, 17, 20 }
          same_packing(first, fe, packed, e, js, { "translation", "rotation", "scale" },
                       t .. " threads")
          for _, k in ipairs(REPORT) do assert.equal(measured[k], again[k], t .. " threads: " .. k) end
        end
      end
    end)
    limber.core.threads(old)
    assert(ok, err)
    end
  end)

  -- #once, as above
  it("tries a long clip's streams at its key times, then measures it in full #once", function()
    -- 256 joints x 60 frames at 120 Hz: too long for every stream's tries
    -- at all the sample times, so the compressor tries them at the key times
    -- only, measuring the joints a stream moves, and confirms the result
    -- with one full measure. The cache of the exact clip's model matrices
    -- (4 x 60 sample times fit the default; a measure of some joints only
    -- must not fill it) changes nothing, and the report is the full measure's
    local skel = limber.skeleton(H.rand_joints(256, 1))
    local clip, times = rand_clip(skel, { keys = 60, uniform = true, interpolation = "LINEAR",
                                          step = 1 / 120 })
    local tol, d = 1e-3, 0.05
    local first, fe = pack_checked(clip, times, skel, {}, tol, d, 20)
    -- without the cache on one thread (the first on the pool's): the same
    local old = limber.core.threads()
    limber.core.threads(1)
    local ok, packed, e = pcall(pack_checked, clip, times, skel, { cache_bytes = 0 }, tol, d)
    limber.core.threads(old)
    assert(ok, packed)
    for _, r in ipairs({ { first, fe }, { packed, e } }) do
      local again = r[1]:error(clip, skel, d)
      for _, k in ipairs(REPORT) do
        assert.near(again[k], r[2][k], 1e-9 * (1 + math.abs(r[2][k])), k)
      end
    end
    local js = {}
    for j = 1, 256, 9 do js[#js + 1] = j end
    same_packing(first, fe, packed, e, js, { "rotation" }, "no cache, one thread")
  end)

  it("derives a small rotation w alike on every path (turns near 180 degrees)", function()
    -- w = cos(angle / 2) near 0, derived from x y z (packed.h's DERIVE):
    -- 1 - (x^2 + y^2 + z^2) in float kept few of w's bits, and the AVX2
    -- sampler (fused multiply-adds) and the portable one gave w up to 1e-5
    -- apart. Joints 2 to 8 have tracks equal to their rest poses (rotations
    -- 179.4 to 180 degrees), which the packed clip drops but decodes from
    -- the chunk's rows, kept for joint 1's motion.
    local joints = { { name = "root" } }
    for j = 2, 8 do
      local ax = { H.rand(-1, 1), H.rand(-1, 1), H.rand(-1, 1) }
      if ax[1] == 0 and ax[2] == 0 and ax[3] == 0 then ax[1] = 1 end
      joints[j] = { name = "j" .. j, parent = j - 1, translation = { 0, 1, 0 },
                    rotation = axis_angle(ax, math.pi - H.rand(0, 0.01)) }
    end
    local skel = limber.skeleton(joints)
    local times, v1 = {}, {}
    for k = 1, 30 do
      times[k] = (k - 1) / 30
      local q = axis_angle({ 1, 0.2, 0 }, math.sin(k * 0.2))
      for c = 1, 4 do v1[#v1 + 1] = q[c] end
    end
    local tracks = { { joint = 1, path = "rotation", times = times, values = v1 } }
    for j = 2, 8 do
      local _, rr = skel:rest_trs(j)
      local v = {}
      for _ = 1, 30 do
        for c = 1, 4 do v[#v + 1] = rr[c] end
      end
      tracks[j] = { joint = j, path = "rotation", times = times, values = v }
    end
    local clip = anim.clip({ name = "turns", tracks = tracks, pack = false }, skel)
    local packed = assert(anim.pack(clip, skel, { tolerance = 1e-3, distance = 1 }))
    -- the portable sampler and the AVX2 one (where the CPU has it) at the same times
    local N, ts = 20, {}
    for i = 1, N do ts[i] = H.rand(0, 1) end
    local pa, pb = sample_both(skel, packed, ts)
    for i = 1, N do
      for j = 1, 8 do
        local _, A = pa:trs(i, j)
        local _, B = pb:trs(i, j)
        local sg = A[1] * B[1] + A[2] * B[2] + A[3] * B[3] + A[4] * B[4] < 0 and -1 or 1
        for c = 1, 4 do
          assert.is_true(math.abs(A[c] - sg * B[c]) <= 1e-6,
            ("instance %d joint %d component %d: %.9g and %.9g"):format(i, j, c, A[c], sg * B[c]))
        end
      end
    end
    local mj, md = lua_error(clip, packed, skel, key_times({ times }), 1)
    local e = packed:error()
    assert.is_true(md <= e.max_error_distance * (1 + 1e-3) + 1e-6)
    assert.is_true(mj <= e.max_error * (1 + 1e-3) + 1e-6)
  end)

  it("derives per joint the component that stays farthest from 0 (turns through 180 degrees)",
    function()
      -- each joint turns through 180 degrees about an axis near x: w passes
      -- 0 while x stays large, so x is derived from y, z and w (DERIVE_ANY)
      -- and w takes bits; both samplers decode alike, within the tolerance
      local joints = { { name = "root" } }
      for j = 2, 8 do joints[j] = { name = "j" .. j, parent = j - 1, translation = { 0, 0.2, 0 } } end
      local skel = limber.skeleton(joints)
      local times, tracks = {}, {}
      for k = 1, 41 do times[k] = (k - 1) / 20 end
      for j = 1, 8 do
        local v = {}
        for k, t in ipairs(times) do
          local q = axis_angle({ 1, 0.05 * j, 0.1 }, math.pi + 0.7 * math.sin(2 * t + j))
          for c = 1, 4 do v[(k - 1) * 4 + c] = q[c] end
        end
        tracks[j] = { joint = j, path = "rotation", times = times, values = v }
      end
      local clip = anim.clip({ tracks = tracks, pack = false }, skel)
      local packed = assert(anim.pack(clip, skel, { tolerance = 1e-4, distance = 0.1 }))
      assert.is_true(packed:packed())
      for j = 1, 8 do
        local _, _, _, bits = packed:track_keys(j, "rotation")
        assert.equal(0, bits[1], "joint " .. j .. ": x derived")
        assert.is_true(bits[2] > 0 and bits[3] > 0 and bits[4] > 0, "joint " .. j)
      end
      local N, ts = 25, {}
      for i = 1, N do ts[i] = i == N and 2 or H.rand(0, 2) end
      local pa, pb = sample_both(skel, packed, ts)
      for i = 1, N do
        for j = 1, 8 do
          local _, A = pa:trs(i, j)
          local _, B = pb:trs(i, j)
          assert.quat_near(A, B, 1e-6)
          -- and near the exact rotation (at most the tolerance over the distance)
          assert.quat_near({ clip:sample_joint(j, "rotation", ts[i], false) }, A, 5e-3)
        end
      end
      local mj, md = lua_error(clip, packed, skel, key_times({ times }), f32(0.1))
      local e = packed:error()
      assert.is_true(md <= e.max_error_distance * (1 + 1e-3) + 1e-6, md)
      assert.is_true(mj <= e.max_error * (1 + 1e-3) + 1e-6, mj)
      assert.is_true(md <= 1e-4, md)
    end)

  it("plays a dropped track's rest pose exactly, next to joints whose rows it keeps", function()
    -- tracks within the bound of the rest pose are dropped; their joints
    -- share chunk rows with moving ones, where they store no bits (the
    -- stream's skip mask) and decode to the rest value (a rotation with w
    -- derived: x y z exact, w to float rounding), not to the dropped keys
    local was = limber.core.simd()
    for _ = 1, 4 do
      local J = math.random(9, 24)
      local skel = rand_skeleton(J)
      local times, still, tracks = rand_times(math.random(8, 30), true), {}, {}
      for j = 1, J do
        local rt, rr, rs = skel:rest_trs(j)
        still[j] = math.random() < 0.5
        local ph, w = H.rand(0, 6), H.rand(1, 6)
        for _, path in ipairs({ "translation", "rotation", "scale" }) do
          local v = {}
          for k = 1, #times do
            local x
            if still[j] then -- the rest pose, give or take 1e-6 (within any bound)
              local e = 1e-6 * math.sin(17 * k)
              x = path == "translation" and { rt[1] + e, rt[2], rt[3] - e }
                or path == "rotation" and qmul(rr, axis_angle({ 0.3, 1, 0.1 }, e))
                or { rs[1] + e, rs[2], rs[3] }
            elseif path == "rotation" then
              x = qmul(rr, axis_angle({ 1, 0.5, 0.2 }, 0.8 * math.sin(w * times[k] + ph)))
            else
              local f = 0.2 * math.sin(w * times[k] + ph)
              local r0 = path == "translation" and rt or rs
              x = { r0[1] + f, r0[2] - f, r0[3] + 0.5 * f }
            end
            for c = 1, #x do v[#v + 1] = x[c] end
          end
          tracks[#tracks + 1] = { joint = j, path = path, times = times, values = v }
        end
      end
      local clip = anim.clip({ tracks = tracks, pack = false }, skel)
      local packed = assert(anim.pack(clip, skel, { tolerance = H.rand(1e-4, 1e-2) }))
      local N = 6
      for _, simd in ipairs({ false, true }) do
        limber.core.simd(simd)
        local pose = limber.pose(skel, N)
        local s = anim.sampler(pose, { packed })
        for i = 1, N do s:set(i, 1, H.rand(0, clip:duration()), false) end
        s:run()
        for j = 1, J do
          if still[j] then
            assert.is_nil(packed:sample_joint(j, "rotation", 0, false), "the track is dropped")
            local rt, rr, rs = skel:rest_trs(j)
            for i = 1, N do
              local T, R, S = pose:trs(i, j)
              assert.same(rt, T)
              assert.same(rs, S)
              local sg = R[1] * rr[1] + R[2] * rr[2] + R[3] * rr[3] + R[4] * rr[4] < 0 and -1 or 1
              for c = 1, 4 do
                -- (a derived w: sqrt(1 - x^2 - y^2 - z^2) of a float-normalised
                -- rest rotation, |q|^2 - 1 up to 2.4e-7, is off by that / 2w)
                local tol = 1e-6 + (c == 4 and 1.2e-7 / math.abs(rr[4]) or 0)
                assert.is_true(math.abs(sg * R[c] - rr[c]) <= tol,
                  ("joint %d rotation %d: %.9g, rest %.9g"):format(j, c, sg * R[c], rr[c]))
              end
            end
          end
        end
      end
      limber.core.simd(was)
      local mj, md = lua_error(clip, packed, skel, key_times({ times }), f32(packed:error().distance))
      assert.is_true(md <= packed:error().max_error_distance * (1 + 1e-3) + 1e-6)
      assert.is_true(mj <= packed:error().max_error * (1 + 1e-3) + 1e-6)
    end
  end)

  it("samples the packed values on every path (sampler portable and AVX2, reseeks, clip switches)",
    function()
      local was = limber.core.simd()
      local skel = rand_skeleton(21)
      local a = assert(anim.pack((rand_clip(skel, { uniform = true, interpolation = "LINEAR" })),
        skel, { tolerance = 0.01 }))
      local b = assert(anim.pack((rand_clip(skel, { uniform = false, interpolation = "LINEAR" })),
        skel, { tolerance = 0.01 }))
      local e = rand_clip(skel, { uniform = true })
      local clips = { a, b, e }
      for _, simd in ipairs({ false, true }) do
        limber.core.simd(simd)
        local N = 27
        local pose = limber.pose(skel, N)
        local s = anim.sampler(pose, clips)
        for step = 1, 12 do
          for i = 1, N do
            -- clip switches, seeks backward and forward, forward play, times outside the clip
            if step == 1 or math.random() < 0.3 then
              s:set(i, math.random(1, 3), H.rand(-3, 6), math.random() < 0.8)
            end
          end
          s:advance(H.rand(0, 0.1))
          s:run()
          check_pose(pose, skel, s, clips, 2e-5)
        end
        -- reverse play: a packed stream's cache steps back a key interval at a time
        for _ = 1, 12 do
          s:advance(-H.rand(0, 0.05))
          s:run()
          check_pose(pose, skel, s, clips, 2e-5)
        end
        s:reset_cursors()
        s:run()
        check_pose(pose, skel, s, clips, 2e-5)
      end
      limber.core.simd(was)
    end)

  it("decodes every bit width alike on the portable and AVX2 samplers", function()
    -- tolerances from coarse to fine give quantized rows of few to many bits
    -- (the AVX2 decoder reads rows of up to 14 bits with one 16-byte load,
    -- except near the end of the data); the two samplers play the same
    -- decoded keys, so their poses differ by interpolation rounding only
    -- (rows whose joints take widths of their own, V rows, too: each
    -- joint's bits found by a running sum of the widths)
    local var_rows = 0
    for trial = 1, 10 do
      local skel = rand_skeleton(math.random(8, 26))
      local exact = rand_clip(skel, { uniform = trial % 3 ~= 0, interpolation = "LINEAR" })
      local packed = anim.pack(exact, skel, { tolerance = 10 ^ -(trial % 6 + 1) })
      -- rows of one chunk whose joints store different bit widths
      local widths = {}
      for _, tr in ipairs(packed:packed() and packed:joint_tracks() or {}) do
        local bits = select(4, packed:track_keys(tr.joint, tr.path))
        for c, b in ipairs(bits) do
          local row = ("%d %s %d"):format(math.floor((tr.joint - 1) / 8), tr.path, c)
          if b > 0 and b < 16 then
            widths[row] = widths[row] or {}
            widths[row][b] = true
          end
        end
      end
      for _, seen in pairs(widths) do
        if next(seen, next(seen)) then var_rows = var_rows + 1 end
      end
      local N, d = 19, packed:duration()
      local times = {}
      for i = 1, N do times[i] = i == N and d or H.rand(0, d) end -- the last key: the data's end
      local pa, pb = sample_both(skel, packed, times)
      for i = 1, N do
        for j = 1, skel:joint_count() do
          local ta, ra, sa = pa:trs(i, j)
          local tb, rb, sb = pb:trs(i, j)
          local where = ("trial %d instance %d joint %d"):format(trial, i, j)
          for c = 1, 3 do
            assert(math.abs(ta[c] - tb[c]) <= 1e-6 * math.max(1, math.abs(ta[c])), where)
            assert(math.abs(sa[c] - sb[c]) <= 1e-6 * math.max(1, math.abs(sa[c])), where)
          end
          assert.quat_near(ra, rb, 1e-6)
        end
      end
    end
    assert.is_true(var_rows > 0, "no row with per-joint widths")
  end)

  it("gives each joint of a chunk the bits its own motion needs", function()
    -- eight joints hanging from a root, one of a chunk's rows each: joint 2
    -- swings 90 degrees, the others a degree or less; joint 2 needs the
    -- widest rotation rows, the quiet ones fewer bits (a width per joint),
    -- and every joint stays within the tolerance
    local desc = { { translation = { 0, 0, 0 } } }
    for j = 2, 8 do desc[j] = { parent = 1, translation = { 0.3 * j, 0, 0 } } end
    local skel = limber.skeleton(desc)
    local times, tracks = {}, {}
    for k = 1, 61 do times[k] = (k - 1) / 30 end
    for j = 2, 8 do
      local amp = j == 2 and math.pi / 2 or math.rad(1) / (j - 2)
      local v = {}
      for k, t in ipairs(times) do
        local q = axis_angle({ 0.3, 1, 0.2 * j }, amp * math.sin(2.1 * t + j))
        for c = 1, 4 do v[(k - 1) * 4 + c] = q[c] end
      end
      tracks[#tracks + 1] = { joint = j, path = "rotation", times = times, values = v }
    end
    local exact = anim.clip({ tracks = tracks, pack = false }, skel)
    local packed = anim.pack(exact, skel, { tolerance = 1e-4, distance = 0.1 })
    assert.is_true(packed:packed())
    local function most_bits(j)
      local _, _, _, bits = packed:track_keys(j, "rotation")
      assert.equal(4, #bits)
      return math.max(bits[1], bits[2], bits[3], bits[4])
    end
    local busy = most_bits(2)
    assert.is_true(busy >= 8, "joint 2: " .. busy .. " bits")
    for j = 4, 8 do
      local quiet = most_bits(j)
      assert.is_true(quiet < busy, ("joint %d takes %d bits, joint 2 %d"):format(j, quiet, busy))
    end
    local e = packed:error()
    assert.is_true(e.max_error_distance <= 1e-4, e.max_error_distance)
    -- plain Lua's measure of what a sampler plays agrees, within the tolerance
    local _, md = lua_error(exact, packed, skel, times, f32(0.1))
    assert.is_true(md <= e.max_error_distance * (1 + 1e-3) + 1e-6, md)
    assert.is_true(md <= 1e-4, md)
  end)

  it("fits the keys of streams that keep some frames only: fewer bytes for the same bound",
    function()
    -- a chain of 5 joints swinging smoothly, keyed at 120 Hz for 2 s (a
    -- resampled mocap take): streams keep a key every few frames; with
    -- fitted keys (the default) the interpolation follows the frames
    -- between keys more closely than chords through the source's keys, so
    -- the bound holds with fewer keys. Both within the tolerance, measured
    -- in plain Lua; the fitted keys leave the source's values by more than
    -- their rows' rounding; the clip's ends stay the source's.
    local desc = {}
    for j = 1, 5 do desc[j] = { parent = j > 1 and j - 1 or nil, translation = { 0, 0.3, 0 } } end
    local skel = limber.skeleton(desc)
    local times, tracks = {}, {}
    for k = 1, 241 do times[k] = (k - 1) / 120 end
    for j = 1, 5 do
      local v, tv = {}, {}
      for k, t in ipairs(times) do
        local q = axis_angle({ 0.2 * j, 1, 0.3 }, 0.5 * math.sin(4 * t + 0.37 * j))
        for c = 1, 4 do v[(k - 1) * 4 + c] = q[c] end
        tv[(k - 1) * 3 + 1], tv[(k - 1) * 3 + 2], tv[(k - 1) * 3 + 3] =
          0.02 * math.sin(3 * t + j), 0.3, 0.01 * math.cos(2 * t + j)
      end
      tracks[#tracks + 1] = { joint = j, path = "rotation", times = times, values = v }
      tracks[#tracks + 1] = { joint = j, path = "translation", times = times, values = tv }
    end
    local exact = anim.clip({ tracks = tracks, pack = false }, skel)
    local opts = { tolerance = 2e-4, distance = 0.1 }
    local fitted = assert(anim.pack(exact, skel, opts))
    opts.source_keys = true
    local plain = assert(anim.pack(exact, skel, opts))
    assert.is_true(fitted:packed() and plain:packed())
    assert.is_true(fitted:bytes() < plain:bytes(), fitted:bytes() .. " against " .. plain:bytes())
    for _, c in ipairs({ fitted, plain }) do
      local e = c:error()
      assert.is_true(e.max_error_distance <= 2e-4, e.max_error_distance)
      local mj, md = lua_error(exact, c, skel, times, f32(0.1))
      assert.is_true(md <= e.max_error_distance * (1 + 1e-3) + 1e-6, md)
      assert.is_true(mj <= e.max_error * (1 + 1e-3) + 1e-6, mj)
    end
    -- how far the kept keys are from the source's values at their times, in
    -- units of their rows' rounding (range / (2^bits - 1) / 2; quantized
    -- rows only): interior keys, or the first and last
    local function off_source(c, ends)
      local most, checked = 0, 0
      for j = 1, 5 do
        for _, path in ipairs({ "rotation", "translation" }) do
          local kt, kv, _, bits = c:track_keys(j, path)
          local n = path == "rotation" and 4 or 3
          if #kt < #times then
            checked = checked + 1
            local round = {}
            for r = 1, n do
              local lo, hi = math.huge, -math.huge
              for k = 1, #kt do
                local x = kv[(k - 1) * n + r]
                lo, hi = math.min(lo, x), math.max(hi, x)
              end
              round[r] = bits[r] >= 1 and bits[r] <= 16 and (hi - lo) / (2 ^ bits[r] - 1) / 2
            end
            local list = {}
            if ends then
              list = { 1, #kt }
            else
              for k = 2, #kt - 1 do list[#list + 1] = k end
            end
            for _, k in ipairs(list) do
              local ex = { exact:sample_joint(j, path, kt[k], false) }
              local dot = 0
              for r = 1, n do dot = dot + ex[r] * kv[(k - 1) * n + r] end
              local sg = (path == "rotation" and dot < 0) and -1 or 1
              for r = 1, n do
                if round[r] and round[r] > 0 then
                  most = math.max(most, math.abs(sg * ex[r] - kv[(k - 1) * n + r]) / round[r])
                end
              end
            end
          end
        end
      end
      assert.is_true(checked > 0, "no stream keeps fewer keys than the source")
      return most
    end
    assert.is_true(off_source(plain, false) <= 1.05, off_source(plain, false))
    assert.is_true(off_source(fitted, false) > 2, off_source(fitted, false))
    assert.is_true(off_source(fitted, true) <= 1.05, off_source(fitted, true))
  end)

  it("stores a uniform scale once: rows y and z copy row x (SAME)", function()
    -- 12 joints, two chunks. Chunk 1: joints 1 to 8 scale uniformly (x = y
    -- = z, each its own motion), joint 3 has no scale track and a uniform
    -- rest scale: its rows are SAME. Chunk 2: joint 9 scales uniformly but
    -- joint 10 has no scale track and rest scale (1, 2, 3), which the
    -- decoder must give back: its rows are stored
    local desc = {}
    for j = 1, 12 do
      desc[j] = { parent = j > 1 and j - 1 or nil, translation = { 0, 0.3, 0 },
                  scale = j == 10 and { 1, 2, 3 } or { 1.5, 1.5, 1.5 } }
    end
    local skel = limber.skeleton(desc)
    local times, tracks = {}, {}
    for k = 1, 61 do times[k] = (k - 1) / 30 end
    local function scales(uniform)
      local list = {}
      for _, j in ipairs({ 1, 2, 4, 5, 6, 7, 8, 9 }) do
        local v = {}
        for k, t in ipairs(times) do
          local a = 1 + 0.2 * math.sin(3 * t + j)
          v[(k - 1) * 3 + 1], v[(k - 1) * 3 + 2], v[(k - 1) * 3 + 3] =
            a, a, uniform and a or a + 0.01 * math.sin(7 * t)
        end
        list[#list + 1] = { joint = j, path = "scale", times = times, values = v }
      end
      return list
    end
    for _, tr in ipairs(scales(true)) do tracks[#tracks + 1] = tr end
    local exact = anim.clip({ tracks = tracks, pack = false }, skel)
    local packed = assert(anim.pack(exact, skel, { tolerance = 1e-4, distance = 0.1 }))
    assert.is_true(packed:packed())
    for _, j in ipairs({ 1, 2, 4, 5, 6, 7, 8 }) do
      local bits = select(4, packed:track_keys(j, "scale"))
      assert.is_true(bits[1] > 0, "joint " .. j)
      assert.same({ bits[1], 0, 0 }, bits, "joint " .. j)
    end
    local bits9 = select(4, packed:track_keys(9, "scale"))
    assert.is_true(bits9[2] > 0 and bits9[3] > 0, "chunk 2 stores rows y and z")
    -- the same clip with z a little apart keeps three rows: more bytes
    local apart = anim.clip({ tracks = scales(false), pack = false }, skel)
    local packed_apart = assert(anim.pack(apart, skel, { tolerance = 1e-4, distance = 0.1 }))
    assert.is_true(packed:bytes() < packed_apart:bytes(),
      packed:bytes() .. " against " .. packed_apart:bytes())
    -- every path: x = y = z where the source has it, the rest scale where
    -- the clip has no track, within the tolerance
    local N, ts = 15, {}
    for i = 1, N do ts[i] = i == N and 2 or H.rand(0, 2) end
    local pa, pb = sample_both(skel, packed, ts)
    for i = 1, N do
      for j = 1, 12 do
        local _, _, sa = pa:trs(i, j)
        local _, _, sb = pb:trs(i, j)
        if j == 10 then
          assert.same({ 1, 2, 3 }, sa)
          assert.same({ 1, 2, 3 }, sb)
        elseif j <= 9 then
          assert.is_true(sa[1] == sa[2] and sa[2] == sa[3], "joint " .. j)
          assert.is_true(sb[1] == sb[2] and sb[2] == sb[3], "joint " .. j)
          assert.near(sa[1], sb[1], 1e-6)
        end
      end
    end
    local mj, md = lua_error(exact, packed, skel, times, f32(0.1))
    local e = packed:error()
    assert.is_true(md <= e.max_error_distance * (1 + 1e-3) + 1e-6, md)
    assert.is_true(mj <= e.max_error * (1 + 1e-3) + 1e-6, mj)
    assert.is_true(md <= 1e-4, md)
  end)

  it("removes root motion as the exact clip does", function()
    local skel = rand_skeleton(9)
    local clip = rand_clip(skel, { uniform = true, interpolation = "LINEAR" })
    -- (at distance 0 a leaf's rotation moves no point: the bound would not cover it)
    local packed = assert(anim.pack(clip, skel, { tolerance = 1e-4, distance = 0.1 }))
    local N = 11
    local pe, pp = limber.pose(skel, N), limber.pose(skel, N)
    local se, sp = anim.sampler(pe, { clip }), anim.sampler(pp, { packed })
    se:set_root_motion(1, true, true)
    sp:set_root_motion(1, true, true)
    for i = 1, N do
      local t = H.rand(0, 3)
      se:set(i, 1, t)
      sp:set(i, 1, t)
    end
    se:run()
    sp:run()
    for i = 1, N do
      local te, re = pe:trs(i, 1)
      local tp, rp = pp:trs(i, 1)
      assert.is_true(near_list(te, tp, 2e-4), "translation")
      local dot = re[1] * rp[1] + re[2] * rp[2] + re[3] * rp[3] + re[4] * rp[4]
      -- (yaw removal amplifies errors near a pitch of 90 degrees: a loose bound)
      assert.is_true(math.abs(math.abs(dot) - 1) <= 1e-4, ("rotation: dot %.9g"):format(dot))
    end
  end)

  it("samples through the frame plan as through the sampler", function()
    local skel = rand_skeleton(17)
    local clips = {}
    for k = 1, 3 do
      clips[k] = anim.pack((rand_clip(skel, { uniform = k ~= 2, interpolation = "LINEAR" })), skel,
        { tolerance = 0.005 })
    end
    local N = 19
    local pose = limber.pose(skel, N)
    local plan = limber.plan({ pose = pose, clips = clips, layers = { { name = "base" } },
                               models = "all" })
    local ref = limber.pose(skel, N)
    local s = anim.sampler(ref, clips)
    for _ = 1, 3 do
      for i = 1, N do
        local k, t = math.random(1, 3), H.rand(0, 3)
        plan:play(i, "base", 1, k, t)
        s:set(i, k, t)
      end
      plan:run(0)
      s:run()
      ref:local_to_model()
      for i = 1, N do
        for j = 1, skel:joint_count() do
          assert.is_true(near_list(pose:model(i, j), ref:model(i, j), 1e-5))
        end
      end
    end
  end)

  it("keeps node tracks and events exact", function()
    local skel = rand_skeleton(4)
    local times = { 0, 0.5, 1 }
    local clip = anim.clip({ name = "n", tracks = {
      { joint = 2, path = "rotation", times = times, values = { 0, 0, 0, 1, 0, 0.5, 0, 0.866, 0, 0, 0, 1 } },
      { node = 7, path = "translation", times = { 0, 0.3, 1 }, values = { 1, 2, 3, 4, 5, 6, 7, 8, 9 } },
      { node = 9, path = "scale", interpolation = "STEP", times = { 0.2 }, values = { 2, 2, 2 } },
    }, events = { { time = 0.25, name = "step" }, { time = 0.75, name = "land" } }, pack = false }, skel)
    local packed = assert(anim.pack(clip, skel, { tolerance = 1e-3 }))
    assert.is_true(packed:packed())
    assert.same(clip:node_tracks(), packed:node_tracks())
    for _, t in ipairs({ 0, 0.1, 0.3, 0.5, 0.77, 1, 1.5 }) do
      for k = 1, 2 do
        assert.same({ clip:sample_node(k, t) }, { packed:sample_node(k, t) })
      end
    end
    assert.same(anim.events(clip), anim.events(packed))
    assert.equal(clip:duration(), packed:duration())
    assert.equal("n", packed:name())
  end)

  it("keeps the clip exact at tolerance 0 and when no packing meets the tolerance", function()
    local skel = rand_skeleton(3)
    local clip = anim.clip({ pack = false, tracks = {
      { joint = 2, path = "translation", interpolation = "STEP", times = { 0, 0.3, 1 },
        values = { 0, 0, 0, 1, 1, 1, 0, 0, 0 } },
      { joint = 3, path = "translation", times = { 0, 0.7, 1 }, values = { 0, 0, 0, 1, 1, 1, 0, 0, 0 } },
    } }, skel)
    assert.equal(clip, anim.pack(clip, skel, { tolerance = 0 }))
    -- a STEP track next to a LINEAR one on irregular key times: no grid keeps the steps
    local same, why = anim.pack(clip, skel, { tolerance = 1e-3 })
    assert.equal(clip, same)
    assert.matches("no packing meets tolerance", why, 1, true)
    local none, msg = limber.core.clip_pack(clip, skel, 1e-3, 0.1)
    assert.is_nil(none)
    assert.matches("^limber.anim.pack: no packing meets tolerance", msg)
    -- an exact clip reports no error
    local e = clip:error()
    assert.same({ 0, 0, 0 }, { e.max_error, e.max_error_distance, e.p99_error_distance })
    assert.equal(clip:bytes(), e.bytes)
  end)

  it("records the rig hash of its skeleton, and fits tells which skeletons it plays on", function()
    local joints = H.rand_joints(6, 1)
    local skel = limber.skeleton(joints)
    local same = limber.skeleton(joints)
    assert.equal(skel:rig_hash(), same:rig_hash())
    assert.matches("^%x+$", skel:rig_hash())
    assert.equal(16, #skel:rig_hash())
    -- a name, a parent, a joint more: another rig
    local renamed, reparented = {}, {}
    for k, j in ipairs(joints) do
      renamed[k] = { name = j.name, parent = j.parent, translation = j.translation }
      reparented[k] = { name = j.name, parent = j.parent, translation = j.translation }
    end
    renamed[3].name = "other"
    reparented[6].parent = reparented[6].parent == 1 and 2 or 1
    local more = { H.tunpack(renamed) }
    more[#more + 1] = { name = "extra", parent = "j1" }
    for _, d in ipairs({ renamed, reparented, more }) do
      assert.are_not.equal(skel:rig_hash(), limber.skeleton(d):rig_hash())
    end
    -- rest poses do not count
    local moved = {}
    for k, j in ipairs(joints) do moved[k] = { name = j.name, parent = j.parent } end
    assert.equal(skel:rig_hash(), limber.skeleton(moved):rig_hash())
    local clip = rand_clip(skel, { uniform = true, interpolation = "LINEAR" })
    local packed, why0 = anim.pack(clip, skel, { tolerance = 1e-3 })
    assert.is_nil(why0)
    assert.is_true(packed:packed())
    assert.equal(skel:rig_hash(), packed:rig_hash())
    assert.is_nil(clip:rig_hash())
    assert.is_true(anim.fits(packed, same))
    local ok, why = anim.fits(packed, limber.skeleton(renamed))
    assert.is_false(ok)
    assert.matches("packed for rig " .. skel:rig_hash(), why, 1, true)
    assert.is_true(anim.fits(clip, limber.skeleton(renamed))) -- exact clips: joint indices only
    ok, why = anim.fits(clip, limber.skeleton({ { name = "a" } }))
    assert.is_false(ok)
    assert.matches("animates joint", why, 1, true)
    assert.error_matches(function() anim.fits(skel, clip) end, "bad argument #1 to 'limber.anim.fits'",
      1, true)
  end)

  it("packs a clip built from Lua with a skeleton by default, keeping its events", function()
    local skel = rand_skeleton(6)
    local desc = { name = "walk", tracks = {}, events = { { time = 0.5, name = "step" } } }
    for j = 1, 6 do
      local times, values = {}, {}
      for k = 1, 31 do
        times[k] = (k - 1) / 30
        local a = 0.4 * math.sin(2 * math.pi * times[k] + j)
        values[#values + 1], values[#values + 2] = 0, math.sin(a / 2)
        values[#values + 1], values[#values + 2] = 0, math.cos(a / 2)
      end
      desc.tracks[j] = { joint = j, path = "rotation", times = times, values = values }
    end
    local packed = anim.clip(desc, skel) -- the default
    desc.pack = false
    local exact = anim.clip(desc, skel)
    assert.is_true(packed:packed())
    assert.is_false(exact:packed())
    desc.pack = nil
    assert.is_false(anim.clip(desc):packed()) -- no skeleton: exact, by default too
    desc.pack = false
    assert.same(anim.events(exact), anim.events(packed))
    local tol = anim.PACK_TOLERANCE * anim.rig_size(skel)
    assert.is_true(packed:error().max_error_distance <= tol)
    -- the default is what pack gives the exact clip, byte for byte
    assert.equal(anim.pack(exact, skel):bytes(), packed:bytes())
    local again = anim.pack(exact, skel)
    for _, t in ipairs({ 0, 0.13, 0.5, 0.71, 1 }) do
      for j = 1, 6 do
        assert.same({ again:sample_joint(j, "rotation", t) }, { packed:sample_joint(j, "rotation", t) })
      end
    end
    desc.pack = true
    assert.is_true(anim.clip(desc, skel):packed())
    -- a clip of node tracks only has no joint to pack: exact
    assert.is_false(anim.clip({ tracks = { { node = 3, path = "translation", times = { 0, 1 },
      values = { 0, 0, 0, 1, 1, 1 } } } }, skel):packed())
    desc.pack = { tolerance = 0 }
    assert.is_false(anim.clip(desc, skel):packed())
    desc.pack = { tolerance = 1e-3, distance = 0.2 }
    assert.near(1e-3, anim.clip(desc, skel):error().tolerance, 1e-9)
    desc.pack = "yes"
    assert.error_matches(function() anim.clip(desc, skel) end, "desc.pack must be true", 1, true)
    desc.pack = true
    assert.error_matches(function() anim.clip(desc) end, "desc.pack needs the skeleton", 1, true)
    desc.pack = { tolerance = -1 }
    assert.error_matches(function() anim.clip(desc, skel) end,
      "limber.anim.clip: desc.pack: option 'tolerance' must be", 1, true)
  end)

  it("gives the keys it keeps through track_keys: grid times, decoded values, its interpolation",
    function()
      local function lerp(a, b, f)
        local r = {}
        for c = 1, #a do r[c] = a[c] + f * (b[c] - a[c]) end
        return r
      end
      -- the kernel's threshold for lerping close keys (LMB_NLERP_DOT)
      local function slerp(a, b, f) return H.slerp(a, b, f, 0.9995) end
      -- a rotation near another, or near its negative (the same turn), component by component
      local function same_turn(want, got, tol, where)
        if want[1] * got[1] + want[2] * got[2] + want[3] * got[3] + want[4] * got[4] < 0 then
          got = { -got[1], -got[2], -got[3], -got[4] }
        end
        assert(H.maxdiff(want, got) <= tol, where .. ": off by " .. H.maxdiff(want, got))
      end
      local function key(values, k, w)
        local v = {}
        for c = 1, w do v[c] = values[(k - 1) * w + c] end
        return v
      end
      for trial = 1, 8 do
        local skel = rand_skeleton(math.random(3, 20))
        local interp = trial % 4 == 0 and "STEP" or "LINEAR"
        local exact = rand_clip(skel, { uniform = trial % 3 ~= 0, interpolation = interp,
                                        keys = math.random(8, 60) })
        local packed = anim.pack(exact, skel, { tolerance = 0.01 })
        if packed:packed() then
          local tracks, rebuilt = packed:joint_tracks(), {}
          assert.truthy(#tracks <= #exact:joint_tracks()) -- tracks equal to the rest pose go
          for _, tr in ipairs(tracks) do
            local j, path = tr.joint, tr.path
            local w = path == "rotation" and 4 or 3
            local times, values, how = packed:track_keys(j, path)
            local where = ("trial %d joint %d %s"):format(trial, j, path)
            assert.equal(interp, how, where)
            assert.equal(tr.keys, #times, where)
            assert.equal(tr.keys * w, #values, where)
            for k = 2, #times do assert.truthy(times[k] > times[k - 1], where) end
            -- the first and last keys sit on the exact clip's first and last key times
            local et = exact:track_keys(j, path)
            assert.near(et[1], times[1], 1e-5, where)
            if #times > 1 then assert.near(et[#et], times[#times], 1e-4, where) end
            -- a key's value is what the packed clip plays at its time (a rotation or its
            -- negative: the same turn; the sampler rounds the time to float, which moves
            -- a fast joint by up to ~1e-5)
            for k = 1, #times do
              local got = { packed:sample_joint(j, path, times[k], false) }
              if w == 4 then
                same_turn(key(values, k, w), got, 2e-5, where .. " key " .. k)
              else
                assert.near(got, key(values, k, w), 2e-5, where .. " key " .. k)
              end
            end
            -- between keys: lerp, rotations slerp (STEP: the key before); on a uniform
            -- grid (an irregular one interpolates by frame position, not time)
            for _ = 1, 4 do
              if #times > 1 and trial % 3 ~= 0 then
                local k = math.random(1, #times - 1)
                local f = H.rand(0.1, 0.9)
                local t = times[k] + f * (times[k + 1] - times[k])
                local a, b = key(values, k, w), key(values, k + 1, w)
                local want = interp == "STEP" and a
                  or path == "rotation" and slerp(a, b, f) or lerp(a, b, f)
                local got = { packed:sample_joint(j, path, t, false) }
                if path == "rotation" then
                  -- the sampler slerps the keys as decoded, before normalising them: a
                  -- key off unit length by the quantization step moves the factor (by
                  -- a few 1e-3 at this tolerance), so the bound grows with the angle between keys
                  local d = math.abs(a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4])
                  same_turn(want, got, 3e-6 + 1e-2 * 2 * math.acos(math.min(d, 1)), where)
                else
                  assert.near(want, got, 2e-5, where)
                end
              end
            end
            rebuilt[#rebuilt + 1] = { joint = j, path = path, interpolation = how, times = times,
                                      values = values }
          end
          -- an exact clip of those keys plays them (slerp for rotations, as the packed clip)
          local again = anim.clip({ tracks = rebuilt, pack = false }, skel)
          for _, tr in ipairs(rebuilt) do
            local w = tr.path == "rotation" and 4 or 3
            for k = 1, #tr.times - 1 do
              local f = H.rand(0.1, 0.9)
              local t = tr.times[k] + f * (tr.times[k + 1] - tr.times[k])
              local a, b = key(tr.values, k, w), key(tr.values, k + 1, w)
              local want = interp == "STEP" and a
                or tr.path == "rotation" and slerp(a, b, f) or lerp(a, b, f)
              local got = { again:sample_joint(tr.joint, tr.path, t, false) }
              if tr.path == "rotation" then
                same_turn(want, got, 3e-6, "rebuilt rotation")
              else
                assert.near(want, got, 2e-5, "rebuilt " .. tr.path)
              end
            end
          end
        end
      end
      -- tracks the packed clip does not have, and paths no joint track has
      local skel = rand_skeleton(3)
      local one = anim.pack(anim.clip({ pack = false, tracks = {
        { joint = 2, path = "translation", times = { 0, 1 }, values = { 0, 0, 0, 1, 1, 1 } } } },
        skel), skel, { tolerance = 1e-3 })
      assert.is_true(one:packed())
      assert.is_nil(one:track_keys(2, "rotation"))
      assert.is_nil(one:track_keys(1, "translation"))
      assert.is_nil(one:track_keys(9, "translation"))
      assert.is_nil(one:track_keys(-1, "translation"))
      assert.is_nil(one:track_keys(2, "float"))
      assert.is_table(one:track_keys(2, "translation"))
    end)

  it("refuses bad arguments by name", function()
    local skel = rand_skeleton(3)
    local small = rand_skeleton(1)
    local clip = anim.clip({ pack = false, tracks = {
      { joint = 3, path = "translation", times = { 0, 1 }, values = { 0, 0, 0, 1, 1, 1 } } } }, skel)
    local packed = anim.pack(clip, skel, { tolerance = 1e-3 })
    local cases = {
      { function() anim.pack(nil, skel) end, "bad argument #1 to 'limber.anim.pack'" },
      { function() anim.pack(clip, clip) end, "bad argument #2 to 'limber.anim.pack'" },
      { function() anim.pack(clip, skel, 5) end, "bad argument #3 to 'limber.anim.pack'" },
      { function() anim.pack(clip, skel, { tolerance = -1 }) end, "option 'tolerance' must be" },
      { function() anim.pack(clip, skel, { tolerance = 0 / 0 }) end, "option 'tolerance' must be" },
      { function() anim.pack(clip, skel, { distance = math.huge }) end, "option 'distance' must be" },
      { function() anim.pack(clip, skel, { tolerence = 1 }) end, "unknown option 'tolerence'" },
      { function() anim.pack(clip, skel, { cache_bytes = -1 }) end, "option 'cache_bytes' must be >= 0" },
      { function() anim.pack(clip, skel, { cache_bytes = 0.5 }) end,
        "option 'cache_bytes' must be an integer" },
      { function() limber.core.clip_pack(clip, skel, 1e-3, 0.1, -1) end, "cache bytes must be >= 0" },
      { function() limber.core.clip_pack(clip, skel, 1e-3, 0.1, "x") end, "bad argument #5" },
      { function() anim.pack(clip, skel, { source_keys = 1 }) end,
        "option 'source_keys' must be a boolean" },
      { function() limber.core.clip_pack(clip, skel, 1e-3, 0.1, nil, 1) end, "bad argument #6" },
      { function() anim.pack(packed, skel) end, "packed already" },
      { function() anim.pack(clip, small) end, "animates joint 3 of a 1-joint skeleton" },
      { function() limber.core.clip_pack(clip, skel, 0, 0.1) end, "tolerance must be > 0" },
      { function() limber.core.clip_pack(clip, skel, 1e-3, -1) end, "distance must be >= 0" },
      { function() limber.core.clip_pack(clip, skel, 1e39, 0.1) end, "tolerance" },
      { function() packed:error(packed, skel, 0.1) end, "the source must be an exact clip" },
      { function() packed:error(clip, small, 0.1) end, "fewer joints" },
      { function() packed:error(clip, skel, -1) end, "distance must be >= 0" },
    }
    for k, c in ipairs(cases) do
      local ok, err = pcall(c[1])
      assert.is_false(ok, "case " .. k)
      assert.matches(c[2], tostring(err), 1, true)
    end
    -- nothing changed
    assert.is_true(packed:packed())
    assert.is_false(clip:packed())
    -- too large to pack: 4000 joints (the last animated) over 12000 frames
    -- would need gigabytes of scratch; refused before any allocation, and
    -- the clip stays exact
    local joints = {}
    for k = 1, 4000 do joints[k] = { name = "j" .. k, parent = k > 1 and k - 1 or nil } end
    local big_skel = limber.skeleton(joints)
    local times, values = {}, {}
    for k = 1, 12000 do
      times[k] = (k - 1) / 30
      values[3 * k - 2], values[3 * k - 1], values[3 * k] = k, 0, 0
    end
    local big = anim.clip({ pack = false, tracks = {
      { joint = 4000, path = "translation", times = times, values = values } } }, big_skel)
    local none, err = limber.core.clip_pack(big, big_skel, 1e-3, 0.1)
    assert.is_nil(none)
    assert.equal("limber.anim.pack: the clip is too large to pack", err)
    local same, why = anim.pack(big, big_skel, { tolerance = 1e-3 })
    assert.equal(big, same)
    assert.matches("too large to pack", why, 1, true)
  end)
end)
