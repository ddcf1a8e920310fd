"""Feedback reports: student pages (HTML, Markdown) and the class summary, from a results store.

Most tests build the store by hand from the real rubric (fast, and lets them plant hostile text and
hidden-check secrets); one runs a real batch end to end.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import struct
import xml.etree.ElementTree as ET
import zlib
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from markupsafe import escape as markup_escape

from grader.feedback import md_block, md_text, render_html, render_markdown, student_view, write_feedback
from grader.feedback.pictures import heatmaps, histogram_svg, png
from grader.feedback.summary import build_summary, cause_of
from grader.feedback.summary_html import render_summary_html
from grader.feedback.view import CheckView, StudentView
from grader.models import BackendInfo, CheckResult, ExtractionSummary, Figure, GradeReport
from grader.results.record import StoredResult
from grader.results.store import SQLiteStore
from grader.rubric import Rubric, load_rubric
from grader.visibility import DateError, Release, release_for

ROOT = Path(__file__).resolve().parents[1]
HOSTILE_NAME = "<script>alert(1)</script> ](javascript:alert(2)) [x](javascript:alert(3)) [y](https://evil.example/)"
HOSTILE_MESSAGE = ("Called: Embedding(4, 2)\nraised ValueError: <img src=x onerror=alert(4)> "
                   "](javascript:alert(5)) ```\n</pre><script>alert(6)</script>\n"
                   "Likely cause: ids <b>out</b> of range.\nHint: check ids.")
SECRET = "SECRET-HIDDEN-INPUT-31337"
HIDDEN_VALUE = 4242.0


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric()


def make_report(rubric: Rubric, *, fail: dict[str, str] | None = None, figures: dict[str, Figure] | None = None,
                score: float | None = None, detail: dict[str, str] | None = None) -> GradeReport:
    """A report on the real rubric: every check passes except those in ``fail`` (id -> message)."""
    fail, figures, detail = fail or {}, figures or {}, detail or {}
    checks = []
    for spec in rubric.checks:
        if spec.id in fail:
            redacted = "Did not pass. Its details are not shown yet."
            message = fail[spec.id] if spec.public else redacted
            checks.append(CheckResult(id=spec.id, title=spec.title, status="failed", score=0.0, max_score=spec.points,
                                      visibility=spec.visibility, message=message,
                                      detail=detail.get(spec.id, fail[spec.id]),
                                      figures=(figures[spec.id],) if spec.id in figures else ()))
        else:
            checks.append(CheckResult(id=spec.id, title=spec.title, status="passed", score=spec.points,
                                      max_score=spec.points, visibility=spec.visibility, message=""))
    total = sum(c.score for c in checks) if score is None else score
    return GradeReport(submission="nb.ipynb", sha256="0" * 64, rubric_id=rubric.id, rubric_hash=rubric.sha256,
                       grader_version="test", seed=1, backend=BackendInfo(name="local", label="practice"),
                       extraction=ExtractionSummary(kept=(), dropped=(), syntax_errors=()), checks=tuple(checks),
                       score=total, max_score=rubric.max_score)


def stored(student: str, report: GradeReport | None = None, *, status: str = "graded", reason: str = "",
           name: str = "", file_name: str = "") -> StoredResult:
    return StoredResult(student_id=student, cache_key="k", sha256="0" * 64, file_name=file_name or f"{student}.ipynb",
                        name=name, email=f"{student}@example.org", submitted_at="2026-01-01 10:00:00",
                        status=status, reason=reason,  # type: ignore[arg-type]
                        score=report.score if report else None, max_score=report.max_score if report else None,
                        report=report, graded_at="2026-01-01T10:00:00+00:00")


def table(rows: int, cols: int, value: float) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(value if (r + c) % 2 else -value for c in range(cols)) for r in range(rows))


VISIBLE_FIGURE = Figure(name="table_d4", got=table(6, 4, 1.0), expected=table(6, 4, 0.5))
HIDDEN_FIGURE = Figure(name="hidden_table", got=table(3, 3, HIDDEN_VALUE), expected=table(3, 3, 1.0))


@pytest.fixture()
def hostile(rubric: Rubric) -> StoredResult:
    report = make_report(
        rubric,
        fail={"emb_index_error": HOSTILE_MESSAGE,
              "sin_values": "Called: create_sinusoidal_embeddings(6, D)\ntable_d4: shape (6, 4): 24 of 24 values differ"
                            "\nLikely cause: sin and cos are swapped.",
              "grad_batch": f"Called: {SECRET}\nLikely cause: hidden cause {SECRET}.",
              "layer_sin_values": f"Called: {SECRET}"},
        figures={"sin_values": VISIBLE_FIGURE, "grad_batch": HIDDEN_FIGURE, "layer_sin_values": HIDDEN_FIGURE})
    return stored("mallory", report, name=HOSTILE_NAME, file_name="<b>evil</b>.ipynb")


class Tags(HTMLParser):
    """Every start tag with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags_of(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Tags()
    parser.feed(html)
    return parser.tags


def assert_inert(html: str) -> None:
    """No script, no event handler, no javascript: URL anywhere in the markup."""
    for tag, attrs in tags_of(html):
        assert tag not in ("script", "iframe", "object", "embed"), tag
        for key, value in attrs.items():
            assert not key.startswith("on"), (tag, key)
            assert not (value or "").strip().lower().startswith("javascript:"), (tag, key, value)
            if tag == "img" and key == "src":
                assert (value or "").startswith("data:image/png;base64,")


# ---- student HTML -------------------------------------------------------------------------


def test_html_escapes_student_name_file_name_and_message(hostile: StoredResult, rubric: Rubric) -> None:
    html = render_html(student_view(hostile, rubric))
    assert_inert(html)
    assert "<script>alert" not in html and "<img src=x" not in html and "<b>evil" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(4)&gt;" in html
    assert "&lt;b&gt;evil&lt;/b&gt;.ipynb" in html
    assert "Content-Security-Policy" in html and "default-src 'none'" in html


def test_html_shows_input_expected_vs_got_likely_cause_and_hint_of_failed_checks(hostile: StoredResult,
                                                                                rubric: Rubric) -> None:
    html = render_html(student_view(hostile, rubric))
    section = html[html.index('id="check-sin_values"'):]
    section = section[:section.index("</section>")]
    assert "<dt>Input</dt><dd><pre>create_sinusoidal_embeddings(6, D)</pre>" in section
    assert "<dt>Expected vs got</dt><dd><pre>table_d4: shape (6, 4)" in section
    assert "<dt>Likely cause</dt><dd><pre>sin and cos are swapped.</pre>" in section
    assert "Score: <strong>" in html


def test_html_draws_visible_figures_as_three_heatmaps_and_never_hidden_ones(hostile: StoredResult,
                                                                             rubric: Rubric) -> None:
    html = render_html(student_view(hostile, rubric))
    images = [attrs for tag, attrs in tags_of(html) if tag == "img"]
    assert len(images) == 3  # yours, reference, difference of the one visible figure
    assert all("table_d4" in (a.get("alt") or "") for a in images)
    assert "hidden_table" not in html
    width, height = _png_size(base64.b64decode((images[0]["src"] or "").split(",", 1)[1]))
    assert (width, height) == (4 * 24, 6 * 24)


def test_hidden_and_unreleased_checks_show_nothing_and_the_total_says_so(hostile: StoredResult,
                                                                         rubric: Rubric) -> None:
    """Gradescope's levels: a hidden check shows nothing, ever; an after_due_date one nothing until
    the due date; the total counts only what is shown, and says so."""
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    shown_points = sum(c.points for c in rubric.checks if c.visibility == "visible")
    lost = sum(c.points for c in rubric.checks if c.id in ("emb_index_error", "sin_values"))  # the failed visible ones
    view = student_view(hostile, rubric, release=Release(due_date=now + timedelta(days=1), now=now))
    assert {c.visibility for c in view.checks} == {"visible"}
    assert view.max_score == shown_points and view.score == shown_points - lost
    for text in (render_html(view), render_markdown(view)):
        plain = text.replace("\\", "")
        assert SECRET not in text and "hidden cause" not in text
        for check_id in ("grad_batch", "layer_sin_values"):  # no row: no status, no points, not even the name
            assert f"<td>{check_id}</td>" not in plain and f"| {check_id} |" not in plain
        assert "Not shown yet: 1 check, released after the due date." in plain
        assert "checks shown here" in plain and "the gradebook gets the score on all" in " ".join(plain.split())
        assert f"{shown_points - lost:g} / {shown_points:g}" in plain
    after = student_view(hostile, rubric, release=Release(due_date=now - timedelta(days=1), now=now))
    released = {c.id: c for c in after.checks}
    assert "grad_batch" not in released  # hidden: never
    assert released["layer_sin_values"].message == f"Called: {SECRET}"  # its full diagnosis, once released
    assert "| layer_sin_values |" in render_markdown(after).replace("\\", "")
    assert "Not shown yet" not in render_markdown(after)


def test_the_release_dates_come_from_the_rubric_or_the_command_line(rubric: Rubric) -> None:
    dated = rubric.model_copy(update={"due_date": "2026-03-02"})
    now = datetime(2026, 3, 2, 12, tzinfo=UTC)
    assert not release_for(None, None, now=now).shows("after_due_date")
    assert not release_for(dated.due_date, None, now=now).shows("after_due_date")  # the end of that day
    assert release_for(dated.due_date, None, due_date="2026-03-01T00:00:00Z", now=now).shows("after_due_date")
    assert release_for(None, None, publish_date="2026-03-02T11:00", now=now).shows("after_published")
    assert not release_for(None, None, publish_date="2026-03-02T11:00", now=now).shows("hidden")
    with pytest.raises(DateError, match="not a date"):
        release_for(None, None, due_date="next friday")


def test_not_graded_pages_explain_without_leaking_grader_internals(rubric: Rubric) -> None:
    invalid = stored("ivan", status="invalid", reason="ivan.ipynb: not valid JSON (Expecting value at line 1)")
    fault = stored("fay", status="failed_to_grade", reason="internal grader error: KeyError: '/srv/secret/path'")
    html_invalid = render_html(student_view(invalid, rubric))
    assert "not valid JSON" in html_invalid and "Score:" not in html_invalid
    assert "What to fix" not in html_invalid and "<section" not in html_invalid
    md_fault = render_markdown(student_view(fault, rubric))
    assert "/srv/secret/path" not in md_fault and "problem on the grading side" in md_fault


PWN = '<x-pwn title="1" onclick="alert(7)">&amp;</x-pwn>'


def assert_shown_as_text(page: str) -> None:
    """PWN appears, escaped, and never becomes markup."""
    assert_inert(page)
    assert "x-pwn" not in [tag for tag, _ in tags_of(page)] and "<x-pwn" not in page
    assert str(markup_escape(PWN)) in page


@pytest.mark.parametrize("graded", [True, False], ids=["graded", "not-graded"])
def test_every_text_of_a_student_page_is_escaped(graded: bool) -> None:
    message = f"Called: {PWN}\n{PWN}\nLikely cause: {PWN}\nHint: {PWN}"
    visible = CheckView(id=f"c{PWN}", title=PWN, status="failed", score=0.0, max_score=1.0, visibility="visible",
                        message=message, figures=(Figure(name=PWN, got=((1.0, 2.0),), expected=((2.0, 2.0),)),))
    released = CheckView(id=f"h{PWN}", title=PWN, status="failed", score=0.0, max_score=1.0,
                         visibility="after_due_date", message=PWN, figures=())
    view = StudentView(student_id=PWN, name=PWN, file_name=PWN, assignment=PWN, status="graded", status_text=PWN,
                       score=0.0 if graded else None, max_score=2.0, checks=(visible, released), notes=(PWN,),
                       practice=True)
    page = render_html(view)
    assert_shown_as_text(page)
    if graded:
        assert page.count('<section class="check"') == 2 and len([t for t, _ in tags_of(page) if t == "img"]) == 3


# ---- student Markdown ---------------------------------------------------------------------


def rendered_markdown(text: str) -> str:
    return str(MarkdownIt("commonmark", {"html": True}).enable("table").render(text))


def test_markdown_escapes_student_text_so_no_link_html_or_script_forms(hostile: StoredResult, rubric: Rubric) -> None:
    md = render_markdown(student_view(hostile, rubric))
    html = rendered_markdown(md)
    assert_inert(html)
    assert not [attrs for tag, attrs in tags_of(html) if tag == "a"]  # the hostile "links" stay text
    assert "<script>" not in html and "<b>evil" not in html and "<b>out</b>" not in html
    assert "](javascript:alert(2))" in html  # shown, as text


@pytest.mark.parametrize("text", [
    pytest.param("[x](javascript:alert(1))", id="javascript-link"),
    pytest.param("[x](https://evil.example/)", id="link"),
    pytest.param("[x]: https://evil.example/ [x]", id="reference-link"),
    pytest.param("![x](javascript:alert(1))", id="image"),
    pytest.param("<script>alert(1)</script>", id="script"),
    pytest.param("<javascript:alert(1)>", id="autolink"),
    pytest.param("# heading\n- item\n1. one", id="blocks"),
    pytest.param("*em* _em_ `code` | pipe ~~del~~ &amp;", id="inline"),
])
def test_md_text_renders_as_the_literal_text(text: str) -> None:
    html = rendered_markdown(f"| a |\n| --- |\n| {md_text(text)} |\n\n{md_text(text)}")
    assert [tag for tag, _ in tags_of(html)] == ["table", "thead", "tr", "th", "tbody", "tr", "td", "p"]
    assert html.count(" ".join(text.split()).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")) == 2


def test_md_block_cannot_be_closed_by_backticks_inside() -> None:
    text = "before\n```\n<script>alert(1)</script>\n````\nafter"
    html = rendered_markdown(md_block(text) + "\n\nend")
    assert [tag for tag, _ in tags_of(html)] == ["pre", "code", "p"]
    assert "&lt;script&gt;" in html


# ---- pictures -----------------------------------------------------------------------------


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _png_pixels(data: bytes) -> list[bytes]:
    width, height = _png_size(data)
    raw = zlib.decompress(data[data.index(b"IDAT") + 4:data.index(b"IEND") - 8])
    stride = 1 + 3 * width
    return [raw[y * stride + 1:(y + 1) * stride] for y in range(height)]


def test_png_encoder_writes_decodable_rgb_rows() -> None:
    import numpy as np

    rgb = np.zeros((2, 3, 3), dtype=np.uint8)
    rgb[0, 0] = (255, 0, 0)
    rgb[1, 2] = (0, 0, 255)
    rows = _png_pixels(png(rgb))
    assert rows[0][:3] == b"\xff\x00\x00" and rows[1][6:9] == b"\x00\x00\xff"


def test_heatmap_colours_share_one_scale_red_positive_blue_negative() -> None:
    maps = heatmaps(Figure(name="t", got=((2.0, -2.0),), expected=((1.0, 0.0),)))
    assert maps.limit == 2.0 and maps.largest_gap == 2.0
    got, expected = _png_pixels(maps.got_png)[0], _png_pixels(maps.expected_png)[0]
    scale = _png_size(maps.got_png)[0] // 2  # pixels per cell
    assert got[:3] == bytes((178, 24, 43))  # +limit: full red
    assert got[3 * scale:3 * scale + 3] == bytes((33, 102, 172))  # -limit: full blue
    assert expected[3 * scale:3 * scale + 3] == b"\xff\xff\xff"  # 0: white


def test_histogram_svg_is_valid_xml_with_escaped_text() -> None:
    svg = histogram_svg([0, 3, 1], [0, 50, 75, 100], title="<b>class & co</b>", x_label="%")
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    assert "<b>" not in svg and "&lt;b&gt;class &amp; co&lt;/b&gt;" in svg
    assert len([e for e in root.iter() if e.tag.endswith("rect")]) == 3


# ---- class summary ------------------------------------------------------------------------


def class_results(rubric: Rubric) -> list[StoredResult]:
    out = []
    for n in range(5):
        fail = {"emb_xavier": f"Likely cause: the limit is {n + 1}.5 times too small."}  # everyone fails it
        if n < 2:
            fail["sin_values"] = "Likely cause: sin and cos are swapped."
            fail["grad_batch"] = f"Likely cause: hidden detail {SECRET}."
        out.append(stored(f"s{n}", make_report(rubric, fail=fail)))
    out.append(stored("bad", status="invalid", reason="bad.ipynb: not valid JSON"))
    out.append(stored("crash", status="failed_to_grade", reason="sandbox unavailable"))
    return out


def test_summary_counts_pass_rates_histogram_and_warns_on_a_check_nearly_everyone_fails(rubric: Rubric) -> None:
    summary = build_summary(class_results(rubric), rubric, missing=["ghost"])
    assert summary["counts"] == {"submissions": 7, "graded": 5, "invalid": 1, "failed_to_grade": 1, "missing": 1,
                                 "late": 0, "did_not_run": 0}
    checks = {c["id"]: c for c in summary["checks"]}
    assert checks["emb_xavier"]["pass_rate"] == 0.0 and checks["emb_xavier"]["nearly_all_fail"]
    assert checks["sin_values"]["pass_rate"] == 0.6 and not checks["sin_values"]["nearly_all_fail"]
    assert checks["emb_shape"]["pass_rate"] == 1.0
    assert sum(summary["histogram"]["counts"]) == 5 and len(summary["histogram"]["edges"]) == 11
    assert any(w.startswith("emb_xavier: 5 of 5 graded submissions fail it") for w in summary["warnings"])
    assert any("could not be graded" in w for w in summary["warnings"])
    assert summary["visibility"] == {"visible": 28, "hidden": 1, "after_due_date": 1}


def test_top_failure_causes_group_variants_that_differ_only_in_numbers(rubric: Rubric) -> None:
    causes = build_summary(class_results(rubric), rubric)["failure_causes"]
    top = causes[0]
    assert (top["checks"], top["count"], top["variants"]) == (["emb_xavier"], 5, 5)
    assert top["cause"].startswith("the limit is ")
    assert {"checks": ["sin_values"], "cause": "sin and cos are swapped", "variants": 1, "count": 2,
            "students": ["s0", "s1"]} in causes


def test_cause_of_non_failed_statuses() -> None:
    def check(status: str, detail: str) -> CheckResult:
        return CheckResult(id="x_y", title="t", status=status, score=0, max_score=1,  # type: ignore[arg-type]
                           visibility="visible", message="", detail=detail)

    assert cause_of(check("error", "Called: f()\nraised IndexError: index 5 is out of bounds")) == "raised IndexError"
    assert cause_of(check("timeout", "Called: f()\ndid not finish within 5 s: an endless loop")).startswith("did not")
    assert cause_of(check("failed", "Called: f()\nout: differs")) == "wrong output (no specific cause recognised)"


def test_write_feedback_builds_pages_and_summary_from_the_store(tmp_path: Path, rubric: Rubric,
                                                                hostile: StoredResult) -> None:
    with SQLiteStore(tmp_path) as store:
        store.set_meta("rubric", rubric.model_dump_json())
        for result in [*class_results(rubric), hostile]:
            store.put(result)
    (tmp_path / "roster.csv").write_text("student_id,name\ns0,Ann\nghost,Gus\n", encoding="utf-8")
    write_feedback(tmp_path)
    pages = sorted(p.name for p in (tmp_path / "feedback").iterdir())
    assert pages == sorted(f"{s}.{ext}" for s in ("s0", "s1", "s2", "s3", "s4", "bad", "crash", "mallory")
                           for ext in ("html", "md"))
    assert "Ann (s0)" in (tmp_path / "feedback" / "s0.html").read_text(encoding="utf-8")  # roster name
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert summary["missing"] == ["ghost"] and summary["counts"]["graded"] == 6
    assert {s["student_id"]: s["name"] for s in summary["students"]}["s0"] == "Ann"
    page = (tmp_path / "summary.html").read_text(encoding="utf-8")
    assert_inert(page)
    assert "<svg" in page and "Staff page" in page
    assert SECRET in page  # staff may read hidden details...
    for f in (tmp_path / "feedback").iterdir():  # ...students never
        assert SECRET not in f.read_text(encoding="utf-8")
    assert "&lt;script&gt;" in page and "<script>" not in page
    assert 'href="feedback/mallory.html"' in page


def test_write_feedback_without_a_store_says_what_to_run(tmp_path: Path) -> None:
    from grader.errors import GraderError

    with pytest.raises(GraderError, match="run 'grader batch"):
        write_feedback(tmp_path)


def test_every_text_of_the_class_summary_is_escaped(rubric: Rubric) -> None:
    summary = build_summary(class_results(rubric), rubric, missing=[PWN])
    summary["assignment"]["title"] = PWN
    summary["warnings"].append(PWN)
    summary["checks"][0]["title"] = PWN
    summary["failure_causes"][0]["cause"] = PWN
    summary["failure_causes"][0]["students"].append(PWN)
    summary["not_graded"][0]["reason"] = PWN
    summary["students"].append({"student_id": PWN, "name": PWN, "status": "graded", "score": 1.0, "max_score": 2.0,
                                "late": True, "submitted_at": PWN})
    summary["did_not_run"].append({"student_id": PWN, "reason": PWN})
    page = render_summary_html(summary)
    assert_shown_as_text(page)
    links = [attrs["href"] for tag, attrs in tags_of(page) if tag == "a"]
    assert links and all(re.fullmatch(r"feedback/[A-Za-z0-9_.@-]+\.(html|md)", h or "") for h in links)  # PWN: no link


# ---- end to end ---------------------------------------------------------------------------


def test_a_real_batch_gets_feedback_with_the_sinusoid_heatmaps(tmp_path: Path) -> None:
    from grader.batch.runner import run_batch

    source = tmp_path / "in"
    source.mkdir()
    for name in ("correct_tinytorch.ipynb", "bug_sin_cos_swapped.ipynb"):
        shutil.copy(ROOT / "submissions" / name, source / name)
    run_batch(source, tmp_path / "out", workers=2)
    write_feedback(tmp_path / "out")
    page = (tmp_path / "out" / "feedback" / "bug_sin_cos_swapped.html").read_text(encoding="utf-8")
    # sin_values' two tables and the visible layer check's output for 1-D tokens, three panels each
    assert len(re.findall(r'<img alt="table_d(16|5): ', page)) == 6
    assert len(re.findall(r'<img alt="out_1d: ', page)) == 3
    assert 'id="check-sin_values"' in page and 'id="check-layer_sin_values"' not in page
    md = (tmp_path / "out" / "feedback" / "bug_sin_cos_swapped.md").read_text(encoding="utf-8")
    assert md.count("](data:image/png;base64,") == 9
    summary: dict[str, Any] = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert summary["counts"]["graded"] == 2
    assert {c["id"]: c["pass_rate"] for c in summary["checks"]}["sin_values"] == 0.5


def test_the_class_summary_puts_notebooks_that_did_not_run_on_one_line_and_ranks_bugs_by_diagnosis(
        tmp_path: Path) -> None:
    from grader.batch.runner import run_batch

    from .conftest import code_cells, write_notebook

    cells = code_cells(ROOT / "submissions" / "correct_tinytorch.ipynb")
    source = tmp_path / "in"
    source.mkdir()
    for name in ("correct_tinytorch.ipynb", "bug_backward_overwrite.ipynb", "bug_unfinished_starter.ipynb"):
        shutil.copy(ROOT / "submissions" / name, source / name)
    write_notebook(source / "unparsable.ipynb", [c + "\n)\n" if "class " in c or "def create_" in c else c
                                                 for c in cells])
    write_notebook(source / "no_import.ipynb", [c.replace("from tinytorch.core.tensor import Tensor",
                                                          "from tinytorch.core.no_such_module import Tensor")
                                                for c in cells])
    run_batch(source, tmp_path / "out", workers=2)
    write_feedback(tmp_path / "out")
    summary: dict[str, Any] = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert summary["did_not_run"] == [
        {"student_id": "no_import", "reason": "ModuleNotFoundError while defining its code"},
        {"student_id": "unparsable", "reason": "syntax error in cells 3, 5, 7, 10"}]
    causes = summary["failure_causes"]
    assert not any({"no_import", "unparsable"} & set(c["students"]) for c in causes)
    assert not any(c["cause"].startswith("raised an exception") for c in causes)
    # the unfinished class is one diagnosis, listing every check it blocks
    starter = next(c for c in causes if c["students"] == ["bug_unfinished_starter"] and "defining" in c["cause"])
    assert starter["cause"] == ("defining PositionalEncoding failed "
                                "(the starter's raise NotImplementedError() is still there)")
    assert {"pe_broadcast", "pe_grad", "layer_modes"} <= set(starter["checks"])
    overwrite = next(c for c in causes if c["students"] == ["bug_backward_overwrite"])
    assert "np.add.at" in overwrite["cause"] or "accumulate" in overwrite["cause"]
    page = (tmp_path / "out" / "summary.html").read_text(encoding="utf-8")
    assert ("2 notebooks did not run at all (not counted below):\nno_import (ModuleNotFoundError while defining its "
            "code), unparsable (syntax error in cells 3, 5, 7, 10).") in page
