-- The binding fuzzer (spec/fuzz_binding.lua) in a child process: random
-- call sequences over every public function, method and metamethod of
-- limber, checked for crashes, sanitizer reports, non-string errors, raw Lua
-- errors leaking out of limber's Lua code, objects changed by calls that
-- raised, NaN from finite input and hangs. Fixed seeds plus one random seed,
-- printed. Under the sanitizer pass of the test command the child inherits
-- ASan + UBSan (LD_PRELOAD) and runs more calls (about a minute in all).
-- A longer run: bash scripts/fuzz-binding.sh [calls] [seed].
local H = require "spec.helper"

local sanitized = (os.getenv("LD_PRELOAD") or ""):find("asan", 1, true) ~= nil
local CALLS = tonumber(os.getenv("LIMBER_FUZZ_CALLS") or "") or (sanitized and 10000 or 4000)

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function run(seed)
  local trace = os.tmpname()
  -- huge requested sizes must come back as "not enough memory", not abort
  -- the sanitizer (a release build gets them from malloc the same way)
  local asan = (os.getenv("ASAN_OPTIONS") or "") .. ":allocator_may_return_null=1:max_allocation_size_mb=4096"
  -- a release build: a 4 GiB address-space limit, so that a huge request (a
  -- buffer of 2^32 elements is legal) fails as it would on a small device
  -- instead of growing until the kernel's OOM killer steps in
  local limit = sanitized and "" or "ulimit -v 4000000 && "
  -- under the running Lua, with its module paths; the environment is kept (LD_PRELOAD)
  local cmd = (limit .. "cd %s && ASAN_OPTIONS=%s %s timeout 600 %s spec/fuzz_binding.lua --seed %d --calls %d"
    .. " --quiet --trace %s"):format(q(H.root), q(asan), H.lua_env(), H.lua_exe, seed, CALLS, q(trace))
  local ok, out, code = H.run(cmd)
  local how = code and code > 128 and ("signal " .. (code - 128)) or "exit"
  local last = {}
  for line in io.lines(trace) do
    last[#last + 1] = line
    if #last > 30 then table.remove(last, 1) end
  end
  os.remove(trace)
  return ok, out, how, code, last
end

describe("the binding fuzzer", function()
  local seeds = { 1, 2, 3, 4 }
  local random_seed = os.time() % 1000000 + 5
  print(("[binding fuzzer: %d calls per seed; random seed %d]"):format(CALLS, random_seed))
  seeds[#seeds + 1] = random_seed
  for _, seed in ipairs(seeds) do
    it(("finds nothing with seed %d"):format(seed), function()
      local ok, out, how, code, last = run(seed)
      if not ok or not out:find("fuzz_binding: ok", 1, true) then
        error(("fuzz_binding seed %d ended by %s %s:\n%s\nlast calls:\n%s"):format(seed, tostring(how),
          tostring(code), out:sub(-6000), table.concat(last, "\n")), 0)
      end
      -- it reached the whole surface: every module function and the classes' methods
      local n, total, classes = out:match("(%d+) of (%d+) callables called, (%d+) classes")
      assert.truthy(n, out)
      assert.is_true(tonumber(total) >= 150, out)
      assert.is_true(tonumber(n) >= 0.9 * tonumber(total), out)
      assert.is_true(tonumber(classes) >= 15, out) -- Image left the core; Hierarchy became Scene
    end)
  end

  it("fails on a binding that crashes, leaks raw errors or changes state when it raises", function()
    -- the checks themselves: a fake module whose functions misbehave
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. q(dir .. "/limber")))
    local bad = {
      -- an error that is not a string
      { "function M.f(x) if x == nil then error({}) end end", "not a string" },
      -- a raw Lua error out of limber's code
      { "function M.f(x) return x.field end", "a raw Lua error" },
      -- changes its argument, then raises
      { "function M.f(b) if type(b) == 'userdata' and b.set and b.width then "
        .. "b:set(1, {7, 7, 7}); error('refused') end end",
        "changed its argument" },
      -- a NaN from finite numbers
      { "function M.f(x) if type(x) == 'number' then return 0/0 end end", "a NaN came back" },
    }
    for _, case in ipairs(bad) do
      local body, expect = case[1], case[2]
      local f = assert(io.open(dir .. "/limber/skinning.lua", "w"))
      f:write("local M = {}\n", body, "\nreturn M\n")
      f:close()
      local trace = os.tmpname()
      local cmd = ("cd %s && %s timeout 120 %s spec/fuzz_binding.lua --seed 7 --calls 3000 --quiet --trace %s"
        .. " --only limber.skinning.f"):format(q(H.root), H.lua_env(dir .. "/?.lua;" .. package.path), H.lua_exe,
        q(trace))
      local ok, out = H.run(cmd)
      os.remove(trace)
      assert.is_falsy(ok, body .. ": " .. out)
      assert.matches("fuzz_binding: FAILED", out, 1, true)
      assert.matches(expect, out, 1, true)
    end
    os.execute("rm -rf " .. q(dir))
  end)
end)
