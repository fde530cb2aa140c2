"""A fake OpenAI-compatible chat server on loopback: real HTTP, scripted replies; and
``FactModel``, a script that answers the fact extractor's prompt as a careful model
would, from a table of what each message states."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from anamnesis.facts.predicates import fact_text, normalise_value
from anamnesis.llm import ChatClient

Script = Callable[[str], str]


class FakeLLM:
    """A loopback chat-completions server; ``script`` maps a prompt to a reply.

    ``status`` other than 200 answers every request with that HTTP error; ``delay``
    (seconds) holds each reply back, to make a client time out.
    """

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.script: Script = lambda prompt: '{"facts": []}'
        self.status = 200
        self.delay = 0.0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = body["messages"][-1]["content"]
                fake.prompts.append(prompt)
                if fake.delay:
                    time.sleep(fake.delay)
                if fake.status != 200:
                    self.send_error(fake.status)
                    return
                reply = {
                    "choices": [{"message": {"content": fake.script(prompt)}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5},
                }
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def client(self, model: str = "fake-model", timeout: float = 120.0) -> ChatClient:
        port = self.server.server_address[1]
        return ChatClient(
            f"http://127.0.0.1:{port}/v1", model, timeout=timeout, attempts=1, backoff=0.0
        )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- a scripted fact model --------------------------------------------------------------

#: The message and the stored facts the extractor's prompt shows (``llm_extract``).
_MESSAGE = re.compile(r"Message \([^)]*\) from [^\n]*:\n(.*)\n\nReply with JSON", re.DOTALL)
_SHOWN = re.compile(r"^- id=(\S+): (.*) \(since [^)]*\)$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Said:
    """A fact a scripted message states (``end``: that it stopped holding)."""

    predicate: str
    object: str
    subject: str = "user"
    single_valued: bool = True
    end: bool = False


@dataclass(slots=True)
class FactModel:
    """A deterministic stand-in for a model that extracts facts well.

    ``lines`` maps a phrase to what a message containing it states. For each statement
    it decides as the prompt asks, from the stored facts the prompt shows (it knows
    them by their text, ``fact_text`` of the triples it stated): the same value shown,
    NONE; another value of a single-valued slot shown, UPDATE it; an ending, END the
    shown fact of that slot (nothing shown: it says nothing); else ADD. ``decisions``
    records each (phrase, action, object of the target or None).
    """

    lines: dict[str, list[Said]]
    decisions: list[tuple[str, str, str | None]] = field(default_factory=list)

    def __call__(self, prompt: str) -> str:
        match = _MESSAGE.search(prompt)
        message = match.group(1) if match else ""
        known = {
            fact_text(s.subject, s.predicate, s.object): s
            for said in self.lines.values()
            for s in said
        }
        shown = [(i, known[t]) for i, t in _SHOWN.findall(prompt) if t in known]
        facts = []
        for phrase, said in self.lines.items():
            if phrase not in message:
                continue
            for s in said:
                action, target = self._decide(s, shown)
                self.decisions.append((phrase, action, target and target[1].object))
                if action is None:
                    continue
                facts.append(
                    {
                        "subject": s.subject,
                        "predicate": s.predicate,
                        "object": s.object,
                        "single_valued": s.single_valued,
                        "action": action,
                        "target": target and target[0],
                    }
                )
        return json.dumps({"facts": facts})

    @staticmethod
    def _decide(
        s: Said, shown: list[tuple[str, Said]]
    ) -> tuple[str | None, tuple[str, Said] | None]:
        slot = [(i, f) for i, f in shown if (f.subject, f.predicate) == (s.subject, s.predicate)]
        same = [(i, f) for i, f in slot if normalise_value(f.object) == normalise_value(s.object)]
        if s.end:
            return ("END", same[0]) if same else (None, None)
        if same:
            return "NONE", same[0]
        if slot and s.single_valued:
            return "UPDATE", slot[0]
        return "ADD", None
