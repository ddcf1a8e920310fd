"""One place for each service setting: ``ServiceSettings``' fields say what they mean, and both
``grader serve --help`` / ``grader worker --help`` and docs/DEPLOY.md's settings table are made
from them. The table is rewritten with ``python -m tests.service.test_settings --write``."""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from grader.cli import build_parser
from grader.load import LoadLimits
from grader.service.settings import COUNTS, TUNABLE, UPLOAD_BYTES, ServiceSettings, option_help, settings_table

DEPLOY = Path(__file__).resolve().parents[2] / "docs" / "DEPLOY.md"
TABLE = re.compile(r"(<!-- settings table:[^\n]*-->\n)(.*?)(<!-- end of the settings table -->)", re.S)


def test_the_deploy_doc_table_is_the_settings_models() -> None:
    found = TABLE.search(DEPLOY.read_text(encoding="utf-8"))
    assert found is not None, "docs/DEPLOY.md lost its settings table markers"
    assert found.group(2) == settings_table(), "run: python -m tests.service.test_settings --write"


def test_every_field_says_what_it_means_and_every_variable_is_the_one_read() -> None:
    for f in fields(ServiceSettings):
        assert f.metadata.get("help"), f"{f.name} has no help"
        if f.name in TUNABLE + COUNTS:
            assert f.metadata["env"] == f"GRADER_{f.name.upper()}"  # what from_env reads
    assert LoadLimits().max_bytes == UPLOAD_BYTES


def _help(command: str) -> str:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return " ".join(commands.choices[command].format_help().split())


@pytest.mark.parametrize(("command", "field", "default"), [
    pytest.param("serve", "data_dir", None, id="serve-data"),
    pytest.param("serve", "broker", None, id="serve-broker"),
    pytest.param("serve", "database", None, id="serve-database"),
    pytest.param("serve", "workers", "2", id="serve-workers"),
    pytest.param("worker", "workers", "the CPU count", id="worker-concurrency"),
    pytest.param("worker", "hostname", None, id="worker-hostname"),
    pytest.param("worker", "official", "official grading", id="worker-practice"),
])
def test_the_options_help_is_the_fields(command: str, field: str, default: str | None) -> None:
    said = " ".join(option_help(field, default=default).replace("%%", "%").split())
    assert said in _help(command)


if __name__ == "__main__" and "--write" in sys.argv:
    text = DEPLOY.read_text(encoding="utf-8")
    DEPLOY.write_text(TABLE.sub(lambda m: m.group(1) + settings_table() + m.group(3), text, count=1), encoding="utf-8")
    print(f"wrote the settings table of {DEPLOY}")
