"""The Jinja2 environment behind every HTML page the grader writes.

Templates live in ``grader/feedback/templates/`` and are loaded from the installed package, so a
wheel carries them. Autoescaping is on for every template (and for templates made from strings):
a value reaches the page escaped unless the template code itself marks it safe, which ours never
does with student text. ``StrictUndefined`` turns a misspelt name into an error instead of an
empty string.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape


@cache
def environment() -> Environment:
    """The shared environment; a ``fmt`` filter formats numbers as ``format(value, spec)`` does."""
    env = Environment(
        loader=PackageLoader("grader.feedback", "templates"),
        autoescape=select_autoescape(("html", "svg"), default_for_string=True, default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["fmt"] = format
    return env


def render(template: str, **context: Any) -> str:
    """Render ``templates/<template>`` with ``context``."""
    return environment().get_template(template).render(**context)
