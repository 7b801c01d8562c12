--- The binding fuzzer: random sequences of calls on every public function of
-- limber's modules and every method and metamethod of every class it can
-- reach (found by walking the module tables and the objects' metatables, so
-- new functions are covered without editing this file), with wrong types,
-- NaN / inf / -0, integers across the whole 64-bit range, tables whose
-- __len / __index lie, objects of the wrong class and right classes in wrong
-- combinations.
--
-- A run fails on:
--   * a signal or sanitizer report (the process dies: the caller sees it);
--   * an error value that is not a string;
--   * a raw Lua error leaking out of limber's own Lua code ("attempt to index
--     a nil value", "bad argument #1 to 'ipairs'", ...) instead of an error
--     that names the limber function and the problem;
--   * a call that raised but changed an object it was given (or one those
--     objects read: a sampler's pose, a palette's buffer, ...);
--   * a NaN in what a call returned when every number it was given was
--     finite;
--   * a call that runs Lua code for too long (a hang).
--
-- Usage (spec/binding_fuzz_spec.lua runs it in a child process):
--   lua5.4 spec/fuzz_binding.lua [--seed N] [--calls N] [--lpath P] [--cpath P] [--quiet]
--     [--all 1] [--trace FILE]
--   --all 1: report every distinct failure and go on (for triage);
--   --trace FILE: write each call to FILE before making it;
--   --only PREFIX: call only the functions whose names start with PREFIX.
-- Exit status 0 and a last line "fuzz_binding: ok ..." when nothing was found;
-- 1 and the failure with the calls that led to it otherwise.
local H = require "spec.helper"
local opts = { seed = os.time(), calls = 20000, quiet = false }
do
  local k = 1
  while arg and arg[k] do
    local a = arg[k]
    if a == "--quiet" then opts.quiet = true; k = k + 1
    elseif a:match("^%-%-") and arg[k + 1] then opts[a:sub(3)] = arg[k + 1]; k = k + 2
    else io.stderr:write("fuzz_binding: unknown argument ", a, "\n"); os.exit(2) end
  end
end
opts.seed, opts.calls = H.tointeger(tonumber(opts.seed)), H.tointeger(tonumber(opts.calls))
assert(opts.seed and opts.calls, "fuzz_binding: --seed and --calls take integers")
if opts.lpath then package.path = opts.lpath .. ";" .. package.path end
if opts.cpath then package.cpath = opts.cpath .. ";" .. package.cpath end
local root = (arg and arg[0] or ""):match("^(.*)spec/[^/]*$") or "./"

math.randomseed(opts.seed)
local rnd = math.random

local limber = require "limber"
local MODULES = { "limber", "limber.core", "limber.gltf", "limber.anim", "limber.scene", "limber.skinning",
                  "limber.snapshot", "limber.controller", "limber.ik", "limber.retarget" }

-- ---------------------------------------------------------------------------
-- The pool of live objects calls draw from and add to.

local pool, MAXPOOL = {}, 48
local function classof(v)
  local mt = getmetatable(v)
  if type(mt) == "table" then
    local n = rawget(mt, "__name")
    if type(n) == "string" then return n end
  end
  return nil
