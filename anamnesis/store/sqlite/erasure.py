"""Erasing words from the FTS5 indexes without rewriting them.

An FTS5 delete normally adds a tombstone and leaves the row's words in the index
segments until they are merged, so a forget used to merge each index whole
(``'optimize'``), at a cost that grows with the store. With FTS5's ``secure-delete``
option (SQLite 3.44 and later; ``driver``) a delete rewrites, in place, the leaf pages
that held the row's entries instead.

One trace survives ``secure-delete``: each leaf page of a segment has a separator in
the ``<table>_idx`` table, a prefix of the first word on the page, long enough to
tell it from the last word of the page before. When the first word on a page is
erased, the page and the separator stay valid, and the separator still spells the
erased word's first letters. So a forget here also:

1. records the text of every row it deletes from an indexed table (temporary
   triggers into an in-memory FTS5 table with the same tokenizer, which yields the
   row's words exactly as the index holds them);
2. after the deletes, writes the pending changes to the segments (``'flush'``) and
   keeps the words that no longer occur anywhere in the index;
3. looks for a separator that is a prefix of one of those words and of no word left,
   and only if there is one, merges that index whole (``rewrite``), which writes
   every separator anew.

All of it runs in the forget's transaction. Without ``secure-delete`` (an older
SQLite), every forget merges both indexes whole, as before.

A forget of many episodes runs in several transactions, each with the steps above for
its own rows. Where step 3 finds a separator to rewrite (or without secure-delete),
the index is merged once, by the first transaction that finds it so, and marked in
``meta`` as owing one more merge (``REWRITE_DUE``), which the last transaction does:
a merge per batch would make a large forget cost the square of its size, while after
one merge the index is one segment, in which each next batch's in-place deletes are
cheap. Where no batch finds one (a small share of a large index), nothing is merged,
as for a single transaction. If the process dies in between, the mark (with its
process id) stays: the store merges the index when it is next opened for writing,
or at the next forget.
"""

from __future__ import annotations

import os

from .driver import sqlite3

#: Each full-text index, the table whose rows it indexes, and the columns it indexes.
FTS_INDEXES = (
    ("episodes_fts", "episodes", ("content", "scope_terms")),
    ("facts_fts", "facts", ("text", "scope_terms")),
)
#: The tokenizer of both indexes (``schema``): the erased rows are tokenised alike.
TOKENIZE = "porter unicode61 remove_diacritics 2"
#: The key prefix FTS5 gives the terms of its main index (prefix indexes use others).
MAIN_INDEX = b"0"
#: Past this many words leaving an index in one forget, the index is merged whole
#: rather than checked word by word.
MAX_CHECKED_WORDS = 5000
#: The ``meta`` key, before an index's name, that marks the index as owing a whole merge.
REWRITE_DUE = "erasure_rewrite_due:"
#: The highest character: every word that begins with a text sorts below text + it.
_LAST = "\U0010ffff"


def secure_delete_state(conn: sqlite3.Connection) -> bool:
    """Whether every full-text index of the store has ``secure-delete`` on."""
    for index, _, _ in FTS_INDEXES:
        row = conn.execute(f"SELECT v FROM {index}_config WHERE k = 'secure-delete'").fetchone()
        if row is None or not row[0]:
            return False
    return True


def turn_on_secure_delete(conn: sqlite3.Connection) -> None:
    """Set ``secure-delete`` on every full-text index (persistent: a table option).
    Called inside a write transaction, only where ``driver.SECURE_DELETE``."""
    for index, _, _ in FTS_INDEXES:
        conn.execute(f"INSERT INTO {index} ({index}, rank) VALUES ('secure-delete', 1)")


def start_capture(conn: sqlite3.Connection) -> None:
    """Inside a forget's transaction, before its deletes: record the indexed text of
    every row deleted from now on (``finish``)."""
    for index, table, columns in FTS_INDEXES:
        names = ", ".join(columns)
        olds = ", ".join(f"old.{c}" for c in columns)
        # Contentless: it keeps only the words, and 'delete-all' clears them at once.
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.erased_{table} "
            f"USING fts5({names}, content='', tokenize='{TOKENIZE}')"
        )
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.erased_{table}_words "
            f"USING fts5vocab(temp, erased_{table}, row)"
        )
        # An 'instance' table yields a word's first occurrence without counting them all.
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{index}_words "
            f"USING fts5vocab(main, {index}, instance)"
        )
        conn.execute(
            f"""CREATE TEMP TRIGGER erasing_{table} AFTER DELETE ON main.{table} BEGIN
                  INSERT INTO erased_{table} ({names}) VALUES ({olds});
                END"""
        )


def stop_capture(conn: sqlite3.Connection) -> None:
    """Drop the triggers ``start_capture`` made (``finish`` does it too)."""
    for _, table, _ in FTS_INDEXES:
        conn.execute(f"DROP TRIGGER temp.erasing_{table}")


def finish(conn: sqlite3.Connection, secure: bool, later: bool = False) -> list[str]:
    """After a forget's deletes, in its transaction: leave no word of the deleted rows
    in a full-text index (see the module's steps). ``secure``: the indexes have
    ``secure-delete`` on and ``start_capture`` ran. ``later``: another transaction of
    the same forget follows; an index that needs a whole merge (a separator spells an
    erased word, or without secure-delete) is merged by the first transaction that
    finds it so and marked as owing one more (``REWRITE_DUE``), which the last
    transaction does. Returns the indexes merged whole."""
    if secure:
        stop_capture(conn)
    due = due_indexes(conn)
    merged = []
    for index, table, columns in FTS_INDEXES:
        # Without secure-delete the words stay in the segments until a merge: all may.
        words = _erased_words(conn, table) if secure else None
        needs_merge = (
            words is None
            or len(words) > MAX_CHECKED_WORDS
            or (bool(words) and _separator_left(conn, index, words))
        )
        if later:
            if needs_merge:
                if index not in due:
                    # Merged once now, the index is one segment, in which each next
                    # batch's in-place deletes are cheap; the last transaction merges
                    # again for the words erased after.
                    merge_whole(conn, index, columns[0], secure)
                    merged.append(index)
                conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                    (REWRITE_DUE + index, str(os.getpid())),
                )
            continue
        if index in due or needs_merge:
            merge_whole(conn, index, columns[0], secure)
            merged.append(index)
    return merged


