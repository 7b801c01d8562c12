--- Transform math in double precision, shared by limber's Lua modules.
--
-- Matrices are 16 numbers in column-major order (the layout of glTF, cglm and
-- every limber Buffer of matrices); quaternions are {x, y, z, w}. These
-- functions are for loading and set-up (glTF nodes, slot tables), not for
-- per-frame work, which runs in C on whole batches.
-- @module limber.math
local M = {}

local sqrt, abs = math.sqrt, math.abs

local function bad(n, name, what, v)
  local mt = getmetatable(v)
  local tn = type(mt) == "table" and rawget(mt, "__name")
  error(("bad argument #%d to 'limber.math.%s' (%s expected, got %s)"):format(
    n, name, what, type(tn) == "string" and tn or type(v)), 3)
end

-- a table of k finite numbers (raw access)
local function numbers(n, name, v, k)
  local ok = type(v) == "table"
  for i = 1, ok and k or 0 do
    local x = rawget(v, i)
    if type(x) ~= "number" or x ~= x or x == math.huge or x == -math.huge then ok = false end
  end
  if not ok then bad(n, name, ("table of %d finite numbers"):format(k), v) end
end

local function out_table(n, name, out)
  if out ~= nil and type(out) ~= "table" then bad(n, name, "table or nil", out) end
  return out or {}
end

