#!/usr/bin/env bash
# Builds and installs limber into ./lua_modules with LuaRocks (offline), then
# the benchmarks' C baselines (examples/baselines/, modules limber.baseline_*)
# into build-bench/: they are not part of the rock (the rockspec turns them
# off), and examples/common.lua finds them there for examples/bench_*.lua.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
luarocks --lua-version 5.4 make --tree lua_modules limber-scm-1.rockspec >/dev/null
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DLIMBER_BASELINES=ON \
  -DLIMBER_FUZZ_REPLAY=OFF >/dev/null
cmake --build build-bench --target limber_baselines -j "$(nproc)" >/dev/null
