-- limber.scene against a from-scratch recursive computation in plain Lua on
-- random operation sequences (world matrices, and `changed()` / `has_changed`
-- against the set of nodes the frame changed), plus slots, follow modes, pose
-- attachments in either frame order, prefabs, errors and garbage. The
-- other interpreters and the sanitized passes run a quarter of the random
-- sequences (H.cases): the Lua 5.4 pass runs them all.
local H = require "spec.helper"
local limber = require "limber"
local scene = require "limber.scene"
local core = limber.core

-- ---- plain Lua reference ---------------------------------------------------

local function normalize3(v)
  local l = math.sqrt(v[1] * v[1] + v[2] * v[2] + v[3] * v[3])
  if l > 1e-20 then return { v[1] / l, v[2] / l, v[3] / l } end
  return v
end

--- The part of a slot matrix a child takes (double precision reference).
local function follow_ref(m, mode)
  if mode == "full" then return m end
  local o = H.identity()
  o[13], o[14], o[15] = m[13], m[14], m[15]
  if mode == "translation" then return o end
  local x = normalize3({ m[1], m[2], m[3] })
  local y = { m[5], m[6], m[7] }
  local d = x[1] * y[1] + x[2] * y[2] + x[3] * y[3]
  y = normalize3({ y[1] - d * x[1], y[2] - d * x[2], y[3] - d * x[3] })
  o[1], o[2], o[3] = x[1], x[2], x[3]
  o[5], o[6], o[7] = y[1], y[2], y[3]
  o[9], o[10], o[11] = x[2] * y[3] - x[3] * y[2], x[3] * y[1] - x[1] * y[3], x[1] * y[2] - x[2] * y[1]
  return o
end

-- A mirror of the scene in plain tables: nodes[id] = {parent, slot, follow,
-- t, r, s, prov}; prov = {slots = S} or {pose = P, instance = i}.
local function slot_matrix(nodes, n)
  if not n.slot then return H.identity() end
  local prov = nodes[n.parent].prov
  local m
  if prov.slots then
    m = prov.slots:matrix(prov.slots:find(n.slot))
  else
    m = prov.pose:model(prov.instance, prov.pose:skeleton():find(n.slot))
  end
  return follow_ref(m, n.follow or "full")
end

local function reference_worlds(nodes)
  local out = {}
  local function world(id)
    if out[id] then return out[id] end
    local n = nodes[id]
    local pw = n.parent == 0 and H.identity() or world(n.parent)
    local w = H.mul(H.mul(pw, slot_matrix(nodes, n)), H.trs(n.t, n.r, n.s))
    out[id] = w
    return w
  end
  for id in pairs(nodes) do world(id) end
  return out
end

local function close(e, a)
  local m = 1
  for i = 1, 16 do m = math.max(m, math.abs(e[i])) end
  return H.maxdiff(e, a) <= 2e-5 * m * 4
end

local function is_descendant(nodes, a, b) -- is a below b (or b itself)?
  while a ~= 0 do
    if a == b then return true end
    a = nodes[a].parent
  end
  return false
end

local ZERO3, UNITQ, ONE3 = { 0, 0, 0 }, { 0, 0, 0, 1 }, { 1, 1, 1 }

