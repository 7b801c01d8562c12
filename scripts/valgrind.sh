#!/usr/bin/env bash
# Runs examples/smoke.lua (core, every bundled glTF model, palettes, error
# paths) and then the demo (small) under valgrind memcheck: any memory
# error or definitely lost byte fails the run (exit 1). Builds limber without
# sanitizers in build-valgrind. Extra arguments go to smoke.lua (rounds, default 2).
#   bash scripts/valgrind.sh [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh valgrind
cmake -S . -B build-valgrind -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLIMBER_WERROR=ON >/dev/null
cmake --build build-valgrind -j "$(nproc)" >/dev/null
log="build-valgrind/valgrind.log"
LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build-valgrind/?.so;;" \
  valgrind --tool=memcheck --error-exitcode=1 --leak-check=full \
  --errors-for-leak-kinds=definite --show-leak-kinds=definite --track-origins=yes \
  --log-file="$log" lua5.4 examples/smoke.lua "$@" || {
  echo "valgrind: errors or definitely lost bytes, see $log"
  grep -E "ERROR SUMMARY|definitely lost|Invalid|uninitialised" "$log" | head -20
  exit 1
}
grep -E "ERROR SUMMARY|definitely lost|in use at exit" "$log"

# The demo once, small: the whole pipeline with threads, scene and pictures
# (rsvg-convert, which renders them, is not ours and not run under valgrind).
log="build-valgrind/valgrind-demo.log"
out="$(mktemp -d)"
LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build-valgrind/?.so;;" \
  valgrind --tool=memcheck --error-exitcode=1 --leak-check=full \
  --errors-for-leak-kinds=definite --show-leak-kinds=definite \
  --log-file="$log" lua5.4 examples/demo.lua --frames 20 --characters 30 --out "$out" >/dev/null 2>&1 || {
  echo "valgrind (demo): errors or definitely lost bytes, see $log"
  grep -E "ERROR SUMMARY|definitely lost|Invalid|uninitialised" "$log" | head -20
  rm -rf "$out"
  exit 1
}
rm -rf "$out"
echo "demo:"
grep -E "ERROR SUMMARY|definitely lost|in use at exit" "$log"
