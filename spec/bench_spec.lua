-- The skinning benchmark keeps its promises: the JSON line the issue names,
-- figures that agree with each other, and the host helpers it relies on. The
-- benchmarks run under this run's interpreter and say which one it is.
local H = require "spec.helper"

-- what the benchmarks report: jit.version under LuaJIT, else _VERSION
local INTERPRETER = rawget(_G, "jit") and rawget(_G, "jit").version or _VERSION

describe("examples/bench_skinning.lua", function()
  it("prints the issue's JSON keys with figures that agree with each other", function()
    local ok, text = H.run(H.example("bench_skinning.lua", "--frames 10 --json",
      "BENCH_BLOCK=5 BENCH_WARM=1"))
    assert.is_true(ok, text)
    assert.truthy(text:find("interpreter: " .. INTERPRETER .. ",", 1, true), text)
    local last = text:match("([^\n]*)\n?$")
    local cjson = require "cjson"
    local r = cjson.decode(last)
    for _, key in ipairs({ "naive_ms", "skin_1t_ms", "skin_mt_ms", "threads", "ns_per_vertex_1t",
                           "ns_per_vertex_mt", "ratio_vs_naive_1t", "mix2_ns_per_vertex_1t",
                           "real_ns_per_vertex_1t" }) do
      assert.equal("number", type(r[key]), key)
      assert.truthy(r[key] > 0, key)
    end
    assert.equal("CesiumMan", r.real_model)
    -- the kernel against its v1 (issue 19): on this CPU's level, and on AVX2 where that is AVX-512
    -- (speedup_vs_v1_1t is v1's time over limber's on mix 2, both printed)
    assert.equal("number", type(r.speedup_vs_v1_1t))
    assert.equal("number", type(r.v1_mix2_ns_per_vertex_1t))
    assert.truthy(r.v1_mix2_ns_per_vertex_1t > 0)
    assert.near(r.v1_mix2_ns_per_vertex_1t / r.mix2_ns_per_vertex_1t, r.speedup_vs_v1_1t,
      0.01 * r.speedup_vs_v1_1t)
    -- (kernel: the default level, AVX2 on a CPU that runs AVX-512 in halves; cpu_level: the best)
    assert.truthy(r.kernel == r.cpu_level or (r.cpu_level == "avx512" and r.kernel == "avx2"),
      r.kernel .. " " .. r.cpu_level)
    if r.cpu_level == "avx512" then
      assert.equal("number", type(r.speedup_vs_v1_1t_avx2))
    else
      assert.equal(cjson.null, r.speedup_vs_v1_1t_avx2)
    end
    -- morph targets: both timings and their quotient
    for _, key in ipairs({ "morph_ns_per_vertex_1t", "nomorph_ns_per_vertex_1t", "morph_ratio_1t" }) do
      assert.equal("number", type(r[key]), key)
      assert.truthy(r[key] > 0, key)
    end
    assert.near(r.morph_ns_per_vertex_1t / r.nomorph_ns_per_vertex_1t, r.morph_ratio_1t,
      0.01 * r.morph_ratio_1t)
    assert.equal(INTERPRETER, r.lua)
    assert.truthy(({ portable = true, avx2 = true, avx512 = true })[r.kernel], r.kernel)
    -- the ratio is the two medians' quotient; the naive version is the slow one
    assert.near(r.naive_ms / r.skin_1t_ms, r.ratio_vs_naive_1t, 0.01 * r.ratio_vs_naive_1t)
    assert.truthy(r.ratio_vs_naive_1t > 1)
    -- 100 instances of 4,000 vertices
    assert.near(r.skin_1t_ms * 1e6 / 400000, r.ns_per_vertex_1t, 1e-3 * r.ns_per_vertex_1t)
    if r.host_mt_ceiling ~= cjson.null then
      -- the fastest CPU counts 1, each other one its speed relative to it
      assert.truthy(r.host_mt_ceiling >= 1 - 1e-9 and r.host_mt_ceiling <= r.threads + 1e-9,
        r.host_mt_ceiling)
      assert.truthy(r.mt_vs_fastest_cpu > 0)
    end
  end)
end)

