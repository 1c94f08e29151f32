"""The state diagram is readable: every edge label has its own place (no label overlaps
another label, a state box or the footer), lies inside the view box next to its edge and
leaves the arrowhead visible; no edge runs through a state it does not connect.

Label boxes are computed from the monospace font's advance (``CHAR_W`` per character); the
browser suite measures the rendered labels in Chromium against the same rules."""

from __future__ import annotations

import itertools
import math
import re

import pytest

from runs.domain import render
from runs.domain.states import EventType, State
from runs.domain.transitions import TRANSITION_LIST, events_from

LAYOUT = render.diagram_layout()
DRAWN = [
    t for t in TRANSITION_LIST if t.event not in (EventType.RUN_CANCELLED, EventType.RUN_FAILED)
]


def label_pairs():
    return itertools.combinations(LAYOUT.edges, 2)


def test_every_drawn_transition_is_on_exactly_one_edge_and_labelled():
    on_edges = [t for edge in LAYOUT.edges for t in edge.transitions]
    assert sorted(on_edges, key=str) == sorted(DRAWN, key=str)
    for edge in LAYOUT.edges:
        assert edge.lines == tuple(t.event.value for t in edge.transitions)
        assert all((t.source, t.target) == (edge.source, edge.target) for t in edge.transitions)


def test_no_two_edge_labels_intersect():
    overlaps = [
        (a.lines, b.lines) for a, b in label_pairs() if a.label.intersects(b.label, gap=1.0)
    ]
    assert overlaps == []


def test_every_label_is_inside_the_view_box_and_off_every_state_box_and_the_footer():
    for edge in LAYOUT.edges:
        assert edge.label.inside(LAYOUT.width, LAYOUT.height), edge.lines
        assert not edge.label.intersects(render.footer_box()), edge.lines
        for state, box in LAYOUT.states.items():
            assert not edge.label.intersects(box, gap=1.0), (edge.lines, state)


def test_every_state_box_is_inside_the_view_box_and_no_two_overlap():
    for box in LAYOUT.states.values():
        assert box.inside(LAYOUT.width, LAYOUT.height)
    for (s1, a), (s2, b) in itertools.combinations(LAYOUT.states.items(), 2):
        assert not a.intersects(b, gap=20), (s1, s2)


def test_a_label_box_is_wide_enough_for_its_text_in_the_monospace_font():
    assert render.CHAR_W >= 0.6 * render.LABEL_FONT  # monospace advance is 0.6 em or less
    for edge in LAYOUT.edges:
        assert edge.label.w >= max(map(len, edge.lines)) * render.CHAR_W
        assert edge.label.h >= len(edge.lines) * render.LABEL_FONT


def test_every_label_sits_next_to_its_own_edge_and_leaves_the_arrowhead_visible():
    for edge in LAYOUT.edges:
        cx, cy = edge.label.x + edge.label.w / 2, edge.label.y + edge.label.h / 2
        nearest = min(math.dist((cx, cy), p) for p in edge.points)
        assert nearest <= 40, (edge.lines, nearest)
        tip = edge.points[-1]
        assert not edge.label.contains(*tip, gap=2.0), edge.lines


def test_no_edge_runs_through_a_state_it_does_not_connect():
    crossings = [
        (edge.source.value, edge.target.value, state.value)
        for edge in LAYOUT.edges
        for state, box in LAYOUT.states.items()
        if state not in (edge.source, edge.target)
        and any(box.contains(x, y) for x, y in edge.points)
    ]
    assert crossings == []


def test_the_svg_draws_the_layout():
    svg = render.state_diagram_svg("VALIDATING")
    assert f"viewBox='0 0 {LAYOUT.width} {LAYOUT.height}'" in svg.replace('"', "'")
    rects = re.findall(r"<rect class='label-box' x='([\d.]+)' y='([\d.]+)'", svg)
    assert len(rects) == len(LAYOUT.edges)
    for (x, y), edge in zip(rects, LAYOUT.edges, strict=True):
        assert (float(x), float(y)) == pytest.approx((edge.label.x, edge.label.y), abs=0.06)
    # The current state's outgoing edges are highlighted, and only those.
    active = svg.count("class='edge edge-active'")
    assert active == sum(1 for e in LAYOUT.edges if e.source is State.VALIDATING)


def test_a_label_that_cannot_be_placed_is_an_error_not_an_overlap(monkeypatch):
    monkeypatch.setattr(render, "_ALONG", (20,))
    monkeypatch.setattr(render, "_OFF", (0.0,))
    render.diagram_layout.cache_clear()
    try:
        with pytest.raises(render.LayoutError, match="no free place"):
            render.diagram_layout()
    finally:
        render.diagram_layout.cache_clear()


def test_the_diagrams_text_alternative_names_the_current_state_and_its_way_out():
    text = render.state_description("WAITING_HUMAN")
    assert text.startswith("Run state: WAITING_HUMAN.")
    for t in events_from(State.WAITING_HUMAN):
        assert f"{t.event} to {t.target}" in text
    assert render.state_description("COMPLETED") == (
        "Run state: COMPLETED. It is terminal: no transition leaves it."
    )
    svg = render.state_diagram_svg("WAITING_HUMAN", title=text)
    assert f'aria-label="{text}"' in svg
