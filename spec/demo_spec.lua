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

-- The LOD tiers the demo should give, computed here from its documented
-- layout: characters fill a grid of side ceil(sqrt(n)) row by row (the foxes
-- first), 2 units apart, at x = col * 2, z = (row + 0.5) * 2; ranked by
-- distance from the camera (ties: foxes first, then by instance), the nearest
-- 20% every frame, the next 30% every 2nd, the rest every 4th; instance 1 of
-- each kind every frame; phases go round inside a tier in rank order.
-- Returns tiers[every] = { fox count, man count } and the mean number of
-- instances a run of `frames` frames evaluates (all on the first frame, then
-- those with (frame + phase) % every == 0).
local function reference_lod(foxes, men, cam_x, cam_z, frames)
  local n = foxes + men
  local side = math.ceil(math.sqrt(n))
  local ranked = {}
  for cell = 0, n - 1 do
    local row, col = math.floor(cell / side), cell % side
    local kind, i = 1, cell + 1
    if cell >= foxes then kind, i = 2, cell - foxes + 1 end
    local dx, dz = col * 2 - cam_x, (row + 0.5) * 2 - cam_z
    ranked[#ranked + 1] = { kind = kind, i = i, d = dx * dx + dz * dz }
  end
  table.sort(ranked, function(a, b)
    if a.d ~= b.d then return a.d < b.d end
    if a.kind ~= b.kind then return a.kind < b.kind end
    return a.i < b.i
  end)
  local tiers, members, phase = { [1] = { 0, 0 }, [2] = { 0, 0 }, [4] = { 0, 0 } }, {}, {}
  for r, c in ipairs(ranked) do
    local every = r <= math.floor(0.2 * n + 0.5) and 1 or r <= math.floor(0.5 * n + 0.5) and 2 or 4
    if c.i == 1 then every = 1 end
    tiers[every][c.kind] = tiers[every][c.kind] + 1
    phase[every] = phase[every] or 0
    members[#members + 1] = { every = every, phase = phase[every] }
    phase[every] = (phase[every] + 1) % every
  end
  local evaluated = n
  for f = 2, frames do
    for _, m in ipairs(members) do
      if (f + m.phase) % m.every == 0 then evaluated = evaluated + 1 end
    end
  end
  return tiers, evaluated / frames
end

describe("examples/demo.lua", function()
  it("runs the plans, prints the stage table and LOD tiers, writes both pictures as SVG and PNG", function()
    assert.truthy(H.sh("command -v rsvg-convert >/dev/null 2>&1"),
      "rsvg-convert is missing: bash scripts/deps.sh installs librsvg2-bin")
    local out_dir = tmp() .. "/with png"   -- a space: paths are quoted for the shell
    local ok, text = demo(out_dir)
    assert.is_true(ok, text)
    assert.truthy(text:find("24 characters (14 Fox, 10 CesiumMan)", 1, true), text)
    local interpreter = rawget(_G, "jit") and rawget(_G, "jit").version or _VERSION
    assert.truthy(text:find("\ninterpreter: " .. interpreter .. ", limber.core from ", 1, true), text)
    -- the stage table: the frame's stages and, indented, the plans' own
    for _, stage in ipairs({ "plan:run (wall)", "  advance", "  sample", "  blend", "  model",
                             "  ik", "  output", "controller (Lua)", "scene update", "skinning",
                             "frame (sum)" }) do
      assert.truthy(text:match("\n" .. stage:gsub("%p", "%%%0") .. "%s+[%d.]+%s+[%d.]+\n"), stage)
    end

    -- the foxes' other layers: flinches (the ball passes over a fox at
    -- these settings) and look-arounds played on them
    local flinches, looks = text:match("fox layers: flinches under the ball (%d+) [^\n]*"
      .. "look%-arounds (%d+)")
    assert.truthy(tonumber(flinches) >= 1, text)
    assert.truthy(tonumber(looks) >= 1, text)
    -- the foxes run the shared state machine (all but the sheet's fox)
    local idle, moving = text:match("fox state machines [^\n]*: (%d+) idle, (%d+) moving at the end")
    assert.truthy(idle, text)
    assert.equal(13, tonumber(idle) + tonumber(moving))
    assert.truthy(tonumber(idle) > 0 and tonumber(moving) > 0, text)

    -- LOD: the printed tiers are the ones the layout gives, they add up to
    -- the crowd, and the plans evaluated the instances those tiers make due
    local cam_x, cam_z = text:match("camera at x = ([-%d.]+), z = ([-%d.]+)")
    assert.truthy(cam_x, text)
    local frames = 130
    local tiers, mean = reference_lod(14, 10, tonumber(cam_x), tonumber(cam_z), frames)
    local total = 0
    for _, t in ipairs({ { 1, "every frame" }, { 2, "every 2nd" }, { 4, "every 4th" } }) do
      local count, fox, man = text:match("\n  " .. t[2] .. "%s+(%d+) %((%d+) Fox, (%d+) CesiumMan%)")
      assert.truthy(count, t[2] .. "\n" .. text)
      count, fox, man = tonumber(count), tonumber(fox), tonumber(man)
      assert.equal(fox + man, count)
      assert.same(tiers[t[1]], { fox, man }, t[2])
      total = total + count
    end
    assert.equal(24, total)
    local printed_mean, of = text:match("instances evaluated per frame: ([%d.]+) %(mean%) of (%d+)")
    assert.equal("24", of)
    assert.near(mean, tonumber(printed_mean), 0.051)
    assert.truthy(mean < 24 * 0.6, mean)   -- LOD evaluates about half the crowd per frame
    -- the bones come from a second plan given the same sources: its head
    -- matrices are the ones the timed plans wrote for the hats
    local diff = text:match("differ from the timed plans' by ([^ ]+) at most")
    assert.truthy(diff, text)
    assert.truthy(tonumber(diff) <= 1e-4, diff)

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
    -- instance 1 moves: in each row, every cell's joints (relative to the
    -- cell) differ from the cell before by more than a pixel, and each
    -- cell's joints lie inside its skinned triangles' box (the bones are the
    -- pose the palettes came from, not the rest pose or another time)
    local circles = {}
    for cx, cy in sheet:gmatch('<circle cx="([-%d.]+)" cy="([-%d.]+)"') do
      circles[#circles + 1] = { tonumber(cx), tonumber(cy) }
    end
    local boxes = {}
    for polygon in sheet:gmatch('<polygon points="([^"]*)"') do
      local x, y = polygon:match("([-%d.]+),([-%d.]+)")
      local cell = math.floor(tonumber(x) / 180) + 1 + (tonumber(y) < 200 and 0 or 8)
      local b = boxes[cell] or { math.huge, math.huge, -math.huge, -math.huge }
      for px, py in polygon:gmatch("([-%d.]+),([-%d.]+)") do
        px, py = tonumber(px), tonumber(py)
        b = { math.min(b[1], px), math.min(b[2], py), math.max(b[3], px), math.max(b[4], py) }
      end
      boxes[cell] = b
    end
    local first = 0
    for kind, joints in ipairs({ fox_joints, man_joints }) do
      for c = 1, 8 do
        local cell = (kind - 1) * 8 + c
        local moved = 0
        for j = 1, joints do
          local p = circles[first + (c - 1) * joints + j]
          local b = boxes[cell]
          assert.truthy(p[1] >= b[1] - 2 and p[1] <= b[3] + 2 and p[2] >= b[2] - 2
            and p[2] <= b[4] + 2, ("cell %d joint %d outside its mesh"):format(cell, j))
          if c > 1 then
            local o = circles[first + (c - 2) * joints + j]
            moved = math.max(moved, math.abs(p[1] - 180 - o[1]), math.abs(p[2] - o[2]))
          end
        end
        if c > 1 then assert.truthy(moved > 1, ("cell %d: instance 1 did not move"):format(cell)) end
      end
      first = first + 8 * joints
    end

    -- crowd from above: an outline and its bones per character, a hat on
    -- every tenth character of each model (Fox 1 and 11, CesiumMan 1), the
    -- camera and a legend; each outline's class names its model
    -- and LOD tier, and each tier has a shade of its own
    local crowd = H.read(out_dir .. "/crowd-top.svg")
    root, n = parse_xml(crowd)
    assert.equal("svg", root.name)
    assert.equal("1024", root.width)
    assert.equal("1024", root.height)
    assert.equal(24 + 1, n.polygon)
    -- a line per bone, and a gaze line per character looking at the ball
    -- (every third: Fox 3, 6, 9, 12, CesiumMan 3, 6, 9)
    local gazes = {}
    for x1, y1, x2, y2 in crowd:gmatch('<line x1="([-%d.]+)" y1="([-%d.]+)" x2="([-%d.]+)" '
      .. 'y2="([-%d.]+)"[^>]* class="gaze"') do
      gazes[#gazes + 1] = { tonumber(x1), tonumber(y1), tonumber(x2), tonumber(y2) }
    end
    assert.equal(7, #gazes)
    assert.equal(14 * fox_bones + 10 * man_bones + #gazes, n.line)
    assert.equal(3 + 1, n.circle) -- the hats and the ball
    -- the look-at IK turns every looker's head to the ball: seen from
    -- above, each gaze line points at the ball's centre (lines starting
    -- within 30 px of it are left out: there the 0.1 px rounding of the
    -- picture's coordinates decides the direction)
    local bx, bz = crowd:match('<circle cx="([-%d.]+)" cy="([-%d.]+)" r="7.0"')
    bx, bz = tonumber(bx), tonumber(bz)
    local checked, atan2 = 0, math.atan2 or math.atan -- luacheck: ignore 143
    for _, g in ipairs(gazes) do
      if (bx - g[1]) ^ 2 + (bz - g[2]) ^ 2 > 30 ^ 2 then
        local a = atan2(g[4] - g[2], g[3] - g[1]) - atan2(bz - g[2], bx - g[1])
        a = math.abs((a + math.pi) % (2 * math.pi) - math.pi)
        assert.truthy(a < 0.02, ("gaze from %.1f, %.1f: %.4f rad off the ball"):format(g[1], g[2], a))
        checked = checked + 1
      end
    end
    assert.truthy(checked >= 5, checked)
    assert.equal(1, n.text)
    assert.equal(2, n.rect)   -- the background and the legend's
    local classes, fills = {}, {}
    for fill, class in crowd:gmatch('<polygon points="[^"]*" fill="([^"]*)"[^>]* class="([^"]*)"') do
      classes[class] = (classes[class] or 0) + 1
      fills[class] = fills[class] or {}
      fills[class][fill] = true
    end
    assert.equal(1, classes.camera)
    local shades = {}
    for kind, name in ipairs({ "Fox", "CesiumMan" }) do
      for _, every in ipairs({ 1, 2, 4 }) do
        local class = ("%s every-%d"):format(name, every)
        assert.equal(tiers[every][kind], classes[class] or 0, class)
        for fill in pairs(fills[class] or {}) do
          assert.is_nil(shades[fill], "two tiers share the shade " .. fill)
          shades[fill] = class
        end
      end
    end
    assert.truthy(text:find(("(24 characters, %d bones, 3 hats, 7 looking at the ball)")
      :format(n.line - #gazes), 1, true), text)
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
