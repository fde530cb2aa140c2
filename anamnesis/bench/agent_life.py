"""``anamnesis bench agent-life``: an agent's memory of a person's life and work, as the
agent stores it: short notes over months, most without a session, facts that change.

Each persona (``anamnesis/bench/agent_life/personas/*.json``, README beside them) is a
list of dated items and questions asked at a moment (``asked_at``). For each moment a
store holds exactly the items dated at or before it, so a later change is not there
to be found; each question is searched with ``now=asked_at``. Reported per preset and
per question type: hit@1 (the first hit is gold), recall@5/@10 (the share of the gold
found), MRR, and for questions with superseded items (``stale``) how often one of them
ranks above the first gold ("superseded above current").
"""

from __future__ import annotations

import json
import math
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from ..config import SearchConfig
from ..embed import get_embedder
from ..ingest.normalise import parse_time
from ..memory import Memory
from .metrics import estimate, mcnemar_exact, paired_bootstrap
from .presets import BENCH_PRESETS

#: The personas written for this benchmark.
PERSONAS = Path(__file__).parent / "agent_life" / "personas"
#: Hits read per question: enough to place gold and stale items below the top 10.
DEPTH = 50
#: The question types, in the order reports list them.
TYPES = (
    "current_state",
    "past_state",
    "when_changed",
    "preference",
    "single_fact",
    "multi_hop",
    "relative_time",
)
METRICS = ("hit@1", "recall@5", "recall@10", "mrr", "stale_above")


@dataclass(frozen=True)
class Question:
    """One question of one persona, with its gold and superseded items."""

    persona: str
    index: int
    text: str
    asked_at: datetime
    type: str
    kind: str
    gold: frozenset[str]
    stale: frozenset[str]

    @property
    def key(self) -> str:
        return f"{self.persona}#{self.index}"


@dataclass
class Persona:
    """A persona's items (by id) and questions."""

    name: str
    kind: str
    user_id: str
    items: list[dict[str, Any]]
    questions: list[Question] = field(default_factory=list)


