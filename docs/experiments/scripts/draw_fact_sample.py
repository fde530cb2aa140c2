"""Draw a sample of dev-data sentences to label for ``anamnesis bench facts``.

The procedure of the fact samples (``tests/fixtures/fact_statements_*.jsonl``): sentences
of conversation turns only, never the benchmarks' questions or answers, split as the
rule extractor splits them (``anamnesis.facts.rules.sentences``), 4 to 40 words,
none already in a labelled file. Three strata, each drawn at random with one seed:

- ``--random``: first-person sentences (I, me, my, we, our ...) of LoCoMo turns;
- ``--locomo``: LoCoMo sentences holding a topic word (work, live, moved, dog,
  favorite, allergic, quit, used to ...), kept whether or not they state a fact;
- ``--longmemeval``: the same for LongMemEval-S user turns (one copy of a session that
  several haystacks share).

The earlier samples were drawn by a script that was not kept; this one follows the
procedure their study describes (``docs/experiments/2026-11-24-fact-extraction.md``)
and writes rows with empty ``facts``, to be labelled by hand before the extractor runs
on them.

    python docs/experiments/scripts/draw_fact_sample.py --seed 9191 \
        --out tests/fixtures/fact_statements_blind2.jsonl
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
from collections.abc import Iterator
from pathlib import Path

from anamnesis.facts.rules import sentences

DATA = Path("../shared/data")
FIXTURES = Path("tests/fixtures")
FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|we|we're|our|us)\b", re.I)
#: Words that make a sentence likely to state a personal fact (the study's list).
TOPIC = re.compile(
    r"\b(?:work|works|working|job|live|lives|living|moved|move|moving|dog|dogs|cat|cats|pet|"
    r"pets|favorite|favourite|allergic|allergy|quit|used to|love|hate|bought|own|started|"
    r"joined|planning|plan|married|engaged|sister|brother|wife|husband|partner|girlfriend|"
    r"boyfriend|daughter|son|friend|hobby|usually|every|always|vegan|vegetarian|trip|"
    r"visited|went to|left|no longer|anymore|sold|adopted|graduated|studying|school)\b",
    re.I,
)


def locomo_sentences(path: Path) -> Iterator[tuple[str, str, str]]:
    """``(text, speaker, source)`` of every sentence of every LoCoMo turn."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        conversations = json.load(handle)
    for record in conversations:
        conversation = record["conversation"]
        number = 1
        while f"session_{number}" in conversation:
            for turn in conversation[f"session_{number}"]:
                for index, text in enumerate(sentences(turn["text"])):
                    source = f"locomo10:{record['sample_id']}:{turn['dia_id']}#s{index}"
                    yield text, turn["speaker"], source
            number += 1


def longmemeval_sentences(path: Path) -> Iterator[tuple[str, None, str]]:
    """``(text, None, source)`` of every sentence of every LongMemEval-S user turn,
    each session once."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        questions = json.load(handle)
    seen: set[str] = set()
    for question in questions:
        for session_id, session in zip(
            question["haystack_session_ids"], question["haystack_sessions"], strict=True
        ):
            if session_id in seen:
                continue
            seen.add(session_id)
            for turn_index, turn in enumerate(session):
                if turn["role"] != "user":
                    continue
                for index, text in enumerate(sentences(turn["content"])):
                    source = (
                        f"longmemeval_s_dev:{question['question_id']}:{session_id}:"
                        f"{turn_index}#s{index}"
                    )
                    yield text, None, source


def labelled_texts() -> set[str]:
    """Every sentence already in a labelled file."""
    texts: set[str] = set()
    for path in FIXTURES.glob("fact_statements*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.add(json.loads(line)["text"])
    return texts


def main() -> None:
    """Draw the three strata and write them as unlabelled rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--random", type=int, default=40)
    parser.add_argument("--locomo", type=int, default=55)
    parser.add_argument("--longmemeval", type=int, default=55)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    taken = labelled_texts()

    def usable(text: str) -> bool:
        return 4 <= len(text.split()) <= 40 and text not in taken

    locomo = [s for s in locomo_sentences(args.data / "locomo10.json.gz") if usable(s[0])]
    longmemeval = [
        s for s in longmemeval_sentences(args.data / "longmemeval_s_dev.json.gz") if usable(s[0])
    ]
    rng = random.Random(args.seed)
    drawn = rng.sample([s for s in locomo if FIRST_PERSON.search(s[0])], args.random)
    chosen = {text for text, _, _ in drawn}
    drawn += rng.sample(
        [s for s in locomo if TOPIC.search(s[0]) and s[0] not in chosen], args.locomo
    )
    chosen = {text for text, _, _ in drawn}
    drawn += rng.sample(
        [s for s in longmemeval if TOPIC.search(s[0]) and s[0] not in chosen], args.longmemeval
    )
    rng.shuffle(drawn)
    with args.out.open("w", encoding="utf-8") as handle:
        for text, speaker, source in drawn:
            row = {"text": text, "speaker": speaker, "role": "user", "source": source, "facts": []}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(drawn)} sentences -> {args.out}")


if __name__ == "__main__":
    main()
