--- Sparse scene tree: a node knows only its parent and its slot.
--
-- Nodes are integer ids. The core data of a node is its parent id (0 = none),
-- an optional slot name on the parent, and an optional scale / rotation /
-- translation relative to the base (defaults 1, identity, 0). Derived data:
-- base = parent world x slot matrix, world = base x T*R*S, kept in a C
-- buffer indexed by id (`limber.core` Hierarchy).
--
-- Lua owns the tree: ids, validation, slot names and what they resolve to
-- (slot tables, prefabs, pose joints), the objects kept alive, attachments to
-- animated joints, destruction. The C kernel (csrc/kernel/hierarchy.h) keeps the
-- numbers per node in flat arrays and a derived index (the non-leaf nodes in
-- depth-first preorder), and `scene:update()` is one C call that builds the
-- parent-first order of exactly the nodes whose world can have changed and
-- computes them; leaves are left out and computed on demand by
-- `scene:world(id)`. See docs/scene.md for the algorithm, the figures
-- and the decisions (destroy takes the subtree, ids are recycled first in,
-- first out, ...).
-- @module limber.scene
local core = require "limber.core"
local check = require "limber.check"
local lmath = require "limber.math"
local typename, is_a = check.typename, check.is_a

local M = {}

local Scene = {}
Scene.__index = Scene
Scene.__name = "limber.Scene"

local NONE <const> = 0
local HUGE <const> = 3.4e38
local FOLLOW <const> = { full = true, rigid = true, translation = true }
local math_type, type, fmt = math.type, type, string.format
-- The hot methods are the C functions themselves (they accept the scene table
-- and find its store), so a call costs no Lua wrapper frame.
local C = getmetatable(core.hierarchy(1)).__index

local function fail(msg, level)
  error("limber.scene: " .. msg, level + 1)
end

local function describe(v)
  if type(v) == "number" or type(v) == "string" then return fmt("%s %s", type(v), tostring(v)) end
  return type(v)
end


-- Scene methods called on something that is not a scene (scene.create(5),
-- a dot instead of a colon) raise the standard argument error.
local function check_self(self, name)
  if getmetatable(self) ~= Scene then
    error(fmt("bad argument #1 to '%s' (limber.Scene expected, got %s)", name, typename(self)), 3)
  end
end

-- ---- argument checks (all before any change) ------------------------------

local function check_id(self, id, what, level)
  if math_type(id) ~= "integer" then
    fail(fmt("%s must be an integer node id (got %s)", what, describe(id)), level + 1)
  end
  if not self.alive[id] then
    fail(fmt("%snode %d does not exist (unknown or destroyed)", what == "node" and "" or what .. ": ",
      id), level + 1)
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

-- Checks a vector argument and returns a plain copy of it (each element
-- read once), which is what the C side then reads: a table whose __index
-- answers differently the second time cannot get past the check.
local function check_vec(v, n, what, level)
  if v == nil then return nil end
  if type(v) ~= "table" then
    fail(fmt("%s must be a table of %d numbers (got %s)", what, n, type(v)), level + 1)
  end
  local c = {}
  for k = 1, n do
    local x = v[k]
    check_num(x, fmt("%s[%d]", what, k), level + 1)
    c[k] = x
  end
  -- the C side refuses a float quaternion of length <= 1e-12; the margin
  -- covers the rounding to float, so what passes here passes there
  if n == 4 and c[1] * c[1] + c[2] * c[2] + c[3] * c[3] + c[4] * c[4] <= 1.0001e-24 then
    fail(what .. " is a zero quaternion", level + 1)
  end
  return c
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
  local by_index = math.type(name) == "integer"
  if type(name) ~= "string" and not by_index then
    fail(fmt("slot must be a string name or a joint index (got %s)", describe(name)), level + 1)
  end
  if parent == NONE then fail(fmt("slot '%s': a root node has no slots", name), level + 1) end
  local prov = self.provider[parent]
  if not prov then
    fail(fmt("slot '%s': node %d has no slots (create it with slots, a prefab or a pose)",
      name, parent), level + 1)
  end
  if by_index and type(prov) ~= "table" then
    fail(fmt("slot %d: only joints of a pose can be named by index", name), level + 1)
  end
  if type(prov) == "table" then
    local j = by_index and name >= 1 and name <= prov.skeleton:joint_count() and name
        or not by_index and prov.skeleton:find(name)
    if not j and by_index then
      fail(fmt("slot %d: joint index out of range [1, %d] for node %d", name,
        prov.skeleton:joint_count(), parent), level + 1)
    elseif not j then
      fail(fmt("slot '%s': the skeleton of node %d has no joint of that name", name, parent),
        level + 1)
    end
    return prov.pose, prov.instance, j, true
  end
  local i = prov:find(name)
  if not i then fail(fmt("slot '%s': node %d has no slot of that name", name, parent), level + 1) end
  return prov, i, nil, false
