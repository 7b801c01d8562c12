--- Benchmark: batched CPU skinning of 100 characters (positions + normals).
--
-- Meshes: (1) synthetic, 4,000 vertices / ~6,700 triangles, influence mix
-- 25/20/25/30 % of 1/2/3/4 influences (the skinning article's); (2) the same
-- size with the ozz-animation reference mesh's mix 36/40/18/6 %; (3) CesiumMan
-- (examples/assets/CesiumMan, decoded here with lua-cjson) instanced 100 times.
-- Each character has its own pose and palette (mat4). Compared side by side:
-- the naive scalar version in C (examples/baselines/skin.c: every
-- vertex as 4 influences, full 4x4 sum, float3 outputs), limber's kernel
-- as it was when issue 19 asked for a faster one ("v1": the same baseline
-- module, one thread, `speedup_vs_v1_1t` on mesh 2), limber on one thread,
-- limber on every thread. Outputs: separate float3 position and
-- normal Buffers, sorted order.
--
-- On a host of at most 4 CPUs (Linux), one thread is also timed pinned to
-- each CPU in turn: on shared machines the CPUs need not be equally fast (a
-- virtual CPU whose physical core is busy with another guest runs the
-- kernel slower), and the sum of the `threads` highest speeds relative to
-- the fastest CPU bounds what all threads together can reach. The report
-- prints that bound next to the measured ratio. (Other guests also share
-- the memory the 9.4 MB of output per frame goes to; that the bound cannot
-- see.)
--
-- Usage: lua5.4 examples/bench_skinning.lua [--frames N] [--json]
-- (BENCH_BLOCK, BENCH_WARM: timed and untimed frames per turn of a variant,
-- default 20 and 3.)
local root = (arg and arg[0] or ""):match("^(.*)examples/[^/]*$") or "./"
package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local C = require "common" -- finds limber for this Lua: the LuaRocks tree or the CMake build

local limber = require "limber"
local core = limber.core
local sk = require "limber.skinning"
local base = require "limber.baseline_skin"

local json_out, frames = false, 60
do
  local i = 1
  while arg and arg[i] do
    if arg[i] == "--json" then json_out = true
    elseif arg[i] == "--frames" then frames = tonumber(arg[i + 1]); i = i + 1 end
    i = i + 1
  end
end

local N = 100
math.randomseed(1234)

local function rquat()
  local x, y, z, w = math.random() * 2 - 1, math.random() * 2 - 1, math.random() * 2 - 1,
    math.random() * 2 - 1
  local n = math.sqrt(x * x + y * y + z * z + w * w)
  return { x / n, y / n, z / n, w / n }
end

-- A random skeleton of `joints` joints, a pose batch of N random poses and its palette.
local function make_palette(joints)
  local desc = {}
  for i = 1, joints do
    desc[i] = { parent = i > 1 and math.random(1, i - 1) or nil,
                translation = { math.random() - 0.5, math.random() - 0.5, math.random() - 0.5 },
                rotation = rquat() }
  end
  local skel = limber.skeleton(desc)
  local pose = limber.pose(skel, N)
  for i = 1, N do
    for j = 1, joints do pose:set_trs(i, j, nil, rquat(), nil) end
  end
  pose:local_to_model()
  local pal = limber.palette(pose)
  pal:update()
  return pal
end

-- Flat arrays for a synthetic mesh with the given influence mix (fractions).
local function synth_mesh(V, tris, mix, joints)
  local pos, nrm, jnt, wgt, idx = {}, {}, {}, {}, {}
  local bounds, acc = {}, 0
  for k = 1, 4 do acc = acc + mix[k]; bounds[k] = acc end
  for v = 1, V do
    local x, y, z = math.random() * 2 - 1, math.random() * 2 - 1, math.random() * 2 - 1
    pos[#pos + 1], pos[#pos + 2], pos[#pos + 3] = x, y, z
    local n = math.sqrt(x * x + y * y + z * z) + 1e-6
    nrm[#nrm + 1], nrm[#nrm + 2], nrm[#nrm + 3] = x / n, y / n, z / n
    local r, k = (v - 0.5) / V, 4
    for q = 1, 4 do if r < bounds[q] then k = q break end end
    for i = 1, 4 do
      jnt[#jnt + 1] = math.random(0, joints - 1)
      wgt[#wgt + 1] = i <= k and (0.1 + math.random()) or 0
    end
  end
  -- shuffle vertices' influence counts so sorting has real work to do
  for v = V, 2, -1 do
    local u = math.random(1, v)
    for i = 1, 4 do
      local a, b = (v - 1) * 4 + i, (u - 1) * 4 + i
      wgt[a], wgt[b] = wgt[b], wgt[a]
    end
  end
  for _ = 1, tris * 3 do idx[#idx + 1] = math.random(0, V - 1) end
  return {
    positions = core.buffer("f32", 3, pos), normals = core.buffer("f32", 3, nrm),
    gpu_joints = core.buffer("u16", 4, jnt), weights = core.buffer("f32", 4, wgt),
    gpu_indices = core.buffer("u32", 1, idx),
  }
end

-- CesiumMan's primitive, decoded from its embedded base64 buffer.
local function cesium_mesh()
  local ok, cjson = pcall(require, "cjson")
  if not ok then return nil, "lua-cjson missing" end
  local f = io.open(root .. "examples/assets/CesiumMan/CesiumMan.gltf", "rb")
  if not f then return nil, "examples/assets/CesiumMan/CesiumMan.gltf missing" end
  local g = cjson.decode(f:read("*a"))
  f:close()
  local b64 = g.buffers[1].uri:match("^data:[^,]*;base64,(.*)$")
  local map = {}
  local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
  for i = 1, 64 do map[alphabet:byte(i)] = i - 1 end
  local out = {}
  for i = 1, #b64 - 3, 4 do
    local a, b, c, d = b64:byte(i, i + 3)
    local n = ((map[a] * 64 + map[b]) * 64 + (map[c] or 0)) * 64 + (map[d] or 0)
    out[#out + 1] = string.char(math.floor(n / 65536), math.floor(n / 256) % 256, n % 256)
    if d == 61 then out[#out] = out[#out]:sub(1, c == 61 and 1 or 2) end
  end
  local bin = table.concat(out)
  local prim = g.meshes[1].primitives[1]
  local function read(acc_index, fmt, comps)
    local a = g.accessors[acc_index + 1]
    local view = g.bufferViews[a.bufferView + 1]
    local size = C.packsize(fmt) * comps
    local stride = view.byteStride or size
    local start = (view.byteOffset or 0) + (a.byteOffset or 0)
    local vals = {}
    for e = 0, a.count - 1 do
      local o = start + e * stride + 1
      for c = 0, comps - 1 do
        vals[#vals + 1] = C.string_unpack("<" .. fmt, bin, o + c * C.packsize(fmt))
      end
    end
    return vals
  end
  local at = prim.attributes
  return {
    positions = core.buffer("f32", 3, read(at.POSITION, "f", 3)),
    normals = core.buffer("f32", 3, read(at.NORMAL, "f", 3)),
    gpu_joints = core.buffer("u16", 4, read(at.JOINTS_0, "I2", 4)),
    weights = core.buffer("f32", 4, read(at.WEIGHTS_0, "f", 4)),
    gpu_indices = core.buffer("u32", 1, read(prim.indices, "I2", 1)),
  }, #g.skins[1].joints
end

local function median(t)
  local s = {}
  for i = 1, #t do s[i] = t[i] end
  table.sort(s)
  local n = #s
  local h = math.floor(n / 2)
  return n % 2 == 1 and s[h + 1] or (s[h] + s[h + 1]) / 2
end

local function minimum(t)
  local m = math.huge
  for i = 1, #t do if t[i] < m then m = t[i] end end
  return m
end

local _, cores, threaded = sk.threads()
local all_threads = threaded and math.max(cores, 1) or 1 -- a build without threads runs one
-- The CPUs to time one by one (see the header).
local host_cpus = {}
do
  local list = base.cpus and base.cpus()
  if list and #list > 1 and #list <= 4 and all_threads > 1 then host_cpus = list end
end
-- The kernel level in use by default (the one that runs fastest here: the
-- best the CPU allows, except AVX2 where AVX-512 runs in 256-bit halves) and
-- the best level the CPU allows; when that is AVX-512, both the AVX2 and the
-- AVX-512 kernels are also timed side by side on one thread.
local _, _, best_level, cpu_level = core.simd()

-- Times variants ({ key, threads, level, pin, fn }) interleaved: they take
-- turns in blocks of frames, so a noisy moment hits all of them; each block
-- starts with untimed frames that bring its outputs back into cache after
-- the other variants' (the naive version writes 9.4 MB of its own per
-- frame) and start its threads, as in a game that skins the same crowd
-- every frame. Returns key -> list of frame times (ms).
local function time_variants(variants)
  local times = {}
  for _, v in ipairs(variants) do times[v.key] = {} end
  local block, warm = tonumber(os.getenv("BENCH_BLOCK") or 20),
    tonumber(os.getenv("BENCH_WARM") or 3)
  for _ = 1, math.max(1, math.floor(frames / block)) do
    for _, v in ipairs(variants) do
      sk.threads(v.threads)
      core.simd(v.level or true)
      if v.pin then assert(base.pin(v.pin)) end -- one thread only: workers never start pinned
      for _ = 1, warm do v.fn() end -- untimed
      for _ = 1, block do
        local t0 = base.now()
        v.fn()
        local t = times[v.key]
        t[#t + 1] = (base.now() - t0) * 1e3
      end
      if v.pin then assert(base.pin()) end
    end
  end
  sk.threads(all_threads)
  core.simd(true)
  return times
end

-- Morph targets: CesiumManMorph (three targets: "inflate" and "wave" move
-- every vertex, "top" is sparse) skinned with the first two targets active
-- against the same mesh without morphing, one thread, side by side.
local function morph_case()
  local gltf = require "limber.gltf"
  local ok, asset = pcall(gltf.load, root .. "examples/assets/CesiumMan/CesiumManMorph.gltf")
  if not ok then return nil, asset end
  local prim = asset.meshes[1].primitives[1]
  local mesh = sk.mesh(prim)
  local morph = sk.morph(mesh, prim.targets)
  local pal = make_palette(#asset.skins[1].joints)
  local target = sk.target { mesh = mesh, instances = N, positions = true, normals = true }
  local rows = {}
  for i = 1, N do
    rows[#rows + 1], rows[#rows + 2], rows[#rows + 3] = 0.2 + 0.6 * (i % 5) / 4, 0.5, 0
  end
  local w = core.buffer("f32", 3, rows)
  local times = time_variants {
    { key = "nomorph", threads = 1, fn = function() sk.run(mesh, pal, target) end },
    { key = "morph", threads = 1, fn = function() sk.run(mesh, pal, target, morph, w) end },
  }
  local V = mesh:vertex_count()
  local res = { V = V, deltas = morph:delta_count() }
  for k, t in pairs(times) do res[k] = { median = median(t), ns = median(t) * 1e6 / (N * V) } end
  res.ratio = res.morph.median / res.nomorph.median
  return res
end

-- Times the variants of one mesh, interleaved in blocks of frames.
local function run_case(name, desc, joints, with_naive)
  local pal = make_palette(joints)
  local mesh = sk.mesh(desc)
  local V = mesh:vertex_count()
  local target = sk.target { mesh = mesh, instances = N, positions = true, normals = true }
  local np, nn = core.buffer("f32", 3, N * V), core.buffer("f32", 3, N * V)
  local palbuf = pal:matrix_buffer()
  local a = { desc.positions:ptr() }
  local pp, ps = a[1], a[2]
  a = { desc.normals:ptr() }
  local qp, qs = a[1], a[2]
  a = { desc.gpu_joints:ptr() }
  local jp, js = a[1], a[2]
  a = { desc.weights:ptr() }
  local wp, ws = a[1], a[2]
  a = { palbuf:ptr() }
  local lp, ls = a[1], a[2]
  a = { np:ptr() }
  local op, os_ = a[1], a[2]
  a = { nn:ptr() }
  local onp, ons = a[1], a[2]
  local variants = {}
  if with_naive then
    variants[#variants + 1] = { key = "naive", threads = 1, fn = function()
      base.naive(pp, ps, qp, qs, jp, js, wp, ws, lp, ls, op, os_, onp, ons, V, joints, N)
    end }
  end
  local function skin() sk.run(mesh, pal, target) end -- every limber variant: only settings differ
  -- limber's kernel as it was when issue 19 asked for a faster one (the
  -- baseline module's v1), on one thread, same layout and outputs
  local function v1(level)
    return base.v1(pp, ps, qp, qs, jp, js, wp, ws, lp, ls, op, os_, onp, ons, V, joints, N, level)
  end
  -- (v1 at the best level the CPU allows: v1 had no default other than that)
  variants[#variants + 1] = { key = "v1", threads = 1, fn = v1(cpu_level) }
  variants[#variants + 1] = { key = "1t", threads = 1, fn = skin }
  if cpu_level == "avx512" then
    variants[#variants + 1] = { key = "v1_avx2", threads = 1, fn = v1("avx2") }
    variants[#variants + 1] = { key = "1t_avx2", threads = 1, level = "avx2", fn = skin }
    variants[#variants + 1] = { key = "1t_avx512", threads = 1, level = "avx512", fn = skin }
  end
  for _, c in ipairs(host_cpus) do
    variants[#variants + 1] = { key = "cpu" .. c, threads = 1, pin = c, fn = skin }
  end
  if all_threads > 1 then
    variants[#variants + 1] = { key = "mt", threads = all_threads, fn = skin }
  end
  local times = time_variants(variants)
  local res = { name = name, V = V, counts = mesh:influence_counts() }
  for _, v in ipairs(variants) do
    res[v.key] = { median = median(times[v.key]), min = minimum(times[v.key]) }
    res[v.key].ns = res[v.key].median * 1e6 / (N * V)
  end
  -- Each CPU's speed alone relative to the fastest, and the bound for all
  -- threads: the sum of the `all_threads` highest speeds.
  if #host_cpus > 0 then
    local fastest, speeds = math.huge, {}
    for _, c in ipairs(host_cpus) do fastest = math.min(fastest, res["cpu" .. c].median) end
    for i, c in ipairs(host_cpus) do speeds[i] = fastest / res["cpu" .. c].median end
    local sorted = { C.unpack(speeds) }
    table.sort(sorted, function(x, y) return x > y end)
    local ceiling = 0
    for i = 1, math.min(all_threads, #sorted) do ceiling = ceiling + sorted[i] end
    res.host = { fastest = fastest, speeds = speeds, ceiling = ceiling }
  end
  return res
end

local cases = {}
local function report(r)
  cases[#cases + 1] = r
  if json_out then return end
  print(("%s: %d vertices (%d/%d/%d/%d with 1/2/3/4 influences) x %d instances"):format(
    r.name, r.V, r.counts[1], r.counts[2], r.counts[3], r.counts[4], N))
  local keys = { "naive", "v1", "1t", "v1_avx2", "1t_avx2", "1t_avx512" }
  for _, c in ipairs(host_cpus) do keys[#keys + 1] = "cpu" .. c end
  keys[#keys + 1] = "mt"
  for _, key in ipairs(keys) do
    local t = r[key]
    if t then
      local label = key == "naive" and "naive scalar C" or key == "1t" and "limber 1 thread"
        or key == "v1" and "v1 kernel 1 thread" or key == "v1_avx2" and "  v1 AVX2 kernel"
        or key == "1t_avx2" and "  AVX2 kernel" or key == "1t_avx512" and "  AVX-512 kernel"
        or key == "mt" and ("limber %d threads"):format(all_threads)
        or ("  pinned to CPU %s"):format(key:sub(4))
      local extra = ""
      if r.naive and key ~= "naive" then
        extra = ("  x%.2f vs naive"):format(r.naive.median / t.median)
      end
      if key == "mt" then
        extra = extra .. ("  x%.2f vs 1 thread"):format(r["1t"].median / t.median)
      end
      if key == "1t_avx2" then extra = extra .. ("  (avx512 kernel x%.2f)"):format(
        t.median / r["1t_avx512"].median) end
      if key == "1t" then extra = extra .. ("  x%.2f vs v1"):format(r.v1.median / t.median) end
      if key == "1t_avx2" then
        extra = extra .. ("  x%.2f vs v1 AVX2"):format(r.v1_avx2.median / t.median)
      end
      print(("  %-18s median %7.3f ms  min %7.3f ms  %6.2f ns/vertex%s"):format(
        label, t.median, t.min, t.ns, extra))
    end
  end
  if r.host and r.mt then
    local parts = {}
    for i, c in ipairs(host_cpus) do parts[i] = ("CPU %d %.2f"):format(c, r.host.speeds[i]) end
    local vs = r.host.fastest / r.mt.median
    print(("  host: alone, %s of the fastest, so %d threads can reach at most x%.2f;"
      .. " measured x%.2f vs the fastest CPU alone (%.0f%%)"):format(
      table.concat(parts, ", "), all_threads, r.host.ceiling, vs,
      100 * vs / r.host.ceiling))
  end
end

print(C.interpreter_line())
print(("limber %s, kernel %s (the CPU allows %s), %d cores, %d frames per variant"):format(
  limber._VERSION, best_level, cpu_level, cores, frames))
local m1 = run_case("mesh 1 (mix 25/20/25/30)",
  synth_mesh(4000, 6700, { 0.25, 0.20, 0.25, 0.30 }, 64), 64, true)
report(m1)
local m2 = run_case("mesh 2 (mix 36/40/18/6)",
  synth_mesh(3934, 6600, { 0.36, 0.40, 0.18, 0.06 }, 64), 64, true)
report(m2)
local cdesc, cjoints = cesium_mesh()
local m3
if cdesc then
  m3 = run_case("CesiumMan", cdesc, cjoints, true)
  report(m3)
elseif not json_out then
  print("CesiumMan skipped: " .. tostring(cjoints))
end

local mo, mo_why = morph_case()
if not json_out then
  if mo then
    print(("CesiumManMorph: %d vertices x %d instances, targets 1 and 2 of 3 active (%d deltas"
      .. " stored), 1 thread"):format(mo.V, N, mo.deltas))
    print(("  without morphing  median %7.3f ms  %6.2f ns/vertex"):format(mo.nomorph.median,
      mo.nomorph.ns))
    print(("  with morphing     median %7.3f ms  %6.2f ns/vertex  x%.2f the time without"):format(
      mo.morph.median, mo.morph.ns, mo.ratio))
  else
    print("CesiumManMorph skipped: " .. tostring(mo_why))
  end
end

-- Targets of the skinning issue (measured here, judged by reading them).
do
  local function line(name, ok)
    print(("target %-52s %s"):format(name, ok and "met" or "MISSED"))
  end
  line(("mix 2, 1 thread <= 1.8 ns/vertex (%.2f)"):format(m2["1t"].ns), m2["1t"].ns <= 1.8)
  local vs_v1 = m2.v1.median / m2["1t"].median
  line(("mix 2, 1 thread >= 1.7x the v1 kernel (%.2fx)"):format(vs_v1), vs_v1 >= 1.7)
  if mo then
    line(("morph (2 of 3 targets) <= 1.5x no morph, 1 thread (%.2fx)"):format(mo.ratio),
      mo.ratio <= 1.5)
  end
  line(("mesh 1, 1 thread >= 4x the naive version (%.1fx)")
    :format(m1.naive.median / m1["1t"].median), m1.naive.median / m1["1t"].median >= 4)
  if m1.mt then
    local worst = math.huge
    for _, r in ipairs(cases) do worst = math.min(worst, r["1t"].median / r.mt.median) end
    line(("%d threads >= 1.8x 1 thread on every mesh (worst %.3fx)"):format(all_threads, worst),
      worst >= 1.8)
    if m1.host then
      -- The same judgements against the fastest CPU alone: when the
      -- unpinned thread lands on a slow CPU, one thread looks slow and the
      -- ratio flattering.
      local ceil, worst_fast = math.huge, math.huge
      for _, r in ipairs(cases) do
        ceil = math.min(ceil, r.host.ceiling)
        worst_fast = math.min(worst_fast, r.host.fastest / r.mt.median)
      end
      print(("       against the fastest CPU alone: mix 2 %.2f ns/vertex, %d threads x%.2f"
        .. " (worst mesh); this host's CPUs allow at most x%.2f"):format(
        m2.host.fastest * 1e6 / (N * m2.V), all_threads, worst_fast, ceil))
    end
  end
end

if json_out then
  local fields = {
    ('"naive_ms": %.4f'):format(m1.naive.median),
    ('"skin_1t_ms": %.4f'):format(m1["1t"].median),
    ('"skin_mt_ms": %.4f'):format((m1.mt or m1["1t"]).median),
    ('"threads": %d'):format(all_threads),
    ('"ns_per_vertex_1t": %.4f'):format(m1["1t"].ns),
    ('"ns_per_vertex_mt": %.4f'):format((m1.mt or m1["1t"]).ns),
    ('"ratio_vs_naive_1t": %.3f'):format(m1.naive.median / m1["1t"].median),
    ('"mix2_ns_per_vertex_1t": %.4f'):format(m2["1t"].ns),
    ('"real_model": "%s"'):format(m3 and "CesiumMan" or "pending"),
    ('"real_ns_per_vertex_1t": %s'):format(m3 and ("%.4f"):format(m3["1t"].ns) or "null"),
    ('"kernel": "%s"'):format(best_level),
    ('"cpu_level": "%s"'):format(cpu_level),
    ('"host_mt_ceiling": %s'):format(m1.host and ("%.3f"):format(m1.host.ceiling) or "null"),
    ('"mt_vs_fastest_cpu": %s'):format(m1.host and m1.mt
      and ("%.3f"):format(m1.host.fastest / m1.mt.median) or "null"),
    ('"mix2_ns_per_vertex_1t_avx2": %s'):format(m2["1t_avx2"]
      and ("%.4f"):format(m2["1t_avx2"].ns) or "null"),
    ('"speedup_vs_v1_1t": %.3f'):format(m2.v1.median / m2["1t"].median),
    ('"v1_mix2_ns_per_vertex_1t": %.4f'):format(m2.v1.ns),
    ('"speedup_vs_v1_1t_avx2": %s'):format(m2.v1_avx2
      and ("%.3f"):format(m2.v1_avx2.median / m2["1t_avx2"].median) or "null"),
    ('"morph_ns_per_vertex_1t": %s'):format(mo and ("%.4f"):format(mo.morph.ns) or "null"),
    ('"nomorph_ns_per_vertex_1t": %s'):format(mo and ("%.4f"):format(mo.nomorph.ns) or "null"),
    ('"morph_ratio_1t": %s'):format(mo and ("%.3f"):format(mo.ratio) or "null"),
    ('"lua": %s'):format(C.json_string(C.lua)),
  }
  print("{" .. table.concat(fields, ", ") .. "}")
end
