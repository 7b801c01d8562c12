#!/usr/bin/env bash
# The main job: installs what is missing, builds limber with LuaRocks and
# runs the demo on the bundled assets. Until the crowd demo lands it runs
# the local-to-model benchmark. Extra arguments go to the program.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
if [ -f examples/demo.lua ]; then
  exec lua5.4 examples/demo.lua "$@"
fi
exec lua5.4 examples/bench_hierarchy.lua "$@"
