"""Anamnesis inside agent frameworks, each an optional extra: LangGraph's long-term
store (``langgraph``, extra ``langgraph``) and the OpenAI Agents SDK's session memory
(``openai_agents``, extra ``agents``). Each adapter calls Memory's verbs only."""
