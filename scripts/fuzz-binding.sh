#!/usr/bin/env bash
# A long run of the binding fuzzer (spec/fuzz_binding.lua) under ASan + UBSan.
# Usage: bash scripts/fuzz-binding.sh [calls (default 1000000)] [seed (default: the clock)]
# Builds the sanitizer build in build-asan (as the test command does), then
# runs the fuzzer; the calls go to build-asan/fuzz-binding.trace, so after a
# crash its last line is the call that crashed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
calls="${1:-1000000}"
seed="${2:-$(date +%s)}"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DLIMBER_SANITIZE=ON -DLIMBER_WERROR=ON >/dev/null
cmake --build build-asan -j "$(nproc)" >/dev/null
LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)" \
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1:max_allocation_size_mb=4096 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  LSAN_OPTIONS=suppressions="$PWD/spec/lsan.supp" \
  lua5.4 spec/fuzz_binding.lua --seed "$seed" --calls "$calls" --trace build-asan/fuzz-binding.trace \
    --lpath 'lua/?.lua;lua/?/init.lua' --cpath 'build-asan/?.so'
