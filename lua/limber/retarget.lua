--- limber.retarget: one clip for many rigs. `clip` carries a clip made for
-- one skeleton onto another whose joints share names (or through a name
-- map); `mirror` reflects a clip across a plane, swapping left and right.
-- Both build once and return a normal clip with the same key times and
-- interpolation as the source (keys are transformed, not resampled): exact
-- from an exact clip; from a packed clip (a glTF load's, or anim.clip's
-- default) the keys its streams keep, decoded (clip:track_keys), carried, and
-- packed again at the default tolerance for the skeleton the clip is made for.
--
-- Rotations are carried relative to each skeleton's rest pose in world-aligned
-- terms: with W the rest world rotation of a joint and P its parent's, a
-- source key q becomes P_t^-1 P_s q W_s^-1 W_t, so every joint turns from its
-- rest by the same world-space rotation on both rigs, whatever the joints'
-- local frames. Translations keep their offset from the rest translation,
-- turned the same way and scaled by the bone-length ratio (a root's by the
-- ratio of the rigs' hip heights); scales keep their ratio to the rest scale.
-- Joints missing on either side are left at rest. Only joint tracks are
-- carried: node tracks (a mesh's morph weights) are not.
--
-- Mirroring maps joint j to its counterpart m (by name: Left/Right, left/right,
-- _L/_R, _l/_r, .L/.R, .l/.r, L_/R_; trailing `_<digits>` ignored; or an
-- explicit map) and reflects the world-aligned rotation from rest and the
-- translation across the plane: mirroring an exact clip twice gives the
-- original keys (a packed clip's twice-mirrored keys are within twice the
-- packing tolerance of its own).
-- @module limber.retarget
local anim = require "limber.anim"
local check = require "limber.check"

local M = {}

-- ---- quaternions (x y z w) and vectors --------------------------------------

local function qmul(a, b)
  return { a[4] * b[1] + a[1] * b[4] + a[2] * b[3] - a[3] * b[2],
           a[4] * b[2] - a[1] * b[3] + a[2] * b[4] + a[3] * b[1],
           a[4] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[4],
           a[4] * b[4] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3] }
end

local function qconj(a) return { -a[1], -a[2], -a[3], a[4] } end

local function qrot(q, v)
  local p = qmul(qmul(q, { v[1], v[2], v[3], 0 }), qconj(q))
  return { p[1], p[2], p[3] }
end

-- Rest world rotations and positions of every joint (parents first), with
-- the parents' rest scales applied to positions (scale taken per axis of
-- the parent's frame, as local-to-model does).
local function rest_world(skel)
  local n, par = skel:joint_count(), skel:parents()
  local W, P, X, S = {}, {}, {}, {}
  for j = 1, n do
    local t, r, s = skel:rest_trs(j)
    local p = par[j]
    if p == 0 then
      P[j], W[j], X[j], S[j] = { 0, 0, 0, 1 }, r, t, s
    else
      P[j], W[j] = W[p], qmul(W[p], r)
      local sp = S[p]
      local o = qrot(W[p], { t[1] * sp[1], t[2] * sp[2], t[3] * sp[3] })
      X[j] = { X[p][1] + o[1], X[p][2] + o[2], X[p][3] + o[3] }
      S[j] = { sp[1] * s[1], sp[2] * s[2], sp[3] * s[3] }
    end
  end
  return W, P, X
end

local function len3(v) return math.sqrt(v[1] ^ 2 + v[2] ^ 2 + v[3] ^ 2) end

-- The size of a rig at rest: the largest extent of its joints along an
-- axis (its height for a standing rig, whichever axis is up).
local function size(X)
  local best = 0
  for c = 1, 3 do
    local lo, hi = math.huge, -math.huge
    for _, x in ipairs(X) do lo, hi = math.min(lo, x[c]), math.max(hi, x[c]) end
    if hi > lo then best = math.max(best, hi - lo) end
  end
  return best
end

-- A copy of an option `map` (name -> name), checked (argument n of fname).
local function name_map(map, n, fname, both)
  local out = {}
  for k, v in next, map or {} do
    if type(k) ~= "string" or type(v) ~= "string" then
      check.arg_fail(n, fname, "option 'map' must map joint names to joint names", 3)
    end
    if both and ((out[v] ~= nil and out[v] ~= k) or (out[k] ~= nil and out[k] ~= v)) then
      local x = out[v] ~= nil and out[v] ~= k and v or k
      check.arg_fail(n, fname, ("option 'map' pairs '%s' with both '%s' and '%s'")
        :format(x, out[x], x == v and k or v), 3)
    end
    out[k] = v
    if both then out[v] = k end
  end
  return out
end

local function check_clip(c, n, fname)
  if not check.is_a(c, "limber.Clip") then check.arg_error(n, fname, "limber.Clip", c, 3) end
end

-- The new clip's `pack` field: a packed clip's result is packed too (at the
-- default tolerance, for the skeleton it is made for), an exact clip's stays exact.
local function pack_like(c)
  if c:packed() then return nil end
  return false
end

local function check_skel(s, n, fname)
  if not check.is_a(s, "limber.Skeleton") then
    check.arg_error(n, fname, "limber.Skeleton", s, 3)
  end
end

-- Rebuilds the tracks of joint `from` (of clip c) for joint `to`: fn(path,
-- values, per, interp) returns the new flat values.
local function carry(c, from, to, fn, out)
  for _, path in ipairs({ "translation", "rotation", "scale" }) do
    local times, values, interp = c:track_keys(from, path)
    if times then
      out[#out + 1] = { joint = to, path = path, interpolation = interp, times = times,
                        values = fn(path, values, interp) }
    end
  end
end

-- Maps every key (and CUBICSPLINE tangent) of a flat value list: vector
-- keys by fv(v, is_tangent), rotation keys by fq(q) (linear in q, so
-- tangents map the same way).
local function map_keys(path, values, interp, fv, fq)
  local w = path == "rotation" and 4 or 3
  local per = interp == "CUBICSPLINE" and 3 or 1
  local out = {}
  for k = 0, #values / w - 1 do
    local v = {}
    for c = 1, w do v[c] = values[k * w + c] end
    local tangent = per == 3 and k % 3 ~= 1
    local r
    if path == "rotation" then r = fq(v) else r = fv(v, tangent) end
    for c = 1, w do out[k * w + c] = r[c] end
  end
  return out
end

--- Carries a clip made for skeleton `from` onto skeleton `to`.
-- @tparam limber.Clip clip a clip of `from` (exact or packed)
-- @tparam limber.Skeleton from
-- @tparam limber.Skeleton to
-- @tparam[opt] table opts `map` (target joint name -> source joint name, for
--   joints whose names differ), `name` (the new clip's name)
-- @treturn limber.Clip a clip of `to`
function M.clip(clip, from, to, opts)
  local fname = "limber.retarget.clip"
  check_clip(clip, 1, fname)
  check_skel(from, 2, fname)
  check_skel(to, 3, fname)
  local o = check.options(4, fname, opts, { map = "table", name = "string" }, 2)
  local map = name_map(o.map, 4, fname)
  if clip:joint_span() > from:joint_count() then
    check.arg_fail(1, fname, ("the clip animates joint %d, the skeleton has %d")
      :format(clip:joint_span(), from:joint_count()), 2)
  end
  local Wf, Pf, Xf = rest_world(from)
  local Wt, Pt, Xt = rest_world(to)
  local hf, ht = size(Xf), size(Xt)
  local root_ratio = hf > 1e-12 and ht / hf or 1
  local pf, pt = from:parents(), to:parents()
  local tracks = {}
  for jt = 1, to:joint_count() do
    local name = to:name(jt)
    local src = name and (map[name] or name)
    local js = type(src) == "string" and from:find(src) or nil
    if js then
      local tf, _, sf = from:rest_trs(js)
      local tt, _, st = to:rest_trs(jt)
      local ratio = root_ratio
      if pf[js] ~= 0 and pt[jt] ~= 0 then -- a bone: its length ratio (a tiny one: the rig's)
        local a, b = len3(tf), len3(tt)
        if a > 1e-3 * hf and b > 1e-3 * ht then ratio = b / a end
      end
      local A = qmul(qconj(Pt[jt]), Pf[js])   -- source parent frame -> target parent frame
      local B = qmul(qconj(Wf[js]), Wt[jt])
      carry(clip, js, jt, function(path, values, interp)
        return map_keys(path, values, interp, function(v, tangent)
          if path == "scale" then
            local out = {}
            for c = 1, 3 do out[c] = sf[c] ~= 0 and v[c] * st[c] / sf[c] or v[c] end
            return out
          end
          local d = tangent and v or { v[1] - tf[1], v[2] - tf[2], v[3] - tf[3] }
          local r = qrot(A, d)
          if tangent then return { ratio * r[1], ratio * r[2], ratio * r[3] } end
          return { tt[1] + ratio * r[1], tt[2] + ratio * r[2], tt[3] + ratio * r[3] }
        end, function(q) return qmul(qmul(A, q), B) end)
      end, tracks)
    end
  end
  return anim.clip({ name = o.name or clip:name(), tracks = tracks, duration = clip:duration(),
    pack = pack_like(clip) }, to)
end

local SIDES = { { "Left", "Right" }, { "left", "right" }, { "_L", "_R" }, { "_l", "_r" },
                { ".L", ".R" }, { ".l", ".r" }, { "L_", "R_" } }

-- The counterpart of every joint (itself when it has none).
local function counterparts(skel, map)
  local n = skel:joint_count()
  local stripped = {}
  for j = 1, n do
    local name = skel:name(j)
    if name then stripped[(name:gsub("_%d+$", ""))] = j end
  end
  local function find(name)
    return skel:find(name) or stripped[(name:gsub("_%d+$", ""))]
  end
  local other = {}
  for j = 1, n do
    local name = skel:name(j)
    local m = name and map[name] and find(map[name])
    if name and map[name] and not m then
      error(("option 'map' names '%s', not a joint of the skeleton"):format(map[name]), 0)
    end
    if name and not m then
      for _, s in ipairs(SIDES) do
        local a, b = s[1], s[2]
        local i = name:find(a, 1, true)
        if i then
          m = find(name:sub(1, i - 1) .. b .. name:sub(i + #a))
        else
          i = name:find(b, 1, true)
          if i then m = find(name:sub(1, i - 1) .. a .. name:sub(i + #b)) end
        end
        if m then break end
      end
    end
    other[j] = m or j
  end
  -- a pairing: each joint's counterpart has it as its own
  for j = 1, n do
    if other[other[j]] ~= j then
      error(("joints '%s' and '%s' both pair with '%s' (give the pairs in option 'map')")
        :format(skel:name(j) or j, skel:name(other[other[j]]) or other[other[j]],
          skel:name(other[j]) or other[j]), 0)
    end
  end
  return other
end

--- Mirrors a clip across a plane through the origin of the skeleton's
-- model space, swapping left and right joints.
-- @tparam limber.Clip clip a clip of `skeleton` (exact or packed)
-- @tparam limber.Skeleton skeleton
-- @tparam[opt] table opts `axis` ("x", default, "y" or "z": the plane's
--   normal), `map` (joint name -> its counterpart's name, both ways, for
--   names the patterns do not pair), `name`
-- @treturn limber.Clip
function M.mirror(clip, skeleton, opts)
  local fname = "limber.retarget.mirror"
  check_clip(clip, 1, fname)
  check_skel(skeleton, 2, fname)
  local o = check.options(3, fname, opts, { axis = "string", map = "table", name = "string" }, 2)
  local axis = ({ x = 1, y = 2, z = 3 })[o.axis or "x"]
  if not axis then check.arg_fail(3, fname, "option 'axis' must be \"x\", \"y\" or \"z\"", 2) end
  local map = name_map(o.map, 3, fname, true)
  if clip:joint_span() > skeleton:joint_count() then
    check.arg_fail(1, fname, ("the clip animates joint %d, the skeleton has %d")
      :format(clip:joint_span(), skeleton:joint_count()), 2)
  end
  local okp, other = pcall(counterparts, skeleton, map)
  if not okp then check.arg_fail(3, fname, tostring(other), 2) end
  local W, P = rest_world(skeleton)
  -- reflection across the plane: vectors negate the axis component;
  -- rotations keep it and negate the other two
  local function rv(v)
    local r = { v[1], v[2], v[3] }
    r[axis] = -r[axis]
    return r
  end
  local function rq(q)
    local r = { -q[1], -q[2], -q[3], q[4] }
    r[axis] = q[axis]
    return r
  end
  local tracks = {}
  for j = 1, skeleton:joint_count() do
    local m = other[j]
    carry(clip, m, j, function(path, values, interp)
      return map_keys(path, values, interp, function(v)
        if path == "scale" then return v end
        return qrot(qconj(P[j]), rv(qrot(P[m], v)))
      end, function(q)
        local g = qmul(qmul(P[m], q), qconj(W[m]))
        return qmul(qmul(qconj(P[j]), rq(g)), W[j])
      end)
    end, tracks)
  end
  return anim.clip({ name = o.name or clip:name(), tracks = tracks, duration = clip:duration(),
    pack = pack_like(clip) }, skeleton)
end

return M
