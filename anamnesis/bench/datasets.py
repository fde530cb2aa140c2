"""Benchmark loaders: LoCoMo, LongMemEval and BEAM files turned into one neutral shape.

A ``Dataset`` is a list of ``Case``s. A case is what goes into one fresh memory (a
LoCoMo conversation, a LongMemEval haystack, a BEAM chat): its messages, ready for
``Memory.add_many``, and the questions asked of it. Every message carries an evidence
key in its metadata (``Dataset.evidence_key``) so retrieved episodes can be matched
against the questions' evidence without touching episode ids.

Loaders accept any file in the benchmark's published format, gzip-compressed or not.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError
from ..ingest.normalise import MAX_CONTENT_CHARS

#: Turn i of a session is dated ``session start + i * TURN_SPACING`` so the order of
#: turns survives in event time (the datasets date sessions, not turns).
TURN_SPACING = timedelta(seconds=1)

DATASETS = ("locomo", "longmemeval", "beam")


@dataclass(frozen=True, slots=True)
class Question:
    """One question and the evidence that answers it.

    ``evidence`` holds turn-level evidence keys (values of the dataset's evidence key);
    ``evidence_sessions`` the session ids those turns belong to (or, for LongMemEval,
    the labelled answer sessions). ``asked_at`` is the "as of" time of the question.
    """

    id: str
    text: str
    category: str
    answer: str
    evidence: tuple[str, ...] = ()
    evidence_sessions: tuple[str, ...] = ()
    asked_at: datetime | None = None
    abstention: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Case:
    """One fresh memory's worth of data: messages to ingest and questions to ask."""

    id: str
    messages: list[dict[str, Any]]
    questions: list[Question]


@dataclass(slots=True)
class Dataset:
    """A loaded benchmark file.

    ``notes`` counts data problems found while loading (malformed or dangling evidence
    ids, undated sessions) so reports can state them.
    """

    name: str
    path: Path
    sha256: str
    evidence_key: str
    cases: list[Case]
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def n_questions(self) -> int:
        """Questions across all cases."""
        return sum(len(c.questions) for c in self.cases)

    @property
    def n_messages(self) -> int:
        """Messages across all cases."""
        return sum(len(c.messages) for c in self.cases)


def file_sha256(path: Path) -> str:
    """SHA-256 of the file's bytes, as published (compressed if it is compressed)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_json(path: Path) -> Any:
    """Parse a JSON file, transparently gunzipping it when it is compressed."""
    with open(path, "rb") as handle:
        magic = handle.read(2)
    opener = gzip.open if magic == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        try:
            return json.load(handle)
        except (json.JSONDecodeError, UnicodeDecodeError, OSError) as exc:
            raise InvalidInputError(
                f"{path} is not a JSON file (optionally gzipped): {exc}"
            ) from exc


def load(name: str, path: str | Path, *, limit: int | None = None, skip: int = 0) -> Dataset:
    """Load a dataset by name (``locomo``, ``longmemeval``, ``beam``).

    ``skip`` drops the first cases and ``limit`` caps how many are kept after that (to
    split a long run over processes, or for quick runs).
    """
    loaders = {"locomo": load_locomo, "longmemeval": load_longmemeval, "beam": load_beam}
    if name not in loaders:
        raise InvalidInputError(f"unknown dataset {name!r}; choose from {list(DATASETS)}")
    if skip < 0 or (limit is not None and limit < 0):
        raise InvalidInputError("skip and limit must be non-negative integers")
    dataset = loaders[name](Path(path), limit=limit, skip=skip)
    if skip:
        dataset.notes["skip"] = skip
    if limit is not None:
        dataset.notes["limit"] = limit
    return dataset


def prefix_speakers(dataset: Dataset) -> None:
    """Prepend ``"<speaker or role>: "`` to every message's content, in place.

    An ablation of what the index sees (names are otherwise only in the ``speaker``
    field, which neither search channel reads); off by default.
    """
    for case in dataset.cases:
        for message in case.messages:
            who = message.get("speaker") or message.get("role")
            if who:
                message["content"] = f"{who}: {message['content']}"
    dataset.notes["speaker_prefix"] = True


def clip(text: str, notes: Counter[str]) -> str:
    """``text`` cut to the longest content an episode may hold, counting cuts in ``notes``.

    BEAM has two degenerate assistant messages (53k and 349k characters, mostly
    padding); the rest of every published file is far below the limit.
    """
    if len(text) <= MAX_CONTENT_CHARS:
        return text
    notes["messages_truncated"] += 1
    return text[:MAX_CONTENT_CHARS]


def _limited(items: list[Any], limit: int | None, skip: int = 0) -> list[Any]:
    if skip < 0 or (limit is not None and limit < 0):
        raise InvalidInputError("skip and limit must be non-negative integers")
    return items[skip:] if limit is None else items[skip : skip + limit]


def _expect(data: Any, field: str, path: Path, what: str) -> None:
    """Fail unless ``data`` is a list of records that all have ``field``."""
    ok = isinstance(data, list) and all(isinstance(r, dict) and field in r for r in data)
    if not ok:
        raise InvalidInputError(
            f"{path} does not look like {what}: expected a list of records with {field!r}"
        )


# -- LoCoMo ---------------------------------------------------------------------------------

LOCOMO_CATEGORIES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
_LOCOMO_SESSION = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")


def parse_locomo_date(text: str, notes: Counter[str] | None = None) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` as a UTC datetime (the dataset gives no zone).

    A file in LoCoMo's format may write its dates another way (``"29.12.2023,
    22:42:04"``): any absolute date that reads the same day-first and month-first is
    accepted, and counted in ``notes`` (``session_dates_read_leniently``, with the
    first one as read) so the report says what was assumed. A date that reads two
    ways (``"05.03.2023"``) or is relative ("yesterday") is refused.
    """
    cleaned = " ".join(text.replace(",", " ").split())
    for fmt in ("%I:%M %p on %d %B %Y", "%I:%M %p on %B %d %Y", "%I:%M%p on %d %B %Y"):
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    readings = {_absolute_date(text, order) for order in ("DMY", "MDY")} - {None}
    if len(readings) > 1:
        raise InvalidInputError(
            f"LoCoMo session date {text!r} is ambiguous: it reads both day-first and "
            f"month-first ({', '.join(sorted(str(r) for r in readings))})"
        )
    if not readings:
        raise InvalidInputError(f"cannot parse LoCoMo session date {text!r}")
    (reading,) = readings
    assert reading is not None
    if notes is not None:
        if not notes["session_dates_read_leniently"]:
            notes[f"session_date {text!r} read as {reading.isoformat()} (UTC)"] = 1
        notes["session_dates_read_leniently"] += 1
    return reading


def _absolute_date(text: str, order: str) -> datetime | None:
    """An absolute date and time read with ``dateparser`` in one day/month order."""
    import dateparser

    settings = {
        "DATE_ORDER": order,
        "STRICT_PARSING": True,  # a day, a month and a year, all written out
        "PARSERS": ["absolute-time"],
        "RETURN_AS_TIMEZONE_AWARE": False,
    }
    found = dateparser.parse(text, settings=settings)
    return found.replace(tzinfo=UTC) if found is not None else None


def parse_dia_ids(raw: str) -> list[str]:
    """Canonical ``D<session>:<turn>`` ids found in one evidence string.

    Handles the published malformations: several ids in one string (``"D8:6; D9:17"``,
    ``"D9:1 D4:4"``), a stray colon (``"D:11:26"``) and zero padding (``"D30:05"``).
    Returns an empty list when nothing parses.
    """
    return [f"D{int(s)}:{int(t)}" for s, t in _DIA_ID.findall(raw)]


def _locomo_case(record: Mapping[str, Any], notes: Counter[str]) -> Case:
    conv = record["conversation"]
    sample_id = str(record.get("sample_id", "conv"))
    messages: list[dict[str, Any]] = []
    session_of: dict[str, str] = {}
    numbers = sorted(int(m.group(1)) for key in conv if (m := _LOCOMO_SESSION.match(key)))
    for number in numbers:
        turns = conv[f"session_{number}"]
        if not turns:
            notes["empty_sessions"] += 1
            continue
        date_text = conv.get(f"session_{number}_date_time")
        started = parse_locomo_date(date_text, notes) if date_text else None
        if started is None:
            notes["undated_sessions"] += 1
        session_id = f"session_{number}"
        for index, turn in enumerate(turns):
            dia_id = str(turn["dia_id"])
            session_of[dia_id] = session_id
            text = str(turn.get("text") or "")
            caption = turn.get("blip_caption")
            metadata: dict[str, Any] = {"dia_id": dia_id}
            modality = "text"
            if caption:
                # A turn that shares an image keeps its words and the image's caption in
                # one episode, so evidence stays one turn = one episode.
                text = f"{text}\n[shared an image: {caption}]" if text else f"[image: {caption}]"
                modality = "image"
                metadata["image_caption"] = caption
                if turn.get("img_url"):
                    metadata["image_url"] = turn["img_url"]
            if not text.strip():
                notes["empty_turns"] += 1
                continue
            messages.append(
                {
                    "content": clip(text, notes),
                    "speaker": turn.get("speaker"),
                    "session_id": session_id,
                    "event_time": started + index * TURN_SPACING if started else None,
                    "metadata": metadata,
                    "modality": modality,
                }
            )
    questions = []
    for number, qa in enumerate(record.get("qa", [])):
        evidence: list[str] = []
        for raw in qa.get("evidence", []) or []:
            parsed = parse_dia_ids(str(raw))
            if not parsed:
                notes["evidence_unparseable"] += 1
                continue
            if len(parsed) > 1 or parsed[0] != raw:
                notes["evidence_repaired"] += 1
            for dia_id in parsed:
                if dia_id in session_of:
                    evidence.append(dia_id)
                else:
                    notes["evidence_dangling"] += 1
        evidence = list(dict.fromkeys(evidence))
        if not evidence:
            notes["questions_without_evidence"] += 1
        category = int(qa.get("category", 0))
        answer = qa.get("answer", qa.get("adversarial_answer", ""))
        questions.append(
            Question(
                id=f"{sample_id}/q{number}",
                text=str(qa["question"]),
                category=LOCOMO_CATEGORIES.get(category, str(category)),
                answer="" if answer is None else str(answer),
                evidence=tuple(evidence),
                evidence_sessions=tuple(dict.fromkeys(session_of[e] for e in evidence)),
                abstention=category == 5,
                extra={"category_number": category},
            )
        )
    return Case(id=sample_id, messages=messages, questions=questions)


def load_locomo(path: Path, *, limit: int | None = None, skip: int = 0) -> Dataset:
    """LoCoMo: one case per conversation; evidence key ``dia_id``.

    Image turns become one episode with ``modality="image"`` whose content is the turn's
    text followed by ``[shared an image: <BLIP caption>]``. Category 5 (adversarial)
    questions are flagged ``abstention`` and reported separately.
    """
    data = read_json(path)
    _expect(data, "conversation", path, "LoCoMo")
    notes: Counter[str] = Counter()
    cases = [_locomo_case(record, notes) for record in _limited(data, limit, skip)]
    return Dataset("locomo", path, file_sha256(path), "dia_id", cases, dict(notes))


# -- LongMemEval ----------------------------------------------------------------------------


def parse_longmemeval_date(text: str) -> datetime:
    """``"2023/05/20 (Sat) 02:21"`` as a UTC datetime."""
    cleaned = re.sub(r"\s*\([A-Za-z]+\)\s*", " ", text).strip()
    for fmt in ("%Y/%m/%d %H:%M", "%Y/%m/%d"):
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise InvalidInputError(f"cannot parse LongMemEval date {text!r}")


def longmemeval_turn_id(session_id: str, index: int) -> str:
    """The official turn id: ``<session id>_<1-based position in the session>``."""
    return f"{session_id}_{index + 1}"


def _longmemeval_case(entry: Mapping[str, Any], notes: Counter[str]) -> Case:
    qid = str(entry["question_id"])
    messages: list[dict[str, Any]] = []
    evidence: list[str] = []
    sessions = zip(
        entry["haystack_session_ids"],
        entry["haystack_dates"],
        entry["haystack_sessions"],
        strict=True,
    )
    for session_id, date_text, turns in sessions:
        started = parse_longmemeval_date(date_text)
        for index, turn in enumerate(turns):
            turn_id = longmemeval_turn_id(session_id, index)
            if turn.get("has_answer"):
                evidence.append(turn_id)
            if not str(turn.get("content") or "").strip():
                notes["empty_turns"] += 1
                continue
            messages.append(
                {
                    "content": clip(turn["content"], notes),
                    "role": turn.get("role"),
                    "session_id": session_id,
                    "event_time": started + index * TURN_SPACING,
                    "metadata": {"turn_id": turn_id},
                }
            )
    asked = parse_longmemeval_date(entry["question_date"])
    # Questions are asked as of the end of their calendar day: in the published data 22
    # of 250 S questions have evidence sessions stamped hours after the question, the
    # same day (times of day are not reliable, dates are).
    as_of = asked.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    answer_sessions = [str(s) for s in entry.get("answer_session_ids", [])]
    abstention = qid.endswith("_abs")
    if not abstention and not evidence:
        notes["questions_without_turn_evidence"] += 1
    question = Question(
        id=qid,
        text=str(entry["question"]),
        category=str(entry["question_type"]),
        answer=str(entry.get("answer", "")),
        evidence=tuple(evidence),
        evidence_sessions=tuple(answer_sessions),
        asked_at=as_of,
        abstention=abstention,
        extra={"question_date": entry["question_date"]},
    )
    return Case(id=qid, messages=messages, questions=[question])


def load_longmemeval(path: Path, *, limit: int | None = None, skip: int = 0) -> Dataset:
    """LongMemEval (S, M or oracle): one case per question; evidence key ``turn_id``.

    Turn evidence is every turn marked ``has_answer`` (user or assistant); session
    evidence is ``answer_session_ids``. Questions are asked as of the end of
    ``question_date``'s day. Abstention questions (``_abs``) are flagged.
    """
    data = read_json(path)
    _expect(data, "haystack_sessions", path, "LongMemEval")
    notes: Counter[str] = Counter()
    cases = [_longmemeval_case(entry, notes) for entry in _limited(data, limit, skip)]
    return Dataset("longmemeval", path, file_sha256(path), "turn_id", cases, dict(notes))


# -- BEAM -----------------------------------------------------------------------------------


def parse_beam_date(text: str) -> datetime | None:
    """``"March-15-2024"`` as a UTC datetime, or None when it does not parse."""
    for fmt in ("%B-%d-%Y", "%b-%d-%Y", "%Y-%m-%d"):
        try:
            return datetime.strptime(text.strip(), fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def flatten_ids(value: Any) -> Iterator[str]:
    """Message ids from a BEAM ``source_chat_ids`` value: a list (possibly nested), a dict
    of such lists, a single id, or None."""
    if value is None:
        return
    if isinstance(value, Mapping):
        for item in value.values():
            yield from flatten_ids(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from flatten_ids(item)
    elif isinstance(value, bool):
        return
    elif isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
        yield str(int(value))


def _beam_messages(chat: Iterable[Mapping[str, Any]], notes: Counter[str]) -> list[dict]:
    messages: list[dict[str, Any]] = []
    last_date: datetime | None = None
    for batch_index, batch in enumerate(chat):
        number = batch.get("batch_number", batch_index + 1)
        exchanges = batch.get("turns", [])
        flat = [m for exchange in exchanges for m in exchange]
        anchors = [batch.get("time_anchor")] + [m.get("time_anchor") for m in flat]
        date = next((d for a in anchors if a and (d := parse_beam_date(str(a)))), None)
        if date is None:
            notes["batches_dated_from_previous"] += 1
            date = last_date
        last_date = date
        for index, message in enumerate(flat):
            if not str(message.get("content") or "").strip():
                notes["empty_messages"] += 1
                continue
            messages.append(
                {
                    "content": clip(message["content"], notes),
                    "role": message.get("role"),
                    "session_id": f"batch_{number}",
                    "event_time": date + index * TURN_SPACING if date else None,
                    "metadata": {"message_id": str(message["id"])},
                }
            )
    return messages


def load_beam(path: Path, *, limit: int | None = None, skip: int = 0) -> Dataset:
    """BEAM: one case per conversation; evidence key ``message_id``.

    A batch of the chat is a session, dated by the first ``time_anchor`` in it (else the
    previous batch's date). Evidence is the union of the ids in ``source_chat_ids``;
    abstention questions have none by design.
    """
    data = read_json(path)
    _expect(data, "chat", path, "BEAM")
    notes: Counter[str] = Counter()
    cases = []
    for position, conversation in enumerate(_limited(data, limit, skip), start=skip):
        conv_id = str(conversation.get("conversation_id", position))
        messages = _beam_messages(conversation["chat"], notes)
        session_of = {m["metadata"]["message_id"]: m["session_id"] for m in messages}
        probing = conversation.get("probing_questions") or {}
        if isinstance(probing, str):
            probing = json.loads(probing)
        questions = []
        for ability, items in probing.items():
            for number, item in enumerate(items):
                ids = list(dict.fromkeys(flatten_ids(item.get("source_chat_ids"))))
                evidence = [i for i in ids if i in session_of]
                notes["evidence_dangling"] += len(ids) - len(evidence)
                answer = next(
                    (
                        item[k]
                        for k in (
                            "answer",
                            "ideal_response",
                            "ideal_answer",
                            "ideal_summary",
                            "expected_compliance",
                        )
                        if item.get(k)
                    ),
                    "",
                )
                questions.append(
                    Question(
                        id=f"{conv_id}/{ability}/{number}",
                        text=str(item["question"]),
                        category=str(ability),
                        answer=str(answer),
                        evidence=tuple(evidence),
                        evidence_sessions=tuple(dict.fromkeys(session_of[e] for e in evidence)),
                        abstention=ability == "abstention",
                        extra={"rubric": item.get("rubric", [])},
                    )
                )
        cases.append(Case(id=conv_id, messages=messages, questions=questions))
    return Dataset("beam", path, file_sha256(path), "message_id", cases, dict(notes))