describe("examples/bench_hierarchy.lua", function()
  it("names its interpreter in the header and in the JSON line", function()
    local ok, text = H.run(H.example("bench_hierarchy.lua", "--frames 3 --instances 20 --json"))
    assert.is_true(ok, text)
    local header = text:match("^[^\n]*")
    local prefix = "interpreter: " .. INTERPRETER .. ", limber.core from "
    assert.equal(prefix, header:sub(1, #prefix))
    -- the limber.core it names (relative to the checkout) is the one this run's cpath finds
    local core = assert(H.searchpath("limber.core", package.cpath))
    local named = header:sub(#prefix + 1)
    assert.truthy(#named > 0 and named == core:sub(-#named), header .. " / " .. core)
    local r = require("cjson").decode(text:match("([^\n]*)\n?$"))
    assert.equal(INTERPRETER, r.lua)
    assert.equal(20, r.instances)
    assert.equal(96, r.joints)
    assert.truthy(r.l2m_ms > 0)
  end)
end)

describe("examples/bench_frame.lua", function()
  it("prints the issue's JSON keys, positive, after the paths agreed", function()
    local ok, text = H.run(H.example("bench_frame.lua",
      "--frames 4 --block 2 --small 8 --large 24 --crowd 80 --json"))
    assert.is_true(ok, text)
    assert.truthy(text:find("interpreter: " .. INTERPRETER .. ",", 1, true), text)
    -- the two paths were compared at both sizes, before and after the timed frames
    local compared = 0
    local compare_line = "stages vs plan at (%d+) [^\n]*: (%S+) before timing, (%S+) after"
    for n, before, after in text:gmatch(compare_line) do
      assert.truthy(tonumber(before) <= 1e-3 and tonumber(after) <= 1e-3, n)
      compared = compared + 1
    end
    assert.equal(2, compared, text)
    local last = text:match("([^\n]*)\n?$")
    local keys = { "stages_ns_100", "plan_ns_100", "stages_ns_1000", "plan_ns_1000",
                   "plan_mt_ns_1000", "threads", "lod_ms_10000", "full_ms_10000",
                   "controller_ms_1000", "plan_ms_1000" }
    -- the keys in the issue's order
    local at = 0
    for _, key in ipairs(keys) do
      local pos = last:find('"' .. key .. '":', 1, true)
      assert.truthy(pos and pos > at, key)
      at = pos
    end
    local r = require("cjson").decode(last)
    for _, key in ipairs(keys) do
      assert.equal("number", type(r[key]), key)
      assert.truthy(r[key] > 0, key)
    end
    assert.equal(r.threads, math.floor(r.threads))
    assert.equal(INTERPRETER, r.lua)
    -- the table's rows are the JSON's figures (ns/joint of 96 joints; ms at the crowd size)
    local row = text:match("%(a%) stages, 1 thread%s+24%s+%S+%s+%S+%s+(%S+)")
    assert.near(r.stages_ns_1000, tonumber(row), 0.01)
    row = text:match("%(d%) plan:run, LOD tiers, 1 thread%s+80%s+(%S+)")
    assert.near(r.lod_ms_10000, tonumber(row), 0.001)
  end)
end)

-- limber.baseline_skin is not part of the rock: the dev and sanitizer builds
-- have it next to limber.core, and the installed tree's test run finds the
-- one scripts/build.sh builds into build-bench/ (Lua 5.4) or
-- build-bench-<version>/ (the others: build-bench-5.1, ..., build-bench-luajit).
local function load_baseline(name)
  local bench = H.lua == "5.4" and "build-bench" or "build-bench-" .. H.lua
  local path, err = H.searchpath(name, package.cpath .. ";" .. H.root .. bench .. "/?.so")
  if not path then return false, err end
  local open, why = package.loadlib(path, "luaopen_" .. name:gsub("%.", "_"))
  if not open then return false, why end
  return true, open(name, path)
end

describe("the benchmark's host helpers (limber.baseline_skin)", function()
  local ok_load, base = load_baseline("limber.baseline_skin")

  it("lists this thread's CPUs, pins to one of them and gives them back", function()
    assert.is_true(ok_load, base)
    local cpus, err = base.cpus()
    if not cpus then
      pending("no CPU affinity here: " .. tostring(err))
      return
    end
    assert.truthy(#cpus >= 1)
    for i = 2, #cpus do assert.truthy(cpus[i] > cpus[i - 1]) end
    assert.is_true(base.pin(cpus[#cpus]))
    assert.same({ cpus[#cpus] }, base.cpus())
    assert.is_true(base.pin(cpus[1]))
    assert.same({ cpus[1] }, base.cpus())
    assert.is_true(base.pin())
    assert.same(cpus, base.cpus())
  end)

  -- v1 is the kernel the benchmark's `speedup_vs_v1_1t` measures against: it
  -- must compute what limber computes, or the ratio would compare different
  -- work. Same bits, but for the AVX2 kernel's normals, whose squared length
  -- now adds its squares in another order (a few ulps: docs/skinning.md).
  it("v1 skins random meshes to the same bits as limber.skinning.run, at every level", function()
    assert.is_true(ok_load, base)
    local limber = require "limber"
    local core, sk = limber.core, require "limber.skinning"
    local _, _, _, cpu_level = core.simd()
    finally(function() core.simd(true) end)
    local levels = { "portable" }
    if cpu_level ~= "portable" then levels[#levels + 1] = "avx2" end
    if cpu_level == "avx512" then levels[#levels + 1] = "avx512" end
    H.seed("v1")
    for _, V in ipairs({ 1, 2, 3, 7, 1023, 1025, 2500 }) do
      local K, N = math.random(1, 21), math.random(1, 4)
      local pos, nrm, jnt, wgt = {}, {}, {}, {}
      for _ = 1, V do
        for _ = 1, 3 do
          pos[#pos + 1] = H.rand(-2, 2)
          nrm[#nrm + 1] = H.rand(-1, 1)
        end
        local k = math.random(1, 4) -- influences
        for i = 1, 4 do
          jnt[#jnt + 1] = math.random(0, K - 1)
          wgt[#wgt + 1] = i <= k and H.rand(0.05, 1) or 0
        end
      end
      local desc = { positions = core.buffer("f32", 3, pos), normals = core.buffer("f32", 3, nrm),
                     gpu_joints = core.buffer("u16", 4, jnt), weights = core.buffer("f32", 4, wgt) }
      local sdesc = {}
      for j = 1, K do
        sdesc[j] = { parent = j > 1 and math.random(1, j - 1) or nil,
                     translation = { H.rand(-1, 1), H.rand(-1, 1), H.rand(-1, 1) },
                     rotation = H.rand_quat() }
      end
      local pose = limber.pose(limber.skeleton(sdesc), N)
      for i = 1, N do
        for j = 1, K do pose:set_trs(i, j, nil, H.rand_quat(), nil) end
      end
      pose:local_to_model()
      local pal = limber.palette(pose)
      pal:update()
      local palbuf = pal:matrix_buffer()
      local mesh = sk.mesh(desc)
      local want_p, want_n = core.buffer("f32", 3, N * V), core.buffer("f32", 3, N * V)
      local got_p, got_n = core.buffer("f32", 3, N * V), core.buffer("f32", 3, N * V)
      local function p(b) return b:ptr() end
      for _, level in ipairs(levels) do
        core.simd(level)
        sk.run(mesh, pal, sk.target { mesh = mesh, instances = N, positions = want_p,
                                      normals = want_n })
        got_p:set_bytes(string.rep("\0", N * V * 12))
        got_n:set_bytes(string.rep("\0", N * V * 12))
        local frame = base.v1(p(desc.positions), V * 12, p(desc.normals), V * 12,
          p(desc.gpu_joints), V * 8, p(desc.weights), V * 16, p(palbuf), N * K * 64,
          p(got_p), N * V * 12, p(got_n), N * V * 12, V, K, N, level)
        frame()
        local where = ("V %d, K %d, N %d, %s"):format(V, K, N, level)
        assert.equal(want_p:bytes(), got_p:bytes(), where)
        if level == "avx2" then
          local a, b, worst = want_n:bytes(), got_n:bytes(), 0
          for o = 1, #a, 4 do
            worst = math.max(worst, math.abs(H.unpack("<f", a, o) - H.unpack("<f", b, o)))
          end
          assert.truthy(worst <= 5e-7, where .. ": normals differ by " .. worst)
        else
          assert.equal(want_n:bytes(), got_n:bytes(), where)
        end
      end
    end
  end)

  it("v1 refuses levels the CPU lacks and counts that do not fit", function()
    assert.is_true(ok_load, base)
    local core = require("limber").core
    local _, _, _, cpu_level = core.simd()
    local b = core.buffer("f32", 4, 64)
    local function call(V, K, N, level)
      return function()
        base.v1(b:ptr(), 1024, b:ptr(), 1024, b:ptr(), 1024, b:ptr(), 1024, b:ptr(), 1024,
          b:ptr(), 1024, b:ptr(), 1024, V, K, N, level)
      end
    end
    assert.error_matches(call(1, 1, 1, "sse9"), "invalid option 'sse9'", 1, true)
    if cpu_level ~= "avx512" then
      assert.error_matches(call(1, 1, 1, "avx512"), "not supported by this CPU", 1, true)
    end
    assert.error_matches(call(0, 1, 1, "portable"), "vertex count out of range", 1, true)
    assert.error_matches(call(100, 1, 1, "portable"), "buffer too small", 1, true)
  end)

  it("refuses CPUs the thread may not use", function()
    assert.is_true(ok_load, base)
    if not base.cpus() then
      pending("no CPU affinity here")
      return
    end
    local function refuses(fn, message)
      assert.error_matches(fn, message, 1, true)
    end
    refuses(function() base.pin(-1) end, "not one of this thread's CPUs")
    refuses(function() base.pin(2 ^ 20) end, "not one of this thread's CPUs")
    refuses(function() base.pin("x") end, "number expected")
  end)
end)

describe("examples/bench_clips.lua", function()
  -- packs all six clips (the 60 s one takes 25 s, minutes under the sanitizers): tagged
  -- slow (busted -t slow), on Lua 5.4
  local run = H.lua == "5.4" and it or pending
  run("prints the issue's JSON line: six clips, figures that agree with each other #slow", function()
    local ok, text = H.run(H.example("bench_clips.lua", "--frames 2 --instances 16 --json"))
    assert.is_true(ok, text)
    assert.truthy(text:find("interpreter: " .. INTERPRETER .. ",", 1, true), text)
    local r = require("cjson").decode(text:match("([^\n]*)\n?$"))
    local names = {}
    for k, c in ipairs(r.clips) do
      names[k] = c.name
      for _, key in ipairs({ "bytes", "max_error", "max_error_10cm", "p99_error_10cm", "sample_ns",
                             "sample_ns_uncompressed", "seek_ns" }) do
        assert.equal("number", type(c[key]), c.name .. " " .. key)
        assert.truthy(c[key] >= 0, key)
      end
      assert.truthy(c.bytes > 0 and c.sample_ns > 0 and c.seek_ns > 0)
      -- exactly the issue's keys per clip (backward play is printed in the table only)
      local keys = {}
      for key in pairs(c) do keys[#keys + 1] = key end
      table.sort(keys)
      assert.same({ "bytes", "max_error", "max_error_10cm", "name", "p99_error_10cm", "sample_ns",
                    "sample_ns_uncompressed", "seek_ns" }, keys)
      -- the error at 10 cm covers the joint's own; the 99th percentile is below the largest
      assert.truthy(c.max_error_10cm >= c.max_error and c.p99_error_10cm <= c.max_error_10cm)
    end
    assert.same({ "CesiumMan", "Fox_Survey", "Fox_Walk", "Fox_Run", "synth_10s_30hz",
                  "synth_60s_120hz" }, names)
    assert.is_true(type(r.snapshot_speedup) == "number" and r.snapshot_speedup > 1)
    -- the table's backward play column: a positive figure per clip, judged on the target line
    local rows = 0
    for line in text:gmatch("[^\n]+") do
      local name, back = line:match("^  (%S+)%s+%d+%s+%d+ .*%s(%d+%.%d+)%s+%d+%.%d$")
      if name and back then
        rows = rows + 1
        assert.truthy(tonumber(back) > 0, line)
      end
    end
    assert.equal(6, rows)
    assert.truthy(text:find("backward play <= 2x forward: [metMISSED]+;"), text)
  end)
end)
