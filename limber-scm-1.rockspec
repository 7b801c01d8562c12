rockspec_format = "3.0"
package = "limber"
version = "scm-1"
source = {
  url = "git+https://example.invalid/limber.git",
}
description = {
  summary = "Scene tree and skeletal animation runtime for Lua 5.1 to 5.4 and LuaJIT",
  detailed = [[
    limber keeps skeletons, pose batches, clips, skins and palettes in flat C
    arrays and runs every per-frame job for a whole crowd in one call: local-to-model,
    clip sampling and blending, skin palettes and CPU skinning. Lua modules manage
    a sparse scene tree with slots and incremental updates, and load glTF 2.0.
  ]],
  license = "MIT",
  labels = { "animation", "gamedev", "gltf" },
}
dependencies = {
  "lua >= 5.1, < 5.5",
}
external_dependencies = {
  CGLM = { header = "cglm/cglm.h" },
}
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_C_FLAGS = "$(CFLAGS)",
    LUA_INCDIR = "$(LUA_INCDIR)",
    CGLM_INCDIR = "$(CGLM_INCDIR)",
    LIBDIR = "$(LIBDIR)",
    -- test and benchmark programs stay out of the user's tree (see CMakeLists.txt)
    LIMBER_BASELINES = "OFF",
    LIMBER_FUZZ_REPLAY = "OFF",
  },
  install = {
    lua = {
      ["limber"] = "lua/limber/init.lua",
      ["limber.gltf"] = "lua/limber/gltf.lua",
      ["limber.gltf.asset"] = "lua/limber/gltf/asset.lua",
      ["limber.anim"] = "lua/limber/anim.lua",
      ["limber.skinning"] = "lua/limber/skinning.lua",
      ["limber.scene"] = "lua/limber/scene.lua",
      ["limber.check"] = "lua/limber/check.lua",
      ["limber.math"] = "lua/limber/math.lua",
      ["limber.snapshot"] = "lua/limber/snapshot.lua",
      ["limber.controller"] = "lua/limber/controller.lua",
      ["limber.ik"] = "lua/limber/ik.lua",
      ["limber.retarget"] = "lua/limber/retarget.lua",
    },
  },
}
test_dependencies = { "busted >= 2.1" }
test = { type = "busted" }