end
local function add(v)
  if classof(v) == nil then return end
  for _, p in ipairs(pool) do if p == v then return end end
  if #pool < MAXPOOL then pool[#pool + 1] = v; return end
  -- full: v replaces an object whose class has another one in the pool, so
  -- that no class once met leaves it (with --only, the class called must
  -- keep an object to call)
  local count = {}
  for _, p in ipairs(pool) do
    local c = classof(p)
    count[c] = (count[c] or 0) + 1
  end
  local start = rnd(#pool)
  for k = 0, #pool - 1 do
    local at = (start + k - 1) % #pool + 1
    if count[classof(pool[at])] > 1 then pool[at] = v; return end
  end
  pool[start] = v
end
-- Calls that worked: templates that later calls mutate one argument of, so
-- the fuzzer reaches deep into functions whose arguments must mostly be
-- right before anything interesting happens.
local successes, MAXSUCC = {}, 400
local function remember(name, fn, args, nargs)
  local e = { name = name, fn = fn, args = args, nargs = nargs }
  if #successes < MAXSUCC then successes[#successes + 1] = e else successes[math.random(#successes)] = e end
end
local function try(f, ...)
  local ok, v = pcall(f, ...)
  if ok then
    add(v)
    remember("seed call", f, H.tpack(...), select("#", ...))
  end
  return ok and v or nil
end

local names = { "root", "hip", "knee", "hand", "Walk", "Run", "b_Head_05", "mat4", "mat3x4", "full", "rigid",
                "translation", "rotation", "scale", "weights", "f32", "u8", "u16", "u32", "LINEAR", "STEP",
                "CUBICSPLINE", "avx2", "avx512", "portable", "positions", "normals", "loop", "once" }

local function build_pool()
  local core = limber.core
  local skel = try(limber.skeleton, {
    { name = "root" }, { name = "hip", parent = "root", translation = { 0, 1, 0 } },
    { name = "knee", parent = "hip", translation = { 0, -0.4, 0 } },
    { name = "hand", parent = "root", rotation = { 0, 0, 0.6, 0.8 } } })
  local pose = skel and try(limber.pose, skel, 3)
  if pose then try(limber.pose, skel, 2) end
  local skin = skel and try(limber.skin, skel)
  if pose then
    try(limber.palette, pose)
    try(limber.palette, pose, skin, { layout = "mat3x4" })
  end
  local buf = try(core.buffer, "f32", 3, 8)
  try(core.buffer, "u16", 4, 8)
  try(core.buffer, "u32", 1, 16)
  if buf then
    try(buf.set, buf, 2, { 1, 2, 3 })
    try(buf.get, buf, 2)
    try(buf.bytes, buf, 2, 3)
    try(buf.set_bytes, buf, 1, ("\0"):rep(12))
  end
  try(core.follow_filter, { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 5, 0, 0, 1 }, "rigid")
  if skel and pose then -- IK solvers (root -> hip -> knee), solved once
    local leg = try(limber.ik.two_bone, skel, "root", "hip", "knee", { soften = 0.95 })
    if leg then try(leg.solve, leg, pose, { 0.2, -0.5, 0.1 }, { 0, 0, 1 }, 0.7, 2) end
    local aim = try(limber.ik.aim, skel, "hip", { forward = { 0, -1, 0 }, up = { 0, 0, 1 },
      effector = "knee", limit = 1 })
    if aim then try(aim.solve, aim, pose, { 1, -1, 0 }, { 0, 0, 1 }) end
  end
  local anim, scene, gltf, skinning = limber.anim, limber.scene, limber.gltf, limber.skinning
  local ikplan -- a plan with IK constraints, made below once the clips exist
  local times, moves = { 0, 0.5, 1 }, { 0, 0, 0, 0, 1, 0, 0, 0, 0 }
  -- Walk exact (pack = false: retarget, mirror and pack take exact clips), Run packed (the default)
  local clip = try(anim.clip, { name = "Walk", pack = false, tracks = {
    { joint = "hip", path = "translation", times = times, values = moves },
    { joint = "knee", path = "rotation", times = { 0, 1 }, values = { 0, 0, 0, 1, 0, 0.6, 0, 0.8 } } } }, skel)
  local clip2 = try(anim.clip, { name = "Run", tracks = {
    { joint = 2, path = "scale", interpolation = "STEP", times = { 0, 2 }, values = { 1, 1, 1, 2, 2, 2 } } },
    events = { { time = 0.5, name = "step" } } }, skel)
  if clip and skel then -- retargeted and mirrored clips
    try(limber.retarget.mirror, clip, skel, { axis = "z" })
    try(limber.retarget.clip, clip, skel, skel, { map = { knee = "hip" } })
  end
  if clip then -- a packed clip (and its error report) in the pool
    local packed = try(anim.pack, clip, skel, { tolerance = 1e-3, distance = 0.05 })
    if packed then try(packed.error, packed, clip, skel, 0.1) end
  end
  if pose and clip and clip2 then
    local ctl = try(limber.controller.new, { pose = pose, clips = { clip, clip2 },
      layers = { { name = "base" }, { name = "upper", mask = { root = "knee" } } } })
    if ctl then
      try(ctl.play, ctl, 1, "base", "Walk", { fade = 0.2 })
      try(ctl.update, ctl, 0.1)
      local m = try(limber.controller.machine, { initial = "a",
        states = { a = { clip = "Walk" }, b = { space = { { clip = 1, at = 0 }, { clip = 2, at = 1 } },
                                                param = "x" } },
        transitions = { { from = "a", to = "b", fade = 0.1, when = { { "x", ">", 0.5 } } },
                        { from = "any", to = "a", trigger = "t", at_end = true } } })
      if m then try(ctl.set_machine, ctl, 2, "base", m) end
      local sp2 = try(limber.controller.blend2d, { { clip = 1, at = { 0, 0 } },
        { clip = 2, at = { 1, 0 } }, { clip = 1, at = { 0, 1 } } })
      if sp2 then try(ctl.play_space, ctl, 3, "upper", sp2, { 0.2, 0.3 }) end
      -- markers: a space synced by them and a transition at one
      try(anim.set_events, clip, { { time = 0.25, name = "down" }, { time = 0.75, name = "up" } })
      try(anim.set_events, clip2, { { time = 0.5, name = "step" }, { time = 1.5, name = "down" },
                                    { time = 1.0, name = "up" } })
      local msp = try(limber.controller.blend1d, { { clip = 1, at = 0 }, { clip = 2, at = 1 } },
        { markers = { "down", "up" } })
      if msp then try(ctl.play_space, ctl, 1, "base", msp, 0.4) end
      local mm = try(limber.controller.machine, { initial = "a",
        states = { a = { clip = "Run" }, b = { clip = "Walk" } },
        transitions = { { from = "a", to = "b", at_marker = "step" },
                        { from = "b", to = "a", at_marker = "down", fade = 0.2 } } })
      if mm then try(ctl.set_machine, ctl, 1, "upper", mm) end
      try(ctl.update, ctl, 0.3)
      add(ctl)
    end
    -- state machines and blend spaces in C, on a plan of their own
    local mplan = try(limber.plan, { pose = pose, clips = { clip, clip2 },
      layers = { { sources = 3 }, { sources = 2, mode = "additive" } } })
    local ms = mplan and try(core.machines, mplan)
    local mdef = try(core.machine_def, { states = {
      { transitions = { { when = { { 1, ">", 0.5 }, { 3, "==", true } }, trigger = 2,
                                         at_end = true, at_phase = 0.5, at_marker = true } } },
      { space = true, params = { 1, 4 }, smooth = 0.1, transitions = { { when = { { 1, "<", 0 } } } } } } })
    local msp = try(core.blend_space, { dims = 2, at = { { 0, 0 }, { 1, 0 }, { 0, 1 } },
      durations = { 1, 2, 0 }, tris = { { 1, 2, 3 } }, edges = { { 1, 2 }, { 2, 3 }, { 3, 1 } },
      sync = true })
    try(core.blend_space, { dims = 1, at = { 0, 1 }, durations = { 1, 1 } })
    if ms and mdef and msp then
      try(ms.set_param, ms, 1, 1, 0.7)
      try(ms.set_param, ms, 1, 3, true)
      try(ms.set_run, ms, 1, 1, mdef, 1, 1)
      try(ms.set_run, ms, 2, 1, mdef, 2)
      try(ms.bind, ms, 2, 1, msp, { 1, 2, 3 })
      try(ms.apply, ms, 2, 1, 0.2, 0.3, 0.1)
      try(mplan.play, mplan, 1, 1, 1, 1, 0.5, 1.5, false)
      try(mplan.run, mplan, 0.1)
      try(ms.step, ms, 0.1, {})
      try(ms.update, ms, 0.05, {})
      try(ms.keep, ms, 3)
      try(ms.source, ms, 3, 1, 2)
      try(ms.kept, ms)
      try(ms.set_events, ms, 1, { 0, 0.25, 0.5 }, { 0, 0.25, 0.5 })
      try(ms.events, ms, 0, {})
      try(ms.root_motions, ms, 1)
      try(ms.root_motion, ms, 2, 1)
    end
    local s = try(core.sampler, pose, { clip, clip2 })
    if s then
      try(s.set, s, 1, 1, 0.25, true, 1)
      try(s.set_time, s, 2, 0.5)
      try(s.advance, s, 0.1)
      try(s.run, s, 1, 2)
      try(s.get, s, 1)
      try(s.set_root_motion, s, 1, true, true)
    end
    local p2 = try(core.pose, skel, 3)
    local b = p2 and try(core.blender, pose, { { pose = p2 },
      { pose = p2, additive = true, reference = p2, mask = { 1, 0, 1, 0.5 } } })
    if b then
      try(b.set_weight, b, 1, 2, 0.5)
      try(b.set_layer_weight, b, 1, 0.25)
      try(b.set_mask, b, 1, { 1, 1, 0, 0 })
      try(b.run, b)
    end
    local st = p2 and try(limber.stack, pose, { { sources = { p2 } },
      { mode = "additive", sources = { p2, p2 }, mask = { 1, 0, 1, 0.5 } } })
    if st then
      try(st.set_weight, st, 1, 2, 2, 0.5)
      try(st.set_layer_weight, st, 2, 2, 0.25)
      try(st.run, st)
    end
    local plan = p2 and try(limber.plan, { pose = p2, clips = { clip, clip2 }, slots = { 2 },
      layers = { { name = "base", sources = 2 },
        { mode = "additive", mask = { 1, 0, 1, 0.5 }, reference = { clip = clip, time = 0 } } } })
    if plan then
      try(plan.play, plan, 1, "base", 1, 1, 0.2)
      try(plan.play, plan, 2, "base", 2, clip2, 0.1, 2, false)
      try(plan.set_weight, plan, 1, 1, 2, 0.5, 0.1)
      try(plan.set_lod, plan, 2, 2)
      try(plan.run, plan, 1 / 60)
    end
    -- a plan with IK constraints (one target from the scene below)
    local leg2 = p2 and try(limber.ik.two_bone, skel, "root", "hip", "knee", { keep_tip = true })
    local aim2 = p2 and try(limber.ik.aim, skel, "hip", { forward = { 0, -1, 0 }, up = { 0, 0, 1 } })
    ikplan = leg2 and aim2 and try(limber.plan, { pose = p2, clips = { clip }, models = "all",
      ik = { leg2, aim2 } })
    if ikplan then
      try(ikplan.play, ikplan, 1, 1, 1, 1, 0.3)
      try(ikplan.set_ik, ikplan, 1, 2, { 0.2, -0.5, 0.1 }, { 0, 0, 1 }, 0.5)
      try(ikplan.set_ik, ikplan, 2, 1, core.buffer("f32", 3, { 1, -1, 0, 0, 1, 1 }))
      try(ikplan.run, ikplan, 1 / 60)
    end
    try(pose.set_local, pose, 2, 3, { 1, 2, 3 }, { 0, 0, 0, 1 }, { 1, 1, 1 })
    try(pose.set_root, pose, 1, { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 5, 0, 0, 1 })
    try(pose.local_to_model, pose)
    try(pose.model, pose, 1, 2)
    try(clip.sample_joint, clip, 2, "translation", 0.3, true)
    try(clip.sample_node, clip, 1, 0.3)
    try(anim.step, clip2, 0.1, 0.6, true, function() end)
    try(anim.reference_pose, skel, clip, 0.5)
    local crowd = try(anim.crowd, pose, { clip, clip2 })
    if crowd then
      local p1 = crowd:player(1)
      add(crowd:player(2))
      add(p1)
      try(p1.play, p1, "Walk", { time = 0.1, rate = 1.5 })
      try(p1.play, p1, "Run", { fade = 0.3 })
      try(p1.seek, p1, 0.2)
      try(p1.set_rate, p1, 2)
      try(p1.set_weight, p1, 0.5)
      try(crowd.advance, crowd, 1 / 60)
      try(crowd.evaluate, crowd)
    end
  end
  local sc = try(scene.new)
  local slots = try(scene.slots, { hand = { translation = { 0, 1, 0 } },
    hat = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 2, 0, 1 } })
  if sc then
    local a = try(sc.create, sc, { translation = { 1, 2, 3 }, slots = slots })
    local b = try(sc.create, sc, { parent = a, slot = "hand" })
    local ch = pose and try(sc.create, sc, { pose = pose, instance = 1 })
    if ch then try(sc.create, sc, { parent = ch, slot = "knee", follow = "rigid" }) end
    local c = try(sc.create, sc, { parent = b, scale = { 2, 2, 2 } })
    try(sc.update, sc)
    if ikplan and c then
      try(ikplan.follow_ik, ikplan, 1, 3, sc, c, { frame = a, pole = b, weight = 0.75 })
      try(ikplan.run, ikplan, 0)
    end
    try(sc.world, sc, c)
    try(sc.set_parent, sc, c, a)
  end
  local small = try(core.scene, 2)
  if small then -- a scene that grows, with every kind of edit
    local r = try(small.create, small, { slots = slots })
    local k = try(small.create, small, { parent = r, slot = "hat", follow = "translation" })
    try(small.create, small, { parent = k })
    try(small.set_trs, small, k, { 1, 2, 3 }, { 0, 0, 0, 1 }, { 1, 1, 1 })
    try(small.update, small)
    local out = try(core.buffer, "f32", 16, 4)
    try(small.gather, small, { r, k }, 2, out, 1)
    try(small.world_buffer, small)
    try(small.destroy, small, k)
  end
  -- a bundled model: meshes, skins, clips, skinning
  local path = root .. "examples/assets/RiggedSimple/RiggedSimple.gltf"
  local asset = try(gltf.load, path)
  if asset then
    local gp = try(gltf.pose, asset, 1, 2)
    if gp then try(gltf.palette, asset, gp, { skin = 1, layout = "mat4" }) end
    local prim = asset.meshes and asset.meshes[1] and asset.meshes[1].primitives[1]
    local mesh = prim and try(skinning.mesh, prim)
    local pal = gp and try(gltf.palette, asset, gp, { skin = 1, layout = "mat4" })
    if mesh then
      local out = try(skinning.target, { mesh = mesh, instances = 2, positions = true, normals = true })
      if pal and out then
        try(gp.local_to_model, gp)
        try(pal.update, pal, 1, 2)
        try(skinning.run, mesh, pal, out)
        try(skinning.batch, { { mesh = mesh, palette = pal, target = out } })
        -- morph targets (a dense one and a sparse one) and their weights
        local n = mesh:vertex_count()
        local dense, sparse = {}, {}
        for k = 1, n * 3 do dense[k], sparse[k] = (k % 7) * 0.01, k == 4 and 1 or 0 end
        local morph = try(skinning.morph, mesh, { { positions = dense }, { positions = sparse } })
        local w = try(core.buffer, "f32", 2, { 0.5, 0, 1, 1 })
        if morph and w then
          try(skinning.run, mesh, pal, out, morph, w)
          try(skinning.batch, { { mesh = mesh, palette = pal, target = out, morph = morph, weights = w } })
        end
      end
    end
    add(asset.animations and asset.animations[1] and asset.animations[1].clip)
    add(asset.animations and asset.animations[1] and asset.animations[1].clips
      and asset.animations[1].clips[1]) -- packed at the load's default tolerance
  end
