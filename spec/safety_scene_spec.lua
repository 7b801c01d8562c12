-- Safety of the scene, pose and palette bindings (issue 13): hierarchies
-- that grew own their anchors, 64-bit integers at every edge, argument
-- errors in the standard form, changes that an allocation failure cannot
-- leave half done, and skeleton scratch memory seen by the Lua allocator.
-- The out-of-memory injection over a whole workload is spec/oom_spec.lua.
local limber = require "limber"
local scene = require "limber.scene"
local core = limber.core

local MAXI, MINI = math.maxinteger, math.mininteger

-- a slot owner that only the hierarchy keeps alive
local function one_slot(x)
  return core.slots({ "s" }, { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, x, 0, 0, 1 })
end

local function full_gc()
  collectgarbage()
  collectgarbage()
end

describe("Hierarchy:grow", function()
  -- Before: old and new hierarchies shared one anchor table, so a destroy
  -- or an owner-less link on one released the owner the other still read
  -- (heap-use-after-free under ASan, garbage matrices without it).
  it("keeps the owners the old hierarchy reads when the new one drops them", function()
    local h = core.hierarchy(2)
    h:create(1)
    h:create(2)
    h:link(2, 1, "full", one_slot(7), 1)
    full_gc()
    local g = h:grow(4)
    g:destroy(2)             -- the new one releases its anchor of node 2
    full_gc()                -- the Slots object must survive: h still reads it
    for _ = 1, 50 do one_slot(-1) end -- new garbage would reuse its memory
    h:touch(2)
    h:update()
    assert.are.same(7, h:world(2)[13])
  end)

  it("keeps the owners the new hierarchy reads when the old one drops them", function()
    local h = core.hierarchy(2)
    h:create(1)
    h:create(2)
    h:link(2, 1, "full", one_slot(5), 1)
    full_gc()
    local g = h:grow(4)
    h:link(2, 1, "full")     -- no owner on the old one
    full_gc()
    for _ = 1, 50 do one_slot(-1) end
    g:touch(2)
    g:update()
    assert.are.same(5, g:world(2)[13])
  end)

  it("through limber.scene: nodes on slots keep their matrices across growth", function()
    local sc = scene.new({ capacity = 1 })
    local ids = {}
    for k = 1, 9 do
      local parent = sc:create({ slots = scene.slots({ s = { translation = { k, 0, 0 } } }) })
      ids[k] = sc:create({ parent = parent, slot = "s" })
      full_gc()
    end
    sc:update()
    for k = 1, 9 do assert.are.same(k, sc:world(ids[k])[13]) end
  end)
end)

