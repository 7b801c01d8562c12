-- Skeletons, pose batches, local-to-model and palettes against plain Lua
-- references on random data.
local H = require "spec.helper"
local limber = require "limber"
local core = limber.core

H.seed("core")

local function random_pose_batch(n_joints, roots, instances)
  local joints = H.rand_joints(n_joints, roots)
  local skel = limber.skeleton(joints)
  local pose, locals = H.rand_pose(skel, instances)
  return skel, pose, skel:parents(), locals
end

local function check_models(pose, parents, locals, roots, tol)
  for i = 1, #locals do
    local ref = H.reference_models(parents, locals[i], roots and roots[i])
    for j = 1, #parents do
      assert.near(ref[j], pose:model(i, j), tol or 2e-5)
    end
  end
end

for _, simd in ipairs({ true, false }) do
  describe("local_to_model (" .. (simd and "best kernel" or "portable kernel") .. ")", function()
    local old
    setup(function() old = core.simd() core.simd(simd) end)
    teardown(function() core.simd(old) end)

    it("matches a recursive reference on random skeletons with several roots", function()
      for _, shape in ipairs({ { 1, 1, 1 }, { 7, 1, 3 }, { 40, 3, 9 }, { 96, 2, 17 }, { 130, 5, 8 } }) do
        local _, pose, parents, locals = random_pose_batch(shape[1], shape[2], shape[3])
        pose:local_to_model()
        check_models(pose, parents, locals)
      end
    end)

    it("applies a root matrix per instance", function()
      local _, pose, parents, locals = random_pose_batch(20, 2, 11)
      local roots = {}
      for i = 1, 11 do
        local t, r, s = H.rand_trs(true)
        roots[i] = H.trs(t, r, s)
        pose:set_root(i, roots[i])
      end
      pose:local_to_model()
      check_models(pose, parents, locals, roots)
      pose:set_root(4, nil)
      roots[4] = nil
      pose:local_to_model()
      check_models(pose, parents, locals, roots)
    end)

    it("partial updates from the first changed joint equal a full update", function()
      local _, pose, parents, locals = random_pose_batch(50, 2, 19)
      pose:local_to_model()
      for _ = 1, 30 do
        local i, j = math.random(1, 19), math.random(1, 50)
        local t, r, s = H.rand_trs(true)
        pose:set_trs(i, j, t, r, s)
        locals[i][j] = { t, r, s }
        assert.is_true(pose:dirty(i) <= j)
        pose:local_to_model()
        assert.is_nil(pose:dirty(i))
        check_models(pose, parents, locals)
      end
    end)
  end)
end

