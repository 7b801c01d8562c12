-- Out-of-memory injection (issue 13): spec/c/oom_host.c runs a
-- representative workload (a glTF model loaded, pose, palette, crowd,
-- skinning mesh and target, a scene with slots, a prefab and followers on
-- pose joints that grows, frames, structure edits, an unordered skeleton;
-- frame plans with masked layers, LOD and 1 -> 2 -> 1 threads, a controller
-- with a state machine, parameters, a trigger and a blend space, a clip
-- packed and measured, a snapshot of the asset saved and loaded, a plan
-- with IK constraints on set and scene-followed targets)
-- with an allocator that refuses every allocation from the N-th on. Each
-- run must end with a clean "not enough memory" error; then, with the
-- allocator healthy again, the same state must finish the workload and
-- give the checksum of a clean run (so no object was left half changed).
-- Every N up to DENSE is tried, then a stride that keeps the runs near
-- RUNS (both printed); LIMBER_OOM_ALL=1 tries every N. The host is built
-- with ASan + UBSan against the running Lua and loads the limber.core the
-- running busted loads (LuaJIT: with its JIT compiler off, see write_script).
-- Before the fix (when the scene was a Lua table over a C store),
-- Scene:create could leave nfollowers counting an entry it never stored,
-- destroy could free ids it never recorded, and a failed
-- create left the size counting a node that did not exist.
local H = require "spec.helper"

local DENSE = 300
local RUNS = 550

local sh = H.sh

local tmp = H.tmpdir(setup, teardown)

