--- Sparse scene tree: a node knows only its parent and its slot.
--
-- Nodes are integer ids. The core data of a node is its parent id (0 = none),
-- an optional slot name on the parent, and an optional scale / rotation /
-- translation relative to the base (defaults 1, identity, 0). Derived data:
-- base = parent world x slot matrix, world = base x T*R*S, kept in a C
-- buffer indexed by id (`limber.core` Hierarchy).
--
-- `scene:update()` recomputes exactly the nodes whose world can have changed,
-- parents first, in one C call over an ordered id array; leaves are left out
-- and computed on demand by `scene:world(id)`. See docs/notes-scene.md for the
-- algorithm and the decisions (destroy takes the subtree, ids are recycled
-- first-in first-out, ...).
-- @module limber.scene
local core = require "limber.core"

local M = {}

local Scene = {}
Scene.__index = Scene
Scene.__name = "limber.Scene"

local NONE <const> = 0
local HUGE <const> = 3.4e38
local FOLLOW <const> = { full = true, rigid = true, translation = true }
local math_type, type, fmt = math.type, type, string.format

local function fail(msg, level)
  error("limber.scene: " .. msg, level + 1)
end

local function describe(v)
  if type(v) == "number" or type(v) == "string" then return fmt("%s %s", type(v), tostring(v)) end
  return type(v)
end

-- ---- argument checks (all before any change) ------------------------------

local function check_id(self, id, what, level)
  if math_type(id) ~= "integer" then
    fail(fmt("%s must be an integer node id (got %s)", what, describe(id)), level + 1)
  end
  if not self.alive[id] then
    fail(fmt("%s: node %d does not exist (unknown or destroyed)", what, id), level + 1)
  end
end

local function check_parent(self, p, level)
  if p == nil or p == NONE then return NONE end
  check_id(self, p, "parent", level + 1)
  return p
end

local function finite(v)
  return type(v) == "number" and v == v and v <= HUGE and v >= -HUGE
end

local function check_num(v, what, level)
  if not finite(v) then
    fail(fmt("%s must be a finite number (got %s)", what, describe(v)), level + 1)
  end
end

local function check_vec(v, n, what, level)
  if v == nil then return end
  if type(v) ~= "table" then
    fail(fmt("%s must be a table of %d numbers (got %s)", what, n, type(v)), level + 1)
  end
  for k = 1, n do check_num(v[k], fmt("%s[%d]", what, k), level + 1) end
  if n == 4 and v[1] * v[1] + v[2] * v[2] + v[3] * v[3] + v[4] * v[4] <= 1e-24 then
    fail(what .. " is a zero quaternion", level + 1)
  end
end

local function is_a(v, name)
  local mt = getmetatable(v)
  return type(v) == "userdata" and type(mt) == "table" and mt.__name == name
end

local function check_follow(f, level)
  if f == nil then return "full" end
  if not FOLLOW[f] then
    fail(fmt("follow must be 'full', 'rigid' or 'translation' (got %s)", describe(f)), level + 1)
  end
  return f
end

-- Resolves slot `name` on `parent`: returns owner, a, b for Hierarchy:link
-- and whether the slot is animated (a pose joint).
local function resolve_slot(self, parent, name, level)
  if name == nil then return nil end
  if type(name) ~= "string" then
    fail(fmt("slot must be a string name (got %s)", describe(name)), level + 1)
  end
  if parent == NONE then fail(fmt("slot '%s': a root node has no slots", name), level + 1) end
  local prov = self.provider[parent]
  if not prov then
    fail(fmt("slot '%s': node %d has no slots (create it with slots, a prefab or a pose)",
      name, parent), level + 1)
  end
  if type(prov) == "table" then
    local j = prov.skeleton:find(name)
    if not j then
      fail(fmt("slot '%s': the skeleton of node %d has no joint of that name", name, parent),
        level + 1)
    end
    return prov.pose, prov.instance, j, true
  end
  local i = prov:find(name)
  if not i then fail(fmt("slot '%s': node %d has no slot of that name", name, parent), level + 1) end
  return prov, i, nil, false
end

-- ---- the non-leaf order --------------------------------------------------
-- Non-leaf nodes form a doubly linked list in depth-first preorder (nxt/prv,
-- sentinel 0) with their depth (depth[0] = -1): the descendants of a node are
-- the run of nodes after it with a greater depth. This is derived data, an
-- index over the parent ids, kept only for nodes that have children.

