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
