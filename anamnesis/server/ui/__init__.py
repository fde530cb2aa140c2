"""The memory inspector: pages under ``/ui`` of ``anamnesis serve`` where a person
sees what the agent remembers and corrects it (``pages``), with the login and CSRF
protection they need (``login``) and the shaping of answers for drawing (``views``).
Needs the server extras (FastAPI, Jinja2)."""