end

-- ---- changes that survive an allocation failure ------------------------------
--
-- A method that changes the scene runs in three steps: checks; then every
-- step that can allocate (Lua tables get an entry for each key written
-- later, the store grows or allocates its result); then the commit, which
-- only assigns to existing keys (Lua reuses a key's slot: only a new key
-- allocates) and calls C functions that cannot allocate. An out-of-memory
-- error therefore leaves the scene as it was. The commit calls no Lua
-- function that calls another (a deeper call could need a new CallInfo).

-- Gives every per-node table an entry for `id`, the follower list room for
-- one more when `follower`, and the free list room for one more node: the
-- free list always has entries free_tail + 1 .. free_tail + count, so a
-- destroy records its ids without allocating.
local function reserve(self, id, follower)
  local alive, parents, slot, follow, prov = self.alive, self.parents, self.slot, self.follow,
    self.provider
  if alive[id] == nil then alive[id] = false end
  if parents[id] == nil then parents[id] = NONE end
  if slot[id] == nil then slot[id] = false end
  if follow[id] == nil then follow[id] = "full" end
  if prov[id] == nil then prov[id] = false end
  local free, k = self.free, self.free_tail + self.count + 1
  if free[k] == nil then free[k] = false end
  if follower then
    local pos, n = self.follower_pos, self.nfollowers + 1
    if pos[id] == nil then pos[id] = false end
    if self.followers[n] == nil then self.followers[n] = false end
  end
end

-- Adds or removes a follower (reserved). Calls nothing.
local function set_follower(self, id, on)
  local pos = self.follower_pos
  if on and not pos[id] then
    local n = self.nfollowers + 1
    self.followers[n] = id
    pos[id] = n
    self.nfollowers = n
  elseif not on and pos[id] then
    local k, n = pos[id], self.nfollowers
    local last = self.followers[n]
    self.followers[k] = last
    pos[last] = k
    self.followers[n], pos[id], self.nfollowers = nil, nil, n - 1
  end
end

-- The Lua half of a link already made in the store (reserved). Calls nothing.
local function commit_link(self, id, newp, slot, follow, animated)
  self.parents[id], self.slot[id], self.follow[id] = newp, slot or false, follow
  set_follower(self, id, animated)
end

-- ---- construction ----------------------------------------------------------

--- A new, empty scene.
-- @tparam[opt] table opts `capacity` (initial node storage, grows by doubling;
--   default 1024), `stale_bound` (how many unchanged nodes the cached order
--   may keep before it is rebuilt; default 256)
-- @treturn limber.Scene
function M.new(opts)
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then
    error(fmt("bad argument #1 to 'new' (table expected, got %s)", typename(opts)), 2)
  end
  local cap = opts.capacity or 1024
  if math_type(cap) ~= "integer" or cap < 1 or cap > 1 << 26 then
    fail("new: capacity must be an integer in [1, 67108864]", 2)
  end
  local bound = opts.stale_bound or 256
  if math_type(bound) ~= "integer" or bound < 0 or bound > 0xFFFFFFFF then
    fail("new: stale_bound must be a non-negative integer", 2)
  end
  return setmetatable({
    store = core.hierarchy(cap, bound), cap = cap, top = 0, count = 0,
    free = {}, free_head = 1, free_tail = 0,
    alive = {}, parents = {}, slot = {}, follow = {}, provider = {},
    followers = {}, nfollowers = 0, follower_pos = {},
  }, Scene)
end

