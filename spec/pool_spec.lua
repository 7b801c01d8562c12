-- The worker pool under stress: spec/c/pool_stress.c runs thousands of jobs
-- of growing and shrinking sizes and thread counts, some on the caller
-- alone, and counts items missed, run twice, run with another job's
-- context, by a worker beyond the job's thread count or past a job's end.
-- Each run has a time limit: a pool that loses a completion hangs.
-- Compiled here with the C compiler (plain, and with ThreadSanitizer
-- where the compiler has it). A pool that let a late worker claim items of
-- the next job (as ours did until it closed each job's ticket) fails both.
local H = require "spec.helper"

local sh = H.sh

local tmp = H.tmpdir(setup, teardown)

local function build(name, flags)
  local exe = tmp() .. "/" .. name
  local ok, out = sh(("${CC:-cc} -std=c11 %s -D_POSIX_C_SOURCE=200809L -DLIMBER_THREADS=1 "
    .. "-I'%scsrc/kernel' '%sspec/c/pool_stress.c' '%scsrc/kernel/threadpool.c' -pthread -o '%s'"):format(
    flags, H.root, H.root, H.root, exe))
  return ok and exe or nil, out
end

describe("the worker pool", function()
  it("runs every item of every job exactly once, never with another job's context", function()
    local exe, err = build("pool_stress", "-O2")
    assert.truthy(exe, err)
    for _, threads in ipairs({ 2, 3, 8 }) do
      local ok, out = sh(("timeout 120 '%s' 20000 %d"):format(exe, threads))
      assert.is_true(ok, out)
      assert.truthy(out:find(("20000 rounds, %d threads: missed 0, repeated 0, stale 0, out of range 0, "
        .. "bad worker 0"):format(threads), 1, true), out)
    end
  end)

  it("has no data race ThreadSanitizer can see", function()
    local exe, err = build("pool_stress_tsan", "-O1 -g -fsanitize=thread")
    if not exe then
      pending("no ThreadSanitizer in this compiler: " .. err:sub(1, 200))
      return
    end
    local ok, out = sh(("TSAN_OPTIONS=halt_on_error=1 timeout 120 '%s' 4000 3"):format(exe))
    if not ok and out:find("unexpected memory mapping", 1, true) then
      -- gcc 12's TSan runtime cannot start under some kernels' address-space layout
      pending("ThreadSanitizer cannot run on this kernel: " .. out:sub(1, 200))
      return
    end
    assert.is_true(ok, out)
    assert.falsy(out:find("ThreadSanitizer", 1, true), out)
    assert.truthy(out:find("missed 0, repeated 0, stale 0, out of range 0, bad worker 0", 1, true), out)
  end)
end)

-- A __gc metamethod runs Lua code wherever the collector runs, inside any
-- call that allocates: it can change the thread count between the moment a
-- call sizes its per-worker scratch and the moment its job runs. Packing
-- and clip:error sized their scratch for one count and laid it out for the
-- other, and a plan ran more workers than it had scratch for: heap
-- overflows from plain Lua (found 2026-11-29; ASan saw writes past the
-- pack scratch). The finalizers below raise the count only while the call
-- runs (`inside`), and the results must equal the same calls' on a fixed
-- count.
describe("a thread count changed by a __gc during a call", function()
  local limber = require "limber"
  local anim = require "limber.anim"
  local sk = require "limber.skinning"
  local threads0, restore_gc
  before_each(function()
    threads0 = sk.threads()
    restore_gc = H.eager_gc()
  end)
  after_each(function()
    restore_gc()
    sk.threads(threads0)
  end)
  local armed = H.armed

  -- 96 joints: a scratch of a few MB, whose allocation is where the
  -- collector steps (with 12 joints the finalizers ran elsewhere)
  local joints = {}
  for j = 1, 96 do joints[j] = { name = "j" .. j, parent = j > 1 and "j" .. (j - 1) or nil } end
  local skel = limber.skeleton(joints)
  local function clip_of(keys)
    local tracks = {}
    for j = 1, #joints do
      local times, values = {}, {}
      for k = 1, keys do
        local a = 0.6 * math.sin(k * 0.3 + j)
        times[k] = (k - 1) / 30
        values[#values + 1], values[#values + 2] = math.sin(a / 2), 0
        values[#values + 1], values[#values + 2] = 0, math.cos(a / 2)
      end
      tracks[#tracks + 1] = { joint = j, path = "rotation", times = times, values = values }
    end
    return anim.clip({ tracks = tracks, pack = false }, skel)
  end

  it("leaves anim.pack and clip:error on the count they sized for", function()
    local clip = clip_of(31)
    sk.threads(1)
    local ref = anim.pack(clip, skel)
    local ref_err = ref:error(clip, skel, 0.1)
    -- Lua 5.4's default pace: the finalizers then run at the scratch's
    -- allocation (on the eager pace above, at the first allocation in anim.pack)
    collectgarbage("setpause", 200)
    collectgarbage("setstepmul", 100)
    local fired, inside = 0, false
    for it = 1, 200 do
      sk.threads(1 + it % 2)
      armed(function()
        if not inside then return end
        fired = fired + 1
        sk.threads(8)
      end)
      for _ = 1, 2000 do local _ = { 0 } end -- garbage: the collector's pace
      inside = true
      local packed = anim.pack(clip, skel)
      local e = packed:error(clip, skel, 0.1)
      inside = false
      assert.equal(ref:bytes(), packed:bytes())
      for _, j in ipairs({ 1, 48, 96 }) do -- the same keys, not just as many bytes
        assert.same({ ref:track_keys(j, "rotation") }, { packed:track_keys(j, "rotation") })
      end
      assert.equal(ref_err.max_error_distance, e.max_error_distance)
      assert.equal(ref_err.p99_error_distance, e.p99_error_distance)
      if it >= 20 and fired >= 20 then break end
    end
    H.fired_or_pending(fired, "anim.pack or clip:error", pending)
  end)

  it("leaves plan:run on the workers it has scratch for", function()
    local clip = clip_of(90)
    local N = 64
    local function plan_of()
      local pose = limber.pose(skel, N)
      local pal = limber.palette(pose)
      local plan = limber.plan({ pose = pose, clips = { clip }, layers = { { sources = 1 } },
                                 palettes = { pal } })
      for i = 1, N do plan:play(i, 1, 1, 1, (i - 1) / N * clip:duration()) end
      return plan, pal
    end
    sk.threads(1)
    local plan, ref = plan_of()
    plan:run(0)
    local fired, inside = 0, false
    for it = 1, 300 do
      sk.threads(1)
      local p, pal = plan_of() -- scratch for one worker
      sk.threads(2) -- the run makes scratch for two ...
      armed(function()
        if not inside then return end
        fired = fired + 1
        sk.threads(8) -- ... while a finalizer asks for eight
      end)
      inside = true
      p:run(0)
      inside = false
      assert.equal(ref:matrix_buffer():bytes(), pal:matrix_buffer():bytes())
      if it >= 20 and fired >= 20 then break end
    end
    H.fired_or_pending(fired, "plan:run", pending)
  end)
end)
