-- The main demo runs end to end on the bundled models (small settings) and
-- writes real pictures: well-formed SVG with one figure per thing it draws,
-- and PNGs (rendered by rsvg-convert, Debian librsvg2-bin, which
-- scripts/deps.sh installs) of the SVGs' sizes. It runs under this run's
-- interpreter (H.lua_exe) with this run's module paths.
local H = require "spec.helper"

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local tmp = H.tmpdir(setup, teardown)

-- Runs the demo with 24 characters; returns ok, stdout.
local function demo(out_dir, env)
  return H.run(H.example("demo.lua", ("--frames 130 --characters 24 --threads 2 --out %s "
    .. "2>/dev/null"):format(q(out_dir)), env))
end

-- Checks that text is well-formed XML of the kind the demo writes (elements,
-- double-quoted attributes, escaped text, every element closed in order);
-- returns the root's attributes and the number of elements of each name.
local function parse_xml(text)
  local stack, counts, root = {}, {}, nil
  local pos = 1
  while true do
    local s, e, tag = text:find("<([^>]*)>", pos)
    local between = text:sub(pos, (s or #text + 1) - 1)
    assert.is_nil(between:find("<", 1, true), "stray '<'")
    for amp in between:gmatch("&[^;]*;?") do
      assert.truthy(({ ["&amp;"] = 1, ["&lt;"] = 1, ["&gt;"] = 1, ["&quot;"] = 1 })[amp], amp)
    end
    if not s then break end
    if #stack == 0 then assert.is_nil(between:find("%S"), "text outside the root element") end
    local close, name, rest, empty = tag:match("^(/?)([%a_][%w_:%-]*)(.-)(/?)$")
    assert.truthy(name, "malformed tag <" .. tag .. ">")
    if close == "/" then
      assert.equal(name, table.remove(stack), "closing tag out of order")
      assert.equal("", rest:gsub("%s", ""), tag)
    else
      local attrs = {}
      local left = rest:gsub('%s+([%a_][%w_:%-]*)="([^"<]*)"', function(k, v)
        assert.is_nil(attrs[k], "duplicate attribute " .. k)
        attrs[k] = v
        return ""
      end)
      assert.equal("", left:gsub("%s", ""), "bad attributes in <" .. tag .. ">")
      counts[name] = (counts[name] or 0) + 1
      if #stack == 0 then
        assert.is_nil(root, "two root elements")
        root = attrs
        root.name = name
      end
      if empty == "" then stack[#stack + 1] = name end
    end
    pos = e + 1
  end
  assert.equal(0, #stack, "unclosed elements")
  return assert(root, "no root element"), counts
end

-- Every number in the figures' coordinate attributes, for range checks.
local function coordinates(svg)
  local xs, ys = {}, {}
  for tag in svg:gmatch("<(%a+ [^>]*)>") do
    for k, v in tag:gmatch('(%a+%d?)="([^"]*)"') do
      if k == "points" then
        for x, y in v:gmatch("([-%d.]+),([-%d.]+)") do
          xs[#xs + 1], ys[#ys + 1] = tonumber(x), tonumber(y)
        end
      elseif k:match("^x%d?$") or k == "cx" then
        xs[#xs + 1] = tonumber(v)
      elseif k:match("^y%d?$") or k == "cy" then
        ys[#ys + 1] = tonumber(v)
      end
    end
  end
  return xs, ys
end

-- The PNG's width and height from its IHDR, after checking the chunk chain:
-- signature, IHDR first, at least one IDAT, IEND last, lengths that add up.
local function png_size(png)
  assert.equal("\137PNG\r\n\26\n", png:sub(1, 8))
  local pos, chunks = 9, {}
  while pos <= #png do
    local len, typ = H.unpack(">I4c4", png, pos)
    chunks[#chunks + 1] = typ
    pos = pos + 12 + len
  end
  assert.equal(#png + 1, pos, "chunk lengths do not add up to the file")
  assert.equal("IHDR", chunks[1])
  assert.equal("IEND", chunks[#chunks])
  local idat = 0
  for _, c in ipairs(chunks) do if c == "IDAT" then idat = idat + 1 end end
  assert.truthy(idat >= 1, "no IDAT chunk")
  assert.equal(13, H.unpack(">I4", png, 9))
  local width, height = H.unpack(">I4I4", png, 17)
  return width, height
end

describe("examples/demo.lua", function()
  it("runs the pipeline, prints the stage table and writes both pictures as SVG and PNG", function()
    assert.truthy(H.sh("command -v rsvg-convert >/dev/null 2>&1"),
      "rsvg-convert is missing: bash scripts/deps.sh installs librsvg2-bin")
    local out_dir = tmp() .. "/with png"   -- a space: paths are quoted for the shell
    local ok, text = demo(out_dir)
    assert.is_true(ok, text)
    assert.truthy(text:find("24 characters (14 Fox, 10 CesiumMan)", 1, true), text)
    local interpreter = rawget(_G, "jit") and rawget(_G, "jit").version or _VERSION
    assert.truthy(text:find("\ninterpreter: " .. interpreter .. ", limber.core from ", 1, true), text)
    for _, stage in ipairs({ "advance players", "sample + blend", "local to model", "scene update",
                             "palettes", "skinning" }) do
      assert.truthy(text:match(stage:gsub("%+", "%%+") .. "%s+[%d.]+%s+[%d.]+"), stage)
    end

    -- the figures each picture must hold, from the models themselves
    local gltf = require "limber.gltf"
    local fox = gltf.load(H.assets .. "Fox/Fox.glb")
    local man = gltf.load(H.assets .. "CesiumMan/CesiumMan.gltf")
    local function bones_and_joints(asset)
      local skel = asset.skeletons[1].skeleton
      local bones = 0
      for j = 1, skel:joint_count() do
        if skel:parent(j) then bones = bones + 1 end
      end
      return bones, skel:joint_count()
    end
    local fox_bones, fox_joints = bones_and_joints(fox)
    local man_bones, man_joints = bones_and_joints(man)

    -- contact sheet: 8 frames of each model (130 frames > 2 s), each cell its
    -- title, its triangles, a line per bone and a circle per joint
    local sheet = H.read(out_dir .. "/contact-sheet.svg")
    local root, n = parse_xml(sheet)
    assert.equal("svg", root.name)
    assert.equal("http://www.w3.org/2000/svg", root.xmlns)
    assert.equal("1440", root.width)
    assert.equal("380", root.height)
    assert.equal(16, n.text)
    assert.equal(8 * (fox_bones + man_bones), n.line)
    assert.equal(8 * (fox_joints + man_joints), n.circle)
    assert.truthy(n.polygon > 1000, n.polygon)
    for polygon in sheet:gmatch('<polygon points="([^"]*)"') do
      assert.equal(3, select(2, polygon:gsub(",", ",")), polygon)   -- triangles
    end
    local xs, ys = coordinates(sheet)
    for _, x in ipairs(xs) do assert.truthy(x >= 0 and x <= 1440, x) end
    for _, y in ipairs(ys) do assert.truthy(y >= 0 and y <= 380, y) end

    -- crowd from above: an outline and its bones per character, a hat on
    -- every tenth character of each model (Fox 1 and 11, CesiumMan 1)
    local crowd = H.read(out_dir .. "/crowd-top.svg")
    root, n = parse_xml(crowd)
    assert.equal("svg", root.name)
    assert.equal("1024", root.width)
    assert.equal("1024", root.height)
    assert.equal(24, n.polygon)
    assert.equal(14 * fox_bones + 10 * man_bones, n.line)
    assert.equal(3, n.circle)
    assert.truthy(text:find(("(24 characters, %d bones, 3 hats)"):format(n.line), 1, true), text)
    xs, ys = coordinates(crowd)
    -- fitted: the outlines span the picture less its 10-pixel margins along
    -- one axis, and every figure (a hat or a bone may stick out of its outline
    -- by a little) is inside it
    local lo, hi = { math.huge, math.huge }, { -math.huge, -math.huge }
    for polygon in crowd:gmatch('<polygon points="([^"]*)"') do
      for x, y in polygon:gmatch("([-%d.]+),([-%d.]+)") do
        lo = { math.min(lo[1], tonumber(x)), math.min(lo[2], tonumber(y)) }
        hi = { math.max(hi[1], tonumber(x)), math.max(hi[2], tonumber(y)) }
      end
    end
    assert.near(1004, math.max(hi[1] - lo[1], hi[2] - lo[2]), 0.2)
    assert.is_true(lo[1] >= 9.9 and lo[2] >= 9.9 and hi[1] <= 1014.1 and hi[2] <= 1014.1)
    for _, v in ipairs(xs) do assert.truthy(v > 0 and v < 1024, v) end
    for _, v in ipairs(ys) do assert.truthy(v > 0 and v < 1024, v) end

    -- the PNGs: real PNG files of the sizes asked for
    assert.truthy(text:find("PNG (rsvg-convert):", 1, true), text)
    assert.same({ 1440, 380 }, { png_size(H.read(out_dir .. "/contact-sheet.png")) })
    assert.same({ 1024, 1024 }, { png_size(H.read(out_dir .. "/crowd-top.png")) })
  end)

  it("writes the SVG files and says how to get PNGs when rsvg-convert is missing", function()
    -- a PATH with the demo's other tools only (mkdir), not rsvg-convert
    local bin = tmp() .. "/bin"
    local _, lua = H.sh("command -v " .. H.lua_exe)
    local _, mkdir = H.sh("command -v mkdir")
    assert(H.sh(("mkdir -p %s && ln -sf %s %s/%s && ln -sf %s %s/mkdir"):format(q(bin),
      q(lua:match("%S+")), q(bin), H.lua_exe, q(mkdir:match("%S+")), q(bin))))
    local out_dir = tmp() .. "/no-png"
    local ok, text = demo(out_dir, "PATH=" .. q(bin))
    assert.is_true(ok, text)
    assert.truthy(text:find("rsvg-convert is not installed", 1, true), text)
    assert.truthy(text:find("librsvg2-bin", 1, true), text)
    assert.truthy(H.read(out_dir .. "/contact-sheet.svg"):find("</svg>", 1, true))
    assert.truthy(H.read(out_dir .. "/crowd-top.svg"):find("</svg>", 1, true))
    assert.is_nil(io.open(out_dir .. "/crowd-top.png"))
    assert.is_nil(io.open(out_dir .. "/contact-sheet.png"))
  end)

  it("fails, naming the command, when rsvg-convert fails", function()
    local bin = tmp() .. "/broken"
    assert(H.sh(("mkdir -p %s && printf '#!/bin/sh\\nexit 3\\n' > %s/rsvg-convert && "
      .. "chmod +x %s/rsvg-convert"):format(q(bin), q(bin), q(bin))))
    local out_dir = tmp() .. "/broken-out"
    local ok, text, code = H.run(H.example("demo.lua", ("--frames 5 --characters 4 --out %s")
      :format(q(out_dir)), ("PATH=%s:\"$PATH\""):format(q(bin))))
    assert.is_falsy(ok)
    assert.equal(1, code)
    assert.truthy(text:find("demo: rsvg-convert failed: LD_PRELOAD= rsvg-convert --width 1440 "
      .. "--height 380", 1, true), text)
  end)

  it("writes no pictures with --no-pictures", function()
    local out_dir = tmp() .. "/none"
    local ok, text = H.run(H.example("demo.lua", ("--frames 5 --characters 4 --no-pictures --out %s "
      .. "2>/dev/null"):format(q(out_dir))))
    assert.is_true(ok, text)
    assert.truthy(text:find("4 characters (2 Fox, 2 CesiumMan)", 1, true), text)
    assert.is_nil(text:find("pictures:", 1, true), text)
    assert.is_nil(io.open(out_dir .. "/contact-sheet.svg"))
  end)

  it("refuses bad options", function()
    local ok, text, code = H.run(H.example("demo.lua", "--frames x"))
    assert.is_falsy(ok)
    assert.equal(2, code)
    assert.truthy(text:find("needs a number", 1, true), text)
  end)
end)
