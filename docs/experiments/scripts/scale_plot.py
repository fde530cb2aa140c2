"""Search p50 against the store's size, on log axes, from ``anamnesis bench scale`` runs.

Each argument is a run's ``scale.json``; every preset of every run is one line (a run
in small scopes is labelled with its scope size). The figure goes to OUT (PNG):

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
    """Draw every run's p50 per preset against episodes."""
    fig, axis = plt.subplots(figsize=(6.4, 4.2))
    loads: list[float] = []
    for run in runs:
        data = json.loads(Path(run).read_text(encoding="utf-8"))
        scope_size = data["options"].get("scope_size")
        layout = "one scope" if not scope_size else f"scopes of {scope_size:,}"
        points = data["points"]
        loads += [p["load_average"][0] for p in points if p.get("load_average")]
        sizes = [p["episodes"] for p in points]
        for config in data["options"]["configs"]:
            axis.plot(
                sizes,
                [p["search_ms"][config]["p50"] for p in points],
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
