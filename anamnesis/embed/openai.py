"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence

import numpy as np

from ..errors import EmbedderUnavailableError
from .base import normalise

BASE_URL_ENV = "ANAMNESIS_OPENAI_BASE_URL"
API_KEY_ENV = "ANAMNESIS_OPENAI_API_KEY"
#: Texts per request; most providers accept at least this many.
BATCH_SIZE = 64
RETRIES = 4


class OpenAIEmbedder:
    """Calls ``POST {base_url}/embeddings``; the dimension is learnt from the first reply."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dim: int | None = None,
        timeout: float = 60.0,
    ):
        self.base_url = (
            base_url or os.environ.get(BASE_URL_ENV) or os.environ.get("OPENAI_BASE_URL") or ""
        ).rstrip("/")
        if not self.base_url:
            raise EmbedderUnavailableError(
                f"an OpenAI-compatible embedder needs a base URL: set {BASE_URL_ENV}"
            )
        self.api_key = api_key or os.environ.get(API_KEY_ENV) or os.environ.get("OPENAI_API_KEY")
        self.model = model
        self.name = f"openai:{model}"
        self.timeout = timeout
        self.dim = dim if dim is not None else len(self._request(["dimension probe"])[0])

    def _request(self, texts: Sequence[str]) -> list[list[float]]:
        body = json.dumps({"model": self.model, "input": list(texts)}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        delay = 0.5
        for attempt in range(RETRIES + 1):
            request = urllib.request.Request(
                f"{self.base_url}/embeddings", data=body, headers=headers, method="POST"
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    payload = json.load(response)
                data = sorted(payload["data"], key=lambda d: d["index"])
                return [d["embedding"] for d in data]
            except urllib.error.HTTPError as exc:
                retryable = exc.code == 429 or exc.code >= 500
                if not retryable or attempt == RETRIES:
                    raise EmbedderUnavailableError(
                        f"embedding endpoint {self.base_url} answered {exc.code}: {exc.reason}"
                    ) from exc
            except (urllib.error.URLError, TimeoutError, KeyError, ValueError) as exc:
                if attempt == RETRIES:
                    raise EmbedderUnavailableError(
                        f"embedding endpoint {self.base_url} failed: {exc}"
                    ) from exc
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed many texts, ``BATCH_SIZE`` per request."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows: list[list[float]] = []
        for start in range(0, len(texts), BATCH_SIZE):
            rows.extend(self._request(texts[start : start + BATCH_SIZE]))
        return normalise(np.asarray(rows, dtype=np.float32))

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query."""
        return self.embed_documents([text])[0]
