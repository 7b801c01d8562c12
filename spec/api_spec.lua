-- The 1.0 API rules of CHANGES.md, checked on the objects themselves: counts,
-- out tables, nil for none, ranges, looping by default, option tables.
local H = require "spec.helper"
local limber = require "limber"
local anim = require "limber.anim"
local sk = require "limber.skinning"

local function objects()
  local skel = limber.skeleton(H.rand_joints(7, 2))
  local pose = limber.pose(skel, 5)
  local skin = limber.skin(skel, { 1, 3, 5 })
  local pal = limber.palette(pose, { skin = skin })
  local clip = anim.clip({ tracks = {
    { joint = 2, path = "translation", times = { 0, 1, 2 }, values = { 0, 0, 0, 1, 2, 3, 4, 5, 6 } },
    { joint = 3, path = "rotation", times = { 0, 2 }, values = { 0, 0, 0, 1, 0, 0, 1, 0 } },
  } }, skel)
  local sampler = anim.sampler(pose, { clip })
  local blender = anim.blender(limber.pose(skel, 5), { { pose = pose } })
  local mesh = sk.mesh { positions = { 0, 0, 0, 1, 0, 0, 0, 1, 0 }, joints = { 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0 },
    weights = { 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0 }, indices = { 1, 2, 3 } }
  local target = sk.target { mesh = mesh, instances = 5, positions = true }
  local batch = sk.batch { { mesh = mesh, palette = pal, target = target } }
  local buf = limber.buffer("f32", 3, 4)
  return { skel = skel, pose = pose, skin = skin, pal = pal, clip = clip, sampler = sampler,
           blender = blender, mesh = mesh, target = target, batch = batch, buf = buf }
end

