"""Rendering a summary: the terminal table, the Markdown report and the PNG plots."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .metrics import BOOTSTRAP_RESAMPLES
from .tokens import TOKENIZER_NAME

#: Columns of the main table per dataset: (metric, header).
MAIN_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "locomo": (
        ("recall@5", "R@5"),
        ("recall@10", "R@10"),
        ("hit@10", "Hit@10"),
        ("mrr", "MRR"),
        ("ndcg@5", "NDCG@5"),
        ("ndcg@10", "NDCG@10"),
        ("session_recall@5", "SessR@5"),
        ("budget_recall@1000", "R@1k tok"),
        ("budget_recall@2000", "R@2k tok"),
        ("budget_recall@4000", "R@4k tok"),
        ("context_recall@2000", "Ctx@2k"),
    ),
    "beam": (
        ("recall@10", "R@10"),
        ("recall@20", "R@20"),
        ("hit@20", "Hit@20"),
        ("mrr", "MRR"),
        ("ndcg@5", "NDCG@5"),
        ("ndcg@10", "NDCG@10"),
        ("all@20", "All@20"),
        ("budget_recall@1000", "R@1k tok"),
        ("budget_recall@2000", "R@2k tok"),
        ("budget_recall@4000", "R@4k tok"),
        ("context_recall@2000", "Ctx@2k"),
    ),
    "longmemeval": (
        ("lme.session.recall_any@5", "S any@5"),
        ("lme.session.recall_all@5", "S all@5"),
        ("lme.session.ndcg_any@5", "S ndcg@5"),
        ("lme.session.recall_all@10", "S all@10"),
        ("lme.turn.recall_any@10", "T any@10"),
        ("lme.turn.recall_all@10", "T all@10"),
        ("lme.turn.ndcg_any@10", "T ndcg@10"),
        ("mrr", "MRR"),
        ("ndcg@5", "NDCG@5"),
        ("budget_recall@2000", "R@2k tok"),
        ("budget_recall@4000", "R@4k tok"),
        ("context_recall@2000", "Ctx@2k"),
    ),
}


#: Columns left out of the terminal table so it fits 100 columns (the report has them all).
TERMINAL_HIDDEN = frozenset(
    {
        "NDCG@5",
        "NDCG@10",
        "SessR@5",
        "All@20",
        "R@1k tok",
        "R@4k tok",
        "S any@5",
        "T any@10",
        "T ndcg@10",
    }
)


#: How the separately reported group is called in answer-accuracy tables.
SEPARATE_NAMES = {"locomo": "adversarial", "longmemeval": "abstention", "beam": "abstention"}


def _pct(value: float) -> str:
    return "–" if value is None or math.isnan(value) else f"{100 * value:.1f}"


def _ci(est: dict[str, Any]) -> str:
    if est["n"] == 0:
        return "–"
    return f"{_pct(est['mean'])} [{_pct(est['low'])}–{_pct(est['high'])}]"


def _bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def main_rows(summary: dict[str, Any], with_ci: bool = False) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the headline table (percentages), one row per configuration."""
    columns = MAIN_COLUMNS.get(summary["dataset"], MAIN_COLUMNS["locomo"])
    header = ["config", "n", *(h for _, h in columns), "p50 ms", "p95 ms"]
    rows = []
    for name, block in summary["configs"].items():
        cells = [
            _ci(block["overall"][metric]) if with_ci else _pct(block["overall"][metric]["mean"])
            for metric, _ in columns
        ]
        latency = block["latency_ms"]
        rows.append(
            [
                name,
                str(_scored(block["overall"], columns[0][0], block["questions"])),
                *cells,
                f"{latency['p50']:.1f}",
                f"{latency['p95']:.1f}",
            ]
        )
    full = summary["full_context"]
    rows.append(
        [
            f"full-context {full['mean_tokens']:,.0f} tok",
            str(full["questions"]),
            *("100.0" for _ in columns),
            "–",
            "–",
        ]
    )
    return header, rows


