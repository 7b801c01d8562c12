-- Safety of the scene, pose and palette bindings (issue 13): hierarchies
-- that grew own their anchors, 64-bit integers at every edge, argument
-- errors in the standard form, changes that an allocation failure cannot
-- leave half done, and skeleton scratch memory seen by the Lua allocator.
-- The out-of-memory injection over a whole workload is spec/oom_spec.lua.
local H = require "spec.helper"
local limber = require "limber"
local scene = require "limber.scene"
local core = limber.core

-- the ends of the integer range, the first numbers beyond them, 2^53 and
-- past it, 2.5 (H.int_edges: on every Lua, integers from 5.3 on, doubles before)
local EDGES = H.int_edges
local H_IDENTITY = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1 }

-- a slot owner that only the scene keeps alive
local function one_slot(x)
  return core.slots({ "s" }, { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, x, 0, 0, 1 })
end

local function full_gc()
  collectgarbage()
  collectgarbage()
end

describe("Scene growth", function()
  -- The scene the user holds stays the same object; its storage is
  -- replaced by a larger copy. The slot owners are anchored once, by the
  -- Scene, so no copy can release what another still reads.
  it("keeps the object, its nodes and the owners they read", function()
    local sc = scene.new({ capacity = 1 })
    local ids = {}
    for k = 1, 9 do
      local parent = sc:create({ slots = scene.slots({ s = { translation = { k, 0, 0 } } }) })
      ids[k] = sc:create({ parent = parent, slot = "s" })
      full_gc()
    end
    for _ = 1, 50 do one_slot(-1) end -- new garbage would reuse freed memory
    sc:update()
    for k = 1, 9 do assert.are.same(k, sc:world(ids[k])[13]) end
    assert.equal(18, #sc)
    assert.equal(32, sc:stats().capacity)
  end)

  it("leaves a world_buffer view taken before growth readable (the old storage)", function()
    local sc = scene.new({ capacity = 2 })
    local a = sc:create({ translation = { 3, 0, 0 } })
    sc:update()
    sc:refresh(a) -- a leaf: computed when read
    local view = sc:world_buffer()
    for _ = 1, 10 do sc:create() end -- grows twice
    full_gc()
    for _ = 1, 50 do one_slot(-1) end
    assert.are.same(3, view:get(a + 1)[13]) -- what it showed before the growth
    assert.equal(3, #view)
    assert.are.same(3, sc:world_buffer():get(a + 1)[13])
  end)
end)

describe("64-bit integers", function()
  local skel = limber.skeleton({ {}, { parent = 1 } })
  local pose = limber.pose(skel, 3)
  local pal = limber.palette(pose)

  it("palette:update refuses first/count outside the instances, over the whole range", function()
    -- before: 2, maxinteger overflowed (UBSan) and a release build accepted it
    local bad = { { 2, -1 }, { 0, 1 }, { 4, 0 }, { 3, 2 } }
    for _, e in ipairs(EDGES) do
      bad[#bad + 1], bad[#bad + 2], bad[#bad + 3], bad[#bad + 4] = { 2, e }, { 1, e }, { e, 1 }, { e, nil }
    end
    for _, c in ipairs(bad) do
      local ok, err = pcall(function() pal:update(c[1], c[2]) end)
      assert.is_false(ok, ("update(%s, %s) accepted"):format(tostring(c[1]), tostring(c[2])))
      -- integers out of range, and numbers with no integer value (2^63, 2.5) on every Lua
      local ints = H.is_int(c[1]) and (c[2] == nil or H.is_int(c[2]))
      assert.matches("bad argument #%d to 'limber.Palette:update' %("
        .. (ints and ".*out of range" or "number has no integer representation"), err)
    end
    for _, c in ipairs({ { 1, 3 }, { 2, 2 }, { 3, 1 }, { 3, 0 }, { 2, nil }, { nil, nil } }) do
      assert.has_no.errors(function() pal:update(c[1], c[2]) end)
    end
  end)

  it("palette:update writes exactly the instances asked for", function()
    local p2 = limber.pose(skel, 3)
    local q = limber.palette(p2)
    for i = 1, 3 do p2:set_trs(i, 1, { i, 0, 0 }) end
    p2:local_to_model()
    q:update(2, 1)
    assert.are.same(0, q:get(1, 1)[13])
    assert.are.same(2, q:get(2, 1)[13])
    assert.are.same(0, q:get(3, 1)[13])
  end)

  it("gather refuses first/count outside the buffer, over the whole range", function()
    local sc = scene.new({ capacity = 4 })
    local a = sc:create({ translation = { 1, 2, 3 } })
    local b = sc:create({ translation = { 4, 5, 6 } })
    sc:update()
    local buf = limber.buffer("f32", 16, 2)
    local firsts, counts = { H.int_max - 1, 0, -1, 3, 2 }, { -1, 5 }
    for _, e in ipairs(EDGES) do firsts[#firsts + 1], counts[#counts + 1] = e, e end
    for _, first in ipairs(firsts) do
      local ok, err = pcall(function() sc:gather({ a, b }, 2, buf, first) end)
      assert.is_false(ok, "first " .. first .. " accepted")
      -- gather takes integers only (from 5.3 on, of the integer subtype: 2^53 as a float is refused)
      local int = H.math_type(first) == "integer"
      assert.matches("bad argument #4 to 'limber.Scene:gather' %("
        .. (int and ".*do not fit" or "integer first expected, got number"), err)
    end
    for _, count in ipairs(counts) do
      local ok, err = pcall(function() sc:gather({ a, b }, count, buf, 1) end)
      assert.is_false(ok, "count " .. count .. " accepted")
      assert.matches("bad argument #2 to 'limber.Scene:gather'", err)
    end
    sc:gather({ b }, 1, buf, 2)
    assert.are.same({ 4, 5, 6 }, { buf:get(2)[13], buf:get(2)[14], buf:get(2)[15] })
    sc:gather({ a, b }, 2, buf)
    assert.are.same(1, buf:get(1)[13])
  end)

  it("integer ids and indices at the extremes raise clean errors", function()
    local sc = scene.new({ capacity = 2 })
    local id = sc:create()
    for _, v in ipairs({ 0, -1, H.tunpack(EDGES) }) do
      assert.is_false(pcall(sc.world, sc, v))
      assert.is_false(pcall(sc.set_translation, sc, v, 0, 0, 0))
      assert.is_false(pcall(sc.destroy, sc, v))
      assert.is_false(pcall(sc.create, sc, { parent = v }))
      assert.is_false(pcall(sc.set_parent, sc, id, v))
      assert.is_false(pcall(sc.create, sc, { pose = pose, instance = v }))
      assert.is_false(pcall(pose.model, pose, v, 1))
      assert.is_false(pcall(pal.get, pal, 1, v))
      assert.is_false(pcall(limber.pose, skel, v))
      assert.is_false(pcall(core.scene, v))
      assert.is_false(pcall(scene.new, { capacity = v }))
    end
    assert.is_true(sc:exists(id))
  end)
end)

describe("argument errors", function()
  local function expect(fn, pattern)
    local ok, err = pcall(fn)
    assert.is_false(ok)
    assert.is_string(err)
    assert.falsy(err:find("attempt to", 1, true), err)
    assert.matches(pattern, err)
  end

  it("Scene methods called on something else name the method and the type", function()
    local sc = scene.new()
    local S = getmetatable(sc).__index
    for name in pairs(S) do
      for _, bad in ipairs({ 5, "x", {}, true, core.slots({ "s" }, H_IDENTITY) }) do
        expect(function() S[name](bad, 1) end,
          "bad argument #1 to 'limber.Scene:" .. name .. "' %(limber.Scene expected, got ")
      end
    end
    expect(function() sc.create(nil) end,
      "bad argument #1 to 'limber.Scene:create' %(limber.Scene expected, got nil%)")
    expect(function() scene.new(5) end, "bad argument #1 to 'limber.scene.new' %(table expected, got number%)")
    expect(function() scene.new({ capasity = 5 }) end, "unknown option string capasity")
    expect(function() scene.slots(5) end, "limber.scene.slots:")
    expect(function() scene.prefab(5) end, "limber.scene.prefab:")
    expect(function() sc:create(5) end,
      "bad argument #1 to 'limber.Scene:create' %(opts must be a table or nil %(got number%)%)")
    expect(function() sc:create({ translation = 5 }) end, "translation must be a table")
    expect(function() sc:create({ slots = 5 }) end, "slots must be a limber.Slots")
    expect(function() sc:create({ pose = {} }) end, "pose must be a limber.Pose")
    sc:create()
    expect(function() sc:world(1, 5) end, "bad argument #2 to 'limber.Scene:world' %(out must be a table")
    expect(function() sc:slot_world("x") end, "node must be an integer node id")
  end)

  it("limber.* facade functions refuse wrong types in the standard form", function()
    local skel = limber.skeleton({ {} })
    expect(function() limber.skeleton(5) end,
      "bad argument #1 to 'limber%.skeleton' %(table of joints expected, got number%)")
    expect(function() limber.skeleton({ joints = 5 }) end, "limber.skeleton: joints must be a table")
    expect(function() limber.skeleton({ 5 }) end, "limber.skeleton: joint 1 is not a table")
    expect(function() limber.pose(5) end, "bad argument #1 to 'limber%.pose' %(limber.Skeleton expected, got number%)")
    expect(function() limber.pose(limber.pose(skel)) end,
      "bad argument #1 to 'limber%.pose' %(limber.Skeleton expected, got limber.Pose%)")
    expect(function() limber.pose(skel, {}) end, "bad argument #2 to 'limber%.pose' %(integer expected, got table%)")
    expect(function() limber.skin(nil, { "a" }) end,
      "bad argument #1 to 'limber%.skin' %(limber.Skeleton expected, got nil%)")
    expect(function() limber.skin({}, { "a" }) end,
      "bad argument #1 to 'limber%.skin' %(limber.Skeleton expected, got table%)")
    expect(function() limber.skin(skel, nil, { 5 }) end, "inverse binds have 1 numbers")
    expect(function() limber.skin(skel, nil, { {}, 5 }) end, "limber.skin: inverse_binds%[1%] must have 16")
    expect(function() limber.palette(5) end,
      "bad argument #1 to 'limber%.palette' %(limber.Pose expected, got number%)")
    local pose = limber.pose(skel)
    expect(function() limber.palette(pose, 5) end,
      "bad argument #2 to 'limber%.palette' %(table expected, got number%)")
    expect(function() limber.palette(pose, { skin = 5 }) end, "bad argument #2 to 'limber%.palette'")
    expect(function() limber.palette(pose, { layout = {} }) end, "bad argument #2 to 'limber%.palette'")
    -- a layout given positionally, or a misspelt option, is an error, not a silent mat4
    expect(function() limber.palette(pose, "mat3x4") end, "bad argument #2 to 'limber%.palette' %(table expected")
    expect(function() limber.palette(pose, { layuot = "mat3x4" }) end, "unknown option 'layuot'")
    assert.equal("mat3x4", limber.palette(pose, { layout = "mat3x4" }):layout())
  end)
end)

describe("changes that allocate", function()
  it("destroy returns every destroyed id and recycles them all", function()
    local seed = os.time()
    print("[seed safety_scene: " .. seed .. "]")
    math.randomseed(seed)
    local sc = scene.new({ capacity = 4 })
    local ids = {}
    for _ = 1, 200 do
      local p = #ids > 0 and math.random() < 0.8 and ids[math.random(#ids)] or nil
      if p and not sc:exists(p) then p = nil end
      ids[#ids + 1] = sc:create({ parent = p })
    end
    -- reference: count descendants by walking parents in plain Lua
    for _ = 1, 40 do
      local id = ids[math.random(#ids)]
      if sc:exists(id) then
        local n = 0
        for _, x in ipairs(ids) do
          local q = x
          while q and sc:exists(x) do
            if q == id then n = n + 1 break end
            q = (sc:parent(q))
          end
        end
        local before = sc:node_count()
        assert.are.same(n, sc:destroy(id))
        assert.are.same(before - n, sc:node_count())
      end
    end
    sc:update()
    -- every destroyed id comes back, first in first out, before new ones
    local dead = 200 - sc:node_count()
    local seen = {}
    for _ = 1, dead do
      local id = sc:create()
      assert.is_true(id <= 200 and not seen[id])
      seen[id] = true
    end
    assert.are.same(201, sc:create())
  end)

  it("followers stay consistent through creates and destroys", function()
    local skel = limber.skeleton({ { name = "a" }, { name = "b", parent = "a", translation = { 0, 1, 0 } } })
    local pose = limber.pose(skel, 2)
    local sc = scene.new({ capacity = 1 })
    local holder = sc:create({ pose = pose, instance = 2 })
    local f = {}
    for k = 1, 20 do f[k] = sc:create({ parent = holder, slot = k % 2 == 0 and "a" or "b" }) end
    for k = 1, 20, 3 do
      sc:destroy(f[k])
      f[k] = false
    end
    for k = 21, 24 do f[k] = sc:create({ parent = holder, slot = "b" }) end -- recycled ids
    sc:update()
    pose:set_trs(2, 2, { 0, 3, 0 })
    pose:local_to_model()
    sc:update()
    -- exactly the live followers moved, each with this frame's joint
    local want, live = {}, 0
    for k = 1, 24 do
      if f[k] then
        live = live + 1
        want[#want + 1] = f[k]
        local y = (k <= 20 and k % 2 == 0) and 0 or 3
        assert.are.same(y, sc:world(f[k])[14])
      end
    end
    local list, n = sc:changed()
    local got = { H.tunpack(list, 1, n) }
    table.sort(got)
    table.sort(want)
    assert.are.same(want, got)
    assert.equal(live + 1, #sc)
  end)
end)

describe("skeleton ordering scratch", function()
  -- The depth-first reordering's work space is a userdata now (it was C
  -- malloc, invisible to the Lua allocator and to a host's memory limit).
  -- Counted with the Lua allocator: building an unordered skeleton takes at
  -- least 3 * J * 4 more bytes than building the same ordered one.
  it("comes from the Lua allocator", function()
    local J = 20000
    local ordered, reversed = {}, {}
    for i = 1, J do
      ordered[i] = i - 1         -- chain: parent before child
      reversed[i] = i < J and i + 1 or 0 -- the same chain listed child first
    end
    local function cost(parents)
      collectgarbage()
      collectgarbage("stop")
      local before = collectgarbage("count")
      core.skeleton(parents)
      local after = collectgarbage("count")
      collectgarbage("restart")
      return (after - before) * 1024
    end
    local extra = cost(reversed) - cost(ordered)
    assert.is_true(extra >= 0.9 * 3 * J * 4, ("only %d more bytes"):format(extra))
  end)
end)
