"""A fake OpenAI-compatible chat server on loopback: real HTTP, scripted replies."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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
