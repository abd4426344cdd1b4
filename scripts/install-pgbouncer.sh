#!/usr/bin/env bash
# Installs Debian's pgbouncer for the transaction-pooler test (test/integration/pgbouncer.test.ts),
# unless it is already there. Idempotent; needs root (CI and the dev machines run as root) or sudo.
# Only the binary is wanted: the test starts its own pgbouncer with its own ini, so the packaged
# service is kept from starting (policy-rc.d during the install) and disabled.
set -euo pipefail

# Debian puts it in /usr/sbin, which a non-root PATH may lack.
PGBOUNCER=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
if [ -x "$PGBOUNCER" ]; then
  echo "pgbouncer present: $("$PGBOUNCER" --version 2>/dev/null | head -n1)"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-pgbouncer: need root or sudo to apt-get install pgbouncer" >&2; exit 1; }
  SUDO=sudo
fi

# Exit code 101 tells invoke-rc.d not to start services: the package's postinst would start one.
POLICY=/usr/sbin/policy-rc.d
OWN_POLICY=""
if [ ! -e "$POLICY" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
  $SUDO chmod +x "$POLICY"
  OWN_POLICY=1
fi
cleanup() { if [ -n "$OWN_POLICY" ]; then $SUDO rm -f "$POLICY"; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends pgbouncer >/dev/null
# Not enabled at boot either (both work without a running init: they only edit links).
if command -v systemctl >/dev/null; then $SUDO systemctl disable pgbouncer >/dev/null 2>&1 || true; fi
if command -v update-rc.d >/dev/null; then $SUDO update-rc.d pgbouncer disable >/dev/null 2>&1 || true; fi
echo "pgbouncer installed: $(/usr/sbin/pgbouncer --version 2>/dev/null | head -n1)"
