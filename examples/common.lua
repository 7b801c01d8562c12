-- Shared by the examples and benchmarks: finds limber for the interpreter
-- running them, and the benchmarks' C baselines; small fallbacks for the
-- library calls newer than Lua 5.1; timing statistics and a humanoid test
-- skeleton. Runs unchanged on Lua 5.1, 5.2, 5.3, 5.4 and LuaJIT.
--
-- Where limber is looked for, per interpreter (C modules are built for one
-- Lua: a 5.4 module does not load into 5.1 or LuaJIT):
--   * LUA_CPATH (LUA_CPATH_5_x) that already finds limber.core: kept first;
--   * Lua 5.1 to 5.4: the LuaRocks tree ./lua_modules/{share,lib}/lua/5.x/
--     (`luarocks --lua-version 5.x make --tree lua_modules limber-scm-1.rockspec`),
--     then the sources lua/ and the CMake build (build/ for 5.4, build-5.x/
--     for the others: `cmake -S . -B build-5.x -DLIMBER_LUA=5.x`); LIMBER_DEV=1,
--     or no tree for this version, puts the sources and the build first;
--   * LuaJIT: the sources lua/ and the CMake build build-luajit/
--     (`cmake -S . -B build-luajit -DLIMBER_LUA=luajit`) first; the 5.1 tree
--     only as a fallback (its limber.core is built against PUC Lua 5.1's
--     headers; LuaJIT loads it, but build-luajit/ is the build for LuaJIT).
-- The benchmarks' C baselines (limber.baseline_*, not part of the rock) are
-- found after all that in build-bench/ for 5.4 and build-bench-<v>/ for the
-- others (build-bench-5.1, ..., build-bench-luajit); scripts/build.sh builds
-- them for every interpreter it finds (CMake -DLIMBER_LUA=<v>
-- -DLIMBER_BASELINES=ON). A CMake build (build/, build-luajit/ ...) has them
-- too.
local here = (arg and arg[0] or ""):match("^(.*)/examples/[^/]*$") or "."

local C = {}
C.root = here

-- ---- the interpreter -------------------------------------------------------

local jit = rawget(_G, "jit")
--- The interpreter, as the benchmarks report it: "Lua 5.4", "LuaJIT 2.1.0-beta3".
C.lua = jit and jit.version or _VERSION
local V = _VERSION:match("%d+%.%d+")        -- "5.1" under LuaJIT
--- "5.1" .. "5.4" or "luajit".
C.lua_tag = jit and "luajit" or V

-- ---- library calls newer than 5.1 ------------------------------------------

local floor = math.floor

