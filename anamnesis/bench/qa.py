"""Answer accuracy: answer each question from retrieved context, then grade it officially.

* The reader sees the retrieved episodes (dated, attributed, in rank order, within a
  token budget) under one fixed prompt (``READER_PROMPT``).
* LongMemEval answers are graded by an LLM with the benchmark's own judge prompts
  (``LONGMEMEVAL_JUDGE``: verbatim from ``src/evaluation/evaluate_qa.py`` of
  xiaowu0162/LongMemEval; temperature 0, at most 10 tokens, "yes" anywhere = correct).
* LoCoMo answers are graded with LoCoMo's token F1 (``task_eval/evaluation.py`` of
  snap-research/locomo): normalised, Porter-stemmed tokens; category 1 averages over
  comma-separated gold parts; category 3 uses the gold part before ';'; category 5
  scores 1 when the answer says "no information available" or "not mentioned".
* BEAM's rubric grading is not implemented: ``--qa`` on BEAM is refused.

The endpoint is any OpenAI-compatible ``/chat/completions`` server, configured by
``ANAMNESIS_LLM_BASE_URL``, ``ANAMNESIS_LLM_MODEL`` and ``ANAMNESIS_LLM_API_KEY``.
Calls are retried with exponential backoff; a question whose calls still fail is
counted as errored (and as wrong), never silently dropped.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..errors import InvalidInputError
from ..llm import API_KEY_ENV, BASE_URL_ENV, MODEL_ENV, ChatClient, LLMError, Usage
from ..types import Episode

__all__ = ["API_KEY_ENV", "BASE_URL_ENV", "MODEL_ENV", "ChatClient", "LLMError", "Usage"]

#: Optional: a different model for the LongMemEval judge (default: the reader's model).
JUDGE_MODEL_ENV = "ANAMNESIS_LLM_JUDGE_MODEL"
#: Default context budget handed to the reader, in tokens.
DEFAULT_QA_BUDGET = 4000

QA_DATASETS = ("locomo", "longmemeval")

# -- the reader -----------------------------------------------------------------------------

#: The fixed answering prompt. Same for every configuration, so differences come from
#: retrieval alone.
READER_PROMPT = (
    "You are answering a question about past conversations, using only the memory "
    "excerpts below. Each excerpt shows when it was said and by whom. Prefer the most "
    "recent information when excerpts conflict. If the excerpts do not contain the "
    "answer, say that the information is not mentioned. Answer concisely: a short "
    "phrase or one or two sentences.\n\n"
    "Memory excerpts:\n{context}\n\n"
    "Current date: {today}\n"
    "Question: {question}\n"
    "Answer:"
)


def format_episode(episode: Episode) -> str:
    """One context line: ``[date] who: text``."""
    who = episode.speaker or episode.role or "someone"
    return f"[{episode.event_time.strftime('%Y-%m-%d %H:%M')}] {who}: {episode.content}"


def format_message(message: dict[str, Any]) -> str:
    """A context line for a message dict, as ``format_episode`` formats an episode."""
    when = message.get("event_time")
    stamp = when.strftime("%Y-%m-%d %H:%M") if when else "undated"
    who = message.get("speaker") or message.get("role") or "someone"
    return f"[{stamp}] {who}: {message['content']}"


def build_context(episodes: Sequence[Episode], tokens: Sequence[int], budget: int) -> str:
    """Episodes in rank order while their token counts fit ``budget`` (the same rule as
    the budget-recall metric)."""
    lines, used = [], 0
    for episode, count in zip(episodes, tokens, strict=True):
        if used + count > budget:
            break
        used += count
        lines.append(format_episode(episode))
    return "\n".join(lines) if lines else "(no excerpts)"


def reader_messages(question: str, context: str, today: datetime | None) -> list[dict[str, str]]:
    """The chat messages the reader is sent."""
    prompt = READER_PROMPT.format(
        context=context,
        today=today.strftime("%Y-%m-%d") if today else "unknown",
        question=question,
    )
    return [{"role": "user", "content": prompt}]


# -- LongMemEval's judge (verbatim) -------------------------------------------------------

_LME_STANDARD = (
    "I will give you a question, a correct answer, and a response from a model. Please "
    "answer yes if the response contains the correct answer. Otherwise, answer no. If the "
    "response is equivalent to the correct answer or contains all the intermediate steps "
    "to get the correct answer, you should also answer yes. If the response only contains "
    "a subset of the information required by the answer, answer no. \n\nQuestion: {}\n\n"
    "Correct Answer: {}\n\nModel Response: {}\n\nIs the model response correct? Answer yes "
    "or no only."
)
LONGMEMEVAL_JUDGE: dict[str, str] = {
    "single-session-user": _LME_STANDARD,
    "single-session-assistant": _LME_STANDARD,
    "multi-session": _LME_STANDARD,
    "temporal-reasoning": (
        "I will give you a question, a correct answer, and a response from a model. Please "
        "answer yes if the response contains the correct answer. Otherwise, answer no. If "
        "the response is equivalent to the correct answer or contains all the intermediate "
        "steps to get the correct answer, you should also answer yes. If the response only "
        "contains a subset of the information required by the answer, answer no. In "
        "addition, do not penalize off-by-one errors for the number of days. If the question "
        "asks for the number of days/weeks/months, etc., and the model makes off-by-one "
        "errors (e.g., predicting 19 days when the answer is 18), the model's response is "
        "still correct. \n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: {}\n\n"
        "Is the model response correct? Answer yes or no only."
    ),
    "knowledge-update": (
        "I will give you a question, a correct answer, and a response from a model. Please "
        "answer yes if the response contains the correct answer. Otherwise, answer no. If "
        "the response contains some previous information along with an updated answer, the "
        "response should be considered as correct as long as the updated answer is the "
        "required answer.\n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: {}\n\n"
        "Is the model response correct? Answer yes or no only."
    ),
    "single-session-preference": (
        "I will give you a question, a rubric for desired personalized response, and a "
        "response from a model. Please answer yes if the response satisfies the desired "
        "response. Otherwise, answer no. The model does not need to reflect all the points "
        "in the rubric. The response is correct as long as it recalls and utilizes the "
        "user's personal information correctly.\n\nQuestion: {}\n\nRubric: {}\n\nModel "
        "Response: {}\n\nIs the model response correct? Answer yes or no only."
    ),
    "abstention": (
        "I will give you an unanswerable question, an explanation, and a response from a "
        "model. Please answer yes if the model correctly identifies the question as "
        "unanswerable. The model could say that the information is incomplete, or some "
        "other information is given but the asked information is not.\n\nQuestion: {}\n\n"
        "Explanation: {}\n\nModel Response: {}\n\nDoes the model correctly identify the "
        "question as unanswerable? Answer yes or no only."
    ),
}
#: The official judge call: temperature 0, at most 10 tokens.
JUDGE_MAX_TOKENS = 10


def longmemeval_judge_prompt(
    question_type: str, question: str, answer: str, response: str, abstention: bool
) -> str:
    """The official judge prompt for one answer."""
    key = "abstention" if abstention else question_type
    if key not in LONGMEMEVAL_JUDGE:
        raise InvalidInputError(f"no official LongMemEval judge prompt for {question_type!r}")
    return LONGMEMEVAL_JUDGE[key].format(question, answer, response)


def judge_says_yes(reply: str) -> bool:
    """The official reading of a judge reply: "yes" anywhere in it, case-insensitively."""
    return "yes" in reply.strip().lower()


# -- LoCoMo's token F1 --------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")


def locomo_normalise(text: str) -> str:
    """LoCoMo's normalize_answer: drop commas, lower-case, strip punctuation, drop
    a/an/the/and, collapse whitespace."""
    text = text.replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    return " ".join(_ARTICLES.sub(" ", text).split())


def _stemmer() -> Any:
    try:
        from nltk.stem import PorterStemmer
    except ImportError as exc:
        raise InvalidInputError(
            "LoCoMo's official F1 stems with NLTK's Porter stemmer: pip install nltk"
        ) from exc
    return PorterStemmer()


def locomo_token_f1(prediction: str, gold: str, stemmer: Any = None) -> float:
    """Token F1 between normalised, Porter-stemmed tokens (LoCoMo's f1_score)."""
    stemmer = stemmer or _stemmer()
    pred = [stemmer.stem(w) for w in locomo_normalise(prediction).split()]
    ref = [stemmer.stem(w) for w in locomo_normalise(gold).split()]
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def locomo_score(category: int, prediction: str, gold: str, stemmer: Any = None) -> float:
    """LoCoMo's official per-category answer score."""
    if category == 5:
        lowered = prediction.lower()
        return float("no information available" in lowered or "not mentioned" in lowered)
    stemmer = stemmer or _stemmer()
    if category == 3:
        gold = gold.split(";")[0].strip()
    if category == 1:
        parts = [p.strip() for p in prediction.split(",")]
        golds = [g.strip() for g in gold.split(",")]
        return sum(max(locomo_token_f1(p, g, stemmer) for p in parts) for g in golds) / len(golds)
    return locomo_token_f1(prediction, gold, stemmer)


# -- answering and grading one question ---------------------------------------------------


@dataclass(slots=True)
class QAGrader:
    """Answers and grades questions for one dataset with one reader and one judge."""

    dataset: str
    reader: ChatClient
    judge: ChatClient | None
    budget: int = DEFAULT_QA_BUDGET
    answer_tokens: int = 200
    _stemmer: Any = None

    def __post_init__(self) -> None:
        if self.dataset not in QA_DATASETS:
            raise InvalidInputError(
                f"answer accuracy is graded for {list(QA_DATASETS)} only (BEAM's rubric "
                "judge is not implemented)"
            )
        if self.dataset == "locomo":
            self._stemmer = _stemmer()
        elif self.judge is None:
            raise InvalidInputError("LongMemEval grading needs a judge client")

    def grade(self, question: Any, context: str, today: datetime | None) -> dict[str, Any]:
        """Answer ``question`` from ``context`` and grade the answer. Never raises for an
        endpoint failure: the record says ``error`` and the score is 0."""
        out: dict[str, Any] = {"context_chars": len(context)}
        try:
            answer, spent = self.reader.complete(
                reader_messages(question.text, context, today), max_tokens=self.answer_tokens
            )
            out.update(prediction=answer.strip(), reader_tokens=spent)
            if self.dataset == "locomo":
                category = int(question.extra.get("category_number", 0))
                out["score"] = locomo_score(category, answer, question.answer, self._stemmer)
                out["grader"] = "locomo-f1"
            else:
                assert self.judge is not None
                prompt = longmemeval_judge_prompt(
                    question.category,
                    question.text,
                    question.answer,
                    answer,
                    question.abstention,
                )
                reply, judged = self.judge.complete(
                    [{"role": "user", "content": prompt}], max_tokens=JUDGE_MAX_TOKENS
                )
                out.update(
                    judge_reply=reply.strip(),
                    judge_tokens=judged,
                    score=float(judge_says_yes(reply)),
                    grader="longmemeval-judge",
                )
        except LLMError as exc:
            out.update(error=str(exc), score=0.0)
        return out
