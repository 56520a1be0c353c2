"""The charts of the HTML report, as inline SVG made here (no script, no network): the job timeline (one row
per job, or per pilot or bundle job with its tasks inside), the jobs over time, and histograms.

Everything is drawn on a fixed pixel grid, and what falls into one pixel (or one bin) is drawn once, so a
chart's size is bounded by its width, not by the number of jobs: 10,000 tasks in 20 pilots are 20 rows of at
most :data:`WIDTH` rectangles each.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from markupsafe import Markup, escape

#: The width of a chart's plot area, in pixels.
WIDTH = 900
#: Left margin for the row labels of the timeline.
LABEL = 260
ROW = 14
#: The classes of the CSS that colour a segment (report_page.CSS).
STATES = ("queued", "running", "done", "failed", "resubmitted", "unfinished", "cancelled")


@dataclass
class Segment:
    start: float
    end: float
    state: str
    title: str = ""


@dataclass
class Row:
    label: str
    segments: list[Segment] = field(default_factory=list)
    title: str = ""


def duration(seconds: float | None) -> str:
    """``0.4 s``, ``12.0 s``, ``3:05``, ``1:02:03``, ``2 d 3:04:05``."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if seconds < 1:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if not hours:
        return f"{minutes}:{rest:02d}"
    days, hours = divmod(hours, 24)
    return (f"{days} d " if days else "") + f"{hours}:{minutes:02d}:{rest:02d}"


def hours(value: float | None) -> str:
    """CPU-hours: ``12.34``, ``<0.01``, ``-`` when unknown."""
    if value is None:
        return "-"
    return "<0.01" if 0 < value < 0.005 else f"{value:.2f}"


#: A segment at least this many pixels wide keeps a span of its own, with a gap of a pixel before the next one
#: (tasks one after another in a pilot stay apart); narrower neighbours of one state merge.
OWN_SPAN = 4.0


def _merged(segments: Iterable[Segment], t0: float, scale: float) -> list[tuple[float, float, str, list[str]]]:
    """Segments as pixel spans; narrow neighbours of one state that touch within a pixel become one span, wide
    ones stay apart by a pixel."""
    spans: list[tuple[float, float, str, list[str]]] = []
    alone: list[bool] = []  # whether each span is one wide segment
    for s in sorted(segments, key=lambda s: s.start):
        x0 = (s.start - t0) * scale
        x1 = max(x0 + 1.0, (s.end - t0) * scale)
        wide = x1 - x0 >= OWN_SPAN
        if spans and spans[-1][2] == s.state and x0 <= spans[-1][1] + 0.5 and not (wide or alone[-1]):
            last = spans[-1]
            if len(last[3]) < 3 and s.title:
                last[3].append(s.title)
            elif s.title:
                last[3].append("")  # counted below
            spans[-1] = (last[0], max(last[1], x1), last[2], last[3])
        else:
            if spans and alone[-1] and spans[-1][1] > x0 - 1.0:  # a pixel between a wide span and the next
                last = spans[-1]
                spans[-1] = (last[0], max(last[0] + 1.0, x0 - 1.0), last[2], last[3])
            spans.append((x0, x1, s.state, [s.title] if s.title else []))
            alone.append(wide)
    return spans


def _title(titles: list[str]) -> str:
    shown = [t for t in titles if t]
    more = len(titles) - len(shown)
    return "\n".join(shown) + (f"\n... and {more} more" if more else "")


def _axis(t0: float, t1: float, y: float, height: float) -> list[str]:
    """Time ticks (seconds since the start of the run) along the top and faint lines down the plot."""
    span = max(t1 - t0, 1e-9)
    step = _nice_step(span / 6)
    out = []
    tick = 0.0
    while tick <= span + 1e-9:
        x = LABEL + tick / span * WIDTH
        out.append(f'<line class="grid" x1="{x:.1f}" y1="{y:.1f}" x2="{x:.1f}" y2="{y + height:.1f}"/>')
        out.append(f'<text class="tick" x="{x:.1f}" y="{y - 3:.1f}">+{escape(duration(tick))}</text>')
        tick += step
    return out


def _nice_step(raw: float) -> float:
    exponent = math.floor(math.log10(raw)) if raw > 0 else 0
    for factor in (1, 2, 5, 10):
        step = factor * 10 ** exponent
        if step >= raw:
            return step
    return 10 ** (exponent + 1)


