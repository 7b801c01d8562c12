--- Argument-checking helpers shared by limber's Lua modules (internal).
-- @module limber.check
-- @local
local M = {}

--- The type name of a value for error messages: its metatable's `__name`
-- (read raw) if it has one, else `type(v)`.
-- @param v any value
-- @treturn string
function M.typename(v)
  local mt = getmetatable(v)
  local name = type(mt) == "table" and rawget(mt, "__name")
  return type(name) == "string" and name or type(v)
end

--- True when `v` is a userdata of the limber class `name` ("limber.Pose").
-- @param v any value
-- @tparam string name
-- @treturn boolean
function M.is_a(v, name)
  return type(v) == "userdata" and M.typename(v) == name
end

--- A plain copy of a table's own fields, read raw (no metamethods): a
-- caller's table is read once, then checked and used from the copy.
-- @tparam table t
-- @treturn table
function M.snapshot(t)
  local c = {}
  for k, v in next, t do c[k] = v end
  return c
end

return M
