"""summary.html: the class page for staff, rendered from the summary.json data."""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import quote

from ..batch.names import is_safe
from .html import page
from .pictures import histogram_svg

STAFF_BANNER = ("Staff page: it names students and quotes the details of hidden checks. "
                "Do not publish it; students get the pages in feedback/.")


def render_summary_html(summary: dict[str, Any]) -> str:
    e = escape
    a, counts, score = summary["assignment"], summary["counts"], summary["score"]
    out = [f"<h1>Class summary: {e(a['title'] or a['id'])}</h1>",
           f"<p class=\"note\">{e(STAFF_BANNER)}</p>"]
    parts = [f"{counts['submissions']} submissions", f"{counts['graded']} graded",
             f"{counts['invalid']} invalid", f"{counts['failed_to_grade']} could not be graded"]
    if counts["missing"]:
        parts.append(f"{counts['missing']} in the roster without a submission")
    out.append(f"<p>{e(', '.join(parts))}.</p>")
    if score["mean"] is not None:
        out.append(f"<p>Score out of {a['max_score']:g}: mean {score['mean']:.4g}, median {score['median']:.4g}, "
                   f"min {score['min']:g}, max {score['max']:g}, standard deviation {score['stdev']:.3g}.</p>")
    if summary["warnings"]:
        out.append("<h2>Warnings</h2>\n<ul>")
        out.extend(f"<li class=\"failed\">{e(w)}</li>" for w in summary["warnings"])
        out.append("</ul>")
    hist = summary["histogram"]
    out.append("<h2>Score distribution</h2>")
    out.append(histogram_svg(hist["counts"], hist["edges"], title=f"Scores of {counts['graded']} graded submissions",
                             x_label="score, % of the maximum"))
    out.append(_checks_table(summary["checks"]))
    out.append(_causes_table(summary["failure_causes"]))
    if summary["not_graded"]:
        out.append("<h2>Not graded</h2>\n<table><tr><th>student</th><th>status</th><th>reason</th></tr>")
        out.extend(f"<tr><td>{e(r['student_id'])}</td><td>{e(r['status'])}</td><td><pre>{e(r['reason'])}</pre></td></tr>"
                   for r in summary["not_graded"])
        out.append("</table>")
    if summary["missing"]:
        out.append("<h2>In the roster, no submission</h2>")
        out.append(f"<p>{e(', '.join(summary['missing']))}</p>")
    out.append(_students_table(summary["students"]))
    return page(f"Class summary: {a['title'] or a['id']}", "\n".join(out))


def _checks_table(checks: list[dict[str, Any]]) -> str:
    e = escape
    rows = ["<h2>Pass rate per check</h2>", "<table><tr><th>check</th><th>what it checks</th><th>visibility</th>"
            "<th class=\"num\">points</th><th>pass rate</th><th>not passed</th></tr>"]
    for c in checks:
        rate = c["pass_rate"]
        bar = ("" if rate is None else
               f"<div style=\"background:#eee;width:8rem;height:.7rem;display:inline-block\">"
               f"<div style=\"background:{'#cf222e' if c['nearly_all_fail'] else '#4a7ab5'};"
               f"width:{100 * rate:.1f}%;height:100%\"></div></div> ")
        label = "no data" if rate is None else f"{100 * rate:.0f}% ({c['passed']}/{c['graded']})"
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(c["statuses"].items()) if s != "passed")
        rows.append(f"<tr><td>{e(c['id'])}</td><td>{e(c['title'])}</td><td>{e(c['visibility'])}</td>"
                    f"<td class=\"num\">{c['points']:g}</td><td>{bar}{e(label)}</td><td>{e(statuses)}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _causes_table(causes: list[dict[str, Any]]) -> str:
    e = escape
    if not causes:
        return "<h2>Top failure causes</h2>\n<p>No check failed.</p>"
    rows = ["<h2>Top failure causes</h2>",
            "<table><tr><th class=\"num\">students</th><th>check</th><th>likely cause</th><th>who</th></tr>"]
    for c in causes:
        variants = f" <span class=\"muted\">({c['variants']} variants)</span>" if c["variants"] > 1 else ""
        who = ", ".join(c["students"][:8]) + (f" and {len(c['students']) - 8} more" if len(c["students"]) > 8 else "")
        rows.append(f"<tr><td class=\"num\">{c['count']}</td><td>{e(c['check'])}</td><td>{e(c['cause'])}{variants}"
                    f"</td><td class=\"muted\">{e(who)}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _students_table(students: list[dict[str, Any]]) -> str:
    e = escape
    rows = ["<h2>Students</h2>", "<table><tr><th>student</th><th>name</th><th>status</th>"
            "<th class=\"num\">score</th><th>feedback</th></tr>"]
    for s in students:
        sid = s["student_id"]
        link = (f"<a href=\"feedback/{e(quote(sid))}.html\">html</a> · <a href=\"feedback/{e(quote(sid))}.md\">md</a>"
                if is_safe(sid) else "")
        score = "" if s["score"] is None else f"{s['score']:g}/{s['max_score']:g}"
        rows.append(f"<tr><td>{e(sid)}</td><td>{e(s['name'])}</td><td>{e(s['status'])}</td>"
                    f"<td class=\"num\">{score}</td><td>{link}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)
