#!/usr/bin/env bash
# Set up, then grade every bundled submission on the embedded default (local backend).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/grader grade submissions/*.ipynb submissions/*.py --json results/submissions.json "$@"
