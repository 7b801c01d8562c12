#!/usr/bin/env bash
# Builds limber for, and runs busted on, the Lua versions other than 5.4:
# 5.1, 5.2 and 5.3 (LuaRocks into ./lua_modules, busted profiles lua51, lua52,
# lua53) and LuaJIT 2.1 (CMake -DLIMBER_LUA=luajit into build-luajit/, busted
# profile luajit). A version runs when its interpreter and headers are
# installed (Debian: lua5.x + liblua5.x-dev, luajit + libluajit-5.1-dev, and
# lua-compat53-dev for 5.1, 5.2 and LuaJIT); a missing one is skipped with a
# note. The test command installs all four on CI (CI=true) with `install`.
# Usage: scripts/lua-versions.sh install       install all four (Debian packages)
#        scripts/lua-versions.sh list          the versions found
#        scripts/lua-versions.sh build         build for each
#        scripts/lua-versions.sh run [busted options]   build, then busted on
#                                              each, two at a time
set -euo pipefail
cd "$(dirname "$0")/.."
cmd="${1:-run}"
shift || true

all=(5.1 5.2 5.3 luajit)
if [ "$cmd" = install ]; then
  exec bash scripts/deps.sh lua5.1 liblua5.1-0-dev lua5.2 liblua5.2-dev lua5.3 liblua5.3-dev \
    luajit libluajit-5.1-dev lua-compat53-dev
fi

have() {
  case "$1" in
    luajit) command -v luajit >/dev/null && [ -f /usr/include/luajit-2.1/lua.h ] &&
              [ -f /usr/include/lua5.1/compat-5.3.h ] ;;
    5.3) command -v lua5.3 >/dev/null && [ -f /usr/include/lua5.3/lua.h ] ;;
    *) command -v "lua$1" >/dev/null && [ -f "/usr/include/lua$1/lua.h" ] &&
         [ -f "/usr/include/lua$1/compat-5.3.h" ] ;;
  esac
}
versions=()
for v in "${all[@]}"; do
  if have "$v"; then
    versions+=("$v")
  else
    echo "note: Lua $v not installed (Debian: lua$v liblua$v-dev lua-compat53-dev;" \
      "luajit: luajit libluajit-5.1-dev): its pass is skipped" >&2
  fi
done
if [ "$cmd" = list ]; then
  echo "${versions[*]}"
  exit 0
fi

build() {
  if [ "$1" = luajit ]; then
    cmake -S . -B build-luajit -DLIMBER_LUA=luajit -DLIMBER_WERROR=ON \
      -DLIMBER_FUZZ_REPLAY=OFF >/dev/null
    cmake --build build-luajit -j "$(nproc)" >/dev/null
  else
    # LuaRocks' cmake backend builds with one job unless told otherwise
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
      luarocks --lua-version "$1" make --tree lua_modules limber-scm-1.rockspec >/dev/null
  fi
}
for v in "${versions[@]}"; do build "$v"; done
[ "$cmd" = build ] && exit 0

profile() { [ "$1" = luajit ] && echo luajit || echo "lua${1/./}"; }
mkdir -p build-test
declare -A version_of # busted's pid -> its Lua
failed=()
# two passes at a time; the next starts as soon as either ends (wait -n)
finish_one() {
  local pid rc=0
  wait -n -p pid || rc=$?
  local v="${version_of[$pid]}"
  if [ "$rc" -eq 0 ]; then
    echo "== busted, Lua $v: $(grep -E '^[0-9]+ success' "build-test/busted-$v.log" | tail -1)"
  else
    echo "== busted, Lua $v FAILED (build-test/busted-$v.log):"
    tail -n 60 "build-test/busted-$v.log"
    failed+=("$v")
  fi
  running=$((running - 1))
}
running=0
for v in "${versions[@]}"; do
  busted --run="$(profile "$v")" -o plainTerminal "$@" >"build-test/busted-$v.log" 2>&1 &
  version_of[$!]="$v"
  running=$((running + 1))
  if [ "$running" -ge 2 ]; then finish_one; fi
done
while [ "$running" -gt 0 ]; do finish_one; done
if [ ${#failed[@]} -gt 0 ]; then
  echo "busted failed on Lua ${failed[*]}"
  exit 1
fi