def timeline(rows: Sequence[Row], t0: float, t1: float) -> Markup:
    """One line per row: its label, then its segments coloured by state, each with its title as tooltip."""
    scale = WIDTH / max(t1 - t0, 1e-9)
    top = 18
    height = top + ROW * len(rows) + 4
    out = [f'<svg class="timeline" width="{LABEL + WIDTH + 10}" height="{height}" role="img" '
           f'xmlns="http://www.w3.org/2000/svg">']
    out += _axis(t0, t1, top, ROW * len(rows))
    for i, row in enumerate(rows):
        y = top + i * ROW
        label = row.label if len(row.label) <= 42 else row.label[:41] + "…"
        out.append(f'<text class="label" x="{LABEL - 6}" y="{y + ROW - 4}"><title>{escape(row.title or row.label)}'
                   f'</title>{escape(label)}</text>')
        for x0, x1, state, titles in _merged(row.segments, t0, scale):
            out.append(f'<rect class="s-{escape(state)}" x="{LABEL + x0:.1f}" y="{y + 2}" width="{x1 - x0:.1f}" '
                       f'height="{ROW - 4}"><title>{escape(_title(titles))}</title></rect>')
    out.append("</svg>")
    return Markup("\n".join(out))


def occupancy(lanes: dict[str, list[tuple[float, float, str]]], t0: float, t1: float, bins: int = 150) -> Markup:
    """The aggregated timeline: one lane per name, its cells shaded by how many of its intervals
    (start, end, state) were running in each time bin; failed ones mark their cell red."""
    width = WIDTH / bins
    span = max(t1 - t0, 1e-9)
    top = 18
    height = top + ROW * len(lanes) + 4
    out = [f'<svg class="timeline" width="{LABEL + WIDTH + 10}" height="{height}" role="img" '
           f'xmlns="http://www.w3.org/2000/svg">']
    out += _axis(t0, t1, top, ROW * len(lanes))
    for i, (name, intervals) in enumerate(lanes.items()):
        y = top + i * ROW
        running = [0.0] * bins
        whole = [0] * (bins + 1)  # a difference array of the bins an interval covers entirely
        failed = [0] * bins
        step = span / bins
        for start, end, state in intervals:  # the time each covers of each bin, in bin widths: O(1) each
            b0 = min(bins - 1, max(0, int((start - t0) / step)))
            b1 = min(bins - 1, max(b0, int((end - t0) / step - 1e-9)))  # one that ends on a bin's edge: before it
            if b0 == b1:
                running[b0] += max(0.0, end - start) / step
            else:
                running[b0] += (t0 + (b0 + 1) * step - start) / step
                running[b1] += max(0.0, end - (t0 + b1 * step)) / step
                whole[b0 + 1] += 1
                whole[b1] -= 1
            if state == "failed":
                failed[b1] += 1
        covered = 0
        for b in range(bins):
            covered += whole[b]
            running[b] += covered
        peak = max(running) or 1.0
        out.append(f'<text class="label" x="{LABEL - 6}" y="{y + ROW - 4}">{escape(name)} '
                   f'({len(intervals)})</text>')
        cells: list[tuple[int, int, str, int]] = []  # (first bin, last bin, state, shade): like neighbours merged
        for b in range(bins):
            if running[b] <= 0 and not failed[b]:
                continue
            state = "failed" if failed[b] else "running"
            shade = round(10 * running[b] / peak)
            if cells and state == "running" == cells[-1][2] and cells[-1][1] == b - 1 and cells[-1][3] == shade:
                cells[-1] = (cells[-1][0], b, state, shade)
            else:
                cells.append((b, b, state, shade))
        for first, last, state, shade in cells:
            values = running[first:last + 1]
            low, high = f"{min(values):.1f}", f"{max(values):.1f}"
            count = low if low == high else f"{low} to {high}"
            if first == last:
                tip = f"{name}: {count} running on average at +{duration(first * step)}"
            else:
                tip = (f"{name}: {count} running on average from +{duration(first * step)} to "
                       f"+{duration((last + 1) * step)}")
            tip += f", {failed[first]} failed" if failed[first] else ""
            out.append(f'<rect class="s-{state}" x="{LABEL + first * width:.1f}" y="{y + 2}" '
                       f'width="{(last + 1 - first) * width:.1f}" height="{ROW - 4}" '
                       f'fill-opacity="{0.15 + 0.085 * shade:.2f}"><title>{escape(tip)}</title></rect>')
    out.append("</svg>")
    return Markup("\n".join(out))


