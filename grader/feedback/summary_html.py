"""summary.html: the class page for staff (``templates/summary.html``), from the summary.json data."""

from __future__ import annotations

from typing import Any

from ..results.names import is_safe
from .pictures import histogram
from .templating import render

STAFF_BANNER = ("Staff page: it names students and quotes the details of hidden checks. "
                "Do not publish it; students get the pages in feedback/.")


def render_summary_html(summary: dict[str, Any]) -> str:
    counts, hist = summary["counts"], summary["histogram"]
    parts = [f"{counts['submissions']} submissions", f"{counts['graded']} graded",
             f"{counts['invalid']} invalid", f"{counts['failed_to_grade']} could not be graded"]
    if counts["missing"]:
        parts.append(f"{counts['missing']} in the roster without a submission")
    if counts.get("late"):
        parts.append(f"{counts['late']} handed in late")
    chart = histogram(hist["counts"], hist["edges"], title=f"Scores of {counts['graded']} graded submissions",
                      x_label="score, % of the maximum")
    return render("summary.html", s=summary, h=chart, counts_line=", ".join(parts), staff_banner=STAFF_BANNER,
                  linkable=is_safe)