end

-- ---------------------------------------------------------------------------
-- Callables: module functions, then every method / metamethod of the classes
-- met so far (the pool grows as calls return new objects).

local callables, fn_name = {}, {}
local function add_callable(name, fn, class)
  if type(fn) ~= "function" or fn_name[fn] then return end
  fn_name[fn] = name
  if opts.only and name:sub(1, #opts.only) ~= opts.only then return end
  callables[#callables + 1] = { name = name, fn = fn, class = class }
end
-- limber.core.clock reads the clock (not deterministic, harmless); the
-- snapshot writers would create files named by random strings
local skip = { ["limber.core.clock"] = true, ["limber.core.snapshot_write"] = true,
               ["limber.snapshot.write"] = true }
for _, m in ipairs(MODULES) do
  local t = require(m)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = t[k]
    if not skip[m .. "." .. k] then add_callable(m .. "." .. k, v) end
    if type(v) == "table" and k:match("^%u") then -- a class table
      local ks = {}
      for kk in pairs(v) do ks[#ks + 1] = tostring(kk) end
      table.sort(ks)
      for _, kk in ipairs(ks) do add_callable(m .. "." .. k .. ":" .. kk, v[kk], k) end
    end
  end
end
local classes_seen = {}
local function methods_of(v)
  local mt = getmetatable(v)
  if type(mt) ~= "table" then return {} end
  local out = {}
  local idx = rawget(mt, "__index")
  if type(idx) == "function" then -- an __index function over a methods table (Buffer)
    for u = 1, 8 do
      local n, val = debug.getupvalue(idx, u)
      if not n then break end
      if type(val) == "table" then idx = val; break end
    end
  end
  local tables = { idx }
  for k, t in pairs(mt) do -- methods kept in another field of the metatable (Buffer's "methods")
    if type(t) == "table" and t ~= idx and k ~= "__index" then tables[#tables + 1] = t end
  end
  for _, t in ipairs(tables) do
    if type(t) == "table" then
      for k, f in pairs(t) do if type(f) == "function" then out[#out + 1] = { tostring(k), f } end end
    end
  end
  for k, f in pairs(mt) do
    if type(f) == "function" and type(k) == "string" and k:match("^__") then out[#out + 1] = { k, f } end
  end
  table.sort(out, function(a, b) return a[1] < b[1] end)
  return out
end
local function learn(v)
  local c = classof(v)
  if not c or classes_seen[c] then return end
  classes_seen[c] = true
  for _, m in ipairs(methods_of(v)) do add_callable(c .. ":" .. m[1], m[2], c) end
end

-- ---------------------------------------------------------------------------
-- Values.

local NUMBERS = { 0, -0.0, 1, -1, 2, 3, 4, 0.5, -0.5, 1 / 60, 16, 65535, 65536, 2 ^ 31, 2 ^ 32, 2 ^ 53,
                  2 ^ 63, -2 ^ 63, 3e38, -3e38, 3.5e38, 1e308, -1e308, 1e-45, 0 / 0, math.huge, -math.huge,
                  H.int_max, H.int_min, H.int_max - H.int_step, H.int_min + H.int_step, 0x7fffffff,
                  0x80000000, 0xffffffff, 0x100000000, -0x80000000, 1024, 1025, 2 ^ 24 + 1 }
if not H.integers then
  -- numbers are doubles: integers stop being exact at 2^53 (2^53 + 1 is 2^53)
  for _, v in ipairs({ 2 ^ 53 + 2, -2 ^ 53, -2 ^ 53 - 2, 2 ^ 62, -2 ^ 62 }) do NUMBERS[#NUMBERS + 1] = v end
end

local function lying_table(base)
  local calls = 0
  local mt = {}
  local mode = rnd(4)
  mt.__len = function()
    calls = calls + 1
    if mode == 1 then return calls % 2 == 1 and #base or 1000000 end
    if mode == 2 then return calls == 1 and #base or 0 end
    if mode == 3 then return ({ -1, 0 / 0, 2 ^ 63, "7", 1e300 })[rnd(5)] end
    return calls * 3
  end
  mt.__index = function(_, k)
    calls = calls + 1
    if calls % 3 == 0 then return nil end
    if calls % 5 == 0 then return "x" end
    if calls % 7 == 0 then error("lying table") end
    return base[k] or (H.math_type(k) == "integer" and calls) or nil
  end
  return setmetatable({}, mt)
end

local gen
local function number()
  local r = rnd(10)
  if r <= 4 then return rnd(-2, 6) end
  if r <= 8 then return NUMBERS[rnd(#NUMBERS)] end
  return (rnd() - 0.5) * 10 ^ rnd(-3, 40)
end
local function array(n, f)
  local t = {}
  for k = 1, n do t[k] = f() end
  return t
end
local OPTION_KEYS = { "name", "parent", "slot", "follow", "translation", "rotation", "scale", "pose", "instance",
                      "layout", "time", "rate", "fade", "loop", "weight", "mesh", "instances", "positions",
                      "normals", "tangents", "tracks", "joint", "node", "path", "times", "values", "interpolation",
                      "events", "additive", "mask", "layers", "targets", "clips", "first", "count", "max_bytes",
                      "base_dir", "dense", "ignore_missing", "threads", "stride", "offset", "buffer", "matrix",
                      "width", "dirty", "owner", "layer", "speed", "root_motion", "skin", "joints", "palette" }
local function options(depth)
  local t = {}
  for _ = 1, rnd(0, 4) do t[OPTION_KEYS[rnd(#OPTION_KEYS)]] = gen(depth + 1) end
  return t
end
local blobs = {} -- snapshots of the first pool's objects (limber.snapshot.save)
do
  local keep = {}
  for _, v in ipairs(pool) do
    local c = classof(v)
    if c == "limber.Clip" or c == "limber.Skeleton" or c == "limber.Skin" or c == "limber.Buffer"
        or c == "limber.SkinMesh" then
      keep[#keep + 1] = v
    end
  end
  local ok, b = pcall(limber.snapshot.save, { objects = keep, name = "pool" })
  if ok then blobs[1] = b end
  for k = 1, math.min(#keep, 6) do
    local ok2, b2 = pcall(limber.snapshot.save, keep[k])
    if ok2 then blobs[#blobs + 1] = b2 end
  end
end
local function object()
  if #pool == 0 then return nil end
  return pool[rnd(#pool)]
end
gen = function(depth)
  depth = depth or 0
  local r = rnd(100)
  if r <= 28 then return number() end
  if r <= 45 then return object() end
  if r <= 52 then return names[rnd(#names)] end
  if r <= 54 then return ({ "", "\0", ("x"):rep(300), "1", "nan", "-0" })[rnd(6)] end
  if r <= 55 and #blobs > 0 then -- a snapshot, whole, truncated or with its header damaged
    local b = blobs[rnd(#blobs)]
    local k = rnd(3)
    if k == 1 then return b:sub(1, rnd(0, #b)) end
    if k == 2 then
      local at = rnd(1, 96)
      return b:sub(1, at - 1) .. string.char(rnd(0, 255)) .. b:sub(at + 1)
    end
    return b
  end
  if r <= 60 then return nil end
  if r <= 63 then return rnd(2) == 1 end
  if depth > 2 then return number() end
  if r <= 70 then return array(({ 3, 4, 16, 12, 0, 9, 1, 2 })[rnd(8)], number) end
  if r <= 74 then return array(rnd(0, 4), function() return gen(depth + 1) end) end
  if r <= 85 then return options(depth) end
  if r <= 92 then return lying_table(array(rnd(0, 16), number)) end
  if r <= 94 then return function() return gen(depth + 1) end end
  if r <= 96 then return coroutine.create(function() end) end
  if r <= 98 then return setmetatable({}, { __index = function() error("boom") end }) end
  return limber
end

-- One value changed: a field of a table replaced, a table made to lie, a
-- number moved to an edge, an object swapped for another.
local function mutate(v, depth)
  depth = depth or 0
  local r = rnd(10)
  if type(v) == "table" and getmetatable(v) == nil and depth < 4 then
    if r <= 3 then return lying_table(v) end
    local copy = {}
    for k, x in pairs(v) do copy[k] = x end
    local keys = {}
    for k in pairs(copy) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    if #keys > 0 and r <= 8 then
      local k = keys[rnd(#keys)]
      copy[k] = mutate(copy[k], depth + 1)
    elseif r == 9 then
      copy[#copy + 1] = gen(depth + 1)
    else
      copy[#copy] = nil
    end
    return copy
  end
  if type(v) == "number" and r <= 6 then
    return ({ v + 1, v - 1, -v, v * 2 ^ 40, 0 / 0, math.huge, H.int_max, H.int_min, 0, v + 0.5 })[rnd(10)]
  end
  return gen(depth)
end

-- ---------------------------------------------------------------------------
-- Digests: what an object looks like through its read-only methods, to check
-- that a call that raised changed nothing. A read of a lazily computed value
-- (a leaf's world) is the same before and after, so reading is harmless.

local READ = { info = true, bytes = true, count = true, duration = true, capacity = true, size = true,
               instances = true, joints = true, models = true, buffer = true, worlds = true, stats = true,
               positions = true, normals = true, tangents = true, output = true, clips = true, time = true,
               state = true, fading = true, pose = true, skin = true, __len = true, counts = true,
               vertex_count = true, key_count = true, changed = true }
local serialize
local function digest(v, depth, seen)
  local c = classof(v)
  if not c then return "" end
  if seen[v] then return "@" end
  seen[v] = true
  local parts = { c }
  -- per-instance state the zero-argument reads do not show (first: reading a
  -- leaf's world computes it on demand, which the buffer reads below see)
  if c == "limber.Pose" then
    local ok, n, j = pcall(function() return v:instance_count(), v:joint_count() end)
    if ok and n * j <= 256 then
      for i = 1, n do
        for jj = 1, j do parts[#parts + 1] = serialize(H.tpack(pcall(v.get_local, v, i, jj)), depth, seen) end
        parts[#parts + 1] = serialize(H.tpack(pcall(v.dirty, v, i)), depth, seen)
      end
    end
  elseif c == "limber.Sampler" then
    local ok, p = pcall(v.pose, v)
    local n = ok and select(2, pcall(p.instances, p)) or 0
    for i = 1, math.min(tonumber(n) or 0, 64) do
      parts[#parts + 1] = serialize(H.tpack(pcall(v.get, v, i)), depth, seen)
    end
  elseif c == "limber.Blender" then
    for i = 1, 4 do
      for l = 1, 3 do parts[#parts + 1] = serialize(H.tpack(pcall(v.weight, v, i, l)), depth, seen) end
    end
  elseif c == "limber.Stack" or c == "limber.Plan" then
    for i = 1, 4 do
      for l = 1, 3 do
        parts[#parts + 1] = serialize(H.tpack(pcall(v.layer_weight, v, i, l)), depth, seen)
        for k = 1, 3 do
          local read = c == "limber.Plan" and v.source or v.weight
          parts[#parts + 1] = serialize(H.tpack(pcall(read, v, i, l, k)), depth, seen)
        end
      end
      if c == "limber.Plan" then
        parts[#parts + 1] = serialize(H.tpack(pcall(v.lod, v, i)), depth, seen)
      end
    end
  elseif c == "limber.anim.Crowd" then
    for i = 1, 8 do
      local ok, pl = pcall(v.player, v, i)
      if ok then parts[#parts + 1] = digest(pl, depth + 1, seen) end
    end
  elseif c == "limber.Scene" then
    for id = 1, 16 do
      parts[#parts + 1] = serialize(H.tpack(pcall(v.trs, v, id)), depth, seen)
      parts[#parts + 1] = serialize(H.tpack(pcall(v.parent, v, id)), depth, seen)
      parts[#parts + 1] = serialize(H.tpack(pcall(v.world, v, id)), depth, seen)
    end
  end
  for _, m in ipairs(methods_of(v)) do
    if m[1] == "bytes" and c == "limber.Buffer" and #v > 65536 then
      -- a large buffer: 64 runs of 16 elements spread over it (copying all
      -- of a buffer of millions of matrices twice a call would stall the run)
      local n = #v
      for k = 0, 63 do
        local first = 1 + math.floor((n - 16) * k / 63)
        parts[#parts + 1] = serialize(H.tpack(pcall(m[2], v, first, 16)), depth, seen)
      end
    elseif READ[m[1]] then
      local res = H.tpack(pcall(m[2], v))
      parts[#parts + 1] = m[1] .. "=" .. serialize(res, depth, seen)
    end
  end
  return table.concat(parts, ";")
end
serialize = function(x, depth, seen)
  local t = type(x)
  if t == "number" then
    if x ~= x then return "nan" end
    return H.math_type(x) == "integer" and H.intstr(x) or H.floatstr(x)
  elseif t == "string" then
    if #x > 64 then
      -- a hash of at most about 4,096 bytes spread over the string (a huge
      -- buffer would make every digest slow); a call that changes bytes
      -- between the sampled ones goes unseen there
      local h, step = 0, math.max(7, math.floor(#x / 4096))
      for k = 1, #x, step do h = (h * 31 + x:byte(k)) % 2147483647 end
      return "s" .. #x .. ":" .. h
    end
    return string.format("%q", x)
  elseif t == "table" then
    if getmetatable(x) ~= nil then return classof(x) and digest(x, depth + 1, seen) or "mt" end
    if depth > 3 then return "{...}" end
    local keys = {}
    for k in pairs(x) do keys[#keys + 1] = k end
    if #keys > 4096 then -- a huge result (every changed id of a big scene): its size and a sum
      local sum = 0
      for _, e in pairs(x) do if type(e) == "number" and e == e then sum = sum + e end end
      return ("T%d:%a"):format(#keys, sum)
    end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    local out = {}
    for _, k in ipairs(keys) do out[#out + 1] = tostring(k) .. "=" .. serialize(x[k], depth + 1, seen) end
    return "{" .. table.concat(out, ",") .. "}"
  elseif t == "userdata" then
    if depth > 3 then return classof(x) or "u" end
    return digest(x, depth + 1, seen)
  end
  return t
end

-- ---------------------------------------------------------------------------
-- Checks.

local STDLIB = { "ipairs", "pairs", "insert", "remove", "move", "concat", "unpack", "format", "rep", "sub",
                 "setmetatable", "getmetatable", "rawget", "rawset", "rawlen", "rawequal", "select", "tostring",
                 "tonumber", "floor", "ceil", "abs", "sqrt", "fmod", "type", "max", "min", "sort", "find",
                 "match", "gsub", "byte", "char", "open", "read", "lines", "pack" }
local std_names = {}
for _, n in ipairs(STDLIB) do std_names[n] = true end

local function raw_error(msg)
  if msg:find("attempt to %a+") and not msg:find("^limber") and not msg:find("bad argument") then
    return "a raw Lua error"
  end
  local fname = msg:match("bad argument #%d+ to '([%w_.:]+)'")
  if fname then
    local last = fname:match("([%w_]+)$")
    if std_names[last] and not fname:find("^limber%.") then
      return "a standard-library error leaked from inside limber"
    end
  end
  if msg:find("C stack overflow") or msg:find("stack overflow") then return "a stack overflow" end
  return nil
end

local function has_finite_only(args, n, depth, seen)
  seen = seen or {}
  for k = 1, n do
    local v = args[k]
    if type(v) == "number" and (v ~= v or v == math.huge or v == -math.huge or math.abs(v) > 1e30) then
      return false
    end
    if type(v) == "table" and not seen[v] then
      seen[v] = true
      if getmetatable(v) ~= nil then return false end -- lying tables, objects: unknown content
      if depth < 3 and not has_finite_only(v, #v, depth + 1, seen) then return false end
      for _, x in pairs(v) do
        if type(x) == "table" and depth < 3 and not seen[x] and not has_finite_only({ x }, 1, depth + 1, seen) then
          return false
        elseif type(x) == "number" and (x ~= x or math.abs(x) > 1e30) then
          return false
        end
      end
    end
    if type(v) == "function" or type(v) == "userdata" then return false end
  end
  return true
end
local function has_nan(v, depth)
  if type(v) == "number" then return v ~= v end
  if type(v) == "table" and depth < 3 and getmetatable(v) == nil then
    for _, x in pairs(v) do if has_nan(x, depth + 1) then return true end end
  end
  return false
end
-- raw data: a Buffer holds whatever bytes were written into it
local RAW = { ["limber.Buffer:get"] = true, ["limber.Buffer:bytes"] = true, ["limber.Buffer:__index"] = true }

-- ---------------------------------------------------------------------------
-- The run.

local log, LOGN = {}, 40
local function describe(v)
  local t = type(v)
  if t == "number" then return H.math_type(v) == "integer" and H.intstr(v) or string.format("%.17g", v) end
  if t == "string" then return #v > 20 and ("string(" .. #v .. ")") or string.format("%q", v) end
  if t == "table" then
    local c = classof(v)
    if c then return c end
    if getmetatable(v) then return "table(lying)" end
    local parts, n = {}, 0
    for k, x in pairs(v) do
      n = n + 1
      if n > 6 then parts[#parts + 1] = "..."; break end
      parts[#parts + 1] = (H.math_type(k) == "integer" and "" or (tostring(k) .. "=")) .. describe(x)
    end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  if t == "userdata" then return classof(v) or "userdata" end
  return t
end
local found, nfound = {}, 0
local function fail(what, entry)
  if opts.all then -- --all 1: list each distinct failure once and go on
    local key = (entry:match("^#%d+ ([^(]+)") or "?") .. " " .. what:gsub("[%d.e+-]+", "N"):sub(1, 90)
    if not found[key] then
      found[key] = true
      nfound = nfound + 1
      io.stdout:write("FAIL ", what, "\n  in ", entry, "\n")
    end
    return
  end
  io.stdout:write("fuzz_binding: FAILED (seed ", opts.seed, "): ", what, "\n")
  io.stdout:write("  in call: ", entry, "\n  the calls before it (oldest first):\n")
  for k = math.max(1, #log - LOGN + 1), #log - 1 do io.stdout:write("    ", log[k], "\n") end
  io.stdout:flush()
  os.exit(1)
end

-- --trace FILE: every call is written there before it runs (unbuffered), so
-- the call that killed the process is the file's last line.
local trace = opts.trace and assert(io.open(opts.trace, "w"))
if trace then trace:setvbuf("no") end

local budget_exceeded
local function hook()
  budget_exceeded = true
  error("fuzz_binding: call exceeded its instruction budget")
end

build_pool()
for _, v in ipairs(pool) do learn(v) end

local stats = { calls = 0, ok = 0, raised = 0 }
local called = {}
for n = 1, opts.calls do
  -- pick a callable and its arguments
  local c, args, nargs
  if #successes > 0 and rnd(2) == 1 and not opts.only then -- a call that worked, one argument mutated
    local s = successes[rnd(#successes)]
    c = { name = fn_name[s.fn] or "unnamed-function", fn = s.fn }
    nargs = s.nargs
    args = H.move(s.args, 1, nargs, 1, {})
    if nargs == 0 or rnd(6) == 1 then nargs = nargs + 1; args[nargs] = gen(0)
    else
      local k = rnd(nargs)
      args[k] = mutate(args[k])
    end
  else
    c = callables[rnd(#callables)]
    args, nargs = {}, rnd(0, 5)
    for k = 1, nargs do args[k] = gen(0) end
  end
  if c.class and rnd(10) <= 8 then -- usually the right self
    local cands = {}
    for _, v in ipairs(pool) do
      local cv = classof(v)
      if cv == c.class then cands[#cands + 1] = v end
    end
    if #cands > 0 then
      nargs = math.max(nargs, 1)
      args[1] = cands[rnd(#cands)]
    end
  end
  local parts = {}
  for k = 1, nargs do
    local d = describe(args[k])
    parts[k] = #d > 160 and d:sub(1, 157) .. "..." or d
  end
  local entry = string.format("#%d %s(%s)", n, c.name, table.concat(parts, ", "))
  log[#log + 1] = entry
  if trace then trace:write(entry, "\n") end
  if #log > 2 * LOGN then H.move(log, LOGN + 1, 2 * LOGN, 1); for k = LOGN + 1, 2 * LOGN do log[k] = nil end end

  -- the objects the call can touch, as they are
  local touched, before = {}, {}
  for k = 1, nargs do
    if classof(args[k]) then touched[#touched + 1] = args[k] end
  end
  for k, v in ipairs(touched) do before[k] = digest(v, 0, {}) end

  budget_exceeded = false
  debug.sethook(hook, "", 50000000)
  local res = H.tpack(pcall(c.fn, H.tunpack(args, 1, nargs)))
  debug.sethook()
  stats.calls = stats.calls + 1
  called[c.name] = true
  if budget_exceeded then fail("the call did not return (Lua instruction budget exceeded)", entry) end
  if res[1] then
    stats.ok = stats.ok + 1
    if rnd(4) == 1 then remember(c.name, c.fn, args, nargs) end
    for k = 2, res.n do
      local v = res[k]
      if classof(v) then add(v); learn(v) end
    end
    if not RAW[c.name] and has_finite_only(args, nargs, 0) then
      for k = 2, res.n do
        if has_nan(res[k], 0) then fail("a NaN came back from finite arguments (result " .. (k - 1) .. ")", entry) end
      end
    end
  else
    stats.raised = stats.raised + 1
    local err = res[2]
    if type(err) ~= "string" then
      fail("the error is a " .. type(err) .. ", not a string", entry)
      err = tostring(err)
    end
    if err:find("not enough memory", 1, true) then
      stats.oom = (stats.oom or 0) + 1
      if opts.oom then io.stderr:write("out of memory: ", entry, "\n") end
    end
    local bad = raw_error(err)
    if bad and not err:find("lying table", 1, true) and not err:find("boom", 1, true) then
      fail(bad .. ": " .. err, entry)
    end
    for k, v in ipairs(touched) do
      local after = digest(v, 0, {})
      if after ~= before[k] then
        fail("the call raised (" .. err .. ") but changed its argument " .. k .. " (" .. classof(v) .. ")", entry)
      end
    end
  end
  if n % 1000 == 0 then
    collectgarbage()
    if not opts.quiet then io.stderr:write(".") end
  end
end
local ncalled, ncls = 0, 0
for _ in pairs(called) do ncalled = ncalled + 1 end
for _ in pairs(classes_seen) do ncls = ncls + 1 end
local cl = {}
for k in pairs(classes_seen) do cl[#cl + 1] = k end
table.sort(cl)
if not opts.quiet then io.stderr:write("\nclasses: ", table.concat(cl, " "), "\n") end
local summary = string.format("%d calls (%d returned, %d raised), %d of %d callables called, %d classes",
  stats.calls, stats.ok, stats.raised, ncalled, #callables, ncls)
if nfound > 0 then
  print(string.format("fuzz_binding: %d distinct failures (seed %d); %s", nfound, opts.seed, summary))
  os.exit(1)
end
print(string.format("fuzz_binding: ok seed %d: %s", opts.seed, summary))
