-- The same limber on every Lua (docs/lua-versions.md): integers read
-- exactly, error messages formatted alike, keep-alives through user values,
-- and the specs' own plain-Lua string.pack. Runs on every version
-- (scripts/lua-versions.sh); the expected messages are what Lua 5.4 prints.
local H = require "spec.helper"
local limber = require "limber"

local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return e
end

describe("limber on " .. H.lua, function()
  it("reads an integer argument only when the number is integral and within 64 bits", function()
    local b = limber.buffer("f32", 1, 4)
    local norepr = "bad argument #2 to 'limber.Buffer:get' (number has no integer representation)"
    for _, v in ipairs({ 1.5, -0.25, 2 ^ 63, -2 ^ 64, 1e300, 0 / 0, 1 / 0, -1 / 0 }) do
      assert.equal(norepr, err_of(b.get, b, v))
    end
    -- integral values are exact up to 2^63 on every version: no truncation, no wrap
    local range = "bad argument #2 to 'limber.Buffer:get' (element index %s out of range [1, 4])"
    assert.equal(range:format("9007199254740992"), err_of(b.get, b, 2 ^ 53))
    assert.equal(range:format("4611686018427387904"), err_of(b.get, b, 2 ^ 62))
    assert.equal(range:format("-9223372036854775808"), err_of(b.get, b, -2 ^ 63))
    assert.equal(range:format("0"), err_of(b.get, b, 0))
    assert.equal(range:format("5"), err_of(b.get, b, 5))
    assert.equal("bad argument #2 to 'limber.Buffer:get' (number expected, got string)",
      err_of(b.get, b, "x"))
    b:set(4, 2.5)
    assert.equal(2.5, b:get(4))
    assert.equal(2.5, b:get(4.0)) -- an integral float is an integer everywhere in limber.core
    assert.equal(2.5, b:get("4")) -- and a numeric string, as luaL_checkinteger takes it
  end)

  it("formats numbers in messages as Lua 5.4 does (%I and %f)", function()
    local u = limber.buffer("u8", 1, 4)
    assert.equal("bad argument #3 to 'limber.Buffer:set' (value 1 (300.0) is not an integer in [0, 255])",
      err_of(u.set, u, 1, 300))
    assert.equal("bad argument #3 to 'limber.Buffer:set' (value 1 (2.5) is not an integer in [0, 255])",
      err_of(u.set, u, 1, 2.5))
    local f = limber.buffer("f32", 1, 4)
    assert.equal("bad argument #3 to 'limber.Buffer:set' (value 1 (1e+39) is not a finite float)",
      err_of(f.set, f, 1, 1e39))
    assert.equal("bad argument #3 to 'limber.buffer' (value 3 (300.0) is not an integer in [0, 255])",
      err_of(limber.buffer, "u8", 1, { 1, 2, 300 }))
    assert.equal("bad argument #3 to 'limber.buffer' (count out of range)",
      err_of(limber.buffer, "f32", 1, 2 ^ 40))
  end)

  it("keeps the objects a view or a palette reads alive through user values", function()
    local skel = limber.skeleton({ { name = "root" }, { name = "arm", parent = "root" } })
    local pose = limber.pose(skel, 3)
    pose:set_trs(2, 2, { 1, 2, 3 })
    pose:local_to_model()
    local models = pose:model_buffer()
    local palette = limber.palette(pose)
    local want = models:get(2 * 2)
    local weak = setmetatable({ skel, pose, limber.pose(skel, 1) }, { __mode = "v" })
    skel, pose = nil, nil -- luacheck: ignore 311 (dropped on purpose)
    for _ = 1, 3 do collectgarbage("collect") end
    assert.is_nil(weak[3]) -- an unreferenced pose is collected: the weak table sees that
    assert.is_not_nil(weak[2]) -- the view and the palette keep the pose
    assert.is_not_nil(weak[1]) -- which keeps its skeleton
    -- the view still reads the pose's memory, the palette still updates from it
    assert.same(want, models:get(2 * 2))
    palette:update()
    assert.near({ 1, 2, 3 }, { palette:get(2, 2)[13], palette:get(2, 2)[14], palette:get(2, 2)[15] }, 1e-6)
  end)

  it("H.pack_lua and H.unpack_lua write the bytes string.pack writes", function()
    -- fixed vectors (IEEE 754 binary32, little-endian), then random floats
    -- against string.pack where the version has it
    local vectors = {
      { 1, "\0\0\128\63" }, { -2, "\0\0\0\192" }, { 0.1, "\205\204\204\61" },
      { 1 / 0, "\0\0\128\127" }, { 2 ^ -149, "\1\0\0\0" }, { 3.4028235e38, "\255\255\127\127" },
      { 1e39, "\0\0\128\127" }, { 2 ^ -150, "\0\0\0\0" }, { 3 * 2 ^ -150, "\2\0\0\0" },
    }
    for _, v in ipairs(vectors) do
      assert.equal(v[2], H.pack_lua("<f", v[1]))
      assert.equal(v[2]:reverse(), H.pack_lua(">f", v[1]))
    end
    assert.equal("\1\2\0\0\255\255abc", H.pack_lua("<I2I2i2c3", 0x201, 0, -1, "abc"))
    local a, b, c, pos = H.unpack_lua(">I4c2B", "\0\0\1\0xy\7")
    assert.same({ 256, "xy", 7, 8 }, { a, b, c, pos })
    if string.pack then -- luacheck: ignore 143
      local seed = H.seed("compat pack")
      math.randomseed(seed)
      for _ = 1, 20000 do
        local x = (math.random() - 0.5) * 2 ^ math.random(-155, 130)
        local bytes = H.pack("<f", x)
        assert.equal(bytes, H.pack_lua("<f", x))
        assert.equal(H.unpack("<f", bytes), (H.unpack_lua("<f", bytes)))
      end
    end
  end)
end)
