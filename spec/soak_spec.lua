-- A short soak: random operations, reloads, world checks against a shadow
-- scene (the long run is `lua5.4 examples/soak.lua --frames 1000000`), under
-- this run's interpreter.
local H = require "spec.helper"

describe("examples/soak.lua", function()
  it("keeps every checked world matrix right across reloads", function()
    local _, text = H.run(H.example("soak.lua", ("--frames 6000 --report 1000 --reload 2000 "
      .. "--seed %d"):format(math.random(1, 2 ^ 30))))
    local frames, reloads, checks, mismatches = text:match(
      "soak: (%d+) frames in [%d.]+ s, (%d+) reloads, (%d+) world checks, (%d+) mismatches")
    assert.truthy(frames, text)
    assert.equal("6000", frames)
    assert.equal("3", reloads)
    assert.is_true(tonumber(checks) >= 50, text)
    assert.equal("0", mismatches, text)
  end)
end)
