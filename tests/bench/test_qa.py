"""Answer accuracy (--qa) against a fake OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from anamnesis import llm
from anamnesis.bench import qa
from anamnesis.bench.api import run_benchmark
from anamnesis.bench.runner import BenchOptions
from anamnesis.errors import InvalidInputError

FIXTURES = Path(__file__).parent.parent / "fixtures" / "bench"


class FakeLLM(BaseHTTPRequestHandler):
    """Answers "yes" to judge prompts and a fixed sentence to reader prompts.

    ``server.fail_first`` requests fail with HTTP 500 first (to exercise retries);
    ``server.always_fail`` makes every request fail.
    """

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server = self.server
        with server.lock:  # type: ignore[attr-defined]
            server.requests.append(body)  # type: ignore[attr-defined]
            fail = server.always_fail or server.fail_first > 0  # type: ignore[attr-defined]
            if server.fail_first > 0:  # type: ignore[attr-defined]
                server.fail_first -= 1  # type: ignore[attr-defined]
        if fail or self.path != "/v1/chat/completions":
            self.send_response(500)
            self.end_headers()
            return
        prompt = body["messages"][-1]["content"]
        reply = "yes" if "Answer yes or no only" in prompt else "It is not mentioned."
        payload = {
            "choices": [{"message": {"role": "assistant", "content": reply}}],
            "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": 3},
        }
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_llm(monkeypatch) -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeLLM)
    server.lock = threading.Lock()  # type: ignore[attr-defined]
    server.requests = []  # type: ignore[attr-defined]
    server.fail_first = 0  # type: ignore[attr-defined]
    server.always_fail = False  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(qa.BASE_URL_ENV, f"http://127.0.0.1:{server.server_address[1]}/v1")
    monkeypatch.setenv(qa.MODEL_ENV, "fake-model")
    monkeypatch.delenv(qa.API_KEY_ENV, raising=False)
    monkeypatch.delenv(qa.JUDGE_MODEL_ENV, raising=False)
    monkeypatch.setattr(llm, "INITIAL_BACKOFF", 0.01)
    yield server
    server.shutdown()
    server.server_close()


def test_judge_prompts_are_the_official_ones():
    prompt = qa.longmemeval_judge_prompt("temporal-reasoning", "Q?", "18 days", "19 days", False)
    assert "do not penalize off-by-one errors for the number of days" in prompt
    assert prompt.endswith("Is the model response correct? Answer yes or no only.")
    assert "Question: Q?\n\nCorrect Answer: 18 days\n\nModel Response: 19 days" in prompt
    abstain = qa.longmemeval_judge_prompt("multi-session", "Q?", "why", "unknown", True)
    assert "Does the model correctly identify the question as unanswerable?" in abstain
    pref = qa.longmemeval_judge_prompt("single-session-preference", "Q?", "rubric", "r", False)
    assert "Rubric: rubric" in pref
    with pytest.raises(InvalidInputError):
        qa.longmemeval_judge_prompt("made-up", "q", "a", "r", False)
    assert qa.judge_says_yes(" Yes.") and not qa.judge_says_yes("no")


def test_locomo_official_f1():
    pytest.importorskip("nltk")
    assert qa.locomo_normalise("The cat, and a Dog!") == "cat dog"
    assert qa.locomo_token_f1("7 May 2023", "7 May 2023") == 1.0
    # Stemming: "running" and "runs" both become "run".
    assert qa.locomo_token_f1("running", "runs") == 1.0
    # 2 of 3 predicted tokens match 2 of 2 gold: P=2/3, R=1, F1=0.8.
    assert qa.locomo_token_f1("paris in france", "paris france") == pytest.approx(0.8)
    # Category 1 averages the best match for each comma-separated gold part.
    assert qa.locomo_score(1, "hiking, painting", "painting, swimming") == pytest.approx(0.5)
    assert qa.locomo_score(3, "teacher", "teacher; maybe counsellor") == 1.0
    assert qa.locomo_score(5, "That is not mentioned.", "anything") == 1.0
    assert qa.locomo_score(5, "She went to Paris.", "anything") == 0.0


def test_client_retries_then_succeeds(fake_llm):
    fake_llm.fail_first = 2
    client = qa.ChatClient.from_env()
    text, usage = client.complete([{"role": "user", "content": "hello"}], max_tokens=5)
    assert text == "It is not mentioned." and usage["completion_tokens"] == 3
    assert client.usage.calls == 1 and client.usage.failed_attempts == 2
    assert fake_llm.requests[-1]["temperature"] == 0.0


def test_client_gives_up_with_typed_error(fake_llm):
    fake_llm.always_fail = True
    client = qa.ChatClient.from_env()
    client.attempts = 2
    with pytest.raises(qa.LLMError, match="after 2 attempt"):
        client.complete([{"role": "user", "content": "hello"}], max_tokens=5)


def test_qa_needs_an_endpoint(monkeypatch):
    monkeypatch.delenv(qa.BASE_URL_ENV, raising=False)
    with pytest.raises(InvalidInputError, match=qa.BASE_URL_ENV):
        qa.ChatClient.from_env()


def test_longmemeval_qa_end_to_end(tmp_path, fake_llm):
    fake_llm.fail_first = 1
    options = BenchOptions(
        configs=("bm25",), embedder="edge", qa=True, qa_full_context=True, qa_workers=2
    )
    summary = run_benchmark(
        "longmemeval", FIXTURES / "longmemeval_smoke.json.gz", options=options, out_dir=tmp_path
    ).summary
    block = summary["configs"]["bm25"]["qa"]
    assert block["grader"] == "longmemeval-judge"
    assert block["graded"] == 3 and block["errored"] == 0
    assert block["score"]["mean"] == 1.0  # the fake judge always says yes
    assert summary["full_context"]["qa"]["graded"] == 3
    usage = summary["qa_usage"]
    # 3 questions x (retrieved + full context) answers, and as many judge calls.
    assert usage["reader"]["calls"] == 6 and usage["judge"]["calls"] == 6
    assert usage["reader"]["failed_attempts"] + usage["judge"]["failed_attempts"] == 1
    assert usage["reader"]["prompt_tokens"] > 0
    record = json.loads((tmp_path / "records.jsonl").read_text().splitlines()[0])
    assert record["qa"]["prediction"] == "It is not mentioned."
    assert record["qa"]["judge_reply"] == "yes"
    assert "## Answer accuracy" in (tmp_path / "report.md").read_text()
    reader_prompts = [
        r["messages"][0]["content"] for r in fake_llm.requests if "Memory excerpts" in str(r)
    ]
    assert reader_prompts and all("Question:" in p for p in reader_prompts)


def test_errored_questions_are_counted_not_dropped(tmp_path, fake_llm, monkeypatch):
    fake_llm.always_fail = True
    monkeypatch.setattr(llm, "ATTEMPTS", 2)
    options = BenchOptions(configs=("bm25",), embedder="edge", qa=True)
    summary = run_benchmark(
        "longmemeval", FIXTURES / "longmemeval_smoke.json.gz", options=options, out_dir=tmp_path
    ).summary
    block = summary["configs"]["bm25"]["qa"]
    assert block["errored"] == 3 and block["graded"] == 3
    assert block["all"]["mean"] == 0.0


def test_locomo_qa_uses_official_f1(tmp_path, fake_llm):
    pytest.importorskip("nltk")
    options = BenchOptions(configs=("bm25",), embedder="edge", qa=True)
    summary = run_benchmark(
        "locomo", FIXTURES / "locomo_smoke.json.gz", options=options, out_dir=tmp_path
    ).summary
    block = summary["configs"]["bm25"]["qa"]
    assert block["grader"] == "locomo-f1" and block["errored"] == 0
    assert summary["qa_usage"]["judge"] is None
    assert 0.0 <= block["score"]["mean"] < 0.5  # "It is not mentioned." rarely matches


def test_beam_qa_is_refused(fake_llm, tmp_path):
    options = BenchOptions(configs=("bm25",), embedder="edge", qa=True)
    with pytest.raises(InvalidInputError, match="BEAM"):
        run_benchmark("beam", FIXTURES / "beam_smoke.json.gz", options=options, out_dir=tmp_path)
