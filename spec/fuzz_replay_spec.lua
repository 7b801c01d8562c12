-- Replays the fuzz regression corpus (fuzz/regressions/<harness>/: every
-- input that once crashed a harness or broke one of its oracles) and a
-- seed corpus built from the bundled models through the libFuzzer harness
-- functions, without libFuzzer, in the driver fuzz/replay.c.
-- The driver: $LIMBER_FUZZ_REPLAY (scripts/test.sh points it at the
-- ASan + UBSan build), else build/limber_fuzz_replay, else compiled here
-- with the C compiler (the installed tree has no CMake build directory).
local H = require "spec.helper"

-- ok, output, exit code on every Lua (5.1 and LuaJIT's popen close() gives no status);
-- the environment is kept (the sanitizer pass's LD_PRELOAD)
local sh = H.run

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function count_files(dir)
  local _, out = sh(("ls -1 '%s' 2>/dev/null | wc -l"):format(dir))
  return tonumber(out:match("%d+"))
end

local driver, tmpdir

setup(function()
  driver = os.getenv("LIMBER_FUZZ_REPLAY")
  if not driver or driver == "" then
    driver = exists("build/limber_fuzz_replay") and "build/limber_fuzz_replay" or nil
  end
  tmpdir = os.tmpname()
  os.remove(tmpdir)
  assert(os.execute(("mkdir -p '%s'"):format(tmpdir)))
  if not driver then
    driver = tmpdir .. "/limber_fuzz_replay"
    local ok, out = sh(("${CC:-cc} -std=c99 -O1 -Icsrc/kernel -DCGLM_ALL_UNALIGNED "
      .. "-D_POSIX_C_SOURCE=200809L fuzz/*.c csrc/kernel/*.c csrc/kernel/x86/*.c -lm -pthread "
      .. "-o '%s'")
      :format(driver))
    assert(ok, "compiling the replay driver failed:\n" .. out)
  end
end)

teardown(function()
  if tmpdir then os.execute(("rm -rf '%s'"):format(tmpdir)) end
end)

describe("fuzz regression corpus", function()
  it("replays every saved input through its harness without a report", function()
    local ok, out = sh(("'%s' fuzz/regressions"):format(driver))
    assert.is_true(ok, out)
    local seen = 0
    for h, n in out:gmatch("([%w_]+): (%d+) inputs replayed") do
      assert.are.equal(count_files("fuzz/regressions/" .. h), tonumber(n), h)
      seen = seen + tonumber(n)
    end
    assert.is_true(seen >= 3, out)
  end)

  it("replays a seed corpus made from the bundled models", function()
    local ok, out = sh(("%s %s fuzz/make_seeds.lua '%s/seeds'"):format(H.lua_env(), H.lua_exe, tmpdir))
    assert.is_true(ok, out)
    ok, out = sh(("'%s' '%s/seeds'"):format(driver, tmpdir))
    assert.is_true(ok, out)
    for _, h in ipairs { "glb", "base64", "accessor", "sparse", "influences", "skeleton" } do
      local n = tonumber(out:match(h .. ": (%d+) inputs replayed"))
      assert.is_true(n and n > 0, h .. " has no seeds:\n" .. out)
    end
  end)

  it("stops with an error on an unknown harness", function()
    local ok, out, code = sh(("'%s' nosuch fuzz/make_seeds.lua"):format(driver))
    assert.is_falsy(ok)
    assert.are.equal(2, code)
    assert.matches("unknown harness nosuch", out, 1, true)
  end)

  it("aborts when a harness oracle fails", function()
    -- an infinite weight used to be accepted and came out as NaN: the oracle
    -- must flag a kernel that accepts it, so feed the harness one that it
    -- must refuse and check the run is clean, then a run that cannot be
    -- clean: a file that does not exist
    local ok, out = sh(("'%s' influences fuzz/regressions/influences/infinite-weight")
      :format(driver))
    assert.is_true(ok, out)
    ok = sh(("'%s' influences '%s/missing'"):format(driver, tmpdir))
    assert.is_falsy(ok)
  end)
end)
