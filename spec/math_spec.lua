-- limber.math against the independent plain-Lua references of spec/helper.lua,
-- on random transforms.
local H = require "spec.helper"
local lmath = require "limber.math"

describe("limber.math", function()
  H.seed("math")

  it("trs_matrix and mul agree with the reference on random transforms", function()
    for _ = 1, 200 do
      local t, q, s = H.rand_trs(true)
      local m = lmath.trs_matrix(t, q, s)
      assert.near(H.trs(t, q, s), m, 1e-12)
      local t2, q2, s2 = H.rand_trs(true)
      local m2 = H.trs(t2, q2, s2)
      assert.near(H.mul(m, m2), lmath.mul(m, m2), 1e-9)
    end
  end)

  it("fills and returns an out table", function()
    local out = { "stale" }
    local m = lmath.trs_matrix({ 1, 2, 3 }, { 0, 0, 0, 1 }, { 1, 1, 1 }, out)
    assert.are.equal(out, m)
    assert.are.same({ 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 2, 3, 1 }, m)
    local p = {}
    assert.are.equal(p, lmath.mul(m, m, p))
    assert.are.same({ 2, 4, 6 }, { p[13], p[14], p[15] })
  end)

  it("decompose inverts trs_matrix, reflections and zero scales included", function()
    for _ = 1, 200 do
      local t, q, s = H.rand_trs(true)
      if math.random() < 0.2 then s[1] = -s[1] end
      if math.random() < 0.1 then s[2] = 0 end
      local m = lmath.trs_matrix(t, q, s)
      local t2, q2, s2 = lmath.decompose(m)
      assert.near(m, lmath.trs_matrix(t2, q2, s2), 1e-9)
      assert.near(1, q2[1] ^ 2 + q2[2] ^ 2 + q2[3] ^ 2 + q2[4] ^ 2, 1e-12)
    end
  end)

  it("refuses bad arguments, naming the function and the argument", function()
    local function bad(msg, f, ...)
      local ok, err = pcall(f, ...)
      assert.is_false(ok)
      assert.truthy(err:find(msg, 1, true), err)
    end
    bad("bad argument #3 to 'limber.math.trs_matrix' (table of 3 finite numbers expected, got table)",
      lmath.trs_matrix, { 0, 0, 0 }, { 0, 0, 0, 1 }, { 1, 0 / 0, 1 })
    bad("bad argument #4 to 'limber.math.trs_matrix' (table or nil expected, got string)",
      lmath.trs_matrix, { 0, 0, 0 }, { 0, 0, 0, 1 }, { 1, 1, 1 }, "out")
    local m = lmath.trs_matrix({ 0, 0, 0 }, { 0, 0, 0, 1 }, { 1, 1, 1 })
    bad("bad argument #3 to 'limber.math.mul' (a table other than a and b expected, got table)",
      lmath.mul, m, m, m)
    bad("bad argument #1 to 'limber.math.decompose' (table of 16 finite numbers expected, got table)",
      lmath.decompose, { 1, 2 })
    local nan = {}
    for k = 1, 16 do nan[k] = 1e300 end
    bad("limber.math.decompose: the matrix has no finite scale and rotation", lmath.decompose, nan)
  end)
end)