describe("limber.scene", function()
  local seed = H.seed("scene")

  describe("differential test on random operation sequences", function()
    local skel = limber.skeleton(H.rand_joints(6, 1))
    local pose = limber.pose(skel, 3)
    pose:local_to_model()
    local table_slots = scene.slots({
      plate = { translation = { 0, 1, 0 } },
      left = { translation = { -1, 0.5, 0 }, rotation = H.rand_quat(), scale = { 1.2, 0.8, 1 } },
      right = { translation = { 1, 0.5, 0 }, rotation = H.rand_quat() },
    })
    local slot_names = { "plate", "left", "right" }
    local joint_names = {}
    for j = 1, skel:joint_count() do joint_names[j] = skel:name(j) end

    local function run(seq_seed, ops, opts)
      math.randomseed(seq_seed)
      local sc = scene.new({ capacity = 8, stale_bound = opts.stale_bound })
      local nodes, touched, log = {}, {}, {}
      local pose_moved = {} -- instances moved since the last check
      local function say(...) if os.getenv("SCENE_LOG") then local t = H.tpack(...)
          for i = 1, t.n do t[i] = tostring(t[i]) end
          log[#log + 1] = table.concat(t, " ") end end
      local function alive_list()
        local l = {}
        for id in pairs(nodes) do l[#l + 1] = id end
        table.sort(l)
        return l
      end
      local function pick()
        local l = alive_list()
        return l[math.random(#l)]
      end
      local function rand_slot(parent)
        if parent == 0 or not nodes[parent].prov or math.random() < 0.3 then return nil end
        local prov = nodes[parent].prov
        if prov.slots then return slot_names[math.random(#slot_names)] end
        return joint_names[math.random(#joint_names)]
      end
      local follows = { "full", "rigid", "translation" }
      local function create()
        local l = alive_list()
        local parent = (#l == 0 or math.random() < 0.15) and 0 or l[math.random(#l)]
        local t, r, s = H.rand_trs(true)
        local o = { parent = parent ~= 0 and parent or nil, slot = rand_slot(parent) }
        if o.slot then o.follow = follows[math.random(3)] end
        if math.random() < 0.7 then o.translation, o.rotation, o.scale = t, r, s
        else t, r, s = ZERO3, UNITQ, ONE3 end
        local prov
        local u = math.random()
        if u < 0.1 then
          o.slots, prov = table_slots, { slots = table_slots }
        elseif u < 0.15 then
          o.pose, o.instance = pose, math.random(3)
          prov = { pose = pose, instance = o.instance }
        end
        local id = sc:create(o)
        say("create", id, "parent", parent, o.slot, o.follow, o.slots and "slots" or "", o.pose and "pose" or "")
        assert.is_nil(nodes[id])
        nodes[id] = { parent = parent, slot = o.slot, follow = o.follow, t = t, r = r, s = s,
                      prov = prov }
        touched[id] = true
      end
      local function check_all(prev)
        local ref = reference_worlds(nodes)
        -- the nodes the frame changed: touched ones, followers of a pose that
        -- moved since the last frame, and their descendants
        local affected = {}
        local function aff(id)
          if affected[id] ~= nil then return affected[id] end
          local n = nodes[id]
          local prov = n.parent ~= 0 and nodes[n.parent].prov
          -- a follower changes when its own instance of the pose moved (each
          -- instance has its own generation: the others' followers stay)
          local v = touched[id] or (n.slot ~= nil and prov and prov.pose ~= nil
            and pose_moved[prov.instance] == true) or false
          if not v and n.parent ~= 0 then v = aff(n.parent) end
          affected[id] = v
          return v
        end
        local list, count = sc:changed()
        local in_list = {}
        for i = 1, count do
          assert.is_nil(in_list[list[i]], ("seed %d: %d listed twice"):format(seq_seed, list[i]))
          in_list[list[i]] = true
        end
        local out = {}
        for id in pairs(nodes) do
          local full = math.random() < 0.6 or opts.read_all
          if full then
            local w = sc:world(id, out)
            if not close(ref[id], w) then
              error(("seed %d: world of node %d differs by %g\n%s"):format(seq_seed, id,
                H.maxdiff(ref[id], w), os.getenv("SCENE_LOG") and table.concat(log, "\n") or ""))
            end
          end
          local a = aff(id)
          assert.equal(a, sc:has_changed(id), ("seed %d: has_changed(%d)"):format(seq_seed, id))
          assert.equal(a, in_list[id] == true, ("seed %d: changed() and node %d"):format(seq_seed, id))
          if prev[id] and not close(prev[id], ref[id]) then assert.is_true(a) end
        end
        for i = 1, count do assert.is_not_nil(nodes[list[i]]) end
        touched, pose_moved = {}, {}
        return ref
      end
      local function animate()
        for _ = 1, math.random(3) do
          local t, r, s = H.rand_trs(true)
          local i = math.random(3)
          pose:set_trs(i, math.random(#skel), t, r, s)
          pose_moved[i] = true
        end
        pose:local_to_model()
        say("animate")
      end
      local prev = {}
      for _ = 1, 4 do create() end
      for step = 1, ops do
        local u = math.random()
        local l = alive_list()
        if #l == 0 then
          create()
        elseif u < 0.25 then
          create()
        elseif u < 0.45 then
          local id = pick()
          local t, r, s = H.rand_trs(true)
          local n = nodes[id]
          local v = math.random(4)
          if v == 1 then sc:set_trs(id, t, r, s) n.t, n.r, n.s = t, r, s
          elseif v == 2 then sc:set_translation(id, t[1], t[2], t[3]) n.t = t
          elseif v == 3 then sc:set_rotation(id, r[1], r[2], r[3], r[4]) n.r = r
          else sc:set_trs(id, nil, nil, s) n.s = s end
          touched[id] = true
          say("srt", id, v)
        elseif u < 0.58 then
          local id, p = pick(), math.random() < 0.1 and 0 or pick()
          local slot = rand_slot(p)
          local follow = slot and follows[math.random(3)] or nil
          if p ~= 0 and is_descendant(nodes, p, id) then
            assert.error_matches(function() sc:set_parent(id, p, slot, follow) end,
              p == id and "cannot be its own parent" or "cycle refused", 1, true)
          else
            sc:set_parent(id, p ~= 0 and p or nil, slot, follow)
            say("set_parent", id, p, slot, follow)
            nodes[id].parent, nodes[id].slot, nodes[id].follow = p, slot, follow
            touched[id] = true
          end
        elseif u < 0.63 then
          local id = pick()
          local slot = rand_slot(nodes[id].parent)
          local follow = slot and follows[math.random(3)] or nil
          sc:set_slot(id, slot, follow)
          say("set_slot", id, slot, follow)
          nodes[id].slot, nodes[id].follow = slot, follow
          touched[id] = true
        elseif u < 0.68 then
          local id = pick()
          local gone = {}
          for x in pairs(nodes) do
            if is_descendant(nodes, x, id) then gone[#gone + 1] = x end
          end
          assert.equal(#gone, sc:destroy(id))
          say("destroy", id, table.concat(gone, ","))
          for _, x in ipairs(gone) do nodes[x], touched[x] = nil, nil end
          for _, x in ipairs(gone) do assert.is_false(sc:exists(x)) end
        elseif u < 0.72 then
          -- animate the pose: this frame's pose must be seen by attachments
          animate()
        elseif u < 0.76 then
          -- the other frame order: update, then the pose moves, then reads
          say("update")
          sc:update()
          animate()
          prev = check_all(prev)
        else
          say("update")
          sc:update()
          prev = check_all(prev)
        end
        if step % 97 == 0 then assert.equal(#alive_list(), sc:node_count()) end
      end
      sc:update()
      check_all(prev)
      return sc
    end

    it("matches the recursive reference after every update (many seeds)", function()
      for k = 1, H.cases(60) do
        local s = seed * 1000 + k
        run(s, 400, {})
      end
    end)

    it("matches on thousands of short sequences (small forests)", function()
      for k = 1, H.cases(1000) do
        run(seed * 1000 + 5000 + k, 40, { stale_bound = k % 3 == 0 and 0 or nil })
      end
    end)

    it("matches with a zero stale bound and when every node is read", function()
      for k = 1, H.cases(20) do
        run(seed * 1000 + 500 + k, 300, { stale_bound = 0, read_all = true })
      end
    end)

    it("matches on long sequences #slow", function()
      for k = 1, 100 do
        run(seed * 1000 + 2000 + k, 1500, {})
      end
    end)
  end)

  describe("incremental update", function()
    local function chain(sc, n, parent)
      local ids = {}
      for i = 1, n do
        ids[i] = sc:create({ parent = i == 1 and parent or ids[i - 1],
                             translation = { 1, 0, 0 } })
      end
      return ids
    end

    it("recomputes nothing when nothing changed", function()
      local sc = scene.new()
      chain(sc, 10)
      sc:update()
      sc:update()
      local st = sc:stats()
      assert.equal(0, st.pass)
      assert.equal(0, select(2, sc:changed()))
    end)

    it("reuses the cached order when the same nodes change, and only them", function()
      local sc = scene.new({ stale_bound = 0 })
      local a = chain(sc, 5)
      local b = chain(sc, 5)
      sc:update()
      assert.is_false(sc:stats().cached)
      assert.equal(8, sc:stats().pass) -- every non-leaf; the two leaves wait for world()
      sc:set_translation(a[2], 2, 0, 0)
      sc:update()
      assert.is_true(sc:stats().cached)
      assert.equal(3, sc:stats().pass) -- a[2], a[3], a[4]
      assert.equal(3, sc:stats().cache) -- 5 stale nodes > bound 0: the cache was rebuilt
      sc:set_translation(a[3], 3, 0, 0)
      sc:update()
      assert.is_true(sc:stats().cached)
      assert.equal(2, sc:stats().pass)
      assert.equal(3, sc:stats().cache) -- 1 stale node <= 2 kept: no rebuild
      sc:set_translation(b[1], 3, 0, 0)
      sc:update()
      assert.is_false(sc:stats().cached)
      assert.equal(4, sc:stats().pass)
      assert.near({ 7, 0, 0 }, { H.tunpack(sc:world(b[5]), 13, 15) })
      assert.near({ 8, 0, 0 }, { H.tunpack(sc:world(a[5]), 13, 15) })
      local list, n = sc:changed()
      local got = { H.tunpack(list, 1, n) }
      table.sort(got)
      assert.same({ b[1], b[2], b[3], b[4], b[5] }, got) -- the leaf b[5] moved with b[4]
    end)

    it("computes a leaf on demand after its parent moved several frames ago", function()
      local sc = scene.new()
      local a = chain(sc, 3)
      sc:update()
      assert.near({ 3, 0, 0 }, { H.tunpack(sc:world(a[3]), 13, 15) })
      sc:set_translation(a[1], 10, 0, 0)
      sc:update()
      for _ = 1, 5 do sc:update() end
      assert.is_false(sc:has_changed(a[3]))
      assert.near({ 12, 0, 0 }, { H.tunpack(sc:world(a[3]), 13, 15) })
      -- the stored matrix (world_buffer() view) is refreshed too
      sc:set_translation(a[2], 5, 0, 0)
      sc:update()
      sc:update()
      sc:refresh(a[3])
      assert.near({ 16, 0, 0 }, { H.tunpack(sc:world_buffer():get(a[3] + 1), 13, 15) })
    end)

    it("gathers world matrices of many nodes into a buffer in one call", function()
      local sc = scene.new()
      local a = chain(sc, 4)
      sc:update()
      sc:set_translation(a[1], 2, 0, 0)
      sc:set_translation(a[4], 0, 3, 0)
      sc:update()
      local buf = limber.buffer("f32", 16, 6)
      sc:gather({ a[4], a[2], a[1] }, 3, buf, 2)
      local all = limber.buffer("f32", 16, 6)
      sc:gather({ a[4], a[2], a[1] }, nil, all, 2) -- nil count: all of ids (rule 9)
      assert.equal(buf:bytes(), all:bytes())
      assert.near(sc:world(a[4]), buf:get(2))
      assert.near(sc:world(a[2]), buf:get(3))
      assert.near(sc:world(a[1]), buf:get(4))
      assert.near({ 4, 3, 0 }, { H.tunpack(buf:get(2), 13, 15) })
      assert.error_matches(function() sc:gather({ a[1], 99 }, 2, buf) end, "ids[2] is not a live node", 1, true)
      assert.error_matches(function() sc:gather({ a[1] }, 1, buf, 7) end, "do not fit", 1, true)
      assert.error_matches(function() sc:gather({ a[1] }, 1, limber.buffer("f32", 4, 4)) end,
        "width 16 expected", 1, true)
      assert.error_matches(function() sc:gather({ a[1] }, "1", buf) end,
        "integer count or nil expected, got string", 1, true)
      -- a nil count reads all of ids, and a bad id among them still changes nothing
      local before = all:bytes()
      assert.error_matches(function() sc:gather({ a[1], a[2], 99 }, nil, all) end,
        "ids[3] is not a live node", 1, true)
      assert.equal(before, all:bytes())
      assert.same({ 0, 0, 0, 0 }, { H.tunpack(buf:get(1), 1, 4) })
    end)

    it("gathers after a pose moved since the update: the ids it was given, in order", function()
      -- gather's catch-up with the pose runs a pass through the scratch it
      -- checked the ids into: it must read them again (and only then)
      local skel = limber.skeleton(H.rand_joints(6, 1))
      local pose = limber.pose(skel, 4)
      pose:local_to_model()
      local sc = scene.new()
      local ids = {}
      for i = 1, 4 do
        local char = sc:create({ pose = pose, instance = i, translation = { i, 0, 0 } })
        for j = 1, 6 do
          ids[#ids + 1] = sc:create({ parent = char, slot = j, follow = j % 2 == 0 and "full" or "rigid",
            translation = { 0, 0.1 * j, 0 } })
        end
        ids[#ids + 1] = sc:create({ translation = { 0, 0, i } }) -- a node on no pose
      end
      H.shuffle(ids)
      local buf = limber.buffer("f32", 16, #ids)
      for frame = 1, 3 do
        sc:update()
        for i = 1, 4 do
          for j = 1, 6 do pose:set_trs(i, j, H.rand_trs(true)) end
        end
        pose:local_to_model() -- after the update: gather is the first read
        sc:gather(ids, #ids, buf)
        for k, id in ipairs(ids) do
          assert.near(sc:world(id), buf:get(k), 1e-6, ("frame %d, ids[%d]"):format(frame, k))
        end
      end
    end)

    it("keeps worlds right when a leaf that was never read gets children", function()
      local sc = scene.new()
      local a = chain(sc, 2)
      sc:update()
      sc:set_translation(a[1], 7, 0, 0)
      sc:update()
      local c = sc:create({ parent = a[2], translation = { 0, 1, 0 } })
      sc:update()
      assert.near({ 8, 1, 0 }, { H.tunpack(sc:world(c), 13, 15) })
    end)

    it("re-parents a subtree below a younger node", function()
      local sc = scene.new()
      local a = chain(sc, 3)
      local young = sc:create({ translation = { 0, 5, 0 } })
      sc:set_parent(a[1], young)
      sc:update()
      assert.near({ 3, 5, 0 }, { H.tunpack(sc:world(a[3]), 13, 15) })
      assert.equal(young, (sc:parent(a[1])))
    end)

    it("destroys subtrees and recycles ids first in, first out", function()
      local sc = scene.new()
      local a = chain(sc, 4)
      local other = sc:create()
      assert.equal(3, sc:destroy(a[2]))
      assert.equal(0, sc:child_count(a[1]))
      assert.equal(2, sc:node_count())
      assert.equal(2, #sc)
      assert.error_matches(function() sc:world(a[3]) end, "node 3 does not exist", 1, true)
      local n1 = sc:create()
      assert.equal(a[2], n1)
      sc:update()
      assert.is_true(sc:exists(other))
    end)

    it("world fills the given table, equals gather and names bad arguments at the caller", function()
      local sc = scene.new()
      local a = chain(sc, 3)
      sc:set_rotation(a[3], 0, 0.6, 0, 0.8)
      sc:update()
      local out = { "keep me?" }
      assert.equal(out, sc:world(a[3], out))
      local buf = core.buffer("f32", 16, 1)
      sc:gather({ a[3] }, 1, buf)
      assert.same(buf[1], out)
      assert.same(out, sc:world(a[3]))
      local line = debug.getinfo(1, "l").currentline
      local ok, err = pcall(function() local w = sc:world(a[3], 5) return w end)
      assert.is_false(ok)
      assert.matches(":" .. (line + 1) .. ": bad argument #2 to 'limber.Scene:world' (out must be a table "
        .. "(got number 5))", err, 1, true)
      ok, err = pcall(function() local w = sc:world("x") return w end)
      assert.is_false(ok)
      assert.matches(":" .. (line + 5) .. ": bad argument #1 to 'limber.Scene:world' (node must be an "
        .. "integer node id (got string x))", err, 1, true)
      ok, err = pcall(function() local w = sc:world(99) return w end)
      assert.is_false(ok)
      assert.matches(":" .. (line + 9) .. ": bad argument #1 to 'limber.Scene:world' (node 99 does not exist",
        err, 1, true)
      assert.error_matches(function() sc.world({}, a[3]) end,
        "bad argument #1 to 'limber.Scene:world' (limber.Scene expected, got table)", 1, true)
    end)

    it("grows its storage past the initial capacity", function()
      local sc = scene.new({ capacity = 2 })
      local same = sc
      local a = chain(sc, 50)
      assert.equal(same, sc)
      assert.equal(50, #sc)
      assert.equal(64, sc:stats().capacity)
      sc:update()
      assert.near({ 50, 0, 0 }, { H.tunpack(sc:world(a[50]), 13, 15) })
    end)
  end)

  describe("slots", function()
    it("hangs children on named slots of a shared slot table", function()
      local tbl = scene.slots({ plate = { translation = { 0, 1, 0 } } })
      local sc = scene.new()
      local t1 = sc:create({ slots = tbl, translation = { 5, 0, 0 } })
      local t2 = sc:create({ slots = tbl, translation = { -5, 0, 0 } })
      local p1 = sc:create({ parent = t1, slot = "plate" })
      local p2 = sc:create({ parent = t2, slot = "plate", translation = { 0, 0.5, 0 } })
      sc:update()
      assert.near({ 5, 1, 0 }, { H.tunpack(sc:world(p1), 13, 15) })
      assert.near({ -5, 1.5, 0 }, { H.tunpack(sc:world(p2), 13, 15) })
      assert.equal("plate", select(2, sc:parent(p1)))
    end)

    it("refuses missing slot names at attach time and changes nothing", function()
      local tbl = scene.slots({ plate = H.identity() })
      local sc = scene.new()
      local t = sc:create({ slots = tbl })
      local plain = sc:create()
      local c = sc:create({ parent = t, slot = "plate" })
      assert.error_matches(function() sc:create({ parent = t, slot = "cup" }) end,
        "bad argument #1 to 'limber.Scene:create' (slot 'cup': node 1 has no slot of that name)", 1, true)
      assert.error_matches(function() sc:set_slot(c, "cup") end, "no slot of that name", 1, true)
      assert.error_matches(function() sc:set_parent(c, plain, "plate") end,
        "node 2 has no slots", 1, true)
      assert.error_matches(function() sc:create({ slot = "plate" }) end, "a root node has no slots", 1, true)
      assert.equal(3, sc:node_count())
      assert.same({ t, "plate", "full" }, { sc:parent(c) })
      assert.same({ nil, nil, "full" }, { sc:parent(t) }) -- a root: no parent is nil
    end)

    it("applies the follow modes to the slot matrix", function()
      local m = H.trs({ 1, 2, 3 }, H.rand_quat(), { 2, 0.5, 1.5 })
      m[5] = m[5] + 0.3 -- some shear
      local tbl = scene.slots({ s = m })
      local sc = scene.new()
      local p = sc:create({ slots = tbl })
      local kids = {}
      for _, mode in ipairs({ "full", "rigid", "translation" }) do
        kids[mode] = sc:create({ parent = p, slot = "s", follow = mode, translation = { 0, 1, 0 } })
      end
      sc:update()
      local sm = tbl:matrix(1)
      for mode, id in pairs(kids) do
        local ref = H.mul(follow_ref(sm, mode), H.trs({ 0, 1, 0 }, { 0, 0, 0, 1 }, { 1, 1, 1 }))
        assert.near(ref, sc:world(id), 1e-5)
        assert.near(follow_ref(sm, mode), core.follow_filter(sm, mode), 1e-6)
      end
      -- rigid is a proper rotation: orthonormal columns, determinant 1
      local r = core.follow_filter(sm, "rigid")
      local det = r[1] * (r[6] * r[11] - r[10] * r[7]) - r[5] * (r[2] * r[11] - r[10] * r[3])
        + r[9] * (r[2] * r[7] - r[6] * r[3])
      assert.near(1, det, 1e-5)
      assert.error_matches(function() sc:set_slot(kids.full, "s", "loose") end,
        "follow must be 'full', 'rigid' or 'translation'", 1, true)
    end)

    it("refuses malformed slot tables", function()
      assert.error_matches(function() scene.slots({}) end, "no slots", 1, true)
      assert.error_matches(function() scene.slots({ a = { 1, 2 } }) end, "slot 'a' must be 16 numbers", 1, true)
      local bad = H.identity()
      bad[4] = 1
      assert.error_matches(function() scene.slots({ a = bad }) end, "is not affine", 1, true)
      local nan = H.identity()
      nan[13] = 0 / 0
      assert.error_matches(function() scene.slots({ a = nan }) end, "not a finite float", 1, true)
    end)
  end)

  describe("attachment to an animated joint", function()
    for _, simd in ipairs({ true, false }) do
      it("follows this frame's pose (" .. (simd and "best" or "portable") .. " kernel)", function()
        local old = core.simd()
        core.simd(simd)
        local joints = H.rand_joints(8, 1)
        joints[8].name = "hand_r"
        local skel = limber.skeleton(joints)
        local pose = limber.pose(skel, 9)
        local sc = scene.new()
        local char = sc:create({ pose = pose, instance = 7, translation = { 3, 0, 0 } })
        local swords = {}
        for _, mode in ipairs({ "full", "rigid", "translation" }) do
          swords[mode] = sc:create({ parent = char, slot = "hand_r", follow = mode,
                                     translation = { 0, 0.2, 0 } })
        end
        local gem = sc:create({ parent = swords.full, translation = { 0, 0, 0.1 } })
        local hand = skel:find("hand_r")
        for _ = 1, 10 do
          -- frame order: sample / set locals, local_to_model, then scene:update
          for j = 1, 8 do
            local t, r, s = H.rand_trs(true)
            pose:set_trs(7, j, t, r, s)
          end
          pose:local_to_model()
          sc:update()
          local cw = sc:world(char)
          local model = pose:model(7, hand)
          for mode, id in pairs(swords) do
            local ref = H.mul(H.mul(cw, follow_ref(model, mode)),
              H.trs({ 0, 0.2, 0 }, { 0, 0, 0, 1 }, { 1, 1, 1 }))
            assert.is_true(close(ref, sc:world(id)), mode)
          end
          local gref = H.mul(H.mul(H.mul(cw, model), H.trs({ 0, 0.2, 0 }, { 0, 0, 0, 1 }, { 1, 1, 1 })),
            H.trs({ 0, 0, 0.1 }, { 0, 0, 0, 1 }, { 1, 1, 1 }))
          assert.is_true(close(gref, sc:world(gem)))
          assert.is_true(sc:has_changed(swords.rigid))
        end
        core.simd(old)
      end)
    end

    for _, order in ipairs({ "local_to_model, then update", "update, then local_to_model" }) do
      it("reads this frame's pose whatever the frame order (" .. order .. ")", function()
        local skel = limber.skeleton(H.rand_joints(5, 1))
        local pose = limber.pose(skel, 3)
        pose:local_to_model()
        local sc = scene.new()
        local char = sc:create({ pose = pose, instance = 2, translation = { 1, 0, 0 } })
        local still = sc:create({ translation = { 0, 0, 4 } })
        local sword = sc:create({ parent = char, slot = 5, translation = { 0, 0.5, 0 } })
        local gem = sc:create({ parent = sword, translation = { 0, 0, 0.1 } })
        local other = sc:create({ parent = char, slot = 1 }) -- a joint this test never moves
        local buf = limber.buffer("f32", 16, 2)
        sc:update()
        for frame = 1, 6 do
          local t, r, s = H.rand_trs(true)
          pose:set_trs(2, 5, t, r, s)
          if order:find("^update") then
            sc:update()
            pose:local_to_model()
          else
            pose:local_to_model()
            sc:update()
          end
          local cw = sc:world(char)
          local sref = H.mul(H.mul(cw, pose:model(2, 5)), H.trs({ 0, 0.5, 0 }, { 0, 0, 0, 1 }, { 1, 1, 1 }))
          local gref = H.mul(sref, H.trs({ 0, 0, 0.1 }, { 0, 0, 0, 1 }, { 1, 1, 1 }))
          -- every read sees the current pose: changed first (it must catch up too)
          local list, n = sc:changed()
          local got = { H.tunpack(list, 1, n) }
          table.sort(got)
          -- the pose moved: its followers and their descendants (other follows
          -- the same pose, which is one generation for all its joints)
          local want = { sword, gem, other }
          table.sort(want)
          assert.same(want, got, "frame " .. frame)
          assert.is_true(sc:has_changed(gem))
          assert.is_false(sc:has_changed(still))
          assert.is_false(sc:has_changed(char))
          sc:gather({ gem, sword }, 2, buf)
          assert.is_true(close(gref, buf:get(1)), "gather, frame " .. frame)
          assert.is_true(close(sref, buf:get(2)))
          assert.is_true(close(gref, sc:world(gem)), "world, frame " .. frame)
          assert.is_true(close(sref, sc:world(sword)))
        end
        -- a frame where the pose does not move changes nothing
        sc:update()
        pose:local_to_model()
        assert.equal(0, select(2, sc:changed()))
        assert.is_false(sc:has_changed(sword))
      end)
    end

    it("names unnamed joints by index, checking the range", function()
      local skel = limber.skeleton({ {}, { parent = 1, translation = { 0, 1, 0 } } })
      local pose = limber.pose(skel, 2)
      pose:set_trs(2, 2, { 0, 2, 0 })
      pose:local_to_model()
      local sc = scene.new()
      local char = sc:create({ pose = pose, instance = 2 })
      local hat = sc:create({ parent = char, slot = 2 })
      sc:update()
      assert.near(pose:model(2, 2), sc:world(hat), 1e-6)
      assert.error_matches(function() sc:create({ parent = char, slot = 3 }) end,
        "slot 3: joint index out of range [1, 2]", 1, true)
      local plain = sc:create({ slots = scene.slots({ a = { translation = { 1, 0, 0 } } }) })
      assert.error_matches(function() sc:create({ parent = plain, slot = 1 }) end,
        "only joints of a pose can be named by index", 1, true)
      assert.error_matches(function() sc:create({ parent = char, slot = 1.5 }) end,
        "slot must be a string name or a joint index", 1, true)
    end)

    it("keeps the pose alive while a node reads it", function()
      local skel = limber.skeleton({ { name = "root" }, { name = "hand", parent = "root",
        translation = { 0, 1, 0 } } })
      local sc = scene.new()
      local pose = limber.pose(skel, 1)
      pose:local_to_model()
      local char = sc:create({ pose = pose })
      local sword = sc:create({ parent = char, slot = "hand" })
      skel, pose = nil, nil -- luacheck: ignore
      collectgarbage()
      collectgarbage()
      sc:update()
      assert.near({ 0, 1, 0 }, { H.tunpack(sc:world(sword), 13, 15) })
      assert.error_matches(function() sc:create({ parent = char, slot = "foot" }) end,
        "has no joint of that name", 1, true)
    end)
  end)

  describe("prefabs", function()
    local desc = {
      { name = "base", translation = { 0, 1, 0 }, rotation = { 0, 0.3826834, 0, 0.9238795 } },
      { name = "arm", parent = "base", translation = { 1, 0, 0 }, scale = { 1, 2, 1 } },
      { name = "tip", parent = "arm", translation = { 0, 1, 0.5 }, rotation = H.rand_quat() },
      { name = "side", parent = "base", translation = { 0, 0, -1 } },
    }

    it("equals the same hierarchy built from plain nodes", function()
      local prefab = scene.prefab(desc)
      assert.equal(4, #prefab)
      local sc = scene.new()
      local inst, plain, kids = {}, {}, {}
      for i = 1, 3 do
        local t, r, s = H.rand_trs(true)
        inst[i] = sc:create({ slots = prefab, translation = t, rotation = r, scale = s })
        local root = sc:create({ translation = t, rotation = r, scale = s })
        local ids = {}
        for k, d in ipairs(desc) do
          local p = d.parent and ids[d.parent] or root
          ids[d.name] = sc:create({ parent = p, translation = d.translation, rotation = d.rotation,
                                    scale = d.scale })
          ids[k] = ids[d.name]
        end
        plain[i] = ids
        kids[i] = { sc:create({ parent = inst[i], slot = "tip", translation = { 0, 0, 1 } }),
                    sc:create({ parent = ids.tip, translation = { 0, 0, 1 } }) }
      end
      sc:update()
      for i = 1, 3 do
        for _, d in ipairs(desc) do
          assert.near(sc:world(plain[i][d.name]), sc:slot_world(inst[i], d.name), 1e-5)
        end
        assert.near(sc:world(kids[i][2]), sc:world(kids[i][1]), 1e-5)
      end
      assert.error_matches(function() sc:slot_world(inst[1], "nope") end, "no slot named", 1, true)
    end)

    it("shares its static data and stays alive while instances use it", function()
      local sc = scene.new()
      local a = sc:create({ slots = scene.prefab(desc) })
      local c = sc:create({ parent = a, slot = "side" })
      collectgarbage()
      collectgarbage()
      sc:update()
      assert.near({ -math.sqrt(0.5), 1, -math.sqrt(0.5) }, { H.tunpack(sc:world(c), 13, 15) }, 1e-6)
      assert.error_matches(function() scene.prefab({ { name = "a" }, { name = "a" } }) end,
        "share the name", 1, true)
      assert.error_matches(function() scene.prefab({ { translation = { 1, 2, 3 } } }) end,
        "string name", 1, true)
    end)
  end)

  describe("errors leave the scene unchanged", function()
    local function snapshot(sc)
      sc:update()
      local s = {}
      for id = 1, 6 do
        if sc:exists(id) then s[id] = { sc:world(id), { sc:parent(id) }, { sc:trs(id) } } end
      end
      return s
    end

    local function build()
      local tbl = scene.slots({ a = { translation = { 1, 0, 0 } } })
      local sc = scene.new()
      local r = sc:create({ slots = tbl, translation = { 1, 2, 3 } })
      local b = sc:create({ parent = r, slot = "a" })
      local c = sc:create({ parent = b, translation = { 0, 1, 0 } })
      local d = sc:create({ parent = c })
      local e = sc:create()
      sc:destroy(e)
      return sc, r, b, c, d, e
    end

    it("refuses cycles, unknown and destroyed ids, bad numbers and bad types", function()
      local sc, r, b, c, d, e = build()
      local before = snapshot(sc)
      local cases = {
        { function() sc:set_parent(r, d) end, "node 1 cannot hang below its descendant 4 (cycle refused)" },
        { function() sc:set_parent(b, b) end, "node 2 cannot be its own parent" },
        { function() sc:set_parent(c, 99) end, "parent: node 99 does not exist" },
        { function() sc:set_parent(c, e) end, "parent: node 5 does not exist or was destroyed" },
        { function() sc:set_parent(c, 0) end, "parent: node 0 does not exist" },
        { function() sc:set_parent(c, "x") end, "parent must be an integer node id (got string x)" },
        { function() sc:set_parent(1.5, r) end, "node must be an integer node id (got number 1.5)" },
        { function() sc:set_translation(e, 1, 2, 3) end, "node 5 does not exist" },
        { function() sc:set_translation(c, 0 / 0, 2, 3) end, "x must be a finite number" },
        { function() sc:set_translation(c, 1, math.huge, 3) end, "y must be a finite number" },
        { function() sc:set_translation(c, 1, 2, "3") end, "z must be a finite number (got string 3)" },
        { function() sc:set_rotation(c, 0, 0, 0, 0) end, "rotation is a zero quaternion" },
        { function() sc:set_rotation(c, 0, 0, 0 / 0, 1) end, "z must be a finite number" },
        { function() sc:set_scale(c, -math.huge, 1, 1) end, "x must be a finite number" },
        { function() sc:set_scale(c, 2) end, "y must be a finite number (got no value)" },
        { function() sc:set_trs(c, { 1, 2 }) end, "translation[3] must be a finite number (got nil)" },
        { function() sc:set_trs(c, nil, { 0, 0, 0, 0 }) end, "rotation is a zero quaternion" },
        { function() sc:set_trs(c, nil, nil, 5) end, "scale must be a table of 3 numbers" },
        { function() sc:set_trs(c, { 1, 2, 3 }, nil, { 1, 0 / 0, 1 }) end, "scale[2] must be a finite" },
        { function() sc:create({ parent = e }) end, "node 5 does not exist" },
        { function() sc:create({ translation = { 1, 2, math.huge } }) end, "translation[3]" },
        { function() sc:create({ slots = {} }) end, "slots must be a limber.Slots" },
        { function() sc:create({ pose = {} }) end, "pose must be a limber.Pose" },
        { function() sc:create(5) end, "opts must be a table" },
        { function() sc:create({ parnet = r }) end, "unknown option string parnet" },
        { function() sc:create({ instance = 2 }) end, "no pose given" },
        { function() sc:trs(c, 5) end, "out must be a table" },
        { function() sc:world(42) end, "node 42 does not exist" },
        -- ids are integers: from 5.3 on a float is refused even when integral (2.0);
        -- before 5.3 numbers are doubles (2.0 is 2), a non-integral one is refused
        H.integers and { function() sc:world(2.0) end, "node must be an integer node id (got number 2.0)" }
          or { function() sc:world(2.5) end, "node must be an integer node id (got number 2.5)" },
        { function() sc:set_translation({}, 1, 2, 3) end, "node must be an integer node id (got table)" },
        { function() sc:destroy(e) end, "node 5 does not exist" },
        { function() sc:set_slot(d, "a") end, "node 3 has no slots" },
        { function() sc:set_parent(d, r, 7) end, "only joints of a pose can be named by index" },
      }
      for _, case in ipairs(cases) do
        assert.error_matches(case[1], "bad argument #", 1, true)
        assert.error_matches(case[1], "to 'limber.Scene:", 1, true)
        assert.error_matches(case[1], case[2], 1, true)
      end
      assert.same(before, snapshot(sc))
      assert.equal(4, sc:node_count())
    end)

    it("checks the arguments of Slots", function()
      assert.error_matches(function() core.slots({ "a", "a" }, H.mul(H.identity(), H.identity()))
      end, "expected 32 numbers", 1, true)
      local two = {}
      for k = 1, 32 do two[k] = H.identity()[(k - 1) % 16 + 1] end
      assert.error_matches(function() core.slots({ "a", "a" }, two) end, "duplicate slot name 'a'", 1, true)
      assert.error_matches(function() core.slots({ "a", 3 }, two) end, "names[2] must be a string", 1, true)
    end)
  end)

  describe("garbage", function()
    it("allocates no Lua memory per frame in steady state", function()
      -- LuaJIT counts its compiled traces in collectgarbage("count"): one
      -- compiled while measuring is not garbage, so the compiler is off here.
      local jit = rawget(_G, "jit")
      if jit then
        jit.off()
        finally(function() jit.on() end)
      end
      local sc = scene.new({ capacity = 4096 })
      local ids = {}
      for i = 1, 2000 do
        ids[i] = sc:create({ parent = i > 10 and ids[math.random(i - 1)] or nil,
                             translation = { 1, 0, 0 } })
      end
      local out = {}
      local function frame(k)
        for j = 1, 50 do
          local id = ids[(k * 7 + j * 13) % 2000 + 1]
          sc:set_translation(id, j, k % 3, 1)
        end
        sc:update()
        for j = 1, 50 do sc:world(ids[(k * 7 + j * 13) % 2000 + 1], out) end
      end
      -- Warm up on the very frames measured: the first pass over them may
      -- grow the scene's work lists once (a larger subtree moved than any
      -- before), which is capacity, not garbage per frame.
      for k = 1, 200 do frame(k) end
      collectgarbage()
      collectgarbage("stop")
      local before = collectgarbage("count")
      for k = 1, 200 do frame(k) end
      local grown = collectgarbage("count") - before
      collectgarbage("restart")
      io.stderr:write(("[scene: Lua heap growth over 200 frames: %.2f KiB]\n"):format(grown))
      assert.is_true(grown < 1, ("grew %.2f KiB"):format(grown))
    end)
  end)

  it("gives a translation-only node the world the full TRS path gives (its fast path)", function()
    -- the same translation under random parents: once as a translation
    -- alone (the fast path), once with a rotation of (-0, 0, 0, 1), which
    -- takes the quaternion path; the worlds must be equal
    for _ = 1, 200 do
      local sc = scene.new()
      local p = sc:create({ translation = { H.rand(-5, 5), H.rand(-5, 5), H.rand(-5, 5) },
        rotation = H.rand_quat(), scale = { H.rand(0.5, 2), H.rand(0.5, 2), H.rand(0.5, 2) } })
      local t = { H.rand(-3, 3), H.rand(-3, 3), H.rand(-3, 3) }
      local fast = sc:create({ parent = p, translation = t })
      local full = sc:create({ parent = p, translation = t, rotation = { -0.0, 0, 0, 1 } })
      sc:update()
      local a, b = sc:world(fast), sc:world(full)
      for k = 1, 16 do assert.are.equal(b[k], a[k]) end
    end
  end)
end)