local function run_last(self, x)
  local nxt, depth = self.nxt, self.depth
  local d, last, cur = depth[x], x, self.nxt[x]
  while depth[cur] > d do
    last = cur
    cur = nxt[cur]
  end
  return last
end

-- Brings the stored world of leaf `id` up to date (on demand): only when
-- the leaf changed, or its parent's world changed, since it was computed.
local function refresh_leaf(self, id)
  local c = self.computed[id]
  if self.ldirty[id] > c or self.stamp[self.parents[id]] > c then
    self.store:compute(id, self.frame)
    self.computed[id] = self.frame
  end
end

-- Leaf q gets its first child: its world must be current before children
-- read it; it joins the order right after its parent.
local function make_nonleaf(self, q)
  refresh_leaf(self, q)
  local p = self.parents[q]
  local nxt, prv = self.nxt, self.prv
  self.depth[q] = p == NONE and 0 or self.depth[p] + 1
  local b = nxt[p]
  nxt[p], prv[q], nxt[q], prv[b] = q, p, b, q
  self.struct = self.struct + 1
end

-- Non-leaf x lost its last child (its run is just x): it leaves the order.
-- Its world is current as of the last update.
local function make_leaf(self, x)
  local nxt, prv = self.nxt, self.prv
  local a, b = prv[x], nxt[x]
  nxt[a], prv[b] = b, a
  self.computed[x] = self.frame
  self.struct = self.struct + 1
end

local function mark_dirty(self, id)
  if not self.isdirty[id] then
    self.isdirty[id] = true
    local n = self.ndirty + 1
    self.dirty[n] = id
    self.ndirty = n
  end
end

local function set_follower(self, id, on)
  local pos = self.follower_pos
  if on and not pos[id] then
    local n = self.nfollowers + 1
    self.followers[n], pos[id], self.nfollowers = id, n, n
  elseif not on and pos[id] then
    local k, n = pos[id], self.nfollowers
    local last = self.followers[n]
    self.followers[k], pos[last] = last, k
    self.followers[n], pos[id], self.nfollowers = nil, nil, n - 1
  end
end

-- Moves `id` below `newp` (already checked: alive, not a descendant).
local function relink(self, id, newp, slot, follow, owner, a, b, animated)
  local parent, nchild, depth = self.parents, self.nchild, self.depth
  local oldp = parent[id]
  if newp ~= oldp then
    if newp ~= NONE then
      if nchild[newp] == 0 then make_nonleaf(self, newp) end
      nchild[newp] = nchild[newp] + 1
    end
    parent[id] = newp
    if nchild[id] > 0 then
      -- cut the run of id out of the order and splice it after newp
      local nxt, prv = self.nxt, self.prv
      local last = run_last(self, id)
      local before, after = prv[id], nxt[last]
      nxt[before], prv[after] = after, before
      local delta = (newp == NONE and 0 or depth[newp] + 1) - depth[id]
      if delta ~= 0 then
        local cur = id
        while true do
          depth[cur] = depth[cur] + delta
          if cur == last then break end
          cur = nxt[cur]
        end
      end
      local c = nxt[newp]
      nxt[newp], prv[id], nxt[last], prv[c] = id, newp, c, last
      self.struct = self.struct + 1
    end
    if oldp ~= NONE then
      nchild[oldp] = nchild[oldp] - 1
      if nchild[oldp] == 0 then make_leaf(self, oldp) end
    end
  end
  self.slot[id], self.follow[id] = slot or false, follow
  self.store:link(id, newp, follow, owner, a, b)
  set_follower(self, id, animated)
  mark_dirty(self, id)
end

-- ---- construction ----------------------------------------------------------

--- A new, empty scene.
-- @tparam[opt] table opts `capacity` (initial node storage, grows by doubling;
--   default 1024), `stale_bound` (how many unchanged nodes the cached order
--   may keep before it is rebuilt; default 256)
-- @treturn limber.Scene
function M.new(opts)
  opts = opts or {}
  if type(opts) ~= "table" then fail("new: opts must be a table or nil", 2) end
  local cap = opts.capacity or 1024
  if math_type(cap) ~= "integer" or cap < 1 then fail("new: capacity must be a positive integer", 2) end
  local bound = opts.stale_bound or 256
  if math_type(bound) ~= "integer" or bound < 0 then
    fail("new: stale_bound must be a non-negative integer", 2)
  end
  return setmetatable({
    store = core.hierarchy(cap), cap = cap, top = 0, count = 0,
    free = {}, free_head = 1, free_tail = 0,
    alive = {}, parents = { [0] = NONE }, slot = {}, follow = {}, nchild = {}, provider = {},
    nxt = { [0] = 0 }, prv = { [0] = 0 }, depth = { [0] = -1 },
    frame = 0, struct = 0,
    dirty = {}, ndirty = 0, isdirty = {},
    stamp = { [0] = 0 }, computed = {}, ldirty = {}, upd = {},
    nonleaf = {}, order = {}, norder = 0,
    cache = {}, ncache = 0, incache = {}, cache_gen = 0, cache_struct = -1,
    stale_bound = bound, last_cached = false,
    changed_list = {}, nchanged = 0,
    followers = {}, nfollowers = 0, follower_pos = {},
    doom = {}, doomed = {},
  }, Scene)