def print_summary(summary: dict[str, Any], console: Any = None) -> None:
    """The headline table, category table and speed line, printed with rich."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    header, rows = main_rows(summary)
    keep = [i for i, column in enumerate(header) if column not in TERMINAL_HIDDEN]
    table = Table(title=f"{summary['dataset']} — retrieval (%, mean over questions)")
    for i in keep:
        left = header[i] == "config"
        table.add_column(header[i], justify="left" if left else "right", no_wrap=left)
    for row in rows:
        table.add_row(*(row[i] for i in keep))
    console.print(table)

    header, rows = category_rows(summary)
    if rows:
        table = Table(title=f"by category — {header[-1]}")
        for column in header[:-1]:
            table.add_column(column, justify="left" if column == "category" else "right")
        for row in rows:
            table.add_row(*row)
        console.print(table)
    speed = summary["speed"]
    console.print(
        f"ingest {speed['messages']:,} messages in {speed['ingest_seconds']:.1f} s "
        f"({speed['ingest_messages_per_second']:.0f} msg/s); "
        f"store {_bytes(speed['store_bytes_mean'])} mean per case; "
        f"peak RSS {_bytes(speed['peak_rss_bytes'])}"
    )
    for comparison in summary["comparisons"]:
        console.print(_comparison_line(comparison))
    for name, block in summary["configs"].items():
        if "qa" in block:
            qa = block["qa"]
            console.print(
                f"QA {name}: {_ci(qa['score'])} ({qa['grader']}); "
                f"{qa['errored']} of {qa['graded']} errored"
            )
    full = summary["full_context"].get("qa")
    if full:
        console.print(f"QA full-context: {_ci(full['score'])}; {full['errored']} errored")


def category_rows(summary: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Headline metric by category (and the separately reported group), per config."""
    from .summary import CATEGORY_METRICS

    metrics = CATEGORY_METRICS.get(summary["dataset"], ())
    if not metrics or not summary["configs"]:
        return [], []
    metric = summary["headline"][0] if summary["headline"] else metrics[0]
    if metric not in metrics:
        metric = metrics[0]
    names = list(summary["configs"])
    first = summary["configs"][names[0]]
    header = ["category", "n", *names, metric]
    rows = []
    for category, block in first["by_category"].items():
        cells = [
            _pct(
                summary["configs"][n]["by_category"]
                .get(category, {})
                .get(metric, {})
                .get("mean", math.nan)
            )
            for n in names
        ]
        rows.append([category, str(_scored(block, metric, block["questions"])), *cells])
    separate = first["separate"]
    if separate["questions"]:
        cells = [
            _pct(summary["configs"][n]["separate"].get(metric, {}).get("mean", math.nan))
            for n in names
        ]
        rows.append([f"{separate['name']} (separate)", str(separate["questions"]), *cells])
    return header, rows


def _scored(block: dict[str, Any], metric: str, asked: int) -> int:
    """How many questions ``metric`` was computed on (a question without evidence is
    asked but not scored), falling back to the questions asked."""
    estimate = block.get(metric)
    return int(estimate["n"]) if isinstance(estimate, dict) and "n" in estimate else asked


def _p(value: float, resamples: int | None = None) -> str:
    if resamples and value == 0:
        return f"p<{1 / resamples:.1g}"
    return f"p={value:.3g}"


def _comparison_line(c: dict[str, Any]) -> str:
    mc, pb = c["mcnemar"], c["paired_bootstrap"]
    return (
        f"{c['a']} vs {c['b']} (n={c['questions']}): {mc['metric']} McNemar exact "
        f"{c['a']}-only {mc['a_only']}, {c['b']}-only {mc['b_only']}, {_p(mc['p_value'])}; "
        f"{pb['metric']} paired bootstrap diff {100 * pb['diff']:+.1f} pts "
        f"[{100 * pb['low']:+.1f}, {100 * pb['high']:+.1f}], "
        f"{_p(pb['p_value'], BOOTSTRAP_RESAMPLES)}"
    )


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def markdown(summary: dict[str, Any], command: str | None = None) -> str:
    """The full Markdown report of one run."""
    options = summary["options"]
    out = [f"# {summary['dataset']} retrieval benchmark", ""]
    if command:
        out += ["```", command, "```", ""]
    out += [
        f"- data: `{summary['data_path']}` sha256 `{summary['data_sha256']}`",
        f"- configs: {', '.join(options['configs'])}; "
        f"embedder `{summary['environment'].get('embedder')}`;"
        f" depth {options['depth']} hits; candidates override {options['candidates']};"
        f" as-of filter {options['as_of']}",
        f"- anamnesis {summary['environment'].get('anamnesis')} @ "
        f"`{summary['environment'].get('git_commit')}`, Python "
        f"{summary['environment'].get('python')}, {summary['environment'].get('cpus')} CPUs",
        f"- started {summary['started_at']}, {summary['seconds']:.0f} s; tokens: {TOKENIZER_NAME}",
    ]
    if summary["notes"]:
        notes = ", ".join(f"{k} {v}" for k, v in sorted(summary["notes"].items()))
        out.append(f"- data notes: {notes}")
    out += ["", "## Retrieval (%, mean over questions)", ""]
    header, rows = main_rows(summary)
    out += [_md_table(header, rows), ""]
    out += ["With 95% intervals (Wilson for 0/1 metrics, bootstrap for the others):", ""]
    header, rows = main_rows(summary, with_ci=True)
    out += [_md_table(header, rows[:-1]), ""]
    header, rows = category_rows(summary)
    if rows:
        out += [f"## By category — {header[-1]}", "", _md_table(header[:-1], rows), ""]
    if summary["dataset"] == "longmemeval":
        out += ["## LongMemEval official metrics (all k)", "", _official_table(summary), ""]
    qa = qa_section(summary)
    if qa:
        out += qa
    if summary["comparisons"]:
        out += ["## Paired comparisons", ""]
        out += [f"- {_comparison_line(c)}" for c in summary["comparisons"]]
        out.append("")
    speed = summary["speed"]
    out += [
        "## Speed and size",
        "",
        f"- ingest: {speed['messages']:,} messages in {speed['ingest_seconds']:.1f} s = "
        f"{speed['ingest_messages_per_second']:.0f} messages/s "
        f"(embedding cache: {summary['environment'].get('embedding_cache')})",
        f"- store: {_bytes(speed['store_bytes_mean'])} mean, {_bytes(speed['store_bytes_max'])} max"
        f" per case; {speed['store_bytes_per_message']:.0f} bytes per message",
        f"- peak RSS {_bytes(speed['peak_rss_bytes'])}",
    ]
    for name, block in summary["configs"].items():
        lat = block["latency_ms"]
        out.append(
            f"- {name}: search p50 {lat['p50']:.1f} ms, p95 {lat['p95']:.1f} ms over {lat['n']}"
            f" searches; {block['mean_hits']:.1f} hits/search"
        )
        empty = block.get("empty_results")
        if empty and (empty["answerable"] or empty["separate"]):
            out.append(
                f"  - {name}: empty results on {_pct(empty['answerable'])}% of answerable "
                f"questions, {_pct(empty['separate'])}% of {block['separate']['name']}"
            )
    out.append("")
    return "\n".join(out)


