-- Soak test: a long random session on a small scene, checking results
-- against a from-scratch computation and watching memory.
--
--   lua5.4 examples/soak.lua [--frames 1000000] [--report N] [--seed S] [--quiet]
--
-- Every frame runs the whole pipeline (players, sampling + blending,
-- local-to-model, scene update, palettes, CPU skinning) on a few Fox and
-- CesiumMan characters, while random operations hit the scene: SRT changes,
-- re-parenting (cycles must be refused and change nothing), creating and
-- destroying subtrees, clip changes with cross-fades, thread count changes;
-- every 20,000 frames the models are dropped and loaded again with a new
-- scene. World matrices are compared with a plain recursive computation from
-- a shadow copy of the scene kept here. Lua memory and process RSS are
-- printed every N frames; at the end the run fails if memory kept growing
-- after warm-up, or on any mismatch.
local here = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local C = require "common"
local limber = require "limber"
local gltf, anim, scene, sk = limber.gltf, limber.anim, limber.scene, limber.skinning

local opt = C.options(arg,
  { frames = 1000000, report = 0, seed = 1, quiet = false, reload = 20000 })
local FRAMES = C.tointeger(opt.frames) or error("--frames must be an integer")
local REPORT = opt.report > 0 and C.tointeger(opt.report) or math.max(1, math.floor(FRAMES / 20))
math.randomseed(C.tointeger(opt.seed) or 1)
local DT = 1 / 60
local RELOAD_EVERY = C.tointeger(opt.reload) or 20000
local FREE_NODES = 40

-- ---- plain matrices in double precision (limber.math), the reference the C
-- scene is checked against --------------------------------------------------

local lmath = require "limber.math"
local mul = lmath.mul_raw
local function trs(t, q, s)
  local n = math.sqrt(q[1] ^ 2 + q[2] ^ 2 + q[3] ^ 2 + q[4] ^ 2)
  return lmath.trs_raw(t, { q[1] / n, q[2] / n, q[3] / n, q[4] / n }, s)
end

local function rand_quat()
  local q = { math.random() - 0.5, math.random() - 0.5, math.random() - 0.5, math.random() - 0.5 }
  local n = math.sqrt(q[1] ^ 2 + q[2] ^ 2 + q[3] ^ 2 + q[4] ^ 2)
  if n < 1e-3 then return { 0, 0, 0, 1 } end
  return { q[1] / n, q[2] / n, q[3] / n, q[4] / n }
end

local function rss_kb()
  local f = io.open("/proc/self/statm")
  if not f then return 0 end
  local _, res = f:read("*n", "*n")
  f:close()
  return res * 4
end

-- ---- the session ------------------------------------------------------------

local assets = C.root .. "/examples/assets/"
local MODELS = { { file = assets .. "Fox/Fox.glb", count = 3, scale = 0.012 },
                         { file = assets .. "CesiumMan/CesiumMan.gltf", count = 2, scale = 1 } }

local world -- everything of the current session (dropped at each reload)
local checks, mismatches, refused_cycles, reloads = 0, 0, 0, 0

