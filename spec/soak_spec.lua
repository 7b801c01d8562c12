-- A short soak: random operations, reloads, world checks against a shadow
-- scene (the long run is `lua5.4 examples/soak.lua --frames 1000000`).
local H = require "spec.helper"

describe("examples/soak.lua", function()
  it("keeps every checked world matrix right across reloads", function()
    local cmd = ("LUA_PATH_5_4='%s' LUA_CPATH_5_4='%s' lua5.4 %sexamples/soak.lua --frames 6000 "
      .. "--report 1000 --reload 2000 --seed %d 2>&1"):format(package.path, package.cpath, H.root,
      math.random(1, 1 << 30))
    local p = io.popen(cmd)
    local text = p:read("*a")
    p:close()
    local frames, reloads, checks, mismatches = text:match(
      "soak: (%d+) frames in [%d.]+ s, (%d+) reloads, (%d+) world checks, (%d+) mismatches")
    assert.truthy(frames, text)
    assert.equal("6000", frames)
    assert.equal("3", reloads)
    assert.is_true(tonumber(checks) >= 50, text)
    assert.equal("0", mismatches, text)
  end)
end)
