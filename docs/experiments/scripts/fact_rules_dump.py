"""Every draft the rule fact extractor gives on the project's data, and how long it takes.

    PYTHONPATH=<checkout> python docs/experiments/scripts/fact_rules_dump.py OUT.jsonl \
        [--data ../shared/data] [--repeat 3]

Reads every turn of the labelled statement sets (``tests/fixtures/fact_statements*``),
the agent-life personas, LoCoMo, LongMemEval-S (dev half) and BEAM 128K; duplicates
(same text, role, speaker and time) are read once. Writes one JSON line per turn that
gives drafts (its source, and each draft's subject, predicate, object, action and
``valid_from``), so two checkouts' outputs compare with ``diff``. Prints, per source,
the turns read, the turns holding a letter beyond ASCII, the drafts, and the best of
``--repeat`` timings of ``RuleExtractor.extract`` over its turns.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from anamnesis.bench import datasets
from anamnesis.bench.agent_life import load_personas
from anamnesis.facts.rules import RuleExtractor
from anamnesis.types import Episode

ROOT = Path(__file__).resolve().parents[3]
SAID_AT = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)


def _episode(content: str, role: str | None, speaker: str | None, when: datetime) -> Episode:
    return Episode(
        id="ep",
        user_id="u",
        agent_id=None,
        session_id=None,
        role=role,
        speaker=speaker,
        content=content,
        modality="text",
        event_time=when,
        recorded_at=when,
        metadata={},
        content_hash="h",
    )


def _when(value: object) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return SAID_AT


def turns(data: Path) -> Iterator[tuple[str, str, Episode]]:
    """``(source, turn id, episode)`` for every turn the script reads."""
    for path in sorted((ROOT / "tests" / "fixtures").glob("fact_statements*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            row = json.loads(line)
            yield (
                path.stem,
                str(n),
                _episode(row["text"], row.get("role"), row.get("speaker"), SAID_AT),
            )
    for persona in load_personas():
        for item in persona.items:
            episode = _episode(
                item["content"], item.get("role"), item.get("speaker"), _when(item["event_time"])
            )
            yield "agent-life", item["id"], episode
    for name, file in (
        ("locomo", "locomo10.json.gz"),
        ("longmemeval", "longmemeval_s_dev.json.gz"),
        ("beam", "beam_128k.json.gz"),
    ):
        for case in datasets.load(name, data / file).cases:
            for n, message in enumerate(case.messages):
                episode = _episode(
                    message["content"],
                    message.get("role"),
                    message.get("speaker"),
                    _when(message.get("event_time")),
                )
                yield name, f"{case.id}#{n}", episode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    seen: set[tuple[str, str | None, str | None, datetime]] = set()
    by_source: dict[str, list[tuple[str, Episode]]] = {}
    for source, turn, episode in turns(args.data):
        key = (episode.content, episode.role, episode.speaker, episode.event_time)
        if key in seen:
            continue
        seen.add(key)
        by_source.setdefault(source, []).append((turn, episode))
    extractor = RuleExtractor()
    with args.out.open("w", encoding="utf-8") as out:
        print("source\tturns\tnon-ascii turns\tdrafts\tseconds\tturns/s")
        for source, items in by_source.items():
            best = float("inf")
            for _ in range(args.repeat):
                start = time.perf_counter()
                for _, episode in items:
                    extractor.extract(episode)
                best = min(best, time.perf_counter() - start)
            drafts = 0
            for turn, episode in items:
                found = extractor.extract(episode)
                drafts += len(found)
                if found:
                    row = {
                        "source": source,
                        "turn": turn,
                        "drafts": [
                            [d.subject, d.predicate, d.object, d.action, d.valid_from.isoformat()]
                            for d in found
                        ],
                    }
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
            wide = sum(not e.content.isascii() for _, e in items)
            rate = len(items) / best
            print(f"{source}\t{len(items)}\t{wide}\t{drafts}\t{best:.2f}\t{rate:.0f}", flush=True)


if __name__ == "__main__":
    main()
