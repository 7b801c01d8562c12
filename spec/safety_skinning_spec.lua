-- Skinning outputs that alias (issue 13, item 7) and the argument errors of
-- limber.skinning (item 13). A target whose streams share bytes, or a
-- batch whose jobs write the same bytes through two targets, must be
-- refused (bytes compared, not objects), while interleaved layouts whose
-- attributes do not overlap keep working and give the same numbers as
-- separate streams.
local H = require "spec.helper"
local limber = require "limber"
local core = limber.core
local sk = require "limber.skinning"

H.seed("safety_skinning")

local J, V = 6, 37

local function palette(n)
  local pose = H.rand_pose(limber.skeleton(H.rand_joints(J, 1)), n)
  pose:local_to_model()
  local pal = limber.palette(pose)
  pal:update()
  return pal
end

local function mesh()
  local pos, nrm, jnt, wgt = {}, {}, {}, {}
  for _ = 1, V do
    for _ = 1, 3 do pos[#pos + 1] = H.rand(-2, 2) end
    nrm[#nrm + 1], nrm[#nrm + 2], nrm[#nrm + 3] = H.rand(0.1, 1), H.rand(-1, 1), H.rand(-1, 1)
    for q = 1, 4 do
      jnt[#jnt + 1] = math.random(0, J - 1)
      wgt[#wgt + 1] = q == 1 and 1 or H.rand(0, 1)
    end
  end
  return sk.mesh {
    positions = core.buffer("f32", 3, pos), normals = core.buffer("f32", 3, nrm),
    gpu_joints = core.buffer("u16", 4, jnt), weights = core.buffer("f32", 4, wgt),
  }
end

-- vertex v (1-based, of all instances) of an interleaved f32 buffer: floats at a byte offset
local function attr(buf, stride, off, v)
  assert(buf:width() == stride / 4)
  local e = buf:get(v)
  local o = off / 4
  return { e[o + 1], e[o + 2], e[o + 3] }
end

local function flat(buf, v)
  return buf:get(v)
end

describe("skinning targets that alias", function()
  local m, pal
  setup(function()
    m = mesh()
    pal = palette(2)
  end)

  it("refuses positions and normals in the same Buffer", function()
    local b = core.buffer("f32", 3, 2 * V)
    assert.error_matches(function() sk.target { mesh = m, instances = 2, positions = b, normals = b } end,
      "positions and normals write the same bytes", 1, true)
    local b4 = core.buffer("f32", 4, 2 * V)
    assert.error_matches(function() sk.target { mesh = m, instances = 2, normals = b4, tangents = b4 } end,
      "normals and tangents write the same bytes", 1, true)
    assert.error_matches(function() sk.target { mesh = m, instances = 2, positions = b4, tangents = b4 } end,
      "positions and tangents write the same bytes", 1, true)
  end)

  it("keeps interleaved layouts whose attributes do not overlap, with the same results", function()
    local sep = sk.target { mesh = m, instances = 2, positions = true, normals = true }
    sk.run(m, pal, sep)
    -- stride 24: position at 0, normal at 12; and stride 32 with a gap, normal first
    for _, lay in ipairs({ { 24, 0, 12 }, { 32, 16, 0 }, { 28, 0, 16 } }) do
      local stride, po, no = lay[1], lay[2], lay[3]
      local buf = core.buffer("f32", stride / 4, 2 * V)
      local tg = sk.target { mesh = m, instances = 2, buffer = buf, stride = stride, position = po, normal = no }
      sk.run(m, pal, tg)
      for v = 1, 2 * V do
        assert.are.same(flat(sep:position_buffer(), v), attr(buf, stride, po, v))
        assert.are.same(flat(sep:normal_buffer(), v), attr(buf, stride, no, v))
      end
    end
    -- one vertex, one instance: still no overlap
    assert.has_no.errors(function()
      sk.target { vertices = 1, buffer = core.buffer("f32", 6, 1), stride = 24, position = 0, normal = 12 }
    end)
  end)

  it("refuses a batch whose jobs write the same bytes through two targets", function()
    local buf = core.buffer("f32", 6, 2 * V)
    local a = sk.target { mesh = m, instances = 2, buffer = buf, stride = 24, position = 0 }
    local b = sk.target { mesh = m, instances = 2, buffer = buf, stride = 24, normal = 0 }
    assert.error_matches(function()
      sk.batch { { mesh = m, palette = pal, target = a }, { mesh = m, palette = pal, target = b } }
    end, "jobs 1 and 2 write the same bytes", 1, true)
    -- partial overlap: normal at 8 meets position's bytes 8..12
    local c = sk.target { mesh = m, instances = 2, buffer = buf, stride = 24, normal = 8 }
    assert.error_matches(function()
      sk.batch { { mesh = m, palette = pal, target = a }, { mesh = m, palette = pal, target = c } }
    end, "write the same bytes", 1, true)
    -- separate streams: two targets on one positions Buffer, disjoint slots of each target
    local p = core.buffer("f32", 3, 2 * V)
    local t1 = sk.target { mesh = m, instances = 2, positions = p }
    local t2 = sk.target { mesh = m, instances = 2, positions = p }
    assert.error_matches(function()
      sk.batch { { mesh = m, palette = pal, target = t1, first = 1, count = 1 },
                 { mesh = m, palette = pal, target = t2, first = 2, count = 1, slot = 1 } }
    end, "jobs 1 and 2 write the same bytes", 1, true)
    -- other strides on the same bytes: refused too
    local d = sk.target { mesh = m, instances = 1, buffer = buf, stride = 12, position = 0 }
    assert.error_matches(function()
      sk.batch { { mesh = m, palette = pal, target = a, count = 1 },
                 { mesh = m, palette = pal, target = d, count = 1 } }
    end, "write the same bytes", 1, true)
  end)

  it("runs a batch whose targets share a Buffer without sharing bytes, as the targets alone", function()
    local buf = core.buffer("f32", 6, 2 * V)
    local a = sk.target { mesh = m, instances = 2, buffer = buf, stride = 24, position = 0 }
    local b = sk.target { mesh = m, instances = 2, buffer = buf, stride = 24, normal = 12 }
    local p = core.buffer("f32", 3, 2 * V)
    local t1 = sk.target { mesh = m, instances = 1, positions = p }
    local batch = sk.batch { { mesh = m, palette = pal, target = a }, { mesh = m, palette = pal, target = b },
                             { mesh = m, palette = pal, target = t1, first = 2, count = 1, slot = 1 } }
    batch:run()
    local ref = sk.target { mesh = m, instances = 2, positions = true, normals = true }
    sk.run(m, pal, ref)
    for v = 1, 2 * V do
      assert.are.same(flat(ref:position_buffer(), v), attr(buf, 24, 0, v))
      assert.are.same(flat(ref:normal_buffer(), v), attr(buf, 24, 12, v))
    end
    for v = 1, V do assert.are.same(flat(ref:position_buffer(), V + v), p:get(v)) end
  end)
end)

describe("limber.skinning argument errors", function()
  local m, pal, tg
  setup(function()
    m = mesh()
    pal = palette(1)
    tg = sk.target { mesh = m, positions = true }
  end)

  local function fails(f, pattern)
    local ok, err = pcall(f)
    assert.is_false(ok, pattern)
    assert.equal("string", type(err))
    assert.falsy(err:find("attempt to", 1, true), err)
    assert.truthy(err:find(pattern, 1, true), err)
  end

  it("name the public function and the argument", function()
    for _, bad in ipairs({ 4.5, "x", true }) do
      local t = type(bad)
      fails(function() sk.mesh(bad) end, "bad argument #1 to 'limber.skinning.mesh' (table expected, got " .. t .. ")")
      fails(function() sk.target(bad) end,
        "bad argument #1 to 'limber.skinning.target' (table expected, got " .. t .. ")")
      fails(function() sk.batch(bad) end,
        "bad argument #1 to 'limber.skinning.batch' (table expected, got " .. t .. ")")
      fails(function() sk.threads(bad) end, "bad argument #1 to 'limber.skinning.threads' (integer expected")
      fails(function() sk.run(bad, pal, tg) end, "bad argument #1 to 'limber.skinning.run' (limber.SkinMesh expected")
      fails(function() sk.run(m, bad, tg) end, "bad argument #2 to 'limber.skinning.run' (limber.Palette expected")
      fails(function() sk.run(m, pal, bad) end, "bad argument #3 to 'limber.skinning.run' (limber.SkinTarget expected")
    end
    fails(function() sk.mesh() end, "bad argument #1 to 'limber.skinning.mesh' (table expected, got nil)")
    fails(function() sk.run(pal, pal, tg) end, "(limber.SkinMesh expected, got limber.Palette)")
    fails(function() sk.threads(1.5) end, "bad argument #1 to 'limber.skinning.threads' (integer expected")
    fails(function() sk.threads(H.int_min) end, "bad argument #1 to 'limber.skinning.threads' (thread count")
    fails(function() sk.batch({}) end, "bad argument #1 to 'limber.skinning.batch' (job count 0")
  end)

  it("blame the caller's line", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() sk.run(m, nil, tg) end)
    assert.is_false(ok)
    assert.truthy(err:find("safety_skinning_spec.lua:" .. line .. ":", 1, true), err)
    ok, err = pcall(function() sk.mesh({ positions = { 1, 2 } }) end)
    assert.is_false(ok)
    assert.truthy(err:find("safety_skinning_spec.lua:" .. (line + 3) .. ": limber.skinning.mesh", 1, true), err)
  end)
end)
