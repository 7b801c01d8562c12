-- Retargeting and mirroring clips (limber.retarget) on the Fox: a rig with
-- 1.5x longer bones and other joint frames gets the same rotations from rest
-- and world positions scaled by 1.5; mirroring twice gives the original keys,
-- and the mirrored walk's left foot follows the original right foot
-- reflected.
local H = require "spec.helper"
local limber = require "limber"
local rt = require "limber.retarget"

H.seed("retarget")

local qmul, qconj, qrot = H.qmul, H.qconj, H.qrot
local function rquat()
  local v = { H.rand(-1, 1), H.rand(-1, 1), H.rand(-1, 1), H.rand(-1, 1) }
  local l = math.sqrt(v[1] ^ 2 + v[2] ^ 2 + v[3] ^ 2 + v[4] ^ 2)
  return { v[1] / l, v[2] / l, v[3] / l, v[4] / l }
end

-- column k (1..3) of a model matrix, and its translation
local function col(m, k) return { m[k * 4 - 3], m[k * 4 - 2], m[k * 4 - 1] } end

local fox = limber.gltf.load(H.assets .. "Fox/Fox.glb", { tolerance = 0 })
local skel = fox.skeletons[1].skeleton

-- The Fox with bones `k` times longer and every joint frame turned by a
-- random E_j (children's rest offsets and rotations compensated, so the rig
-- has the same shape); `rename` renames one joint.
local function other_fox(k, rename)
  local par, E, desc = skel:parents(), {}, {}
  for j = 1, skel:joint_count() do
    local t, r, s = skel:rest_trs(j)
    E[j] = rquat()
    local Ep = par[j] ~= 0 and E[par[j]] or { 0, 0, 0, 1 }
    local tt = qrot(qconj(Ep), t)
    local name = skel:name(j)
    desc[j] = { name = name == rename and "renamed" or name, parent = par[j] ~= 0 and par[j] or nil,
                translation = { k * tt[1], k * tt[2], k * tt[3] },
                rotation = qmul(qmul(qconj(Ep), r), E[j]), scale = s }
  end
  return limber.skeleton(desc), E
end

local function pose_at(sk, clip, t)
  local p = limber.pose(sk, 1)
  local s = limber.anim.sampler(p, { clip })
  s:set(1, 1, t, false)
  s:run()
  p:local_to_model()
  return p
end

-- The largest difference of a joint's world position coordinate between
-- clips a and b played on skeleton sk, at 21 times over `duration`.
local function largest_gap(sk, a, b, duration, steps)
  local worst = 0
  steps = steps or 20
  for f = 0, steps do
    local t = f / steps * duration
    local p, q = pose_at(sk, a, t), pose_at(sk, b, t)
    for j = 1, sk:joint_count() do
      local m, n = p:model(1, j), q:model(1, j)
      worst = math.max(worst, H.maxdiff({ m[13], m[14], m[15] }, { n[13], n[14], n[15] }))
    end
  end
  return worst
end

