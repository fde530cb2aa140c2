"""Search p50 against the store's size, on log axes, from ``anamnesis bench scale`` runs.

Each argument is a run's ``scale.json``; each preset in each layout (one scope, or
scopes of a given size) is one line, joining the points of every run of that layout.
``RUN/scale.json@N`` takes only that run's points of at least N episodes. The figure
goes to OUT (PNG):

    python docs/experiments/scripts/scale_plot.py OUT.png RUN1/scale.json RUN2/scale.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(out: str, runs: list[str]) -> None:
    """Draw every preset's p50 against episodes, one line per layout and preset (points
    of several runs of the same layout joined in order of size)."""
    fig, axis = plt.subplots(figsize=(6.4, 4.2))
    loads: list[float] = []
    lines: dict[tuple[int, str], list[tuple[int, float]]] = {}
    for run in runs:
        path, _, least = run.partition("@")
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        scope_size = data["options"].get("scope_size") or 0
        for point in data["points"]:
            if point["episodes"] < int(least or 0):
                continue
            if point.get("load_average"):
                loads.append(point["load_average"][0])
            for config in data["options"]["configs"]:
                lines.setdefault((scope_size, config), []).append(
                    (point["episodes"], point["search_ms"][config]["p50"])
                )
    for (scope_size, config), points in sorted(lines.items()):
        points.sort()
        layout = "one scope" if not scope_size else f"scopes of {scope_size:,}"
        axis.plot(
            [n for n, _ in points],
            [ms for _, ms in points],
            marker="o",
            linestyle="-" if not scope_size else "--",
            label=f"{config}, {layout}",
        )
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("episodes in the store")
    axis.set_ylabel("search p50 (ms, query embedding included)")
    axis.grid(alpha=0.3, which="both")
    axis.legend(fontsize=8)
    if loads:
        axis.set_title(
            f"2-core VM shared with other jobs: load average {min(loads):.0f}-{max(loads):.0f}",
            fontsize=9,
        )
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
