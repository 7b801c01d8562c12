-- Local-to-model benchmark: the data-oriented-design article's workload.
-- 1000 instances of a 96-joint humanoid skeleton with random local poses;
-- one frame = one local-to-model pass over every instance.
--   lua5.4 examples/bench_hierarchy.lua [--frames 300] [--instances 1000] [--json]
-- Compares in one run: (a) limber's batched call from Lua, the same kernel
-- called from C, the portable (non-SIMD) kernel, (b) a naive recursive
-- pointer tree with cglm, (c) a naive flat-array loop with cglm; then the
-- skin palette pass for the same batch.
local here = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local C = require "common"
local limber = require "limber"
local core = limber.core
local baseline = require "limber.baseline_hierarchy"

local opt = C.options(arg, { frames = 300, instances = 1000, json = false })
local N, frames = opt.instances, opt.frames

local skel = limber.skeleton(C.humanoid())
local J = skel:joint_count()
local base = baseline.new(skel:parents(), N, 12345)
local pose = limber.pose(skel, N)
base:fill_pose(pose)
local pal4 = limber.palette(pose, { layout = "mat4" })
local pal3 = limber.palette(pose, { layout = "mat3x4" })

-- correctness cross-check before timing: all three agree
pose:local_to_model(true)
base:time("flat", 1)
base:time("recursive", 1)
local worst = 0
for _, i in ipairs({ 1, math.floor(N / 2), N }) do
  for j = 1, J do
    local a = pose:model(i, j)
    for _, kind in ipairs({ "flat", "recursive" }) do
      local b = base:model(kind, i, j)
      for k = 1, 16 do worst = math.max(worst, math.abs(a[k] - b[k])) end
    end
  end
end
if worst > 1e-3 then error(("limber and the baselines disagree by %g"):format(worst)) end

local clock = core.clock
local l2m_med, l2m_min = C.time(clock, frames, function() pose:local_to_model(true) end)
local c_med, c_min = base:time("limber", frames, pose)
core.simd(false)
local port_med, port_min = C.time(clock, frames, function() pose:local_to_model(true) end)
core.simd(true)
local rec_med, rec_min = base:time("recursive", frames)
local flat_med, flat_min = base:time("flat", frames)
pose:local_to_model(true)
local pal_med, pal_min = C.time(clock, frames, function() pal4:update() end)
local pal3_med, pal3_min = C.time(clock, frames, function() pal3:update() end)

local joints = N * J
local function row(name, med, min)
  print(("%-44s %9.3f %9.3f %8.2f"):format(name, med, min, med * 1e6 / joints))
end
print(C.interpreter_line())
print(("local-to-model: %d instances x %d joints = %d joints per frame, %d frames, AVX2 %s")
  :format(N, J, joints, frames, select(2, core.simd()) and "yes" or "no"))
print(("%-44s %9s %9s %8s"):format("", "median ms", "min ms", "ns/joint"))
row("(a) limber batched call from Lua", l2m_med, l2m_min)
row("    same kernel called from C", c_med, c_min)
row("    limber portable kernel (no SIMD)", port_med, port_min)
row("(b) naive recursive pointer tree (cglm)", rec_med, rec_min)
row("(c) naive flat arrays (cglm)", flat_med, flat_min)
row("palette mat4 (model x inverse bind)", pal_med, pal_min)
row("palette mat3x4 (texel rows)", pal3_med, pal3_min)
print(("ratios: recursive/limber %.2fx, flat/limber %.2fx, Lua call overhead %+.1f%%")
  :format(rec_med / l2m_med, flat_med / l2m_med, (l2m_med / c_med - 1) * 100))
print(("max difference limber vs baselines: %.3g"):format(worst))
if opt.json then
  print(C.json({
    l2m_ms = l2m_med, naive_recursive_ms = rec_med, naive_flat_ms = flat_med,
    ratio_vs_recursive = rec_med / l2m_med, ratio_vs_flat = flat_med / l2m_med,
    palette_ms = pal_med, joints = J, instances = N,
    l2m_from_c_ms = c_med, l2m_portable_ms = port_med, palette_mat3x4_ms = pal3_med,
    lua = C.lua,
  }))
end
