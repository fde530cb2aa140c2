"""Reproducible benchmarks: LoCoMo, LongMemEval and BEAM retrieval (and optional answer
accuracy), and the scale benchmark.

    >>> from anamnesis.bench import BenchOptions, run_benchmark       # doctest: +SKIP
    >>> out = run_benchmark("locomo", "locomo10.json.gz",
    ...                     options=BenchOptions(configs=("bm25", "hybrid")))
    >>> out.summary["configs"]["hybrid"]["overall"]["recall@10"]["mean"]

The same runs from the shell: ``anamnesis bench locomo --data locomo10.json.gz``.
"""

from .api import BenchOutput, run_benchmark, run_dataset
from .runner import BenchOptions
from .scale import ScaleOptions, run_scale

__all__ = [
    "BenchOptions",
    "BenchOutput",
    "ScaleOptions",
    "run_benchmark",
    "run_dataset",
    "run_scale",
]