local function build()
  world = { kinds = {}, shadow = {}, free = {}, chars = {} }
  local sc = scene.new({ capacity = 16 })
  world.scene = sc
  local jobs = {}
  for k, m in ipairs(MODELS) do
    local asset = gltf.load(m.file)
    local kind = { asset = asset }
    kind.pose = gltf.pose(asset, 1, m.count)
    kind.palette = gltf.palette(asset, kind.pose, { skin = 1, layout = "mat4" })
    local prim = asset.meshes[asset.skinned_nodes[1].mesh].primitives[1]
    kind.mesh = sk.mesh(prim)
    kind.out = sk.target({ mesh = kind.mesh, instances = m.count, positions = true })
    kind.clips = {}
    for a, an in ipairs(asset.animations) do kind.clips[a] = an.clips[1] end
    kind.crowd = anim.crowd(kind.pose, kind.clips)
    for i = 1, m.count do
      kind.crowd:player(i):play(math.random(#kind.clips), { time = math.random(), loop = true })
      local id = sc:create({ pose = kind.pose, instance = i, translation = { k * 3, 0, i * 2 },
                             scale = { m.scale, m.scale, m.scale } })
      world.shadow[id] = { parent = 0, t = { k * 3, 0, i * 2 }, r = { 0, 0, 0, 1 },
                           s = { m.scale, m.scale, m.scale }, pose = kind.pose, instance = i }
      world.chars[#world.chars + 1] = id
    end
    jobs[k] = { mesh = kind.mesh, palette = kind.palette, target = kind.out }
    world.kinds[k] = kind
  end
  world.batch = sk.batch(jobs)
end

-- ids of the shadow's descendants of `id` (including it)
local function subtree(id)
  local out, shadow = { id }, world.shadow
  local k = 1
  while k <= #out do
    local p = out[k]
    for c, rec in pairs(shadow) do
      if rec.parent == p then out[#out + 1] = c end
    end
    k = k + 1
  end
  return out
end

local function is_descendant(id, of)
  local shadow = world.shadow
  local q = id
  while q ~= 0 do
    if q == of then return true end
    q = shadow[q].parent
  end
  return false
end

local function free_list()
  local list = {}
  for id in pairs(world.free) do list[#list + 1] = id end
  table.sort(list)
  return list
end

local function create_free()
  local sc = world.scene
  local parents = free_list()
  for _, c in ipairs(world.chars) do parents[#parents + 1] = c end
  local parent = math.random() < 0.3 and 0 or parents[math.random(#parents)] or 0
  local rec = { parent = parent, t = { math.random() - 0.5, math.random(), math.random() - 0.5 },
                r = rand_quat(),
                s = { 0.5 + math.random(), 0.5 + math.random(), 0.5 + math.random() } }
  local slot
  local prec = world.shadow[parent]
  if prec and prec.pose and math.random() < 0.5 then
    slot = math.random(#prec.pose:skeleton())
    rec.joint = slot
  end
  local id = sc:create({ parent = parent ~= 0 and parent or nil, slot = slot, translation = rec.t,
                         rotation = rec.r, scale = rec.s })
  world.shadow[id], world.free[id] = rec, true
end

local function reference_world(id, memo)
  if memo[id] then return memo[id] end
  local rec = world.shadow[id]
  local m = trs(rec.t, rec.r, rec.s)
  if rec.parent ~= 0 then
    local base = reference_world(rec.parent, memo)
    if rec.joint then
      local prec = world.shadow[rec.parent]
      base = mul(base, prec.pose:model(prec.instance, rec.joint))
    end
    m = mul(base, m)
  end
  memo[id] = m
  return m
end

local function check(n)
  local memo, out = {}, {}
  local ids = free_list()
  for _, c in ipairs(world.chars) do ids[#ids + 1] = c end
  for _ = 1, n do
    local id = ids[math.random(#ids)]
    local ref = reference_world(id, memo)
    world.scene:world(id, out)
    local worst = 0
    for e = 1, 16 do
      worst = math.max(worst, math.abs(ref[e] - out[e]) / math.max(1, math.abs(ref[e])))
    end
    checks = checks + 1
    if not (worst < 1e-3) then -- luacheck: ignore 581 (NaN must count as a mismatch)
      mismatches = mismatches + 1
      io.stderr:write(("soak: node %d differs from the reference by %g\n"):format(id, worst))
    end
  end
end

local function random_op()
  local sc, shadow = world.scene, world.shadow
  local ids = free_list()
  local r = math.random()
  if #ids < FREE_NODES or r < 0.02 then
    create_free()
  elseif r < 0.35 then
    local id = ids[math.random(#ids)]
    local rec = shadow[id]
    rec.t = { math.random() - 0.5, math.random(), math.random() - 0.5 }
    rec.r = rand_quat()
    sc:set_trs(id, rec.t, rec.r, nil)
  elseif r < 0.40 then
    -- re-parent below another free node, a character or the root; a cycle must be refused
    local id = ids[math.random(#ids)]
    local cands = { 0 }
    for _, c in ipairs(ids) do cands[#cands + 1] = c end
    for _, c in ipairs(world.chars) do cands[#cands + 1] = c end
    local p = cands[math.random(#cands)]
    if p ~= 0 and is_descendant(p, id) then
      local ok = pcall(sc.set_parent, sc, id, p)
      if ok then error("soak: a cycle was accepted") end
      refused_cycles = refused_cycles + 1
    else
      sc:set_parent(id, p ~= 0 and p or nil)
      shadow[id].parent, shadow[id].joint = p, nil
    end
  elseif r < 0.42 then
    local id = ids[math.random(#ids)]
    local gone = subtree(id)
    sc:destroy(id)
    for _, g in ipairs(gone) do shadow[g], world.free[g] = nil, nil end
  elseif r < 0.43 then
    local kind = world.kinds[math.random(#world.kinds)]
    local p = kind.crowd:player(math.random(kind.pose:instance_count()))
    p:play(math.random(#kind.clips), { fade = 0.25, rate = 0.5 + math.random() })
  elseif r < 0.431 then
    sk.threads(math.random(2))
  end
end

-- ---- run --------------------------------------------------------------------

local clock = limber.core.clock
local t0 = clock()
local samples = {}
build()
if not opt.quiet then
  print(("%10s %12s %12s %10s"):format("frame", "Lua KiB", "RSS KiB", "s"))
end
for f = 1, FRAMES do
  if f % RELOAD_EVERY == 0 then
    world = nil
    collectgarbage()
    build()
    reloads = reloads + 1
  end
  for _ = 1, 2 do random_op() end
  for _, kind in ipairs(world.kinds) do
    kind.crowd:advance(DT)
    kind.crowd:evaluate()
    kind.pose:local_to_model()
  end
  world.scene:update()
  for _, kind in ipairs(world.kinds) do kind.palette:update() end
  world.batch:run()
  if math.random() < 0.002 then check(8) end
  if f % REPORT == 0 then
    collectgarbage()
    local lua_kb, rss = collectgarbage("count"), rss_kb()
    samples[#samples + 1] = { f = f, lua = lua_kb, rss = rss }
    if not opt.quiet then
      print(("%10d %12.0f %12d %10.1f"):format(f, lua_kb, rss, clock() - t0))
    end
  end
end
check(50)

-- memory is flat when nothing after warm-up (the first quarter of the
-- reports) exceeds the warm-up peak by more than 5% + 1 MiB
local warm = math.max(1, math.floor(#samples / 4))
local peak_lua, peak_rss, late_lua, late_rss = 0, 0, 0, 0
for i, s in ipairs(samples) do
  if i <= warm then
    peak_lua, peak_rss = math.max(peak_lua, s.lua), math.max(peak_rss, s.rss)
  else
    late_lua, late_rss = math.max(late_lua, s.lua), math.max(late_rss, s.rss)
  end
end
local flat = #samples < 4
  or (late_lua <= peak_lua * 1.05 + 1024 and late_rss <= peak_rss * 1.05 + 1024)
print(("soak: %d frames in %.1f s, %d reloads, %d world checks, %d mismatches, %d cycles refused")
  :format(FRAMES, clock() - t0, reloads, checks, mismatches, refused_cycles))
print(("memory after warm-up: Lua peak %.0f -> %.0f KiB, RSS peak %d -> %d KiB: %s")
  :format(peak_lua, late_lua, peak_rss, late_rss, flat and "flat" or "GROWING"))
os.exit((mismatches == 0 and flat) and 0 or 1, true)  -- close the state: frees everything