describe("the portable and SIMD kernels", function()
  it("agree to float rounding", function()
    local _, pose = random_pose_batch(96, 1, 24)
    local old = core.simd(false)
    pose:local_to_model(true)
    local a = pose:model_buffer():bytes()
    core.simd(true)
    pose:local_to_model(true)
    local b = pose:model_buffer():bytes()
    core.simd(old)
    local n = math.floor(#a / 4)
    assert.equal(96 * 24 * 64, #a)
    assert.equal(#a, #b)
    local worst = 0
    for k = 0, n - 1 do
      local x = H.unpack("<f", a, k * 4 + 1)
      local y = H.unpack("<f", b, k * 4 + 1)
      worst = math.max(worst, math.abs(x - y) / math.max(1, math.abs(x)))
    end
    assert.is_true(worst < 1e-4, "worst relative difference " .. worst)
  end)
end)

describe("skeleton", function()
  it("sort_joints orders joints given in any order, and the remap says where each went", function()
    local joints = H.rand_joints(60, 3)
    local ordered = limber.skeleton(joints)
    -- shuffle, keeping parents by name
    local shuffled = {}
    for i, j in ipairs(joints) do
      shuffled[i] = { name = j.name, parent = j.parent and joints[j.parent].name,
                      translation = j.translation, rotation = j.rotation, scale = j.scale }
    end
    H.shuffle(shuffled)
    local sorted, remap = limber.sort_joints(shuffled)
    local skel = limber.skeleton(sorted)
    assert.equal(60, skel:joint_count())
    for k = 1, 60 do
      local p = skel:parent(k)
      if p then assert.is_true(p < k) end
    end
    for i, j in ipairs(shuffled) do
      assert.equal(j.name, skel:name(remap[i]))
      assert.equal(remap[i], skel:find(j.name))
      if j.parent then
        assert.equal(skel:find(j.parent), skel:parent(remap[i]))
      else
        assert.is_nil(skel:parent(remap[i]))
      end
      local t, r, s = skel:rest_trs(remap[i])
      assert.near(j.translation, t)
      assert.quat_near(j.rotation, r)
      assert.near(j.scale, s)
    end
    -- same model matrices per joint name
    local pa, pb = limber.pose(ordered, 1), limber.pose(skel, 1)
    pa:local_to_model()
    pb:local_to_model()
    for k = 1, 60 do
      local name = ordered:name(k)
      assert.near(pa:model(1, k), pb:model(1, skel:find(name)), 1e-5)
    end
  end)

  it("sort_joints keeps an ordered list as is and rewrites index parents", function()
    local joints = H.rand_joints(30, 2)
    local sorted, remap = limber.sort_joints(joints)
    for i = 1, 30 do
      assert.equal(i, remap[i])
      assert.equal(joints[i].parent, sorted[i].parent)
    end
    -- parents by index, listed children first: a reversed chain
    local n = 5000
    local chain = {}
    for i = 1, n do chain[i] = { parent = i < n and i + 1 or nil } end
    sorted, remap = limber.sort_joints(chain)
    assert.equal(1, remap[n])
    assert.equal(n, remap[1])
    local skel = limber.skeleton(sorted)
    for k = 2, n do assert.equal(k - 1, skel:parent(k)) end
    assert.is_nil(chain[1].name) -- the input is not changed
    assert.equal(2, chain[1].parent)
  end)

  it("never reorders: joint k of the description is joint k of the skeleton", function()
    -- the issue's example: "hand" listed before its parent "arm" (by index)
    local desc = { { name = "hand", parent = 2 }, { name = "arm" } }
    local ok, err = pcall(function() local s = limber.skeleton(desc); return s end)
    assert.is_false(ok)
    assert.truthy(err:find("limber.skeleton: joint 1 ('hand') comes before its parent 2 ('arm'): "
      .. "list parents first, or order the joints with limber.sort_joints", 1, true), err)
    assert.truthy(err:find("core_spec.lua:", 1, true), err) -- the caller's line
    ok, err = pcall(limber.skeleton, { { name = "hand", parent = "arm" }, { name = "arm" } })
    assert.is_false(ok)
    assert.truthy(err:find("comes before its parent", 1, true), err)
    -- in order, a clip track for joint 1 animates joint 1, whatever the names
    local skel = limber.skeleton { { name = "arm" }, { name = "hand", parent = 1 } }
    assert.equal("arm", skel:name(1))
    assert.equal("hand", skel:name(2))
    for _, bad in ipairs {
      { { { parent = 1 } }, "joint 1 is its own parent" },
      { { { parent = 3 }, {} }, "joint 1: parent 3 out of range [1, 2]" },
      { { { name = "a", parent = "b" }, { name = "b", parent = "a" } }, "comes before its parent" },
    } do
      ok, err = pcall(limber.skeleton, bad[1])
      assert.is_false(ok)
      assert.truthy(err:find(bad[2], 1, true), err)
    end
    for _, cyc in ipairs {
      { { name = "a", parent = "b" }, { name = "b", parent = "a" } },
      { { parent = 3 }, { parent = 1 }, { parent = 2 }, {} },
    } do
      ok, err = pcall(limber.sort_joints, cyc)
      assert.is_false(ok)
      assert.truthy(err:find("limber.sort_joints: joint 1", 1, true) and err:find("is in a parent cycle", 1, true), err)
    end
  end)

  it("stores inverse bind matrices per joint", function()
    local m = H.trs({ 1, 2, 3 }, H.rand_quat(), { 1, 2, 1 })
    local skel = limber.skeleton({ { name = "a" }, { name = "b", parent = "a", inverse_bind = m } })
    assert.near(m, skel:inverse_bind(skel:find("b")))
    assert.near(H.identity(), skel:inverse_bind(skel:find("a")))
  end)

  it("refuses bad input with a clear message", function()
    local cases = {
      { {}, "no joints" },
      { { { parent = 2 }, { parent = 1 } }, "joint 1 comes before its parent 2" },
      { { { parent = 1 } }, "its own parent" },
      { { { name = "a" }, { name = "b", parent = "a" }, { name = "c", parent = 3 } }, "joint 3 is its own parent" },
      { { { parent = 3 }, {} }, "parent 3 out of range" },
      { { { name = "x" }, { name = "x" } }, "share the name 'x'" },
      { { { parent = "nope" } }, "parent 'nope' is not a joint name" },
      { { { translation = { 0, 0 / 0, 0 } } }, "not a finite float" },
      { { { rotation = { 0, 0, 0, 0 } } }, "zero quaternion" },
      { { { scale = { 1, 1 } } }, "scale of joint 1 must be a table of 3 numbers" },
      { { { inverse_bind = { 1, 2 } } }, "inverse_bind of joint 1" },
      { { { parent = 1.5 } }, "parent must be a name or an integer" },
      { { { rotation = { 0, 0, 0, math.huge } } }, "not a finite float" },
    }
    for _, c in ipairs(cases) do
      assert.error_matches(function() limber.skeleton(c[1]) end, c[2], 1, true)
    end
    local too_many = {}
    for i = 1, core.MAX_JOINTS + 1 do too_many[i] = 0 end
    assert.error_matches(function() core.skeleton(too_many) end, "out of range [1, 65535]", 1, true)
  end)
end)

describe("pose", function()
  local skel
  before_each(function() skel = limber.skeleton(H.rand_joints(5, 1)) end)

  it("starts at the rest pose and resets to it", function()
    local pose = limber.pose(skel, 3)
    for j = 1, 5 do
      local t, r, s = pose:trs(2, j)
      local rt, rr, rs = skel:rest_trs(j)
      assert.near(rt, t) assert.near(rr, r) assert.near(rs, s)
    end
    -- model matrices are valid before the first pass: the rest pose
    local parents, rest = skel:parents(), {}
    for j = 1, 5 do rest[j] = { skel:rest_trs(j) } end
    local ref = H.reference_models(parents, rest)
    for j = 1, 5 do assert.near(ref[j], pose:model(3, j), 1e-5) end
    pose:set_trs(2, 3, { 9, 9, 9 })
    assert.near({ 9, 9, 9 }, (pose:trs(2, 3)))
    pose:reset(2)
    assert.near((skel:rest_trs(3)), (pose:trs(2, 3)))
  end)

  it("normalises rotations and keeps components given as nil", function()
    local pose = limber.pose(skel, 1)
    local t0, _, s0 = pose:trs(1, 2)
    pose:set_trs(1, 2, nil, { 0, 0, 2, 0 }, nil)
    local t, r, s = pose:trs(1, 2)
    assert.near(t0, t) assert.near(s0, s) assert.near({ 0, 0, 1, 0 }, r)
  end)

  it("raises on bad arguments and changes nothing", function()
    local pose = limber.pose(skel, 2)
    pose:local_to_model()
    local before = pose:model_buffer():bytes()
    local t_before = { pose:trs(1, 1) }
    local cases = {
      { function() pose:set_trs(3, 1, { 0, 0, 0 }) end, "instance index 3 out of range [1, 2]" },
      { function() pose:set_trs(0, 1, { 0, 0, 0 }) end, "instance index 0 out of range [1, 2]" },
      { function() pose:set_trs(1, 6, { 0, 0, 0 }) end, "joint index 6 out of range [1, 5]" },
      { function() pose:set_trs(1, 1, { 0, 0 / 0, 0 }) end, "translation[2] is not a finite float" },
      { function() pose:set_trs(1, 1, { 1, 2, 3 }, { 0, 0, 0, 0 }) end, "zero quaternion" },
      { function() pose:set_trs(1, 1, { 1, 2, 3 }, nil, { 1, math.huge, 1 }) end,
        "scale[2] is not a finite float (inf)" },
      { function() pose:set_trs(1, 1, { 1, 2 }) end, "translation must have 3 numbers" },
      { function() pose:set_trs(1, 1, "x") end, "translation must be a table" },
      { function() pose:set_trs(1.5, 1) end, "number has no integer representation" },
      { function() pose:model(1, 0) end, "joint index 0 out of range [1, 5]" },
      { function() pose:set_root(1, { 1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1 }) end, "must be affine" },
      -- the kernel's rule names the element and its value
      { function() pose:set_root(1, { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0.5, 0, 0, 0, 1 }) end,
        "m[12] is 0.5)" },
      { function() pose:set_root(1, { 1, 0, 0 }) end, "root matrix must have 16 numbers" },
      { function() core.pose(skel, 0) end, "instance count 0 out of range" },
      { function() core.pose({}, 1) end, "limber.Skeleton expected" },
      { function() pose.local_to_model(skel) end, "limber.Pose expected, got limber.Skeleton" },
    }
    for _, c in ipairs(cases) do assert.error_matches(c[1], c[2], 1, true) end
    assert.is_nil(pose:dirty(1))
    assert.equal(before, pose:model_buffer():bytes())
    local t_after = { pose:trs(1, 1) }
    for k = 1, 3 do assert.near(t_before[k], t_after[k], 0) end
  end)
end)

describe("palette", function()
  local function reference_check(layout, skin_joints, ibms)
    local skel, pose, parents, locals = random_pose_batch(30, 2, 10)
    local skin = skin_joints and limber.skin(skel, skin_joints, ibms) or nil
    local pal = limber.palette(pose, { layout = layout, skin = skin })
    pose:local_to_model()
    pal:update()
    local n, k, lay = pal:instance_count(), pal:joint_count(), pal:layout()
    assert.equal(n, #pal)
    assert.equal(10, n)
    assert.equal(layout or "mat4", lay)
    assert.equal(skin_joints and #skin_joints or 30, k)
    for i = 1, 10 do
      local models = H.reference_models(parents, locals[i])
      for s = 1, k do
        local j = skin_joints and skin_joints[s] or s
        local ibm = ibms and ibms[s] or skel:inverse_bind(j)
        local m = H.mul(models[j], ibm)
        local got = pal:get(i, s)
        if layout == "mat3x4" then
          local rows = {}
          for r = 0, 2 do for c = 0, 3 do rows[#rows + 1] = m[c * 4 + r + 1] end end
          m = rows
        end
        assert.near(m, got, 1e-4)
      end
    end
    return pal
  end

  it("mat4 layout equals model * inverse bind", function() reference_check("mat4") end)
  it("mat3x4 layout holds the first three rows", function() reference_check("mat3x4") end)
  it("uses a skin's joint subset and own inverse binds", function()
    local ibms = {}
    for s = 1, 4 do ibms[s] = H.trs({ H.rand(-1, 1), 0, 1 }, H.rand_quat(), { 1, 1, 1 }) end
    reference_check("mat4", { 30, 2, 17, 2 }, ibms)
    reference_check("mat3x4", { 30, 2, 17, 2 }, ibms)
  end)
  it("portable and SIMD palettes agree", function()
    local old = core.simd(false)
    local pal = reference_check("mat3x4")
    core.simd(true)
    local a = pal:matrix_buffer():bytes()
    pal:update()
    core.simd(old)
    local b = pal:matrix_buffer():bytes()
    assert.equal(#a, #b)
    for k = 1, #a, 4 do
      assert.near(H.unpack("<f", a, k), H.unpack("<f", b, k), 1e-4)
    end
  end)

  it("refuses a skin of another skeleton and bad ranges", function()
    local skel_a = limber.skeleton(H.rand_joints(4, 1))
    local skel_b = limber.skeleton(H.rand_joints(4, 1))
    local pose = limber.pose(skel_a, 2)
    assert.error_matches(function() limber.palette(pose, { skin = limber.skin(skel_b) }) end,
      "skin belongs to another skeleton", 1, true)
    assert.error_matches(function() limber.palette(pose, { layout = "mat2" }) end,
      "invalid option 'mat2'", 1, true)
    assert.error_matches(function() limber.skin(skel_a, { 1, 5 }) end,
      "joints[2] must be a joint index in [1, 4]", 1, true)
    assert.error_matches(function() limber.skin(skel_a, { "zz" }) end, "no joint named 'zz'", 1, true)
    assert.error_matches(function() limber.skin(skel_a, { 1 }, { { 1, 2 } }) end,
      "inverse_binds[1] must have 16 numbers", 1, true)
    local pal = limber.palette(pose)
    assert.error_matches(function() pal:update(3) end, "instance index 3 out of range [1, 2]", 1, true)
    assert.error_matches(function() pal:get(1, 5) end, "skin joint index 5 out of range [1, 4]", 1, true)
  end)
end)

describe("ownership", function()
  it("a pose, skin and palette keep their skeleton alive", function()
    local pose, pal, models
    do
      local skel = limber.skeleton(H.rand_joints(12, 1))
      pose = limber.pose(skel, 3)
      pal = limber.palette(pose, { layout = "mat3x4" })
      models = pose:model_buffer()
    end
    collectgarbage() collectgarbage()
    -- churn the allocator so freed memory would be reused
    local junk = {}
    for i = 1, 200 do junk[i] = limber.skeleton(H.rand_joints(12, 1)) end
    assert.equal(200, #junk)
    pose:local_to_model()
    pal:update()
    assert.equal(12, pose:skeleton():joint_count())
    assert.equal(36, #models)
    pose = nil -- luacheck: ignore 311
    collectgarbage() collectgarbage()
    -- the view still holds the pose, the palette too
    assert.equal(16, #models[36])
    pal:update()
    assert.equal(12, #pal:get(3, 12))
  end)

  it("runs a frame without Lua garbage", function()
    local skel = limber.skeleton(H.rand_joints(96, 1))
    local pose = limber.pose(skel, 64)
    local pal = limber.palette(pose)
    H.interpreted(finally) -- LuaJIT: compiling traces allocates trace objects on the Lua heap
    local before, after
    collectgarbage() collectgarbage("stop")
    -- warm up after the collection, from the measuring loop's stack slots: a full collection
    -- shrinks the Lua stack (5.1 to 5.3, LuaJIT), which calls then grow again
    for _ = 1, 2 do
      pose:local_to_model(true)
      pal:update()
    end
    before = collectgarbage("count")
    for _ = 1, 200 do
      pose:local_to_model(true)
      pal:update()
    end
    after = collectgarbage("count")
    collectgarbage("restart")
    assert.equal(before, after)
  end)
end)

describe("buffer", function()
  it("round-trips bytes, elements and views", function()
    local b = limber.buffer("f32", 3, { 1, 2, 3, 4.5, 5, 6 })
    assert.equal(2, #b)
    assert.same({ 4.5, 5, 6 }, b[2])
    assert.same({ 1, 2, 3 }, b:get(1))
    local s = b:bytes()
    assert.equal(24, #s)
    assert.same({ 1, 2, 3, 4.5, 5, 6, 25 }, { H.unpack("<ffffff", s) })
    assert.equal(H.pack("<fff", 4.5, 5, 6), b:bytes(2, 1))
    assert.equal("", b:bytes(3, 0))
    b:set(1, { 7, 8, 9 })
    assert.same({ 7, 8, 9 }, b[1])
    local c = limber.buffer("f32", 3, 2)
    c:set_bytes(b:bytes())
    assert.equal(b:bytes(), c:bytes())
    local p, size = b:ptr()
    assert.equal("userdata", type(p))
    assert.equal(24, size)
    local n, w, t = b:element_count(), b:width(), b:scalar_type()
    assert.equal(n, #b)
    assert.equal(2, n) assert.equal(3, w) assert.equal("f32", t)
    local u = limber.buffer("u16", 1, { 1, 65535 })
    assert.equal(65535, u[2])
    assert.equal(H.pack("<I2I2", 1, 65535), u:bytes())
  end)

  it("checks values and ranges before writing", function()
    local b = limber.buffer("f32", 3, { 1, 2, 3 })
    assert.error_matches(function() b:set(1, { 1, 0 / 0, 3 }) end, "value 2 (", 1, true)
    assert.error_matches(function() b:set(2, { 1, 2, 3 }) end, "element index 2 out of range [1, 1]", 1, true)
    assert.error_matches(function() b:bytes(1, 2) end, "count 2 out of range [0, 1]", 1, true)
    assert.error_matches(function() b:set_bytes("abc") end, "not a whole number", 1, true)
    assert.error_matches(function() b:set_bytes(H.pack("<fff", 1, 2, 3), 3) end,
      "first element 3 out of range [1, 2]", 1, true)
    assert.error_matches(function() b:set_bytes(H.pack("<ffffff", 1, 2, 3, 4, 5, 6)) end,
      "string is longer than the buffer", 1, true)
    assert.error_matches(function() b:set_bytes(H.pack("<fff", 1, 0 / 0, 1)) end, "NaN", 1, true)
    assert.same({ 1, 2, 3 }, b[1])
    local u = limber.buffer("u8", 1, 2)
    assert.error_matches(function() u:set(1, 256) end, "not an integer in [0, 255]", 1, true)
    assert.error_matches(function() limber.buffer("u8", 1, { 1.5 }) end, "not an integer", 1, true)
    local skel = limber.skeleton(H.rand_joints(2, 1))
    local pose = limber.pose(skel, 1)
    assert.error_matches(function() pose:model_buffer():set(1, H.identity()) end, "read-only", 1, true)
  end)
end)

-- Issue 13, items 3 and 13: integers across the whole 64-bit range give a
-- clear range error and no signed overflow (UBSan stops the sanitizer run on
-- one); the shared float reader names the function and argument.
describe("buffer ranges over the whole integer range", function()
  -- the integers limber takes: the whole lua_Integer range from 5.3; before, the doubles
  -- in [-2^63, 2^63), their ends 1024 apart (H.int_step)
  local ints = { H.int_min, H.int_min + H.int_step, -1, 0, 1, 2, 3, 4, 5,
                 H.int_max - H.int_step, H.int_max }

  it("bytes, set_bytes, get and [] refuse every out-of-range integer", function()
    local b = core.buffer("f32", 1, { 1, 2, 3, 4 })
    local ref = b:bytes()
    for _, first in ipairs(ints) do
      for _, count in ipairs(ints) do
        local ok, s = pcall(b.bytes, b, first, count)
        if first >= 1 and first <= 5 and count >= 0 and count <= 5 - first then
          assert.is_true(ok, s)
          assert.equal(ref:sub((first - 1) * 4 + 1, (first - 1 + count) * 4), s)
        else
          assert.is_false(ok)
          assert.truthy(s:find("out of range", 1, true), s)
        end
      end
      local ok, s = pcall(b.bytes, b, first)
      assert.equal(first >= 1 and first <= 5, ok, s)
      if ok then assert.equal(ref:sub((first - 1) * 4 + 1), s) end
      ok = pcall(b.set_bytes, b, H.pack("<f", 9), first)
      assert.equal(first >= 1 and first <= 4, ok)
      if ok then b:set_bytes(ref) end
      ok = pcall(b.get, b, first)
      assert.equal(first >= 1 and first <= 4, ok)
      assert.equal(first >= 1 and first <= 4 and first or nil, b[first])
    end
    assert.error_matches(function() b:bytes(H.int_min) end,
      "bad argument #1 to 'limber.Buffer:bytes' (first element " .. H.intstr(H.int_min) .. " out of range [1, 5])",
      1, true)
    assert.error_matches(function() b:bytes(2, H.int_max) end,
      "bad argument #2 to 'limber.Buffer:bytes' (count " .. H.intstr(H.int_max) .. " out of range [0, 3])", 1, true)
    -- just outside: 2^63 and the double below -2^63 are no integer on any Lua
    for _, v in ipairs({ 2 ^ 63, -2 ^ 63 - 2048, 2 ^ 64 }) do
      assert.error_matches(function() b:bytes(v) end,
        "bad argument #1 to 'limber.Buffer:bytes' (number has no integer representation)", 1, true)
      assert.error_matches(function() b:bytes(1, v) end,
        "bad argument #2 to 'limber.Buffer:bytes' (number has no integer representation)", 1, true)
    end
    assert.equal(ref, b:bytes())
  end)

  it("names the function when a float table is wrong", function()
    assert.error_matches(function() core.follow_filter({ 1, 2, "x" }, "full") end,
      "bad argument #1 to 'limber.core.follow_filter' (matrix[3] must be a number (got string))", 1, true)
    local m = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1 }
    m[7] = 0 / 0
    assert.error_matches(function() core.follow_filter(m, "full") end,
      "bad argument #1 to 'limber.core.follow_filter' (matrix[7] is not a finite float", 1, true)
    -- read raw: an __index answer does not count
    local proxy = setmetatable({}, { __index = function() return 1 end, __len = function() return 16 end })
    assert.error_matches(function() core.follow_filter(proxy, "full") end,
      "matrix[1] must be a number (got nil)", 1, true)
  end)
end)
