"""``python -m anamnesis.cli``."""

from . import main

main()
