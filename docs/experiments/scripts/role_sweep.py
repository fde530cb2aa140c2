"""The role-channel weight sweep behind ``full-role`` (BENCHMARKS.md, "Chat roles").

Registers the swept variants as presets, then runs the ``anamnesis`` CLI with the given
arguments, e.g.

    python docs/experiments/scripts/role_sweep.py bench beam --data ../shared/data/beam_128k.json.gz \\
        --config full-temporal,role-1-1,role-1-2,role-2-2,role-0-2,role-1-2-seed,\\
    role-2-2-seed,role-3-3-seed

``role-L-D`` adds ``role_lexical`` at weight L and ``role_dense`` at weight D to
``full-temporal``; ``-seed`` also lets them seed the session channel (as ``full-role``,
which is ``role-2-2-seed``); ``role-neighbours`` is ``full-role`` plus the neighbours
channel, ``role-prior-F`` plus the ``role_prior`` stage at factor F,
``role-sessions-N`` with the session channel over the N best sessions (default 3).
"""

from __future__ import annotations

import sys

from anamnesis.bench.presets import BENCH_PRESETS, plus, then
from anamnesis.cli import main
from anamnesis.config import SearchConfig


def role(lexical: float, dense: float, *, seed: bool) -> SearchConfig:
    """``full-temporal`` plus the role channels at these weights."""
    config = BENCH_PRESETS["full-temporal"]
    if lexical:
        config = plus(config, "role_lexical", lexical)
    config = plus(config, "role_dense", dense)
    if seed:
        config = config.with_(seed_channels=(*config.seed_channels, "role_lexical", "role_dense"))
    return config


for lexical, dense in [(1, 1), (1, 2), (2, 2), (3, 3), (0, 2)]:
    BENCH_PRESETS[f"role-{lexical}-{dense}"] = role(lexical, dense, seed=False)
    BENCH_PRESETS[f"role-{lexical}-{dense}-seed"] = role(lexical, dense, seed=True)

# full-role with the neighbours channel (the adjacent turns of the best seeds: in a chat,
# the other half of an exchange) at the weight the "full" sweep gave it.
BENCH_PRESETS["role-neighbours"] = plus(BENCH_PRESETS["full-role"], "neighbours", 0.75)

# full-role with the role_prior stage as well (the other side's turns scaled after fusion).
for factor in (0.7, 0.85):
    BENCH_PRESETS[f"role-prior-{factor}"] = then(
        BENCH_PRESETS["full-role"], "role_prior", stage_options={"role_prior": {"factor": factor}}
    )

# full-role with the session channel reading more or fewer of the best sessions.
for sessions in (2, 5):
    BENCH_PRESETS[f"role-sessions-{sessions}"] = BENCH_PRESETS["full-role"].with_(sessions=sessions)

if __name__ == "__main__":
    main(sys.argv[1:])
