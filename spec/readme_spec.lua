-- The README's tour is real code: run it and check what it computes.
local H = require "spec.helper"

describe("README tour", function()
  it("runs as written and its results are right", function()
    local f = assert(io.open(H.root .. "README.md"))
    local text = f:read("*a")
    f:close()
    local tour = text:match("## A short tour.-```lua\n(.-)```")
    assert.truthy(tour, "README has a Lua block in 'A short tour'")
    tour = tour:gsub('"examples/assets/', '"' .. H.assets)
    local printed = {}
    local env = setmetatable({ print = function(...) printed[#printed + 1] = select("#", ...) end },
      { __index = _G })
    -- the tour's locals the frame plan's block uses
    env.export = function(pose, clips, palette) env.pose, env.clips, env.palette = pose, clips, palette end
    local chunk = assert(H.load(tour .. "\nexport(pose, clips, palette)"
      .. "\nreturn #bytes, size, sc:world(hat), pose:model(7, "
      .. "pose:skeleton():find('b_Head_05')), #order", "=README", "t", env))
    local nbytes, size, hat, head, nidx = chunk()
    assert.equal(100 * 1728 * 3 * 4, nbytes)
    assert.equal(100 * 24 * 16 * 4, size)
    assert.equal(1728, nidx)
    -- the hero node only moves by (2, 0, 0): the hat sits on the head joint of instance 7
    assert.near({ head[13] + 2, head[14], head[15] }, { hat[13], hat[14], hat[15] }, 1e-3)
    assert.equal(2, #printed)
    -- the frame plan's block runs in the same state (pose, clips, palette of the tour)
    local plan_block = text:match("%*%*One call per frame for a whole crowd.-```lua\n(.-)```")
    assert.truthy(plan_block, "README has the frame plan's Lua block")
    env.limber = require "limber" -- a local of the tour's chunk
    local run = assert(H.load(plan_block .. "\nreturn plan", "=README plan", "t", env))
    local plan = run()
    assert.equal(100, plan:evaluated()) -- the first run evaluates every instance
    -- the fades moved by dt / fade time in that run
    assert.near(1 / 60 / 0.3, plan:weight(7, "base", 2), 1e-6)
    assert.near(1 - 1 / 60 / 0.3, plan:weight(7, "base", 1), 1e-6)
    assert.equal(4, (plan:lod(42)))
    assert.equal(0, plan:run(0)) -- nothing changed since: nothing evaluated
    -- the controller's block: three sources after an interrupted fade
    local ctl_block = text:match("%*%*Transitions that never pop.-```lua\n(.-)```")
    assert.truthy(ctl_block, "README has the controller's Lua block")
    local said
    local said_all = {}
    env.print = function(...) said_all[#said_all + 1] = { ... } end
    assert(H.load(ctl_block, "=README controller", "t", env))()
    said = said_all[1]
    assert.equal(3, said[1])
    assert.equal(5, #said)
    assert.same({ "move" }, said_all[2])
    assert.same({ 100, 0 }, said_all[3]) -- every fox's root motion; no events yet
    -- the packed clips' block: what it prints is what its comment says
    local pack_block = text:match("%*%*Clips a game can afford.-```lua\n(.-)```")
    assert.truthy(pack_block, "README has the packed clips' Lua block")
    pack_block = pack_block:gsub('"examples/assets/', '"' .. H.assets)
    local shown
    env.gltf, env.anim = env.limber.gltf, env.limber.anim
    env.print = function(...) shown = { ... } end
    assert(H.load(pack_block, "=README pack", "t", env))()
    assert.equal(26176, shown[1])
    assert.truthy(shown[2] < 5000, shown[2])
    assert.truthy(shown[3] > 0 and shown[3] <= 0.02, shown[3])
    -- morph targets: what it prints is what its comment says, and instance 2
    -- (inflate at 1, top at 0.5) moved while instance 1 (inflate at 0.2) less
    local morph_block = text:match("%*%*Morph targets%*%*.-```lua\n(.-)```")
    assert.truthy(morph_block, "README has the morph targets' Lua block")
    morph_block = morph_block:gsub('"examples/assets/', '"' .. H.assets)
    env.skinning = env.limber.skinning
    assert(H.load(morph_block .. "\nreturn mout", "=README morph", "t", env))()
    assert.same({ 3, 7653 }, { shown[1], shown[2] })
    -- IK: instance 7's left foot reaches the target; the head turns 80 % of
    -- the way (limited to 1.2 rad)
    local ik_block = text:match("%*%*Inverse kinematics%*%*.-```lua\n(.-)```")
    assert.truthy(ik_block, "README has the IK Lua block")
    assert(H.load(ik_block, "=README ik", "t", env))()
    local foot = env.pose:model(7, env.pose:skeleton():find("b_LeftFoot01_017"))
    local hip = env.pose:model(7, env.pose:skeleton():find("b_LeftLeg01_015"))
    local reach = math.sqrt((7 - hip[13]) ^ 2 + (20 - hip[14]) ^ 2 + (-20 - hip[15]) ^ 2)
    local d = math.sqrt((foot[13] - 7) ^ 2 + (foot[14] - 20) ^ 2 + (foot[15] + 20) ^ 2)
    assert.truthy(reach < 36, reach) -- within the leg's reach (about 37)
    assert.truthy(d < 1e-2, d)
    -- the same solvers as a plan stage: the plan's palettes see the foot
    -- on the target, and the head's target follows a scene node
    local plan_ik = text:match("In a frame plan the same solvers.-```lua\n(.-)```")
    assert.truthy(plan_ik, "README has the plan IK Lua block")
    env.scene = env.limber.scene.new()
    env.door_handle = env.scene:create({ translation = { 0, 70, 100 } })
    env.node7 = env.scene:create({})
    env.scene:update()
    env.dt = 1 / 60
    -- (every model matrix written, to read the foot's)
    local n
    plan_ik, n = plan_ik:gsub("palettes = { palette }", 'palettes = { palette }, models = "all"')
    assert.equal(1, n)
    local ikplan = assert(H.load(ik_block .. "\n" .. plan_ik .. "\nreturn plan", "=README plan ik",
      "t", env))()
    local t, w = ikplan:ik(2, 7)
    assert.same({ { 0, 70, 100 }, 1 }, { t, w })
    foot = env.pose:model(7, env.pose:skeleton():find("b_LeftFoot01_017"))
    hip = env.pose:model(7, env.pose:skeleton():find("b_LeftLeg01_015"))
    reach = math.sqrt((7 - hip[13]) ^ 2 + (20 - hip[14]) ^ 2 + (-20 - hip[15]) ^ 2)
    assert.truthy(reach < 36, reach)
    d = math.sqrt((foot[13] - 7) ^ 2 + (foot[14] - 20) ^ 2 + (foot[15] + 20) ^ 2)
    assert.truthy(d < 1e-2, d)
    assert.truthy(ikplan:timings().ik > 0)
  end)
end)