end

local function alloc(self)
  local id
  if self.free_head <= self.free_tail then
    id = self.free[self.free_head]
    self.free[self.free_head] = nil
    self.free_head = self.free_head + 1
  else
    id = self.top + 1
    if id > self.cap then
      local cap = self.cap * 2
      self.store = self.store:grow(cap)
      self.cap = cap
    end
    self.top = id
  end
  self.count = self.count + 1
  return id
end

--- Creates a node and returns its id. It gets its world matrix at the next
-- `update()`.
-- @tparam[opt] table opts `parent` (id, default 0 = none), `slot` (a slot
--   name on the parent), `follow` ("full", "rigid" = rotation + translation,
--   "translation"; how much of the slot matrix is used; default "full"),
--   `translation` {x,y,z}, `rotation` {x,y,z,w}, `scale` {x,y,z};
--   `slots` (a slot table or prefab from `scene.slots` / `scene.prefab`) or
--   `pose` + `instance` (a limber.Pose instance whose joints are the slots)
-- @treturn integer id
function Scene:create(opts)
  opts = opts or {}
  if type(opts) ~= "table" then fail("create: opts must be a table or nil", 2) end
  local p = check_parent(self, opts.parent, 2)
  local follow = check_follow(opts.follow, 2)
  local owner, a, b, animated = resolve_slot(self, p, opts.slot, 2)
  check_vec(opts.translation, 3, "translation", 2)
  check_vec(opts.rotation, 4, "rotation", 2)
  check_vec(opts.scale, 3, "scale", 2)
  local prov
  if opts.slots ~= nil and opts.pose ~= nil then fail("create: give slots or pose, not both", 2) end
  if opts.slots ~= nil then
    if not is_a(opts.slots, "limber.Slots") then
      fail("create: slots must be a limber.Slots (from scene.slots or scene.prefab)", 2)
    end
    prov = opts.slots
  elseif opts.pose ~= nil then
    local pose = opts.pose
    if not is_a(pose, "limber.Pose") then fail("create: pose must be a limber.Pose", 2) end
    local inst = opts.instance or 1
    if math_type(inst) ~= "integer" or inst < 1 or inst > pose:instances() then
      fail(fmt("create: instance must be an integer in [1, %d]", pose:instances()), 2)
    end
    prov = { pose = pose, instance = inst, skeleton = pose:skeleton() }
  end
  local id = alloc(self)
  local store = self.store
  store:reset(id)
  if opts.translation or opts.rotation or opts.scale then
    store:set_srt(id, opts.translation, opts.rotation, opts.scale)
  end
  self.alive[id], self.parents[id], self.nchild[id], self.provider[id] = true, NONE, 0, prov
  self.computed[id], self.ldirty[id], self.stamp[id] = -1, 0, 0
  self.incache[id], self.upd[id] = nil, nil
  relink(self, id, p, opts.slot, follow, owner, a, b, animated)
  return id
end

-- ---- structure ---------------------------------------------------------------

local function check_not_descendant(self, id, p, level)
  local parent, q = self.parents, p
  while q ~= NONE do
    if q == id then
      if p == id then fail(fmt("node %d cannot be its own parent", id), level + 1) end
      fail(fmt("node %d cannot hang below its descendant %d (cycle refused)", id, p), level + 1)
    end
    q = parent[q]
  end
end

--- Hangs node `id` below `parent` (0 = none), optionally on a named slot.
-- Any node that is not `id` or one of its descendants is allowed; a cycle is
-- refused with an error and nothing changes.
-- @tparam integer id
-- @tparam integer parent
-- @tparam[opt] string slot
-- @tparam[opt] string follow "full" (default), "rigid" or "translation"
function Scene:set_parent(id, parent, slot, follow)
  check_id(self, id, "node", 2)
  local p = check_parent(self, parent, 2)
  check_not_descendant(self, id, p, 2)
  follow = check_follow(follow, 2)
  local owner, a, b, animated = resolve_slot(self, p, slot, 2)
  relink(self, id, p, slot, follow, owner, a, b, animated)
