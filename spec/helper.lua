-- Shared spec helpers: tolerant assertions, a small plain-Lua matrix
-- library (the "obviously correct" reference), random generators with
-- printed seeds, and paths to the bundled test data.
local assert = require "luassert"
local say = require "say"

local H = {}

-- ---- Lua 5.1 to 5.4 and LuaJIT ------------------------------------------
-- The specs run on every supported Lua (scripts/test.sh). Library calls
-- newer than 5.1 are reached through H, never polyfilled into the global
-- tables: a polyfill would hide a missing fallback in limber's own modules.
-- luacheck: push ignore 113 143

--- "5.1", "5.2", "5.3", "5.4" or "luajit".
H.lua = rawget(_G, "jit") and "luajit" or _VERSION:match("%d+%.%d+")
--- True where Lua has a separate integer subtype (5.3 and later): there
-- 2.0 and 2 differ, and 2^63 is out of range of integers.
H.integers = math.type ~= nil
--- True on the full pass: Lua 5.4 without the sanitizers' preloaded
-- runtimes. The other interpreters and the sanitized passes test the
-- binding and memory, which the first random cases already reach.
H.full_pass = H.lua == "5.4" and not (os.getenv("LD_PRELOAD") or ""):find("asan", 1, true)
--- n random cases on the full pass, a quarter of them (at least 1) on the
-- others, for the long pure-Lua differential loops.
function H.cases(n) return H.full_pass and n or math.max(1, math.ceil(n / 4)) end

local floor = math.floor
local function need(ok, msg) if not ok then error("spec.helper: " .. msg, 3) end return ok end
H.math_type = math.type or function(v)
  if type(v) ~= "number" then return nil end
  return (v == floor(v) and v >= -2 ^ 63 and v < 2 ^ 63) and "integer" or "float"
end
H.tointeger = math.tointeger or function(v)
  if H.math_type(v) == "integer" then return v end
end
H.tpack = table.pack or function(...) return { n = select("#", ...), ... } end
H.tunpack = table.unpack or unpack
H.move = table.move or function(a1, f, e, t, a2)
  a2 = a2 or a1
  for i = 0, e - f do a2[t + i] = a1[f + i] end
  return a2
end

