-- State machines and blend spaces stepped in C for the whole crowd (issue
-- 18, "players in C": limber.core.machine_def, blend_space, machines):
-- blend-space weights against plain-Lua formulas (1D: linear between
-- neighbours; 2D: barycentric in the controller's triangulation, the
-- nearest hull edge outside) on random spaces; a step's reports against a
-- plain-Lua reading of every transition's conditions (parameters, triggers,
-- clip ends and phases after a plan run, markers left to the caller) on
-- random machines, parameters and sources; dirty tracking (only what
-- changed or waits on time is looked at); spaces that follow their
-- parameter (weights and synced rates in the plan, the run kept for events);
-- a controller driven by the C step against one whose every instance is
-- moved in plain Lua; and refusals that leave everything unchanged.
local H = require "spec.helper"
local limber = require "limber"
local gltf = require "limber.gltf"
local controller = require "limber.controller"

H.seed("machines")

local core = limber.core

local fox
local function fox_parts()
  if not fox then
    local a = gltf.load(H.assets .. "Fox/Fox.glb", { tolerance = 0 })
    local clips = {}
    for _, an in ipairs(a.animations) do clips[#clips + 1] = an.clips[1] end
    fox = { skel = a.skeletons[1].skeleton, clips = clips }
  end
  return fox.skel, fox.clips
end

-- ---- plain-Lua blend-space weights ---------------------------------------------

local function weights_1d(at, x)
  local w = {}
  for k = 1, #at do w[k] = 0 end
  if x <= at[1] then
    w[1] = 1
  elseif x >= at[#at] then
    w[#at] = 1
  else
    for k = 1, #at - 1 do
      if x >= at[k] and x < at[k + 1] then
        local f = (x - at[k]) / (at[k + 1] - at[k])
        w[k], w[k + 1] = 1 - f, f
      end
    end
  end
  return w
end

local function barycentric(a, b, c, x, y)
  local det = (b[2] - c[2]) * (a[1] - c[1]) + (c[1] - b[1]) * (a[2] - c[2])
  local l1 = ((b[2] - c[2]) * (x - c[1]) + (c[1] - b[1]) * (y - c[2])) / det
  local l2 = ((c[2] - a[2]) * (x - c[1]) + (a[1] - c[1]) * (y - c[2])) / det
  return l1, l2, 1 - l1 - l2
end

local function weights_2d(pts, tris, edges, x, y)
  local w = {}
  for k = 1, #pts do w[k] = 0 end
  for k = 1, #pts do
    if pts[k][1] == x and pts[k][2] == y then w[k] = 1; return w end
  end
  for _, t in ipairs(tris) do
    local l1, l2, l3 = barycentric(pts[t[1]], pts[t[2]], pts[t[3]], x, y)
    if l1 >= -1e-9 and l2 >= -1e-9 and l3 >= -1e-9 then
      l1, l2, l3 = math.max(l1, 0), math.max(l2, 0), math.max(l3, 0)
      local s = l1 + l2 + l3
      w[t[1]], w[t[2]], w[t[3]] = l1 / s, l2 / s, l3 / s
      return w
    end
  end
  local best
  for _, e in ipairs(edges) do
    local a, b = pts[e[1]], pts[e[2]]
    local dx, dy = b[1] - a[1], b[2] - a[2]
    local len2 = dx * dx + dy * dy
    local t = len2 > 0 and ((x - a[1]) * dx + (y - a[2]) * dy) / len2 or 0
    t = math.min(math.max(t, 0), 1)
    local px, py = a[1] + t * dx - x, a[2] + t * dy - y
    local d2 = px * px + py * py
    if not best or d2 < best[1] then best = { d2, e[1], e[2], t } end
  end
  if not best then w[1] = 1; return w end
  w[best[2]], w[best[3]] = 1 - best[4], best[4]
  return w
end

local function near(a, b, tol)
  assert.are.equal(#a, #b)
  for k = 1, #a do
    if math.abs(a[k] - b[k]) > tol then
      error(("entry %d: %.17g against %.17g"):format(k, a[k], b[k]), 2)
    end
  end
end

describe("limber.core.blend_space", function()
  it("gives 1D weights as the plain-Lua formula on random spaces", function()
    for _ = 1, 200 do
      local n, at, durs = math.random(1, 8), {}, {}
      for k = 1, n do at[k] = H.rand(-5, 5); durs[k] = H.rand(0, 3) end
      table.sort(at)
      local dup = false
      for k = 2, n do dup = dup or at[k] == at[k - 1] end
      if not dup then
        local sp = core.blend_space({ dims = 1, at = at, durations = durs })
        for _ = 1, 20 do
          local x = math.random() < 0.2 and at[math.random(n)] or H.rand(-7, 7)
          near(sp:weights(x), weights_1d(at, x), 1e-12)
        end
        near(sp:weights(math.huge), weights_1d(at, math.huge), 0)
      end
    end
  end)

  it("gives 2D weights as the plain-Lua formula over the controller's triangulation", function()
    for _ = 1, 100 do
      local n, points, pts = math.random(1, 9), {}, {}
      for k = 1, n do
        pts[k] = { math.floor(H.rand(-4, 4) * 4) / 4, math.floor(H.rand(-4, 4) * 4) / 4 }
        points[k] = { clip = 1, at = pts[k] }
      end
      local ok, space = pcall(controller.blend2d, points)
      if ok then -- (two points at one place are refused)
        local at, durs = {}, {}
        for k, p in ipairs(space.points) do at[k] = { p.at[1], p.at[2] }; durs[k] = 1 end
        local sp = core.blend_space({ dims = 2, at = at, durations = durs, tris = space.tris,
                                      edges = space.edges })
        for _ = 1, 30 do
          local x, y = H.rand(-6, 6), H.rand(-6, 6)
          if math.random() < 0.2 then local p = at[math.random(#at)]; x, y = p[1], p[2] end
          local w = sp:weights(x, y)
          near(w, weights_2d(at, space.tris, space.edges, x, y), 1e-12)
          local s = 0
          for k = 1, #w do s = s + w[k] end
          assert.is_true(math.abs(s - 1) < 1e-9)
        end
      end
    end
  end)

  it("refuses bad spaces by name", function()
    local function refuses(desc, what)
      local ok, err = pcall(core.blend_space, desc)
      assert.is_false(ok)
      assert.matches("limber.core.blend_space", err, 1, true)
      assert.matches(what, err, 1, true)
    end
    refuses({ dims = 3, at = { 0 }, durations = { 1 } }, "dims")
    refuses({ dims = 1, at = {}, durations = {} }, "empty")
    refuses({ dims = 1, at = { 1, 0 }, durations = { 1, 1 } }, "not after")
    refuses({ dims = 1, at = { 0, 0 / 0 }, durations = { 1, 1 } }, "finite")
    refuses({ dims = 1, at = { 0, 1 }, durations = { 1 } }, "one entry per point")
    refuses({ dims = 1, at = { 0 }, durations = { -1 } }, ">= 0")
    refuses({ dims = 2, at = { { 0, 0 } }, durations = { 1 }, tris = { { 1, 1, 2 } }, edges = {} },
      "point")
    local many = {}
    for k = 1, 17 do many[k] = k end
    refuses({ dims = 1, at = many, durations = many }, "more than 16")
  end)
end)

-- ---- a step against a plain-Lua reading ------------------------------------------

local OPS = { "<", "<=", ">", ">=", "==", "~=" }
local FN = {
  ["<"] = function(a, b) return a < b end, ["<="] = function(a, b) return a <= b end,
  [">"] = function(a, b) return a > b end, [">="] = function(a, b) return a >= b end,
  ["=="] = function(a, b) return a == b end, ["~="] = function(a, b) return a ~= b end,
}
local P = 5 -- parameters

local function random_value()
  local r = math.random()
  if r < 0.3 then return math.random() < 0.5 end
  if r < 0.5 then return math.random(-2, 2) + 0.0 end
  return H.rand(-2, 2)
end

local function random_def(S)
  local states = {}
  for s = 1, S do
    local trs = {}
    for t = 1, math.random(0, 4) do
      local when = {}
      for c = 1, math.random(0, 3) do
        when[c] = { math.random(P), OPS[math.random(#OPS)], random_value() }
      end
      trs[t] = { to = math.random(S), when = when,
                 trigger = math.random() < 0.25 and math.random(P) or nil,
                 at_end = math.random() < 0.25,
                 at_phase = math.random() < 0.25 and math.random() or nil,
                 at_marker = math.random() < 0.15 }
    end
    local timed = false
    for _, tr in ipairs(trs) do timed = timed or tr.at_end or tr.at_phase ~= nil or tr.at_marker end
    states[s] = { transitions = trs, timed = timed }
  end
  return states
end

-- Whether transition tr holds (all but its marker), read in plain Lua from
-- the parameters and the plan's source (k, t, rate, loop, w, prev) after a
-- step of dt; duration d of the source's clip.
local function ref_holds(tr, params, src, d, dt)
  for _, c in ipairs(tr.when) do
    local v = params[c[1]]
    if v == nil or type(v) ~= type(c[3]) then return false end
    local a, b = v, c[3]
    if type(v) == "boolean" then a, b = v and 1 or 0, c[3] and 1 or 0 end
    if not FN[c[2]](a, b) then return false end
  end
  if tr.trigger and params[tr.trigger] ~= true then return false end
  if tr.at_end or tr.at_phase then
    if not src or dt == 0 then return false end
    local _, t, rate, loop, _, prev = H.tunpack(src)
    if d <= 0 then return tr.at_end end
    local p0, p1 = prev / d, loop and prev / d + rate * dt / d or t / d
    if tr.at_end then
      if loop then
        if math.floor(p1) == math.floor(p0) then return false end
      elseif not (p1 >= 1 and p0 < 1) and not (rate < 0 and p1 <= 0 and p0 > 0) then
        return false
      end
    end
    if tr.at_phase then
      local a, b = math.min(p0, p1), math.max(p0, p1)
      local q = math.floor(a) + tr.at_phase
      if q <= a then q = q + 1 end
      if q > b then return false end
    end
  end
  return true
end

local function crowd(N, S)
  local skel, clips = fox_parts()
  local pose = limber.pose(skel, N)
  local plan = limber.plan({ pose = pose, clips = clips,
    layers = { { sources = S }, { sources = S, mode = "additive" } } })
  return plan, clips
end

describe("limber.core.machines", function()
  it("reports the transitions a plain-Lua reading finds, on random machines", function()
    local N, L, S = 24, 2, 3
    local seen = { pos = 0, neg = 0, timed = 0 }
    local function covered() return seen.pos > 50 and seen.neg > 5 and seen.timed > 5 end
    -- 25 random crowds, and more until every kind of report was reached
    -- (some seeds' machines rarely put a marker transition first)
    local rounds = 0
    while rounds < 25 or (not covered() and rounds < 400) do
      rounds = rounds + 1
      local plan, clips = crowd(N, S)
      local ms = core.machines(plan)
      local nstates = math.random(1, 4)
      local states = random_def(nstates)
      local def = core.machine_def({ states = states })
      assert.are.equal(nstates, def:state_count())
      local runs, params = {}, {}
      for i = 1, N do
        params[i] = {}
        for p = 1, P do
          if math.random() < 0.8 then
            params[i][p] = random_value()
            ms:set_param(i, p, params[i][p])
          end
        end
        for n = 1, L do
          for s = 1, S do
            plan:play(i, n, s, math.random(#clips), H.rand(0, 4), H.rand(-2, 2) * (math.random() < 0.1 and 0 or 1),
              math.random() < 0.7)
          end
          if math.random() < 0.8 then
            local st, slot = math.random(nstates), math.random() < 0.8 and math.random(S) or nil
            ms:set_run(i, n, def, st, slot)
            runs[(i - 1) * L + n] = { st = st, slot = slot }
          end
        end
      end
      local out = {}
      for step = 1, 3 do
        local dt = math.random() < 0.1 and 0 or H.rand(-0.5, 0.5)
        plan:run(dt)
        local count = ms:step(dt, out)
        -- the reference: the first transition that holds, for the runs
        -- that are looked at (all after set_run; then only timed states)
        local want = {}
        for key = 1, N * L do
          local r = runs[key]
          if r and (step == 1 or states[r.st].timed) then
            local i, n = math.floor((key - 1) / L) + 1, (key - 1) % L + 1
            local src, d
            if r.slot then
              src = { plan:source(i, n, r.slot) }
              d = clips[src[1]]:duration()
            end
            for t, tr in ipairs(states[r.st].transitions) do
              if ref_holds(tr, params[i], src, d, dt) then
                want[#want + 1] = { key, tr.at_marker and -t or t }
                seen[tr.at_marker and "neg" or "pos"] = seen[tr.at_marker and "neg" or "pos"] + 1
                if (tr.at_end or tr.at_phase) and step > 1 then seen.timed = seen.timed + 1 end
                break
              end
            end
          end
        end
        assert.are.equal(#want, count)
        for k, w in ipairs(want) do
          assert.are.same(w, { out[2 * k - 1], out[2 * k] })
        end
      end
    end
    -- (the random cases reach every kind of report)
    assert.is_true(covered(), ("reports seen: %d, at a marker %d, timed %d, in %d crowds")
      :format(seen.pos, seen.neg, seen.timed, rounds))
  end)

  it("looks at a run again when a parameter changes, not before", function()
    local plan = crowd(4, 2)
    local ms = core.machines(plan)
    local def = core.machine_def({ states = {
      { transitions = { { to = 2, when = { { 1, ">", 0.5 } } } } },
      { transitions = { { to = 1, trigger = 2 } } } } })
    ms:set_run(3, 1, def, 1, 1)
    local out = {}
    plan:run(0.1)
    assert.are.equal(0, ms:step(0.1, out)) -- looked at (entered): nothing holds
    ms:set_param(3, 1, 1) -- holds now
    assert.are.equal(1, ms:step(0.1, out))
    assert.are.same({ 5, 1 }, { out[1], out[2] })
    assert.are.equal(0, ms:step(0.1, out)) -- not looked at again until something changes
    ms:set_param(3, 1, 2, true) -- quiet: not looked at
    assert.are.equal(0, ms:step(0.1, out))
    ms:touch(3, 1)
    assert.are.equal(1, ms:step(0.1, out))
    ms:set_run(3, 1, def, 2, 1) -- the trigger state
    ms:set_param(3, 2, false)
    assert.are.equal(0, ms:step(0.1, out))
    ms:set_param(3, 2, true)
    assert.are.equal(1, ms:step(0.1, out))
    assert.are.same({ 5, 1 }, { out[1], out[2] })
    assert.is_true(ms:param(3, 2))
    assert.is_nil(ms:param(3, 5))
    assert.are.same({ 2, 1 }, { ms:run(3, 1) })
    ms:set_run(3, 1, nil)
    assert.is_nil(ms:run(3, 1))
    assert.are.equal(0, ms:step(0.1, out))
  end)

  it("moves a space that follows its parameter, keeping what the run played", function()
    local plan, clips = crowd(3, 3)
    local ms = core.machines(plan)
    local durs = { clips[1]:duration(), clips[2]:duration(), clips[3]:duration() }
    local at = { 0, 1, 2.5 }
    local space = core.blend_space({ dims = 1, at = at, durations = durs, sync = true })
    local def = core.machine_def({ states = { { space = true, params = { 4 }, smooth = 0 } } })
    for s = 1, 3 do plan:play(2, 1, s, s, 0.1 * s, 1, true) end
    ms:bind(2, 1, space, { 3, 1, 2 })
    ms:set_run(2, 1, def, 1)
    ms:set_param(2, 4, 1.75)
    plan:run(0.05)
    local before = {}
    for s = 1, 3 do before[s] = { plan:source(2, 1, s) } end
    local out = {}
    assert.are.equal(0, ms:step(0.05, out)) -- applied in C, nothing to report
    local w = weights_1d(at, 1.75)
    local D = 0
    for k = 1, 3 do D = D + w[k] * durs[k] end
    local slots = { 3, 1, 2 }
    for k = 1, 3 do
      local s = slots[k]
      local _, _, rate, _, weight = plan:source(2, 1, s)
      assert.is_true(math.abs(weight - w[k]) < 1e-6)
      assert.is_true(math.abs(rate - durs[k] / D) < 1e-6)
      -- the run as it played: kept
      assert.are.same(before[s], { ms:source(2, 1, s) })
    end
    assert.are.same({ 2 }, ms:kept())
    assert.are.equal(0, ms:step(0.05, out)) -- the same value: nothing moves, nothing kept
    assert.are.same({}, ms:kept())
    ms:set_param(2, 4, 0 / 0) -- NaN: as 0 (the first point's clip alone), as unset
    plan:run(0.05)
    ms:step(0.05, out)
    assert.are.equal(1, select(5, plan:source(2, 1, 3)))
    assert.are.equal(0, select(5, plan:source(2, 1, 1)))
    ms:set_param(2, 4, 1.75)
    plan:run(0.05)
    ms:step(0.05, out)
    -- a space synced by markers is reported, not applied
    ms:bind(2, 1, space, { 3, 1, 2 }, true)
    assert.are.equal(0, ms:step(0.05, out)) -- (not dirty)
    ms:set_param(2, 4, 0.5)
    assert.are.equal(1, ms:step(0.05, out))
    assert.are.same({ 3, 0 }, { out[1], out[2] })
    -- as the caller does: weights, no rates; it returns the seconds since
    -- the run's marker phase was set (0 while it has none)
    assert.are.equal(0, ms:apply(2, 1, 0.5, 0, 0))
    local _, _, rate = plan:source(2, 1, 3)
    assert.is_true(math.abs(rate - durs[1] / D) < 1e-6)
    assert.is_true(math.abs(select(5, plan:source(2, 1, 3)) - 0.5) < 1e-6)
    ms:set_marker(2, 1, 1, 0.5)
    local due = {}
    assert.are.equal(0, ms:markers(0.25, due)) -- (not due: 0.25 s of 1)
    assert.are.equal(0, ms:markers(0.5, due))
    assert.are.equal(0.75, ms:apply(2, 1, 0.5, 0, 0))
    assert.are.equal(1, ms:markers(0.25, due)) -- lands: 1 s reached
    assert.are.same({ (2 - 1) * 2 + 1, 2, 0.75 }, due) -- key (i - 1) * layers + n
    ms:set_marker(2, 1, 1, 0.5)
    assert.are.equal(0, ms:apply(2, 1, 0.5, 0, 0))
    ms:set_marker(2, 1, nil)
    assert.are.equal(0, ms:markers(5, due))
    assert.are.equal(0, ms:apply(2, 1, 0.5, 0, 0))
  end)

  it("refuses bad arguments by name and leaves the runs unchanged", function()
    local plan = crowd(2, 2)
    local ms = core.machines(plan)
    local def = core.machine_def({ states = { {}, {} } })
    local function refuses(what, f, ...)
      local ok, err = pcall(f, ...)
      assert.is_false(ok)
      assert.matches(what, err, 1, true)
    end
    refuses("instance index 3", ms.set_param, ms, 3, 1, 1)
    refuses("parameter index 4097", ms.set_param, ms, 1, 4097, 1)
    refuses("number or boolean", ms.set_param, ms, 1, 1, "x")
    refuses("layer index 3", ms.set_run, ms, 1, 3, def, 1)
    refuses("state index 3", ms.set_run, ms, 1, 1, def, 3)
    refuses("source index 3", ms.set_run, ms, 1, 1, def, 1, 3)
    refuses("limber.MachineDef", ms.set_run, ms, 1, 1, {}, 1)
    refuses("NaN", ms.apply, ms, 1, 1, 0 / 0, 0, 0)
    refuses("fade", ms.apply, ms, 1, 1, 0, 0, -1)
    refuses("finite", ms.step, ms, math.huge, {})
    local space = core.blend_space({ dims = 1, at = { 0, 1 }, durations = { 1, 1 } })
    refuses("one source per point", ms.bind, ms, 1, 1, space, { 1 })
    refuses("sources[2]", ms.bind, ms, 1, 1, space, { 1, 3 })
    assert.is_nil(ms:run(1, 1))
    assert.is_nil(ms:param(1, 1))
    local function bad_def(desc, what)
      local ok, err = pcall(core.machine_def, desc)
      assert.is_false(ok)
      assert.matches("limber.core.machine_def", err, 1, true)
      assert.matches(what, err, 1, true)
    end
    bad_def({ states = {} }, "empty")
    bad_def({ states = { { transitions = { { when = { { 1, "!", 1 } } } } } } }, "op")
    bad_def({ states = { { transitions = { { when = { { 0, "<", 1 } } } } } } }, "parameter")
    bad_def({ states = { { transitions = { { when = { { 1, "<", 0 / 0 } } } } } } }, "not valid")
    bad_def({ states = { { transitions = { { at_phase = 2 } } } } }, "at_phase")
    bad_def({ states = { { space = true, params = {} } } }, "params")
    bad_def({ states = { { space = true, params = { 1 }, smooth = -1 } } }, "smooth")
  end)

  it("takes extra arguments to its constructors without harm (found by the binding fuzzer)", function()
    local plan = crowd(2, 2)
    local co = coroutine.create(function() end)
    for _ = 1, 3 do
      local ms = core.machines(plan, co, {}, 1)
      local def = core.machine_def({ states = { { transitions = { { when = { { 1, "<", 1 } } } } } } },
        co, 2)
      local sp = core.blend_space({ dims = 1, at = { 0, 1 }, durations = { 1, 1 } }, co, {})
      ms:set_run(1, 1, def, 1)
      ms:bind(1, 2, sp, { 1, 2 })
      collectgarbage("collect")
      assert.are.same({ 1 }, { ms:run(1, 1) })
      assert.are.same({ 0, 1 }, sp:weights(1))
    end
  end)
end)

-- ---- the controller on the C step against plain-Lua stepping -------------------

describe("limber.controller's machines", function()
  it("move a crowd as the per-instance plain-Lua rules do", function()
    local skel, clips = fox_parts()
    local N = 40
    local ctl = controller.new({ pose = limber.pose(skel, N), clips = clips })
    local m = controller.machine({
      initial = "idle",
      states = { idle = { clip = "Survey" },
                 move = { space = { { clip = "Walk", at = 0 }, { clip = "Run", at = 1 } },
                          param = "speed", smooth = 0 },
                 stop = { clip = "Survey", loop = false, rate = 2 } },
      transitions = {
        { from = "idle", to = "move", when = { { "speed", ">", 0.2 } } },
        { from = "move", to = "stop", when = { { "speed", "<", 0.1 } } },
        { from = "stop", to = "idle", at_end = true },
        { from = "any", to = "idle", trigger = "reset", priority = 1 },
      } })
    local speed, state, since, pending = {}, {}, {}, {}
    for i = 1, N do
      speed[i] = math.random() < 0.5 and 0 or H.rand(0, 1.5)
      ctl:set(i, "speed", speed[i])
      ctl:set_machine(i, "base", m)
      state[i], since[i] = "idle", 0
    end
    local dt = 1 / 30
    local dur = clips[1]:duration() / 2 -- the stop state's clip at rate 2
    for f = 1, 240 do
      for _ = 1, 3 do
        local i = math.random(N)
        speed[i] = math.random() < 0.4 and 0 or H.rand(0, 1.5)
        ctl:set(i, "speed", speed[i])
      end
      if f % 50 == 0 then
        local i = math.random(N)
        ctl:trigger(i, "reset")
        pending[i] = true
      end
      ctl:update(dt)
      for i = 1, N do -- the plain-Lua rules, on what each instance was given
        since[i] = since[i] + dt
        local s = state[i]
        local to
        if pending[i] and s ~= "idle" then -- ("any" never re-enters idle: it waits)
          to, pending[i] = "idle", nil
        elseif s == "idle" and speed[i] > 0.2 then
          to = "move"
        elseif s == "move" and speed[i] < 0.1 then
          to = "stop"
        elseif s == "stop" and since[i] >= dur - 1e-9 then
          to = "idle"
        end
        if to then state[i], since[i] = to, 0 end
        assert.are.equal(state[i], ctl:state(i, "base"))
        if state[i] == "move" then -- the space at the speed, at once (smooth = 0)
          local w = weights_1d({ 0, 1 }, speed[i])
          local got = {}
          for _, e in ipairs(ctl:sources(i)) do
            if e.clip == clips[2] then got[1] = e.weight elseif e.clip == clips[3] then got[2] = e.weight end
          end
          if to == nil and since[i] > 0 then
            assert.is_true(math.abs((got[1] or 0) - w[1]) < 1e-6)
            assert.is_true(math.abs((got[2] or 0) - w[2]) < 1e-6)
          end
        end
      end
    end
  end)
end)

-- ---- root motion in C against plain-Lua sums over the sources ------------------

-- `count` random plays on a controller of N instances and L layers (C
-- clips): random fades, start times, rates in [-rate, rate + 1) (backward
-- too), looping with probability `loops`; some layer weights fading.
local function random_plays(ctl, count, N, L, C, rate, loops)
  for _ = 1, count do
    local i, layer = math.random(N), math.random(L)
    ctl:play(i, layer, math.random(C), { fade = math.random() < 0.5 and 0 or H.rand(0, 0.4),
      time = H.rand(0, 3), rate = H.rand(-rate, rate + 1), loop = math.random() < loops })
    if math.random() < 0.3 then ctl:set_weight(i, layer, math.random(), H.rand(0, 0.3)) end
  end
end

local function wrap_angle(a)
  return a - 2 * math.pi * math.floor((a + math.pi) / (2 * math.pi))
end

-- The plain-Lua rule: every override layer's source with effective weight
-- at the joint, its root's displacement over its step (anim's players'
-- unwrapped rule), summed by that weight.
local function ref_root(ctl, modes, i, joint, dt)
  local anim = require "limber.anim"
  local x, y, z, yaw = 0, 0, 0, 0
  if dt == 0 then return x, y, z, yaw end
  for _, e in ipairs(ctl:sources(i, joint)) do
    if modes[e.layer] == "override" and e.effective > 0 then
      local t0, delta = e.prev, e.loop and e.rate * dt or e.time - e.prev
      local d = e.clip:duration()
      local ax, ay, az, ayaw = anim._root_pos(e.clip, joint, t0, e.loop, d)
      local bx, by, bz, byaw = anim._root_pos(e.clip, joint, t0 + delta, e.loop, d)
      local w = e.effective
      x, y, z = x + w * (bx - ax), y + w * (by - ay), z + w * (bz - az)
      yaw = yaw + w * wrap_angle(byaw - ayaw)
    end
  end
  return x, y, z, yaw
end

describe("limber.controller root motion in C", function()
  it("equals the plain-Lua sums on random crowds, layers, masks and steps", function()
    local skel, clips = fox_parts()
    local N = 16
    local modes = { "override", "override", "additive" }
    local ctl = controller.new({ pose = limber.pose(skel, N), clips = clips, sources = 3,
      layers = { { name = "base" }, { name = "upper", mask = { root = "b_Spine01_02" } },
                 { name = "add", mode = "additive" } } })
    local J = skel:joint_count()
    local checked, moved = 0, 0
    for f = 1, 60 do
      random_plays(ctl, 6, N, 3, #clips, 2, 0.8)
      local dt = math.random() < 0.05 and 0 or (math.random() < 0.1 and H.rand(2, 9) or H.rand(-0.05, 0.1))
      ctl:update(dt)
      for _, joint in ipairs({ 3, 1, math.random(J) }) do -- (the Fox's hips: 3)
        local all = ctl:root_motions(joint)
        for i = 1, N do
          local got = { ctl:root_motion(i, joint) }
          local want = { ref_root(ctl, modes, i, joint, dt) }
          for c = 1, 4 do
            local tol = 1e-9 * (1 + math.abs(want[c]))
            if math.abs(got[c] - want[c]) > tol then
              error(("frame %d, instance %d, joint %d, component %d: %.17g against %.17g")
                :format(f, i, joint, c, got[c], want[c]))
            end
            local b = all:get(i)[c]
            if math.abs(b - got[c]) > 1e-6 * (1 + math.abs(got[c])) then
              error(("root_motions: instance %d component %d: %.9g against %.9g"):format(i, c, b, got[c]))
            end
          end
          if joint == 3 and dt ~= 0 then
            checked = checked + 1
            if got[1] ~= 0 or got[3] ~= 0 then moved = moved + 1 end
          end
        end
      end
    end
    assert.is_true(moved > checked / 2) -- (most of them move)
  end)

  it("reads the run as it played when a machine switches after it", function()
    local skel, clips = fox_parts()
    local ctl = controller.new({ pose = limber.pose(skel, 2), clips = clips })
    local m = controller.machine({ initial = "walk",
      states = { walk = { clip = "Walk" }, run = { clip = "Run", rate = 3 } },
      transitions = { { from = "walk", to = "run", trigger = "go" } } })
    ctl:set_machine(1, "base", m)
    ctl:update(0.1)
    ctl:trigger(1, "go")
    ctl:update(0.1) -- the run plays Walk; then the machine starts Run at once
    assert.are.equal("run", ctl:state(1, "base"))
    local got = { ctl:root_motion(1, 3) } -- (the Fox's hips)
    -- the same step of Walk as before (a looping clip at a steady rate: the
    -- same displacement up to where in the clip it is), not Run's
    assert.are.equal("Walk", clips[2]:name())
    local walk = { limber.anim._root_pos(clips[2], 3, 0.2, true, clips[2]:duration()) }
    local walk0 = { limber.anim._root_pos(clips[2], 3, 0.1, true, clips[2]:duration()) }
    for c = 1, 3 do assert.near(walk[c] - walk0[c], got[c], 1e-9) end
    assert.is_true(math.abs(got[3]) > 1) -- (the Fox walks along z, ~100 units tall)
    local ok, err = pcall(ctl.root_motion, ctl, 1, 0)
    assert.is_false(ok)
    assert.matches("bad argument #2 to 'limber.Controller:root_motion' (joint must be", err, 1, true)
    ok, err = pcall(ctl.root_motions, ctl, 1, limber.buffer("f32", 3, 2))
    assert.is_false(ok)
    assert.matches("bad argument #2 to 'limber.Controller:root_motions' (out must be", err, 1, true)
  end)
end)

-- ---- events in C against limber.anim.step over the sources ----------------------

describe("limber.controller events in C", function()
  it("equal limber.anim.step over every source, per instance and for the crowd, with per-layer thresholds", function()
    local anim = require "limber.anim"
    local skel, clips = fox_parts()
    local N = 12
    local ctl = controller.new({ pose = limber.pose(skel, N), clips = clips, sources = 3,
      event_weight = 0.05, -- and the upper layer its own
      layers = { { name = "base" },
                 { name = "upper", mask = { root = "b_Spine01_02" }, event_weight = 0.3 } } })
    local function random_events(clip)
      local d, ev = clip:duration(), {}
      for k = 1, math.random(0, 5) do
        local t = math.random() < 0.2 and (math.random() < 0.5 and 0 or d) or H.rand(0, d)
        ev[k] = { time = t, name = "e" .. math.random(3), data = math.random() < 0.5 and k or nil }
      end
      anim.set_events(clip, ev)
    end
    for _, c in ipairs(clips) do random_events(c) end
    local total = 0
    for f = 1, 80 do
      if f % 20 == 0 then random_events(clips[math.random(#clips)]) end -- (given to C again)
      random_plays(ctl, 5, N, 2, #clips, 3, 0.7)
      local dt = math.random() < 0.05 and 0 or (math.random() < 0.1 and H.rand(5, 40) or H.rand(-0.1, 0.2))
      ctl:update(dt)
      local all, at = ctl:crowd_events(), 1
      for i = 1, N do
        local want = {}
        if dt ~= 0 then
          for _, e in ipairs(ctl:sources(i)) do
            if e.effective > (e.layer == 2 and 0.3 or 0.05) then
              local delta = e.loop and e.rate * dt or e.time - e.prev
              anim.step(e.clip, e.prev, delta, e.loop, function(_, name, time, data)
                want[#want + 1] = { clip = e.clip:name(), name = name, time = time,
                                    weight = e.effective, data = data }
              end)
            end
          end
        end
        local got = ctl:events(i)
        assert.are.equal(#want, #got)
        for k, w in ipairs(want) do
          local g = got[k]
          assert.are.same({ w.clip, w.name, w.time, w.data }, { g.clip, g.name, g.time, g.data })
          assert.is_true(math.abs(w.weight - g.weight) < 1e-12)
          local c = all[at]
          at = at + 1
          assert.are.same({ i, w.clip, w.name, w.time, w.data }, { c.instance, c.clip, c.name, c.time, c.data })
          assert.is_true(c.layer == 1 or c.layer == 2)
        end
        total = total + #want
      end
      assert.are.equal(at - 1, #all)
    end
    assert.is_true(total > 100)
    for _, c in ipairs(clips) do anim.set_events(c, nil) end
  end)
end)

-- ---- bad input: refused by name, before anything changes ---------------------

describe("bad input to the machines in C and the controller's new reads", function()
  local function refuses(what, f, ...)
    local ok, err = pcall(f, ...)
    assert.is_false(ok)
    assert.matches(what, tostring(err), 1, true)
  end

  it("leaves a Machines object as it was", function()
    local plan, clips = crowd(2, 2)
    local ms = core.machines(plan)
    local d = clips[1]:duration()
    ms:set_events(1, { 0, d / 2 }, { 0, d / 2 })
    plan:play(1, 1, 1, 1, 0, 1, true)
    plan:run(d * 0.75)
    local out = {}
    local before = ms:events(0, out)
    assert.are.equal(1, before) -- the event at d / 2
    refuses("in time order", ms.set_events, ms, 1, { d / 2, 0 }, { d / 2, 0 })
    refuses("in the clip", ms.set_events, ms, 1, { 0, d * 2 }, { 0, d / 2 })
    refuses("as many as loop times", ms.set_events, ms, 1, { 0, d / 2 }, { 0 })
    refuses("clip index 4", ms.set_events, ms, 4, { 0 }, { 0 })
    assert.are.equal(before, ms:events(0, out)) -- the events given before still hold
    refuses("thresholds must be numbers >= 0", ms.events, ms, -1, out)
    refuses("thresholds must be numbers >= 0", ms.events, ms, { 0 }, out) -- one per layer: 2
    refuses("hi must be a finite number >= 0", ms.set_marker, ms, 1, 1, -1, 0)
    refuses("lo must be a finite number >= 0", ms.set_marker, ms, 1, 1, 1, 0 / 0)
    assert.are.equal(0, ms:markers(0.1, out)) -- nothing became synced
    refuses("dt must be finite", ms.markers, ms, math.huge, out)
    local frame = plan:frame()
    refuses("dt is not a finite float", ms.update, ms, 0 / 0, out)
    refuses("dt is not a finite float", ms.update, ms, 1e39, out)
    assert.are.equal(frame, plan:frame()) -- the plan did not run
    refuses("joint index 0", ms.root_motion, ms, 0, 1)
    refuses("out must be a writable f32 Buffer", ms.root_motions, ms, 1, limber.buffer("f32", 4, 3))
  end)

  it("leaves a controller as it was", function()
    local skel, clips = fox_parts()
    refuses("desc.layers[2].event_weight must be a number >= 0", controller.new,
      { pose = limber.pose(skel, 2), clips = clips,
        layers = { { name = "base" }, { name = "upper", event_weight = -1 } } })
    local ctl = controller.new({ pose = limber.pose(skel, 2), clips = clips })
    local m = controller.machine({ initial = "a", states = { a = { clip = "Walk" } } })
    ctl:set_machine(1, "base", m)
    for k = 1, 4095 do ctl:set(1, "p" .. k, k) end
    -- a machine naming two new parameters does not fit: refused, and the
    -- one free name is still free
    local big = controller.machine({ initial = "a", states = { a = { clip = "Walk" } },
      transitions = { { from = "a", to = "a", when = { { "x", ">", 1 }, { "y", ">", 1 } } } } })
    refuses("more than 4096 parameter names", ctl.set_machine, ctl, 2, "base", big)
    assert.is_nil(ctl:state(2, "base"))
    ctl:set(2, "z", true) -- the 4096th name
    refuses("more than 4096 parameter names", ctl.set, ctl, 2, "w", 1)
    assert.are.equal("a", ctl:state(1, "base"))
    ctl:update(0.1)
    local x = ctl:root_motion(1, 3)
    refuses("joint must be an integer in [1, 24]", ctl.root_motion, ctl, 1, 25)
    refuses("joint must be an integer in [1, 24]", ctl.root_motions, ctl, 0.5)
    local out = limber.buffer("f32", 4, 2)
    out:set(1, { 7, 7, 7, 7 })
    refuses("out must be a writable f32 Buffer", ctl.root_motions, ctl, 3, limber.buffer("f32", 3, 2))
    assert.are.same({ 7, 7, 7, 7 }, out:get(1))
    assert.are.equal(x, ctl:root_motion(1, 3)) -- nothing moved
  end)
end)
