"""The benchmark as one Python call: load, run, summarise, write the results folder."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError
from . import datasets
from .report import markdown, plot_recall
from .runner import (
    BenchOptions,
    CaseOutput,
    CaseSpeed,
    ProgressHook,
    RunResult,
    run,
    write_records,
)
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
    writer = _CaseWriter(target, command)
    try:
        result = run(dataset, options, work_dir, progress, on_case=writer)
    finally:
        writer.close()
        if not options.keep_stores:
            shutil.rmtree(work_dir, ignore_errors=True)
    writer.finish(result)
    return BenchOutput(target, write_reports(result, target, command))


def write_reports(result: RunResult, target: Path, command: str | None) -> dict[str, Any]:
    """Summarise ``result`` into ``summary.json``, ``report.md`` and ``recall.png``."""
    summary = summarise(result)
    summary["command"] = command
    write_summary(summary, target / "summary.json")
    (target / "report.md").write_text(markdown(summary, command), encoding="utf-8")
    plot_recall(summary, target / "recall.png")
    return summary


class _CaseWriter:
    """Writes ``run.json`` first, then each case's records and measurements as they
    finish, so an interrupted run leaves a folder that ``rebuild`` can report on."""

    def __init__(self, target: Path, command: str | None) -> None:
        self.target = target
        self.command = command
        self.records = open(target / "records.jsonl", "w", encoding="utf-8")
        self.cases = open(target / "cases.jsonl", "w", encoding="utf-8")
        self.started = False

    def __call__(self, result: RunResult, output: CaseOutput) -> None:
        if not self.started:
            self._write_meta(result, finished=False)
            self.started = True
        write_records(output.records, self.records)
        line = {
            **asdict(output.speed),
            "full_tokens": output.full_tokens,
            "full_context_qa": output.full_context_qa,
        }
        self.cases.write(json.dumps(_clean(line), ensure_ascii=False) + "\n")
        self.records.flush()
        self.cases.flush()

    def _write_meta(self, result: RunResult, *, finished: bool) -> None:
        meta = {
            **result.meta(),
            "qa_usage": result.qa_usage,
            "command": self.command,
            "finished": finished,
        }
        (self.target / "run.json").write_text(json.dumps(_clean(meta), indent=2), "utf-8")

    def close(self) -> None:
        self.records.close()
        self.cases.close()

    def finish(self, result: RunResult) -> None:
        self._write_meta(result, finished=True)


def rebuild(target: str | Path, merge: Sequence[str | Path] = ()) -> dict[str, Any]:
    """Re-summarise a results folder from its ``run.json``, ``records.jsonl`` and
    ``cases.jsonl`` (after a report change, or for a run that was interrupted).

    Folders in ``merge`` (runs of the same dataset and options over other cases, e.g.
    started with ``--skip``) are added; a case present twice is counted once.
    """
    target = Path(target)
    meta = json.loads((target / "run.json").read_text(encoding="utf-8"))
    sources = [target, *(Path(m) for m in merge)]
    saved: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in meta["options"].items()
    }
    options = BenchOptions(**saved)
    result = RunResult(
        dataset=meta["dataset"],
        data_path=meta["data_path"],
        data_sha256=meta["data_sha256"],
        options=options,
        notes=meta["notes"],
        started_at=meta["started_at"],
        seconds=meta["seconds"],
        peak_rss_bytes=meta["peak_rss_bytes"],
        environment=meta["environment"],
        qa_usage=meta.get("qa_usage") or {},
    )
    case_lines: list[str] = []
    finished = all([_read_folder(source, result, case_lines) for source in sources])
    for source in sources[1:]:
        # Data notes count problems per case, so the shards' counts add up.
        other = json.loads((source / "run.json").read_text(encoding="utf-8"))["notes"]
        for key, value in other.items():
            if isinstance(value, int) and key not in ("skip", "limit"):
                result.notes[key] = result.notes.get(key, 0) + value
    if merge:
        result.notes["merged"] = [str(s) for s in sources]
        result.notes.pop("skip", None)
        result.notes.pop("limit", None)
        write_records(result.records, target / "records.jsonl")
        (target / "cases.jsonl").write_text("".join(case_lines), encoding="utf-8")
    if not finished:
        result.notes["partial"] = f"interrupted after {len(result.ingest)} cases"
    return write_reports(result, target, meta.get("command"))


def _read_folder(source: Path, result: RunResult, case_lines: list[str]) -> bool:
    """Add a results folder's cases and records to ``result`` (skipping cases it already
    has) and its new ``cases.jsonl`` lines to ``case_lines``; True when that run finished."""
    meta = json.loads((source / "run.json").read_text(encoding="utf-8"))
    if meta["data_sha256"] != result.data_sha256:
        raise InvalidInputError(f"{source} ran on other data than the folder it merges into")
    # Merged runs ran side by side: wall time and memory are the worst of them.
    result.seconds = max(result.seconds, meta["seconds"])
    result.peak_rss_bytes = max(result.peak_rss_bytes, meta["peak_rss_bytes"])
    new: set[str] = set()
    with open(source / "cases.jsonl", encoding="utf-8") as handle:
        for line in handle:
            case = json.loads(line)
            if case["case"] in result.full_context_tokens:
                continue
            new.add(case["case"])
            case_lines.append(line if line.endswith("\n") else line + "\n")
            result.ingest.append(
                CaseSpeed(
                    case["case"],
                    case["messages"],
                    case["ingest_seconds"],
                    case["store_bytes"],
                    case.get("consolidate_seconds", 0.0),
                    case.get("facts", 0),
                    case.get("searched_from", ""),
                )
            )
            result.full_context_tokens[case["case"]] = case["full_tokens"]
            result.full_context_qa.update(case.get("full_context_qa") or {})
    with open(source / "records.jsonl", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if record["case"] in new:
                record["metrics"] = {
                    k: math.nan if v is None else v for k, v in record["metrics"].items()
                }
                result.records.append(record)
    return bool(meta.get("finished"))


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
