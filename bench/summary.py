"""Print result lines (JSON, one per figure, on stdin) as a table: verdict, figure, ratio."""

from __future__ import annotations

import json
import sys


def main() -> None:
    for raw in sys.stdin:
        if not raw.strip():
            continue
        r = json.loads(raw)
        verdict = {True: "PASS", False: "MISS", None: "    "}[r["pass"]]
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        base = "-" if r["baseline"] is None else f"{r['baseline']:g}"
        print(
            f"{verdict}  {r['bench']:<58} {r['value']:>12g} {r['unit']:<13} "
            f"base {base:>10} {ratio:>7}  {r['target'] or ''}"
        )


if __name__ == "__main__":
    main()
