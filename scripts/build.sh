#!/usr/bin/env bash
# Builds and installs limber into ./lua_modules with LuaRocks (offline), then
# the benchmarks' C baselines (examples/baselines/, modules limber.baseline_*)
# into build-bench/: they are not part of the rock (the rockspec turns them
# off), and examples/common.lua finds them there for examples/bench_*.lua.
# The same for each other installed Lua (scripts/lua-versions.sh list: 5.1,
# 5.2, 5.3, LuaJIT) into build-bench-<v>/, where common.lua looks under that
# interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
# LuaRocks' cmake backend builds with one job unless told otherwise
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
luarocks --lua-version 5.4 make --tree lua_modules limber-scm-1.rockspec >/dev/null

cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DLIMBER_BASELINES=ON \
  -DLIMBER_FUZZ_REPLAY=OFF -DLIMBER_KERNEL_LIB= >/dev/null
cmake --build build-bench --target limber_baselines -j "$(nproc)" >/dev/null
# The other Luas' baselines link the kernel build-bench/ compiled (it has no
# Lua in it): each compiles only its few files, all of them side by side.
kernel="$PWD/build-bench/liblimber_kernel.a"
for v in $(bash scripts/lua-versions.sh list 2>/dev/null); do
  { cmake -S . -B "build-bench-$v" -DCMAKE_BUILD_TYPE=Release -DLIMBER_LUA="$v" \
      -DLIMBER_BASELINES=ON -DLIMBER_FUZZ_REPLAY=OFF -DLIMBER_KERNEL_LIB="$kernel" &&
    cmake --build "build-bench-$v" --target limber_baselines -j 1; } >/dev/null ||
    echo "build.sh: note: the benchmarks' baselines for Lua $v did not build (build-bench-$v/)" >&2 &
done
wait
