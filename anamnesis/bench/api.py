"""The benchmark as one Python call: load, run, summarise, write the results folder."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from . import datasets
from .report import markdown, plot_recall
from .runner import BenchOptions, ProgressHook, run, write_records
from .summary import summarise

#: Where results go unless told otherwise (gitignored).
DEFAULT_RESULTS = Path("results")


@dataclass(frozen=True, slots=True)
class BenchOutput:
    """What a run wrote: its folder and the summary."""

    out_dir: Path
    summary: dict[str, Any]


def default_out_dir(name: str, base: Path = DEFAULT_RESULTS) -> Path:
    """``results/<name>-<YYYYmmdd-HHMMSS>``."""
    return base / f"{name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def run_benchmark(
    name: str,
    data: str | Path,
    *,
    options: BenchOptions | None = None,
    limit: int | None = None,
    out_dir: str | Path | None = None,
    progress: ProgressHook | None = None,
    command: str | None = None,
) -> BenchOutput:
    """Run dataset ``name`` (``locomo``, ``longmemeval``, ``beam``) from file ``data``.

    Writes ``records.jsonl`` (one line per question and config), ``summary.json``,
    ``report.md`` and ``recall.png`` into ``out_dir`` (default
    ``results/<name>-<timestamp>``) and returns the summary.
    """
    dataset = datasets.load(name, data, limit=limit)
    if limit is not None:
        dataset.notes["limit"] = limit
    return run_dataset(dataset, options, out_dir=out_dir, progress=progress, command=command)


def run_dataset(
    dataset: datasets.Dataset,
    options: BenchOptions | None = None,
    *,
    out_dir: str | Path | None = None,
    progress: ProgressHook | None = None,
    command: str | None = None,
) -> BenchOutput:
    """Run an already loaded dataset; see ``run_benchmark``."""
    options = options or BenchOptions()
    if options.speaker_prefix:
        datasets.prefix_speakers(dataset)
    target = Path(out_dir) if out_dir is not None else default_out_dir(dataset.name)
    target.mkdir(parents=True, exist_ok=True)
    work_dir = target / "stores"
    try:
        result = run(dataset, options, work_dir, progress)
    finally:
        if not options.keep_stores:
            shutil.rmtree(work_dir, ignore_errors=True)
    summary = summarise(result)
    summary["command"] = command
    write_records(result.records, target / "records.jsonl")
    write_summary(summary, target / "summary.json")
    (target / "report.md").write_text(markdown(summary, command), encoding="utf-8")
    plot_recall(summary, target / "recall.png")
    return BenchOutput(target, summary)


def write_summary(summary: dict[str, Any], path: Path) -> None:
    """The summary as indented JSON (nan written as null)."""
    path.write_text(json.dumps(_clean(summary), indent=2, ensure_ascii=False), encoding="utf-8")


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value
