#!/usr/bin/env bash
# The main job: installs what is missing (scripts/deps.sh, which includes
# librsvg2-bin: rsvg-convert renders the demo's SVG pictures to PNG), builds
# limber with LuaRocks and runs the crowd demo (examples/demo.lua) on the
# bundled assets. Extra arguments go to the program.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec lua5.4 examples/demo.lua "$@"
