"""The class report's three charts as SVG: a score histogram, pass rates per exercise, the most common mistakes.

Bars, axes and labels only, so they are drawn here rather than by matplotlib, whose import (0.4 s) and
rendering (0.1 s) were a quarter of a cold one-submission ``autograder grade``; the browser draws the text
with its own fonts, Chinese included, whatever the grading machine has installed. Every label is escaped.
"""
from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from html import escape

#: The fonts asked for, Chinese ones first (the browser takes the first it has).
FONTS = "Noto Sans CJK SC, Noto Sans SC, Source Han Sans SC, PingFang SC, Microsoft YaHei, sans-serif"
BLUE, GREEN, RED, INK, GRID = "#4c78a8", "#54a24b", "#e45756", "#333333", "#dddddd"


def _a(text: object) -> str:
    return escape(str(text), quote=True)


def nice_step(top: float, ticks: int = 5) -> float:
    """A tick step of 1, 2 or 5 times a power of ten giving about ``ticks`` ticks up to ``top``."""
    if top <= 0:
        return 1.0
    raw = top / ticks
    power = 10 ** math.floor(math.log10(raw))
    return float(next(m * power for m in (1, 2, 5, 10) if m * power >= raw))


def _ticks(top: float, integer: bool) -> list[float]:
    step = max(1.0, nice_step(top)) if integer else nice_step(top)
    count = max(1, math.ceil(top / step - 1e-9))
    return [i * step for i in range(count + 1)]


def _label(value: float) -> str:
    return f"{value:g}"


def _svg(width: int, height: int, body: list[str], title: str) -> str:
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
            f"viewBox='0 0 {width} {height}' font-family='{_a(FONTS)}' font-size='12' fill='{INK}'>"
            f"<title>{_a(title)}</title><rect width='{width}' height='{height}' fill='white'/>"
            + "".join(body) + "</svg>")


def column_chart(labels: Sequence[str], values: Sequence[float], *, title: str, xlabel: str, ylabel: str,
                 color: str = BLUE, top: float | None = None, integer: bool = False, gapless: bool = False,
                 slot: int = 34) -> str:
    """Vertical bars, one per label, ``slot`` pixels apart, on a y axis from 0 to ``top`` (default: the
    largest value)."""
    n = max(1, len(labels))
    left, right, upper, lower = 56, 16, 30, 52
    plot_w = max(300, slot * n)
    width, height = left + plot_w + right, 300
    plot_h = height - upper - lower
    ticks = _ticks(top if top is not None else max([*values, 1.0]), integer)
    y_max = ticks[-1] or 1.0
    body = [f"<text x='{width / 2:.1f}' y='18' text-anchor='middle' font-size='14'>{_a(title)}</text>"]
    for t in ticks:
        y = upper + plot_h * (1 - t / y_max)
        body.append(f"<line x1='{left}' x2='{left + plot_w}' y1='{y:.1f}' y2='{y:.1f}' stroke='{GRID}'/>"
                    f"<text x='{left - 6}' y='{y + 4:.1f}' text-anchor='end'>{_a(_label(t))}</text>")
    step = plot_w / n
    bar = step if gapless else step * 0.7
    for i, (label, value) in enumerate(zip(labels, values)):
        h = plot_h * max(0.0, min(value, y_max)) / y_max
        x = left + i * step + (step - bar) / 2
        body.append(f"<rect x='{x:.1f}' y='{upper + plot_h - h:.1f}' width='{bar:.1f}' height='{h:.1f}' "
                    f"fill='{color}' stroke='white'><title>{_a(label)}: {_a(_label(value))}</title></rect>")
        body.append(f"<text x='{left + (i + 0.5) * step:.1f}' y='{upper + plot_h + 16}' text-anchor='middle' "
                    f"font-size='11'>{_a(label)}</text>")
    body.append(f"<line x1='{left}' x2='{left + plot_w}' y1='{upper + plot_h}' y2='{upper + plot_h}' stroke='{INK}'/>"
                f"<text x='{left + plot_w / 2:.1f}' y='{height - 10}' text-anchor='middle'>{_a(xlabel)}</text>"
                f"<text transform='translate(14 {upper + plot_h / 2:.1f}) rotate(-90)' "
                f"text-anchor='middle'>{_a(ylabel)}</text>")
    return _svg(width, height, body, title)


def histogram(percents: Sequence[float], *, title: str, xlabel: str, ylabel: str) -> str:
    """Counts of ``percents`` (0-100) in ten bins of ten points each (100 falls in the last)."""
    counts = [0] * 10
    for p in percents:
        counts[min(9, max(0, int(p // 10)))] += 1
    labels = [f"{10 * i}–{10 * i + 10}" for i in range(10)]
    return column_chart(labels, counts, title=title, xlabel=xlabel, ylabel=ylabel, integer=True, gapless=True,
                        slot=50)


def bar_chart(labels: Sequence[str], values: Sequence[float], *, title: str, xlabel: str, color: str = RED) -> str:
    """Horizontal bars, the first label on top (counts: integer ticks)."""
    n = max(1, len(labels))
    left = min(320, 16 + 7 * max([len(str(s)) for s in labels] + [4]))
    right, upper, lower, row = 20, 30, 44, 26
    plot_w, plot_h = 360, row * n
    width, height = left + plot_w + right, upper + plot_h + lower
    ticks = _ticks(max([*values, 1.0]), integer=True)
    x_max = ticks[-1] or 1.0
    body = [f"<text x='{width / 2:.1f}' y='18' text-anchor='middle' font-size='14'>{_a(title)}</text>"]
    for t in ticks:
        x = left + plot_w * t / x_max
        body.append(f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{upper}' y2='{upper + plot_h}' stroke='{GRID}'/>"
                    f"<text x='{x:.1f}' y='{upper + plot_h + 16}' text-anchor='middle'>{_a(_label(t))}</text>")
    for i, (label, value) in enumerate(zip(labels, values)):
        w = plot_w * max(0.0, value) / x_max
        y = upper + i * row
        body.append(f"<rect x='{left}' y='{y + 4}' width='{w:.1f}' height='{row - 8}' fill='{color}'>"
                    f"<title>{_a(label)}: {_a(_label(value))}</title></rect>"
                    f"<text x='{left - 6}' y='{y + row / 2 + 4:.1f}' text-anchor='end'>{_a(label)}</text>")
    body.append(f"<line x1='{left}' x2='{left}' y1='{upper}' y2='{upper + plot_h}' stroke='{INK}'/>"
                f"<text x='{left + plot_w / 2:.1f}' y='{height - 8}' text-anchor='middle'>{_a(xlabel)}</text>")
    return _svg(width, height, body, title)


def data_uri(svg: str) -> str:
    """An ``<img>`` source for ``svg`` (the page's images stay images: alt text, no inline markup to police)."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")
