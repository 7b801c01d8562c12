#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds with LuaRocks,
# runs busted (Lua 5.4), luacheck and LDoc (scripts/docs.sh: the API
# reference renders without warnings), then builds with ASan + UBSan and
# runs the specs again under the sanitizers.
# Set LIMBER_TEST_QUICK=1 to skip the sanitizer pass.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh

echo "== busted (installed tree)"
busted --exclude-tags=slow "$@"

echo "== luacheck"
luacheck --no-color -q lua spec examples

echo "== API reference (LDoc)"
bash scripts/docs.sh

if [ "${LIMBER_TEST_QUICK:-0}" != "1" ]; then
  echo "== busted under AddressSanitizer + UndefinedBehaviorSanitizer"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DLIMBER_SANITIZE=ON -DLIMBER_WERROR=ON >/dev/null
  cmake --build build-asan -j "$(nproc)" >/dev/null
  preload="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
  LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    LSAN_OPTIONS=suppressions="$PWD/spec/lsan.supp" \
    busted --run=asan --exclude-tags=slow,nosan "$@"
fi
echo "== all tests passed"
