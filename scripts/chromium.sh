#!/usr/bin/env bash
# The browser the console's end-to-end tests drive (tests/e2e/test_console.py): Debian's
# chromium package, driven by Playwright with executable_path (the browsers that
# `playwright install` downloads are not used). Installs it when it is missing and this
# runs as root with apt-get; otherwise says what to do. Under CI (CI set) a missing browser
# is an error, so the tests can never skip there unnoticed.
set -euo pipefail

browser="${MEMVAULT_CHROMIUM:-$(command -v chromium || echo /usr/bin/chromium)}"
if [ -x "$browser" ]; then
  exit 0
fi
if [ -z "${MEMVAULT_CHROMIUM:-}" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing chromium (Debian package) for the console's browser tests"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium >/dev/null
  exit 0
fi
message="no chromium at $browser: install Debian's chromium (apt-get install chromium) or set MEMVAULT_CHROMIUM"
if [ -n "${CI:-}" ]; then
  echo "error: $message" >&2
  exit 1
fi
echo "note: $message; the console's browser tests will skip" >&2