describe("API rules", function()
  H.seed("api")

  it("every count has a named method, and # gives the primary one", function()
    local o = objects()
    local cases = {
      { o.skel, "joint_count", 7 }, { o.pose, "instance_count", 5 }, { o.skin, "joint_count", 3 },
      { o.pal, "instance_count", 5 }, { o.clip, "track_count", 2 }, { o.sampler, "instance_count", 5 },
      { o.blender, "instance_count", 5 }, { o.mesh, "vertex_count", 3 }, { o.target, "instance_count", 5 },
      { o.batch, "job_count", 1 }, { o.buf, "element_count", 4 },
    }
    for _, c in ipairs(cases) do
      local obj, method, n = c[1], c[2], c[3]
      assert.equal(n, obj[method](obj), tostring(obj) .. ":" .. method)
      assert.equal(n, #obj, tostring(obj))
    end
    assert.equal(7, o.pose:joint_count())
    assert.equal(3, o.pal:joint_count())
    assert.equal("mat4", o.pal:layout())
    assert.equal(1, o.sampler:clip_count())
    assert.equal(1, o.blender:layer_count())
    assert.equal(3, o.mesh:index_count())
    assert.is_false(o.mesh:has_normals())
    assert.same({ 3, 0, 0, 0 }, o.mesh:influence_counts())
    assert.equal(3, o.target:vertex_count())
    assert.equal("sorted", o.target:order())
    assert.equal("separate", o.target:layout())
    assert.equal(3, o.buf:width())
    assert.equal("f32", o.buf:scalar_type())
    assert.equal(2, o.clip:joint_span() - 1)
  end)

  it("every class has a __tostring that names it", function()
    for _, obj in pairs(objects()) do
      local name = getmetatable(obj).__name
      assert.is_string(name)
      assert.equal(name, tostring(obj):match("^(limber%.%a+)%("), tostring(obj))
    end
  end)

  it("matrices come back in the caller's out table when one is given", function()
    local o = objects()
    for i = 1, 5 do
      for j = 1, 7 do o.pose:set_trs(i, j, H.rand_trs(true)) end
    end
    o.pose:local_to_model()
    o.pal:update()
    local out = { "stale" }
    for _, c in ipairs {
      { function(t) return o.pose:model(3, 4, t) end, 16 },
      { function(t) return o.pal:get(2, 3, t) end, 16 },
      { function(t) return o.skel:inverse_bind(2, t) end, 16 },
      { function(t) return o.skin:inverse_bind(3, t) end, 16 },
    } do
      local fresh = c[1]()
      local filled = c[1](out)
      assert.equal(out, filled)
      assert.equal(c[2], #fresh)
      assert.same(fresh, { H.tunpack(filled, 1, c[2]) })
    end
    assert.error_matches(function() o.pose:model(1, 1, "out") end, "table expected, got string", 1, true)
  end)

  it("none is nil: dirty, sampler clips, missing tracks and buffers", function()
    local o = objects()
    o.pose:local_to_model()
    assert.equal(1, select("#", o.pose:dirty(1)))
    assert.is_nil(o.pose:dirty(1))
    o.pose:set_trs(1, 4, { 1, 2, 3 })
    assert.equal(4, o.pose:dirty(1))
    assert.is_nil((o.sampler:get(2)))
    o.sampler:set(2, 1, 0.5)
    assert.equal(1, (o.sampler:get(2)))
    o.sampler:set(2, nil, 0)
    assert.is_nil((o.sampler:get(2)))
    assert.error_matches(function() o.sampler:set(2, 0, 0) end, "clip index 0 out of range [1, 1]", 1, true)
    assert.equal(1, select("#", o.clip:sample_joint(1, "scale", 0)))
    assert.is_nil(o.target:normal_buffer())
    assert.is_nil(sk.mesh({ positions = { 0, 0, 0 }, joints = { 1, 0, 0, 0 }, weights = { 1, 0, 0, 0 } })
      :gpu_index_buffer())
  end)

  it("sampler:run(first) samples to the end of the range, as palette:update(first) does", function()
    local o = objects()
    local a = limber.pose(o.skel, 5)
    local sa = anim.sampler(a, { o.clip })
    for i = 1, 5 do
      o.sampler:set(i, 1, 0.3 * i)
      sa:set(i, 1, 0.3 * i)
    end
    sa:run()
    o.sampler:run(3)
    for i = 1, 5 do
      for j = 1, 7 do
        local t1, r1 = o.pose:trs(i, j)
        local t2, r2 = a:trs(i, j)
        if i >= 3 then
          assert.same({ t2, r2 }, { t1, r1 })
        end
      end
    end
    -- an instance before first is untouched: still the rest pose of joint 2
    assert.same({ o.skel:rest_trs(2) }, { o.pose:trs(1, 2) })
    o.sampler:run(1, 1)
    assert.same({ a:trs(1, 2) }, { o.pose:trs(1, 2) })
  end)

  it("clip:sample_joint loops by default like the sampler, in double time", function()
    local o = objects()
    for _, t in ipairs { 0.5, 2.5, 7.25, -1.5, 3600.0166666, 86400 * 3 + 1 / 3 } do
      o.sampler:set(1, 1, t)
      o.sampler:run(1, 1)
      local st = o.pose:trs(1, 2)
      local x, y, z = o.clip:sample_joint(2, "translation", t)
      assert.near(st, { x, y, z }, 1e-5)
      -- the wrap in double: the value at t equals the value at t mod 2
      local w = t - 2 * math.floor(t / 2)
      assert.near({ o.clip:sample_joint(2, "translation", w, false) }, { x, y, z }, 1e-4)
    end
    -- loop = false clamps
    assert.same({ 4, 5, 6 }, { o.clip:sample_joint(2, "translation", 100, false) })
  end)

  it("options tables only: a positional option or an unknown option is an error", function()
    local o = objects()
    assert.error_matches(function() limber.palette(o.pose, "mat3x4") end,
      "bad argument #2 to 'limber.palette' (table expected, got string)", 1, true)
    assert.error_matches(function() limber.palette(o.pose, { layuot = "mat3x4" }) end,
      "unknown option 'layuot'", 1, true)
    assert.equal("mat3x4", limber.palette(o.pose, { layout = "mat3x4" }):layout())
  end)
end)
