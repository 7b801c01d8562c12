#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds with LuaRocks,
# runs busted on Lua 5.4 (while each libFuzzer harness runs for 8 s, about
# 60 s in all, in the background), then on every other supported Lua
# installed here (5.1, 5.2, 5.3, LuaJIT 2.1; CI installs all of them: see
# scripts/lua-versions.sh), clang-format --Werror, luacheck and LDoc (the
# builds use -Werror with -Wconversion among the project's warnings)
# (scripts/docs.sh: the API reference renders without warnings), then builds
# with ASan + UBSan and runs the specs again under the sanitizers (with the
# fuzz regression corpus replayed by the sanitized driver), while a second
# chain runs a part of the specs under the sanitizers on Lua 5.1, a
# representative program under valgrind and a clang -Werror build.
# Set LIMBER_TEST_QUICK=1 to skip the sanitizer, fuzz and valgrind passes.
# The fuzz pass needs clang's libFuzzer runtime: on CI (CI=true) deps.sh
# installs clang and libclang-rt-14-dev (about 40 MB of packages, so only
# there); elsewhere it runs when the runtime is present and is skipped with
# a note otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
# each stage's title with the minutes and seconds since the start, so a log
# shows where the time goes (the whole command should stay near 30 minutes)
stage() { printf '== %s [%dm%02ds]\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }
# CI installs every supported Lua (scripts/lua-versions.sh) before the build,
# which also builds the benchmarks' baselines for each, and LOVE 11 and Xvfb
# for the LOVE game's spec (spec/love_spec.lua)
if [ "${CI:-}" = "true" ]; then
  bash scripts/lua-versions.sh install
  bash scripts/deps.sh love xvfb xauth
fi
# LuaRocks' cmake backend (this build and the other Luas') builds with one job
# unless told otherwise
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
stage "build (scripts/build.sh)"
bash scripts/build.sh

# Background jobs (logged in build-test/, shown when they end), stopped if
# this script stops first.
background=()
trap 'for p in "${background[@]}"; do pkill -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; done; true' EXIT
if [ "${LIMBER_TEST_QUICK:-0}" != "1" ]; then
  # The libFuzzer pass, mostly one long compile at nice 10 (scripts/fuzz.sh),
  # uses the core the Lua 5.4 pass leaves idle.
  mkdir -p build-test
  [ "${CI:-}" = "true" ] && bash scripts/deps.sh clang libclang-rt-14-dev
  (
    stage "libFuzzer harnesses, 8 s each (about 60 s in all), during the Lua 5.4 pass"
    probe="$(mktemp -d)"
    printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n);\n%s\n' \
      'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return d && n; }' \
      >"$probe/p.c"
    if command -v clang >/dev/null && clang -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>/dev/null
    then
      FUZZ_DIR=build-fuzz-ci bash scripts/fuzz.sh 8
    else
      echo "note: clang's libFuzzer runtime is missing (Debian: clang libclang-rt-14-dev);" \
        "fuzz pass skipped (the regression corpus was still replayed by the ASan pass)"
    fi
    rm -rf "$probe"
    stage "libFuzzer pass done"
  ) >build-test/fuzz.log 2>&1 &
  fuzz=$!
  background+=("$fuzz")
fi

stage "busted, Lua 5.4 (installed tree)"
busted --exclude-tags=slow "$@"

# The other Lua versions: each builds its own limber.core (LuaRocks for 5.1 to
# 5.3, CMake -DLIMBER_LUA=luajit for LuaJIT) and runs the suite under its own
# interpreter, two at a time (logs in build-test/). Specs tagged #once test
# something no interpreter changes (C programs, the ThreadSanitizer build of
# spec/states_spec.lua, documents, the LOVE game with
# its own LuaJIT) and run in the 5.4 pass only.
stage "busted on the other Luas, two at a time"
bash scripts/lua-versions.sh run --exclude-tags=slow,once "$@"

