-- The main demo runs end to end on the bundled models (small settings).
local H = require "spec.helper"

describe("examples/demo.lua", function()
  it("runs the pipeline, prints the stage table and writes both pictures", function()
    local out_dir = os.tmpname()
    os.remove(out_dir)
    local cmd = ("LUA_PATH_5_4='%s' LUA_CPATH_5_4='%s' lua5.4 %sexamples/demo.lua --frames 130 "
      .. "--characters 24 --threads 2 --out %s 2>/dev/null"):format(package.path, package.cpath, H.root, out_dir)
    local p = io.popen(cmd)
    local text = p:read("a")
    local ok = p:close()
    assert.is_true(ok, text)
    assert.truthy(text:find("24 characters (14 Fox, 10 CesiumMan)", 1, true), text)
    for _, stage in ipairs({ "advance players", "sample + blend", "local to model", "scene update",
                             "palettes", "skinning" }) do
      assert.truthy(text:match(stage:gsub("%+", "%%+") .. "%s+[%d.]+%s+[%d.]+"), stage)
    end
    local f = assert(io.open(out_dir .. "/crowd-top.png", "rb"))
    local png = f:read("a")
    f:close()
    assert.equal("\137PNG\r\n\26\n", png:sub(1, 8))
    assert.equal(1024, string.unpack(">I4", png, 17))
    f = assert(io.open(out_dir .. "/contact-sheet.svg"))
    local svg = f:read("a")
    f:close()
    local cells = 0
    for _ in svg:gmatch("<text") do cells = cells + 1 end
    assert.equal(16, cells)                       -- 8 times of each model (130 frames > 2 s)
    assert.truthy(select(2, svg:gsub("<polygon", "")) > 1000)
    os.execute("rm -rf '" .. out_dir .. "'")
  end)

  it("refuses bad options", function()
    local p = io.popen(("lua5.4 %sexamples/demo.lua --frames x 2>&1"):format(H.root))
    local text = p:read("a")
    local ok = p:close()
    assert.is_falsy(ok)
    assert.truthy(text:find("needs a number", 1, true), text)
  end)
end)
