-- Shared spec helpers: tolerant assertions, a small plain-Lua matrix
-- library (the "obviously correct" reference), random generators with
-- printed seeds, and paths to the bundled test data.
local assert = require "luassert"
local say = require "say"

local H = {}

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
  local s = f:read("a")
  f:close()
  return s
end

local B64 <const> = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

--- Base64 text of a string (to build data: URIs in specs).
function H.base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    local q = {}
    for k = 3, 0, -1 do
      local d = (n >> (6 * k)) % 64 + 1
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
  local p = assert(io.popen("unset LD_PRELOAD; (" .. cmd .. ") 2>&1"))
  local out = p:read("a")
  local ok = p:close()
  return ok, out
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

return H
