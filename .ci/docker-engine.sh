#!/usr/bin/env bash
# Make a Docker engine answer on this machine and build the grader's sandbox image. Idempotent.
#
#  - installs Debian's docker.io and debootstrap when they are missing (apt-get; needs root);
#  - starts `dockerd --bridge=none --iptables=false --ip-masq=false` in the background when no
#    engine answers (grading containers never have a network; no bridge network is ever created);
#  - waits up to ENGINE_TIMEOUT seconds (default 60) for it, with a clear error if it does not come up;
#  - builds the image once (a no-op when the current tag exists): python -m grader.sandbox.image via
#    build_image(), offline (debootstrap) unless GRADER_IMAGE_ONLINE=1.
#
# Environment: PYTHON (default: python3 on PATH, e.g. the project's .venv), DOCKERD_LOG
# (default /tmp/dockerd.log), ENGINE_TIMEOUT.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-$(command -v python || command -v python3)}
DOCKERD_LOG=${DOCKERD_LOG:-/tmp/dockerd.log}
ENGINE_TIMEOUT=${ENGINE_TIMEOUT:-60}
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

say() { echo "[docker-engine] $*" >&2; }

engine_answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

missing=()
command -v docker >/dev/null 2>&1 || missing+=(docker.io)
{ command -v dockerd >/dev/null 2>&1 || [ -x /usr/sbin/dockerd ]; } || missing+=(docker.io)
{ command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ]; } || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  pkgs=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
  say "installing ${pkgs}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $pkgs >/dev/null
fi
export PATH="$PATH:/usr/sbin:/sbin"

if engine_answers; then
  say "the Docker engine answers ($(docker version --format '{{.Server.Version}}'))"
else
  if [ -n "${DOCKER_HOST:-}" ]; then
    say "DOCKER_HOST=$DOCKER_HOST is set but no engine answers there; not starting a local one"
    exit 1
  fi
  if pgrep -x dockerd >/dev/null 2>&1; then
    say "dockerd is running but not answering yet; waiting for it"
  else
    say "starting dockerd --bridge=none --iptables=false --ip-masq=false (log: $DOCKERD_LOG)"
    # setsid: the engine outlives this script and does not get the terminal's Ctrl-C.
    $SUDO setsid dockerd --bridge=none --iptables=false --ip-masq=false >"$DOCKERD_LOG" 2>&1 < /dev/null &
  fi
  waited=0
  until engine_answers; do
    if [ "$waited" -ge "$ENGINE_TIMEOUT" ]; then
      say "ERROR: the Docker engine did not answer within ${ENGINE_TIMEOUT} s; last lines of $DOCKERD_LOG:"
      tail -n 20 "$DOCKERD_LOG" >&2 2>/dev/null || true
      exit 1
    fi
    sleep 1
    waited=$((waited + 1))
  done
  say "the Docker engine answers after ${waited} s"
fi

say "building the sandbox image if needed (the first offline build runs debootstrap: a minute or more)"
"$PYTHON" -c "from grader.sandbox.image import build_image; print(build_image())"
