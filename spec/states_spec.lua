-- limber in several lua_States (issue 13, items 8 and 9): spec/c/two_states.c
-- runs two states on two threads that sample, run a frame plan and skin at once, each
-- changing its own SIMD level and thread count every frame (every frame's
-- bytes must equal a single-state run at that level), and opens and closes
-- states whose objects skin from finalizers that run after the worker
-- pool's (no thread may be left behind, the late skin must be right; on
-- Lua 5.1 and LuaJIT, which unload a C module before any finalizer of an
-- object made before it, from a finalizer at lua_close before the pool's).
-- The host is built against the running Lua, for the module it loads.
-- Plain against the module busted loaded (with ASan when the suite runs
-- under it: the host is then built with it and leaks are checked), and
-- under ThreadSanitizer with a module compiled here (in the Lua 5.4 pass only:
-- tagged #once #nosan, see below). The code before the
-- fix fails: one state's core.simd() changed the other's frames (and TSan
-- reports the race), and a late finalizer restarted workers on memory
-- lua_close then freed (a crash, or threads left behind).
local H = require "spec.helper"

local sh = H.sh

local preload = os.getenv("LD_PRELOAD") or ""
local asan = preload:find("libasan", 1, true) ~= nil
local lpath = H.root .. "lua/?.lua;" .. H.root .. "lua/?/init.lua"
local module = H.searchpath("limber.core", package.cpath)
local tmp = H.tmpdir(setup, teardown)
setup(function() assert(os.execute(("mkdir -p '%s/limber'"):format(tmp()))) end)

local function build_host(name, flags)
  local exe = tmp() .. "/" .. name
  -- against the running Lua's library: the module it loads is built for that Lua
  local ok, out = sh(("${CC:-cc} -std=c11 %s -D_POSIX_C_SOURCE=200809L %s "
    .. "'%sspec/c/two_states.c' %s -pthread -o '%s'"):format(flags, H.lua_cflags, H.root, H.lua_libs, exe))
  return ok and exe or nil, out
end

-- the cpath entry that finds `so` as limber/core.so
local function cpath_of(so)
  return (so:gsub("limber/core%.so$", "?.so"))
end

local function run(exe, cpath, mode, n, env)
  return sh(("%s timeout 120 '%s' '%s' '%s' %s %d"):format(env or "", exe, lpath, cpath, mode, n))
end

describe("two lua_States", function()
  local exe, env
  setup(function()
    assert(module, "limber.core not found in package.cpath")
    local err
    if asan then
      exe, err = build_host("two_states_asan", "-O1 -g -fsanitize=address,undefined")
      env = ("LD_PRELOAD='%s' ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "
        .. "LSAN_OPTIONS=suppressions='%sspec/lsan.supp'"):format(preload, H.root)
    else
      exe, err = build_host("two_states", "-O2")
    end
    assert.truthy(exe, err)
  end)

  it("on two threads keep their own SIMD level and thread count, with single-state results", function()
    local ok, out = run(exe, cpath_of(module), "race", 40, env)
    assert.is_true(ok, out)
    assert.truthy(out:find("2 states x 40 frames: mismatches 0", 1, true), out)
    if out:find("levels give the same bytes", 1, true) then
      -- a CPU without AVX2: every level gives the same bytes, so a state that
      -- used the other's level would go unseen here
      pending("this CPU's SIMD levels give the same bytes: " .. out)
    end
  end)

  it("closed with late finalizers leave no thread behind and skin right", function()
    local ok, out = run(exe, cpath_of(module), "late", 6, env)
    assert.is_true(ok, out)
    assert.truthy(out:find("late: 6 states: threads before (%d+), after %1, most after a close %1, "
      .. "late skins wrong 0"), out)
  end)

  -- #once #nosan: this test builds its own module with ThreadSanitizer (about a
  -- minute, a third of a pass's time) and its threads live in the kernel's pool,
  -- which no interpreter changes: the Lua 5.4 pass runs it; the sanitized pass
  -- and the other interpreters run the first two tests
  it("have no data race ThreadSanitizer can see #once #nosan", function()
    local host, err = build_host("two_states_tsan", "-O1 -g -fsanitize=thread")
    if not host then
      pending("no ThreadSanitizer in this compiler: " .. err:sub(1, 200))
      return
    end
    -- the module, compiled with TSan (two compilers at a time)
    local flags = "-std=c99 -O0 -g -fsanitize=thread -fPIC -fno-math-errno -DCGLM_ALL_UNALIGNED "
      .. "-D_POSIX_C_SOURCE=200809L -DLIMBER_THREADS=1"
    local src = H.root .. "csrc"
    local ok, out = sh(("ls '%s'/*/*.c '%s'/kernel/x86/*.c | xargs -P2 -I{} sh -c '${CC:-cc} %s "
      .. "-I\"%s/kernel\" %s "
      .. "-c \"$1\" -o \"%s/$(basename \"$1\").o\"' _ {} && ${CC:-cc} -shared -fsanitize=thread '%s'/*.o "
      .. "-pthread -o '%s/limber/core.so'"):format(src, src, flags, src, H.lua_cflags, tmp(), tmp(), tmp()))
    assert.is_true(ok, out)
    local cpath = tmp() .. "/?.so"
    -- TSan maps terabytes of shadow memory at fixed addresses: on a busy
    -- machine the mapping can fail (ENOMEM) once and work the next time
    local function run_tsan(mode, frames)
      local r_ok, r_out
      for _ = 1, 3 do
        -- the race run's states also pack a long clip (spec/c/two_states.c)
        r_ok, r_out = run(host, cpath, mode, frames, "TSAN_OPTIONS=halt_on_error=1"
          .. (mode == "race" and " LIMBER_LONG_PACK=1" or ""))
        if r_ok or not r_out:find("ThreadSanitizer failed to allocate", 1, true) then break end
      end
      return r_ok, r_out
    end
    ok, out = run_tsan("race", 12)
    if not ok and (out:find("unexpected memory mapping", 1, true)
        or out:find("ThreadSanitizer failed to allocate", 1, true)) then
      pending("ThreadSanitizer cannot map its memory here: " .. out:sub(1, 200))
      return
    end
    assert.is_true(ok, out)
    assert.falsy(out:find("ThreadSanitizer", 1, true), out)
    assert.truthy(out:find("mismatches 0", 1, true), out)
    ok, out = run_tsan("late", 3)
    assert.is_true(ok, out)
    assert.falsy(out:find("ThreadSanitizer", 1, true), out)
    assert.truthy(out:find("late skins wrong 0", 1, true), out)
  end)
end)
