#!/usr/bin/env bash
# Build the zip to upload to Gradescope as the autograder: the committed repository (HEAD) with
# setup.sh and run_autograder at its top, and a seed_secret file: GRADER_SEED_SECRET's value, or a
# new random one (official grading refuses to run without a secret of the course's own). Optional:
# RUBRIC=path.toml adds it as rubric.toml; MODULE=name (a course module's name or number) names the
# assignment's module as source/module, for submissions that do not say it themselves (the grader
# has several modules installed). Keep the zip where students cannot read it.
#   bash autograder/make_zip.sh [OUT.zip]     (default: autograder.zip)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
out=$(realpath -m "${1:-autograder.zip}")
extra=$(mktemp -d)
trap 'rm -rf "$extra"' EXIT
args=(--add-file=autograder/setup.sh --add-file=autograder/run_autograder)
if [ -n "${GRADER_SEED_SECRET:-}" ]; then
  printf '%s' "$GRADER_SEED_SECRET" > "$extra/seed_secret"
else
  od -An -N32 -tx1 /dev/urandom | tr -d ' \n' > "$extra/seed_secret"
  echo "a new random seed secret is in the zip (source/seed_secret); keep the zip away from students"
fi
args+=(--add-file="$extra/seed_secret")
if [ -n "${RUBRIC:-}" ]; then
  cp "$RUBRIC" "$extra/rubric.toml"
  args+=(--add-file="$extra/rubric.toml")
fi
if [ -n "${MODULE:-}" ]; then
  printf '%s\n' "$MODULE" > "$extra/module"
  args+=(--add-file="$extra/module")
fi
git archive --format=zip "${args[@]}" -o "$out" HEAD
echo "wrote $out"
