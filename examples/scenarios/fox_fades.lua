-- A chain of interrupted fades on the Fox (issue 18's example without a
-- state machine): Walk, a fade to Run interrupted by Survey a quarter of a
-- second later, Walk on the upper body, then that layer faded out.
-- lua5.4 examples/anim_dump.lua examples/scenarios/fox_fades.lua
return {
  model = "examples/assets/Fox/Fox.glb",
  fps = 60, frames = 240,
  layers = {
    { name = "base" },
    { name = "upper", mode = "override", weight = 1, mask = { root = "b_Spine01_02" } },
  },
  params = { speed = 0 },
  script = {
    { frame = 0, layer = "base", play = "Walk" },
    { frame = 60, layer = "base", play = "Run", fade = 0.5 },
    { frame = 75, layer = "base", play = "Survey", fade = 0.5 },
    { frame = 90, layer = "upper", play = "Walk", time = 0.2 },
    { frame = 100, layer = "upper", weight = 0, fade = 0.25 },
    { frame = 120, set = { speed = 1.2 } },
  },
}
