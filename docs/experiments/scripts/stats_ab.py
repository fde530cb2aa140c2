"""``Store.stats`` of a user and of the whole store as at an older commit and as now,
alternated call by call on one store (an SQLite file or a PostgreSQL URL): best and
median wall time, best CPU time of this process, and whether the answers agree. The
study "PostgreSQL kill loop and stats at scale".

    python docs/experiments/scripts/stats_ab.py STORE_OR_URL USER ROUNDS DIM [COMMIT]

Run from the repository root (the old method is read with ``git show COMMIT:...``).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import textwrap
import time
from typing import Any

from anamnesis.types import Scope


def old_method(commit: str, module: Any, path: str) -> Any:
    """``stats`` as defined in ``path`` at ``commit``, compiled in ``module``'s namespace."""
    source = subprocess.run(
        ["git", "show", f"{commit}:{path}"], capture_output=True, text=True, check=True
    ).stdout
    start = source.index("    def stats(self, scope")
    end = source.find("\n    def ", start + 10)
    namespace = dict(vars(module))
    exec(textwrap.dedent(source[start : end if end > 0 else len(source)]), namespace)
    return namespace["stats"]


def main() -> None:
    location, user, rounds, dim = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    commit = sys.argv[5] if len(sys.argv) > 5 else "fe92b15"
    if location.startswith("postgresql://"):
        import anamnesis.store.postgres.reads as module
        from anamnesis.store.postgres import PostgresStore

        store: Any = PostgresStore(location, dim=dim)
        old = old_method(commit, module, "anamnesis/store/postgres/reads.py")
    else:
        import anamnesis.store.sqlite.reads as module
        from anamnesis.store.sqlite import SQLiteStore

        store = SQLiteStore(location, dim=dim)
        old = old_method(commit, module, "anamnesis/store/sqlite/reads.py")
    sizes = ("file_bytes", "table_bytes")
    for label, scope in (("stats(user)", Scope(user)), ("stats(None)", None)):
        wall: dict[str, list[float]] = {"old": [], "new": []}
        cpu: dict[str, list[float]] = {"old": [], "new": []}
        answers: dict[str, dict[str, Any]] = {}
        for _ in range(rounds):
            for which, call in (
                ("old", lambda scope=scope: old(store, scope)),
                ("new", lambda scope=scope: store.stats(scope)),
            ):
                c, t = time.process_time(), time.perf_counter()
                answers[which] = call()
                wall[which].append(time.perf_counter() - t)
                cpu[which].append(time.process_time() - c)
        same = all(answers["old"][k] == answers["new"][k] for k in answers["new"] if k not in sizes)
        ms = {k: (min(v) * 1e3, statistics.median(v) * 1e3) for k, v in wall.items()}
        print(
            f"{label}: old best {ms['old'][0]:.0f} ms median {ms['old'][1]:.0f}, "
            f"CPU {min(cpu['old']) * 1e3:.0f} | new best {ms['new'][0]:.0f} ms median "
            f"{ms['new'][1]:.0f}, CPU {min(cpu['new']) * 1e3:.0f} | same answer: {same} "
            f"(episodes {answers['new']['episodes']}, vectors {answers['new']['vectors']}, "
            f"sessions {answers['new']['sessions']})"
        )
    store.close()


if __name__ == "__main__":
    main()