--- package.searchpath (5.2+, LuaJIT): the first file of `path` that
-- exists for module `name`, or nil and the list of places tried.
H.searchpath = package.searchpath or function(name, path)
  local tried = {}
  for templ in path:gmatch("[^;]+") do
    local file = templ:gsub("%?", (name:gsub("%.", "/")))
    local f = io.open(file, "rb")
    if f then
      f:close()
      return file
    end
    tried[#tried + 1] = "\n\tno file '" .. file .. "'"
  end
  return nil, table.concat(tried)
end

-- Rounds v (>= 0) to the nearest integer, ties to even: exact in doubles.
local function round_even(v)
  local f = floor(v)
  local d = v - f
  if d > 0.5 or (d == 0.5 and f % 2 == 1) then f = f + 1 end
  return f
end

-- The IEEE 754 binary32 bits of x (as a number in [0, 2^32)).
local function f32_bits(x)
  if x ~= x then return 0x7FC00000 end
  local sign = 0
  if x < 0 or (x == 0 and 1 / x < 0) then sign, x = 0x80000000, -x end
  if x == 0 then return sign end
  if x == math.huge then return sign + 0x7F800000 end
  local m, e = math.frexp(x) -- x = m * 2^e, 0.5 <= m < 1
  local be = e + 126
  if be <= 0 then return sign + round_even(x * 2 ^ 149) end -- subnormal (2^23 becomes the least normal)
  local mant = round_even((m * 2 - 1) * 2 ^ 23)
  if mant == 2 ^ 23 then mant, be = 0, be + 1 end
  if be >= 255 then return sign + 0x7F800000 end
  return sign + be * 2 ^ 23 + mant
end

local function f32_value(bits)
  local sign = bits >= 0x80000000 and -1 or 1
  bits = bits % 0x80000000
  local be, mant = floor(bits / 2 ^ 23), bits % 2 ^ 23
  if be == 255 then return mant == 0 and sign * math.huge or 0 / 0 end
  if be == 0 then return sign * mant * 2 ^ -149 end
  return sign * (1 + mant / 2 ^ 23) * 2 ^ (be - 127)
end

-- The items of a string.pack format, for the subset the specs use:
-- < > = (= is little-endian here), f, d (only through string.pack), B, b,
-- H, h, I[n], i[n], c<n>, x.
local function items(fmt)
  local out, little, i = {}, true, 1
  while i <= #fmt do
    local c = fmt:sub(i, i)
    local n = fmt:match("^%d+", i + 1)
    i = i + 1 + (n and #n or 0)
    n = tonumber(n)
    if c == "<" or c == "=" then little = true
    elseif c == ">" then little = false
    elseif c == "f" then out[#out + 1] = { "f", 4, little }
    elseif c == "B" or c == "b" then out[#out + 1] = { c == "B" and "I" or "i", 1, little }
    elseif c == "H" or c == "h" then out[#out + 1] = { c == "H" and "I" or "i", 2, little }
    elseif c == "I" or c == "i" then out[#out + 1] = { c, n or 4, little }
    elseif c == "c" then out[#out + 1] = { "c", need(n, "c needs a size"), little }
    elseif c == "x" then out[#out + 1] = { "x", 1, little }
    elseif c ~= " " then error("spec.helper pack: format '" .. c .. "' not supported", 3) end
  end
  return out
end

local function int_bytes(v, size, little)
  need(v == floor(v), "pack: integer expected")
  if v < 0 then v = v + 2 ^ (8 * size) end
  local b = {}
  for k = 1, size do
    b[k] = string.char(v % 256)
    v = floor(v / 256)
  end
  local s = table.concat(b)
  return little and s or s:reverse()
end

local function bytes_int(s, signed, little)
  if not little then s = s:reverse() end
  local v = 0
  for k = #s, 1, -1 do v = v * 256 + s:byte(k) end
  if signed and v >= 2 ^ (8 * #s - 1) then v = v - 2 ^ (8 * #s) end
  return v
end

--- A plain-Lua string.pack for the formats above (H.pack uses it where
-- string.pack is missing; spec/compat_spec.lua checks it against 5.3+'s).
function H.pack_lua(fmt, ...)
  local out, k = {}, 0
  for _, it in ipairs(items(fmt)) do
    local kind, size, little = it[1], it[2], it[3]
    if kind == "x" then out[#out + 1] = "\0"
    else
      k = k + 1
      local v = select(k, ...)
      if kind == "f" then out[#out + 1] = int_bytes(f32_bits(v), 4, little)
      elseif kind == "c" then
        need(#v <= size, "pack: string longer than the given size")
        out[#out + 1] = v .. ("\0"):rep(size - #v)
      else out[#out + 1] = int_bytes(v, size, little) end
    end
  end
  return table.concat(out)
end

--- The same for string.unpack: the values, then the next position.
function H.unpack_lua(fmt, s, pos)
  local vals, p = {}, pos or 1
  for _, it in ipairs(items(fmt)) do
    local kind, size, little = it[1], it[2], it[3]
    local chunk = s:sub(p, p + size - 1)
    need(#chunk == size, "unpack: data string too short")
    if kind == "f" then vals[#vals + 1] = f32_value(bytes_int(chunk, false, little))
    elseif kind == "c" then vals[#vals + 1] = chunk
    elseif kind ~= "x" then vals[#vals + 1] = bytes_int(chunk, kind == "i", little) end
    p = p + size
  end
  vals[#vals + 1] = p
  return H.tunpack(vals, 1, #vals)
end
--- string.pack / string.unpack, or the plain-Lua versions before 5.3.
H.pack = string.pack or H.pack_lua
H.unpack = string.unpack or H.unpack_lua
-- luacheck: pop

--- Largest absolute difference between two arrays of numbers (inf when
-- lengths differ).
function H.maxdiff(a, b)
  if #a ~= #b then return math.huge end
  local m = 0
  for i = 1, #a do
    local d = math.abs(a[i] - b[i])
    if d ~= d then return math.huge end
    if d > m then m = d end
  end
  return m
end

local function near(_, args)
  local expected, actual, tol = args[1], args[2], args[3] or 1e-5
  if type(expected) == "number" then return math.abs(expected - actual) <= tol end
  return H.maxdiff(expected, actual) <= tol
end
say:set("assertion.near.positive", "Expected values within tolerance.\nExpected:\n%s\nActual:\n%s")
say:set("assertion.near.negative", "Expected values not within tolerance.\nExpected:\n%s\nActual:\n%s")
assert:register("assertion", "near", near, "assertion.near.positive", "assertion.near.negative")

local function quat_near(_, args)
  local e, a, tol = args[1], args[2], args[3] or 1e-5
  local neg = { -a[1], -a[2], -a[3], -a[4] }
  return H.maxdiff(e, a) <= tol or H.maxdiff(e, neg) <= tol
end
say:set("assertion.quat_near.positive", "Expected quaternions equal up to sign.\nExpected:\n%s\nActual:\n%s")
say:set("assertion.quat_near.negative", "Expected quaternions to differ.\nExpected:\n%s\nActual:\n%s")
assert:register("assertion", "quat_near", quat_near,
  "assertion.quat_near.positive", "assertion.quat_near.negative")

-- ---- plain Lua matrices (column-major, 16 numbers) ----------------------

function H.identity()
  return { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1 }
end

function H.mul(a, b)
  local o = {}
  for c = 0, 3 do
    for r = 0, 3 do
      local s = 0
      for k = 0, 3 do s = s + a[k * 4 + r + 1] * b[c * 4 + k + 1] end
      o[c * 4 + r + 1] = s
    end
  end
  return o
end

--- T * R * S as a column-major matrix (double precision).
function H.trs(t, q, s)
  local x, y, z, w = q[1], q[2], q[3], q[4]
  local n = math.sqrt(x * x + y * y + z * z + w * w)
  x, y, z, w = x / n, y / n, z / n, w / n
  return {
    (1 - 2 * (y * y + z * z)) * s[1], 2 * (x * y + w * z) * s[1], 2 * (x * z - w * y) * s[1], 0,
    2 * (x * y - w * z) * s[2], (1 - 2 * (x * x + z * z)) * s[2], 2 * (y * z + w * x) * s[2], 0,
    2 * (x * z + w * y) * s[3], 2 * (y * z - w * x) * s[3], (1 - 2 * (x * x + y * y)) * s[3], 0,
    t[1], t[2], t[3], 1,
  }
end

-- ---- random data --------------------------------------------------------

--- Seeds math.random from LIMBER_SEED or the clock and prints the seed so
-- a failure can be replayed.
function H.seed(label)
  local seed = tonumber(os.getenv("LIMBER_SEED")) or (os.time() + math.floor(os.clock() * 1e6))
  math.randomseed(seed)
  io.stderr:write(("[seed %s: %d]\n"):format(label or "", seed))
  return seed
end

function H.rand(a, b) return a + (b - a) * math.random() end

function H.rand_quat()
  local x, y, z, w = H.rand(-1, 1), H.rand(-1, 1), H.rand(-1, 1), H.rand(-1, 1)
  local n = math.sqrt(x * x + y * y + z * z + w * w)
  if n < 1e-3 then return { 0, 0, 0, 1 } end
  return { x / n, y / n, z / n, w / n }
end

function H.rand_trs(nonuniform)
  local s = H.rand(0.5, 1.5)
  local scale = nonuniform and { H.rand(0.5, 1.5), H.rand(0.5, 1.5), H.rand(0.5, 1.5) } or { s, s, s }
  return { H.rand(-1, 1), H.rand(-1, 1), H.rand(-1, 1) }, H.rand_quat(), scale
end

--- Random parent array of n joints in parent-before-child order with
-- `roots` roots (0 = root), as 1-based indices.
function H.rand_parents(n, roots)
  roots = math.min(roots or 1, n)
  local p = {}
  for i = 1, n do
    p[i] = i <= roots and 0 or math.random(1, i - 1)
  end
  return p
end

--- Joint descriptions for limber.skeleton with random rest poses.
function H.rand_joints(n, roots)
  local parents = H.rand_parents(n, roots)
  local joints = {}
  for i = 1, n do
    local t, r, s = H.rand_trs(true)
    joints[i] = { name = "j" .. i, parent = parents[i] ~= 0 and parents[i] or nil,
                  translation = t, rotation = r, scale = s }
  end
  return joints
end

--- Model matrices of one instance computed recursively from locals
-- (locals[j] = {t, r, s}), the plain reference for local-to-model.
function H.reference_models(parents, locals, root)
  local out = {}
  local function model(j)
    if out[j] then return out[j] end
    local l = H.trs(locals[j][1], locals[j][2], locals[j][3])
    local m = parents[j] == 0 and H.mul(root or H.identity(), l) or H.mul(model(parents[j]), l)
    out[j] = m
    return m
  end
  for j = 1, #parents do model(j) end
  return out
end

--- Shuffles an array in place (Fisher-Yates) and returns it.
function H.shuffle(t)
  for i = #t, 2, -1 do
    local j = math.random(1, i)
    t[i], t[j] = t[j], t[i]
  end
  return t
end

--- A whole file's bytes.
function H.read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

--- Base64 text of a string (to build data: URIs in specs).
function H.base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    local q = {}
    for k = 3, 0, -1 do
      local d = math.floor(n / 2 ^ (6 * k)) % 64 + 1
      q[#q + 1] = B64:sub(d, d)
    end
    if not b then q[3], q[4] = "=", "=" elseif not c then q[4] = "=" end
    out[#out + 1] = table.concat(q)
  end
  return table.concat(out)
end

--- A pose batch of `instances` instances of `skel` with random local
-- transforms (non-uniform scales); returns the pose and vals[i][j] = {t, r, s}.
function H.rand_pose(skel, instances)
  local limber = require "limber"
  local pose = limber.pose(skel, instances)
  local vals = {}
  for i = 1, instances do
    vals[i] = {}
    for j = 1, skel:joint_count() do
      local t, r, s = H.rand_trs(true)
      pose:set_trs(i, j, t, r, s)
      vals[i][j] = { t, r, s }
    end
  end
  return pose, vals
end

--- A JSON file decoded with lua-cjson.
function H.read_json(path)
  return require("cjson").decode(H.read(path))
end

--- Largest |coordinate| of every POSITION of a loaded glTF asset (at least
-- 1): the scale of absolute errors (Fox spans about 150 units).
function H.gltf_extent(asset)
  local stats = require("limber.core").gltf_stats
  local e = 0
  for _, m in ipairs(asset.meshes) do
    for _, p in ipairs(m.primitives) do
      local lo, hi = stats(p.positions)
      e = math.max(e, math.abs(lo), math.abs(hi))
    end
  end
  return math.max(e, 1)
end

--- Directory of this repository's bundled test data.
H.root = (debug.getinfo(1, "S").source:match("^@(.*)spec/helper%.lua$") or "./")
H.assets = H.root .. "examples/assets/"
H.reference = H.root .. "spec/reference/"

--- Runs a shell command with its output captured, without the sanitizer
-- preload the test command puts into lua5.4 (compilers and C hosts bring
-- their own runtime); returns ok, output.
function H.sh(cmd)
  return H.run("unset LD_PRELOAD; " .. cmd)
end

--- The command of the interpreter this spec runs under ("lua5.4",
-- "luajit" ...): programs a spec starts run on the same Lua.
H.lua_exe = H.lua == "luajit" and "luajit" or "lua" .. H.lua

--- A shell prefix that gives a program started by a spec this run's module
-- paths (package.path and package.cpath, which busted set from the run
-- profile), for every Lua version's variable: `H.lua_env() .. " " ..
-- H.lua_exe .. " examples/x.lua"`. lpath / cpath replace them when given.
function H.lua_env(lpath, cpath)
  lpath, cpath = lpath or package.path, cpath or package.cpath
  local parts = {}
  for _, suffix in ipairs({ "", "_5_2", "_5_3", "_5_4" }) do
    parts[#parts + 1] = ("LUA_PATH%s='%s' LUA_CPATH%s='%s'"):format(suffix, lpath, suffix, cpath)
  end
  return table.concat(parts, " ")
end

--- Registers, with the spec file's busted `setup` and `teardown`, a temporary
-- directory; returns a function giving its path (valid between the two).
function H.tmpdir(setup, teardown)
  local dir
  setup(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute(("mkdir -p '%s'"):format(dir)))
  end)
  teardown(function()
    if dir then os.execute(("rm -rf '%s'"):format(dir)) end
  end)
  return function() return dir end
end

-- specs1: helpers for the specs made portable in issue 15 (anim, api, clip, core,
-- docs, fuzz, oom, states ...).

--- `load(chunk, name, mode, env)` of a string on every Lua: plain 5.1 loads
-- strings with loadstring and sets the environment with setfenv (5.1's
-- load takes only a function; LuaJIT's takes the 5.2 arguments).
function H.load(chunk, name, mode, env)
  if H.lua ~= "5.1" then return load(chunk, name, mode, env) end
  if mode == "t" and chunk:byte(1) == 27 then
    return nil, "attempt to load a binary chunk (mode is 't')"
  end
  local f, err = loadstring(chunk, name) -- luacheck: ignore 113 (5.1's global)
  if f and env ~= nil then setfenv(f, env) end -- luacheck: ignore 113
  return f, err
end

--- The step between neighbouring integers at H.int_max and H.int_min: 1
-- from 5.3, 1024 before (doubles in [2^62, 2^63) are 1024 apart).
H.int_step = H.integers and 1 or 1024

--- The decimal digits of an integer-valued number, as limber.core prints
-- an integer in its messages ("%d": tostring prints 2^62 as 4.6116860184274e+18
-- before 5.3).
function H.intstr(v) return ("%d"):format(v) end

--- Keeps LuaJIT's compiler off until the end of the running test (busted's
-- `finally` given): compiled traces are objects on the Lua heap, which a
-- count of Lua garbage would see. Does nothing on the other Luas.
function H.interpreted(finally)
  local jit = rawget(_G, "jit")
  if not jit then return end
  jit.off()
  jit.flush()
  finally(function() jit.on() end)
end

-- specs2: ------------------------------------------------------------------

--- Runs a shell command with its output (stdout and stderr) captured, in
-- this run's environment: unlike H.sh it keeps a sanitizer preload, so a Lua
-- program started under the ASan run can load the sanitized modules. Returns
-- ok (true or nil), output, exit code (echoed by the shell: close() does
-- not report it on 5.1 and LuaJIT).
function H.run(cmd)
  local p = assert(io.popen("(" .. cmd .. ") 2>&1; echo \"@@exit=$?\""))
  local out = p:read("*a")
  p:close()
  local body, code = out:match("^(.-)@@exit=(%d+)%s*$")
  code = tonumber(code)
  return code == 0 or nil, body or out, code
end

--- The largest and the smallest number limber reads as an integer:
-- math.maxinteger and math.mininteger from 5.3 on; before, where numbers
-- are doubles, the largest double below 2^63 (2^63 - 1024) and -2^63
-- (csrc/lua/lcompat.h: integral and within [-2^63, 2^63)).
H.int_max = math.maxinteger or 2 ^ 63 - 1024 -- luacheck: ignore 143
H.int_min = math.mininteger or -2 ^ 63 -- luacheck: ignore 143

--- Numbers at the edges of the 64-bit integer range, the same list on every
-- Lua: the two ends, the first doubles beyond them (no integer
-- representation: 2^63 and -2^63 - 2048), 2^53 and integers past the
-- doubles' exact range (+-(2^53 + 2)), and a non-integral number. From 5.3
-- on the ends are integers and the others floats.
H.int_edges = { H.int_max, H.int_min, 2 ^ 63, -2 ^ 63 - 2048, 2 ^ 53, 2 ^ 53 + 2, -(2 ^ 53 + 2), 2.5 }

--- True when limber reads v as an integer (integral, within [-2^63, 2^63)).
function H.is_int(v)
  return H.tointeger(v) ~= nil
end

-- examples: running the programs in examples/ under this run's interpreter.

--- The shell command running examples/`name` with `args` (a string, shell
-- syntax) under this run's interpreter (H.lua_exe) and module paths
-- (H.lua_env()); `env` (shell assignments) goes in front.
function H.example(name, args, env)
  return ("%s%s %s '%sexamples/%s' %s"):format(env and env .. " " or "", H.lua_env(), H.lua_exe,
    H.root, name, args or "")
end

--- C compiler flags for the headers of the running Lua (Debian's folders),
-- for a host program or a module a spec compiles: before 5.3 also
-- lua-compat53's folder (compat-5.3.h, which limber's binding includes)
-- as a system folder, searched after LuaJIT's own lua.h.
H.lua_cflags = ({
  ["5.1"] = "-I/usr/include/lua5.1",
  ["5.2"] = "-I/usr/include/lua5.2",
  ["5.3"] = "-I/usr/include/lua5.3",
  ["5.4"] = "-I/usr/include/lua5.4",
  luajit = "-I/usr/include/luajit-2.1 -isystem /usr/include/lua5.1",
})[H.lua]
--- The linker flag of the running Lua's library (-llua5.4, -lluajit-5.1 ...).
H.lua_libs = H.lua == "luajit" and "-lluajit-5.1" or "-llua" .. H.lua

--- A float's exact text: "%a" (hexadecimal), or "%.17g" on 5.1, whose
-- string.format has no %a (17 significant digits give back the same double).
H.floatstr = pcall(string.format, "%a", 0.5) and function(v) return ("%a"):format(v) end
  or function(v) return ("%.17g"):format(v) end

-- ---- skinning data --------------------------------------------------------

-- A random skeleton, a pose batch of `n` random instances and a palette.
function H.skin_palette(joints, n, layout, skin_joints)
  local limber = require "limber"
  local skel = limber.skeleton(H.rand_joints(joints, 2))
  local pose = H.rand_pose(skel, n)
  pose:local_to_model()
  local skin = skin_joints and limber.skin(skel, skin_joints) or nil
  local pal = limber.palette(pose, { layout = layout, skin = skin })
  pal:update()
  return pal, skel, pose
end

-- Palette entry k (1-based) of instance i as a column-major 4x4.
function H.palette_entry(pal, i, k)
  local e = pal:get(i, k)
  if #e == 16 then return e end
  return { e[1], e[5], e[9], 0, e[2], e[6], e[10], 0, e[3], e[7], e[11], 0, e[4], e[8], e[12], 1 }
end

-- Random mesh data in file order: flat Lua arrays; joints 0-based.
function H.skin_random_mesh(V, K, opts)
  opts = opts or {}
  local m = { pos = {}, nrm = {}, tan = {}, jnt = {}, wgt = {}, idx = {}, V = V }
  for _ = 1, V do
    for _ = 1, 3 do m.pos[#m.pos + 1] = H.rand(-2, 2) end
    local x, y, z = H.rand(-1, 1), H.rand(-1, 1), H.rand(-1, 1)
    local n = math.sqrt(x * x + y * y + z * z) + 1e-3
    m.nrm[#m.nrm + 1], m.nrm[#m.nrm + 2], m.nrm[#m.nrm + 3] = x / n, y / n, z / n
    m.tan[#m.tan + 1], m.tan[#m.tan + 2], m.tan[#m.tan + 3] = H.rand(-1, 1), H.rand(-1, 1), 0.5
    m.tan[#m.tan + 1] = math.random() < 0.5 and -1 or 1
    local k = opts.influences or math.random(1, 4)
    local slots = H.shuffle({ 1, 2, 3, 4 })
    local w = { 0, 0, 0, 0 }
    for q = 1, k do w[slots[q]] = H.rand(0.05, 1) end -- unnormalised on purpose
    for q = 1, 4 do
      m.jnt[#m.jnt + 1] = math.random(0, K - 1)
      m.wgt[#m.wgt + 1] = w[q]
    end
  end
  for _ = 1, (opts.tris or V) * 3 do m.idx[#m.idx + 1] = math.random(0, V - 1) end
  return m
end

function H.skin_mesh_desc(m, opts)
  local core = require "limber.core"
  opts = opts or {}
  local desc = {
    positions = core.buffer("f32", 3, m.pos),
    normals = not opts.no_normals and core.buffer("f32", 3, m.nrm) or nil,
    tangents = opts.tangents and core.buffer("f32", 4, m.tan) or nil,
    gpu_joints = core.buffer("u16", 4, m.jnt),
    weights = core.buffer("f32", 4, m.wgt),
    gpu_indices = core.buffer("u32", 1, m.idx),
    skin = opts.skin,
  }
  return desc
end

--- Compares a reference frame's morphNodes (unskinned meshes with morph
-- targets: mesh-local morphed positions) with a gltf_dump frame's.
function H.compare_morph_nodes(rf, gf, tol)
  local rm, gm = rf.morphNodes or {}, gf.morphNodes or {}
  assert.equal(#rm, #gm)
  for k, rn in ipairs(rm) do
    local gn = gm[k]
    assert.equal(rn.node, gn.node)
    assert.near(rn.nodeWorld, gn.nodeWorld, tol)
    for p, rp in ipairs(rn.primitives) do
      assert.equal(rp.vertexCount, gn.primitives[p].vertexCount)
      assert.near(rp.positionsLocal, gn.primitives[p].positionsLocal, tol, "morphNodes positions")
    end
  end
end

--- (x, y, z, w) through the column-major 4x4 M: three numbers.
function H.xform(M, x, y, z, w)
  return M[1] * x + M[5] * y + M[9] * z + M[13] * w, M[2] * x + M[6] * y + M[10] * z + M[14] * w,
         M[3] * x + M[7] * y + M[11] * z + M[15] * w
end

function H.normalize3(x, y, z)
  local l = math.sqrt(x * x + y * y + z * z)
  return x / l, y / l, z / l
end

-- ---- quaternions (x y z w), for specs' own formulas -------------------------

function H.qmul(a, b)
  return { a[4] * b[1] + a[1] * b[4] + a[2] * b[3] - a[3] * b[2],
           a[4] * b[2] - a[1] * b[3] + a[2] * b[4] + a[3] * b[1],
           a[4] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[4],
           a[4] * b[4] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3] }
end

function H.qconj(a) return { -a[1], -a[2], -a[3], a[4] } end

function H.qnorm(q)
  local n = math.sqrt(q[1] ^ 2 + q[2] ^ 2 + q[3] ^ 2 + q[4] ^ 2)
  return { q[1] / n, q[2] / n, q[3] / n, q[4] / n }
end

--- Slerp from a to b at s on the shorter arc, in double; keys whose dot is
-- above `close` (default 0.9999999) are lerped and normalised instead.
function H.slerp(a, b, s, close)
  local dot = a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4]
  if dot < 0 then b, dot = { -b[1], -b[2], -b[3], -b[4] }, -dot end
  if dot > (close or 0.9999999) then
    return H.qnorm({ a[1] + (b[1] - a[1]) * s, a[2] + (b[2] - a[2]) * s,
                     a[3] + (b[3] - a[3]) * s, a[4] + (b[4] - a[4]) * s })
  end
  local th = math.acos(dot)
  local wa, wb = math.sin((1 - s) * th) / math.sin(th), math.sin(s * th) / math.sin(th)
  return { wa * a[1] + wb * b[1], wa * a[2] + wb * b[2], wa * a[3] + wb * b[3],
           wa * a[4] + wb * b[4] }
end

--- v rotated by the unit quaternion q.
function H.qrot(q, v)
  local p = H.qmul(H.qmul(q, { v[1], v[2], v[3], 0 }), H.qconj(q))
  return { p[1], p[2], p[3] }
end

-- ---- Lua code run inside a call: finalizers ------------------------------

--- Leaves n (default 20) garbage objects whose finalizer is fn: tables on 5.2
-- and later, proxy userdata on 5.1 and LuaJIT, whose tables have no __gc.
local newproxy = rawget(_G, "newproxy")
function H.armed(fn, n)
  for _ = 1, n or 20 do
    if newproxy then
      getmetatable(newproxy(true)).__gc = fn
    else
      setmetatable({}, { __gc = fn })
    end
  end
end

--- An incremental, eager collector (a cycle, finalizers included, every few
-- hundred kB) from here on; returns the function that puts the settings
-- back. After a long suite Debian's Lua 5.4 (generational by default) was
-- found collecting nothing at all in loops that rely on finalizers.
function H.eager_gc()
  collectgarbage("restart")
  local mode
  if H.lua == "5.4" then mode = collectgarbage("incremental") end
  if H.lua == "5.2" then collectgarbage("incremental") end -- 5.2's default
  collectgarbage()
  local pause, stepmul = collectgarbage("setpause", 100), collectgarbage("setstepmul", 400)
  return function()
    collectgarbage("setpause", pause)
    collectgarbage("setstepmul", stepmul)
    if mode then collectgarbage(mode) end
  end
end

--- For specs whose finalizers must run inside a call: true when some did
-- (`fired` > 0); on a Lua other than 5.4, whose collector may step
-- elsewhere, none makes the test pending (busted's `pending`, passed in: on
-- 5.1 it is in the spec's environment only) and returns false; on 5.4 none
-- fails.
function H.fired_or_pending(fired, what, pending)
  if fired == 0 and H.lua ~= "5.4" then
    pending("no finalizer ran inside " .. what .. " on this Lua: nothing to check")
    return false
  end
  assert.is_true(fired > 0, "no finalizer ran inside " .. what)
  return true
end

--- A skeleton of a root and a child and clips moving the root along x at
-- `speed` units per second for 1 s, with events: "slow" (1, "step" at 0.5)
-- and "fast" (3, "kick" at 0.25 and 0.75), and with `once` also "once" (1,
-- "last" at 0.9). Returns the skeleton, the clips and a pose of n instances.
function H.walker_setup(n, once)
  local limber, anim = require "limber", require "limber.anim"
  local skel = limber.skeleton({ { name = "root" }, { name = "child", parent = "root" } })
  local function clip(name, speed, ev)
    return anim.clip({ name = name, events = ev, tracks = {
      { joint = 1, path = "translation", times = { 0, 1 }, values = { 0, 0, 0, speed, 0, 0 } },
      { joint = 2, path = "rotation", times = { 0, 1 },
        values = { 0, 0, 0, 1, 0, math.sin(0.5 * speed), 0, math.cos(0.5 * speed) } } } }, skel)
  end
  local clips = { clip("slow", 1, { { time = 0.5, name = "step" } }),
                  clip("fast", 3, { { time = 0.25, name = "kick" }, { time = 0.75, name = "kick" } }) }
  if once then clips[3] = clip("once", 1, { { time = 0.9, name = "last" } }) end
  return skel, clips, limber.pose(skel, n or 1)
end

return H
