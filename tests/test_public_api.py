"""The package's public names are exactly these, and each one resolves."""

import grader


def test_exported_members() -> None:
    assert grader.__all__ == sorted([
        "CheckResult", "GradeReport", "Grader", "GraderError", "RubricError", "SandboxError",
        "SandboxUnavailable", "SubmissionError", "__version__", "grade",
    ])
    for name in grader.__all__:
        assert getattr(grader, name) is not None


def test_the_package_is_marked_typed() -> None:
    """PEP 561: without py.typed, mypy ignores our annotations in a course's own code."""
    from importlib.resources import files

    assert files("grader").joinpath("py.typed").is_file()


def test_grade_stays_the_function_after_every_module_is_imported() -> None:
    import importlib
    import pkgutil

    import grader

    for info in pkgutil.walk_packages(grader.__path__, "grader."):
        if not info.name.endswith("__main__") and ".migrations" not in info.name:  # alembic runs those
            importlib.import_module(info.name)
    assert callable(grader.grade) and grader.grade.__module__ == "grader.standalone"