-- The id the next create takes (recycled first in, first out), growing the
-- store when it is beyond the capacity; nothing else changes.
local function next_id(self)
  if self.free_head <= self.free_tail then return self.free[self.free_head], true end
  local id = self.top + 1
  if id > self.cap then
    local cap = math.min(self.cap * 2, 1 << 26)
    if id > cap then fail("create: the scene is full (67108864 nodes)", 3) end
    -- a complete copy with its own anchors: switching to it changes no node
    self.store = self.store:grow(cap)
    self.cap = cap
  end
  return id, false
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
  check_self(self, "create")
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then fail("create: opts must be a table or nil", 2) end
  local p = check_parent(self, opts.parent, 2)
  local follow = check_follow(opts.follow, 2)
  local slot_name = opts.slot
  local owner, a, b, animated = resolve_slot(self, p, slot_name, 2)
  local t = check_vec(opts.translation, 3, "translation", 2)
  local r = check_vec(opts.rotation, 4, "rotation", 2)
  local s = check_vec(opts.scale, 3, "scale", 2)
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
    if math_type(inst) ~= "integer" or inst < 1 or inst > pose:instance_count() then
      fail(fmt("create: instance must be an integer in [1, %d]", pose:instance_count()), 2)
    end
    prov = { pose = pose, instance = inst, skeleton = pose:skeleton() }
  end
  -- what can allocate
  local id, recycled = next_id(self)
  reserve(self, id, animated)
  local store = self.store
  store:create(id) -- its anchor entry is its only allocation, made before the node exists
  -- the commit
  if recycled then
    self.free[self.free_head] = nil
    self.free_head = self.free_head + 1
  else
    self.top = id
  end
  self.count = self.count + 1
  if t or r or s then store:set_srt(id, t, r, s) end
  self.alive[id], self.provider[id] = true, prov
  store:link(id, p, follow, owner, a, b)
  commit_link(self, id, p, slot_name, follow, animated)
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
  check_self(self, "set_parent")
  check_id(self, id, "node", 2)
  local p = check_parent(self, parent, 2)
  check_not_descendant(self, id, p, 2)
  follow = check_follow(follow, 2)
  local owner, a, b, animated = resolve_slot(self, p, slot, 2)
  reserve(self, id, animated)
  self.store:link(id, p, follow, owner, a, b) -- changes nothing when it raises
  commit_link(self, id, p, slot, follow, animated)
end