end

--- Moves node `id` to another slot of the same parent (nil: the parent's origin).
function Scene:set_slot(id, slot, follow)
  check_id(self, id, "node", 2)
  follow = check_follow(follow, 2)
  local p = self.parents[id]
  local owner, a, b, animated = resolve_slot(self, p, slot, 2)
  relink(self, id, p, slot, follow, owner, a, b, animated)
end

--- Parent id (0 = none), slot name (or nil) and follow mode of a node.
function Scene:parent(id)
  check_id(self, id, "node", 2)
  return self.parents[id], self.slot[id] or nil, self.follow[id]
end

--- True when `id` names a live node.
function Scene:exists(id)
  return self.alive[id] == true
end

--- Number of direct children of a node (0 for a leaf).
function Scene:child_count(id)
  check_id(self, id, "node", 2)
  return self.nchild[id]
end

--- Number of live nodes.
function Scene:size()
  return self.count
end

--- Destroys node `id` and its whole subtree; returns how many nodes were
-- destroyed. Destroying a leaf costs O(1); destroying a node with children
-- scans the parent ids once (there are no child lists). Destroyed ids raise
-- errors until they are recycled by later `create` calls (first in, first out).
-- @tparam integer id
-- @treturn integer
function Scene:destroy(id)
  check_id(self, id, "node", 2)
  local doomed, doom, n = self.doomed, self.doom, 0
  local nchild, parent = self.nchild, self.parents
  if nchild[id] > 0 then
    local nxt, prv = self.nxt, self.prv
    local last = run_last(self, id)
    local cur = id
    while true do
      n = n + 1
      doomed[n], doom[cur] = cur, true
      if cur == last then break end
      cur = nxt[cur]
    end
    local a, b = prv[id], nxt[last]
    nxt[a], prv[b] = b, a
    local alive = self.alive
    for x = 1, self.top do
      if alive[x] and nchild[x] == 0 and doom[parent[x]] then
        n = n + 1
        doomed[n] = x
      end
    end
    self.struct = self.struct + 1
  else
    n = 1
    doomed[1] = id
  end
  local p = parent[id]
  if p ~= NONE then
    nchild[p] = nchild[p] - 1
    if nchild[p] == 0 then make_leaf(self, p) end
  end
  local store, alive = self.store, self.alive
  for k = 1, n do
    local x = doomed[k]
    doomed[k], doom[x] = nil, nil
    set_follower(self, x, false)
    alive[x], parent[x], nchild[x], self.slot[x], self.provider[x] = false, NONE, 0, false, nil
    store:reset(x)
    local t = self.free_tail + 1
    self.free[t], self.free_tail = x, t
  end
  self.count = self.count - n
  return n
end

-- ---- transforms ------------------------------------------------------------------

--- Sets translation {x,y,z}, rotation {x,y,z,w} (normalised) and scale
-- {x,y,z} relative to the base; nil keeps a component.
function Scene:set_srt(id, t, r, s)
  check_id(self, id, "node", 2)
  check_vec(t, 3, "translation", 2)
  check_vec(r, 4, "rotation", 2)
  check_vec(s, 3, "scale", 2)
  self.store:set_srt(id, t, r, s)
  mark_dirty(self, id)
end

--- Sets the translation from three numbers.
function Scene:set_translation(id, x, y, z)
  if not self.alive[id] then check_id(self, id, "node", 2) end
  if not (finite(x) and finite(y) and finite(z)) then
    check_num(x, "x", 2) check_num(y, "y", 2) check_num(z, "z", 2)
  end
  self.store:set_t(id, x, y, z)
  mark_dirty(self, id)
end

--- Sets the rotation from a quaternion x, y, z, w (normalised).
function Scene:set_rotation(id, x, y, z, w)
  if not self.alive[id] then check_id(self, id, "node", 2) end
  if not (finite(x) and finite(y) and finite(z) and finite(w)) then
    check_num(x, "x", 2) check_num(y, "y", 2) check_num(z, "z", 2) check_num(w, "w", 2)
  end
  if x * x + y * y + z * z + w * w <= 1e-24 then fail("rotation is a zero quaternion", 2) end
  self.store:set_r(id, x, y, z, w)
  mark_dirty(self, id)
end

--- Sets the scale (y and z default to x).
function Scene:set_scale(id, x, y, z)
  check_id(self, id, "node", 2)
  y, z = y or x, z or x
  check_num(x, "x", 2) check_num(y, "y", 2) check_num(z, "z", 2)
  self.store:set_s(id, x, y, z)
  mark_dirty(self, id)
end

--- Translation, rotation and scale tables of a node.
function Scene:srt(id)
  check_id(self, id, "node", 2)
  return self.store:srt(id)
end

-- ---- the per-frame update ----------------------------------------------------

--- Recomputes the world matrix of every node whose world can have changed
-- since the last update (nodes whose SRT, parent or slot changed, nodes
-- attached to pose joints, and their descendants), parents first, in one C
-- call. Leaves are not computed here but on demand by `world`. Call it after
-- the animation of the frame (sample, local_to_model) so joint attachments
-- see this frame's pose.
function Scene:update()
  local frame = self.frame + 1
  self.frame = frame
  local followers = self.followers
  for i = 1, self.nfollowers do mark_dirty(self, followers[i]) end
  local dirty, isdirty, alive, nchild = self.dirty, self.isdirty, self.alive, self.nchild
  local stamp, upd, ldirty, incache = self.stamp, self.upd, self.ldirty, self.incache
  local changed, nch = self.changed_list, 0
  local nonleaf, nn = self.nonleaf, 0
  local gen = self.cache_gen
  local miss = self.cache_struct ~= self.struct
  for i = 1, self.ndirty do
    local id = dirty[i]
    isdirty[id] = nil
    if alive[id] then
      stamp[id] = frame
      if nchild[id] == 0 then
        ldirty[id] = frame
        nch = nch + 1
        changed[nch] = id
      else
        upd[id] = frame
        nn = nn + 1
        nonleaf[nn] = id
        if incache[id] ~= gen then miss = true end
      end
    end
  end
  self.ndirty = 0
  local n = 0
  if nn > 0 then
    local order, parent = self.order, self.parents
    local cache = self.cache
    if not miss then
      -- every changed node is in last frame's order: walk it, keeping the
      -- nodes that changed or whose parent changed (order stays topological)
      local ncache = self.ncache
      for i = 1, ncache do
        local x = cache[i]
        if upd[x] == frame or stamp[parent[x]] == frame then
          stamp[x] = frame
          n = n + 1
          order[n] = x
        end
      end
      if ncache - n > self.stale_bound and ncache - n > n then
        gen = gen + 1
        for i = 1, n do
          local x = order[i]
          cache[i], incache[x] = x, gen
        end
        self.ncache, self.cache_gen = n, gen
      end
      self.last_cached = true
    else
      -- changed non-leaves with no changed ancestor head a run of the
      -- preorder: the run is exactly their non-leaf descendants
      local nxt, depth = self.nxt, self.depth
      for i = 1, nn do
        local x = nonleaf[i]
        local q = parent[x]
        while q ~= NONE and upd[q] ~= frame do q = parent[q] end
        if q == NONE then
          local d, cur = depth[x], x
          repeat
            stamp[cur] = frame
            n = n + 1
            order[n] = cur
            cur = nxt[cur]
          until depth[cur] <= d
        end
      end
      gen = gen + 1
      for i = 1, n do
        local x = order[i]
        cache[i], incache[x] = x, gen
      end
      self.ncache, self.cache_gen, self.cache_struct = n, gen, self.struct
      self.last_cached = false
    end
    self.store:update(order, n, frame)
    for i = 1, n do changed[nch + i] = order[i] end
    nch = nch + n
  end
  self.norder, self.nchanged = n, nch
end

--- Nodes whose world matrix changed in the last update: the recomputed
-- non-leaf nodes and the leaves that changed themselves (a leaf that moved
-- only because its parent moved is not listed; `has_changed` tells).
-- @treturn table ids in entries 1 .. count (reused by the next update)
-- @treturn integer count
function Scene:changed()
  return self.changed_list, self.nchanged
end

--- True when the world matrix of `id` changed in the last update (for a
-- leaf: it changed itself or its parent's world changed).
function Scene:has_changed(id)
  check_id(self, id, "node", 2)
  local f, stamp = self.frame, self.stamp
  if stamp[id] == f and (self.nchild[id] > 0 or self.ldirty[id] == f) then return true end
  return self.nchild[id] == 0 and stamp[self.parents[id]] == f and f > 0
end

--- Statistics of the last update: nodes in the C pass, whether the cached
-- order was reused, the size of the cache, the frame number.
function Scene:stats()
  return { pass = self.norder, cached = self.last_cached, cache = self.ncache,
           frame = self.frame, changed = self.nchanged }
end

--- World matrix of a node as of the last update (16 numbers, column-major),
-- in `out` if given. A leaf is recomputed here only if it or its parent's
-- world changed since it was last computed.
-- @tparam integer id
-- @tparam[opt] table out
-- @treturn table
function Scene:world(id, out)
  if not self.alive[id] then check_id(self, id, "node", 2) end
  if self.nchild[id] == 0 then refresh_leaf(self, id) end
  return self.store:world(id, out)
end

--- Makes the stored world matrix of `id` current (leaves on demand), for
-- readers of `worlds()`.
function Scene:refresh(id)
  if not self.alive[id] then check_id(self, id, "node", 2) end
  if self.nchild[id] == 0 then refresh_leaf(self, id) end
end

--- World matrix of slot `name` of node `id` (a node with a slot table or a
-- prefab): world(id) x slot matrix. For a prefab, the world of an inner node.
function Scene:slot_world(id, name, out)
  check_id(self, id, "node", 2)
  local prov = self.provider[id]
  if type(prov) ~= "userdata" then fail(fmt("node %d has no slot table", id), 2) end
  local i = prov:find(name)
  if not i then fail(fmt("node %d has no slot named %s", id, describe(name)), 2) end
  self:refresh(id)
  return self.store:slot_world(id, prov, i, out)
end

--- A read-only limber.Buffer view of every world matrix (element `id`).
-- Leaves are current only after `refresh(id)` or `world(id)`; the view is
-- valid until the scene grows (creating nodes beyond its capacity).
function Scene:worlds()
  return self.store:worlds()
end

-- ---- slot tables and prefabs ---------------------------------------------------

--- A static slot table (name -> matrix), shared by every node created with it.
-- @tparam table def name -> 16 numbers (column-major, affine) or a table
--   with `translation`, `rotation`, `scale`
-- @treturn limber.Slots
function M.slots(def)
  if type(def) ~= "table" then fail("slots: expected a table name -> matrix", 2) end
  local names = {}
  for k in pairs(def) do
    if type(k) ~= "string" then fail("slots: slot names must be strings", 2) end
    names[#names + 1] = k
  end
  if #names == 0 then fail("slots: no slots", 2) end
  table.sort(names)
  local flat = {}
  local limber = require "limber"
  for i, name in ipairs(names) do
    local v = def[name]
    if type(v) ~= "table" then fail(fmt("slots: slot '%s' must be a table", name), 2) end
    if #v ~= 0 and #v ~= 16 then
      fail(fmt("slots: slot '%s' must be 16 numbers or a table of translation/rotation/scale", name), 2)
    end
    if #v == 16 then
      table.move(v, 1, 16, (i - 1) * 16 + 1, flat)
    else
      local ok, skel = pcall(limber.skeleton, { { translation = v.translation,
        rotation = v.rotation, scale = v.scale } })
      if not ok then fail(fmt("slots: slot '%s': %s", name, skel), 2) end
      local pose = limber.pose(skel, 1)
      pose:local_to_model()
      table.move(pose:model(1, 1), 1, 16, (i - 1) * 16 + 1, flat)
    end
  end
  local ok, s = pcall(core.slots, names, flat)
  if not ok then error(s, 2) end
  return s
end

--- Flattens a fixed hierarchy into a prefab: a slot table whose slots are
-- the inner nodes, with their matrices relative to the prefab's origin,
-- computed by the C kernel in one local-to-model pass.
-- @tparam table nodes as for `limber.skeleton`: each with a unique `name`,
--   optional `parent` (name or index), `translation`, `rotation`, `scale`
-- @treturn limber.Slots
function M.prefab(nodes)
  local limber = require "limber"
  if type(nodes) ~= "table" then fail("prefab: expected a table of nodes", 2) end
  for i, nd in ipairs(nodes) do
    if type(nd) ~= "table" or type(nd.name) ~= "string" then
      fail(fmt("prefab: node %d must be a table with a string name", i), 2)
    end
  end
  local ok, skel = pcall(limber.skeleton, nodes)
  if not ok then fail("prefab: " .. tostring(skel), 2) end
  local pose = limber.pose(skel, 1)
  pose:local_to_model()
  local names = {}
  for j = 1, skel:count() do names[j] = skel:name(j) end
  return core.slots_from_pose(pose, 1, names)
end

M.Scene = Scene
return M
