-- Shared by the examples and benchmarks: finds limber (the LuaRocks tree
-- ./lua_modules first, then the sources + CMake build when LIMBER_DEV=1 or
-- nothing is installed) and the benchmarks' C baselines (build-bench/, last),
-- timing statistics and a humanoid test skeleton.
local here = (arg and arg[0] or ""):match("^(.*)/examples/[^/]*$") or "."
local dev = os.getenv("LIMBER_DEV") == "1"
local installed = io.open(here .. "/lua_modules/lib/lua/5.4/limber/core.so", "rb")
if installed then installed:close() end
local tree_path = here .. "/lua_modules/share/lua/5.4/?.lua;"
  .. here .. "/lua_modules/share/lua/5.4/?/init.lua;"
local tree_cpath = here .. "/lua_modules/lib/lua/5.4/?.so;"
local dev_path = here .. "/lua/?.lua;" .. here .. "/lua/?/init.lua;"
local dev_cpath = here .. "/build/?.so;"
local given = package.searchpath("limber.core", package.cpath) -- LUA_CPATH names one: keep it
if given and not dev then
  package.path = package.path .. ";" .. tree_path .. dev_path
  package.cpath = package.cpath .. ";" .. tree_cpath .. dev_cpath
elseif dev or not installed then
  package.path = dev_path .. tree_path .. package.path
  package.cpath = dev_cpath .. tree_cpath .. package.cpath
else
  package.path = tree_path .. dev_path .. package.path
  package.cpath = tree_cpath .. dev_cpath .. package.cpath
end

-- The benchmarks' C baselines (limber.baseline_*) are not part of the rock:
-- scripts/build.sh builds them into build-bench/ (a CMake build has them in
-- build/ too). That folder is searched after everything above, and only for
-- those modules.
local bench_cpath = here .. "/build-bench/?.so"
package.searchers[#package.searchers + 1] = function(name)
  if not name:match("^limber%.baseline_[%w_]+$") then return nil end
  local path, err = package.searchpath(name, bench_cpath)
  if not path then return err .. " (bash scripts/build.sh builds the baselines)" end
  local open, why = package.loadlib(path, "luaopen_" .. name:gsub("%.", "_"))
  if not open then
    error(("error loading module '%s' from file '%s':\n\t%s"):format(name, path, why))
  end
  return open, path
end

local C = {}
C.root = here

--- Median and minimum of a list of numbers.
function C.stats(list)
  local s = {}
  for i, v in ipairs(list) do s[i] = v end
  table.sort(s)
  return s[(#s + 1) // 2], s[1]
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
      s = string.format("%q", v)
    else
      s = tostring(v)
    end
    parts[#parts + 1] = string.format("%q:%s", k, s)
  end
  return "{" .. table.concat(parts, ",") .. "}"
end

return C