describe("64-bit integers", function()
  local skel = limber.skeleton({ {}, { parent = 1 } })
  local pose = limber.pose(skel, 3)
  local pal = limber.palette(pose)

  it("palette:update refuses first/count outside the instances, over the whole range", function()
    -- before: 2, maxinteger overflowed (UBSan) and a release build accepted it
    local bad = { { 2, MAXI }, { 1, MAXI }, { MAXI, 1 }, { MINI, 1 }, { 1, MINI }, { 2, -1 },
      { 0, 1 }, { 4, 0 }, { MAXI, nil }, { MINI, nil }, { 3, 2 } }
    for _, c in ipairs(bad) do
      local ok, err = pcall(function() pal:update(c[1], c[2]) end)
      assert.is_false(ok, ("update(%s, %s) accepted"):format(c[1], c[2]))
      assert.matches("bad argument #%d to 'update' %(.*out of range", err)
    end
    for _, c in ipairs({ { 1, 3 }, { 2, 2 }, { 3, 1 }, { 3, 0 }, { 2, nil }, { nil, nil } }) do
      assert.has_no.errors(function() pal:update(c[1], c[2]) end)
    end
  end)

  it("palette:update writes exactly the instances asked for", function()
    local p2 = limber.pose(skel, 3)
    local q = limber.palette(p2)
    for i = 1, 3 do p2:set_local(i, 1, { i, 0, 0 }) end
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
    for _, first in ipairs({ MAXI, MAXI - 1, MINI, 0, -1, 3, 2 }) do
      local ok, err = pcall(function() sc:gather({ a, b }, 2, buf, first) end)
      assert.is_false(ok, "first " .. first .. " accepted")
      assert.matches("bad argument #4 to 'gather' %(.*do not fit", err)
    end
    for _, count in ipairs({ MAXI, MINI, -1, 5 }) do
      local ok, err = pcall(function() sc:gather({ a, b }, count, buf, 1) end)
      assert.is_false(ok, "count " .. count .. " accepted")
      assert.matches("bad argument #2 to 'gather'", err)
    end
    sc:gather({ b }, 1, buf, 2)
    assert.are.same({ 4, 5, 6 }, { buf:get(2)[13], buf:get(2)[14], buf:get(2)[15] })
    sc:gather({ a, b }, 2, buf)
    assert.are.same(1, buf:get(1)[13])
  end)

  it("Hierarchy:update refuses a follower count outside [0, capacity]", function()
    local h = core.hierarchy(2)
    h:create(1)
    for _, n in ipairs({ MAXI, MINI, -1, 3 }) do
      local ok, err = pcall(function() h:update({ 1, 1, 1 }, n) end)
      assert.is_false(ok)
      assert.matches("bad argument #2 to 'update' %(follower count", err)
    end
    assert.are.same(0, h:update({ 1 }, 1))
  end)

  it("integer ids and indices at the extremes raise clean errors", function()
    local sc = scene.new({ capacity = 2 })
    local id = sc:create()
    local h = core.hierarchy(2)
    for _, v in ipairs({ MAXI, MINI, 0, -1 }) do
      assert.is_false(pcall(sc.world, sc, v))
      assert.is_false(pcall(sc.set_translation, sc, v, 0, 0, 0))
      assert.is_false(pcall(sc.destroy, sc, v))
      assert.is_false(pcall(sc.create, sc, { parent = v == 0 and -1 or v }))
      assert.is_false(pcall(h.create, h, v))
      assert.is_false(pcall(h.compute, h, v, 1))
      assert.is_false(pcall(h.compute, h, 1, v == 0 and -1 or v))
      assert.is_false(pcall(h.pass, h, { v }, 1, 1))
      assert.is_false(pcall(h.pass, h, { 1 }, v == 0 and -1 or v, 1))
      assert.is_false(pcall(pose.model, pose, v, 1))
      assert.is_false(pcall(pal.get, pal, 1, v))
      assert.is_false(pcall(limber.pose, skel, v))
      assert.is_false(pcall(core.hierarchy, v))
      assert.is_false(pcall(h.grow, h, v))
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
    local S = scene.Scene
    for _, name in ipairs({ "create", "set_parent", "set_slot", "parent", "exists", "size",
      "destroy", "update", "stats", "slot_world", "worlds" }) do
      for _, bad in ipairs({ 5, "x", {}, true, core.hierarchy(1) }) do
        expect(function() S[name](bad, 1) end,
          "bad argument #1 to '" .. name .. "' %(limber.Scene expected, got ")
      end
    end
    expect(function() S.world(5, 1) end, "limber.scene: world: expected a limber.Scene")
    expect(function() sc.create(nil) end, "bad argument #1 to 'create' %(limber.Scene expected, got nil%)")
    expect(function() scene.new(5) end, "bad argument #1 to 'new' %(table expected, got number%)")
    expect(function() scene.slots(5) end, "limber.scene: slots:")
    expect(function() scene.prefab(5) end, "limber.scene: prefab:")
    expect(function() sc:create(5) end, "limber.scene: create: opts must be a table")
    expect(function() sc:create({ translation = 5 }) end, "translation must be a table")
    expect(function() sc:create({ slots = 5 }) end, "slots must be a limber.Slots")
    expect(function() sc:create({ pose = {} }) end, "pose must be a limber.Pose")
    expect(function() sc:world(1, 5) end, "out must be a table")
    expect(function() sc:slot_world("x") end, "node must be an integer node id")
  end)

  it("limber.* facade functions refuse wrong types in the standard form", function()
    local skel = limber.skeleton({ {} })
    expect(function() limber.skeleton(5) end, "limber.skeleton: expected a table")
    expect(function() limber.skeleton({ joints = 5 }) end, "limber.skeleton: joints must be a table")
    expect(function() limber.skeleton({ 5 }) end, "limber.skeleton: joint 1 is not a table")
    expect(function() limber.pose(5) end, "bad argument #1 to 'pose' %(limber.Skeleton expected, got number%)")
    expect(function() limber.pose(limber.pose(skel)) end,
      "bad argument #1 to 'pose' %(limber.Skeleton expected, got limber.Pose%)")
    expect(function() limber.pose(skel, {}) end, "bad argument #2 to 'pose' %(integer expected, got table%)")
    expect(function() limber.skin(nil, { "a" }) end,
      "bad argument #1 to 'skin' %(limber.Skeleton expected, got nil%)")
    expect(function() limber.skin({}, { "a" }) end,
      "bad argument #1 to 'skin' %(limber.Skeleton expected, got table%)")
    expect(function() limber.skin(skel, nil, { 5 }) end, "inverse binds have 1 numbers")
    expect(function() limber.skin(skel, nil, { {}, 5 }) end, "limber.skin: inverse_binds%[1%] must have 16")
    expect(function() limber.palette(5) end, "bad argument #1 to 'palette' %(limber.Pose expected, got number%)")
    local pose = limber.pose(skel)
    expect(function() limber.palette(pose, 5) end, "bad argument #2 to 'palette' %(table expected, got number%)")
    expect(function() limber.palette(pose, { skin = 5 }) end, "bad argument #2 to 'palette'")
    expect(function() limber.palette(pose, { layout = {} }) end, "bad argument #2 to 'palette'")
    -- a layout given positionally, or a misspelt option, is an error, not a silent mat4
    expect(function() limber.palette(pose, "mat3x4") end, "bad argument #2 to 'palette' %(table expected")
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
          while q ~= 0 and sc:exists(x) do
            if q == id then n = n + 1 break end
            q = (sc:parent(q))
          end
        end
        local before = sc:size()
        assert.are.same(n, sc:destroy(id))
        assert.are.same(before - n, sc:size())
      end
    end
    sc:update()
    -- every destroyed id comes back, first in first out, before new ones
    local dead = sc.free_tail - sc.free_head + 1
    local seen = {}
    for _ = 1, dead do
      local id = sc:create()
      assert.is_true(id <= 200 and not seen[id])
      seen[id] = true
    end
    assert.are.same(201, sc:create())
  end)

  it("followers stay consistent through creates and destroys", function()
    local skel = limber.skeleton({ { name = "a" }, { name = "b", parent = "a" } })
    local pose = limber.pose(skel, 2)
    local sc = scene.new({ capacity = 1 })
    local holder = sc:create({ pose = pose, instance = 2 })
    local f = {}
    for k = 1, 20 do f[k] = sc:create({ parent = holder, slot = k % 2 == 0 and "a" or "b" }) end
    for k = 1, 20, 3 do sc:destroy(f[k]) end
    local n = 0
    for k = 1, 20 do if sc:exists(f[k]) then n = n + 1 end end
    assert.are.same(n, sc.nfollowers)
    for k = 1, sc.nfollowers do assert.is_true(sc:exists(sc.followers[k])) end
    sc:update()
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
