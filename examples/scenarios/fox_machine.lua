-- A state machine on the Fox (limber.controller.machine, docs/controller.md):
-- idle (Survey) until speed rises, then a blend space of Walk and Run by
-- speed, its clips synced; a trigger sends the fox back to idle.
-- lua5.4 examples/anim_dump.lua examples/scenarios/fox_machine.lua
return {
  model = "examples/assets/Fox/Fox.glb",
  fps = 60, frames = 240,
  layers = { { name = "base" } },
  params = { speed = 0 },
  machine = {
    layer = "base",
    initial = "idle",
    states = {
      idle = { clip = "Survey" },
      move = { space = { { clip = "Walk", at = 0.5 }, { clip = "Run", at = 2 } }, param = "speed" },
    },
    transitions = {
      { from = "idle", to = "move", fade = 0.3, when = { { "speed", ">", 0.1 } } },
      { from = "move", to = "idle", fade = 0.3, when = { { "speed", "<=", 0.1 } } },
      { from = "any", to = "idle", fade = 0.25, trigger = "stop", priority = 1 },
    },
  },
  script = {
    { frame = 30, set = { speed = 0.8 } },
    { frame = 90, set = { speed = 1.6 } },
    { frame = 150, set = { stop = true } },
    { frame = 160, set = { speed = 0 } },
  },
}