def load_personas(folder: Path = PERSONAS, names: Sequence[str] = ()) -> list[Persona]:
    """The personas in ``folder`` (all of them, or those named), sorted by name."""
    found = []
    for path in sorted(folder.glob("*.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        name = raw.get("persona", path.stem)
        if names and name not in names:
            continue
        persona = Persona(name, raw.get("kind", "life"), raw.get("user_id", name), raw["items"])
        for index, q in enumerate(raw["questions"]):
            persona.questions.append(
                Question(
                    persona=name,
                    index=index,
                    text=q["question"],
                    asked_at=_when(q["asked_at"]),
                    type=q.get("type", "single_fact"),
                    kind=persona.kind,
                    gold=frozenset(q["gold"]),
                    stale=frozenset(q.get("stale", ())),
                )
            )
        found.append(persona)
    return found


def _when(value: str) -> datetime:
    """A dated item's or question's time (both are required in the persona files)."""
    when = parse_time(value, "time")
    if when is None:
        raise ValueError(f"no time in {value!r}")
    return when


def score(ranked: Sequence[str], question: Question) -> dict[str, float]:
    """The metrics of one ranked list of item ids against a question's gold."""
    gold = question.gold
    first = next((rank for rank, item in enumerate(ranked) if item in gold), None)
    out = {
        "hit@1": 1.0 if first == 0 else 0.0,
        "recall@5": len(gold & set(ranked[:5])) / len(gold),
        "recall@10": len(gold & set(ranked[:10])) / len(gold),
        "mrr": 1.0 / (first + 1) if first is not None else 0.0,
        "stale_above": math.nan,
    }
    if question.stale:
        stale = next((rank for rank, item in enumerate(ranked) if item in question.stale), None)
        above = stale is not None and (first is None or stale < first)
        out["stale_above"] = 1.0 if above else 0.0
    return out


def _store_items(memory: Memory, persona: Persona, until: datetime) -> dict[str, str]:
    """Add the persona's items dated at or before ``until``; episode id -> item id."""
    items = [i for i in persona.items if _when(i["event_time"]) <= until]
    messages = []
    for item in items:
        message = {"content": item["content"], "event_time": item["event_time"]}
        for key in ("role", "speaker", "session_id"):
            if item.get(key):
                message[key] = item[key]
        message["metadata"] = {"item": item["id"]}
        messages.append(message)
    episodes = memory.add_many(messages, user_id=persona.user_id)
    return {e.id: e.metadata["item"] for e in episodes}


def run(
    personas: Iterable[Persona],
    configs: Sequence[str],
    *,
    embedder: str = "minilm",
    consolidate: bool = False,
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """Every question's metrics under every config: ``{config: {question key: metrics}}``."""
    model = get_embedder(embedder)
    results: dict[str, dict[str, dict[str, float]]] = {c: {} for c in configs}
    with tempfile.TemporaryDirectory(prefix="anamnesis-agent-life-") as folder:
        for persona in personas:
            moments = sorted({q.asked_at for q in persona.questions})
            for n, moment in enumerate(moments):
                path = Path(folder) / f"{persona.name}-{n}.db"
                config = _config(configs[0])
                with Memory(path, embedder=model, config=config, warm=False) as memory:
                    ids = _store_items(memory, persona, moment)
                    if consolidate:
                        memory.consolidate(user_id=persona.user_id)
                for name in configs:
                    with Memory(path, embedder=model, config=_config(name), warm=False) as memory:
                        for q in persona.questions:
                            if q.asked_at != moment:
                                continue
                            hits = memory.search(
                                q.text, user_id=persona.user_id, limit=DEPTH, now=q.asked_at
                            )
                            ranked = [ids[h.episode.id] for h in hits]
                            results[name][q.key] = score(ranked, q)
                if progress is not None:
                    progress(f"{persona.name} @ {moment.date()}")
    return results


def _config(name: str) -> SearchConfig:
    return BENCH_PRESETS[name]


def summarise(
    results: dict[str, dict[str, dict[str, float]]],
    questions: Sequence[Question],
    baseline: str | None = None,
) -> dict[str, Any]:
    """Means with 95% intervals per config, overall and per question type and persona
    kind; with ``baseline``, each config's paired difference from it."""
    groups: dict[str, list[Question]] = defaultdict(list)
    for q in questions:
        for group in ("all", q.type, f"kind:{q.kind}"):
            groups[group].append(q)
    summary: dict[str, Any] = {}
    for config, per_question in results.items():
        rows: dict[str, Any] = {}
        for group, members in groups.items():
            rows[group] = {
                metric: estimate(per_question[q.key][metric] for q in members).as_dict()
                for metric in METRICS
            }
            if baseline and config != baseline:
                base = results[baseline]
                a = [per_question[q.key]["hit@1"] for q in members]
                b = [base[q.key]["hit@1"] for q in members]
                rows[group]["vs_baseline_hit@1"] = {
                    **paired_bootstrap(a, b),
                    **mcnemar_exact(a, b),
                }
        summary[config] = rows
    return summary


def table(summary: dict[str, Any], group: str = "all") -> str:
    """A Markdown table of one group's metrics, a row per config."""
    head = "| config | " + " | ".join(METRICS) + " | n |"
    lines = [head, "|" + "---|" * (len(METRICS) + 2)]
    for config, rows in summary.items():
        if group not in rows:
            continue
        cells = []
        for metric in METRICS:
            est = rows[group][metric]
            cells.append("–" if math.isnan(est["mean"]) else f"{est['mean']:.3f}")
        n = rows[group]["hit@1"]["n"]
        lines.append(f"| {config} | " + " | ".join(cells) + f" | {n} |")
    return "\n".join(lines)


def type_table(summary: dict[str, Any], metric: str = "hit@1") -> str:
    """One metric per question type (columns) and config (rows)."""
    types = [t for t in TYPES if any(t in rows for rows in summary.values())]
    lines = [
        "| config | " + " | ".join(types) + " |",
        "|" + "---|" * (len(types) + 1),
    ]
    for config, rows in summary.items():
        cells = [f"{rows[t][metric]['mean']:.2f}" if t in rows else "–" for t in types]
        lines.append(f"| {config} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _load(paths: Sequence[Path], names: Sequence[str]) -> list[Persona]:
    personas: list[Persona] = []
    for path in paths or (PERSONAS,):
        if path.is_dir():
            personas += load_personas(path, names)
        else:
            personas += [p for p in load_personas(path.parent, names) if p.name == _name(path)]
    return personas


def _name(path: Path) -> str:
    return str(json.loads(path.read_text(encoding="utf-8")).get("persona", path.stem))


@click.command(name="agent-life", help=__doc__.split("\n\n")[0].replace("``", ""))
@click.option(
    "--data",
    "paths",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="A persona file or folder (repeatable; default: the bundled personas).",
)
@click.option("--persona", "names", multiple=True, help="Only these personas (repeatable).")
@click.option(
    "--config",
    "configs",
    default="hybrid,default",
    show_default=True,
    help="Comma-separated presets; the first is the baseline of the paired tests.",
)
@click.option("--embedder", default="minilm", show_default=True)
@click.option("--consolidate", is_flag=True, help="Run consolidate before searching.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the per-question results and the summary here (JSON).",
)
def agent_life_command(
    paths: tuple[Path, ...],
    names: tuple[str, ...],
    configs: str,
    embedder: str,
    consolidate: bool,
    out: Path | None,
) -> None:
    chosen = tuple(c.strip() for c in configs.split(",") if c.strip())
    unknown = [c for c in chosen if c not in BENCH_PRESETS]
    if unknown or not chosen:
        raise click.BadParameter(f"unknown config(s) {unknown}", param_hint="--config")
    personas = _load(paths, names)
    if not personas:
        raise click.BadParameter("no persona found", param_hint="--data/--persona")
    questions = [q for p in personas for q in p.questions]
    results = run(
        personas,
        chosen,
        embedder=embedder,
        consolidate=consolidate,
        progress=lambda done: click.echo(done, err=True),
    )
    summary = summarise(results, questions, baseline=chosen[0])
    click.echo(f"{len(personas)} personas, {len(questions)} questions, embedder {embedder}\n")
    click.echo(table(summary))
    for kind in sorted({q.kind for q in questions}):
        click.echo(f"\npersonas of kind {kind}\n")
        click.echo(table(summary, f"kind:{kind}"))
    click.echo("\nhit@1 by question type\n")
    click.echo(type_table(summary))
    click.echo("\nsuperseded above current, by question type\n")
    click.echo(type_table(summary, "stale_above"))
    for config in chosen[1:]:
        cmp = summary[config]["all"]["vs_baseline_hit@1"]
        click.echo(
            f"\n{config} - {chosen[0]}: hit@1 {cmp['diff']:+.3f} "
            f"[{cmp['low']:+.3f}, {cmp['high']:+.3f}], better on {cmp['a_only']}, "
            f"worse on {cmp['b_only']} (McNemar p={cmp['p_value']:.3f})"
        )
    if out is not None:
        out.write_text(
            json.dumps({"results": results, "summary": summary}, indent=1), encoding="utf-8"
        )