--- Moves node `id` to another slot of the same parent (nil: the parent's origin).
-- @tparam integer id
-- @tparam[opt] string slot
-- @tparam[opt] string follow "full" (default), "rigid" or "translation"
function Scene:set_slot(id, slot, follow)
  check_self(self, "set_slot")
  check_id(self, id, "node", 2)
  follow = check_follow(follow, 2)
  local p = self.parents[id]
  local owner, a, b, animated = resolve_slot(self, p, slot, 2)
  reserve(self, id, animated)
  self.store:link(id, p, follow, owner, a, b)
  commit_link(self, id, p, slot, follow, animated)
end

--- Parent id (0 = none), slot name (or nil) and follow mode of a node.
-- @tparam integer id
-- @treturn integer parent
-- @treturn string|nil slot
-- @treturn string follow
function Scene:parent(id)
  check_self(self, "parent")
  check_id(self, id, "node", 2)
  return self.parents[id], self.slot[id] or nil, self.follow[id]
end

--- True when `id` names a live node.
-- @param id any value
-- @treturn boolean
function Scene:exists(id)
  check_self(self, "exists")
  return self.alive[id] == true
end

--- Number of direct children of a node (0 for a leaf): `scene:child_count(id)`.
-- @tparam integer id
-- @treturn integer
-- @function Scene:child_count
Scene.child_count = C.child_count

--- Number of live nodes.
-- @treturn integer
function Scene:size()
  check_self(self, "size")
  return self.count
end

--- Destroys node `id` and its whole subtree; returns how many nodes were
-- destroyed. Destroying a leaf costs O(1); destroying a node with children
-- scans the parent ids once in C (there are no child lists). Destroyed ids
-- raise errors until they are recycled by later `create` calls (first in,
-- first out).
-- @tparam integer id
-- @treturn integer
function Scene:destroy(id)
  check_self(self, "destroy")
  check_id(self, id, "node", 2)
  -- the store allocates its result before it destroys anything; the free
  -- list has room for every live node (see reserve)
  local gone = self.store:destroy(id)
  -- the commit
  local n, free, t = #gone, self.free, self.free_tail
  local alive, parents, slot, prov = self.alive, self.parents, self.slot, self.provider
  for k = 1, n do
    local x = gone[k]
    set_follower(self, x, false)
    alive[x], parents[x], slot[x], prov[x] = false, NONE, false, nil
    t = t + 1
    free[t] = x
  end
  self.free_tail = t
  self.count = self.count - n
  return n
end

-- ---- transforms ------------------------------------------------------------------

--- Sets translation {x,y,z}, rotation {x,y,z,w} (normalised) and scale
-- {x,y,z} relative to the base; nil keeps a component.
-- @tparam integer id
-- @tparam[opt] table t {x, y, z}
-- @tparam[opt] table r {x, y, z, w}; a zero quaternion is refused
-- @tparam[opt] table s {x, y, z}
-- @function Scene:set_srt
Scene.set_srt = C.set_srt

--- Sets the translation from three numbers: `scene:set_translation(id, x, y, z)`.
-- @tparam integer id
-- @tparam number x
-- @tparam number y
-- @tparam number z
-- @function Scene:set_translation
Scene.set_translation = C.set_t

--- Sets the rotation from a quaternion: `scene:set_rotation(id, x, y, z, w)` (normalised).
-- @tparam integer id
-- @tparam number x
-- @tparam number y
-- @tparam number z
-- @tparam number w
-- @function Scene:set_rotation
Scene.set_rotation = C.set_r

--- Sets the scale: `scene:set_scale(id, x [, y, z])` (y and z default to x).
-- @tparam integer id
-- @tparam number x
-- @tparam[opt] number y
-- @tparam[opt] number z
-- @function Scene:set_scale
Scene.set_scale = C.set_s

--- Translation, rotation and scale tables of a node.
-- @tparam integer id
-- @treturn table translation {x, y, z}
-- @treturn table rotation {x, y, z, w}
-- @treturn table scale {x, y, z}
-- @function Scene:srt
Scene.srt = C.srt

-- ---- the per-frame update ----------------------------------------------------

--- Recomputes the world matrix of every node whose world can have changed
-- since the last update (nodes whose SRT, parent or slot changed, nodes
-- attached to pose joints, and their descendants), parents first, in one C
-- call. Leaves are not computed here but on demand by `world`. Call it after
-- the animation of the frame (sample, local_to_model) so joint attachments
-- see this frame's pose.
-- @treturn integer how many nodes the pass computed
function Scene:update()
  check_self(self, "update")
  return self.store:update(self.followers, self.nfollowers)
end

--- Nodes whose world matrix changed in the last update: the recomputed
-- non-leaf nodes and the leaves that changed themselves (a leaf that moved
-- only because its parent moved is not listed; `has_changed` tells).
-- @tparam[opt] table out filled from index 1 (entries after the count are left)
-- @treturn table ids
-- @treturn integer count
-- @function Scene:changed
Scene.changed = C.changed

--- True when the world matrix of `id` changed in the last update (for a
-- leaf: it changed itself or its parent's world changed).
-- @tparam integer id
-- @treturn boolean
-- @function Scene:has_changed
Scene.has_changed = C.has_changed

--- Statistics of the last update: `pass` (nodes computed by the C pass),
-- `cached` (the cached order was reused), `cache` (its size), `frame`
-- (updates so far), `changed`, `pending` (changes waiting for the next update).
-- @treturn table
function Scene:stats()
  check_self(self, "stats")
  local pass, cached, cache, frame, changed, pending = self.store:stats()
  return { pass = pass, cached = cached, cache = cache, frame = frame, changed = changed,
           pending = pending }
end

local world_values = C.world_values

--- World matrix of a node as of the last update (16 numbers, column-major),
-- in `out` if given. A leaf is recomputed here only if it changed at an
-- update or its parent's world changed since it was last computed.
-- `scene:world(id [, out])`.
-- @tparam integer id
-- @tparam[opt] table out
-- @treturn table 16 numbers
function Scene:world(id, out)
  if out == nil then
    out = {}
  elseif type(out) ~= "table" then
    fail(fmt("world: out must be a table (got %s)", describe(out)), 2)
  end
  out[1], out[2], out[3], out[4], out[5], out[6], out[7], out[8], out[9], out[10], out[11], out[12],
    out[13], out[14], out[15], out[16] = world_values(self, id)
  return out
end

--- Makes the stored world matrix of `id` current (leaves on demand), for
-- readers of `worlds()`.
-- @tparam integer id
-- @function Scene:refresh
Scene.refresh = C.refresh

--- Copies the world matrices of `ids[1]` to `ids[count]` (leaves on demand) into
-- elements `first ..` of an f32 limber.Buffer of width 16 (default first 1),
-- in one call: `scene:gather(ids, count, buffer [, first])`, e.g. for a
-- renderer's instance buffer. Every id is checked before anything is written.
-- @tparam table ids
-- @tparam integer count
-- @tparam limber.Buffer buffer f32, width 16, writable
-- @tparam[opt=1] integer first
-- @function Scene:gather
Scene.gather = C.gather

--- World matrix of slot `name` of node `id` (a node with a slot table or a
-- prefab): world(id) x slot matrix. For a prefab, the world of an inner node.
-- @tparam integer id
-- @tparam string name
-- @tparam[opt] table out
-- @treturn table 16 numbers
function Scene:slot_world(id, name, out)
  check_self(self, "slot_world")
  check_id(self, id, "node", 2)
  local prov = self.provider[id]
  if type(prov) ~= "userdata" then fail(fmt("node %d has no slot table", id), 2) end
  local i = prov:find(name)
  if not i then fail(fmt("node %d has no slot named %s", id, describe(name)), 2) end
  return self.store:slot_world(id, prov, i, out)
end

--- A read-only limber.Buffer view of the matrices: element `id + 1` is node
-- `id`, 32 floats: world (1..16) then base (17..32); element 1 is the
-- identity of "no parent" (stride 128 bytes). Leaves are current only after
-- `refresh(id)` or `world(id)`; the view is valid until the scene grows
-- (creating nodes beyond its capacity).
-- @treturn limber.Buffer
function Scene:worlds()
  check_self(self, "worlds")
  return self.store:worlds()
end

-- ---- slot tables and prefabs ---------------------------------------------------

-- a slot's translation / rotation / scale: nil (the default) or k finite numbers
local function slot_vec(name, what, v, k, default)
  if v == nil then return default end
  local ok = type(v) == "table"
  for j = 1, ok and k or 0 do
    local x = rawget(v, j)
    if type(x) ~= "number" or x ~= x or math.abs(x) > HUGE then ok = false end
  end
  if not ok then fail(fmt("slots: slot '%s': %s must be %d finite numbers", name, what, k), 4) end
  return { v[1], v[2], v[3], v[4] }
end

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
  for i, name in ipairs(names) do
    local v = def[name]
    if type(v) ~= "table" then fail(fmt("slots: slot '%s' must be a table", name), 2) end
    if #v ~= 0 and #v ~= 16 then
      fail(fmt("slots: slot '%s' must be 16 numbers or a table of translation/rotation/scale", name), 2)
    end
    if #v == 16 then
      table.move(v, 1, 16, (i - 1) * 16 + 1, flat)
    else
      local t = slot_vec(name, "translation", v.translation, 3, { 0, 0, 0 })
      local r = slot_vec(name, "rotation", v.rotation, 4, { 0, 0, 0, 1 })
      local sc = slot_vec(name, "scale", v.scale, 3, { 1, 1, 1 })
      local n = math.sqrt(r[1] ^ 2 + r[2] ^ 2 + r[3] ^ 2 + r[4] ^ 2)
      if n <= 1e-12 then fail(fmt("slots: slot '%s': rotation is a zero quaternion", name), 3) end
      r = { r[1] / n, r[2] / n, r[3] / n, r[4] / n }
      table.move(lmath.trs_raw(t, r, sc), 1, 16, (i - 1) * 16 + 1, flat)
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
  for j = 1, skel:joint_count() do names[j] = skel:name(j) end
  return core.slots_from_pose(pose, 1, names)
end

M.Scene = Scene
return M
