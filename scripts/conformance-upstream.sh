#!/usr/bin/env bash
# Run the runtime conformance suite against a real TinyTorch instead of reference/runtime.
#
#   bash scripts/conformance-upstream.sh DIR
#
# DIR holds an importable `tinytorch` package (for the older generation: a copy of a TinyTorch
# checkout's tinytorch/ with an empty __init__.py, so that only core/tensor.py and
# core/autograd.py load). Names one generation lacks (no_grad, EmbeddingBackward, Function in
# core.tensor) are stubbed so that the module imports. Every test labelled for both generations
# must pass; the failures must be exactly the tests labelled for the other generation or as a
# DEVIATION. Nothing is written inside the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
upstream=$(cd "${1:?usage: conformance-upstream.sh DIR-containing-tinytorch}" && pwd)
[ -d "$upstream/tinytorch/core" ] || { echo "no tinytorch/core under $upstream" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp tests/reference/test_conformance.py "$work/"
cat > "$work/conftest.py" <<EOF
import contextlib, io, sys
sys.path.insert(0, "$upstream")
with contextlib.redirect_stdout(io.StringIO()):  # the older autograd prints on import
    import tinytorch.core.autograd as autograd
    import tinytorch.core.tensor as tensor
for name in ("EmbeddingBackward", "no_grad"):
    if not hasattr(autograd, name):
        setattr(autograd, name, None)
if not hasattr(tensor, "Function"):
    tensor.Function = autograd.Function
EOF
cd "$work"
"$OLDPWD/.venv/bin/python" -m pytest -q -p no:cacheprovider --rootdir="$work" -o addopts="" \
    test_conformance.py -rf --tb=no || true
