"""Score the rule fact extractor of an older commit with today's ``bench facts`` scorer.

    python docs/experiments/scripts/fact_rules_baseline.py 8c911c1 \
        tests/fixtures/fact_statements.jsonl

The old ``anamnesis/facts/rules.py`` is read with ``git show``, its relative imports
made absolute, and its ``RuleExtractor`` put in place of today's for one run of the
command (the old rules draft no END, so they score nothing on "changes").
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from click.testing import CliRunner

from anamnesis.bench import facts_eval


def main(commit: str, data: str) -> None:
    source = subprocess.run(
        ["git", "show", f"{commit}:anamnesis/facts/rules.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    for relative, absolute in (
        ("from ..ingest", "from anamnesis.ingest"),
        ("from ..types", "from anamnesis.types"),
        ("from .predicates", "from anamnesis.facts.predicates"),
        ("from .types", "from anamnesis.facts.types"),
    ):
        source = source.replace(relative, absolute)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "old_rules.py").write_text(source)
        sys.path.insert(0, folder)
        import old_rules  # type: ignore[import-not-found]

        facts_eval.RuleExtractor = old_rules.RuleExtractor  # type: ignore[misc]
        result = CliRunner().invoke(facts_eval.facts_command, ["--data", data])
    print(result.output)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
