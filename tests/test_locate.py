"""Locate: a module named as 11, embeddings or 11_embeddings, found in a TinyTorch checkout, and
the installed rubric that grades it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader import modules
from grader.errors import LocateError
from grader.locate import ModuleRef, bundled_rubrics, find_checkout, installed_rubric, locate, parse_module, rubric_for

from .conftest import SUBMISSIONS

NOTEBOOK = SUBMISSIONS / "correct_tinytorch.ipynb"


def checkout(root: Path, *folders: str, notebook: str | None = "modules/11_embeddings/11_embeddings.ipynb") -> Path:
    """A TinyTorch-shaped folder: ``folders`` (default modules/11_embeddings and src/01_tensor), and
    a student notebook at ``notebook`` (relative to ``root``) unless it is None."""
    for folder in folders or ("modules/11_embeddings", "src/01_tensor"):
        (root / folder).mkdir(parents=True)
    if notebook:
        shutil.copyfile(NOTEBOOK, root / notebook)
    return root


# ---- naming a module ------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "ref"), [
    pytest.param("11", ModuleRef(11, None), id="number"),
    pytest.param("embeddings", ModuleRef(None, "embeddings"), id="name"),
    pytest.param("11_embeddings", ModuleRef(11, "embeddings"), id="number-and-name"),
    pytest.param(" 11-Embeddings ", ModuleRef(11, "embeddings"), id="case-dash-and-spaces"),
    pytest.param("011", ModuleRef(11, None), id="leading-zero"),
])
def test_a_module_is_named_by_number_name_or_both(spec: str, ref: ModuleRef) -> None:
    assert parse_module(spec) == ref


@pytest.mark.parametrize("spec", ["embed dings", "", "1234", "_embeddings", "11_", "../11_embeddings", "11_embed/x"])
def test_a_bad_module_name_says_how_to_write_one(spec: str) -> None:
    with pytest.raises(LocateError, match=r"give its number, its name or both \(NN_name\)"):
        parse_module(spec)


# ---- finding the work in a checkout ---------------------------------------------------------


@pytest.mark.parametrize("spec", ["embeddings", "11", "11_embeddings", "11-Embeddings"])
def test_every_spelling_of_the_module_finds_the_notebook(tmp_path: Path, spec: str) -> None:
    checkout(tmp_path)
    work = locate(spec, [tmp_path / "modules" / "11_embeddings"])
    assert work.path == tmp_path / "modules" / "11_embeddings" / "11_embeddings.ipynb"
    assert (work.number, work.name, work.label, work.checkout) == (11, "embeddings", "module 11 embeddings", tmp_path)


def test_the_checkout_is_found_from_any_folder_inside_it(tmp_path: Path) -> None:
    checkout(tmp_path)
    deep = tmp_path / "modules" / "11_embeddings" / "scratch" / "more"
    deep.mkdir(parents=True)
    assert find_checkout([deep]) == tmp_path
    assert locate("11", [deep]).checkout == tmp_path


def test_the_nearest_checkout_wins(tmp_path: Path) -> None:
    checkout(tmp_path)
    inner = checkout(tmp_path / "copy", "src/11_embeddings", notebook=None)
    assert find_checkout([inner]) == inner


def test_folders_without_numbered_modules_are_not_a_checkout(tmp_path: Path) -> None:
    for folder in ("modules/embeddings", "src/tensor"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "modules" / "12_attention").write_text("a file, not a folder", encoding="utf-8")
    assert find_checkout([tmp_path]) is None


@pytest.mark.parametrize("names, picked", [
    pytest.param(["embeddings.ipynb", "scratch.ipynb"], "embeddings.ipynb", id="short-name"),
    pytest.param(["embeddings_dev.ipynb", "scratch.ipynb"], "embeddings_dev.ipynb", id="older-dev-name"),
    pytest.param(["11_embeddings.ipynb", "embeddings.ipynb"], "11_embeddings.ipynb", id="numbered-first"),
    pytest.param(["my_copy.ipynb"], "my_copy.ipynb", id="the-only-notebook"),
])
def test_the_learner_notebook_is_picked_by_its_known_names(tmp_path: Path, names: list[str], picked: str) -> None:
    checkout(tmp_path, notebook=None)
    for name in names:
        shutil.copyfile(NOTEBOOK, tmp_path / "modules" / "11_embeddings" / name)
    assert locate("embeddings", [tmp_path]).path.name == picked


def test_the_developer_source_is_used_when_there_is_no_notebook(tmp_path: Path) -> None:
    checkout(tmp_path, notebook=None)
    source = tmp_path / "src" / "11_embeddings" / "11_embeddings.py"
    source.parent.mkdir(parents=True)
    shutil.copyfile(SUBMISSIONS / "correct_source.py", source)
    assert locate("11", [tmp_path]).path == source


def test_a_checkout_with_only_developer_sources_works(tmp_path: Path) -> None:
    """The developer layout: no modules/ folder at all, src/NN_name/NN_name.py."""
    checkout(tmp_path, "src/01_tensor", "src/11_embeddings", notebook=None)
    source = tmp_path / "src" / "11_embeddings" / "11_embeddings.py"
    shutil.copyfile(SUBMISSIONS / "correct_source.py", source)
    assert locate("11_embeddings", [tmp_path]).path == source


@pytest.mark.parametrize("spec, start, message", [
    pytest.param("attention", "", "no module attention in {root}: looked for modules/NN_attention/*.ipynb and "
                 "src/NN_attention/NN_attention.py; modules there: 01_tensor, 11_embeddings", id="unknown-module"),
    pytest.param("11", "", "no work for module 11_embeddings in {root}: looked for modules/11_embeddings/*.ipynb "
                 "and src/11_embeddings/11_embeddings.py", id="module-not-started"),
    pytest.param("embeddings", "elsewhere", "no TinyTorch checkout at or above {root}/elsewhere", id="no-checkout"),
    pytest.param("embed dings", "", "invalid module 'embed dings'", id="bad-spelling"),
])
def test_a_module_that_is_not_there_says_where_it_looked(tmp_path: Path, spec: str, start: str, message: str) -> None:
    if start:
        (tmp_path / start).mkdir()
    else:
        checkout(tmp_path, notebook=None)
    with pytest.raises(LocateError) as e:
        locate(spec, [tmp_path / start])
    assert message.format(root=tmp_path) in str(e.value)


@pytest.mark.parametrize("spec, folders", [
    pytest.param("embeddings", ("modules/11_embeddings", "modules/12_embeddings"), id="one-name-two-numbers"),
    pytest.param("11", ("modules/11_embeddings", "src/11_tokenizers"), id="one-number-two-names"),
])
def test_a_module_named_in_two_folders_is_ambiguous(tmp_path: Path, spec: str, folders: tuple[str, ...]) -> None:
    checkout(tmp_path, *folders, notebook=None)
    with pytest.raises(LocateError, match=r"is ambiguous in .*: name it as NN_name"):
        locate(spec, [tmp_path])


def test_several_unknown_notebooks_are_ambiguous(tmp_path: Path) -> None:
    checkout(tmp_path, notebook=None)
    for name in ("a.ipynb", "b.ipynb"):
        shutil.copyfile(NOTEBOOK, tmp_path / "modules" / "11_embeddings" / name)
    with pytest.raises(LocateError, match=r"several notebooks .* \(a\.ipynb, b\.ipynb\)"):
        locate("11", [tmp_path])


def test_a_hint_ends_every_locate_error(tmp_path: Path) -> None:
    with pytest.raises(LocateError, match=r"; or pass --notebook PATH$"):
        locate("11", [tmp_path], hint="or pass --notebook PATH")


# ---- the installed rubric -------------------------------------------------------------------


def test_the_bundled_rubric_is_found_by_name_or_number() -> None:
    assert rubric_for(parse_module("embeddings")).path == modules.get("embeddings").rubric_path
    assert rubric_for(ModuleRef(11, None)).module == "embeddings"
    assert rubric_for(parse_module("12_attention")).module == rubric_for(ModuleRef(12, None)).module == "attention"
    with pytest.raises(LocateError, match="no bundled rubric grades module transformers"):
        rubric_for(parse_module("transformers"))


def test_an_installed_rubric_is_chosen_by_id_and_optionally_its_hash() -> None:
    (bundled,) = [r for r in bundled_rubrics() if r.module == "embeddings"]
    assert installed_rubric(bundled.id) == bundled
    assert installed_rubric(f"{bundled.id}@sha256:{bundled.sha256[:8]}") == bundled
    assert installed_rubric(f"{bundled.id}@{bundled.sha256}") == bundled


@pytest.mark.parametrize("selector", [
    pytest.param("tinytorch-11-embeddings@sha256:00000000", id="wrong-hash"),
    pytest.param("tinytorch-11-embeddings@sha256:1a2b", id="hash-too-short"),
    pytest.param("rubrics/embeddings.toml", id="a-path"),
    pytest.param("../embeddings", id="a-relative-path"),
])
def test_a_rubric_selector_is_never_a_path_and_must_match(selector: str) -> None:
    with pytest.raises(LocateError, match=r"no installed rubric is .* \(installed: .*tinytorch-11-embeddings@sha256:"):
        installed_rubric(selector)


# ---- which notebook is the student's ------------------------------------------------------------


def _git(root: Path, *args: str) -> None:
    import subprocess

    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@x", "HOME": str(root), "PATH": "/usr/bin:/bin"})


def shipped_checkout(root: Path) -> Path:
    """A git checkout whose committed module notebook is TinyTorch's own (here: any correct one)."""
    checkout(root, notebook="modules/11_embeddings/embeddings.ipynb")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "TinyTorch")
    return root


