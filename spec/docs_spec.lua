-- The API reference is complete: every function of limber.core and every
-- method of a C class (metatables "limber.*" in the registry) has an entry
-- in docs/api.luadoc, and every public function of lua/limber/*.lua has a
-- `---` LDoc comment. The checkers are also run on doctored text to show
-- that a missing entry makes them fail.
local H = require "spec.helper"
local core = require "limber.core"

local MODULES = {
  { name = "limber", file = "lua/limber/init.lua" },
  { name = "limber.anim", file = "lua/limber/anim.lua" },
  { name = "limber.gltf", file = "lua/limber/gltf.lua" },
  { name = "limber.scene", file = "lua/limber/scene.lua" },
  { name = "limber.skinning", file = "lua/limber/skinning.lua" },
}
local LUADOC = "docs/api.luadoc"

local read = H.read

local function lines_of(text)
  local out = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do out[#out + 1] = line end
  return out
end

-- True when line starts an LDoc comment block: "---" then text or nothing
-- (not a "-----" separator).
local function opens_doc(line)
  return line:match("^%-%-%-$") ~= nil or line:match("^%-%-%-[^%-]") ~= nil
end

-- Parses docs/api.luadoc. Entries are "name" (module function), "Class:name"
-- (method, only inside the `@type Class` section) and "field name". Every
-- entry must be in a block of its own that opens with `--- summary`.
-- Returns the set of entries and a list of problems.
local function luadoc_entries(text)
  local entries, problems = {}, {}
  local lines = lines_of(text)
  local current_type = nil
  local i = 1
  while i <= #lines do
    if lines[i]:match("^%-%-") then
      local first, block = i, {}
      while i <= #lines and lines[i]:match("^%-%-") do
        block[#block + 1] = lines[i]
        i = i + 1
      end
      local summary = block[1]:match("^%-%-%-%s*(.-)%s*$")
      local tags = 0
      for _, l in ipairs(block) do
        local tag, arg = l:match("^%-%-%s*@(%a+)%s*(.-)%s*$")
        if tag == "type" then
          current_type = arg
        elseif tag == "function" or tag == "field" then
          tags = tags + 1
          local name = tag == "field" and "field " .. arg or arg
          if not opens_doc(block[1]) or summary == "" or summary:match("^@") then
            problems[#problems + 1] = ("line %d: %s has no `--- summary` line"):format(first, name)
          end
          local cls = arg:match("^([%w_]+):")
          if tag == "function" and (cls or false) ~= (current_type or false) then
            problems[#problems + 1] = ("line %d: %s is outside its @type section (in %s)")
              :format(first, name, tostring(current_type))
          end
          if entries[name] then
            problems[#problems + 1] = ("line %d: %s is documented twice"):format(first, name)
          end
          entries[name] = true
        end
      end
      if tags > 1 then
        problems[#problems + 1] = ("line %d: one @function or @field per block"):format(first)
      end
    else
      i = i + 1
    end
  end
  return entries, problems
end

-- Every public C name: limber.core functions and fields, and the methods of
-- every "limber.*" metatable of the registry (the internal ThreadPool and
-- benchmark baselines excluded).
local function public_c_names()
  local names = {}
  for k, v in pairs(core) do
    names[#names + 1] = type(v) == "function" and k or "field " .. k
  end
  for key, mt in pairs(debug.getregistry()) do
    if type(key) == "string" and type(mt) == "table" and key:match("^limber%.")
        and key ~= "limber.ThreadPool" and not key:lower():find("baseline", 1, true) then
      local methods = type(mt.__index) == "table" and mt.__index or mt.methods
      assert(type(methods) == "table", key .. " has no method table")
      local class = key:match("^limber%.(.+)$")
      for name, f in pairs(methods) do
        if type(f) == "function" then names[#names + 1] = class .. ":" .. name end
      end
    end
  end
  table.sort(names)
  return names
end

local function missing_from(entries, names)
  local missing = {}
  for _, n in ipairs(names) do
    if not entries[n] then missing[#missing + 1] = n end
  end
  return missing
end

-- True when lines[i] is directly preceded by a comment block opening with
-- `---`.
local function documented_at(lines, i)
  local k = i - 1
  while k >= 1 and lines[k]:match("^%-%-") do k = k - 1 end
  return k < i - 1 and opens_doc(lines[k + 1])
end

-- Top-level `function A.b(`, `function A:b(` definitions without a `---`
-- block right above (`local function` helpers are private and exempt).
local function undocumented_lua(text)
  local lines, bad = lines_of(text), {}
  for i, line in ipairs(lines) do
    local a, sep, b = line:match("^function%s+([%a_][%w_]*)([.:])([%a_][%w_]*)%s*%(")
    if a and not documented_at(lines, i) then
      bad[#bad + 1] = ("line %d: %s%s%s"):format(i, a, sep, b)
    end
  end
  return bad
end

-- Whether `tbl.name` (as `function tbl.name(`, `function tbl:name(` or
-- `tbl.name = ...` at top level) is defined with a `---` block above it.
local function defined_documented(text, tbl, name)
  local lines = lines_of(text)
  local q = tbl .. "[.:]" .. name
  for i, line in ipairs(lines) do
    if line:match("^function%s+" .. q .. "%s*%(") or line:match("^" .. tbl .. "%." .. name .. "%s*=") then
      return documented_at(lines, i)
    end
  end
  return false
end

describe("API reference", function()
  local text = read(LUADOC)

  it("docs/api.luadoc is well formed", function()
    local _, problems = luadoc_entries(text)
    assert.same({}, problems)
  end)

  it("documents every limber.core function and field and every method of a C class", function()
    for _, m in ipairs(MODULES) do require(m.name) end -- every class registered
    local names = public_c_names()
    assert.is_true(#names > 120, "found only " .. #names .. " public C names")
    assert.same({}, missing_from((luadoc_entries(text)), names))
  end)

  it("documents nothing that does not exist", function()
    for _, m in ipairs(MODULES) do require(m.name) end
    local exists = {}
    for _, n in ipairs(public_c_names()) do exists[n] = true end
    local stale = {}
    for name in pairs((luadoc_entries(text))) do
      if not exists[name] then stale[#stale + 1] = name end
    end
    table.sort(stale)
    assert.same({}, stale)
  end)

  it("has a --- comment on every top-level function of lua/limber/*.lua", function()
    for _, m in ipairs(MODULES) do
      assert.same({}, undocumented_lua(read(m.file)), m.file)
    end
  end)

  it("documents every function field of the Lua modules and of scene objects", function()
    local missing = {}
    local function check(tbl, file, alias)
      local src = read(file)
      for k, v in pairs(tbl) do
        if type(v) == "function" and not k:match("^__") and not defined_documented(src, alias, k) then
          missing[#missing + 1] = file .. ": " .. alias .. "." .. k
        end
      end
    end
    for _, m in ipairs(MODULES) do check(require(m.name), m.file, "M") end
    check(getmetatable(require("limber.scene").new()), "lua/limber/scene.lua", "Scene")
    table.sort(missing)
    assert.same({}, missing)
  end)

  describe("the checkers fail on a missing entry", function()
    it("luadoc: a deleted method or core function is reported", function()
      for _, m in ipairs(MODULES) do require(m.name) end
      local names = public_c_names()
      local no_get = text:gsub("%-%- @function Buffer:get\n", "")
      assert.same({ "Buffer:get" }, missing_from((luadoc_entries(no_get)), names))
      local no_clock = text:gsub("%-%- @function clock\n", "")
      assert.same({ "clock" }, missing_from((luadoc_entries(no_clock)), names))
      -- a method documented in the wrong @type section is a problem
      local moved = text:gsub("%-%- @function Slots:count\n", "-- @function Skin:count_x\n")
      local _, problems = luadoc_entries(moved)
      assert.equal(1, #problems)
      assert.truthy(problems[1]:find("Skin:count_x is outside its @type section", 1, true))
    end)

    it("Lua sources: a function without a --- block is reported", function()
      local src = read("lua/limber/skinning.lua")
      assert.same({}, undocumented_lua(src))
      -- turn the `---` block above M.target into a plain `--` block
      local lines = lines_of(src)
      local at
      for i, l in ipairs(lines) do
        if l:match("^function M%.target%(") then at = i end
      end
      local k = at - 1
      while lines[k - 1]:match("^%-%-") do k = k - 1 end
      lines[k] = lines[k]:gsub("^%-%-%-", "--")
      local stripped = table.concat(lines, "\n")
      assert.same(1, #undocumented_lua(stripped))
      assert.truthy(undocumented_lua(stripped)[1]:find("M.target", 1, true))
      assert.same({ "line 2: Loader:take" },
        undocumented_lua("local Loader = {}\nfunction Loader:take(x)\nend\n"))
      assert.same({}, undocumented_lua("local function helper()\nend\n"))
      assert.is_false(defined_documented("M.f = g\n", "M", "f"))
      assert.is_true(defined_documented("--- Does f.\nM.f = g\n", "M", "f"))
    end)
  end)
end)
