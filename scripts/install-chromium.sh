#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard's browser test (test/ui/dashboard.test.ts), unless it is
# already there. Idempotent; needs root (CI and the dev machines run as root) or sudo. playwright-core
# drives this binary: no test tool downloads a browser of its own.
set -euo pipefail

CHROMIUM=/usr/bin/chromium
if [ -x "$CHROMIUM" ]; then
  echo "chromium present: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-chromium: need root or sudo to apt-get install chromium" >&2; exit 1; }
  SUDO=sudo
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium >/dev/null
echo "chromium installed: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