def qa_section(summary: dict[str, Any]) -> list[str]:
    """Markdown lines for answer accuracy, or [] when the run had no --qa."""
    rows = []
    for name, block in summary["configs"].items():
        if "qa" in block:
            rows.append((name, block["qa"]))
    full = summary["full_context"].get("qa")
    if full:
        rows.append((f"full-context ({summary['full_context']['mean_tokens']:,.0f} tok)", full))
    if not rows:
        return []
    usage = summary.get("qa_usage") or {}
    separate = SEPARATE_NAMES.get(summary["dataset"], "separate")
    out = [
        "## Answer accuracy",
        "",
        f"Reader `{usage.get('reader_model')}` on at most {usage.get('budget_tokens')} tokens "
        f"of retrieved context; grader `{rows[0][1]['grader']}`"
        + (f" (judge `{usage.get('judge_model')}`)" if usage.get("judge_model") else "")
        + f". Usage: reader {usage.get('reader')}, judge {usage.get('judge')}.",
        "",
    ]
    header = ["config", "score", separate, "all", "errored / graded"]
    table = [
        [
            name,
            _ci(b["score"]),
            _ci(b["separate"]),
            _ci(b["all"]),
            f"{b['errored']} / {b['graded']}",
        ]
        for name, b in rows
    ]
    out += [_md_table(header, table), ""]
    categories = sorted({c for _, b in rows for c in b["by_category"]})
    header = ["category", *(name for name, _ in rows)]
    table = [
        [c, *(_pct(b["by_category"].get(c, {}).get("mean", math.nan)) for _, b in rows)]
        for c in categories
    ]
    out += [_md_table(header, table), ""]
    return out


def _official_table(summary: dict[str, Any]) -> str:
    header = ["config", "level", *(f"@{k}" for k in summary["ks"])]
    rows = []
    for name, block in summary["configs"].items():
        for level in ("session", "turn"):
            for measure in ("recall_any", "recall_all", "ndcg_any"):
                cells = [
                    _pct(block["overall"][f"lme.{level}.{measure}@{k}"]["mean"])
                    for k in summary["ks"]
                ]
                rows.append([name, f"{level} {measure}", *cells])
    return _md_table(header, rows)


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, or None (with a warning) when not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        warnings.warn(
            "matplotlib is not installed, so no plot is drawn: pip install 'anamnesis[bench]'",
            stacklevel=3,
        )
        return None
    return plt


def plot_recall(summary: dict[str, Any], path: Path) -> Path | None:
    """Recall@k curves, one line per configuration. None when matplotlib is missing."""
    plt = pyplot()
    if plt is None:
        return None
    metric = "lme.session.recall_all@{k}" if summary["dataset"] == "longmemeval" else "recall@{k}"
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, block in summary["configs"].items():
        ks = summary["ks"]
        values = [100 * block["overall"][metric.format(k=k)]["mean"] for k in ks]
        ax.plot(ks, values, marker="o", label=name)
    ax.set_xscale("log")
    ax.set_xticks(summary["ks"], [str(k) for k in summary["ks"]])
    ax.set_xlabel("k")
    ax.set_ylabel(metric.format(k="k") + " (%)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"{summary['dataset']}: {metric.format(k='k')}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
