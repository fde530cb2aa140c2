"""An optional OpenAI-compatible chat client: retries with backoff, usage accounting.

Used by the benchmark's reader and judge and by the LLM fact extractor. The endpoint
is any ``/chat/completions`` server, configured by ``ANAMNESIS_LLM_BASE_URL``,
``ANAMNESIS_LLM_MODEL`` and ``ANAMNESIS_LLM_API_KEY`` (or given explicitly).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field

from .errors import AnamnesisError, InvalidInputError

BASE_URL_ENV = "ANAMNESIS_LLM_BASE_URL"
MODEL_ENV = "ANAMNESIS_LLM_MODEL"
API_KEY_ENV = "ANAMNESIS_LLM_API_KEY"
#: Attempts per call (first try + retries); backoff doubles from INITIAL_BACKOFF seconds.
ATTEMPTS = 5
INITIAL_BACKOFF = 1.0


class LLMError(AnamnesisError):
    """The LLM endpoint failed after every retry, or answered something unusable."""


# -- the client ---------------------------------------------------------------------------


@dataclass(slots=True)
class Usage:
    """Tokens and calls spent, as reported by the endpoint."""

    calls: int = 0
    failed_attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(slots=True)
class ChatClient:
    """A minimal OpenAI-compatible chat client with retries and usage accounting."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 120.0
    attempts: int = field(default_factory=lambda: ATTEMPTS)
    backoff: float = field(default_factory=lambda: INITIAL_BACKOFF)
    usage: Usage = field(default_factory=Usage)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_env(cls, model: str | None = None) -> ChatClient:
        """A client configured from ``ANAMNESIS_LLM_*``; InvalidInputError when unset."""
        base_url = os.environ.get(BASE_URL_ENV, "").rstrip("/")
        chosen = model or os.environ.get(MODEL_ENV, "")
        if not base_url or not chosen:
            raise InvalidInputError(
                f"an OpenAI-compatible endpoint is needed: set {BASE_URL_ENV} and {MODEL_ENV}"
                f" (and {API_KEY_ENV} if it requires a key)"
            )
        return cls(base_url=base_url, model=chosen, api_key=os.environ.get(API_KEY_ENV))

    def complete(
        self, messages: list[dict[str, str]], *, max_tokens: int, temperature: float = 0.0
    ) -> tuple[str, dict[str, int]]:
        """The reply text and this call's token usage. Raises LLMError after retries."""
        # Imported here: urllib.request pulls in ssl and http.client, slow to import,
        # which `import anamnesis` should not pay when no LLM is used.
        import urllib.error
        import urllib.request

        body = json.dumps(
            {
                "model": self.model,
                "messages": messages,
                "temperature": temperature,
                "max_tokens": max_tokens,
                "n": 1,
            }
        ).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        delay = self.backoff
        last = "no attempt made"
        for attempt in range(self.attempts):
            request = urllib.request.Request(
                f"{self.base_url}/chat/completions", data=body, headers=headers, method="POST"
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    payload = json.load(response)
                text = payload["choices"][0]["message"]["content"] or ""
                usage = payload.get("usage") or {}
                spent = {
                    "prompt_tokens": int(usage.get("prompt_tokens", 0)),
                    "completion_tokens": int(usage.get("completion_tokens", 0)),
                }
                with self._lock:
                    self.usage.calls += 1
                    self.usage.prompt_tokens += spent["prompt_tokens"]
                    self.usage.completion_tokens += spent["completion_tokens"]
                return text, spent
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code} {exc.reason}"
                if exc.code not in (408, 409, 429) and exc.code < 500:
                    break
            except (
                urllib.error.URLError,
                TimeoutError,
                ConnectionError,
                KeyError,
                IndexError,
                TypeError,
                ValueError,
            ) as exc:
                last = f"{type(exc).__name__}: {exc}"
            with self._lock:
                self.usage.failed_attempts += 1
            if attempt + 1 < self.attempts:
                time.sleep(delay)
                delay *= 2
        raise LLMError(f"{self.base_url} failed after {self.attempts} attempt(s): {last}")
