"""Reads for the routing evaluation page: every selector x catalog evaluated over the
labelled cases, with a funnel chart per evaluation."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sim import routing_eval

FUNNEL_LABELS = {
    "cases": "labelled cases",
    "coverage": "coverage",
    "exposure": "exposure",
    "retrieval": "retrieval (top k)",
    "selection": "selection",
}
BAR_WIDTH = 320
BAR_HEIGHT = 24
BAR_GAP = 8
LABEL_WIDTH = 130


def funnel_chart(funnel: list[dict[str, Any]]) -> dict[str, Any]:
    """Geometry of a horizontal funnel chart (one bar per stage, width ~ surviving cases)."""
    total = funnel[0]["count"] if funnel else 0
    bars = []
    for i, step in enumerate(funnel):
        share = step["count"] / total if total else 0.0
        width = round(BAR_WIDTH * share)
        bars.append(
            {
                "stage": step["stage"],
                "label": FUNNEL_LABELS.get(step["stage"], step["stage"]),
                "count": step["count"],
                "pct": round(100 * share),
                "y": i * (BAR_HEIGHT + BAR_GAP),
                "x": LABEL_WIDTH + (BAR_WIDTH - width) // 2,
                "width": width,
                "text_y": i * (BAR_HEIGHT + BAR_GAP) + BAR_HEIGHT // 2 + 5,
            }
        )
    return {
        "bars": bars,
        "total": total,
        "width": LABEL_WIDTH + BAR_WIDTH + 90,
        "height": len(bars) * (BAR_HEIGHT + BAR_GAP),
        "bar_height": BAR_HEIGHT,
        "label_x": LABEL_WIDTH - 10,
        "value_x": LABEL_WIDTH + BAR_WIDTH + 8,
    }


METRIC_LABELS = {
    "capability_coverage": "capability coverage",
    "exposure_recall": "exposure recall (given coverage)",
    "recall_at_k": "recall@k (given exposure)",
    "selection_accuracy": "selection accuracy (given retrieval)",
    "abstention_accuracy": "abstention accuracy",
    "violation_rate": "violation rate (lower is better)",
    "end_to_end_accuracy": "end-to-end accuracy",
    "arguments_validity": "arguments valid (model-owned fields)",
    "selected_outside_visible": "chose a capability it was not shown",
}


def routing_report(k: int) -> dict[str, Any]:
    cases = routing_eval.load_cases()
    evaluations = []
    for selector_name in routing_eval.SELECTORS:
        for registry_name in routing_eval.REGISTRIES:
            report = routing_eval.evaluate(
                registry_name=registry_name, selector_name=selector_name, k=k, cases=cases
            )
            data = report.as_dict()
            evaluations.append(
                {
                    "id": f"{selector_name}-{registry_name}",
                    "selector": selector_name,
                    "registry": registry_name,
                    "report": report,
                    "data": data,
                    "metrics": [
                        (name, METRIC_LABELS.get(name, name), rate)
                        for name, rate in report.metrics().items()
                    ],
                    "chart": funnel_chart(data["funnel"]),
                }
            )
    metric_names = list(METRIC_LABELS)
    comparison = [
        (
            METRIC_LABELS[name],
            [dict((n, r) for n, _, r in e["metrics"])[name] for e in evaluations],
        )
        for name in metric_names
    ]
    return {
        "k": k,
        "cases": [
            {
                "case_id": c.case_id,
                "category": c.category.value,
                "situation": c.situation,
                "goal": c.goal,
                "acceptable": sorted(c.acceptable),
                "forbidden": sorted(c.forbidden),
            }
            for c in cases
        ],
        "evaluations": evaluations,
        "comparison": comparison,
        "category_counts": sorted(Counter(c.category.value for c in cases).items()),
    }
