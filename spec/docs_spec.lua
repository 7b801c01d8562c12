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
  { name = "limber.gltf.asset", file = "lua/limber/gltf/asset.lua" },
  { name = "limber.scene", file = "lua/limber/scene.lua" },
  { name = "limber.skinning", file = "lua/limber/skinning.lua" },
  { name = "limber.snapshot", file = "lua/limber/snapshot.lua" },
  { name = "limber.controller", file = "lua/limber/controller.lua" },
  { name = "limber.ik", file = "lua/limber/ik.lua" },
  { name = "limber.retarget", file = "lua/limber/retarget.lua" },
}
-- functions a module re-exports from another one (documented there)
local function reexported(v)
  for k, f in pairs(require "limber.gltf.asset") do
    if f == v and type(k) == "string" then return true end
  end
  return false
end
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

-- ---- the public surface table of docs/api-reference.md ----------------------

local REFERENCE = "docs/api-reference.md"
local SURFACE_SECTION = "## The public surface"
local SURFACE_HEADER = { "class or module", "function", "arguments", "returns", "errors" }
-- Every module whose functions are public, with its source (limber.core has none).
local SURFACE_MODULES = {
  { name = "limber", file = "lua/limber/init.lua" },
  { name = "limber.math", file = "lua/limber/math.lua" },
  { name = "limber.anim", file = "lua/limber/anim.lua" },
  { name = "limber.gltf", file = "lua/limber/gltf.lua" },
  { name = "limber.scene", file = "lua/limber/scene.lua" },
  { name = "limber.skinning", file = "lua/limber/skinning.lua" },
  { name = "limber.snapshot", file = "lua/limber/snapshot.lua" },
  { name = "limber.controller", file = "lua/limber/controller.lua" },
  { name = "limber.ik", file = "lua/limber/ik.lua" },
  { name = "limber.retarget", file = "lua/limber/retarget.lua" },
  { name = "limber.core" },
}

-- Whether the `---` block above the definition of `M.name` in src says
-- `@local` (an internal helper LDoc leaves out of the pages).
local function marked_local(src, name)
  local lines = lines_of(src)
  for i, line in ipairs(lines) do
    if line:match("^function%s+M[.:]" .. name .. "%s*%(") or line:match("^M%." .. name .. "%s*=") then
      local k = i - 1
      while k >= 1 and lines[k]:match("^%-%-") do
        if lines[k]:match("@local") then return true end
        k = k - 1
      end
      return false
    end
  end
  return false
end