-- luacheck: push ignore 113 143 (the fallbacks below test for calls newer than 5.1)
--- `package.searchpath` (5.2+).
C.searchpath = package.searchpath or function(name, path)
  local file = name:gsub("%.", "/")
  local tried = {}
  for template in path:gmatch("[^;]+") do
    local candidate = template:gsub("%?", file)
    local f = io.open(candidate, "rb")
    if f then
      f:close()
      return candidate
    end
    tried[#tried + 1] = "\n\tno file '" .. candidate .. "'"
  end
  return nil, table.concat(tried)
end

--- `math.tointeger` (5.3+); before 5.3 an integral number in [-2^53, 2^53]
-- (what the examples take as a count or a seed).
C.tointeger = math.tointeger or function(v)
  if type(v) == "number" and v == floor(v) and v >= -2 ^ 53 and v <= 2 ^ 53 then return v end
  return nil
end

--- `table.unpack` (5.2+; `unpack` before).
C.unpack = table.unpack or unpack

--- `math.atan(y, x)` (5.3+; `math.atan2` before, `math.atan` takes one argument).
C.atan2 = math.atan2 or math.atan

--- `os.execute(cmd)` as a boolean: true when the command exited with status
-- 0 (5.1 and LuaJIT return the status as a number, 5.2+ true or nil).
function C.execute(cmd)
  local ok = os.execute(cmd)
  if type(ok) == "number" then return ok == 0 end
  return ok == true
end

-- A little-endian float32 at byte `pos` of `s`, in plain Lua.
local function f32(s, pos)
  local b1, b2, b3, b4 = s:byte(pos, pos + 3)
  local sign = b4 >= 128 and -1 or 1
  local e = (b4 % 128) * 2 + floor(b3 / 128)
  local m = ((b3 % 128) * 256 + b2) * 256 + b1
  if e == 255 then return m == 0 and sign * math.huge or 0 / 0 end
  if e == 0 then return sign * m * 2 ^ -149 end
  return sign * (m + 8388608) * 2 ^ (e - 150)
end

-- A little-endian unsigned integer of n bytes at byte `pos` of `s`.
local function uint(s, pos, n)
  local v, scale = 0, 1
  for k = pos, pos + n - 1 do
    v = v + s:byte(k) * scale
    scale = scale * 256
  end
  return v
end

--- `string.unpack` (5.3+) for the formats the examples read: "<" followed
-- by "f" (float32), "I2" and "I4" (unsigned); the plain Lua decoder above
-- before 5.3.
C.string_unpack = string.unpack or function(fmt, s, pos)
  pos = pos or 1
  assert(fmt:sub(1, 1) == "<", "common.string_unpack: little-endian formats only")
  local out, n = {}, 0
  for op, size in fmt:sub(2):gmatch("(%a)(%d*)") do
    n = n + 1
    if op == "f" then
      out[n], pos = f32(s, pos), pos + 4
    elseif op == "I" and (size == "2" or size == "4") then
      out[n], pos = uint(s, pos, tonumber(size)), pos + tonumber(size)
    else
      error("common.string_unpack: unsupported format " .. op .. size)
    end
  end
  out[n + 1] = pos
  return C.unpack(out, 1, n + 1)
end

--- `string.packsize` (5.3+) for the same formats.
C.packsize = string.packsize or function(fmt)
  local size = 0
  for op, n in fmt:gsub("^<", ""):gmatch("(%a)(%d*)") do
    size = size + (op == "f" and 4 or tonumber(n))
  end
  return size
end

--- The scalars of elements first .. first + count - 1 of a limber Buffer
-- (all by default), flat: one string.unpack of its bytes (5.3+), one
-- buf:get per element before.
function C.values(buf, first, count)
  first = first or 1
  count = count or buf:element_count() - first + 1
  local width = buf:width()
  if string.unpack then
    local code = ({ f32 = "f", u8 = "B", u16 = "I2", u32 = "I4" })[buf:scalar_type()]
    local out = { string.unpack("<" .. code:rep(width * count), buf:bytes(first, count)) }
    out[#out] = nil   -- the position after the last value
    return out
  end
  local out, n = {}, 0
  for i = first, first + count - 1 do
    local e = buf:get(i)
    if width == 1 then
      n = n + 1
      out[n] = e
    else
      for c = 1, width do out[n + c] = e[c] end
      n = n + width
    end
  end
  return out
end
-- luacheck: pop

-- ---- where limber is --------------------------------------------------------

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local dev = os.getenv("LIMBER_DEV") == "1"
local tree_path = here .. "/lua_modules/share/lua/" .. V .. "/?.lua;"
  .. here .. "/lua_modules/share/lua/" .. V .. "/?/init.lua;"
local tree_cpath = here .. "/lua_modules/lib/lua/" .. V .. "/?.so;"
local build_dir = C.lua_tag == "5.4" and "build" or "build-" .. C.lua_tag
local dev_path = here .. "/lua/?.lua;" .. here .. "/lua/?/init.lua;"
local dev_cpath = here .. "/" .. build_dir .. "/?.so;"
local installed = exists(here .. "/lua_modules/lib/lua/" .. V .. "/limber/core.so")
local built = exists(here .. "/" .. build_dir .. "/limber/core.so")
local given = C.searchpath("limber.core", package.cpath) -- LUA_CPATH names one: keep it
if given and not dev then
  package.path = package.path .. ";" .. tree_path .. dev_path
  package.cpath = package.cpath .. ";" .. tree_cpath .. dev_cpath
elseif dev or not installed or (C.lua_tag == "luajit" and built) then
  package.path = dev_path .. tree_path .. package.path
  package.cpath = dev_cpath .. tree_cpath .. package.cpath
else
  package.path = tree_path .. dev_path .. package.path
  package.cpath = tree_cpath .. dev_cpath .. package.cpath
end

-- The benchmarks' C baselines (limber.baseline_*) are not part of the rock:
-- scripts/build.sh builds them into build-bench/ (5.4) and build-bench-<v>/
-- (a CMake build has them in its folder too, on the path above). That folder
-- is searched after everything above, and only for those modules.
local bench_dir = C.lua_tag == "5.4" and "build-bench" or "build-bench-" .. C.lua_tag
local bench_cpath = here .. "/" .. bench_dir .. "/?.so"
local searchers = package.searchers or package.loaders -- luacheck: ignore 143 (5.1's name)
searchers[#searchers + 1] = function(name)
  if not name:match("^limber%.baseline_[%w_]+$") then return nil end
  local path, err = C.searchpath(name, bench_cpath)
  if not path then
    return err .. ("\n\t(the baselines for %s: bash scripts/build.sh builds them into %s/,"
      .. " CMake -DLIMBER_LUA=%s -DLIMBER_BASELINES=ON)"):format(C.lua, bench_dir, C.lua_tag)
  end
  local open, why = package.loadlib(path, "luaopen_" .. name:gsub("%.", "_"))
  if not open then
    error(("error loading module '%s' from file '%s':\n\t%s"):format(name, path, why))
  end
  return open, path
end

--- The line every benchmark starts with: the interpreter and the limber.core
-- it loads.
function C.interpreter_line()
  local core = C.searchpath("limber.core", package.cpath)
  if core and core:sub(1, #here + 1) == here .. "/" then core = core:sub(#here + 2) end
  return ("interpreter: %s, limber.core from %s"):format(C.lua, core or "(not found)")
end

-- ---- timing, options, test data, JSON ---------------------------------------

--- Median and minimum of a list of numbers.
function C.stats(list)
  local s = {}
  for i, v in ipairs(list) do s[i] = v end
  table.sort(s)
  return s[floor((#s + 1) / 2)], s[1]
end

--- Runs fn() `frames` times after `warmup` runs; returns median, min (ms).
function C.time(clock, frames, fn, warmup)
  for _ = 1, warmup or 3 do fn() end
  local t = {}
  for f = 1, frames do
    local t0 = clock()
    fn()
    t[f] = (clock() - t0) * 1e3
  end
  return C.stats(t)
end

--- Parses --flag and --key value options into a table.
function C.options(argv, defaults)
  local o = {}
  for k, v in pairs(defaults) do o[k] = v end
  local i = 1
  while i <= #argv do
    local a = argv[i]
    local key = a:match("^%-%-([%w%-]+)$")
    if not key then error("unexpected argument " .. a, 0) end
    key = key:gsub("%-", "_")
    if type(defaults[key]) == "boolean" then
      o[key] = true
    elseif defaults[key] == nil then
      error("unknown option --" .. key, 0)
    else
      i = i + 1
      local v = argv[i]
      if v == nil then error("option --" .. key .. " needs a value", 0) end
      o[key] = type(defaults[key]) == "number"
        and assert(tonumber(v), "--" .. key .. " needs a number") or v
    end
    i = i + 1
  end
  return o
end

--- A 96-joint humanoid-shaped skeleton description (for limber.skeleton):
-- root, spine, neck, head with face joints, two arms with twist joints and
-- 15-joint hands, two legs with toes, and a few attachment joints.
function C.humanoid()
  local joints = {}
  local function add(name, parent, y)
    joints[#joints + 1] = { name = name, parent = parent, translation = { 0, y or 0.1, 0 } }
    return name
  end
  add("root")
  local p = add("hips", "root", 1.0)
  for i = 1, 4 do p = add("spine" .. i, p) end
  local chest = p
  p = add("neck1", chest) p = add("neck2", p)
  local head = add("head", p)
  for _, f in ipairs({ "jaw", "eye_l", "eye_r", "brow_l", "brow_r", "lip_u", "lip_d", "cheek_l",
                       "cheek_r", "nose" }) do add(f, head, 0.05) end
  for _, side in ipairs({ "l", "r" }) do
    local a = add("clavicle_" .. side, chest)
    a = add("upperarm_" .. side, a) a = add("upperarm_twist_" .. side, a)
    a = add("forearm_" .. side, a) a = add("forearm_twist_" .. side, a)
    local hand = add("hand_" .. side, a)
    for _, finger in ipairs({ "thumb", "index", "middle", "ring", "pinky" }) do
      local f = hand
      for k = 1, 3 do f = add(finger .. k .. "_" .. side, f, 0.03) end
    end
  end
  for _, side in ipairs({ "l", "r" }) do
    local l = add("thigh_" .. side, "hips", -0.1)
    l = add("thigh_twist_" .. side, l) l = add("calf_" .. side, l) l = add("calf_twist_" .. side, l)
    local foot = add("foot_" .. side, l)
    l = add("ball_" .. side, foot)
    for k = 1, 5 do add("toe" .. k .. "_" .. side, l, 0.02) end
  end
  for _, a in ipairs({ "weapon_r", "weapon_l", "shield", "back", "hip_holster", "ik_hand_l",
                       "ik_hand_r", "ik_foot_l", "ik_foot_r", "camera", "look_at", "cape",
                       "quiver" }) do
    add(a, a:match("^ik") and "root" or chest)
  end
  assert(#joints == 96, #joints)
  return joints
end

-- ---- the sampling benchmarks' humanoid and synthetic clips ----------------


--- The 96-joint humanoid of the sampling benchmarks (a limber.Skeleton).
function C.sampling_humanoid(limber)
  local joints = {}
  local function add(name, parent, t)
    joints[#joints + 1] = { name = name, parent = parent, translation = t or { 0, 0.1, 0 } }
    return name
  end
  add("hips", nil, { 0, 1, 0 })
  local p = "hips"
  for k = 1, 3 do p = add("spine" .. k, p) end
  local chest = add("chest", p)
  local head = add("head", add("neck", chest))
  for _, side in ipairs({ "l", "r" }) do
    local x = side == "l" and 0.1 or -0.1
    local a = add(side .. "_clavicle", chest, { x, 0.1, 0 })
    a = add(side .. "_upperarm", a, { x * 1.5, 0, 0 })
    add(side .. "_upperarm_twist", a, { x, 0, 0 })
    a = add(side .. "_forearm", a, { x * 2.5, 0, 0 })
    add(side .. "_forearm_twist", a, { x, 0, 0 })
    local hand = add(side .. "_hand", a, { x * 2.5, 0, 0 })
    for f = 1, 5 do
      local q = hand
      for s = 1, 3 do
        q = add(("%s_finger%d_%d"):format(side, f, s), q, { x * 0.3, 0, (f - 3) * 0.02 })
      end
    end
    local l = add(side .. "_thigh", "hips", { x, -0.1, 0 })
    add(side .. "_thigh_twist", l, { 0, -0.2, 0 })
    l = add(side .. "_calf", l, { 0, -0.45, 0 })
    add(side .. "_calf_twist", l, { 0, -0.2, 0 })
    l = add(side .. "_foot", l, { 0, -0.45, 0 })
    add(side .. "_toe_end", add(side .. "_toe", l, { 0, -0.05, 0.1 }), { 0, 0, 0.05 })
  end
  local k = 0
  while #joints < 96 do
    k = k + 1
    add("face" .. k, head, { (k % 7 - 3) * 0.01, 0.05, 0.08 })
  end
  return limber.skeleton(joints)
end

-- Synthetic clip: T, R and S tracks on every joint, keyed at `rate` Hz for
-- `seconds` seconds (one uniform key grid, as resampled mocap and DCC
-- exports have, so the clip gets the dense form), exact (`pack = false`: the
-- benchmarks pack it themselves where they measure packing); smooth motion (keys a few
-- degrees apart). Also returns the raw arrays for the baselines.
function C.synthetic_clip(limber, skel, seconds, rate, cursor_only)
  local J = skel:joint_count()
  local nk = math.floor(seconds * rate + 0.5) + 1
  local times = {}
  for k = 1, nk do times[k] = (k - 1) / rate end
  local tb = limber.buffer("f32", 1, times)
  local tracks = {}
  local all_times = limber.buffer("f32", 1, J * 3 * nk)
  local tv = limber.buffer("f32", 3, J * nk)
  local rv = limber.buffer("f32", 4, J * nk)
  local sv = limber.buffer("f32", 3, J * nk)
  local tstr = tb:bytes()
  for j = 1, J do
    local t0 = skel:rest_trs(j)
    local T, R, S = {}, {}, {}
    local ph = j * 0.37
    for k = 1, nk do
      local t = times[k]
      T[#T + 1], T[#T + 2], T[#T + 3] = t0[1] + 0.02 * math.sin(t * 3 + ph), t0[2],
        t0[3] + 0.01 * math.cos(t * 2 + ph)
      local a = 0.5 * math.sin(t * 4 + ph)
      local ax, ay, az = math.sin(ph), math.cos(ph), 0.3
      local n = math.sqrt(ax * ax + ay * ay + az * az)
      local sa = math.sin(a / 2) / n
      R[#R + 1], R[#R + 2], R[#R + 3], R[#R + 4] = ax * sa, ay * sa, az * sa, math.cos(a / 2)
      local s = 1 + 0.05 * math.sin(t * 5 + ph)
      S[#S + 1], S[#S + 2], S[#S + 3] = s, s, s
    end
    local tbuf, rbuf, sbuf = limber.buffer("f32", 3, T), limber.buffer("f32", 4, R),
      limber.buffer("f32", 3, S)
    tracks[#tracks + 1] = { joint = j, path = "translation", times = tb, values = tbuf }
    tracks[#tracks + 1] = { joint = j, path = "rotation", times = tb, values = rbuf }
    tracks[#tracks + 1] = { joint = j, path = "scale", times = tb, values = sbuf }
    for m = 0, 2 do all_times:set_bytes(tstr, ((j - 1) * 3 + m) * nk + 1) end
    tv:set_bytes(tbuf:bytes(), (j - 1) * nk + 1)
    rv:set_bytes(rbuf:bytes(), (j - 1) * nk + 1)
    sv:set_bytes(sbuf:bytes(), (j - 1) * nk + 1)
  end
  local name = ("synthetic %ds@%dHz"):format(seconds, rate)
  -- cursor_only: the same clip without the dense form (the per-track cursor path)
  local clip = cursor_only and limber.core.clip(tracks, name, false)
    or require("limber.anim").clip({ name = name, tracks = tracks, pack = false }, skel)
  return clip, { times = all_times, tv = tv, rv = rv, sv = sv, keys = nk, rate = rate }
end

--- A string as a JSON string literal.
function C.json_string(v)
  return '"' .. v:gsub('[%c"\\]', function(c) return ("\\u%04x"):format(c:byte()) end) .. '"'
end

--- Prints a JSON object (flat: numbers, strings, booleans) on one line.
function C.json(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do
    local v = t[k]
    local s
    if type(v) == "number" then
      s = (v ~= v or v == math.huge or v == -math.huge) and "null" or string.format("%.6g", v)
    elseif type(v) == "string" then
      s = C.json_string(v)
    else
      s = tostring(v)
    end
    parts[#parts + 1] = string.format("%q:%s", k, s)
  end
  return "{" .. table.concat(parts, ",") .. "}"
end

return C
