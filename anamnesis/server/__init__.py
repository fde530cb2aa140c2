"""The surfaces agents reach Anamnesis through, each a thin shell over ``AsyncMemory``:
``mcp_server`` (the MCP tools). This package imports without the server extras; the
modules that need them import them.
"""

#: Tokens an MCP tool's answer may take unless the server says otherwise.
DEFAULT_BUDGET_TOKENS = 2_000
#: The most any answer may take: common hosts cut tool output at 25,000 tokens.
MAX_BUDGET_TOKENS = 20_000
