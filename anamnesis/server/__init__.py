"""The surfaces agents reach Anamnesis through, each a thin shell over ``AsyncMemory``:
``mcp_server`` (the MCP tools) and ``rest`` (the REST server, with its API ``keys``),
and the clients of the REST server, ``client.RemoteMemory`` and
``async_client.AsyncRemoteMemory``, which speak to it through ``wire``. This package
imports without the server extras; the modules that need them import them.
"""

from dataclasses import dataclass

#: Tokens an MCP tool's answer may take unless the server says otherwise.
DEFAULT_BUDGET_TOKENS = 2_000
#: The most any answer may take: common hosts cut tool output at 25,000 tokens.
MAX_BUDGET_TOKENS = 20_000
#: Request bodies larger than this are refused with 413 unless the server says otherwise.
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """What one client may take of the REST server (``anamnesis serve`` options of the
    same names): every wait on a client is bounded in time, and the connections served
    at once in number, so a client that sends slowly or never finishes cannot hold it.
    Times are seconds."""

    #: Largest request body accepted; a larger one is refused (413) before it is read.
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    #: A request's line and headers must arrive whole within this, from the connection's
    #: opening (or the request's first byte on a kept-alive connection); else it is closed.
    header_timeout: float = 10.0
    #: A request's body must arrive whole within this once its headers have (else 408).
    body_timeout: float = 60.0
    #: An idle kept-alive connection is closed after this.
    keep_alive_timeout: float = 5.0
    #: Connections served at once; a request on one beyond them is answered 503 at once.
    max_connections: int = 100


#: The limits ``anamnesis serve`` applies unless told otherwise.
DEFAULT_LIMITS = ServerLimits()
