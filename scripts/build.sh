#!/usr/bin/env bash
# Builds and installs limber into ./lua_modules with LuaRocks (offline).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
luarocks --lua-version 5.4 make --tree lua_modules limber-scm-1.rockspec >/dev/null