--- T x R x S without argument checks (for limber's modules, which checked).
-- @local
function M.trs_raw(t, q, s, o)
  local x, y, z, w = q[1], q[2], q[3], q[4]
  o = o or {}
  o[1], o[2], o[3], o[4] =
    (1 - 2 * (y * y + z * z)) * s[1], 2 * (x * y + w * z) * s[1], 2 * (x * z - w * y) * s[1], 0
  o[5], o[6], o[7], o[8] =
    2 * (x * y - w * z) * s[2], (1 - 2 * (x * x + z * z)) * s[2], 2 * (y * z + w * x) * s[2], 0
  o[9], o[10], o[11], o[12] =
    2 * (x * z + w * y) * s[3], 2 * (y * z - w * x) * s[3], (1 - 2 * (x * x + y * y)) * s[3], 0
  o[13], o[14], o[15], o[16] = t[1], t[2], t[3], 1
  return o
end

--- The matrix T x R x S of a translation, a unit rotation and a scale.
-- @tparam table t translation {x, y, z}
-- @tparam table r rotation, a unit quaternion {x, y, z, w}
-- @tparam table s scale {x, y, z}
-- @tparam[opt] table out filled and returned (a new table if nil)
-- @treturn table 16 numbers, column-major
function M.trs_matrix(t, r, s, out)
  numbers(1, "trs_matrix", t, 3)
  numbers(2, "trs_matrix", r, 4)
  numbers(3, "trs_matrix", s, 3)
  return M.trs_raw(t, r, s, out_table(4, "trs_matrix", out))
end

--- The product a x b of two 4x4 matrices.
-- @tparam table a 16 numbers, column-major
-- @tparam table b 16 numbers, column-major
-- @tparam[opt] table out filled and returned (a new table if nil; may not be a or b)
-- @treturn table 16 numbers
function M.mul(a, b, out)
  numbers(1, "mul", a, 16)
  numbers(2, "mul", b, 16)
  out = out_table(3, "mul", out)
  if out == a or out == b then bad(3, "mul", "a table other than a and b", out) end
  return M.mul_raw(a, b, out)
end

--- a x b without argument checks.
-- @local
function M.mul_raw(a, b, o)
  o = o or {}
  for c = 0, 3 do
    for r = 0, 3 do
      local sum = 0
      for k = 0, 3 do sum = sum + a[k * 4 + r + 1] * b[c * 4 + k + 1] end
      o[c * 4 + r + 1] = sum
    end
  end
  return o
end

local function cross(a, b)
  return { a[2] * b[3] - a[3] * b[2], a[3] * b[1] - a[1] * b[3], a[1] * b[2] - a[2] * b[1] }
end

local function unit(v)
  local n = sqrt(v[1] ^ 2 + v[2] ^ 2 + v[3] ^ 2)
  return { v[1] / n, v[2] / n, v[3] / n }
end

-- Completes the rotation axes u[1..3] (unit columns, nil where the scale is
-- zero) to a proper orthonormal basis: a zero scale hides its axis, so any
-- axis that keeps the basis right-handed reproduces the matrix.
local function complete_axes(u)
  local have = {}
  for i = 1, 3 do if u[i] then have[#have + 1] = i end end
  if #have == 0 then return { { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } } end
  if #have == 1 then
    local a = u[have[1]]
    -- the world axis least parallel to a, made perpendicular to it
    local k = 1
    for i = 2, 3 do if abs(a[i]) < abs(a[k]) then k = i end end
    local e = { 0, 0, 0 }
    e[k] = 1
    local i = have[1]
    local j, l = i % 3 + 1, (i + 1) % 3 + 1
    u[j] = unit(cross(e, a))
    u[l] = cross(u[i], u[j])
    return u
  end
  for i = 1, 3 do
    if not u[i] then u[i] = unit(cross(u[i % 3 + 1], u[(i + 1) % 3 + 1])) end
  end
  return u
end

--- decompose without argument checks: nil and a reason when the scale or
-- rotation overflows double precision.
-- @local
function M.decompose_raw(m)
  local t = { m[13], m[14], m[15] }
  local sx = sqrt(m[1] ^ 2 + m[2] ^ 2 + m[3] ^ 2)
  local sy = sqrt(m[5] ^ 2 + m[6] ^ 2 + m[7] ^ 2)
  local sz = sqrt(m[9] ^ 2 + m[10] ^ 2 + m[11] ^ 2)
  local det = m[1] * (m[6] * m[11] - m[7] * m[10]) - m[5] * (m[2] * m[11] - m[3] * m[10])
    + m[9] * (m[2] * m[7] - m[3] * m[6])
  if sx == math.huge or sy == math.huge or sz == math.huge or det ~= det then
    return nil, "the matrix has no finite scale and rotation"
  end
  if det < 0 then sx = -sx end
  local scale = { sx, sy, sz }
  local u = {}
  for i = 1, 3 do
    local o, si = (i - 1) * 4, scale[i]
    if si ~= 0 then u[i] = { m[o + 1] / si, m[o + 2] / si, m[o + 3] / si } end
  end
  if not (u[1] and u[2] and u[3]) then u = complete_axes(u) end
  local r11, r21, r31 = u[1][1], u[1][2], u[1][3]
  local r12, r22, r32 = u[2][1], u[2][2], u[2][3]
  local r13, r23, r33 = u[3][1], u[3][2], u[3][3]
  local tr = r11 + r22 + r33
  local x, y, z, w
  if tr > 0 then
    local s = 0.5 / sqrt(tr + 1)
    w, x, y, z = 0.25 / s, (r32 - r23) * s, (r13 - r31) * s, (r21 - r12) * s
  elseif r11 > r22 and r11 > r33 then
    local s = 2 * sqrt(1 + r11 - r22 - r33)
    w, x, y, z = (r32 - r23) / s, 0.25 * s, (r12 + r21) / s, (r13 + r31) / s
  elseif r22 > r33 then
    local s = 2 * sqrt(1 + r22 - r11 - r33)
    w, x, y, z = (r13 - r31) / s, (r12 + r21) / s, 0.25 * s, (r23 + r32) / s
  else
    local s = 2 * sqrt(1 + r33 - r11 - r22)
    w, x, y, z = (r21 - r12) / s, (r13 + r31) / s, (r23 + r32) / s, 0.25 * s
  end
  local n = sqrt(x * x + y * y + z * z + w * w)
  if n ~= n or n <= 1e-12 or n == math.huge then
    return nil, "the matrix has no finite scale and rotation"
  end
  return t, { x / n, y / n, z / n, w / n }, scale
end

--- Decomposes an affine matrix without shear into translation, rotation and
-- scale. A negative determinant puts the reflection in scale x; a zero-length
-- axis (scale 0, as animators use to hide a part) gets scale 0 and a rotation
-- axis that completes the others.
-- @tparam table m 16 numbers, column-major
-- @treturn table translation {x, y, z}
-- @treturn table rotation, a unit quaternion {x, y, z, w}
-- @treturn table scale {x, y, z}
-- @raise when the scale or rotation overflows double precision
function M.decompose(m)
  numbers(1, "decompose", m, 16)
  local t, r, s = M.decompose_raw(m)
  if not t then error("limber.math.decompose: " .. r, 2) end
  return t, r, s
end

return M
