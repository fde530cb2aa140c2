"""SQL that both backends run, written once over a small dialect object each backend
passes in: facts, derived items, forgetting, gate decisions, usage counters, and the
scoped read of the rows kept beside episodes (``scoped``)."""
