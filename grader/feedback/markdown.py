"""A student's feedback as Markdown (CommonMark/GFM), with the same content as the HTML page.

Student text is either escaped inline (``md_text``: every Markdown punctuation backslash-escaped,
``<``/``>``/``&`` as entities, newlines folded) or put in a fenced block longer than any run of
backticks inside it (``md_block``), where nothing is interpreted. Pictures are ``data:`` PNGs.
"""

from __future__ import annotations

import re

from ..models import Figure
from .pictures import data_uri, heatmaps
from .view import STATUS_TEXT, CheckView, StudentView, message_parts, total_note, withheld_sentence

_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
_INLINE = set("\\`*_[]|~!")  # code, emphasis, links/images, table cells, strikethrough
_BLOCK_START = re.compile(r"^([#+=-]|\d+(?=[.)]))")  # a heading, list or rule marker at the start


def md_text(text: str) -> str:
    """Inline-safe Markdown for untrusted text: one line where no link, image, HTML, code span,
    emphasis, table cell or block marker can form."""
    folded = " ".join(text.split())
    escaped = "".join(_ENTITIES.get(ch) or (f"\\{ch}" if ch in _INLINE else ch) for ch in folded)
    m = _BLOCK_START.match(escaped)
    if m is None:
        return escaped
    if m.group(1)[0].isdigit():
        end = m.end()
        return escaped[:end] + "\\" + escaped[end:]
    return "\\" + escaped


def md_block(text: str) -> str:
    """A fenced code block that ``text`` cannot close, whatever backticks it holds."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text.replace(chr(13), '')}\n{fence}"


def render_markdown(view: StudentView) -> str:
    """The student's feedback as a Markdown document."""
    who = f"{md_text(view.name)} ({md_text(view.student_id)})" if view.name else md_text(view.student_id)
    out = [f"# Feedback: {md_text(view.assignment)}", "", f"{who}, file {md_text(view.file_name)}", ""]
    if view.score is None:
        out += [f"> {md_text(view.status_text)}", ""]
    else:
        passed = sum(c.passed for c in view.checks)
        out += [f"**Score: {view.score:g} / {view.max_score:g}**, {passed} of {len(view.checks)} checks passed", ""]
        if note := total_note(view):
            out += [f"> {md_text(note)}", ""]
    if view.late:
        out += [f"> {view.late_text}", ""]
    if view.practice:
        out += ["> Practice run: the official grade comes from the course's sandbox.", ""]
    if view.checks:
        out += ["## Checks", "", "| check | what it checks | result | points |", "| --- | --- | --- | ---: |"]
        out += [_row(c) for c in view.checks]
        out.append("")
    if withheld := withheld_sentence(view):
        out += [md_text(withheld), ""]
    if view.failed_visible:
        out += ["## What to fix", ""]
        for c in view.failed_visible:
            out += _check_section(c)
    if view.notes:
        out += ["## Notes on your notebook", ""]
        out += [f"- {md_text(n)}" for n in view.notes]
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _row(c: CheckView) -> str:
    result = STATUS_TEXT[c.status]
    return f"| {md_text(c.id)} | {md_text(c.title)} | {md_text(result)} | {c.score:g}/{c.max_score:g} |"


def _check_section(c: CheckView) -> list[str]:
    out = [f"### {md_text(c.id)}: {md_text(c.title)} ({md_text(STATUS_TEXT[c.status])}, "
           f"{c.score:g}/{c.max_score:g} points)", ""]
    for label, text in message_parts(c.message, c.status):
        out += [f"**{label}**", "", md_block(text), ""]
    for figure in c.figures:
        out += _figure(figure)
    return out


def _figure(figure: Figure) -> list[str]:
    maps = heatmaps(figure)
    name = md_text(maps.name)
    images = " ".join(f"![{name}: {label}]({data_uri(data)})" for label, data in
                      (("yours", maps.got_png), ("reference", maps.expected_png), ("difference", maps.gap_png)))
    legend = (f"{maps.rows} x {maps.cols} table. "
              f"Left to right: yours, the reference, the difference. Blue negative, white 0, red positive "
              f"(scale ±{maps.limit:.3g}); purple: the difference, up to {maps.largest_gap:.3g}.")
    return [f"**{name}**", "", images, "", md_text(legend), ""]
