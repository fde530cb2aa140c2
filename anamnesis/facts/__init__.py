"""Bi-temporal facts: extraction (rules or an LLM), conflict resolution, time queries.

``consolidate`` reads unread episodes and updates the facts; ``resolve`` decides
supersession; ``people`` says who the scope's user is, by any name; ``search``
serves facts to the read path. The stored type is
``anamnesis.types.Fact``.
"""
