-- limber's main demo: a crowd of animated, CPU-skinned characters on the
-- bundled glTF models, evaluated by one frame plan per model (limber.plan).
--
--   lua5.4 examples/demo.lua [--frames 300] [--characters 1000] [--threads N]
--                            [--out demo-out] [--no-pictures] [--help]
--
-- Loads Fox (Survey / Walk / Run) and CesiumManMorph through limber.gltf, places
-- the characters on a grid under a few group nodes of a limber.scene, drives
-- the foxes with a limber.controller state machine shared by all of them
-- (idle: Survey; move: a synced blend space of Walk and Run by a speed
-- parameter; faded transitions both ways) whose speeds change every 45
-- frames for some foxes (above it, an upper-body layer where some walking
-- foxes look around, and an additive layer where a fox the ball flies over
-- flinches), gives each CesiumMan its own start time and rate
-- on a plain plan, hangs a hat on the head joint of every tenth character (the head
-- is the plans' slot joint), gives the characters animation LOD tiers by
-- their distance from a camera at the crowd's left edge, moves some groups
-- and a ball every frame (every third character looks at the ball: look-at
-- IK on the neck and head, a stage of the plans whose targets follow the
-- ball's scene node), and runs: the plans (advance, sample, blend, local to
-- model, IK, palettes and slots, in blocks of 8 instances), scene update,
-- CPU skinning
-- (the CesiumMen's clips animate CesiumManMorph's morph targets: the plan
-- blends their weights in one call, the skinning kernel applies them in the
-- same pass).
-- Prints per-stage times (the plan's own from plan:timings()) and writes
-- pictures drawn from the run's own skinned vertices and joints: SVG written
-- by the small writer below, rendered to PNG with rsvg-convert (Debian:
-- librsvg2-bin) when it is installed.
local here = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local C = require "common"
local limber = require "limber"
local core, gltf, scene, sk = limber.core, limber.gltf, limber.scene, limber.skinning

local USAGE = [[
usage: lua5.4 examples/demo.lua [options]
  --frames N       frames to run (default 300, at 1/60 s each)
  --characters N   characters in the crowd (default 1000; 60% foxes, 40% CesiumMen)
  --threads N      worker threads of the plans and the skinning (default: every core)
  --out DIR        where the pictures go (default demo-out)
  --no-pictures    skip the pictures
  --help           this text]]

local ok, opt = pcall(C.options, arg, { frames = 300, characters = 1000, threads = 0,
                                         out = "demo-out", no_pictures = false, help = false })
if not ok then
  io.stderr:write("demo: ", opt, "\n", USAGE, "\n")
  os.exit(2)
end
if opt.help then
  print(USAGE)
  os.exit(0)
end
local function check_count(name, v, lo, hi)
  if v ~= math.floor(v) or v < lo or v > hi then
    io.stderr:write(("demo: --%s must be an integer in [%d, %d]\n"):format(name, lo, hi))
    os.exit(2)
  end
  return C.tointeger(v)
end
local FRAMES = check_count("frames", opt.frames, 1, 1000000)
local N = check_count("characters", opt.characters, 2, 100000)
local threads = check_count("threads", opt.threads, 0, 256)
local DT = 1 / 60
local FADE = 0.3          -- seconds of an idle <-> move transition
-- The foxes' state machine: idle (Survey) below a speed of 0.2, else a 1D
-- blend space of Walk (at speed 1) and Run (at 3), played at one phase.
local FOX_MACHINE = limber.controller.machine({ initial = "idle",
  states = { idle = { clip = "Survey" },
             move = { space = { { clip = "Walk", at = 1 }, { clip = "Run", at = 3 } },
                      param = "speed" } },
  transitions = {
    { from = "idle", to = "move", fade = FADE, when = { { "speed", ">", 0.2 } } },
    { from = "move", to = "idle", fade = FADE, when = { { "speed", "<=", 0.2 } } } } })
local function fox_speed() return math.random() < 0.25 and 0 or 0.8 + 2.4 * math.random() end

-- A flinch, made here (the Fox has no such clip): the spine and neck bend
-- about their x axes and come back, keyed from the rest pose, so on an
-- additive layer (reference: the rest pose) it adds the bend to whatever
-- the base layer plays and nothing at its ends.
local FLINCH = { { "b_Spine01_02", 0.35 }, { "b_Spine02_03", 0.35 }, { "b_Neck_04", -0.6 } }
local function flinch_clip(skel)
  local tracks = {}
  for n, jb in ipairs(FLINCH) do
    local _, r = skel:rest_trs(skel:find(jb[1]))
    local h = jb[2] / 2
    local b = { math.sin(h), 0, 0, math.cos(h) } -- r * b: the bend in the joint's frame
    local bent = { r[4] * b[1] + r[1] * b[4] + r[2] * b[3] - r[3] * b[2],
                   r[4] * b[2] - r[1] * b[3] + r[2] * b[4] + r[3] * b[1],
                   r[4] * b[3] + r[1] * b[2] - r[2] * b[1] + r[3] * b[4],
                   r[4] * b[4] - r[1] * b[1] - r[2] * b[2] - r[3] * b[3] }
    local values = {}
    for _, q in ipairs({ r, bent, r }) do
      for c = 1, 4 do values[#values + 1] = q[c] end
    end
    tracks[n] = { joint = jb[1], path = "rotation", times = { 0, 0.1, 0.45 }, values = values }
  end
  return limber.anim.clip({ name = "Flinch", tracks = tracks }, skel)
end
math.randomseed(20261122)

-- ---- models --------------------------------------------------------------

local assets = C.root .. "/examples/assets/"
local kinds = {
  { name = "Fox", file = assets .. "Fox/Fox.glb", share = 0.6, scale = 0.012,
    color = { 235, 125, 45 }, head = "b_Head_05", hat = { 0, 8, 0 }, sheet_clip = "Walk",
    -- the fox walks along model +z: a side view shows z horizontally
    side = 3, facing = 1, machine = true },
  -- CesiumManMorph: CesiumMan with three morph targets its clips animate
  { name = "CesiumMan", file = assets .. "CesiumMan/CesiumManMorph.gltf", share = 0.4, scale = 1.0,
    color = { 80, 135, 225 }, hat = { 0, 0.12, 0 }, side = 1, facing = 1 },  -- along model +x
}
kinds[1].count = math.max(1, math.floor(N * kinds[1].share + 0.5))
kinds[2].count = N - kinds[1].count

-- the worker pool (shared by the plans and the skinning) before any plan runs
local used_threads = select(1, sk.threads(threads > 0 and threads or nil))

local joints_total, verts_total = 0, 0
for _, k in ipairs(kinds) do
  local asset = gltf.load(k.file)
  k.asset = asset
  k.skel = asset.skeletons[1].skeleton
  k.pose = gltf.pose(asset, 1, k.count)
  k.palette = gltf.palette(asset, k.pose, { skin = 1, layout = "mat4" })
  local prim = asset.meshes[asset.skinned_nodes[1].mesh].primitives[1]
  k.mesh = sk.mesh(prim)
  -- triangles in the skinned (influence-sorted) vertex order; a primitive
  -- without indices draws consecutive file vertices, which the inverse
  -- permutation maps to sorted ones
  k.indices = k.mesh:gpu_index_buffer() or k.mesh:gpu_inverse_permutation_buffer()
  k.vertices = prim.vertex_count
  k.out = sk.target({ mesh = k.mesh, instances = k.count, positions = true,
                      normals = prim.normals ~= nil })
  if prim.targets then
    -- morph targets, skinned in the same pass; one row of weights per
    -- character, blended from its clips by the plan (morph_weights)
    k.morph = sk.morph(k.mesh, prim.targets)
    k.weights = core.buffer("f32", #prim.targets, k.count)
    k.morph_node = asset.skinned_nodes[1].node
    k.morph_defaults = asset.meshes[asset.skinned_nodes[1].mesh].weights
  end
  k.clips, k.clip_index = {}, {}
  for a, animation in ipairs(asset.animations) do
    k.clips[a] = animation.clips[1]
    k.clip_index[animation.name or ("clip" .. a)] = a
  end
  -- the head: named, or the highest joint at rest (CesiumMan's joints have
  -- no names), found before any plan runs, from the rest pose's matrices
  if k.head then
    k.head = k.skel:find(k.head)
  else
    local best, y = 1, -math.huge
    for j = 1, k.skel:joint_count() do
      local m = k.pose:model(1, j)
      if m[14] > y then best, y = j, m[14] end
    end
    k.head = best
  end
  -- Look-at IK: the neck (half the turn, at most 0.7 rad) and then the head
  -- (the rest, unlimited: a tech demo's owl heads, so that every looker's
  -- gaze can be checked) aim the head's forward axis at a target. The axes
  -- are the model's forward (the way it walks) and up, taken into the
  -- head's frame at rest.
  do
    local m = k.pose:model(1, k.head)
    local function to_head(v) -- R^T v, normalised
      local x = m[1] * v[1] + m[2] * v[2] + m[3] * v[3]
      local y = m[5] * v[1] + m[6] * v[2] + m[7] * v[3]
      local z = m[9] * v[1] + m[10] * v[2] + m[11] * v[3]
      local l = math.sqrt(x * x + y * y + z * z)
      return { x / l, y / l, z / l }
    end
    local fwd = { 0, 0, 0 }
    fwd[k.side] = k.facing
    local axes = { forward = to_head(fwd), up = to_head({ 0, 1, 0 }), effector = k.head }
    local neck = { forward = axes.forward, up = axes.up, effector = k.head, limit = 1.4 }
    k.look = { limber.ik.aim(k.skel, k.skel:parent(k.head), neck),
               limber.ik.aim(k.skel, k.head, axes) }
    k.gaze = axes.forward
  end
  -- One plan per model (the foxes': their controller's): a base layer; it
  -- writes the palettes and the head's model matrices (the hats' slot),
  -- after the look-at IK of the characters that look (set below).
  k.sheet_clip = k.sheet_clip and k.clip_index[k.sheet_clip] or 1
  if k.machine then
    -- the foxes: a controller (4 source slots: a transition from the blend
    -- space's two clips to Survey while they still fade) running the
    -- machine on every fox but instance 1, on three layers: the machine on
    -- the base; an upper-body override masked at the neck, where some
    -- foxes play Survey's look-around over their walk for a while; and an
    -- additive hit layer that plays the flinch when the ball flies over
    k.sources = 4
    k.clips[#k.clips + 1] = flinch_clip(k.skel)
    k.clip_index.Flinch = #k.clips
    k.layers = { { name = "base" },
                 { name = "upper", mask = limber.mask(k.skel, { root = "b_Neck_04" }) },
                 { name = "hit", mode = "additive" } }
    k.ctl = limber.controller({ pose = k.pose, clips = k.clips, sources = k.sources,
                                layers = k.layers, palettes = { k.palette }, slots = { k.head },
                                ik = k.look })
    k.plan = k.ctl:plan()
    for i = 2, k.count do
      k.ctl:set(i, "speed", fox_speed())
      k.ctl:set_machine(i, "base", FOX_MACHINE)
    end
    -- instance 1 is the contact sheet's model: its clip from the start, at rate 1
    k.ctl:play(1, "base", k.sheet_clip)
  else
    k.sources = 1
    k.layers = { { name = "base", sources = k.sources } }
    k.plan = limber.plan({ pose = k.pose, clips = k.clips,
                           palettes = { k.palette }, slots = { k.head }, ik = k.look })
    for i = 2, k.count do
      local c = math.random(1, #k.clips)
      k.plan:play(i, 1, 1, c, math.random() * k.clips[c]:duration(), 0.8 + 0.4 * math.random())
    end
    k.plan:play(1, 1, 1, k.sheet_clip, 0, 1)
  end
  -- The pictures need every joint's model matrix (the sheet: instance 1 at
  -- 8 times; the top view: everyone at the end), which the timed plan does
  -- not write (models = "slots": writing all of them would add 64 bytes per
  -- joint of every evaluated instance per frame, 1.5 KB a fox, of memory
  -- traffic the game does not need). A second plan over a pose of its own,
  -- models = "all", no palettes, is given the same sources (mirror below)
  -- and run outside the timed frame; the demo prints how far its head
  -- matrices are from the ones the timed plan wrote.
  k.view_pose = gltf.pose(asset, 1, k.count)
  local view_layers = {}
  for n, ly in ipairs(k.layers) do
    view_layers[n] = { name = ly.name, mode = ly.mode, mask = ly.mask, sources = k.sources }
  end
  k.view = limber.plan({ pose = k.view_pose, clips = k.clips, layers = view_layers,
                         models = "all", ik = k.look })
  joints_total = joints_total + k.count * k.skel:joint_count()
  verts_total = verts_total + k.count * k.vertices
end

-- Copies instances first .. last of kind k's sources (clip, time, rate,
-- loop, weight) and layer weights to its view plan and evaluates them
-- there; returns the largest difference between the two plans' head
-- matrices.
local function mirror(k, first, last)
  for i = first, last do
    for n = 1, #k.layers do
      for s = 1, k.sources do
        local clip, time, rate, loop, w = k.plan:source(i, n, s)
        k.view:play(i, n, s, clip, time, rate, loop)
        k.view:set_weight(i, n, s, w)
      end
      k.view:set_layer_weight(i, n, k.plan:layer_weight(i, n))
    end
    for c = 1, #k.look do -- the look-at targets as the last run had them
      local target, w = k.plan:ik(c, i)
      if w > 0 then k.view:set_ik(c, i, target, nil, w) else k.view:set_ik(c, i, nil) end
    end
  end
  k.view:run(0)
  local diff = 0
  for i = first, last do
    local a, b = k.pose:model(i, k.head), k.view_pose:model(i, k.head)
    for e = 1, 16 do diff = math.max(diff, math.abs(a[e] - b[e])) end
  end
  return diff
end

local batch = sk.batch({
  { mesh = kinds[1].mesh, palette = kinds[1].palette, target = kinds[1].out,
    morph = kinds[1].morph, weights = kinds[1].weights },
  { mesh = kinds[2].mesh, palette = kinds[2].palette, target = kinds[2].out,
    morph = kinds[2].morph, weights = kinds[2].weights },
})

-- This frame's morph weights: one C call per model blends its clips'
-- weights tracks by the plan's layer stack into the Buffer the batch reads.
local function morph_weights()
  for _, k in ipairs(kinds) do
    if k.morph then k.plan:morph_weights(k.morph_node, k.morph_defaults, k.weights) end
  end
end

-- ---- scene: groups on a grid, characters, hats ---------------------------

local sc = scene.new({ capacity = N + 64 })
local world_root = sc:create({})
local side = math.ceil(math.sqrt(N))
local SPACING = 2.0
local GROUPS = 8
local rows_per_group = math.ceil(side / GROUPS)
local groups = {}
local half, group_depth = (side - 1) * SPACING / 2, rows_per_group * SPACING
for g = 1, GROUPS do
  groups[g] = sc:create({ parent = world_root,
                          translation = { half, 0, ((g - 1) + 0.5) * group_depth } })
end
local function yaw(a) return { 0, math.sin(a / 2), 0, math.cos(a / 2) } end
local placed, hats = 0, {}
for _, k in ipairs(kinds) do
  k.nodes = {}
  for i = 1, k.count do
    local cell = placed
    placed = placed + 1
    local row, col = math.floor(cell / side), cell % side
    local g = math.min(GROUPS, math.floor(row / rows_per_group) + 1)
    local s = k.scale
    k.nodes[i] = sc:create({ parent = groups[g], pose = k.pose, instance = i,
                             translation = { col * SPACING - half, 0,
                                             (row - (g - 1) * rows_per_group + 0.5) * SPACING
                                               - group_depth / 2 },
                             rotation = yaw(math.random() * 2 * math.pi), scale = { s, s, s } })
    if i % 10 == 1 then
      hats[#hats + 1] = sc:create({ parent = k.nodes[i], slot = k.head, follow = "rigid",
                                    translation = k.hat, scale = { 1 / s, 1 / s, 1 / s } })
    end
  end
end
-- A ball circles over the crowd; every third character looks at it (the
-- plans' look-at IK follows the ball's scene node, in the space of the
-- character's own node).
local BALL_RADIUS, BALL_HEIGHT = math.max(3, half * 0.6), 2.5
local function ball_at(t)
  return half + BALL_RADIUS * math.cos(t * 0.7), BALL_HEIGHT,
    (math.ceil(N / side) * SPACING) / 2 + BALL_RADIUS * math.sin(t * 0.7)
end
local ball = sc:create({ parent = world_root, translation = { ball_at(0) } })
local lookers = 0
for _, k in ipairs(kinds) do
  for i = 3, k.count, 3 do
    k.plan:follow_ik(1, i, sc, ball, { frame = k.nodes[i], weight = 0.5 })
    k.plan:follow_ik(2, i, sc, ball, { frame = k.nodes[i] })
    lookers = lookers + 1
  end
end
sc:update()

-- The foxes' other layers, driven by the game's logic (counted in the
-- "controller (Lua)" row): a fox under the ball (within HIT_RANGE of it,
-- on the ground plane, the foxes' places read every 15 frames) flinches on
-- the additive hit layer, once per pass (again only after the ball left
-- its range); a finished callback stops the layer when the flinch is
-- over. Every
-- LOOK_EVERY frames a sixth of the moving foxes (in turn) play Survey on
-- the upper layer for LOOK_FOR frames: looking around while they walk.
local HIT_RANGE, LOOK_EVERY, LOOK_FOR = 1.2, 60, 100
local fox_xz, under, looking = {}, {}, {}
local counts = { flinches = 0, looks = 0 }
local function fox_places()
  local fox, m = kinds[1], {}
  for i = 1, fox.count do
    sc:world(fox.nodes[i], m)
    fox_xz[i] = { m[13], m[15] }
  end
end
fox_places()
kinds[1].ctl:on({ finished = "Flinch" }, function(i) kinds[1].ctl:stop(i, "hit") end)
local function fox_layers(f)
  local fox = kinds[1]
  if f % 15 == 0 then fox_places() end
  local bx, _, bz = ball_at(f * DT)
  for i = 2, fox.count do
    local dx, dz = fox_xz[i][1] - bx, fox_xz[i][2] - bz
    local near = dx * dx + dz * dz < HIT_RANGE * HIT_RANGE
    if near and not under[i] then
      fox.ctl:play(i, "hit", "Flinch", { loop = false })
      counts.flinches = counts.flinches + 1
    end
    under[i] = near or nil
  end
  if f % LOOK_EVERY == 0 then
    local turn = math.floor(f / LOOK_EVERY) % 6
    for i = 2 + turn, fox.count, 6 do
      if not looking[i] and fox.ctl:state(i, "base") == "move" then
        fox.ctl:play(i, "upper", "Survey", { fade = 0.4 })
        looking[i], counts.looks = f + LOOK_FOR, counts.looks + 1
      end
    end
  end
  for i, until_f in pairs(looking) do
    if f >= until_f then
      fox.ctl:stop(i, "upper", 0.4)
      looking[i] = nil
    end
  end
end

-- ---- animation LOD by distance ---------------------------------------------
-- A camera at the middle of the grid's left edge (column 0, the smallest x),
-- one cell out, so that the tiers cut across both models' rows (the foxes
-- fill the first rows, the CesiumMen the rest). Ranked by the distance of
-- their scene nodes at the start (the groups that move later stay in their
-- tiers): the nearest 20% are evaluated every frame, the next 30% every
-- 2nd, the farthest 50% every 4th; instance 1 of each kind (the contact
-- sheet's) every frame. Inside a tier, phases go round in order of distance,
-- so each frame evaluates about the same number: 0.2 + 0.3 / 2 + 0.5 / 4 =
-- 0.475 of the crowd.
local CAMERA = { x = -SPACING, z = math.ceil(N / side) * SPACING / 2 }
local TIERS = { 1, 2, 4 }
local TIER_NAME = { [1] = "every frame", [2] = "every 2nd", [4] = "every 4th" }
local ranked = {}
do
  local m = {}
  for n, k in ipairs(kinds) do
    k.every = {}
    for i = 1, k.count do
      sc:world(k.nodes[i], m)
      local dx, dz = m[13] - CAMERA.x, m[15] - CAMERA.z
      ranked[#ranked + 1] = { kind = n, i = i, d = dx * dx + dz * dz }
    end
  end
end
table.sort(ranked, function(a, b)   -- ties by kind, then instance: the same order everywhere
  if a.d ~= b.d then return a.d < b.d end
  if a.kind ~= b.kind then return a.kind < b.kind end
  return a.i < b.i
end)
local near_count, mid_count = math.floor(0.2 * N + 0.5), math.floor(0.5 * N + 0.5)
local tier_count, tier_kind, next_phase = {}, {}, {}
for _, e in ipairs(TIERS) do tier_count[e], tier_kind[e], next_phase[e] = 0, { 0, 0 }, 0 end
for r, c in ipairs(ranked) do
  local k = kinds[c.kind]
  local every = r <= near_count and 1 or r <= mid_count and 2 or 4
  if c.i == 1 then every = 1 end
  k.every[c.i] = every
  k.plan:set_lod(c.i, every, next_phase[every])
  next_phase[every] = (next_phase[every] + 1) % every
  tier_count[every] = tier_count[every] + 1
  tier_kind[every][c.kind] = tier_kind[every][c.kind] + 1
end

-- ---- the frame loop --------------------------------------------------------

-- rows of the stage table: wall-clock stages of the frame, and (indented)
-- the plans' own stages from plan:timings(), summed over both plans
local STAGES = { "plan:run (wall)", "  advance", "  sample", "  blend", "  model", "  ik",
                 "  output", "controller (Lua)", "scene update", "skinning" }
local PLAN_KEYS = { "advance", "sample", "blend", "model", "ik", "output" }
local WALL = { [1] = true, [8] = true, [9] = true, [10] = true }
local times = {}
for s = 1, #STAGES do times[s] = {} end
local evaluated = 0           -- instances the plans evaluated, over all frames
local clock = core.clock
local sheet = { {}, {} }      -- captured frames of instance 1 of each kind
local view_diff = 0           -- view plans vs the timed plans' head matrices
local switch_every = 45      -- frames between speed changes of some foxes

local function capture(k, slot, t)
  view_diff = math.max(view_diff, mirror(k, 1, 1))
  local pos = C.values(k.out:position_buffer(), 1, k.vertices)
  local joints = {}
  for j = 1, k.skel:joint_count() do joints[j] = k.view_pose:model(1, j) end
  slot[#slot + 1] = { t = t, positions = pos, joints = joints }
end

local function bar(f)
  local width = 40
  local done = math.floor(width * f / FRAMES)
  io.stderr:write(("\r[%s%s] frame %d/%d"):format(("#"):rep(done), ("."):rep(width - done), f,
    FRAMES))
  if f == FRAMES then io.stderr:write("\n") end
end

local t_start = clock()
for f = 1, FRAMES do
  local t0 = clock()
  -- 1. every switch_every frames, every 7th fox gets a new speed: its
  -- machine moves between idle and the Walk / Run blend space (faded), or
  -- the blend space's weights follow the speed
  local fox = kinds[1]
  if f % switch_every == 0 then
    for i = 2 + math.floor(f / switch_every) % 7, fox.count, 7 do
      fox.ctl:set(i, "speed", fox_speed())
    end
  end
  fox_layers(f)
  local t1 = clock()
  -- 2. the plans: one call per model evaluates its crowd (the instances due
  -- this frame) into palettes and head matrices; the foxes' through their
  -- controller, whose machines step after it
  fox.ctl:update(DT)
  local t1b = clock()
  evaluated = evaluated + fox.plan:evaluated() + kinds[2].plan:run(DT)
  local t2 = clock()
  local fox_run = fox.plan:timings().total * 1e-3 -- seconds of the plan's own run
  -- 3. scene: two groups sway, one turns; hats follow this frame's heads
  local a = f * DT
  sc:set_translation(groups[2], half + math.sin(a * 2) * 3, 0, 1.5 * group_depth)
  sc:set_translation(groups[5], half, math.abs(math.sin(a * 3)) * 1.5, 4.5 * group_depth)
  local turn = 0.2 * math.sin(a)   -- group 7 turns back and forth by up to 0.4 rad
  sc:set_rotation(groups[7], 0, math.sin(turn / 2), 0, math.cos(turn / 2))
  sc:set_translation(ball, ball_at(a)) -- the lookers follow it from the next frame's plans
  sc:update()
  morph_weights() -- counted with the scene
  local t3 = clock()
  -- 4. CPU skinning of every character, all threads (morph targets applied
  -- in the same pass)
  batch:run()
  local t4 = clock()
  times[1][f] = (t2 - t1b + fox_run) * 1e3
  times[8][f] = (t1 - t0 + t1b - t1 - fox_run) * 1e3 -- speeds set, machines stepped
  times[9][f], times[10][f] = (t3 - t2) * 1e3, (t4 - t3) * 1e3
  local fox_t, man_t = kinds[1].plan:timings(), kinds[2].plan:timings()
  for s, key in ipairs(PLAN_KEYS) do times[s + 1][f] = fox_t[key] + man_t[key] end

  if not opt.no_pictures then
    for n, k in ipairs(kinds) do
      local d = k.clips[k.sheet_clip]:duration()
      local slot = sheet[n]
      local t = f * DT
      if #slot < 8 and t >= #slot * d / 8 then capture(k, slot, t) end
    end
  end
  if f % 5 == 0 or f == FRAMES then bar(f) end
end
local wall = clock() - t_start

-- ---- report ----------------------------------------------------------------

print(("\nlimber demo: %d characters (%d Fox, %d CesiumMan), %d joints, %d skinned vertices"
  .. " per frame"):format(N, kinds[1].count, kinds[2].count, joints_total, verts_total))
print(("%d frames, %d thread(s) for the plans and the skinning, SIMD kernels: %s"):format(FRAMES,
  used_threads, select(3, core.simd())))
print(C.interpreter_line())
print(("LOD tiers by distance from a camera at x = %.1f, z = %.1f (the crowd's left edge; "
  .. "instance 1 of each kind every frame):"):format(CAMERA.x, CAMERA.z))
for _, e in ipairs(TIERS) do
  print(("  %-12s %6d (%d Fox, %d CesiumMan)"):format(TIER_NAME[e], tier_count[e],
    tier_kind[e][1], tier_kind[e][2]))
end
print(("instances evaluated per frame: %.1f (mean) of %d (%.3f of the crowd)"):format(
  evaluated / FRAMES, N, evaluated / FRAMES / N))
do -- the foxes' machines at the last frame (instance 1 plays Walk without one)
  local fox, states = kinds[1], { idle = 0, move = 0 }
  for i = 2, fox.count do
    local st = fox.ctl:state(i, "base")
    states[st] = states[st] + 1
  end
  print(("fox state machines (idle: Survey; move: Walk / Run blend space by speed, synced): "
    .. "%d idle, %d moving at the end"):format(states.idle, states.move))
  print(("fox layers: flinches under the ball %d (additive 'hit' layer: a clip made in Lua, "
    .. "stopped by a finished callback), look-arounds %d (override 'upper' layer masked at the "
    .. "neck: Survey over the walk)"):format(counts.flinches, counts.looks))
end
print(("%-18s %12s %12s"):format("stage", "median ms", "min ms"))
local total_med, total_min = 0, 0
for s, name in ipairs(STAGES) do
  local med, min = C.stats(times[s])
  if WALL[s] then total_med, total_min = total_med + med, total_min + min end
  print(("%-18s %12.3f %12.3f"):format(name, med, min))
end
print(("%-18s %12.3f %12.3f"):format("frame (sum)", total_med, total_min))
print(("(the indented plan stages are CPU time summed over the %d thread(s); frame (sum) adds the"
  .. " others)"):format(used_threads))
local skin_med = C.stats(times[10])
print(("skinning: %.1f M vertices/s; whole pipeline: %.1f frames/s (%.2f s wall%s)")
  :format(verts_total / skin_med / 1e3, 1e3 / total_med, wall,
    opt.no_pictures and "" or ", incl. pictures"))

if opt.no_pictures then return end

-- The top view shows the whole crowd at the last frame as full-rate
-- evaluation gives it: the instances LOD skipped on the last run (they keep
-- palettes and heads of their last evaluation, up to 3 frames old) are
-- evaluated at their current time, outside the timed frames, and skinned
-- again; then every instance is mirrored to the view plans for its bones.
for _, k in ipairs(kinds) do
  for i = 1, k.count do k.plan:set_lod(i, 1) end
  k.plan:run(0)
end
sc:update()
batch:run()
for _, k in ipairs(kinds) do view_diff = math.max(view_diff, mirror(k, 1, k.count)) end

-- ---- pictures --------------------------------------------------------------
-- Both pictures are SVG written here (a few lines of text per figure), then
-- rendered to PNG by rsvg-convert (librsvg, Debian package librsvg2-bin) when
-- it is installed.

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
assert(C.execute("mkdir -p " .. shell_quote(opt.out)), "demo: cannot create " .. opt.out)

-- A small SVG writer: figures are collected as lines of text and saved in
-- one piece. Coordinates are pixels (y down), written to a tenth of a pixel.
local function svg_writer(width, height, background)
  local out = {
    ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
      .. 'font-family="sans-serif" font-size="12">'):format(width, height, width, height),
    ('<rect width="%d" height="%d" fill="%s"/>'):format(width, height, background),
  }
  local w = { width = width, height = height, figures = 0 }
  local function add(line)
    out[#out + 1] = line
    w.figures = w.figures + 1
  end
  -- a closed polyline, filled: pts = { x1, y1, x2, y2, ... }; class: an
  -- optional class attribute (what the figure is, for readers of the file)
  function w.polygon(pts, fill, stroke, class)
    local xy = {}
    for k = 1, #pts, 2 do xy[#xy + 1] = ("%.1f,%.1f"):format(pts[k], pts[k + 1]) end
    add(('<polygon points="%s" fill="%s"%s%s/>'):format(table.concat(xy, " "), fill,
      stroke and (' stroke="%s" stroke-width="0.8"'):format(stroke) or "",
      class and (' class="%s"'):format(class) or ""))
  end
  function w.line(x1, y1, x2, y2, stroke, width_px, class)
    add(('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f"%s/>')
      :format(x1, y1, x2, y2, stroke, width_px, class and (' class="%s"'):format(class) or ""))
  end
  function w.rect(x, y, width_px, height_px, fill, opacity)
    add(('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="%.2f"/>')
      :format(x, y, width_px, height_px, fill, opacity))
  end
  function w.circle(cx, cy, r, fill, stroke)
    add(('<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s"%s/>'):format(cx, cy, r, fill,
      stroke and (' stroke="%s" stroke-width="0.8"'):format(stroke) or ""))
  end
  function w.text(x, y, s, fill)
    local escaped = s:gsub("[&<>]", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;" })
    add(('<text x="%.1f" y="%.1f"%s>%s</text>'):format(x, y,
      fill and (' fill="%s"'):format(fill) or "", escaped))
  end
  function w.save(path)
    local fh = assert(io.open(path, "w"))
    fh:write(table.concat(out, "\n"), "\n</svg>\n")
    fh:close()
  end
  return w
end

local function hex(color, f)
  f = f or 1
  return ("#%02x%02x%02x"):format(math.floor(color[1] * f), math.floor(color[2] * f),
    math.floor(color[3] * f))
end

local function shade(color, nx, ny, nz)
  local l = math.abs(nx * 0.3 + ny * 0.8 + nz * 0.5) / math.sqrt(0.98)
  return hex(color, 0.35 + 0.65 * l)
end

-- (1) contact sheet: one Fox and one CesiumMan at 8 times, seen from the side
-- (orthographic: horizontal = the model axis the character walks along,
-- vertical = model y), triangles painted back to front, skeleton lines on top.
local CELL, PAD = 180, 18
local svg = svg_writer(8 * CELL, 2 * CELL + 20, "#f4f1ea")
for n, k in ipairs(kinds) do
  local frames = sheet[n]
  local H, D = k.side, 4 - k.side   -- horizontal and depth axes (1 = x, 3 = z)
  -- one scale for the row: the extent over every captured frame
  local lo_h, hi_h, lo_v, hi_v = math.huge, -math.huge, math.huge, -math.huge
  for _, fr in ipairs(frames) do
    local p = fr.positions
    for v = 0, k.vertices - 1 do
      local h, vv = p[v * 3 + H], p[v * 3 + 2]
      lo_h, hi_h = math.min(lo_h, h), math.max(hi_h, h)
      lo_v, hi_v = math.min(lo_v, vv), math.max(hi_v, vv)
    end
  end
  local scale = (CELL - 2 * PAD) / math.max(hi_h - lo_h, hi_v - lo_v)
  local tris = {}
  local idx = C.values(k.indices)
  for c, fr in ipairs(frames) do
    local ox, oy = (c - 1) * CELL, (n - 1) * CELL + 20
    local function px(h) return ox + PAD + (h - lo_h) * scale end
    local function py(v) return oy + CELL - PAD - (v - lo_v) * scale end
    svg.text(ox + 4, oy + 12, ("%s t=%.2fs"):format(k.name, fr.t))
    local p = fr.positions
    local count = 0
    for t = 1, #k.indices, 3 do
      local a, b, d = idx[t] * 3, idx[t + 1] * 3, idx[t + 2] * 3
      local e1 = { p[b + 1] - p[a + 1], p[b + 2] - p[a + 2], p[b + 3] - p[a + 3] }
      local e2 = { p[d + 1] - p[a + 1], p[d + 2] - p[a + 2], p[d + 3] - p[a + 3] }
      local nx, ny, nz = e1[2] * e2[3] - e1[3] * e2[2], e1[3] * e2[1] - e1[1] * e2[3],
          e1[1] * e2[2] - e1[2] * e2[1]
      local len = math.sqrt(nx * nx + ny * ny + nz * nz)
      if len > 0 then
        count = count + 1
        tris[count] = { depth = p[a + D] + p[b + D] + p[d + D],
          { px(p[a + H]), py(p[a + 2]), px(p[b + H]), py(p[b + 2]), px(p[d + H]), py(p[d + 2]) },
          shade(k.color, nx / len, ny / len, nz / len) }
      end
    end
    for t = count + 1, #tris do tris[t] = nil end
    table.sort(tris, function(x, y) return x.depth < y.depth end)
    for _, tri in ipairs(tris) do svg.polygon(tri[1], tri[2]) end
    for j = 1, k.skel:joint_count() do
      local pj = k.skel:parent(j)
      local m = fr.joints[j]
      if pj then
        local q = fr.joints[pj]
        svg.line(px(q[12 + H]), py(q[14]), px(m[12 + H]), py(m[14]), "#202020", 1.5)
      end
      svg.circle(px(m[12 + H]), py(m[14]), 2, "#c00000")
    end
  end
end
local sheet_svg = opt.out .. "/contact-sheet.svg"
svg.save(sheet_svg)

-- (2) the crowd from above at the last frame (x right, z down), fitted to
-- the picture with the camera. Each character is its outline, its bones and,
-- for every tenth one, its hat, all placed by its scene node: the outline
-- joins the farthest skinned vertex in each of OUTLINE directions around the
-- centre of its vertices. Its LOD tier sets the shade: the model's colour
-- for every frame, darker for every 2nd, darkest for every 4th; the camera
-- is a white triangle looking at the crowd, the legend in the bottom right.
local W, MARGIN, OUTLINE = 1024, 10, 48
local m = {}
local function world_xz(x, y, z)  -- a model-space point of the node whose world is m
  return m[1] * x + m[5] * y + m[9] * z + m[13], m[3] * x + m[7] * y + m[11] * z + m[15]
end
local GAZE_PX = 16 -- the gaze lines' length in the picture
local function outline(p, count)
  local xs, zs, cx, cz = {}, {}, 0, 0
  for v = 1, count do
    local x, z = world_xz(p[3 * v - 2], p[3 * v - 1], p[3 * v])
    xs[v], zs[v], cx, cz = x, z, cx + x, cz + z
  end
  cx, cz = cx / count, cz / count
  local far, best = {}, {}
  for v = 1, count do
    local dx, dz = xs[v] - cx, zs[v] - cz
    local b = math.floor((C.atan2(dz, dx) / (2 * math.pi) + 0.5) * OUTLINE) % OUTLINE + 1
    local d = dx * dx + dz * dz
    if d > (far[b] or -1) then far[b], best[b] = d, v end
  end
  local pts = {}
  for b = 1, OUTLINE do
    local v = best[b]
    if v then
      pts[#pts + 1] = xs[v]
      pts[#pts + 1] = zs[v]
    end
  end
  return pts
end
-- world x, z of every figure first, then one scale for all
local TIER_SHADE = { [1] = 1, [2] = 0.65, [4] = 0.38 }
local shapes, bones, tips, gazes = {}, {}, {}, {}
for _, k in ipairs(kinds) do
  local positions = k.out:position_buffer()
  for i = 1, k.count do
    local every = k.every[i]
    local shade_f = TIER_SHADE[every]
    local stroke = hex(k.color, 0.45 * shade_f)
    sc:world(k.nodes[i], m)
    shapes[#shapes + 1] = { fill = hex(k.color, shade_f), stroke = stroke,
      class = ("%s every-%d"):format(k.name, every),
      outline(C.values(positions, (i - 1) * k.vertices + 1, k.vertices), k.vertices) }
    for j = 1, k.skel:joint_count() do
      local pj = k.skel:parent(j)
      if pj then
        local a, b = k.view_pose:model(i, pj), k.view_pose:model(i, j)
        local ax, az = world_xz(a[13], a[14], a[15])
        local bx, bz = world_xz(b[13], b[14], b[15])
        bones[#bones + 1] = { stroke, ax, az, bx, bz }
      end
    end
    local _, looks = k.plan:ik(2, i)
    if looks > 0 then
      -- a looker: where its head's forward axis points, seen from above
      local h, f = k.view_pose:model(i, k.head), k.gaze
      local hx, hz = world_xz(h[13], h[14], h[15])
      local fx, fz = world_xz(h[13] + h[1] * f[1] + h[5] * f[2] + h[9] * f[3],
        h[14] + h[2] * f[1] + h[6] * f[2] + h[10] * f[3],
        h[15] + h[3] * f[1] + h[7] * f[2] + h[11] * f[3])
      gazes[#gazes + 1] = { hx, hz, fx - hx, fz - hz }
    end
  end
end
local ball_w = sc:world(ball)
for h, id in ipairs(hats) do
  sc:world(id, m)
  tips[h] = { m[13], m[15] }
end
local lo_x, hi_x = math.min(CAMERA.x, math.huge), math.max(CAMERA.x, -math.huge)
local lo_z, hi_z = math.min(CAMERA.z, math.huge), math.max(CAMERA.z, -math.huge)
for _, shape in ipairs(shapes) do
  local pts = shape[1]
  for k = 1, #pts, 2 do
    lo_x, hi_x = math.min(lo_x, pts[k]), math.max(hi_x, pts[k])
    lo_z, hi_z = math.min(lo_z, pts[k + 1]), math.max(hi_z, pts[k + 1])
  end
end
local pxs = (W - 2 * MARGIN) / math.max(hi_x - lo_x, hi_z - lo_z)
local ox = MARGIN + ((W - 2 * MARGIN) - (hi_x - lo_x) * pxs) / 2
local oz = MARGIN + ((W - 2 * MARGIN) - (hi_z - lo_z) * pxs) / 2
local function tx(x) return ox + (x - lo_x) * pxs end
local function tz(z) return oz + (z - lo_z) * pxs end
local top = svg_writer(W, W, hex({ 70, 92, 60 }))
for _, shape in ipairs(shapes) do
  local pts = shape[1]
  for k = 1, #pts, 2 do pts[k], pts[k + 1] = tx(pts[k]), tz(pts[k + 1]) end
  top.polygon(pts, shape.fill, shape.stroke, shape.class)
end
-- the camera (the triangle's base on its point, the tip towards the crowd)
-- and a legend in the bottom right corner (where the last row ends)
local cx, cz = tx(CAMERA.x), tz(CAMERA.z)
top.polygon({ cx, cz - 8, cx, cz + 8, cx + 14, cz }, "#ffffff", "#202020", "camera")
top.rect(W - MARGIN - 670, W - MARGIN - 22, 670, 22, "#1e2a1a", 0.7)
top.text(W - MARGIN - 664, W - MARGIN - 7, "LOD by distance from the camera (triangle): "
  .. "bright every frame, darker every 2nd, darkest every 4th", "#ffffff")
for _, bone in ipairs(bones) do
  top.line(tx(bone[2]), tz(bone[3]), tx(bone[4]), tz(bone[5]), bone[1], 0.8)
end
for _, tip in ipairs(tips) do top.circle(tx(tip[1]), tz(tip[2]), 3, "#f0e63c", "#3c3a10") end
-- the ball the lookers' heads aim at (look-at IK), and their gaze lines
top.circle(tx(ball_w[13]), tz(ball_w[15]), 7, "#e8413c", "#ffffff")
for _, g in ipairs(gazes) do
  local l = math.sqrt(g[3] * g[3] + g[4] * g[4])
  if l > 0 then
    local x0, z0 = tx(g[1]), tz(g[2])
    local x1 = math.min(1023, math.max(1, x0 + GAZE_PX * g[3] / l))
    local z1 = math.min(1023, math.max(1, z0 + GAZE_PX * g[4] / l))
    top.line(x0, z0, x1, z1, "#ffffff", 1.2, "gaze")
  end
end
local crowd_svg = opt.out .. "/crowd-top.svg"
top.save(crowd_svg)
print(("pictures: %s (%d + %d frames), %s (%d characters, %d bones, %d hats, %d looking at"
  .. " the ball)"):format(sheet_svg, #sheet[1], #sheet[2], crowd_svg, N, #bones, #hats, #gazes))
print(("bones from the view plans (models = \"all\"): their head matrices differ from the timed "
  .. "plans' by %.3g at most"):format(view_diff))

-- PNGs of both, at the SVGs' sizes. rsvg-convert is not ours: it runs
-- without the sanitizer runtime that the test command preloads into lua5.4.
if not C.execute("command -v rsvg-convert >/dev/null 2>&1") then
  print("no PNGs: rsvg-convert is not installed (Debian: apt-get install librsvg2-bin, "
    .. "or bash scripts/deps.sh); the SVG files open in any web browser")
  return
end
local pngs = {}
for _, pic in ipairs({ { sheet_svg, svg }, { crowd_svg, top } }) do
  local png = pic[1]:gsub("%.svg$", ".png")
  local cmd = ("LD_PRELOAD= rsvg-convert --width %d --height %d --output %s %s")
    :format(pic[2].width, pic[2].height, shell_quote(png), shell_quote(pic[1]))
  if not C.execute(cmd) then
    io.stderr:write("demo: rsvg-convert failed: ", cmd, "\n")
    os.exit(1, true)
  end
  pngs[#pngs + 1] = png
end
print(("PNG (rsvg-convert): %s"):format(table.concat(pngs, ", ")))
