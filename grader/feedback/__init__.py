"""Feedback reports: a page per student (HTML and Markdown) and a class summary for staff.

    view.py          StoredResult -> StudentView, the student-safe projection (the only input of the
                     student renderers, so hidden checks cannot leak through them)
    html.py          StudentView -> self-contained HTML (templates/student.html; CSP without scripts)
    markdown.py      StudentView -> Markdown (escaped inline text, unbreakable code fences)
    pictures.py      heatmap PNGs and the histogram's layout, by hand (no plotting dependency)
    summary.py       results -> summary.json data (pure)
    summary_html.py  summary data -> summary.html (templates/summary.html)
    templating.py    the Jinja2 environment of every HTML page: package templates, autoescaped
    templates/       page.html (the shell every page extends), student.html, summary.html,
                     histogram.svg, feedback.css
    write.py         write_feedback(results_dir): the I/O edge

Names are imported lazily, so that importing ``grader.feedback.view`` does not load numpy.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "StudentView": "view", "student_view": "view", "render_html": "html", "render_markdown": "markdown",
    "md_block": "markdown", "md_text": "markdown", "build_summary": "summary",
    "render_summary_html": "summary_html", "write_feedback": "write",
}

__all__ = [
    "StudentView", "build_summary", "md_block", "md_text", "render_html", "render_markdown", "render_summary_html",
    "student_view", "write_feedback",
]

if TYPE_CHECKING:
    from .html import render_html
    from .markdown import md_block, md_text, render_markdown
    from .summary import build_summary
    from .summary_html import render_summary_html
    from .view import StudentView, student_view
    from .write import write_feedback


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
