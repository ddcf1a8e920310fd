"""Every cache is keyed per unit: installing or editing another unit (the toy one) moves none of
module 11's keys — not its reference cache, not its shipped fingerprint, and not the Docker image
tag or the local zygote's bundle, which hold no unit at all (a job brings its unit's probes)."""

from __future__ import annotations

from pathlib import Path

from grader import modules
from grader.dist.expected import fingerprint
from grader.reference import ReferenceOracle
from grader.sandbox.bundle import bundle_hash, ensure_bundle
from grader.sandbox.image import build_context, image_tag

from .conftest import _clear_caches, unit_installed


def _keys() -> dict[str, str]:
    return {"image tag": image_tag(), "shared bundle": bundle_hash(), "zygote bundle": str(ensure_bundle()),
            "module-11 bundle": bundle_hash("embeddings"), "module-11 fingerprint": fingerprint("embeddings"),
            "module-11 reference cache": ReferenceOracle("embeddings")._version}


def test_installing_and_editing_another_unit_moves_none_of_module_11s_keys(tmp_path: Path) -> None:
    before = _keys()
    with unit_installed(tmp_path / "site") as site:
        assert set(modules.installed()) == {"attention", "embeddings", "relu"}
        assert _keys() == before
        toy = bundle_hash("relu")
        probes = site / "toy_relu" / "probes" / "__init__.py"
        probes.write_text(probes.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
        _clear_caches()
        assert bundle_hash("relu") != toy  # the toy's own key moved ...
        assert _keys() == before  # ... and nothing of module 11's


def test_the_image_and_the_zygote_bundle_hold_no_unit(tmp_path: Path) -> None:
    """What the image is built from: the harness and the runtime; no unit's probes, judge,
    rubric or reference (the probes come with each job)."""
    import io
    import tarfile

    with unit_installed(tmp_path / "site"):
        with tarfile.open(fileobj=io.BytesIO(build_context("FROM scratch\n"))) as tar:
            names = tar.getnames()
        files = {p.relative_to(ensure_bundle()).as_posix() for p in ensure_bundle().rglob("*.py")}
    assert any(n.startswith("grader/grader/harness/") for n in names)
    tops = {n.split("/")[1] for n in names if n.count("/") > 1}
    assert tops == {"grader", "tinytorch"}  # the harness and the runtime: no toy_relu/
    assert not [n for n in names if n.startswith("grader/grader/") and not n.startswith("grader/grader/harness/")
                and n != "grader/grader/__init__.py"]  # no grader/modules/: no unit
    assert files == {n.removeprefix("grader/") for n in names if n.endswith(".py")}


def test_a_refresh_keeps_a_shipped_array_that_differs_only_by_float_rounding(tmp_path: Path) -> None:
    """``grader.dist refresh`` on another machine (another BLAS) must not rewrite the shipped
    files whose values moved by float rounding only, but must write every real change."""
    import numpy as np

    from grader.dist.expected import _save

    shipped = tmp_path / "shipped.npy"
    values = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    np.save(shipped, values)
    before = shipped.read_bytes()
    _save(tmp_path / "rounded.npy", values * (1 + 3e-8), shipped)
    assert (tmp_path / "rounded.npy").read_bytes() == before
    _save(tmp_path / "changed.npy", values + 1e-3, shipped)
    assert np.array_equal(np.load(tmp_path / "changed.npy"), values + 1e-3)
    _save(tmp_path / "reshaped.npy", values.reshape(4, 3), shipped)
    assert np.load(tmp_path / "reshaped.npy").shape == (4, 3)
    _save(tmp_path / "new.npy", values, tmp_path / "none.npy")  # nothing shipped yet
    assert np.array_equal(np.load(tmp_path / "new.npy"), values)
