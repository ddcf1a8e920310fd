#!/usr/bin/env bash
# Set up, start what the marked tests need (Docker engine, image), then run the whole test suite.
# GRADER_REQUIRE_DOCKER=1 (set by CI) turns "no Docker engine" from a skip into a failure;
# GRADER_REQUIRE_SERVICES=1 (set by CI) does the same for Redis and PostgreSQL, which the service
# tests start and stop themselves (by pid, on 127.0.0.1) once .ci/services.sh has installed them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The browser tests (tests/browser, tests/test_feedback_browser.py) drive Debian's chromium
# through its chromedriver (Selenium).
if [ "${GRADER_REQUIRE_BROWSER:-0}" = 1 ] && ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then
  sudo_=""; [ "$(id -u)" = 0 ] || sudo_="sudo"
  $sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null \
    || { $sudo_ apt-get update -qq && $sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }
fi
if [ -f .ci/docker-engine.sh ] && { [ "$(id -u)" = 0 ] || [ "${GRADER_REQUIRE_DOCKER:-0}" = 1 ]; }; then
  PATH="$PWD/.venv/bin:$PATH" bash .ci/docker-engine.sh
fi
if [ "$(id -u)" = 0 ] || [ "${GRADER_REQUIRE_SERVICES:-0}" = 1 ]; then
  bash .ci/services.sh
fi
# tests/test_install.py installs a real TinyTorch (MLSysBook/TinyTorch at 02364f8) beside the grader.
# TINYTORCH_SOURCE names a checkout of it; else its tree is exported from a git mirror that holds that
# commit (TINYTORCH_GIT, by default where this workplace's fetch tool keeps it); else those tests skip.
if [ -z "${TINYTORCH_SOURCE:-}" ]; then
  git_dir=${TINYTORCH_GIT:-/work/.mirror/MLSysBook+TinyTorch/repo}
  if git --git-dir="$git_dir" cat-file -e '02364f8^{commit}' 2>/dev/null; then
    TINYTORCH_SOURCE=$(mktemp -d)/TinyTorch
    mkdir -p "$TINYTORCH_SOURCE"
    git --git-dir="$git_dir" archive 02364f8 | tar -x -C "$TINYTORCH_SOURCE"
    export TINYTORCH_SOURCE
  fi
fi
# The student package is also graded with on the oldest Python it supports (3.10), when there is one.
if [ -z "${GRADER_OLDEST_PYTHON:-}" ]; then
  GRADER_OLDEST_PYTHON=$(bash scripts/oldest-python.sh || true)
  export GRADER_OLDEST_PYTHON
fi
.venv/bin/python -m ruff check grader tests
.venv/bin/python -m mypy
exec .venv/bin/python -m pytest "$@"