-- The workload: SETUP (not injected), WORK (resumable steps), VERIFY.
local WORKLOAD = [==[
local limber, gltf, anim, scene, skinning, controller, snapshot, ik
local STEPS = 27

function SETUP()
  limber = require "limber"
  gltf, anim, scene, skinning = limber.gltf, limber.anim, limber.scene, limber.skinning
  controller, snapshot, ik = require "limber.controller", require "limber.snapshot", require "limber.ik"
  skinning.threads(1)
  -- Lua 5.4.4's lauxlib makes the metatable of its string-buffer boxes on
  -- first use; an allocation failure in the middle leaves it without
  -- __close in the registry for good (a Lua quirk, not limber's): make it now
  assert(#string.rep("x", 65536) == 65536)
  -- resumable state: every slot exists already, so marking a step done
  -- or storing its result never allocates
  DONE, NODES = {}, {}
  for k = 1, STEPS do DONE[k] = false end
  for k = 1, 8 do NODES[k] = false end
end

local steps = {
  function() ASSET = gltf.load(MODEL) end,
  function() POSE = gltf.pose(ASSET, 1, 3) end,
  function() PALETTE = gltf.palette(ASSET, POSE, { skin = 1, layout = "mat4" }) end,
  function()
    local clips = {}
    for a, animation in ipairs(ASSET.animations) do clips[a] = animation.clips[1] end
    CROWD = anim.crowd(POSE, clips)
  end,
  function()
    local prim = ASSET.meshes[ASSET.skinned_nodes[1].mesh].primitives[1]
    MESH = skinning.mesh(prim)
    TARGET = skinning.target({ mesh = MESH, instances = 3, positions = true, normals = true })
  end,
  function() SCENE = scene.new({ capacity = 2 }) end,
  function()
    -- a few nodes: a root, slots, a prefab, a pose holder and followers on
    -- its joints; the store grows from 2 to 16 on the way
    local defs = {
      function() return SCENE:create({ translation = { 1, 2, 3 } }) end,
      function()
        return SCENE:create({ parent = NODES[1], rotation = { 0, 0.6, 0, 0.8 },
          slots = scene.slots({ hand = { translation = { 0, 1, 0 } }, foot = { scale = { 2, 2, 2 } } }) })
      end,
      function() return SCENE:create({ parent = NODES[2], slot = "hand", follow = "rigid" }) end,
      function() return SCENE:create({ parent = NODES[1], pose = POSE, instance = 2 }) end,
      function() return SCENE:create({ parent = NODES[4], slot = 1, translation = { 0, 0, 1 } }) end,
      function() return SCENE:create({ parent = NODES[4], slot = 2, follow = "translation" }) end,
      function()
        return SCENE:create({ parent = NODES[2], slot = "foot",
          slots = scene.prefab({ { name = "a" }, { name = "b", parent = "a", translation = { 0, 3, 0 } } }) })
      end,
      function() return SCENE:create({ parent = NODES[7], slot = "b" }) end,
    }
    for k = 1, #defs do
      if not NODES[k] then NODES[k] = defs[k]() end
    end
  end,
  function()
    for i = 1, 3 do CROWD:player(i):play(1, { time = 0.1 * i, loop = true }) end
  end,
  function()
    for _ = 1, 2 do
      CROWD:advance(1 / 30)
      CROWD:evaluate()
      POSE:local_to_model()
      PALETTE:update()
      skinning.run(MESH, PALETTE, TARGET)
      SCENE:update()
      SCENE:world(NODES[5])
      SCENE:world(NODES[8])
    end
  end,
  function() SCENE:set_parent(NODES[6], NODES[2], "hand") end, -- no longer a follower
  function() SCENE:set_slot(NODES[5], 2) end,
  function() SCENE:destroy(NODES[3]) end,
  function() SCENE:set_parent(NODES[6], NODES[4], 1) end, -- a follower again
  function()
    -- unordered joints: limber.sort_joints, and the C skeleton's reordering scratch
    local joints, parents = {}, {}
    for i = 1, 40 do
      joints[i] = { name = "j" .. i, parent = i < 40 and "j" .. (i + 1) or nil }
      parents[i] = i < 40 and i + 1 or 0
    end
    REVERSED = limber.skeleton((limber.sort_joints(joints)))
    assert(limber.core.skeleton(parents):joint_count() == 40)
  end,
  function()
    -- a frame plan over a second pose: two layers, a palette, a slot joint
    PLAN_POSE = PLAN_POSE or gltf.pose(ASSET, 1, 3)
    PLAN_PAL = PLAN_PAL or gltf.palette(ASSET, PLAN_POSE, { skin = 1, layout = "mat3x4" })
    local clips = {}
    for a, animation in ipairs(ASSET.animations) do clips[a] = animation.clips[1] end
    PLAN = limber.plan({ pose = PLAN_POSE, clips = clips, palettes = { PLAN_PAL }, slots = { 2 },
      layers = { { sources = 2 }, { mode = "additive", reference = { clip = clips[1], time = 0 } } } })
  end,
  function()
    for i = 1, 3 do
      PLAN:play(i, 1, 1, 1, 0.1 * i)
      PLAN:play(i, 1, 2, 1, 0.2 * i)
      PLAN:set_weight(i, 1, 2, 0.5, 0.1)
      PLAN:play(i, 2, 1, 1, 0.3)
    end
    PLAN:run(1 / 30)
    -- more threads: the plan's worker scratch grows at the next run
    skinning.threads(2)
    PLAN:run(1 / 30)
    skinning.threads(1)
  end,
  function()
    -- a second plan: two sources in the base layer, an override over joint 2
    -- only, mat4 palettes, LOD tiers
    PLAN2_POSE = PLAN2_POSE or gltf.pose(ASSET, 1, 4)
    PLAN2_PAL = PLAN2_PAL or gltf.palette(ASSET, PLAN2_POSE, { skin = 1, layout = "mat4" })
    PLAN2 = limber.plan({ pose = PLAN2_POSE, clips = { ASSET.animations[1].clips[1] },
      palettes = { PLAN2_PAL }, slots = { 1, 2 },
      layers = { { name = "base", sources = 2 }, { name = "upper", sources = 1, mask = { 0, 1 } } } })
  end,
  function()
    for i = 1, 4 do
      PLAN2:play(i, "base", 1, 1, 0.1 * i)
      PLAN2:play(i, "base", 2, 1, 0.3)
      PLAN2:set_weight(i, "base", 2, 0.5, 0.2)
      PLAN2:play(i, "upper", 1, 1, 0.05 * i)
      PLAN2:set_layer_weight(i, "upper", 0.5, 0.1)
      PLAN2:set_lod(i, i == 4 and 2 or 1)
    end
    -- frames on 1, 2 and 1 threads: the worker scratch grows at the run
    -- after each change of limber.skinning.threads
    PLAN2:run(1 / 30)
    skinning.threads(2)
    PLAN2:run(1 / 30)
    PLAN2:run(1 / 30)
    skinning.threads(1)
    PLAN2:run(1 / 30)
  end,
  function()
    -- a clip of its own on the asset's skeleton, for the controller
    local skel = ASSET.skeletons[1].skeleton
    SWING = anim.clip({ name = "swing", tracks = {
      { joint = 2, path = "rotation", times = { 0, 0.5, 1 },
        values = { 0, 0, 0, 1, 0, 0, 0.38268343, 0.92387953, 0, 0, 0, 1 } } } }, skel)
  end,
  function()
    -- a controller: a base layer run by a state machine, an upper layer
    -- playing a blend space
    CTL_POSE = CTL_POSE or gltf.pose(ASSET, 1, 3)
    CTL_PAL = CTL_PAL or gltf.palette(ASSET, CTL_POSE, { skin = 1, layout = "mat3x4" })
    CTL_MACHINE = CTL_MACHINE or controller.machine({
      initial = "idle",
      states = { idle = { clip = 1 }, move = { clip = "swing" }, hit = { clip = 1, loop = false } },
      transitions = {
        { from = "idle", to = "move", fade = 0.2, when = { { "speed", ">", 0.5 } } },
        { from = "move", to = "idle", fade = 0.2, when = { { "speed", "<=", 0.5 } } },
        { from = "any", to = "hit", fade = 0.1, trigger = "hit", priority = 10 },
        { from = "hit", to = "idle", fade = 0.2, when = { { "calm", "==", true } } },
      } })
    CTL_SPACE = CTL_SPACE or controller.blend1d({ { clip = 1, at = 0 }, { clip = "swing", at = 1 } })
    CTL = controller.new({ pose = CTL_POSE, clips = { ASSET.animations[1].clips[1], SWING },
      palettes = { CTL_PAL }, sources = 3,
      layers = { { name = "base" }, { name = "upper", mask = { 0, 1 } } } })
  end,
  function()
    for i = 1, 3 do
      CTL:set_machine(i, "base", CTL_MACHINE)
      CTL:play_space(i, "upper", CTL_SPACE, 0.25, { fade = 0.1 })
      CTL:set_weight(i, "upper", 0.5, 0.1)
    end
    CTL:update(1 / 30)
  end,
  function()
    -- parameters and a trigger: instances 1, 2 move, 3 is hit
    for i = 1, 3 do CTL:set(i, "speed", i < 3 and 1 or 0) end
    CTL:trigger(3, "hit")
    for i = 1, 3 do CTL:set_param(i, "upper", 0.5 + 0.2 * i, 0.1) end
    CTL:update(1 / 30)
    CTL:update(1 / 30)
  end,
  function()
    -- a clip of a leg and a head, packed, and its error measured again
    IK_SKEL = limber.skeleton({
      { name = "root" },
      { name = "hip", parent = "root", translation = { 0, 1, 0 } },
      { name = "knee", parent = "hip", translation = { 0, -0.5, 0.1 } },
      { name = "foot", parent = "knee", translation = { 0, -0.5, -0.1 } },
      { name = "head", parent = "root", translation = { 0, 1.6, 0 } } })
    local s, c = 0.25881905, 0.96592583 -- 30 degrees about x
    IK_CLIP = anim.clip({ name = "legs", pack = false, tracks = {
      { joint = 1, path = "translation", times = { 0, 0.5, 1 }, values = { 0, 0, 0, 0, 0.1, 0.2, 0, 0, 0.4 } },
      { joint = 2, path = "rotation", times = { 0, 0.25, 0.5, 0.75, 1 },
        values = { 0, 0, 0, 1, s, 0, 0, c, 0, 0, 0, 1, -s, 0, 0, c, 0, 0, 0, 1 } },
      { joint = 3, path = "rotation", times = { 0, 0.5, 1 }, values = { 0, 0, 0, 1, s, 0, 0, c, 0, 0, 0, 1 } },
      { joint = 5, path = "rotation", times = { 0, 1 }, values = { 0, 0, 0, 1, 0, s, 0, c } } } }, IK_SKEL)
    PACKED = anim.pack(IK_CLIP, IK_SKEL, { tolerance = 1e-3, distance = 0.1 })
    assert(PACKED ~= IK_CLIP and PACKED:packed(), "the clip was not packed")
    PACKED_ERROR = PACKED:error(IK_CLIP, IK_SKEL, 0.1)
  end,
  function()
    -- the asset in a snapshot and back
    SNAP = snapshot.save(ASSET)
    SNAP_ASSET = snapshot.load(SNAP)
  end,
  function()
    -- IK in a plan: a two-bone leg reaching a fixed target, a head aiming at
    -- a scene node
    IK_POSE = IK_POSE or limber.pose(IK_SKEL, 3)
    IK_PAL = IK_PAL or limber.palette(IK_POSE)
    LEG = LEG or ik.two_bone(IK_SKEL, "hip", "knee", "foot", { soften = 0.98 })
    LOOK = LOOK or ik.aim(IK_SKEL, "head", { forward = { 0, 0, 1 }, up = { 0, 1, 0 } })
    IK_PLAN = limber.plan({ pose = IK_POSE, clips = { IK_CLIP, PACKED }, palettes = { IK_PAL },
      slots = { "foot" }, ik = { LEG, LOOK } })
  end,
  function()
    for i = 1, 3 do
      IK_PLAN:play(i, 1, 1, i == 2 and 2 or 1, 0.2 * i)
      IK_PLAN:set_ik(1, i, { 0.1 * i, 0.3, 0.4 }, { 0, 0.5, 2 })
      IK_PLAN:follow_ik(2, i, SCENE, NODES[i == 3 and 8 or 1])
    end
    IK_PLAN:run(1 / 30)
    skinning.threads(2)
    IK_PLAN:run(1 / 30)
    skinning.threads(1)
  end,
  function()
    -- a plan over the snapshot's asset
    SNAP_POSE = SNAP_POSE or gltf.pose(SNAP_ASSET, 1, 2)
    SNAP_PAL = SNAP_PAL or gltf.palette(SNAP_ASSET, SNAP_POSE, { skin = 1, layout = "mat4" })
    SNAP_PLAN = limber.plan({ pose = SNAP_POSE, clips = { SNAP_ASSET.animations[1].clips[1] },
      palettes = { SNAP_PAL } })
    SNAP_PLAN:run(1 / 30)
  end,
}
assert(#steps == STEPS)

function WORK()
  for k = 1, STEPS do
    if not DONE[k] then
      steps[k]()
      DONE[k] = true
    end
  end
end

local function sum(t, acc)
  for k = 1, #t do acc = acc + t[k] * ((k % 7) + 1) end
  return acc
end

function VERIFY()
  -- the scene is consistent: sizes, followers, liveness
  local live = { 1, 2, 4, 5, 6, 7, 8 }
  assert(SCENE:node_count() == #live, "node count " .. SCENE:node_count())
  assert(not SCENE:exists(NODES[3]), "node 3 still exists")
  -- one fixed frame
  for i = 1, 3 do CROWD:player(i):play(1, { time = 0.25 * i, rate = 1, loop = true }) end
  CROWD:advance(0)
  CROWD:evaluate()
  POSE:local_to_model()
  PALETTE:update()
  skinning.run(MESH, PALETTE, TARGET)
  SCENE:update()
  -- the followers on pose joints (nodes 5 and 6) moved with the pose, node 8 did not
  assert(SCENE:has_changed(NODES[5]) and SCENE:has_changed(NODES[6]), "a follower did not follow")
  assert(not SCENE:has_changed(NODES[8]), "node 8 changed")
  local acc = 0
  for _, k in ipairs(live) do acc = sum(SCENE:world(NODES[k]), acc) end
  for i = 1, 3 do for j = 1, POSE:joint_count() do acc = sum(PALETTE:get(i, j), acc) end end
  local pos = TARGET:position_buffer()
  if pos then for v = 1, math.min(#pos, 50) do acc = sum(pos:get(v), acc) end end
  acc = acc + REVERSED:joint_count()
  -- the plan: one fixed frame
  for i = 1, 3 do
    PLAN:play(i, 1, 1, 1, 0.25 * i)
    PLAN:play(i, 1, 2, 1, 0.5)
    PLAN:set_weight(i, 1, 2, 0.5)
  end
  assert(PLAN:run(0) == 3, "the plan did not evaluate every instance")
  for i = 1, 3 do for j = 1, PLAN_PAL:joint_count() do acc = sum(PLAN_PAL:get(i, j), acc) end end
  -- the newer parts of the API, each in a sum of its own (so that none
  -- hides in the rounding of another's)
  local parts = { string.format("%.5e", acc) }
  local function part() parts[#parts + 1] = string.format("%.5e", acc); acc = 0 end
  acc = 0
  -- the second plan: one fixed frame, every instance due
  for i = 1, 4 do
    PLAN2:play(i, "base", 1, 1, 0.2 * i)
    PLAN2:play(i, "base", 2, 1, 0.6)
    PLAN2:set_weight(i, "base", 2, 0.5)
    PLAN2:play(i, "upper", 1, 1, 0.1 * i)
    PLAN2:set_layer_weight(i, "upper", 0.5)
    PLAN2:set_lod(i, 1)
  end
  assert(PLAN2:run(0) == 4, "the second plan did not evaluate every instance")
  for i = 1, 4 do for j = 1, PLAN2_PAL:joint_count() do acc = sum(PLAN2_PAL:get(i, j), acc) end end
  for i = 1, 4 do for j = 1, 2 do acc = sum(PLAN2_POSE:model(i, j), acc) end end
  part()
  -- the controller: the states the parameters and the trigger led to, then
  -- one fixed frame (every source stopped, one clip at a time per layer)
  local want = { "move", "move", "hit" }
  for i = 1, 3 do
    assert(CTL:state(i, "base") == want[i], "instance " .. i .. " in state " .. tostring(CTL:state(i, "base")))
    CTL:stop(i, "base", 0)
    CTL:stop(i, "upper", 0)
    CTL:play(i, "base", i == 1 and 1 or "swing", { time = 0.15 * i })
    CTL:play(i, "upper", "swing", { time = 0.3 })
    CTL:set_weight(i, "upper", 0.5)
  end
  CTL:update(0)
  for i = 1, 3 do
    assert(CTL:state(i, "base") == want[i], "instance " .. i .. " left state " .. want[i])
    for j = 1, CTL_PAL:joint_count() do acc = sum(CTL_PAL:get(i, j), acc) end
  end
  part()
  -- the packed clip: its bytes (through a snapshot) and its error
  local blob = snapshot.save(PACKED)
  for k = 1, #blob, 3 do acc = acc + blob:byte(k) * ((k % 7) + 1) end
  acc = acc + PACKED:bytes() + PACKED_ERROR.max_error + PACKED_ERROR.max_error_distance
    + PACKED_ERROR.samples
  part()
  -- the snapshot: the same bytes saved back, a checksum of its bytes
  assert(snapshot.save(SNAP_ASSET) == SNAP, "the loaded snapshot saves back to other bytes")
  for k = 1, #SNAP, 5 do acc = acc + SNAP:byte(k) * ((k % 7) + 1) end
  part()
  -- the IK plan: one fixed frame with the targets as set and followed
  for i = 1, 3 do IK_PLAN:play(i, 1, 1, i == 2 and 2 or 1, 0.3 * i) end
  assert(IK_PLAN:run(0) == 3, "the IK plan did not evaluate every instance")
  for i = 1, 3 do for j = 1, 5 do acc = sum(IK_PAL:get(i, j), acc) end end
  part()
  -- the plan over the snapshot's asset
  for i = 1, 2 do SNAP_PLAN:play(i, 1, 1, 1, 0.4 * i) end
  SNAP_PLAN:run(0)
  for i = 1, 2 do for j = 1, SNAP_PAL:joint_count() do acc = sum(SNAP_PAL:get(i, j), acc) end end
  part()
  return table.concat(parts, "/")
end
]==]

local function write_script()
  local core_path = assert(H.searchpath("limber.core", package.cpath),
    "limber.core not found on package.cpath")
  local cdir = core_path:gsub("limber/core%.so$", "")
  local head = ("package.path = %q\npackage.cpath = %q\nlocal MODEL = %q\n"):format(
    package.path, cdir .. "?.so;" .. package.cpath, H.root .. "examples/assets/RiggedSimple/RiggedSimple.gltf")
  if H.lua == "luajit" then
    -- LuaJIT 2.1 (Debian's beta3) is not safe against an allocation failing while a compiled
    -- trace runs (it crashes in its own code, as in LuaJIT issue 1247): limber is tested
    -- under its interpreter, where every allocation failure is clean
    head = head .. "jit.off()\n"
  end
  local path = tmp() .. "/oom_workload.lua"
  local f = assert(io.open(path, "w"))
  f:write(head, WORKLOAD)
  f:close()
  return path, core_path
end

describe("out of memory", function()
  it("every allocation failure ends in a clean error and leaves a usable state", function()
    local exe = tmp() .. "/oom_host"
    local ok, out = sh(("${CC:-cc} -std=c11 -D_POSIX_C_SOURCE=200809L -O1 -g "
      .. "-fsanitize=address,undefined -fno-sanitize-recover=undefined "
      .. "%s '%sspec/c/oom_host.c' %s -o '%s'"):format(H.lua_cflags, H.root, H.lua_libs, exe))
    if not ok then
      pending(("cannot build the host with ASan + UBSan against %s: %s"):format(H.lua_libs, out:sub(1, 300)))
      return
    end
    local script, core_path = write_script()
    print(("[oom: limber.core from %s]"):format(core_path))
    local env = ("ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS=suppressions='%s' "
      .. "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "):format(H.root .. "spec/lsan.supp")
    local cok, cout = sh(("%s timeout 120 '%s' '%s' count"):format(env, exe, script))
    assert.is_true(cok, cout)
    local total = tonumber(cout:match("allocations (%d+)"))
    local ref = cout:match("checksum (%S+)")
    assert.truthy(total and ref, cout)
    assert.is_true(total > 500, "a workload of only " .. tostring(total) .. " allocations")
    local all = os.getenv("LIMBER_OOM_ALL") == "1"
    local dense = all and total or math.min(DENSE, total)
    local stride = all and 1 or math.max(1, math.floor((total - dense) / (RUNS - DENSE)))
    local t0 = os.time()
    local rok, rout = sh(("%s timeout 600 '%s' '%s' run 1 %d 1 %s"):format(env, exe, script, dense, ref))
    local rok2, rout2 = true, ""
    if dense < total then
      rok2, rout2 = sh(("%s timeout 600 '%s' '%s' run %d %d %d %s"):format(env, exe, script,
        dense + stride, total + 1, stride, ref))
    end
    local tried = tonumber(rout:match("tried (%d+)")) + tonumber(rout2:match("tried (%d+)") or 0)
    print(("[oom: workload of %d allocations; every N up to %d, then stride %d: %d runs in %d s, "
      .. "bad %s + %s]"):format(total, dense, stride, tried, os.time() - t0,
      rout:match("bad (%d+)"), rout2:match("bad (%d+)") or 0))
    assert.is_true(rok, rout)
    assert.is_true(rok2, rout2)
    assert.truthy(rout:find("bad 0", 1, true), rout)
    assert.is_true(dense == total or rout2:find("bad 0", 1, true) ~= nil, rout2)
  end)
end)