def over_time(intervals: Sequence[tuple[float, float | None, float]], t0: float, t1: float,
              bins: int = 120) -> Markup:
    """Stacked bars: per time bin, the jobs queued and running at its middle. ``intervals`` are
    (submitted, started or None, ended)."""
    span = max(t1 - t0, 1e-9)
    queued = [0] * bins
    running = [0] * bins
    mid = span / bins / 2

    def first(t: float) -> int:  # the first bin whose middle is at or after t
        return max(0, math.ceil((t - t0 - mid) / span * bins))

    def after(t: float) -> int:
        return min(bins, math.ceil((t - t0 - mid) / span * bins))

    for submitted, started, ended in intervals:  # a difference array per state: O(jobs + bins)
        run_from = started if started is not None else ended
        a, b = first(submitted), after(run_from)
        if a < b:
            queued[a] += 1
            if b < bins:
                queued[b] -= 1
        if started is not None:
            a, b = first(started), after(ended)
            if a < b:
                running[a] += 1
                if b < bins:
                    running[b] -= 1
    for counts in (queued, running):
        for i in range(1, bins):
            counts[i] += counts[i - 1]
    peak = max((q + r for q, r in zip(queued, running)), default=0) or 1
    plot = 120
    width = WIDTH / bins
    out = [f'<svg class="chart" width="{LABEL + WIDTH + 10}" height="{plot + 30}" role="img" '
           f'xmlns="http://www.w3.org/2000/svg">']
    out += _axis(t0, t1, 18, plot)
    out.append(f'<text class="label" x="{LABEL - 6}" y="{18 + 10}">{peak}</text>')
    out.append(f'<text class="label" x="{LABEL - 6}" y="{18 + plot}">0</text>')
    for i in range(bins):
        x = LABEL + i * width
        r_h = running[i] / peak * plot
        q_h = queued[i] / peak * plot
        tip = escape(f"+{duration((i + 0.5) * span / bins)}: {running[i]} running, {queued[i]} queued")
        if r_h:
            out.append(f'<rect class="s-running" x="{x:.1f}" y="{18 + plot - r_h:.1f}" width="{width:.1f}" '
                       f'height="{r_h:.1f}"><title>{tip}</title></rect>')
        if q_h:
            out.append(f'<rect class="s-queued" x="{x:.1f}" y="{18 + plot - r_h - q_h:.1f}" width="{width:.1f}" '
                       f'height="{q_h:.1f}"><title>{tip}</title></rect>')
    out.append("</svg>")
    return Markup("\n".join(out))


def histogram(values: Sequence[float], bins: int = 24) -> Markup:
    """A histogram of durations in seconds: logarithmic bins when they span more than two decades."""
    if not values:
        return Markup('<p class="none">No jobs to count.</p>')
    low, high = min(values), max(values)
    positive = [v for v in values if v > 0]
    logarithmic = bool(positive) and high / min(positive) > 100
    if logarithmic:
        lo = math.log10(min(positive))
        hi = math.log10(high)
        edges = [10 ** (lo + (hi - lo) * i / bins) for i in range(bins + 1)]
    else:
        top = high if high > low else low + 1.0
        edges = [min(0.0, low) + (top - min(0.0, low)) * i / bins for i in range(bins + 1)]
    counts = [0] * bins
    for v in values:
        if logarithmic:
            i = 0 if v <= edges[0] else int((math.log10(v) - lo) / max(hi - lo, 1e-12) * bins)
        else:
            i = int((v - edges[0]) / max(edges[-1] - edges[0], 1e-12) * bins)
        counts[min(bins - 1, max(0, i))] += 1
    peak = max(counts) or 1
    plot, width, left = 110, 18, 40
    out = [f'<svg class="chart" width="{left + bins * width + 30}" height="{plot + 40}" role="img" '
           f'xmlns="http://www.w3.org/2000/svg">',
           f'<text class="label" x="{left - 4}" y="{14}">{peak}</text>',
           f'<text class="label" x="{left - 4}" y="{10 + plot}">0</text>']
    for i, count in enumerate(counts):
        h = count / peak * plot
        x = left + i * width
        tip = escape(f"{duration(edges[i])} to {duration(edges[i + 1])}: {count} job(s)")
        out.append(f'<rect class="bar" x="{x + 1}" y="{10 + plot - h:.1f}" width="{width - 2}" height="{h:.1f}">'
                   f'<title>{tip}</title></rect>')
    for i in (0, bins // 2, bins):
        out.append(f'<text class="tick" x="{left + i * width}" y="{plot + 26}">{escape(duration(edges[i]))}</text>')
    if logarithmic:
        out.append(f'<text class="tick" x="{left + bins * width / 2}" y="{plot + 38}">(logarithmic bins)</text>')
    out.append("</svg>")
    return Markup("\n".join(out))


def quantile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile of ``values`` (nearest rank), None if there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]
