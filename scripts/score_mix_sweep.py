"""The score-mix sweep behind the default's ``score_mix`` (BENCHMARKS.md, "Score-aware fusion").

Registers ``mix-M`` presets (the default preset with ``score_mix`` = M, the share of
each channel's RRF vote taken from its z-scored score) and runs the ``anamnesis`` CLI
with the given arguments, e.g.

    python scripts/score_mix_sweep.py bench locomo --data ../shared/data/locomo10.json.gz \\
        --config mix-0,mix-0.1,mix-0.2,mix-0.3,mix-0.4

``mix-0`` is the default with plain RRF. The value is chosen on the first half of each
data set's cases and reported on the second (``scripts/category_compare.py`` and
``anamnesis bench report`` read the records by case).
"""

from __future__ import annotations

import sys

from anamnesis.cli import main
from anamnesis.config import PRESETS

for mix in (0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6):
    PRESETS[f"mix-{mix}"] = PRESETS["full-role"].with_(score_mix=float(mix))

if __name__ == "__main__":
    main(sys.argv[1:])
