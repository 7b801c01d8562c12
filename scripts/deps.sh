#!/usr/bin/env bash
# Installs the Debian packages limber needs, only those that are missing:
# the library's build dependencies, the test tools (valgrind: memcheck in the
# test command, callgrind counts instructions in spec/safety_anim_spec.lua),
# and librsvg2-bin (rsvg-convert: the demo draws its pictures as SVG and renders them to PNG
# with it; spec/demo_spec.lua checks those PNGs).
# Usage: scripts/deps.sh [extra-package ...]
set -euo pipefail
pkgs=(lua5.4 liblua5.4-dev luarocks lua-busted lua-check lua-cjson libcglm-dev
      lua-ldoc lua-markdown cmake gcc make pkg-config clang-format librsvg2-bin valgrind "$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "limber: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
