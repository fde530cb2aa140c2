"""Precision and recall of the rule fact extractor on a labelled set of statements.

The set (``tests/fixtures/fact_statements.jsonl``, described in
``tests/fixtures/README.md``) holds one statement a line: its ``text``, ``speaker``
and ``role``, its ``source``, and the ``facts`` it states, each a ``subject``,
``predicate``, ``object`` (and ``also``: other acceptable spellings of the object)
and an ``op``: ``"add"`` (the value holds from now) or ``"end"`` (the value stopped
holding: "I left Tencent", "I quit smoking"; an empty object ends whatever the slot
holds: "I'm single again").

Matching: an extracted draft is correct when its subject, predicate and op equal a
labelled fact's and its object equals the labelled object or one of its ``also``
forms after ``normalise_value`` (lower case, no leading article, no punctuation).
Each labelled fact is matched at most once. The first person of a user turn is the
scope's user whatever name its speaker goes by (``facts.people``), so a label that
names the speaker of a user turn is read as subject ``user``. A change statement ("I left X and now
work at Y") is labelled as two facts, the new value added and the old one ended,
and scores both.

The set is split once, by a fixed rule, into a tuning part and a held-out part: a
statement is held out when the SHA-256 of its text, as an integer, is divisible by 3.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import click

from ..errors import InvalidInputError
from ..facts.predicates import RELATIONS, USER, normalise_value
from ..facts.rules import RuleExtractor
from ..facts.types import Draft
from ..types import Episode

Part = Literal["tuning", "held-out"]
#: One statement in this many is held out (see ``part_of``).
HELD_OUT_EVERY = 3
#: When every statement is said: a fixed time, so time expressions resolve the same.
SAID_AT = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)

_FAMILIES: dict[str, frozenset[str]] = {
    "identity": frozenset({"name", "age"}),
    "job": frozenset({"works_at", "job", "studies_at"}),
    "home": frozenset({"lives_in", "from"}),
    "relationships": frozenset(RELATIONS.values()),
    "pets": frozenset({"pet"}),
    "possessions": frozenset({"owns"}),
    "preferences": frozenset({"likes", "dislikes"}),
    "plans": frozenset({"plans"}),
    "health": frozenset({"allergic_to", "condition", "diet", "avoids"}),
    "routines": frozenset({"habit"}),
    "events": frozenset({"visited", "attended", "started", "finished"}),
}
#: The order of the table's rows; "changes" are the facts whose op is "end".
FAMILY_ORDER = (*_FAMILIES, "changes", "other")


@dataclass(frozen=True, slots=True)
class Labelled:
    """One labelled fact: what a statement says, with its acceptable object forms."""

    subject: str
    predicate: str
    objects: frozenset[str]
    op: str


@dataclass(frozen=True, slots=True)
class Statement:
    """One line of the labelled set."""

    text: str
    speaker: str | None
    role: str
    source: str
    facts: tuple[Labelled, ...]


@dataclass(frozen=True, slots=True)
class Extracted:
    """One extracted fact, in the form it is scored in."""

    subject: str
    predicate: str
    object: str
    op: str


@dataclass(slots=True)
class Tally:
    """Counts for one family: labelled facts, extracted facts, and those that match."""

    labelled: int = 0
    extracted: int = 0
    correct_extracted: int = 0
    found: int = 0

    @property
    def precision(self) -> float:
        """Correct extracted facts over extracted facts (1.0 when none were extracted)."""
        return self.correct_extracted / self.extracted if self.extracted else 1.0

    @property
    def recall(self) -> float:
        """Labelled facts found over labelled facts (1.0 when none were labelled)."""
        return self.found / self.labelled if self.labelled else 1.0

    @property
    def f1(self) -> float:
        """The harmonic mean of precision and recall."""
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


@dataclass(slots=True)
class Score:
    """The tallies of one part of the set, overall and per family, and the errors."""

    statements: int = 0
    overall: Tally = field(default_factory=Tally)
    families: dict[str, Tally] = field(default_factory=dict)
    missed: list[tuple[str, Labelled]] = field(default_factory=list)
    wrong: list[tuple[str, Extracted]] = field(default_factory=list)


def family_of(predicate: str) -> str:
    """The predicate family a predicate is reported under."""
    if predicate.startswith("favorite "):
        return "preferences"
    for family, members in _FAMILIES.items():
        if predicate in members:
            return family
    return "other"


def part_of(text: str) -> Part:
    """Which part of the set a statement belongs to (fixed by its text)."""
    digest = int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16)
    return "held-out" if digest % HELD_OUT_EVERY == 0 else "tuning"


def load(path: Path) -> list[Statement]:
    """The labelled statements in ``path`` (JSON lines)."""
    out: list[Statement] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            user_turn = row["role"] == "user"
            facts = tuple(
                Labelled(
                    subject=USER
                    if user_turn and f["subject"] == row.get("speaker")
                    else f["subject"],
                    predicate=f["predicate"],
                    objects=frozenset(
                        normalise_value(o) for o in [f["object"], *f.get("also", [])]
                    ),
                    op=f.get("op", "add"),
                )
                for f in row["facts"]
            )
            out.append(
                Statement(row["text"], row.get("speaker"), row["role"], row["source"], facts)
            )
        except (KeyError, TypeError, ValueError) as error:
            raise InvalidInputError(
                f"{path}:{number}: not a labelled statement ({error})"
            ) from None
    return out


def episode_of(statement: Statement) -> Episode:
    """The episode a statement is read as (said at ``SAID_AT``)."""
    return Episode(
        id="ep_eval",
        user_id="eval",
        agent_id=None,
        session_id=None,
        role=statement.role,
        speaker=statement.speaker,
        content=statement.text,
        modality="text",
        event_time=SAID_AT,
        recorded_at=SAID_AT,
        metadata={},
        content_hash="eval",
    )


def extracted(drafts: Iterable[Draft]) -> list[Extracted]:
    """Drafts in scoring form: an END draft is an "end" fact, anything else an "add"."""
    return [
        Extracted(
            d.subject, d.predicate, normalise_value(d.object), "end" if d.action == "END" else "add"
        )
        for d in drafts
    ]


def score(statements: Sequence[Statement]) -> Score:
    """Run the rule extractor over ``statements`` and tally the matches."""
    result = Score(statements=len(statements))
    extractor = RuleExtractor()

    def tallies(predicate: str, op: str) -> list[Tally]:
        names = [family_of(predicate), *(["changes"] if op == "end" else [])]
        return [result.overall, *(result.families.setdefault(n, Tally()) for n in names)]

    for statement in statements:
        open_facts = list(statement.facts)
        for gold in statement.facts:
            for tally in tallies(gold.predicate, gold.op):
                tally.labelled += 1
        for fact in extracted(extractor.extract(episode_of(statement))):
            match = next(
                (
                    candidate
                    for candidate in open_facts
                    if (candidate.subject, candidate.predicate, candidate.op)
                    == (fact.subject, fact.predicate, fact.op)
                    and fact.object in candidate.objects
                ),
                None,
            )
            for tally in tallies(fact.predicate, fact.op):
                tally.extracted += 1
                tally.correct_extracted += match is not None
            if match is None:
                result.wrong.append((statement.text, fact))
                continue
            open_facts.remove(match)
            for tally in tallies(match.predicate, match.op):
                tally.found += 1
        result.missed += [(statement.text, left) for left in open_facts]
    return result


def table(name: str, result: Score) -> str:
    """A markdown table of ``result``: overall, then each family with facts."""
    lines = [
        f"{name}: {result.statements} statements",
        "",
        "| family | labelled | extracted | precision | recall | F1 |",
        "|---|---|---|---|---|---|",
    ]
    rows = [("all", result.overall)] + [
        (family, result.families[family]) for family in FAMILY_ORDER if family in result.families
    ]
    for family, tally in rows:
        precision = f"{tally.precision:.2f}" if tally.extracted else "-"
        lines.append(
            f"| {family} | {tally.labelled} | {tally.extracted} | {precision} | "
            f"{tally.recall:.2f} | {tally.f1:.2f} |"
        )
    return "\n".join(lines)


def summary(parts: Sequence[tuple[str, Sequence[Statement]]]) -> str:
    """A markdown table of each part, whole and by source (dev-data turns, own)."""
    lines = [
        "| part | source | statements | labelled | extracted | precision | recall | F1 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, chosen in parts:
        for source, subset in (
            ("all", chosen),
            ("dev-data turns", [s for s in chosen if s.source != "own"]),
            ("own", [s for s in chosen if s.source == "own"]),
        ):
            if not subset:
                continue
            t = score(subset).overall
            precision = f"{t.precision:.2f}" if t.extracted else "-"
            lines.append(
                f"| {name} | {source} | {len(subset)} | {t.labelled} | {t.extracted} | "
                f"{precision} | {t.recall:.2f} | {t.f1:.2f} |"
            )
    return "\n".join(lines)


@click.command(name="facts")
@click.option(
    "--data",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=Path("tests/fixtures/fact_statements.jsonl"),
    show_default=True,
    help="Labelled statements (JSON lines).",
)
@click.option(
    "--part",
    type=click.Choice(["tuning", "held-out", "all"]),
    default="all",
    show_default=True,
    help="Which part of the set to score; 'all' prints each part and the whole.",
)
@click.option("--errors", is_flag=True, help="Also list missed and wrong facts.")
def facts_command(data: Path, part: str, errors: bool) -> None:
    """Precision and recall of the rule fact extractor on labelled statements,
    overall and per predicate family."""
    statements = load(data)
    parts: list[tuple[str, list[Statement]]] = [
        (name, [s for s in statements if part_of(s.text) == name])
        for name in ("tuning", "held-out")
        if part in (name, "all")
    ]
    if part == "all":
        parts.append(("all", statements))
    click.echo(summary(parts) + "\n")
    for name, chosen in parts:
        result = score(chosen)
        click.echo(table(name, result) + "\n")
        if errors:
            for text, gold in result.missed:
                objects = " | ".join(sorted(gold.objects))
                click.echo(f"missed {gold.op} {gold.predicate}={objects!r}  <- {text}")
            for text, fact in result.wrong:
                click.echo(f"wrong  {fact.op} {fact.predicate}={fact.object!r}  <- {text}")
            click.echo("")
