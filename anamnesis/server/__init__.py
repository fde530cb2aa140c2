"""The surfaces agents reach Anamnesis through, each a thin shell over ``AsyncMemory``:
``mcp_server`` (the MCP tools) and ``rest`` (the REST server, with its API ``keys``),
and the clients of the REST server, ``client.RemoteMemory`` and
``async_client.AsyncRemoteMemory``, which speak to it through ``wire``. This package
imports without the server extras; the modules that need them import them.
"""

#: Tokens an MCP tool's answer may take unless the server says otherwise.
DEFAULT_BUDGET_TOKENS = 2_000
#: The most any answer may take: common hosts cut tool output at 25,000 tokens.
MAX_BUDGET_TOKENS = 20_000
#: Request bodies larger than this are refused with 413 unless the server says otherwise.
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
