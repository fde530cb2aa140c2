"""Options that several bench commands take alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click


def results_option(name: str) -> Any:
    """``--out``: the folder a run writes its results to (``out_dir``), by default
    ``results/<name>-<time>``."""
    return click.option(
        "--out",
        "out_dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help=f"Results folder [default: results/{name}-<time>].",
    )


def data_option(help_text: str) -> Any:
    """``--data``: the dataset file a run reads (required, must exist)."""
    return click.option(
        "--data",
        "data",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        required=True,
        help=help_text,
    )
