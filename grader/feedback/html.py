"""A student's feedback as one self-contained HTML page (``templates/student.html``).

The template is autoescaped, so every string from the view reaches the page escaped; the page
also carries a Content-Security-Policy that forbids scripts, so a missed escape could not run code.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..models import Figure
from .pictures import data_uri, heatmaps
from .templating import render
from .view import STATUS_TEXT, CheckView, StudentView, message_parts, total_note, withheld_sentence


@dataclass(frozen=True)
class FigureView:
    """One figure as drawn: three heatmap panels (label, data URI) and a legend."""

    name: str
    panels: tuple[tuple[str, str], ...]
    legend: str


@dataclass(frozen=True)
class CheckSection:
    """A failed visible check's section: its message split into labelled parts, and its figures."""

    check: CheckView
    parts: list[tuple[str, str]]
    figures: tuple[FigureView, ...]


def render_html(view: StudentView) -> str:
    """The student's feedback page."""
    sections = [CheckSection(c, message_parts(c.message, c.status), tuple(figure_view(f) for f in c.figures))
                for c in view.failed_visible]
    return render("student.html", view=view, passed=sum(c.passed for c in view.checks),
                  withheld=withheld_sentence(view), total_note=total_note(view), sections=sections,
                  status_text=STATUS_TEXT)


def figure_view(figure: Figure) -> FigureView:
    maps = heatmaps(figure)
    panels = (("yours", maps.got_png), ("reference", maps.expected_png), ("|yours - reference|", maps.gap_png))
    legend = (f"{maps.rows} x {maps.cols} table. "
              f"Colours: blue negative, white 0, red positive (scale ±{maps.limit:.3g}); "
              f"purple: the difference, up to {maps.largest_gap:.3g}.")
    return FigureView(maps.name, tuple((label, data_uri(data)) for label, data in panels), legend)
