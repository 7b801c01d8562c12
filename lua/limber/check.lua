--- Argument-checking helpers shared by limber's Lua modules (internal).
-- @module limber.check
-- @local
local M = {}

-- Lua 5.1 to 5.4 and LuaJIT: the library calls newer than 5.1, with
-- fallbacks that behave the same on the values limber passes them.
-- (luacheck's std is "min", the globals every version has: these reads are
-- the only places that reach past it.)
-- luacheck: push ignore 113 143
local floor = math.floor

--- `math.type` (5.3+); before 5.3 a number is an "integer" when it is
-- integral and within [-2^63, 2^63) (what limber.core accepts as one).
-- @param v any value
-- @treturn string|nil "integer", "float" or nil (not a number)
M.math_type = math.type or function(v)
  if type(v) ~= "number" then return nil end
  if v == floor(v) and v >= -2 ^ 63 and v < 2 ^ 63 then return "integer" end
  return "float"
end

--- `math.tointeger` (5.3+): `v` as an integer if it is one, else nil.
-- @param v any value
-- @treturn integer|nil
M.tointeger = math.tointeger or function(v)
  if M.math_type(v) == "integer" then return v end
  return nil
end

--- `rawlen` (5.2+); on 5.1 and LuaJIT `#` ignores `__len` on tables.
-- @tparam table t
-- @treturn integer
M.rawlen = rawlen or function(t) return #t end

--- `table.move` (5.3+), for the forward copies limber makes.
-- @tparam table a1 source
-- @tparam integer f first index
-- @tparam integer e last index
-- @tparam integer t destination index
-- @tparam[opt=a1] table a2 destination
-- @treturn table a2
M.move = table.move or function(a1, f, e, t, a2)
  a2 = a2 or a1
  for i = 0, e - f do a2[t + i] = a1[f + i] end
  return a2
end

--- `table.pack` (5.2+).
-- @treturn table the arguments, with `n`
M.pack = table.pack or function(...) return { n = select("#", ...), ... } end

--- `table.unpack` (5.2+; `unpack` before).
M.unpack = table.unpack or unpack
-- luacheck: pop

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

--- Raises an argument error, blamed on the caller of a public function:
-- `bad argument #n to 'fname' (problem)`.
-- @tparam integer n the argument's position, as the user counts it
-- @tparam string fname the function as the user called it ("limber.gltf.palette")
-- @tparam string problem what is wrong, in a few words
-- @tparam[opt=2] integer level as for `error`, counted from the function
--   that calls `arg_fail`: 2 (the default) blames that function's caller
function M.arg_fail(n, fname, problem, level)
  error(("bad argument #%d to '%s' (%s)"):format(n, fname, problem), (level or 2) + 1)
end

--- Raises the argument error of a value of the wrong type:
-- `bad argument #n to 'fname' (expected expected, got <typename of got>)`.
-- @tparam integer n the argument's position
-- @tparam string fname the function as the user called it
-- @tparam string expected what was expected ("integer", "limber.Pose", "options table")
-- @param got the value given (its `__name` or type is reported)
-- @tparam[opt=2] integer level as for `arg_fail`
function M.arg_error(n, fname, expected, got, level)
  M.arg_fail(n, fname, ("%s expected, got %s"):format(expected, M.typename(got)), (level or 2) + 1)
end

--- Raises an error that is not about one argument: `fname: msg`.
-- @tparam string fname the function as the user called it
-- @tparam string msg the problem
-- @tparam[opt=2] integer level as for `arg_fail` (0: no position added)
function M.fail(fname, msg, level)
  level = level or 2
  error(fname .. ": " .. msg, level > 0 and level + 1 or 0)
end

-- the type test of one `options` spec entry
local function is_type(v, want)
  if want == "any" then return true end
  if want == "integer" then return M.math_type(v) == "integer" end
  return type(v) == want
end

--- Checks an optional options table argument and returns a raw copy of it.
-- `spec` maps each known option to its type ("integer", "string",
-- "boolean", "table", "number"...). A non-table (a positional value where
-- the options belong), an unknown option or an option of the wrong type is
-- an argument error: `bad argument #n to 'fname' (unknown option 'x')`,
-- `(option 'layout' must be a string, got number)`.
-- @tparam integer n the argument's position
-- @tparam string fname the function as the user called it
-- @param opts nil or the options table
-- @tparam table spec option name -> type name
-- @tparam[opt=2] integer level as for `arg_fail`
-- @treturn table a copy (empty when `opts` is nil)
function M.options(n, fname, opts, spec, level)
  level = (level or 2) + 1
  if opts == nil then return {} end
  if type(opts) ~= "table" then M.arg_error(n, fname, "options table", opts, level) end
  local c = M.snapshot(opts)
  for k, v in next, c do
    local want = type(k) == "string" and spec[k]
    if not want then M.arg_fail(n, fname, ("unknown option '%s'"):format(tostring(k)), level) end
    if not is_type(v, want) then
      M.arg_fail(n, fname, ("option '%s' must be %s %s, got %s"):format(k,
        want:find("^[aeiou]") and "an" or "a", want, M.typename(v)), level)
    end
  end
  return c
end

--- Re-raises an error of the core function `cname` under the public name
-- `fname`: "bad argument #k to 'limber.core.cname'" becomes "bad argument
-- #k to 'fname'", "limber.core.cname: problem" becomes "fname: problem", a
-- message that names no function is prefixed `fname: `, and the position
-- is the caller's.
-- @param err the error value (non-strings pass unchanged)
-- @tparam string fname the function as the user called it
-- @tparam string cname the core function's name
-- @tparam[opt=2] integer level as for `arg_fail`
function M.rethrow(err, fname, cname, level)
  if type(err) == "string" then
    -- limber.core names the core function and the facade's line: the
    -- user called fname, on their own line (added by error below)
    err = err:gsub("^[^\n:]*:%d+: ", "", 1)
    local n
    err, n = err:gsub("^bad argument (#%d+) to '[%w_.:]*" .. cname .. "'",
      "bad argument %1 to '" .. fname .. "'")
    if n == 0 then
      err, n = err:gsub("^limber%.core%." .. cname .. ": ", fname .. ": ", 1)
    end
    if n == 0 and not err:find("^limber") and not err:find("^bad argument") then
      err = fname .. ": " .. err
    end
  end
  error(err, (level or 2) + 1)
end

return M
