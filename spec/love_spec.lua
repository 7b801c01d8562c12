-- The LÖVE example end to end (examples/love, scripts/love.sh, docs/love.md):
-- the same recorded frame (fixed 1/60 s steps, the camera a function of the
-- frame) drawn with GPU skinning (limber's mat3x4 palettes in a float
-- texture, blended by a vertex shader) and with CPU skinning
-- (limber.skinning) must look the same, and show the crowd; errors end the
-- headless game with a message and a non-zero status instead of LÖVE's error
-- screen. Tagged #love (and #nosan: LÖVE is not built for the sanitizers);
-- skipped with a note where love or xvfb-run is missing (CI installs them).
local H = require "spec.helper"

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local tmp = H.tmpdir(setup, teardown)
-- the commands run in the temporary directory: the repository's absolute path
local root = H.root
if root:sub(1, 1) ~= "/" then
  local _, pwd = H.sh("pwd")
  root = pwd:gsub("%s+$", "") .. "/" .. root:gsub("^%./", "")
end
local have = H.sh("command -v love && command -v xvfb-run")
local FRAMES = 20
local XVFB = "xvfb-run -a -s '-screen 0 960x540x24'"

-- scripts/love.sh run from the temporary directory (so relative FILE names
-- land there), with a time limit: a game that hangs fails instead
local staged = false
local function love_sh(args)
  staged = true
  return H.sh(("cd %s && timeout 300 bash %s %s"):format(q(tmp()), q(root .. "scripts/love.sh"),
    args))
end

-- the game folder love.sh puts together (build-luajit/love-game, made
-- afresh once in this run), run by love directly
local function love(args, xvfb)
  if not staged then
    local ok, out = love_sh("--help")
    assert(ok, out)
  end
  local cmd = ("cd %s && timeout 120 %s love %s %s"):format(q(tmp()), xvfb and XVFB or "",
    q(root .. "build-luajit/love-game"), args)
  local ok, out, code = H.sh(cmd)
  -- xvfb-run's removal of its own temporary folder can fail after the game
  -- has ended (a busy host, once in a clean-clone run): status 5 and its
  -- message, which hide the game's status; that run is made again
  if xvfb and code == 5 and out:find("xvfb-run: error: problem while cleaning up", 1, true) then
    ok, out, code = H.sh(cmd)
  end
  return ok, out, code
end

-- the game's --compare A B: numbers of its one-line report
local function compare(a, b)
  local ok, out = love(("--compare %s %s"):format(q(a), q(b)))
  assert.is_true(ok, out)
  local w, h, differ, share, covered, fox, man = out:match("compare: (%d+) x (%d+) pixels, (%d+) "
    .. "differ %(([%d.]+)%%%), covered ([%d.]+)%% %(fox ([%d.]+)%%, man ([%d.]+)%%%)")
  assert.truthy(w, out)
  return { w = tonumber(w), h = tonumber(h), differ = tonumber(differ), share = tonumber(share),
           covered = tonumber(covered), fox = tonumber(fox), man = tonumber(man), text = out }
end

describe("the LÖVE example #love #nosan #once", function()
  if not have then
    io.stderr:write("note: love or xvfb-run is missing (Debian: love xvfb xauth; scripts/love.sh "
      .. "installs them): the LÖVE example's spec is skipped\n")
    it("runs (skipped: love or xvfb-run is missing)", function()
      pending("love or xvfb-run is missing (Debian: love xvfb xauth)")
    end)
    return
  end

  it("draws the same frame with GPU and with CPU skinning, and shows the crowd", function()
    local ok, out = love_sh(("--frames %d --no-hud --screenshot shots/gpu.png"):format(FRAMES))
    assert.is_true(ok, out)
    assert.truthy(out:find("240 characters (144 Fox, 96 CesiumMan), 240 hats, GPU skinning",
      1, true), out)
    assert.truthy(out:find(("screenshot after %d frames: shots/gpu.png"):format(FRAMES), 1, true),
      out)
    ok, out = love_sh(("--cpu --frames %d --no-hud --screenshot shots/cpu.png"):format(FRAMES))
    assert.is_true(ok, out)
    assert.truthy(out:find("CPU skinning", 1, true), out)
    local gpu, cpu = tmp() .. "/shots/gpu.png", tmp() .. "/shots/cpu.png"
    local c = compare(gpu, cpu)
    assert.same({ 960, 540 }, { c.w, c.h })
    -- the two paths agree: at most 1% of the pixels differ by more than
    -- 24/255 in a channel (measured: a handful of edge pixels)
    assert.is_true(c.share <= 1.0, c.text)
    -- the picture is not empty: the characters, their hats and the overlay
    -- cover a plausible share of it, foxes (orange) and men (blue) both
    assert.is_true(c.covered >= 5 and c.covered <= 80, c.text)
    assert.is_true(c.fox >= 1 and c.man >= 1, c.text)
    -- and the comparison sees a difference where there is one: another
    -- frame (the crowd and the camera moved) differs in many pixels
    ok, out = love(("--frames %d --no-hud --screenshot other.png"):format(FRAMES - 12), true)
    assert.is_true(ok, out)
    local d = compare(gpu, tmp() .. "/other.png")
    assert.is_true(d.share > 2, d.text)
    assert.equal(0, compare(gpu, gpu).differ)
  end)

  it("refuses a bad argument with a message and a non-zero status", function()
    local ok, out, code = love_sh("--frames 2 --bogus")
    assert.is_nil(ok)
    assert.equal(2, code, out)
    assert.truthy(out:find("limber love example: unknown argument '--bogus'", 1, true), out)
    assert.truthy(out:find("usage: love GAME", 1, true), out)
    ok, out, code = love("--frames two", true)
    assert.is_nil(ok)
    assert.equal(2, code, out)
    assert.truthy(out:find("--frames needs an integer in [1, 1000000], got two", 1, true), out)
  end)

  it("ends an error in a headless run with a message and status 1, not an error screen",
    function()
      -- the folder of the screenshot does not exist: writing it fails
      local ok, out, code = love("--frames 1 --screenshot missing/shot.png", true)
      assert.is_nil(ok)
      assert.equal(1, code, out)
      assert.truthy(out:find("limber love example: cannot write the screenshot: missing/shot.png",
        1, true), out)
      -- a picture that is not there
      ok, out, code = love("--compare nothing.png nothing.png")
      assert.is_nil(ok)
      assert.equal(1, code, out)
      assert.truthy(out:find("cannot open nothing.png", 1, true), out)
    end)
end)
