#!/usr/bin/env bash
# .venv-oldest: the oldest Python the student package supports (3.10, as TinyTorch and NumPy still
# do) with the student package's dependencies, for tests/test_student_dist.py. Prints its python,
# or nothing when this machine has no Python 3.10 (python3.10 on PATH, or pyenv's). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
base=""
for candidate in $(command -v python3.10 || true) "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.10*/bin/python; do
  if [ -x "$candidate" ] && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 10)' 2>/dev/null; then
    base=$candidate
    break
  fi
done
[ -n "$base" ] || exit 0
deps=(numpy pydantic nbformat fastjsonschema jupytext rich tomli)
stamp=.venv-oldest/.installed-$(printf '%s ' "${deps[@]}" | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  [ -x .venv-oldest/bin/python ] || "$base" -m venv .venv-oldest
  .venv-oldest/bin/python -m pip install --quiet "${deps[@]}" >&2
  touch "$stamp"
fi
echo "$PWD/.venv-oldest/bin/python"
