#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image. The uploaded zip is
# unpacked in /autograder/source: this repository, with setup.sh and run_autograder at its top.
# It installs Python 3.11+ and pip from the base image's package manager, then this grader into
# a virtual environment. Package indexes are whatever the image is configured with.
set -euo pipefail

SOURCE=${GRADER_AUTOGRADER_ROOT:-/autograder}/source
VENV=${GRADER_VENV:-/opt/tinytorch-grader}

new_enough() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }

export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends python3 python3-pip python3-venv ca-certificates

PYTHON=""
for candidate in python3 python3.13 python3.12 python3.11; do
  if command -v "$candidate" >/dev/null && new_enough "$candidate"; then PYTHON=$candidate; break; fi
done
if [ -z "$PYTHON" ]; then
  # Ubuntu 22.04 images ship Python 3.10; the grader needs 3.11 (tomllib).
  apt-get install -y -q --no-install-recommends python3.11 python3.11-venv
  PYTHON=python3.11
fi

"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --upgrade pip
"$VENV/bin/python" -m pip install "$SOURCE"
"$VENV/bin/python" -c 'import grader.gradescope_mode'
echo "grader installed in $VENV with $("$VENV/bin/python" --version)"
