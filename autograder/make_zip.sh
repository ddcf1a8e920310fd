#!/usr/bin/env bash
# Build the zip to upload to Gradescope as the autograder: the committed repository (HEAD) with
# setup.sh and run_autograder at its top. Optional: GRADER_SEED_SECRET adds a seed_secret file;
# RUBRIC=path.toml adds it as rubric.toml.
#   bash autograder/make_zip.sh [OUT.zip]     (default: autograder.zip)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
out=$(realpath -m "${1:-autograder.zip}")
extra=$(mktemp -d)
trap 'rm -rf "$extra"' EXIT
args=(--add-file=autograder/setup.sh --add-file=autograder/run_autograder)
if [ -n "${GRADER_SEED_SECRET:-}" ]; then
  printf '%s' "$GRADER_SEED_SECRET" > "$extra/seed_secret"
  args+=(--add-file="$extra/seed_secret")
fi
if [ -n "${RUBRIC:-}" ]; then
  cp "$RUBRIC" "$extra/rubric.toml"
  args+=(--add-file="$extra/rubric.toml")
fi
git archive --format=zip "${args[@]}" -o "$out" HEAD
echo "wrote $out"
