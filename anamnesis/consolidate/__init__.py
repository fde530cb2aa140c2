"""Derived items built by consolidation beside the facts: session summaries and
profiles of people, each with provenance back to the episodes it was drawn from.

- ``salience``: which sentences of a session carry its facts, events and decisions.
- ``summaries``: one extractive summary per session, rebuilt when the session changes.
- ``profiles``: one profile per person, from the fact layer, rebuilt when their facts
  change.
- ``build``: ``refresh``, the step ``Memory.consolidate`` runs after extracting facts.
- ``types``: the public views (``SessionSummary``, ``Profile``).
"""
