-- Sync by markers on the Fox (docs/controller.md, "Sync by markers"): the
-- hind feet's touch-downs marked on Walk and Run (the times
-- examples/controller.lua finds), a blend space of the two synced by those
-- markers, so both clips' left feet come down in the same frame, and a
-- transition back to idle that waits for the left foot.
-- lua5.4 examples/anim_dump.lua examples/scenarios/fox_markers.lua
return {
  model = "examples/assets/Fox/Fox.glb",
  fps = 60, frames = 240,
  layers = { { name = "base" } },
  params = { speed = 0, halt = false },
  events = {
    Walk = { { time = 0.012, name = "R" }, { time = 0.525, name = "L" } },
    Run = { { time = 1.038, name = "L" }, { time = 1.125, name = "R" } },
  },
  machine = {
    layer = "base",
    initial = "idle",
    states = {
      idle = { clip = "Survey" },
      move = { space = { { clip = "Walk", at = 0.5 }, { clip = "Run", at = 2 } }, param = "speed",
               markers = { "L", "R" } },
    },
    transitions = {
      { from = "idle", to = "move", fade = 0.3, when = { { "speed", ">", 0.1 } } },
      { from = "move", to = "idle", fade = 0.3, at_marker = "L",
        when = { { "halt", "==", true } } },
    },
  },
  script = {
    { frame = 10, set = { speed = 1.2 } },
    { frame = 120, set = { speed = 1.7 } },
    { frame = 150, set = { halt = true, speed = 0 } },
  },
}
