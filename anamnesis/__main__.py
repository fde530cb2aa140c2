"""``python -m anamnesis`` runs the command line."""

from .cli import main

main()
