#!/usr/bin/env bash
# A long run of the binding fuzzer (spec/fuzz_binding.lua) under ASan + UBSan.
# Usage: bash scripts/fuzz-binding.sh [calls (default 1000000)] [seed (default: the clock)]
# Builds the sanitizer build in build-asan (as the test command does), then
# runs the fuzzer; the calls go to build-asan/fuzz-binding.trace, so after a
# crash its last line is the call that crashed. LIMBER_LUA=5.1 (or 5.2, 5.3)
# fuzzes the binding built for that Lua, in build-asan-<v>/, under its
# interpreter. LuaJIT is left out: it allocates userdata with its own
# allocator, out of ASan's sight; the 5.1 build runs the same compat code.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
calls="${1:-1000000}"
seed="${2:-$(date +%s)}"
v="${LIMBER_LUA:-5.4}"
case "$v" in 5.1|5.2|5.3|5.4) ;; *) echo "fuzz-binding.sh: LIMBER_LUA must be 5.1 to 5.4" >&2; exit 2 ;; esac
dir=build-asan
[ "$v" = 5.4 ] || dir="build-asan-$v"
cmake -S . -B "$dir" -DLIMBER_LUA="$v" -DCMAKE_BUILD_TYPE=Debug -DLIMBER_SANITIZE=ON \
  -DLIMBER_WERROR=ON >/dev/null
cmake --build "$dir" -j "$(nproc)" >/dev/null
LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)" \
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1:max_allocation_size_mb=4096 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  LSAN_OPTIONS=suppressions="$PWD/spec/lsan.supp" \
  "lua$v" spec/fuzz_binding.lua --seed "$seed" --calls "$calls" --trace "$dir/fuzz-binding.trace" \
    --lpath 'lua/?.lua;lua/?/init.lua' --cpath "$dir/?.so"
