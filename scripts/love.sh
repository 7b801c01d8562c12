#!/usr/bin/env bash
# Runs the LÖVE example (examples/love, docs/love.md): installs love and Xvfb
# where missing, builds limber.core for LÖVE's LuaJIT (CMake,
# -DLIMBER_LUA=luajit, in build-luajit/), puts together the game folder the
# way a game ships limber (build-luajit/love-game/: main.lua, conf.lua,
# limber/*.lua, limber/core.so, cjson.so, the two models) and starts it.
# With a display it opens a window; without one, or with --screenshot, it runs
# under xvfb-run and writes a screenshot (default love-out/crowd.png; the
# game runs 120 frames unless --frames says otherwise).
# Arguments go to the game unchanged; the game runs in the directory the
# script was started from, so a relative --screenshot FILE is relative to it.
# Usage: scripts/love.sh [--frames N] [--screenshot FILE] [--cpu] [--characters N] [--no-hud]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
game="$repo/build-luajit/love-game"
(
  cd "$repo"
  bash scripts/deps.sh love xvfb xauth luajit libluajit-5.1-dev lua-compat53-dev
  cmake -S . -B build-luajit -DLIMBER_LUA=luajit >/dev/null
  cmake --build build-luajit -j "$(nproc)" --target limber_core >/dev/null
  cjson="$(luajit -e 'print((package.searchpath("cjson", package.cpath)))')"
  [ "$cjson" != nil ] || { echo "love.sh: no cjson.so for LuaJIT (Debian: lua-cjson)" >&2; exit 1; }
  rm -rf "$game"
  mkdir -p "$game/limber/gltf" "$game/assets/Fox" "$game/assets/CesiumMan"
  cp examples/love/main.lua examples/love/conf.lua "$game/"
  cp lua/limber/*.lua "$game/limber/"
  cp lua/limber/gltf/*.lua "$game/limber/gltf/"
  cp build-luajit/limber/core.so "$game/limber/"
  cp "$cjson" "$game/cjson.so"
  cp examples/assets/Fox/Fox.glb examples/assets/Fox/LICENSE.md "$game/assets/Fox/"
  cp examples/assets/CesiumMan/CesiumMan.gltf examples/assets/CesiumMan/LICENSE.md \
    "$game/assets/CesiumMan/"
)

# the folder of a --screenshot FILE must exist (relative to this directory)
shot=0
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  if [ "${args[i]}" = --screenshot ]; then
    shot=1
    [ $((i + 1)) -lt ${#args[@]} ] && mkdir -p "$(dirname -- "${args[i + 1]}")"
  fi
done
if [ "$shot" = 0 ] && [ -n "${DISPLAY:-}" ]; then
  exec love "$game" "$@"
fi
extra=()
if [ "$shot" = 0 ]; then
  mkdir -p love-out
  extra=(--screenshot love-out/crowd.png)
fi
exec xvfb-run -a -s "-screen 0 960x540x24" love "$game" "$@" "${extra[@]}"
