"""Distinct texts for the scale benchmark: the sentences of the dev data sets.

A store of a million episodes must hold a million *different* texts (an approximate
vector index behaves differently on repeated vectors), and no data set here has a
million turns. So the messages of LongMemEval S, LoCoMo and BEAM are cut into
sentences, and each sentence becomes one episode:

- a message is cut at line breaks and after ``.``, ``!`` or ``?`` (optionally closed by
  a quote or bracket) followed by white space; white space inside a piece is collapsed;
- a piece is kept if it has at least ``MIN_CHARS`` characters and ``MIN_LETTERS``
  letters (list markers, bare headings and numbers are dropped);
- the first occurrence of each exact piece is kept, in the files' order (LongMemEval,
  then LoCoMo, then BEAM; messages in file order), with its message's session, event
  time, role and speaker;
- if more texts are asked for than there are distinct sentences, the list goes on with
  pairs of adjacent sentences of one session (sentence i and i + 1, joined by a
  space), in order, skipping any pair already present; beyond those, it is an error.

Everything is deterministic: the same files give the same texts in the same order.
The queries are the data sets' questions, in the same file order.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import InvalidInputError
from . import datasets

#: The data sets whose messages supply sentences, in the order they are read, with
#: their file names in the shared data folder.
SOURCES = (
    ("longmemeval", "longmemeval_s_dev.json.gz"),
    ("locomo", "locomo10.json.gz"),
    ("beam", "beam_128k.json.gz"),
)
MIN_CHARS = 20
MIN_LETTERS = 10
_BREAK = re.compile(r"\n+|(?<=[.!?])\s+|(?<=[.!?][\"')\]])\s+")


class Text(NamedTuple):
    """One episode's text with the metadata of the message it came from."""

    content: str
    session_id: str
    event_time: datetime
    role: str | None
    speaker: str | None


@dataclass(slots=True)
class TextSource:
    """Distinct texts in a fixed order and the questions to search with."""

    texts: list[Text]
    questions: list[str]
    #: Per data set: its file, SHA-256, messages read and distinct sentences it added.
    files: list[dict[str, Any]] = field(default_factory=list)
    #: Distinct sentences (before any pairs).
    sentences: int = 0
    #: Pairs of adjacent sentences appended to reach the size asked for.
    pairs: int = 0

    def describe(self) -> str:
        """One line for reports: what the texts are and how many."""
        parts = ", ".join(f"{f['name']} {f['sentences']:,}" for f in self.files)
        line = f"{self.sentences:,} distinct sentences ({parts})"
        if self.pairs:
            line += f" + {self.pairs:,} distinct pairs of adjacent sentences"
        return line


def split_sentences(text: str) -> list[str]:
    """The pieces of ``text`` kept as sentences (see the module's rules)."""
    out = []
    for piece in _BREAK.split(text):
        piece = " ".join(piece.split())
        if len(piece) >= MIN_CHARS and sum(c.isalpha() for c in piece) >= MIN_LETTERS:
            out.append(piece)
    return out


def default_files(data_dir: Path) -> list[tuple[str, Path]]:
    """The data sets of ``SOURCES`` found in ``data_dir``."""
    return [(name, data_dir / file) for name, file in SOURCES if (data_dir / file).is_file()]


def distinct_sentences(files: Sequence[tuple[str, Path]], need: int | None = None) -> TextSource:
    """Distinct sentences of ``files`` (pairs ``(data set name, path)``), then adjacent
    pairs if ``need`` is more than the sentences; an error if even those fall short."""
    seen: set[str] = set()
    texts: list[Text] = []
    questions: list[str] = []
    described = []
    for name, path in files:
        data = datasets.load(name, path)
        before = len(texts)
        messages = 0
        for case in data.cases:
            for message in case.messages:
                messages += 1
                session = str(message.get("session_id") or case.id)
                # LongMemEval's session ids are global; the others repeat per case.
                session = session if name == "longmemeval" else f"{case.id}/{session}"
                for sentence in split_sentences(message["content"]):
                    if sentence in seen:
                        continue
                    seen.add(sentence)
                    texts.append(
                        Text(
                            sentence,
                            f"{name}:{session}",
                            message["event_time"],
                            message.get("role"),
                            message.get("speaker"),
                        )
                    )
            questions.extend(q.text for q in case.questions)
        described.append(
            {
                "name": name,
                "path": str(path),
                "sha256": data.sha256,
                "messages": messages,
                "sentences": len(texts) - before,
            }
        )
    source = TextSource(texts, questions, described, sentences=len(texts))
    if need is not None and need > len(texts):
        source.pairs = _extend_with_pairs(texts, seen, need)
        if need > len(texts):
            raise InvalidInputError(
                f"{need:,} distinct texts asked for, but the data sets give only "
                f"{len(texts):,} (sentences and adjacent pairs): ask for fewer episodes "
                "or add a data set"
            )
    return source


def _extend_with_pairs(texts: list[Text], seen: set[str], need: int) -> int:
    """Append distinct pairs of adjacent same-session sentences until ``need``."""
    count = 0
    sentences = len(texts)
    for index in range(sentences - 1):
        if len(texts) >= need:
            break
        first, second = texts[index], texts[index + 1]
        if first.session_id != second.session_id:
            continue
        pair = f"{first.content} {second.content}"
        if pair in seen:
            continue
        seen.add(pair)
        texts.append(first._replace(content=pair))
        count += 1
    return count


def text_messages(texts: Sequence[Text], start: int, stop: int) -> Iterator[dict[str, Any]]:
    """Messages ``start``..``stop`` of ``texts`` (an error past their end: no text is
    ever repeated)."""
    if stop > len(texts):
        raise InvalidInputError(
            f"{stop:,} episodes asked for, but only {len(texts):,} distinct texts were "
            "prepared: ask for fewer episodes"
        )
    for text in texts[start:stop]:
        message: dict[str, Any] = {
            "content": text.content,
            "session_id": text.session_id,
            "event_time": text.event_time,
        }
        if text.role is not None:
            message["role"] = text.role
        if text.speaker is not None:
            message["speaker"] = text.speaker
        yield message
