#!/usr/bin/env bash
# Install the servers the service tests run: Debian's redis-server and PostgreSQL. Idempotent.
#
# Nothing is started here and no server is left running: tests/service/servers.py starts each
# server on 127.0.0.1 and a free port, with its data under /tmp/svc-*, and stops it by pid (the
# tests also stop and restart them on purpose). The packages' own services are kept from starting
# during the install (no default PostgreSQL cluster; a temporary policy-rc.d if there is none).
set -euo pipefail

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
say() { echo "[services] $*" >&2; }

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
[ ${#missing[@]} -eq 0 ] && exit 0

say "installing ${missing[*]}"
added_policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod 755 /usr/sbin/policy-rc.d
  added_policy=1
fi
$SUDO mkdir -p /etc/postgresql-common/createcluster.d
echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.d/50-grader-tests.conf >/dev/null
apt_install() { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; }
apt_install || { $SUDO apt-get update -qq && apt_install; }
if [ -n "$added_policy" ]; then $SUDO rm -f /usr/sbin/policy-rc.d; fi
command -v redis-server >/dev/null 2>&1 && compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null \
  || { say "redis-server or PostgreSQL is still missing after the install"; exit 1; }