def due_indexes(conn: sqlite3.Connection, *, abandoned: bool = False) -> list[str]:
    """The full-text indexes a forget marked as owing a whole merge (``finish``);
    ``abandoned``: only those whose forget's process is gone (cut by a kill)."""
    rows = conn.execute(
        "SELECT substr(key, ?), value FROM meta WHERE key >= ? AND key < ?",
        (len(REWRITE_DUE) + 1, REWRITE_DUE, REWRITE_DUE + _LAST),
    )
    return [index for index, pid in rows if not (abandoned and pid.isdigit() and _alive(int(pid)))]


def merge_due(conn: sqlite3.Connection, secure: bool) -> list[str]:
    """Merge whole every index that a forget cut by a kill left owing it."""
    due = due_indexes(conn, abandoned=True)
    for index, _, columns in FTS_INDEXES:
        if index in due:
            merge_whole(conn, index, columns[0], secure)
    return due


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (this one included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def merge_whole(conn: sqlite3.Connection, index: str, column: str, secure: bool) -> None:
    """Merge ``index`` whole, which leaves none of its erased words or their prefixes,
    and clear its ``REWRITE_DUE`` mark."""
    if secure:
        rewrite(conn, index, column)
    else:  # the deletes are tombstones, which a merge applies
        conn.execute(f"INSERT INTO {index} ({index}) VALUES ('optimize')")
    conn.execute("DELETE FROM meta WHERE key = ?", (REWRITE_DUE + index,))


def _erased_words(conn: sqlite3.Connection, table: str) -> list[str]:
    """The words of the rows deleted from ``table`` since ``start_capture`` (or the
    last call), then forgotten."""
    words = [row[0] for row in conn.execute(f"SELECT term FROM temp.erased_{table}_words")]
    conn.execute(f"INSERT INTO temp.erased_{table} (erased_{table}) VALUES ('delete-all')")
    return words


def rewrite(conn: sqlite3.Connection, index: str, column: str) -> None:
    """Merge ``index`` into one segment written anew. With secure-delete an index of
    one segment has no deletes left to apply, and ``'optimize'`` leaves it as it is:
    a placeholder row (rowid 0, which no stored row has) makes a second segment, the
    merge of the two rewrites every page and separator, and the placeholder goes."""
    conn.execute(f"INSERT INTO {index} (rowid, {column}) VALUES (0, 'placeholder')")
    conn.execute(f"INSERT INTO {index} ({index}) VALUES ('flush')")
    conn.execute(f"INSERT INTO {index} ({index}) VALUES ('optimize')")
    conn.execute(
        f"INSERT INTO {index} ({index}, rowid, {column}) VALUES ('delete', 0, 'placeholder')"
    )


def _separator_left(conn: sqlite3.Connection, index: str, words: list[str]) -> bool:
    """Whether a separator of ``index`` spells the start of a word of ``words`` that
    is no longer in the index, and of no word that is (see the module)."""
    conn.execute(f"INSERT INTO {index} ({index}) VALUES ('flush')")
    vocabulary = f"temp.{index}_words"
    gone = [
        word
        for word in words
        if conn.execute(f"SELECT 1 FROM {vocabulary} WHERE term = ? LIMIT 1", (word,)).fetchone()
        is None
    ]
    if not gone:
        return False
    prefixes = sorted(
        {
            key[:length]
            for word in gone
            for key in [MAIN_INDEX + word.encode("utf-8")]
            for length in range(2, len(key) + 1)
        }
    )
    # The separators are keyed by (segment, term): seek each prefix in each segment.
    segments = [
        row[0]
        for row in conn.execute(
            f"""WITH RECURSIVE s(id) AS (
                  SELECT MIN(segid) FROM {index}_idx
                  UNION ALL
                  SELECT (SELECT MIN(segid) FROM {index}_idx WHERE segid > s.id)
                  FROM s WHERE s.id IS NOT NULL)
                SELECT id FROM s WHERE id IS NOT NULL"""
        )
    ]
    found: list[bytes] = []
    for segment in segments:
        for start in range(0, len(prefixes), 5000):
            chunk = prefixes[start : start + 5000]
            marks = ",".join("?" * len(chunk))
            found += [
                bytes(row[0])
                for row in conn.execute(
                    f"SELECT term FROM {index}_idx WHERE segid = ? AND term IN ({marks})",
                    [segment, *chunk],
                )
            ]
    return any(not _starts_a_word(conn, vocabulary, separator) for separator in found)


def _starts_a_word(conn: sqlite3.Connection, vocabulary: str, separator: bytes) -> bool:
    """Whether some word still in the index begins with ``separator``'s letters."""
    start = separator[len(MAIN_INDEX) :]
    # A separator may end inside a character: look from its last whole one.
    text = start.decode("utf-8", "ignore")
    rows = conn.execute(
        f"SELECT DISTINCT term FROM {vocabulary} WHERE term >= ? AND term < ?",
        (text, text + _LAST),
    )
    return any(term.encode("utf-8").startswith(start) for (term,) in rows)