stage "clang-format (.clang-format, every C file in the repository)"
git ls-files -z '*.c' '*.h' | xargs -0 clang-format --dry-run --Werror

stage "luacheck"
luacheck --no-color -q lua spec examples

stage "API reference (LDoc)"
bash scripts/docs.sh

if [ "${LIMBER_TEST_QUICK:-0}" != "1" ]; then
  preload="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
  asan_env=(LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    LSAN_OPTIONS=suppressions="$PWD/spec/lsan.supp")

  # The last stages run as two chains at once: each is mostly one core's work
  # (a busted process; one long compile, csrc/kernel/x86/skinning_avx2.c's
  # instantiations under the sanitizers, 2.5 to 5 minutes each; valgrind), so
  # side by side they take about 13 minutes instead of 22. This chain runs in
  # the background, logged to build-test/chain.log, shown when it ends.
  (
    if command -v lua5.1 >/dev/null && [ -f /usr/include/lua5.1/compat-5.3.h ]; then
      stage "busted under ASan + UBSan, Lua 5.1 (csrc/lua/lcompat.*: user-value tables, integer" \
        "reads, string formats), the specs that cross the binding most"
      cmake -S . -B build-asan-5.1 -DLIMBER_LUA=5.1 -DCMAKE_BUILD_TYPE=Debug -DLIMBER_SANITIZE=ON \
        -DLIMBER_WERROR=ON -DLIMBER_BASELINES=OFF -DLIMBER_FUZZ_REPLAY=OFF >/dev/null
      cmake --build build-asan-5.1 -j "$(nproc)" >/dev/null
      env "${asan_env[@]}" \
        busted --run=asan51 -o plainTerminal --exclude-tags=slow,nosan,once spec/compat_spec.lua \
        spec/core_spec.lua spec/binding_fuzz_spec.lua spec/safety_anim_spec.lua \
        spec/safety_scene_spec.lua spec/safety_skinning_spec.lua spec/hostile_spec.lua \
        spec/clip_spec.lua spec/anim_spec.lua spec/skinning_spec.lua spec/gltf_errors_spec.lua
    fi

    stage "valgrind memcheck (examples/smoke.lua)"
    bash scripts/valgrind.sh

    if command -v clang >/dev/null; then
      stage "clang build, -Werror (the project's warnings, -Wconversion included, under clang too)"
      CC=clang cmake -S . -B build-clang -DLIMBER_WERROR=ON -DLIMBER_BASELINES=ON \
        -DLIMBER_FUZZ_REPLAY=ON >/dev/null
      cmake --build build-clang -j "$(nproc)" >/dev/null
    fi
  ) >build-test/chain.log 2>&1 &
  chain=$!
  background+=("$chain")

  stage "busted under AddressSanitizer + UndefinedBehaviorSanitizer (ASan on Lua 5.1, valgrind" \
    "and the clang build run meanwhile: build-test/chain.log)"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DLIMBER_SANITIZE=ON -DLIMBER_WERROR=ON >/dev/null
  cmake --build build-asan -j "$(nproc)" >/dev/null
  env "${asan_env[@]}" LIMBER_FUZZ_REPLAY="$PWD/build-asan/limber_fuzz_replay" \
    busted --run=asan --exclude-tags=slow,nosan "$@"

  stage "waiting for libFuzzer (build-test/fuzz.log), then ASan on Lua 5.1, valgrind and the" \
    "clang build (build-test/chain.log)"
  ok=1
  wait "$fuzz" || ok=0
  cat build-test/fuzz.log
  [ "$ok" = 1 ] || { echo "failed: libFuzzer (build-test/fuzz.log above)"; exit 1; }
  wait "$chain" || ok=0
  cat build-test/chain.log
  [ "$ok" = 1 ] || { echo "failed: ASan on Lua 5.1, valgrind or the clang build (build-test/chain.log above)"; exit 1; }
  trap - EXIT
fi
stage "all tests passed"
