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

--- Raises `bad argument #n to 'fname' (expected expected, got <type>)` at
-- `level` (default 3: the caller of the public function that calls this).
-- @tparam integer n argument position
-- @tparam string fname the public name, e.g. "limber.skinning.run"
-- @tparam string expected what the argument should be
-- @param got the value passed
-- @tparam[opt=3] integer level
function M.arg_error(n, fname, expected, got, level)
  error(("bad argument #%d to '%s' (%s expected, got %s)"):format(n, fname, expected, M.typename(got)),
    level or 3)
end

--- Raises `fname: msg` at `level` (default 3).
-- @tparam string fname the public name
-- @tparam string msg the problem
-- @tparam[opt=3] integer level
function M.fail(fname, msg, level)
  error(fname .. ": " .. msg, level or 3)
end

--- Re-raises an error of the core function `cname` under the public name
-- `fname`, at `level` (default 3): "bad argument #k to 'cname'" becomes
-- "bad argument #k to 'fname'", and a message naming no function is
-- prefixed with `fname: `.
-- @param err the error value
-- @tparam string fname
-- @tparam string cname
-- @tparam[opt=3] integer level
function M.rethrow(err, fname, cname, level)
  if type(err) == "string" then
    local n
    err, n = err:gsub("^bad argument (#%d+) to '[%w_.:]*" .. cname .. "'", "bad argument %1 to '" .. fname .. "'")
    if n == 0 and not err:find("^limber") and not err:find("^bad argument") then err = fname .. ": " .. err end
  end
  error(err, level or 3)
end

return M