-- The methods and the metamethods of class metatable mt: methods are the
-- functions of its __index table (the metatable itself for a Lua class,
-- `methods` for limber.Buffer, whose __index is a function), minus "__"
-- names; metamethods are its "__" functions except __gc.
local function class_members(mt)
  local methods = type(mt.__index) == "table" and mt.__index or mt.methods
  assert(type(methods) == "table", tostring(mt.__name) .. " has no method table")
  local m, meta = {}, {}
  for k, v in pairs(methods) do
    if type(v) == "function" and not k:match("^__") then m[#m + 1] = k end
  end
  for k, v in pairs(mt) do
    if type(k) == "string" and k:match("^__") and k ~= "__gc" and type(v) == "function" then
      meta[#meta + 1] = k
    end
  end
  table.sort(meta)
  return m, meta
end

-- One object of each Lua class (they have no registry entry): an anim
-- Crowd, one of its Players, a Scene and a Controller.
local function lua_class_objects()
  local limber, anim = require "limber", require "limber.anim"
  local skel = limber.skeleton({ { name = "root" } })
  local clip = anim.clip({ tracks = { { joint = 1, path = "translation", times = { 0, 1 },
    values = { 0, 0, 0, 1, 0, 0 } } } })
  local crowd = anim.crowd(limber.pose(skel, 1), { clip })
  local ctl = require("limber.controller").new({ pose = limber.pose(skel, 1), clips = { clip } })
  local ik = require "limber.ik"
  local chain = limber.skeleton({ { name = "a" }, { name = "b", parent = 1 }, { name = "c", parent = 2 } })
  return { crowd, crowd:player(1), require("limber.scene").new(), ctl, ik.two_bone(chain, 1, 2, 3),
           ik.aim(chain, 3, { forward = { 0, 0, 1 } }) }
end

-- Every public function and method found in the code: names is a set of
-- "module.function" and "Class:method" names (`limber.core.clock`,
-- `limber.Pose:set_trs`, `limber.anim.Crowd:advance`); metas maps each class
-- to its sorted metamethods. Excluded as in the luadoc checks above: the
-- internal limber.ThreadPool, benchmark baselines, metamethods (kept apart)
-- and module functions marked @local.
local function public_surface()
  local names, metas = {}, {}
  for _, m in ipairs(SURFACE_MODULES) do
    local src = m.file and read(m.file)
    for k, v in pairs(require(m.name)) do
      if type(v) == "function" and not (src and marked_local(src, k)) then names[m.name .. "." .. k] = true end
    end
  end
  local function add_class(class, mt)
    local methods, meta = class_members(mt)
    for _, k in ipairs(methods) do names[class .. ":" .. k] = true end
    metas[class] = meta
  end
  for key, mt in pairs(debug.getregistry()) do
    if type(key) == "string" and type(mt) == "table" and key:match("^limber%.")
        and key ~= "limber.ThreadPool" and not key:lower():find("baseline", 1, true) then
      add_class(key, mt)
    end
  end
  for _, obj in ipairs(lua_class_objects()) do
    local mt = getmetatable(obj)
    add_class(mt.__name, mt)
  end
  return names, metas
end

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

-- Parses the section "## The public surface" of the reference: its one
-- table (rows {class, name, args, returns, errors, line}) and the
-- metamethod notes (lines "- `Class`: `__len` (...), `__tostring`" or
-- "- `Class`: none"). Returns rows, notes (class -> sorted list) and
-- problems with the text's shape.
local function surface_table(text)
  local rows, notes, problems = {}, {}, {}
  local in_section, found, tables, prev_row = false, false, 0, false
  local function problem(i, fmt, ...) problems[#problems + 1] = ("line %d: " .. fmt):format(i, ...) end
  for i, line in ipairs(lines_of(text)) do
    local is_row = line:match("^|") ~= nil
    if line:match("^#+ ") then
      in_section = line == SURFACE_SECTION
      found = found or in_section
    elseif in_section and is_row then
      if not prev_row then tables = tables + 1 end
      local cells = {}
      if not line:match("|%s*$") then problem(i, "a table row must end with |") end
      for cell in line:gmatch("|([^|]*)") do cells[#cells + 1] = trim(cell) end
      if cells[#cells] == "" then cells[#cells] = nil end -- after the closing |
      if not prev_row then
        if table.concat(cells, "|") ~= table.concat(SURFACE_HEADER, "|") then
          problem(i, "the header must be | %s |", table.concat(SURFACE_HEADER, " | "))
        end
      elseif cells[1] and cells[1]:match("^%-%-%-") then -- the separator row
        if #cells ~= #SURFACE_HEADER then problem(i, "the separator row must have %d cells", #SURFACE_HEADER) end
      elseif #cells ~= #SURFACE_HEADER then
        problem(i, "%d cells, expected %d", #cells, #SURFACE_HEADER)
      else
        local class, name = cells[1]:match("^`([%w_.]+)`$"), cells[2]:match("^`([%w_.:]+)`$")
        if not class or not name then
          problem(i, "class and function must be `names`")
        else
          if name:sub(1, #class + 1) ~= class .. "." and name:sub(1, #class + 1) ~= class .. ":"
              or name:find("[.:]", #class + 2) then
            problem(i, "%s is not a function of %s", name, class)
          end
          for c = 3, 5 do
            if cells[c] == "" then problem(i, "%s: empty %s cell", name, SURFACE_HEADER[c]) end
          end
          if cells[3] ~= "" and not cells[3]:match("^%(.*%)$") then
            problem(i, "%s: arguments must be in parentheses", name)
          end
          local _, open = cells[3]:gsub("%[", "")
          local _, close = cells[3]:gsub("%]", "")
          if open ~= close then problem(i, "%s: unbalanced [ ] in the arguments", name) end
          rows[#rows + 1] = { class = class, name = name, args = cells[3], returns = cells[4],
            errors = cells[5], line = i }
        end
      end
    elseif in_section and line:match("^%- `") then
      local class, rest = line:match("^%- `([%w_.]+)`:%s*(.*)$")
      if class then
        local list = {}
        for mm in rest:gmatch("`(__[%w_]+)`") do list[#list + 1] = mm end
        table.sort(list)
        if #list == 0 and rest ~= "none" then problem(i, "%s: list metamethods or say none", class) end
        if notes[class] then problem(i, "%s has two metamethod notes", class) end
        notes[class] = list
      end
    end
    prev_row = in_section and is_row
  end
  if not found then problems[#problems + 1] = "no section " .. SURFACE_SECTION end
  if found and tables ~= 1 then problems[#problems + 1] = ("%d tables in the section, expected one"):format(tables) end
  return rows, notes, problems
end

-- Everything wrong between the reference text and the code's surface
-- (names, metas from public_surface), sorted.
local function surface_problems(text, names, metas)
  local rows, notes, problems = surface_table(text)
  local seen = {}
  for _, r in ipairs(rows) do
    if seen[r.name] then
      problems[#problems + 1] = ("line %d: %s has two rows"):format(r.line, r.name)
    elseif not names[r.name] then
      problems[#problems + 1] = ("line %d: %s names nothing that exists"):format(r.line, r.name)
    end
    seen[r.name] = true
  end
  for n in pairs(names) do
    if not seen[n] then problems[#problems + 1] = n .. " has no row" end
  end
  for class, meta in pairs(metas) do
    local listed = notes[class]
    if not listed then
      problems[#problems + 1] = class .. " has no metamethod note"
    elseif table.concat(listed, ",") ~= table.concat(meta, ",") then
      problems[#problems + 1] = ("metamethods of %s: the note lists {%s}, the class has {%s}")
        :format(class, table.concat(listed, ", "), table.concat(meta, ", "))
    end
  end
  for class in pairs(notes) do
    if not metas[class] then problems[#problems + 1] = "metamethod note for " .. class .. ", which does not exist" end
  end
  table.sort(problems)
  return problems
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
        if type(v) == "function" and not k:match("^__") and not defined_documented(src, alias, k)
            and not (file ~= "lua/limber/gltf/asset.lua" and reexported(v)) then
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
      local moved = text:gsub("%-%- @function Slots:slot_count\n", "-- @function Skin:count_x\n")
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

describe("the public surface table of docs/api-reference.md", function()
  local doc = read(REFERENCE)

  -- the same text with the row of `name` removed, or a line added after it
  local function without_row(text, name)
    local out = text:gsub("\n| `[%w_.]+` | `" .. name:gsub("%p", "%%%0") .. "` |[^\n]*", "")
    return out
  end
  local function after_row(text, name, line)
    local out = text:gsub("(\n| `[%w_.]+` | `" .. name:gsub("%p", "%%%0") .. "` |[^\n]*)", "%1\n" .. line)
    return out
  end

  it("has one row per public function and method, and none for anything else", function()
    local names, metas = public_surface()
    local count = 0
    for _ in pairs(names) do count = count + 1 end
    assert.is_true(count > 180, "the walk found only " .. count .. " functions")
    -- the walk reaches every kind of public function ...
    for _, n in ipairs { "limber.skeleton", "limber.math.mul", "limber.anim.crowd", "limber.gltf.load",
        "limber.scene.new", "limber.skinning.run", "limber.core.skinning_run", "limber.Pose:set_trs",
        "limber.Buffer:get", "limber.anim.Player:play", "limber.anim.Crowd:advance", "limber.Scene:create" } do
      assert.is_true(names[n], n)
    end
    -- ... and leaves out the internal ones and metamethods
    for _, n in ipairs { "limber.math.trs_raw", "limber.Pose:__len", "limber.anim.Crowd:__index" } do
      assert.is_nil(names[n], n)
    end
    assert.same({ "__index", "__len", "__tostring" }, metas["limber.Buffer"])
    assert.same({}, surface_problems(doc, names, metas))
  end)

  it("has arguments, returns and errors on every row", function()
    local rows, _, problems = surface_table(doc)
    assert.same({}, problems)
    assert.is_true(#rows > 180)
    for _, r in ipairs(rows) do
      assert.truthy(r.args:match("^%(.*%)$"), r.name)
      assert.is_true(#r.returns > 0 and #r.errors > 0, r.name)
    end
  end)

  -- A call with no arguments on a valid object must work when the row has
  -- only optional arguments and says errors "none", and must raise when the
  -- row has a required argument and lists errors.
  it("agrees with a call without arguments on its arguments and errors", function()
    local limber, anim, skinning = require "limber", require "limber.anim", require "limber.skinning"
    local skel = limber.skeleton({ { name = "root" }, { name = "tip", parent = "root", translation = { 0, 1, 0 } } })
    local pose, out = limber.pose(skel, 2), limber.pose(skel, 2)
    local skin = limber.skin(skel)
    local pal = limber.palette(pose, { skin = skin })
    local clip = anim.clip({ tracks = { { joint = 2, path = "translation", times = { 0, 1 },
      values = { 0, 1, 0, 0, 2, 0 } } } })
    local mesh = skinning.mesh({ positions = { 0, 0, 0, 1, 0, 0, 0, 1, 0 }, skin = skin, indices = { 1, 2, 3 },
      joints = { 1, 0, 0, 0, 2, 0, 0, 0, 1, 2, 0, 0 }, weights = { 1, 0, 0, 0, 1, 0, 0, 0, 0.5, 0.5, 0, 0 } })
    local target = skinning.target({ mesh = mesh, instances = 2, positions = true })
    local crowd = anim.crowd(out, { clip })
    local scene = require("limber.scene").new()
    scene:create()
    local objects = {
      ["limber.Buffer"] = limber.buffer("f32", 3, 2), ["limber.Skeleton"] = skel, ["limber.Pose"] = pose,
      ["limber.Skin"] = skin, ["limber.Palette"] = pal, ["limber.Clip"] = clip,
      ["limber.Sampler"] = anim.sampler(pose, { clip }),
      ["limber.Blender"] = anim.blender(pose, { { pose = limber.pose(skel, 2) } }),
      ["limber.Stack"] = limber.stack(out, { { sources = { limber.pose(skel, 2) } } }),
      ["limber.Plan"] = limber.plan({ pose = limber.pose(skel, 2), clips = { clip } }),
      ["limber.SkinMesh"] = mesh, ["limber.SkinTarget"] = target,
      ["limber.SkinBatch"] = skinning.batch({ { mesh = mesh, palette = pal, target = target } }),
      ["limber.SkinMorph"] = skinning.morph(mesh, { { positions = { 0, 0, 1, 0, 0, 0, 0, 0, 0 } } }),
      ["limber.Slots"] = core.slots({ "a" }, { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1 }),
      ["limber.anim.Player"] = crowd:player(1), ["limber.anim.Crowd"] = crowd, ["limber.Scene"] = scene,
      ["limber.Controller"] = require("limber.controller").new({ pose = limber.pose(skel, 2),
        clips = { clip } }),
      ["limber.ik.TwoBone"] = require("limber.ik").two_bone(limber.skeleton({ { name = "a" },
        { name = "b", parent = 1 }, { name = "c", parent = 2 } }), 1, 2, 3),
      ["limber.ik.Aim"] = require("limber.ik").aim(skel, 1, { forward = { 0, 0, 1 } }),
      ["limber.MachineDef"] = core.machine_def({ states = { {} } }),
      ["limber.SpaceDef"] = core.blend_space({ dims = 1, at = { 0 }, durations = { 1 } }),
      ["limber.Machines"] = core.machines(limber.plan({ pose = limber.pose(skel, 2), clips = { clip } })),
    }
    local modules = {}
    for _, m in ipairs(SURFACE_MODULES) do modules[m.name] = require(m.name) end
    local tried, required = 0, 0
    for _, r in ipairs((surface_table(doc))) do
      local optional = r.args == "()" or r.args:match("^%(%[") ~= nil
      if optional and r.errors == "none" or not optional and r.errors ~= "none" then
        -- called with no arguments (on a valid object)
        local method = r.name:match(":([%w_]+)$")
        local ok, err
        if method then
          local obj = objects[r.class]
          assert.truthy(obj, "no sample object of " .. r.class)
          ok, err = pcall(obj[method], obj)
        else
          ok, err = pcall(modules[r.class][r.name:match("%.([%w_]+)$")])
        end
        if optional then
          assert.is_true(ok, r.name .. " says errors: none, but raised " .. tostring(err))
          tried = tried + 1
        else
          assert.is_false(ok, r.name .. " has a required argument but ran without it")
          required = required + 1
        end
      end
    end
    assert.is_true(tried > 60, "only " .. tried .. " rows without errors tried")
    assert.is_true(required > 100, "only " .. required .. " rows with a required argument tried")
  end)

  it("marks @local module functions by their LDoc block only", function()
    local src = "--- Public.\nfunction M.a(x) end\n--- Internal.\n-- @local\nfunction M.b(x) end\n"
      .. "--- Also internal.\n-- @local\nM.c = print\n"
    assert.is_false(marked_local(src, "a"))
    assert.is_true(marked_local(src, "b"))
    assert.is_true(marked_local(src, "c"))
    assert.is_false(marked_local(src, "d"))
  end)

  describe("the checker fails on doctored text", function()
    local names, metas
    setup(function() names, metas = public_surface() end)

    -- The problems found in text and not in the real reference (line
    -- numbers ignored): what the doctoring alone caused, so these tests
    -- hold while the real table has a problem of its own.
    local real
    local function new_problems(text, n, m)
      if not real then
        real = {}
        for _, p in ipairs(surface_problems(doc, names, metas)) do real[p:gsub("^line %d+: ", "")] = true end
      end
      local out = {}
      for _, p in ipairs(surface_problems(text, n or names, m or metas)) do
        if not real[p:gsub("^line %d+: ", "")] then out[#out + 1] = p end
      end
      return out
    end

    it("a row removed", function()
      local text = without_row(doc, "limber.Pose:set_trs")
      assert.are_not.equal(doc, text)
      assert.same({ "limber.Pose:set_trs has no row" }, new_problems(text))
      text = without_row(doc, "limber.anim.Crowd:advance")
      assert.same({ "limber.anim.Crowd:advance has no row" }, new_problems(text))
    end)

    it("a bogus row added, or a row twice", function()
      local text = after_row(doc, "limber.Pose:trs", "| `limber.Pose` | `limber.Pose:fly` | (i) | nothing | none |")
      local problems = new_problems(text)
      assert.equal(1, #problems)
      assert.truthy(problems[1]:find("limber.Pose:fly names nothing that exists", 1, true))
      text = after_row(doc, "limber.core.clock", "| `limber.core` | `limber.core.clock` | () | seconds | none |")
      problems = new_problems(text)
      assert.equal(1, #problems)
      assert.truthy(problems[1]:find("limber.core.clock has two rows", 1, true))
    end)

    it("a function the code gains without a row", function()
      local more = {}
      for n in pairs(names) do more[n] = true end
      more["limber.core.teleport"] = true
      assert.same({ "limber.core.teleport has no row" }, new_problems(doc, more))
    end)

    it("an empty cell, a wrong class, a broken row, a second table", function()
      local text = doc:gsub("(| `limber%.Pose:dirty` | %(i%) | [^|]+ | )[^|]+ |", "%1 |")
      local problems = new_problems(text)
      assert.equal(1, #problems)
      assert.truthy(problems[1]:find("limber.Pose:dirty: empty errors cell", 1, true))
      text = doc:gsub("| `limber%.Skin` | `limber%.Skin:joint` |", "| `limber.Pose` | `limber.Skin:joint` |")
      problems = new_problems(text)
      assert.equal(1, #problems)
      assert.truthy(problems[1]:find("limber.Skin:joint is not a function of limber.Pose", 1, true))
      text = doc:gsub("| `limber%.Skin:joint` | %(k%) |", "| `limber.Skin:joint` | (k |")
      problems = new_problems(text)
      assert.equal(1, #problems)
      assert.truthy(problems[1]:find("arguments must be in parentheses", 1, true))
      text = after_row(doc, "limber.Skin:skeleton", "\n| a | b |\n| --- | --- |\n| `x` | `x.y` |")
      problems = new_problems(text)
      assert.truthy(table.concat(problems, "\n"):find("2 tables in the section, expected one", 1, true))
    end)

    it("a metamethod missing from a class's note", function()
      local text = doc:gsub("(%- `limber%.Pose`: )`__len` %(instance count%), ", "%1")
      assert.are_not.equal(doc, text)
      assert.same({ "metamethods of limber.Pose: the note lists {__tostring}, the class has {__len, __tostring}" },
        new_problems(text))
      text = doc:gsub("\n%- `limber%.Blender`: [^\n]*", "")
      assert.same({ "limber.Blender has no metamethod note" }, new_problems(text))
    end)
  end)
end)
