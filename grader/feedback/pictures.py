"""Pictures without a plotting library: heatmaps as PNG (zlib + struct) and a histogram as SVG.

Everything returned is self-contained (a ``data:`` URI or an ``<svg>`` element). The SVG comes from
an autoescaped template (``templates/histogram.svg``), so a picture can be pasted into HTML or
Markdown as it is.
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..models import Figure

MAX_SIDE_PX = 260
NEGATIVE = np.array([33, 102, 172], dtype=np.float64)  # blue
POSITIVE = np.array([178, 24, 43], dtype=np.float64)  # red
DIFFERENCE = np.array([84, 39, 143], dtype=np.float64)  # purple
WHITE = np.array([255, 255, 255], dtype=np.float64)


def png(rgb: npt.NDArray[np.uint8]) -> bytes:
    """An 8-bit RGB PNG of an (height, width, 3) array."""
    height, width, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(height))  # filter type 0 per row

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


def data_uri(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _blend(t: npt.NDArray[np.float64], color: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """White at t=0 to ``color`` at t=1, per cell."""
    out: npt.NDArray[np.float64] = WHITE + (color - WHITE) * t[..., None]
    return out


def _upscale(rgb: npt.NDArray[np.float64], scale: int) -> npt.NDArray[np.uint8]:
    big = np.repeat(np.repeat(rgb, scale, axis=0), scale, axis=1)
    return np.clip(np.rint(big), 0, 255).astype(np.uint8)


def scale_for(rows: int, cols: int) -> int:
    """Pixels per cell: the larger side about MAX_SIDE_PX, at least 1 and at most 24."""
    return max(1, min(24, MAX_SIDE_PX // max(rows, cols, 1)))


@dataclass(frozen=True)
class Heatmaps:
    """One figure drawn three times on shared scales: the student's, the reference's, the gap."""

    name: str
    rows: int
    cols: int
    limit: float  # colour scale of got/expected is [-limit, +limit]
    largest_gap: float
    got_png: bytes
    expected_png: bytes
    gap_png: bytes


def heatmaps(figure: Figure) -> Heatmaps:
    """Blue (negative) to white (0) to red (positive), one scale for both tables; the gap in purple."""
    got = np.asarray(figure.got, dtype=np.float64)
    expected = np.asarray(figure.expected, dtype=np.float64)
    if got.ndim != 2 or got.shape != expected.shape or got.size == 0:
        raise ValueError(f"figure {figure.name!r}: got and expected must be non-empty 2-D tables of one shape")
    rows, cols = got.shape
    limit = float(max(np.abs(got).max(), np.abs(expected).max()))
    gap = np.abs(got - expected)
    largest_gap = float(gap.max())
    scale = scale_for(rows, cols)

    def diverging(values: npt.NDArray[np.float64]) -> bytes:
        t = values / limit if limit > 0 else np.zeros_like(values)
        rgb = np.where((t < 0)[..., None], _blend(-t, NEGATIVE), _blend(np.clip(t, 0, 1), POSITIVE))
        return png(_upscale(rgb, scale))

    gap_t = gap / largest_gap if largest_gap > 0 else np.zeros_like(gap)
    return Heatmaps(
        name=figure.name, rows=rows, cols=cols, limit=limit, largest_gap=largest_gap,
        got_png=diverging(got), expected_png=diverging(expected),
        gap_png=png(_upscale(_blend(gap_t, DIFFERENCE), scale)),
    )


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    count: int
    label: str  # "0 to 10: 3", the bar's tooltip


@dataclass(frozen=True)
class Histogram:
    """A bar chart laid out in SVG user units; ``templates/histogram.svg`` draws it."""

    title: str
    x_label: str
    width: int
    height: int
    left: int
    top: int
    plot_width: int
    plot_height: int
    ticks: tuple[tuple[float, int], ...]  # (y, value) of each horizontal grid line
    bars: tuple[Bar, ...]
    edges: tuple[tuple[float, str], ...]  # (x, label) under each bar boundary


def histogram(counts: Sequence[int], edges: Sequence[float], *, title: str, x_label: str) -> Histogram:
    """The layout of a bar chart of ``counts`` between consecutive ``edges``."""
    if len(edges) != len(counts) + 1:
        raise ValueError("histogram needs one more edge than counts")
    width, height = 520, 260
    left, right, top, bottom = 44, 16, 34, 46
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max(max(counts, default=0), 1)
    bar_w = plot_w / max(len(counts), 1)
    bars = []
    for i, count in enumerate(counts):
        h = plot_h * count / peak
        bars.append(Bar(left + i * bar_w, top + plot_h - h, bar_w, h, count,
                        f"{_num(edges[i])} to {_num(edges[i + 1])}: {count}"))
    return Histogram(
        title=title, x_label=x_label, width=width, height=height, left=left, top=top, plot_width=plot_w,
        plot_height=plot_h, ticks=tuple((top + plot_h - plot_h * tick / peak, tick) for tick in _ticks(peak)),
        bars=tuple(bars), edges=tuple((left + i * bar_w, _num(edge)) for i, edge in enumerate(edges)),
    )


def histogram_svg(counts: Sequence[int], edges: Sequence[float], *, title: str, x_label: str) -> str:
    """The bar chart as a standalone ``<svg>`` element."""
    from .templating import render

    return render("histogram.svg", h=histogram(counts, edges, title=title, x_label=x_label)).rstrip("\n")


def _ticks(peak: int) -> list[int]:
    step = max(1, -(-peak // 5))
    return list(range(0, peak + 1, step))


def _num(x: float) -> str:
    return f"{x:.4g}"
