#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/fuzz_*.c: the pure-C kernel, no Lua)
# with clang and runs each for the given time, one process at a time.
#
#   bash scripts/fuzz.sh [seconds-per-harness] [harness ...]
#
# Default 60 s each, every harness. Seeds come from the bundled models
# (fuzz/make_seeds.lua) plus fuzz/regressions/<harness>/; the growing corpus
# is kept in $FUZZ_DIR/corpus/<harness>/ between runs (FUZZ_DIR: the build
# directory, default build-fuzz). A crash, hang (-timeout, 10 s) or
# sanitizer report stops that harness and leaves the input in
# $FUZZ_DIR/artifacts/<harness>/; copy it to fuzz/regressions/<harness>/
# once fixed so every test run replays it. Exits 1 if any harness failed.
# FUZZ_NICE (default 10) sets the niceness; FUZZ_ARGS adds libFuzzer flags.
# Needs clang and its fuzzer runtime (Debian: clang, libclang-rt-14-dev),
# installed by scripts/deps.sh when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
out="${FUZZ_DIR:-build-fuzz}"
shift || true
bash scripts/deps.sh clang libclang-rt-14-dev

CC=clang cmake -S . -B "$out" -DLIMBER_FUZZ=ON -DLIMBER_WERROR=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
nice -n "${FUZZ_NICE:-10}" cmake --build "$out" -j "$(nproc)" >/dev/null

rm -rf "$out/seeds"
lua5.4 fuzz/make_seeds.lua "$out/seeds" >/dev/null

if [ $# -gt 0 ]; then
  harnesses=("$@")
else
  harnesses=()
  for f in fuzz/fuzz_*.c; do
    n="$(basename "$f" .c)"
    harnesses+=("${n#fuzz_}")
  done
fi

failed=()
for h in "${harnesses[@]}"; do
  mkdir -p "$out/corpus/$h" "$out/artifacts/$h" "$out/seeds/$h"
  dirs=("$out/corpus/$h" "$out/seeds/$h")
  [ -d "fuzz/regressions/$h" ] && dirs+=("fuzz/regressions/$h")
  echo "== fuzz_$h for ${secs} s"
  # shellcheck disable=SC2086
  if nice -n "${FUZZ_NICE:-10}" "$out/fuzz_$h" -max_total_time="$secs" -timeout=10 \
      -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$out/artifacts/$h/" ${FUZZ_ARGS:-} "${dirs[@]}" \
      >"$out/fuzz_$h.log" 2>&1; then
    grep -E "stat::number_of_executed_units|stat::new_units_added" "$out/fuzz_$h.log" \
      | tr '\n' ' '
    echo
  else
    echo "fuzz_$h FAILED: see $out/fuzz_$h.log and $out/artifacts/$h/"
    grep -E "ERROR|SUMMARY|fuzz oracle|runtime error" "$out/fuzz_$h.log" | head -5 || true
    failed+=("$h")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failures in ${failed[*]}"
  exit 1
fi
echo "fuzz: all harnesses clean"
