--- bench_gltf: glTF load times for the bundled models, and accessor
-- decoding in C against a plain Lua string.unpack decoder on the same
-- bytes (measured side by side in one run; before Lua 5.3, which has no
-- string.unpack, a plain Lua float decoder in its place).
--
--   lua5.4 examples/bench_gltf.lua [--json]
package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local C = require "common" -- finds limber for this Lua: the LuaRocks tree or the CMake build
local core = require "limber.core"
local gltf = require "limber.gltf"

local json_out = arg and arg[1] == "--json"
local root = (arg and arg[0] or ""):match("^(.*)examples/bench_gltf%.lua$") or "./"
local assets = root .. "examples/assets/"

local function time(fn, min_seconds)
  local n, t0 = 0, os.clock()
  repeat
    fn()
    n = n + 1
  until os.clock() - t0 >= (min_seconds or 0.3)
  return (os.clock() - t0) / n
end

local results = { loads = {} }
print(C.interpreter_line())
print("glTF load (parse JSON, decode every accessor, build skeletons and skins)")
for _, f in ipairs({ "CesiumMan/CesiumMan.gltf", "Fox/Fox.glb", "RiggedFigure/RiggedFigure.glb",
                     "RiggedSimple/RiggedSimple.gltf",
                     "asset-generator/Animation_Skin/Animation_Skin_08.gltf" }) do
  local fh = assert(io.open(assets .. f, "rb"))
  local bytes = fh:read("*a")
  fh:close()
  local base = (assets .. f):match("^(.*/)")
  local s = time(function() gltf.load_bytes(bytes, { base_dir = base, clips = false }) end)
  results.loads[f] = s * 1e3
  print(("  %-55s %8d bytes %8.3f ms"):format(f, #bytes, s * 1e3))
end

-- 200 000 VEC3 float elements interleaved with stride 24 (the three floats,
-- then 12 zero bytes: written as six floats per element)
local count, stride = 200000, 24
local floats = {}
for i = 1, count do
  local o = (i - 1) * 6
  floats[o + 1], floats[o + 2], floats[o + 3] = i * 0.5, -i * 0.25, i * 0.125
  floats[o + 4], floats[o + 5], floats[o + 6] = 0, 0, 0
end
local data = core.buffer("f32", 6, floats):bytes()
floats = nil -- luacheck: ignore 311
local desc = { data = data, view_offset = 0, view_length = #data, view_stride = stride, offset = 0,
               component_type = 5126, components = 3, count = count }
local tc = time(function() core.gltf_accessor("bench", desc, "f32") end)
local unpack = C.string_unpack -- string.unpack (5.3+), else common.lua's plain Lua decoder
local tl = time(function()
  local out = {}
  for i = 0, count - 1 do
    local x, y, z = unpack("<fff", data, i * stride + 1)
    out[i * 3 + 1], out[i * 3 + 2], out[i * 3 + 3] = x, y, z
  end
  return out
end)
results.accessor_c_ms, results.accessor_lua_ms, results.ratio = tc * 1e3, tl * 1e3, tl / tc
print(("accessor decode, %d VEC3 floats, stride %d:"):format(count, stride))
print(("  C kernel (checked, into a limber Buffer) %8.3f ms  (%.0f M elements/s)")
  :format(tc * 1e3, count / tc / 1e6))
print(("  plain Lua %-30s %8.3f ms  (%.0f M elements/s)")
  :format(string.unpack and "string.unpack into a table" -- luacheck: ignore 143
    or "float decoder into a table",
    tl * 1e3, count / tl / 1e6))
print(("  ratio Lua / C: %.1fx"):format(tl / tc))

if json_out then
  local items = {}
  for k, v in pairs(results.loads) do items[#items + 1] = ('"%s":%.4f'):format(k, v) end
  table.sort(items)
  print(('{"bench":"gltf","load_ms":{%s},"accessor_c_ms":%.4f,"accessor_lua_ms":%.4f,'
    .. '"ratio":%.2f,"lua":%s}'):format(table.concat(items, ","), results.accessor_c_ms,
    results.accessor_lua_ms, results.ratio, C.json_string(C.lua)))
end