describe("limber.retarget.clip", function()
  it("gives a rig with 1.5x bones and other frames the same rotations from rest and 1.5x positions", function()
    local big, E = other_fox(1.5)
    for a = 1, 3 do
      local clip = fox.animations[a].clips[1]
      local moved = rt.clip(clip, skel, big)
      assert.near(clip:duration(), moved:duration(), 1e-6)
      assert.equal(#clip:joint_tracks(), #moved:joint_tracks())
      for _, f in ipairs({ 0, 0.3, 0.55, 0.9 }) do
        local t = f * clip:duration()
        local p, q = pose_at(skel, clip, t), pose_at(big, moved, t)
        for j = 1, skel:joint_count() do
          local m, n = p:model(1, j), q:model(1, j)
          assert.near({ 1.5 * m[13], 1.5 * m[14], 1.5 * m[15] }, { n[13], n[14], n[15] }, 2e-3,
            ("anim %d t %g joint %d position"):format(a, t, j))
          -- the target's frame is the source's turned by E_j: its axes are
          -- the source's axes mapped through E_j
          for c = 1, 3 do
            local e = { 0, 0, 0 }
            e[c] = 1
            local axis = qrot(E[j], e) -- E_j's column c, in the source joint's frame
            local want = { 0, 0, 0 }
            for r = 1, 3 do
              local mc = col(m, r)
              for i = 1, 3 do want[i] = want[i] + mc[i] * axis[r] end
            end
            assert.near(want, col(n, c), 2e-4, ("anim %d joint %d axis %d"):format(a, j, c))
          end
        end
      end
    end
  end)

  it("leaves joints without a match at rest, and maps names on request", function()
    local other = other_fox(1, "b_Tail03_014")
    local walk = fox.animations[2].clips[1]
    local moved = rt.clip(walk, skel, other)
    local tail = other:find("renamed")
    for _, tr in ipairs(moved:joint_tracks()) do assert.are_not.equal(tail, tr.joint) end
    assert.is_true(#moved:joint_tracks() < #walk:joint_tracks())
    local mapped = rt.clip(walk, skel, other, { map = { renamed = "b_Tail03_014" }, name = "tail" })
    assert.equal(#walk:joint_tracks(), #mapped:joint_tracks())
    assert.equal("tail", mapped:name())
  end)

  -- A glTF load packs its clips by default: their retargeted clips are packed for the
  -- new rig and play the exact clip's retargeted poses within the two packings' tolerances
  -- (the source's, scaled with the rig, and the new one's).
  it("carries a packed clip (a glTF load's default) like the exact one, within the tolerances",
    function()
      local big = other_fox(1.5)
      local packed_fox = limber.gltf.load(H.assets .. "Fox/Fox.glb")
      local tol_src = limber.anim.PACK_TOLERANCE * limber.anim.rig_size(skel)
      local tol_big = limber.anim.PACK_TOLERANCE * limber.anim.rig_size(big)
      for a = 1, 3 do
        local packed = packed_fox.animations[a].clips[1]
        assert.is_true(packed:packed())
        local exact_moved = rt.clip(fox.animations[a].clips[1], skel, big)
        local moved = rt.clip(packed, skel, big)
        assert.is_false(exact_moved:packed())
        assert.is_true(moved:packed())
        assert.near(packed:duration(), moved:duration(), 1e-6)
        local worst = largest_gap(big, exact_moved, moved, packed:duration())
        -- a coordinate differs by at most the distance, which the two packings bound
        assert.truthy(worst <= 1.5 * tol_src + tol_big,
          ("anim %d: %g against %g"):format(a, worst, 1.5 * tol_src + tol_big))
        assert.truthy(worst > 0) -- packed twice: not the exact clip's poses
      end
      -- mirrored: packed again, within both tolerances of the exact clip's mirror
      local walk = packed_fox.animations[2].clips[1]
      local m1, m2 = rt.mirror(walk, skel), rt.mirror(fox.animations[2].clips[1], skel)
      assert.is_true(m1:packed())
      local worst = largest_gap(skel, m1, m2, walk:duration())
      assert.truthy(worst <= 2 * tol_src, ("mirror: %g against %g"):format(worst, 2 * tol_src))
    end)

  it("refuses what it cannot carry", function()
    local function fails(pat, fn) assert.error_matches(fn, pat, 1, true) end
    fails("bad argument #1 to 'limber.retarget.clip' (limber.Clip expected, got table)",
      function() rt.clip({}, skel, skel) end)
    fails("bad argument #3 to 'limber.retarget.clip' (limber.Skeleton expected, got nil)",
      function() rt.clip(fox.animations[1].clips[1], skel) end)
    fails("unknown option 'scale'", function() rt.clip(fox.animations[1].clips[1], skel, skel, { scale = 2 }) end)
    fails("option 'axis' must be", function() rt.mirror(fox.animations[1].clips[1], skel, { axis = "w" }) end)
    local walk = fox.animations[2].clips[1]
    fails("bad argument #4 to 'limber.retarget.clip' (option 'map' must map joint names to joint names)",
      function() rt.clip(walk, skel, skel, { map = { a = 5 } }) end)
    fails("option 'map' names 'nope', not a joint of the skeleton",
      function() rt.mirror(walk, skel, { map = { b_Head_05 = "nope" } }) end)
    fails("option 'map' pairs", function()
      rt.mirror(walk, skel, { map = { b_Head_05 = "b_Neck_04", b_Neck_04 = "b_Hip_01" } })
    end)
    fails("option 'map' pairs 'b_RightHand_08' with both", function()
      rt.mirror(walk, skel, { map = { b_LeftHand_011 = "b_RightHand_08", b_LeftFoot01_017 = "b_RightHand_08" } })
    end)
    -- a map that leaves the names' own pairing one-sided: the left foot's
    -- counterpart by name (the right foot) is the left hand's now
    fails("both pair with", function()
      rt.mirror(walk, skel, { map = { b_LeftHand_011 = "b_RightFoot01_021" } })
    end)
    local small = limber.skeleton({ { name = "a" } })
    fails("the clip animates joint", function() rt.clip(walk, small, skel) end)
  end)
end)

describe("limber.retarget.mirror", function()
  it("mirroring twice gives the original keys", function()
    for a = 1, 3 do
      local clip = fox.animations[a].clips[1]
      local twice = rt.mirror(rt.mirror(clip, skel), skel)
      local tracks = clip:joint_tracks()
      assert.equal(#tracks, #twice:joint_tracks())
      for _, tr in ipairs(tracks) do
        local t1, v1, i1 = clip:track_keys(tr.joint, tr.path)
        local t2, v2, i2 = twice:track_keys(tr.joint, tr.path)
        assert.same(t1, t2)
        assert.equal(i1, i2)
        local tol = tr.path == "translation" and 1e-4 or 1e-5 -- Fox is about 100 units tall
        assert.near(v1, v2, tol, ("anim %d joint %d %s"):format(a, tr.joint, tr.path))
      end
    end
  end)

  -- a packed clip's mirror is packed again within the tolerance of the mirrored
  -- keys, and mirroring is an isometry: twice mirrored, it plays the packed clip's
  -- poses within twice the tolerance (the claim of retarget.lua's header)
  it("mirroring a packed clip twice plays its poses within twice the tolerance", function()
    local packed_fox = limber.gltf.load(H.assets .. "Fox/Fox.glb")
    local tol = limber.anim.PACK_TOLERANCE * limber.anim.rig_size(skel)
    for a = 1, 3 do
      local clip = packed_fox.animations[a].clips[1]
      assert.is_true(clip:packed())
      local twice = rt.mirror(rt.mirror(clip, skel), skel)
      assert.is_true(twice:packed())
      local worst = largest_gap(skel, clip, twice, clip:duration(), 60)
      assert.truthy(worst <= 2 * tol, ("anim %d: %g against %g"):format(a, worst, 2 * tol))
    end
  end)

  it("the mirrored walk's left foot follows the original right foot, reflected", function()
    local walk = fox.animations[2].clips[1]
    local m = rt.mirror(walk, skel)
    local pairs_ = { { "b_LeftFoot01_017", "b_RightFoot01_021" }, { "b_LeftHand_011", "b_RightHand_08" },
                     { "b_RightLeg02_020", "b_LeftLeg02_016" } }
    -- the Fox is symmetric to about 0.02 units at rest (103 units tall)
    for _, f in ipairs({ 0, 0.2, 0.45, 0.7, 0.95 }) do
      local t = f * walk:duration()
      local p, q = pose_at(skel, walk, t), pose_at(skel, m, t)
      for _, pr in ipairs(pairs_) do
        local a, b = p:model(1, skel:find(pr[2])), q:model(1, skel:find(pr[1]))
        assert.near({ -a[13], a[14], a[15] }, { b[13], b[14], b[15] }, 0.05, pr[1] .. " at " .. t)
      end
    end
  end)
end)