def test_a_jupyter_copy_the_student_saved_is_graded_not_the_shipped_notebook(tmp_path: Path) -> None:
    root = shipped_checkout(tmp_path)
    folder = root / "modules" / "11_embeddings"
    (folder / "11_embeddings-Copy1.ipynb").write_bytes((SUBMISSIONS / "bug_sin_exponent.ipynb").read_bytes())
    (folder / "Untitled.ipynb").write_text('{"cells": []}')  # an empty notebook Jupyter made: never a candidate
    work = locate("embeddings", [root])
    assert work.path.name == "11_embeddings-Copy1.ipynb"
    assert work.note == "graded 11_embeddings-Copy1.ipynb (the one changed since the checkout); not graded: " \
                        "embeddings.ipynb"


def test_two_notebooks_changed_since_the_checkout_ask_which(tmp_path: Path) -> None:
    root = shipped_checkout(tmp_path)
    folder = root / "modules" / "11_embeddings"
    (folder / "embeddings.ipynb").write_bytes((SUBMISSIONS / "bug_sin_exponent.ipynb").read_bytes())
    (folder / "11_embeddings-Copy1.ipynb").write_bytes((SUBMISSIONS / "bug_pe_detached.ipynb").read_bytes())
    with pytest.raises(LocateError, match=r"several notebooks .* were changed since the checkout "
                                          r"\(11_embeddings-Copy1\.ipynb, embeddings\.ipynb\): say which"):
        locate("11", [root])


def test_the_unchanged_shipped_notebook_is_graded_only_with_a_warning(tmp_path: Path) -> None:
    work = locate("11", [shipped_checkout(tmp_path)])
    assert work.path.name == "embeddings.ipynb"
    assert "TinyTorch's own notebook, unchanged since the checkout" in work.note and "--notebook PATH" in work.note


def test_without_git_a_newer_copy_wins_over_the_course_name(tmp_path: Path) -> None:
    import os

    checkout(tmp_path)
    folder = tmp_path / "modules" / "11_embeddings"
    copy = folder / "11_embeddings-Copy1.ipynb"
    shutil.copyfile(NOTEBOOK, copy)
    os.utime(folder / "11_embeddings.ipynb", (1_000_000, 1_000_000))
    work = locate("11", [tmp_path])
    assert work.path == copy and work.note.startswith("graded 11_embeddings-Copy1.ipynb (the one you changed last)")
