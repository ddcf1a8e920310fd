"""A student's feedback as one self-contained HTML page: no script, no external resource.

Every string that reaches the page goes through ``html.escape``; the page also carries a
Content-Security-Policy that forbids scripts, so a missed escape could not run code.
"""

from __future__ import annotations

from html import escape

from ..models import Figure
from .pictures import data_uri, heatmaps
from .view import RELEASE, STATUS_TEXT, CheckView, StudentView, message_parts, withheld_sentence

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { margin-top: 2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid #eee; vertical-align: top; }
td.num, th.num { text-align: right; white-space: nowrap; }
.passed { color: #1a7f37; } .failed, .error, .crashed { color: #cf222e; } .timeout, .oom, .not_gradable { color: #9a6700; }
.muted { color: #666; } .note { background: #fff8c5; padding: .5rem .75rem; border-radius: 4px; }
section.check { border: 1px solid #ddd; border-radius: 6px; padding: .5rem 1rem; margin: 1rem 0; }
dt { font-weight: 600; margin-top: .5rem; } dd { margin: 0; }
pre { background: #f6f8fa; padding: .5rem; overflow-x: auto; white-space: pre-wrap; word-break: break-word; margin: .2rem 0; }
.maps { display: flex; gap: 1rem; flex-wrap: wrap; align-items: flex-start; }
.maps figure { margin: 0; text-align: center; } .maps img { image-rendering: pixelated; border: 1px solid #ccc; }
""".strip()


def page(title: str, body: str) -> str:
    """A complete HTML document around ``body`` (``title`` is escaped here)."""
    return (
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        "<meta name=\"referrer\" content=\"no-referrer\">\n"
        f"<title>{escape(title)}</title>\n<style>\n{STYLE}\n</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def render_html(view: StudentView) -> str:
    """The student's feedback page."""
    e = escape
    who = e(view.name) + f" ({e(view.student_id)})" if view.name else e(view.student_id)
    out = [f"<h1>Feedback: {e(view.assignment)}</h1>",
           f"<p class=\"muted\">{who} · file {e(view.file_name)}</p>"]
    if view.score is None:
        out.append(f"<p class=\"note\">{e(view.status_text)}</p>")
    else:
        passed = sum(c.passed for c in view.checks)
        out.append(f"<p>Score: <strong>{view.score:g} / {view.max_score:g}</strong> · {passed} of "
                   f"{len(view.checks)} checks passed</p>")
    if view.practice:
        out.append("<p class=\"note\">Practice run: the official grade comes from the course's sandbox.</p>")
    if view.checks:
        out.append("<h2>Checks</h2>")
        out.append(_table(view))
    if withheld := withheld_sentence(view):
        out.append(f"<p class=\"muted\">{e(withheld)}</p>")
    if view.failed_visible:
        out.append("<h2>What to fix</h2>")
        out.extend(_check_section(c) for c in view.failed_visible)
    if view.notes:
        out.append("<h2>Notes on your notebook</h2>\n<ul>")
        out.extend(f"<li>{e(n)}</li>" for n in view.notes)
        out.append("</ul>")
    return page(f"Feedback: {view.assignment} - {view.student_id}", "\n".join(out))


def _table(view: StudentView) -> str:
    e = escape
    rows = ["<table>", "<tr><th>check</th><th>what it checks</th><th>result</th><th class=\"num\">points</th></tr>"]
    for c in view.checks:
        if c.visible:
            result = f"<span class=\"{e(c.status)}\">{e(STATUS_TEXT[c.status])}</span>"
            if not c.passed:
                result = f"<a href=\"#check-{e(c.id)}\">{result}</a>"
        else:
            result = (f"<span class=\"{e(c.status)}\">{e(STATUS_TEXT[c.status])}</span>"
                      f"<br><span class=\"muted\">details {e(RELEASE[c.visibility])}</span>")
            if c.message and not c.passed:
                result += f"<br><span class=\"muted\">{e(c.message)}</span>"
        rows.append(f"<tr><td>{e(c.id)}</td><td>{e(c.title)}</td><td>{result}</td>"
                    f"<td class=\"num\">{c.score:g}/{c.max_score:g}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _check_section(c: CheckView) -> str:
    e = escape
    out = [f"<section class=\"check\" id=\"check-{e(c.id)}\">",
           f"<h3>{e(c.id)}: {e(c.title)} <span class=\"{e(c.status)}\">({e(STATUS_TEXT[c.status])}, "
           f"{c.score:g}/{c.max_score:g} points)</span></h3>", "<dl>"]
    for label, text in message_parts(c.message, c.status):
        out.append(f"<dt>{e(label)}</dt><dd><pre>{e(text)}</pre></dd>")
    out.append("</dl>")
    out.extend(_figure(f) for f in c.figures)
    out.append("</section>")
    return "\n".join(out)


def _figure(figure: Figure) -> str:
    maps = heatmaps(figure)
    e = escape
    panels = [("yours", maps.got_png), ("reference", maps.expected_png), ("|yours - reference|", maps.gap_png)]
    imgs = "".join(f"<figure><img alt=\"{e(maps.name)}: {e(label)}\" src=\"{data_uri(data)}\">"
                   f"<figcaption>{e(label)}</figcaption></figure>" for label, data in panels)
    legend = (f"{maps.rows} x {maps.cols} table. "
              f"Colours: blue negative, white 0, red positive (scale ±{maps.limit:.3g}); "
              f"purple: the difference, up to {maps.largest_gap:.3g}.")
    return (f"<div class=\"figure\"><p><strong>{e(maps.name)}</strong></p><div class=\"maps\">{imgs}</div>"
            f"<p class=\"muted\">{e(legend)}</p></div>")
