#!/usr/bin/env bash
# Renders the API reference with LDoc (Debian's lua-ldoc + lua-markdown,
# installed by scripts/deps.sh): docs/api/index.html from lua/limber/*.lua
# and docs/api.luadoc (the C-implemented limber.core), as set in config.ld.
# Fails when LDoc fails or prints anything besides its progress lines
# (warnings such as unknown tags, bad @param names or broken references).
# spec/docs_spec.lua checks that every public function is documented.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v ldoc >/dev/null; then
  echo "limber: ldoc is not installed (bash scripts/deps.sh installs lua-ldoc)" >&2
  exit 1
fi
rm -rf docs/api
status=0
# Under Lua 5.1, whatever lua-any would pick: Debian's ldoc runs on 5.2 when
# lua5.2 is installed (scripts/lua-versions.sh installs it on CI), but
# lua-markdown is there for 5.1 only, and LDoc then falls back to plain text.
out="$(lua5.1 "$(command -v ldoc)" . 2>&1)" || status=$?
# Progress lines LDoc always prints; anything else is a warning or error.
problems="$(printf '%s\n' "$out" | grep -v -e '^reading configuration from config.ld$' \
  -e '^output written to ' -e '^$' || true)"
if [ "$status" -ne 0 ] || [ -n "$problems" ]; then
  printf '%s\n' "$out" >&2
  echo "limber: ldoc reported problems (exit status $status)" >&2
  exit 1
fi
[ -f docs/api/index.html ] || { echo "limber: docs/api/index.html was not written" >&2; exit 1; }
echo "limber: API reference written to docs/api/index.html"
