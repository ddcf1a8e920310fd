"""grader.settings: its docstring's table of variables is the one its fields say (they cannot drift)."""

from __future__ import annotations

from dataclasses import fields

import grader.settings


def test_the_docstring_table_is_the_fields() -> None:
    assert grader.settings.__doc__ is not None
    assert grader.settings.variables_table() in grader.settings.__doc__


def test_each_fields_variable_is_the_one_read() -> None:
    read = grader.settings.EnvironmentSettings.from_environ.__code__.co_consts
    for f in fields(grader.settings.EnvironmentSettings):
        assert f.metadata["variable"] in read, f"{f.name}: from_environ does not read {f.metadata['variable']}"
