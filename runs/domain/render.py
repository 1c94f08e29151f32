"""The transition table renders itself: a Markdown table for docs, an SVG for the console.

Both are generated from ``TRANSITION_LIST``, so what people read is the table the
authority enforces, never a copy of it.
"""

from __future__ import annotations

import math
from html import escape

from .states import NON_TERMINAL_STATES, TERMINAL_STATES, EventType, State
from .transitions import STATE_INFO, TRANSITION_LIST


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


POSITIONS: dict[State, tuple[int, int]] = {
    State.CREATED: (90, 80),
    State.OBSERVING: (320, 80),
    State.DECIDING: (570, 80),
    State.VALIDATING: (830, 80),
    State.WAITING_HUMAN: (1080, 80),
    State.WAITING_EXTERNAL: (320, 290),
    State.VERIFYING: (570, 290),
    State.EXECUTING: (830, 290),
    State.RECOVERING: (1080, 290),
    State.COMPLETED: (320, 490),
    State.FAILED: (90, 490),
    State.ESCALATED: (830, 490),
    State.CANCELLED: (1080, 490),
}
BOX_W, BOX_H = 160, 40
WIDTH, HEIGHT = 1180, 560
# Edges that would cross a box on a gentle curve get a stronger bend.
BENDS: dict[tuple[State, EventType], float] = {
    (State.RECOVERING, EventType.RECONCILIATION_MATCHED): -120.0,
    (State.WAITING_HUMAN, EventType.APPROVAL_DECLINED): -70.0,
    (State.WAITING_HUMAN, EventType.CLARIFICATION_ANSWERED): -115.0,
    (State.VALIDATING, EventType.ESCALATION_ADMITTED): 60.0,
    (State.EXECUTING, EventType.EFFECT_REJECTED): 34.0,
}


def _edge_path(a: tuple[int, int], b: tuple[int, int], bend: float) -> tuple[str, float, float]:
    """Return a quadratic path from box a to box b and the point halfway along it."""
    (x1, y1), (x2, y2) = a, b
    dx, dy = x2 - x1, y2 - y1
    length = math.hypot(dx, dy) or 1.0
    ux, uy = dx / length, dy / length
    # Leave and enter each box at its border along the straight line between centres.
    shrink = min(BOX_W / 2 / max(abs(ux), 1e-6), BOX_H / 2 / max(abs(uy), 1e-6)) + 4
    sx, sy = x1 + ux * shrink, y1 + uy * shrink
    ex, ey = x2 - ux * shrink, y2 - uy * shrink
    cx, cy = (sx + ex) / 2 - uy * bend, (sy + ey) / 2 + ux * bend
    mid_x, mid_y = (sx + 2 * cx + ex) / 4, (sy + 2 * cy + ey) / 4
    return f"M{sx:.0f},{sy:.0f} Q{cx:.0f},{cy:.0f} {ex:.0f},{ey:.0f}", mid_x, mid_y


def state_diagram_svg(current: State | str | None = None, *, title: str = "") -> str:
    """Return an SVG of the state machine with ``current`` highlighted."""
    highlight = State(current) if current else None
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'class="state-diagram" aria-label="{escape(title or "Run state machine")}">',
        "<defs><marker id='arrow' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='7' "
        "markerHeight='7' orient='auto-start-reverse'><path d='M0,0 L10,5 L0,10 z' "
        "fill='#5b6472'/></marker></defs>",
    ]
    if title:
        out.append(f"<title>{escape(title)}</title>")
    seen_pairs: set[tuple[State, State]] = set()
    for t in TRANSITION_LIST:
        if t.event in (EventType.RUN_CANCELLED, EventType.RUN_FAILED):
            continue
        pair = (t.source, t.target)
        bend = BENDS.get((t.source, t.event), 34.0 if pair in seen_pairs else 16.0)
        seen_pairs.add(pair)
        path, mx, my = _edge_path(POSITIONS[t.source], POSITIONS[t.target], bend)
        active = highlight is not None and t.source is highlight
        colour = "#1f6feb" if active else "#8a93a3"
        out.append(
            f"<g class='edge{' edge-active' if active else ''}'><title>{t.source} --{t.event}"
            f"--&gt; {t.target}: {escape(t.guard)}</title>"
            f"<path d='{path}' fill='none' stroke='{colour}' stroke-width='"
            f"{'2' if active else '1.2'}' marker-end='url(#arrow)'/>"
            f"<text x='{mx:.0f}' y='{my + 3:.0f}' font-size='10' fill='{colour}' "
            f"stroke='#ffffff' stroke-width='3' paint-order='stroke' "
            f"text-anchor='middle'>{escape(t.event.value)}</text></g>"
        )
    for state, (x, y) in POSITIONS.items():
        terminal = state in TERMINAL_STATES
        is_current = state is highlight
        fill = "#1f6feb" if is_current else ("#eef1f5" if terminal else "#ffffff")
        text = "#ffffff" if is_current else "#1d2330"
        out.append(
            f"<g class='state{' state-current' if is_current else ''}' data-state='{state}'>"
            f"<rect x='{x - BOX_W / 2:.0f}' y='{y - BOX_H / 2:.0f}' width='{BOX_W}' "
            f"height='{BOX_H}' rx='{18 if terminal else 6}' fill='{fill}' stroke='#1d2330' "
            f"stroke-width='{2.5 if is_current else 1}'/>"
            f"<text x='{x}' y='{y + 4}' font-size='12' font-weight='600' fill='{text}' "
            f"text-anchor='middle'>{state.value}</text>"
            f"<title>{escape(STATE_INFO[state].purpose)}</title></g>"
        )
    out.append(
        f"<text x='20' y='{HEIGHT - 12}' font-size='12' fill='#5b6472'>Any of the "
        f"{len(NON_TERMINAL_STATES)} non-terminal states: run.cancelled -&gt; CANCELLED, "
        "run.failed -&gt; FAILED. Every absent edge is denied.</text>"
    )
    out.append("</svg>")
    return "".join(out)
