"""The transition table renders itself: a Markdown table for docs, an SVG for the console.

Both are generated from ``TRANSITION_LIST``, so what people read is the table the
authority enforces, never a copy of it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

from .states import NON_TERMINAL_STATES, TERMINAL_STATES, EventType, State
from .transitions import STATE_INFO, TRANSITION_LIST, Transition, events_from

LABEL_FONT_FAMILY = "DejaVu Sans Mono, Menlo, Consolas, monospace"


def markdown_table() -> str:
    lines = [
        "| from | event | guard | to |",
        "|---|---|---|---|",
    ]
    for t in TRANSITION_LIST:
        if t.event in (EventType.RUN_CANCELLED, EventType.RUN_FAILED):
            continue
        lines.append(f"| {t.source} | `{t.event}` | {t.guard} | {t.target} |")
    guard_cancel = next(t.guard for t in TRANSITION_LIST if t.event is EventType.RUN_CANCELLED)
    guard_fail = next(t.guard for t in TRANSITION_LIST if t.event is EventType.RUN_FAILED)
    lines.append(f"| any non-terminal | `run.cancelled` | {guard_cancel} | CANCELLED |")
    lines.append(f"| any non-terminal | `run.failed` | {guard_fail} | FAILED |")
    return "\n".join(lines) + "\n"


def markdown_states() -> str:
    lines = ["| state | purpose | owner | timeout | cancellation |", "|---|---|---|---|---|"]
    for state in State:
        info = STATE_INFO[state]
        lines.append(
            f"| {state} | {info.purpose} | {info.owner} | {info.timeout} | {info.cancellation} |"
        )
    return "\n".join(lines) + "\n"


# -- the state diagram ----------------------------------------------------------------------
# Explicit placement: state boxes on a hand-made grid (the main loop on the top row, the
# effect and verification states below it, terminal states at the bottom), one arrow per
# (source, target) pair carrying every event of that pair, and each edge label placed by a
# small search along its curve so that no label overlaps another label or a state box and
# every label lies inside the view box (``diagram_layout`` is what tests check).
COLUMNS = (85, 375, 665, 955, 1245)
ROWS = (50, 240, 430, 620)
POSITIONS: dict[State, tuple[int, int]] = {
    State.CREATED: (COLUMNS[0], ROWS[0]),
    State.EXECUTING: (COLUMNS[3], ROWS[0]),
    State.VERIFYING: (COLUMNS[4], ROWS[0]),
    State.OBSERVING: (COLUMNS[0], ROWS[1]),
    State.DECIDING: (COLUMNS[1], ROWS[1]),
    State.VALIDATING: (COLUMNS[2], ROWS[1]),
    State.RECOVERING: (COLUMNS[3], ROWS[1]),
    State.WAITING_HUMAN: (COLUMNS[1], ROWS[2]),
    State.WAITING_EXTERNAL: (COLUMNS[2], ROWS[2]),
    State.CANCELLED: (COLUMNS[1], ROWS[3]),
    State.FAILED: (COLUMNS[2], ROWS[3]),
    State.ESCALATED: (COLUMNS[3], ROWS[3]),
    State.COMPLETED: (COLUMNS[4], ROWS[3]),
}
BOX_W, BOX_H = 150, 40
WIDTH, HEIGHT = 1330, 690
# Every edge bends this far (px) to the left of its direction, so the two directions of a
# pair (DECIDING <-> VALIDATING, VALIDATING <-> WAITING_HUMAN) never draw over each other.
BEND = 18.0
LABEL_FONT = 10  # px, monospace: the width of a label is known without a browser
CHAR_W = 6.2  # upper bound of one monospace glyph's advance at LABEL_FONT (0.6 em + slack)
LINE_H = 12
LABEL_PAD = 3
MARGIN = 4  # kept free around labels and boxes


@dataclass(frozen=True)
class Box:
    """An axis-aligned rectangle: left, top, width, height."""

    x: float
    y: float
    w: float
    h: float

    def intersects(self, other: Box, gap: float = 0.0) -> bool:
        return not (
            self.x + self.w + gap <= other.x
            or other.x + other.w + gap <= self.x
            or self.y + self.h + gap <= other.y
            or other.y + other.h + gap <= self.y
        )

    def contains(self, px: float, py: float, gap: float = 0.0) -> bool:
        return (
            self.x - gap <= px <= self.x + self.w + gap
            and self.y - gap <= py <= self.y + self.h + gap
        )

    def inside(self, width: float, height: float, gap: float = 0.0) -> bool:
        return (
            self.x >= gap
            and self.y >= gap
            and self.x + self.w <= width - gap
            and self.y + self.h <= height - gap
        )


@dataclass(frozen=True)
class EdgeLayout:
    source: State
    target: State
    transitions: tuple[Transition, ...]
    path: str
    points: tuple[tuple[float, float], ...]  # the curve, sampled
    label: Box
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Layout:
    width: int
    height: int
    states: Mapping[State, Box]
    edges: tuple[EdgeLayout, ...]


class LayoutError(ValueError):
    """An edge label found no place free of other labels and boxes."""


FOOTER = (
    f"Any of the {len(NON_TERMINAL_STATES)} non-terminal states: run.cancelled -> CANCELLED, "
    "run.failed -> FAILED. Every absent edge is denied."
)
FOOTER_FONT = 12


def footer_box() -> Box:
    """Where the footer line goes (generously: 0.62 em per character)."""
    return Box(20, HEIGHT - 12 - FOOTER_FONT, len(FOOTER) * FOOTER_FONT * 0.62, FOOTER_FONT + 4)


def state_box(state: State) -> Box:
    x, y = POSITIONS[state]
    return Box(x - BOX_W / 2, y - BOX_H / 2, BOX_W, BOX_H)


def _curve(
    a: tuple[int, int], b: tuple[int, int], bend: float
) -> tuple[str, tuple[tuple[float, float], ...], tuple[float, float]]:
    """A quadratic curve from box a's border to box b's, its samples and its left normal."""
    (x1, y1), (x2, y2) = a, b
    dx, dy = x2 - x1, y2 - y1
    length = math.hypot(dx, dy) or 1.0
    ux, uy = dx / length, dy / length
    # Leave and enter each box at its border along the straight line between centres.
    shrink = min(BOX_W / 2 / max(abs(ux), 1e-6), BOX_H / 2 / max(abs(uy), 1e-6)) + 4
    sx, sy = x1 + ux * shrink, y1 + uy * shrink
    ex, ey = x2 - ux * shrink, y2 - uy * shrink
    cx, cy = (sx + ex) / 2 + uy * bend, (sy + ey) / 2 - ux * bend
    samples = tuple(
        (
            (1 - t) ** 2 * sx + 2 * (1 - t) * t * cx + t**2 * ex,
            (1 - t) ** 2 * sy + 2 * (1 - t) * t * cy + t**2 * ey,
        )
        for t in (i / 40 for i in range(41))
    )
    path = f"M{sx:.0f},{sy:.0f} Q{cx:.0f},{cy:.0f} {ex:.0f},{ey:.0f}"
    return path, samples, (uy, -ux)


def _label_size(lines: Sequence[str]) -> tuple[float, float]:
    return max(len(s) for s in lines) * CHAR_W + 2 * LABEL_PAD, len(lines) * LINE_H + LABEL_PAD


# Where along the curve (sample index of 40) and how far off it a label may sit, best first.
_ALONG = (20, 18, 22, 16, 24, 14, 26, 12, 28, 10, 30, 8, 32)
_OFF = (0.0, 12.0, -12.0, 24.0, -24.0, 36.0, -36.0)


def _place_label(
    lines: Sequence[str],
    samples: Sequence[tuple[float, float]],
    normal: tuple[float, float],
    taken: Sequence[Box],
    states: Mapping[State, Box],
    others: Sequence[Sequence[tuple[float, float]]],
) -> Box:
    w, h = _label_size(lines)
    best: tuple[float, Box] | None = None
    for rank_t, index in enumerate(_ALONG):
        px, py = samples[index]
        for rank_o, off in enumerate(_OFF):
            cx, cy = px + normal[0] * off, py + normal[1] * off
            box = Box(cx - w / 2, cy - h / 2, w, h)
            if not box.inside(WIDTH, HEIGHT, MARGIN):
                continue
            if any(box.intersects(t, MARGIN) for t in taken):
                continue
            if any(box.intersects(s, MARGIN) for s in states.values()):
                continue
            # Never over the edge's own ends: the arrowhead must stay visible.
            if any(box.contains(qx, qy, 2.0) for qx, qy in (*samples[:5], *samples[-5:])):
                continue
            crossed = sum(1 for other in others for (qx, qy) in other if box.contains(qx, qy, 1.0))
            cost = crossed * 10 + rank_t + rank_o * 1.5
            if best is None or cost < best[0]:
                best = (cost, box)
    if best is None:
        raise LayoutError(f"no free place for the label {' / '.join(lines)}")
    return best[1]


@functools.cache
def diagram_layout() -> Layout:
    """Return where every state box, edge and edge label of the diagram goes.

    Computed once per process (the placement search takes ~0.2 s; the table is constant).
    Raise LayoutError when a label finds no free place."""
    pairs: dict[tuple[State, State], list[Transition]] = {}
    for t in TRANSITION_LIST:
        if t.event in (EventType.RUN_CANCELLED, EventType.RUN_FAILED):
            continue
        pairs.setdefault((t.source, t.target), []).append(t)
    states = {state: state_box(state) for state in POSITIONS}
    curves = {pair: _curve(POSITIONS[pair[0]], POSITIONS[pair[1]], BEND) for pair in pairs}
    taken: list[Box] = [footer_box()]
    edges = []
    for pair, transitions in pairs.items():
        path, samples, normal = curves[pair]
        lines = tuple(t.event.value for t in transitions)
        others = [c[1] for p, c in curves.items() if p != pair]
        label = _place_label(lines, samples, normal, taken, states, others)
        taken.append(label)
        edges.append(EdgeLayout(pair[0], pair[1], tuple(transitions), path, samples, label, lines))
    return Layout(WIDTH, HEIGHT, states, tuple(edges))


def state_description(current: State | str) -> str:
    """Return the diagram's text alternative for a run in ``current``: the state and every
    transition out of it, as the highlighted edges show them."""
    state = State(current)
    ways = events_from(state)
    if not ways:
        return f"Run state: {state}. It is terminal: no transition leaves it."
    return (
        f"Run state: {state}. From here: "
        + "; ".join(f"{t.event} to {t.target}" for t in ways)
        + "."
    )


def state_diagram_svg(current: State | str | None = None, *, title: str = "") -> str:
    """Return an SVG of the state machine with ``current`` highlighted."""
    highlight = State(current) if current else None
    layout = diagram_layout()
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {layout.width} {layout.height}" '
        f'role="img" class="state-diagram" aria-label="{escape(title or "Run state machine")}">',
        "<defs>"
        + "".join(
            f"<marker id='{name}' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='7' "
            f"markerHeight='7' orient='auto-start-reverse'><path d='M0,0 L10,5 L0,10 z' "
            f"fill='{fill}'/></marker>"
            for name, fill in (("arrow", "#5b6472"), ("arrow-active", "#1f6feb"))
        )
        + "</defs>",
    ]
    if title:
        out.append(f"<title>{escape(title)}</title>")
    for edge in layout.edges:
        active = highlight is not None and edge.source is highlight
        colour = "#1f6feb" if active else "#8a93a3"
        text_colour = "#1f6feb" if active else "#4b5361"
        tips = "\n".join(
            f"{t.source} --{t.event}--&gt; {t.target}: {escape(t.guard)}" for t in edge.transitions
        )
        box = edge.label
        middle = box.x + box.w / 2
        tspans = "".join(
            f"<tspan x='{middle:.1f}' y='{box.y + LABEL_PAD + LINE_H * (i + 1) - 3:.1f}'>"
            f"{escape(line)}</tspan>"
            for i, line in enumerate(edge.lines)
        )
        marker = "arrow-active" if active else "arrow"
        out.append(
            f"<g class='edge{' edge-active' if active else ''}'><title>{tips}</title>"
            f"<path d='{edge.path}' fill='none' stroke='{colour}' stroke-width='"
            f"{'2' if active else '1.2'}' marker-end='url(#{marker})'/>"
            f"<rect class='label-box' x='{box.x:.1f}' y='{box.y:.1f}' width='{box.w:.1f}' "
            f"height='{box.h:.1f}' rx='3' fill='#ffffff' fill-opacity='0.92'/>"
            f"<text class='edge-label' font-family='{LABEL_FONT_FAMILY}' "
            f"font-size='{LABEL_FONT}' fill='{text_colour}' text-anchor='middle'>{tspans}</text>"
            "</g>"
        )
    for state, box in layout.states.items():
        terminal = state in TERMINAL_STATES
        is_current = state is highlight
        fill = "#1f6feb" if is_current else ("#eef1f5" if terminal else "#ffffff")
        text = "#ffffff" if is_current else "#1d2330"
        x, y = POSITIONS[state]
        out.append(
            f"<g class='state{' state-current' if is_current else ''}' data-state='{state}'>"
            f"<rect x='{box.x:.0f}' y='{box.y:.0f}' width='{box.w:.0f}' "
            f"height='{box.h:.0f}' rx='{18 if terminal else 6}' fill='{fill}' stroke='#1d2330' "
            f"stroke-width='{2.5 if is_current else 1}'/>"
            f"<text x='{x}' y='{y + 4}' font-size='12' font-weight='600' fill='{text}' "
            f"text-anchor='middle'>{state.value}</text>"
            f"<title>{escape(STATE_INFO[state].purpose)}</title></g>"
        )
    out.append(
        f"<text x='20' y='{layout.height - 12}' font-size='{FOOTER_FONT}' fill='#5b6472'>"
        f"{escape(FOOTER)}</text>"
    )
    out.append("</svg>")
    return "".join(out)
