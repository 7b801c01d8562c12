-- The demo's software rasteriser and PNG writer.
local core = require "limber.core"

-- Decodes our own PNG output (stored deflate blocks) back to rows of RGB,
-- checking signature, chunk CRCs and the Adler-32 on the way.
local function crc32(s)
  local crc = 0xFFFFFFFF
  for i = 1, #s do
    crc = crc ~ s:byte(i)
    for _ = 1, 8 do
      crc = (crc & 1) == 1 and (0xEDB88320 ~ (crc >> 1)) or (crc >> 1)
    end
  end
  return crc ~ 0xFFFFFFFF
end

local function decode(png)
  assert.equal("\137PNG\r\n\26\n", png:sub(1, 8))
  local pos, w, h, idat = 9, nil, nil, {}
  while pos <= #png do
    local len, typ = string.unpack(">I4c4", png, pos)
    local data = png:sub(pos + 8, pos + 7 + len)
    local crc = string.unpack(">I4", png, pos + 8 + len)
    assert.equal(crc32(typ .. data), crc)
    if typ == "IHDR" then w, h = string.unpack(">I4I4", data) end
    if typ == "IDAT" then idat[#idat + 1] = data end
    pos = pos + 12 + len
  end
  local z = table.concat(idat)
  local raw, p = {}, 3
  repeat
    local final = z:byte(p)
    local n = string.unpack("<I2", z, p + 1)
    raw[#raw + 1] = z:sub(p + 5, p + 4 + n)
    p = p + 5 + n
  until final == 1
  raw = table.concat(raw)
  local a, b = 1, 0
  for i = 1, #raw do a = (a + raw:byte(i)) % 65521; b = (b + a) % 65521 end
  assert.equal((b << 16) | a, string.unpack(">I4", z, p))
  return w, h, raw
end

describe("image", function()
  local view = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1 }

  it("fills triangles with a depth test and encodes a valid PNG", function()
    local img = core.image(40, 30)
    img:clear({ 10, 20, 30 })
    -- far red square, near green triangle on top of part of it
    img:triangles({ 0, 0, 5, 40, 0, 5, 40, 30, 5, 0, 0, 5, 40, 30, 5, 0, 30, 5 }, nil, view,
      { 255, 0, 0 }, { 0, 0, 1 })
    img:triangles({ 10, 5, 1, 30, 5, 1, 20, 25, 1 }, nil, view, { 0, 255, 0 }, { 0, 0, 1 })
    -- a farther blue triangle must stay hidden behind the green one
    img:triangles({ 10, 5, 3, 30, 5, 3, 20, 25, 3 }, nil, view, { 0, 0, 255 }, { 0, 0, 1 })
    assert.same({ 0, 255, 0 }, { img:pixel(20, 10) })
    assert.same({ 255, 0, 0 }, { img:pixel(3, 28) })
    local w, h, raw = decode(img:png())
    assert.equal(40, w) assert.equal(30, h)
    assert.equal(30 * (40 * 3 + 1), #raw)
    for _, xy in ipairs({ { 20, 10 }, { 3, 28 }, { 39, 1 } }) do
      local x, y = xy[1], xy[2]
      local o = (y - 1) * (40 * 3 + 1) + 1 + (x - 1) * 3 + 1
      assert.same({ img:pixel(x, y) }, { raw:byte(o, o + 2) })
    end
  end)

  it("draws lines on top and checks its arguments", function()
    local img = core.image(10, 10)
    img:lines({ 0.5, 0.5, 0, 9.5, 0.5, 0 }, view, { 255, 255, 255 })
    assert.same({ 255, 255, 255 }, { img:pixel(5, 1) })
    assert.same({ 0, 0, 0 }, { img:pixel(5, 5) })
    assert.error_matches(function() core.image(0, 5) end, "width out of range", 1, true)
    assert.error_matches(function() img:lines({ 1, 2 }, view, { 1, 1, 1 }) end, "multiple of 3", 1, true)
    assert.error_matches(function() img:lines({ 1, 2, 3 }, view, { 1, 1, 900 }) end, "color must be", 1, true)
    local pts = core.buffer("f32", 3, { 0, 0, 0, 1, 0, 0, 0, 1, 0 })
    assert.error_matches(function() img:triangles(pts, core.buffer("u32", 1, { 0, 1, 3 }), view, { 1, 1, 1 }) end,
      "index 3 = 3 is not below the vertex count 3", 1, true)
    -- base: indices address the vertices after an offset
    local img2 = core.image(10, 10)
    local two = core.buffer("f32", 3, { 0, 0, 0, 0, 0, 0, 0, 0, 0,  0, 0, 0, 10, 0, 0, 0, 10, 0 })
    img2:triangles(two, core.buffer("u32", 1, { 0, 1, 2 }), view, { 50, 60, 70 }, { 0, 0, 1 }, 3)
    assert.same({ 50, 60, 70 }, { img2:pixel(2, 2) })
    assert.error_matches(function() img2:triangles(two, core.buffer("u32", 1, { 0, 1, 3 }), view,
      { 1, 1, 1 }, nil, 3) end, "is not below the vertex count 3", 1, true)
    assert.error_matches(function() img2:triangles(two, nil, view, { 1, 1, 1 }, nil, 7) end,
      "base 7 out of range [0, 6]", 1, true)
    assert.error_matches(function() img:pixel(11, 1) end, "x index 11 out of range [1, 10]", 1, true)
  end)
end)
