"""The version of Anamnesis (one place: the package, the CLI and the servers read it)."""

__version__ = "0.1.0"
