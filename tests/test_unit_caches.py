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
