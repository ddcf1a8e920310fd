#!/usr/bin/env bash
# Create .venv with the grader and its test tools. Idempotent; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.installed-$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -c constraints.txt -e '.[dev,docker,service]'
  touch "$stamp"
fi
# An editable install from before dev-mode-exact left empty folders in site-packages/grader; such a
# folder is a namespace package that would shadow the editable `grader`.
sp=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ -d "$sp/grader" ] && [ -z "$(find "$sp/grader" -type f -print -quit)" ]; then rm -rf "$sp/grader"; fi
