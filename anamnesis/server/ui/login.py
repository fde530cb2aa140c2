"""Who is looking at the inspector, and proof that a form came from it.

* **The key cookie.** The login form takes an API key (the same keys and scopes as
  REST); the browser keeps it in an HttpOnly, SameSite=Strict cookie limited to
  ``/ui``, and every page checks it against the key file again, so a revoked key
  stops working at once.
* **CSRF.** Every form that changes something carries a token: an HMAC, under a
  secret this process draws at start, of a random nonce kept in a second cookie and
  of the key. A post without it, with another nonce's token, or from before a
  restart is refused (403) and changes nothing. SameSite=Strict already keeps the
  cookies off cross-site posts; the token does not rely on it.
* **``anamnesis serve --open``** (``LocalLogin``): an admin key that lives as long as
  the process (never written to the key file) and a link that logs a browser in with
  it once; the link is dead after its first use, so the URL left in the browser's
  history or a process list opens nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from datetime import UTC, datetime

from ..keys import PREFIX, ApiKey, KeyStore

#: The cookie holding the API key.
KEY_COOKIE = "anamnesis_key"
#: The cookie holding the nonce the CSRF token is bound to.
NONCE_COOKIE = "anamnesis_nonce"
#: The form field carrying the CSRF token.
CSRF_FIELD = "csrf"
#: The path both cookies are limited to.
COOKIE_PATH = "/ui"


class Csrf:
    """Issues and checks the CSRF tokens of one server process."""

    def __init__(self) -> None:
        self._secret = secrets.token_bytes(32)

    @staticmethod
    def new_nonce() -> str:
        """A fresh random nonce for the nonce cookie."""
        return secrets.token_urlsafe(24)

    def token(self, nonce: str, key: str | None) -> str:
        """The token the forms of a browser holding ``nonce`` (and ``key``) carry."""
        message = f"{nonce}\0{key or ''}".encode("utf-8", "surrogatepass")
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def valid(self, nonce: str | None, key: str | None, token: object) -> bool:
        """True when ``token`` is the one issued for ``nonce`` and ``key``."""
        if not nonce or not isinstance(token, str) or not token:
            return False
        return hmac.compare_digest(self.token(nonce, key), token)


class LocalLogin:
    """The key check of ``anamnesis serve --open``: the key file, plus an admin key of
    this process only, reached through a one-time login link."""

    def __init__(self, keys: KeyStore) -> None:
        self.keys = keys
        self._secret = f"{PREFIX}local_{secrets.token_urlsafe(32)}"
        self._code: str | None = secrets.token_urlsafe(32)
        self._lock = threading.Lock()
        self._key = ApiKey("local", "serve --open", None, None, datetime.now(UTC))

    def list(self) -> list[ApiKey]:
        """The key file's keys (this process's own is not listed)."""
        return self.keys.list()

    def required(self) -> bool:
        """Always: the browser logs in through the link, or with a key of the file."""
        return True

    def authenticate(self, presented: str) -> ApiKey | None:
        """This process's admin key, or what the key file says of ``presented``."""
        if hmac.compare_digest(presented.encode(), self._secret.encode()):
            return self._key
        return self.keys.authenticate(presented)

    def link(self, base_url: str) -> str:
        """The one-time login link under ``base_url`` (``http://127.0.0.1:PORT``)."""
        if self._code is None:
            raise RuntimeError("the one-time link was used already")
        return f"{base_url}/ui/login?once={self._code}"

    def redeem(self, code: str) -> str | None:
        """The admin key, the first time the link's ``code`` is presented; None after."""
        with self._lock:
            if self._code is None or not hmac.compare_digest(code.encode(), self._code.encode()):
                return None
            self._code = None
            return self._secret
