"""Files of a derived index kept beside a SQLite store (the dense matrix, the lexical
postings): one set per generation, ``<store>.<kind>.<generation>.<part>``, named by a
state file ``<store>.<kind>.json`` written last and atomically, so a half-written set
is never trusted. All are private to their owner (0600), next to the store.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Concatenate, ParamSpec

import numpy as np

from ...errors import InvalidInputError

try:
    import fcntl
except ImportError:  # not POSIX: writers in one process are still kept apart
    fcntl = None  # type: ignore[assignment]

#: Environment variable that overrides the rows from which a store's vectors and
#: postings are saved beside it (``save_threshold``).
THRESHOLD_ENV = "ANAMNESIS_INDEX_FILES_THRESHOLD"

_HASH_CHUNK = 1 << 24
#: Writers of one kind of copy inside this process, for platforms without ``flock``.
_LOCAL_WRITERS: dict[tuple[Path, str], threading.Lock] = {}
_LOCAL_GUARD = threading.Lock()


def state_path(store_path: Path, kind: str) -> Path:
    """Where the state of a store's ``kind`` index lives."""
    return store_path.with_name(f"{store_path.name}.{kind}.json")


def part_path(store_path: Path, kind: str, generation: str, part: str) -> Path:
    """One file of a generation."""
    return store_path.with_name(f"{store_path.name}.{kind}.{generation}.{part}")


@contextlib.contextmanager
def sole_writer(store_path: Path, kind: str) -> Iterator[bool]:
    """Whether the caller may write the store's ``kind`` copy now, held for the block:
    False at once while another thread or process writes one (two writers would remove
    each other's half-written files; the copy being written serves both). An exclusive
    ``flock`` on ``<store>.<kind>-lock``, an empty file private to its owner, which
    nothing deletes (erasures remove the copies, not the lock)."""
    if fcntl is None:
        with _LOCAL_GUARD:
            local = _LOCAL_WRITERS.setdefault((store_path.resolve(), kind), threading.Lock())
        if not local.acquire(blocking=False):
            yield False
            return
        try:
            yield True
        finally:
            local.release()
        return
    try:
        descriptor = os.open(
            store_path.with_name(f"{store_path.name}.{kind}-lock"), os.O_RDWR | os.O_CREAT, 0o600
        )
    except OSError:
        # Where no lock can be made (a read-only directory), the writer finds out what
        # it can write itself, and says so, as without the lock.
        yield True
        return
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(descriptor)  # releases the lock


_P = ParamSpec("_P")
_Write = Callable[Concatenate[Any, _P], None]


def one_writer(kind: str) -> Callable[[_Write[_P]], _Write[_P]]:
    """Decorates a method that writes the store's ``kind`` copy (its object's ``_path``
    is the store's): the method runs as the sole writer (``sole_writer``), or not at
    all while another writes that copy."""

    def decorate(write: _Write[_P]) -> _Write[_P]:
        @functools.wraps(write)
        def guarded(self: Any, *args: _P.args, **kwargs: _P.kwargs) -> None:
            with sole_writer(self._path, kind) as sole:
                if sole:
                    write(self, *args, **kwargs)

        return guarded

    return decorate


def new_generation() -> str:
    return uuid.uuid4().hex[:12]


def remove_files(store_path: Path, kind: str) -> None:
    """Delete a store's ``kind`` files (the state first, so no half is ever trusted).
    Their names are gone on return; the blocks of large ones are freed on a background
    thread (``discard``)."""
    with contextlib.suppress(FileNotFoundError):
        state_path(store_path, kind).unlink()
    discard(sorted(store_path.parent.glob(f"{store_path.name}.{kind}.*")))


def discard(paths: list[Path]) -> None:
    """Unlink ``paths`` now, and leave the freeing of their blocks to a background
    thread: each is opened first, so the unlink only removes its name (no process can
    open it again, and the kernel frees an unlinked inode even after a crash), and the
    last descriptor is closed off the caller's thread. Freeing a file of gigabytes
    (dropping its cached pages, returning its blocks to the disk) takes a time that
    grows with it; an erasure must not wait for it. Where an open file cannot be
    unlinked (not POSIX), each is unlinked in place."""
    held: list[int] = []
    for path in paths:
        descriptor = None
        if os.name == "posix":
            with contextlib.suppress(OSError):
                descriptor = os.open(path, os.O_RDONLY)
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError:
            if descriptor is not None:
                os.close(descriptor)
            raise
        if descriptor is not None:
            held.append(descriptor)
    if held:
        threading.Thread(
            target=_close_all, args=(held,), name="anamnesis-discard", daemon=True
        ).start()


def _close_all(descriptors: list[int]) -> None:
    for descriptor in descriptors:
        with contextlib.suppress(OSError):
            os.close(descriptor)


def release_later(held: list[Any]) -> None:
    """Drop the objects in ``held`` (emptying it) on a background thread: for a mapping
    of a file an erasure unlinked, whose last reference frees the file's blocks."""
    if held:
        threading.Thread(target=held.clear, name="anamnesis-release", daemon=True).start()


def remove_if_possible(store_path: Path, kind: str) -> None:
    """``remove_files`` of a copy found stale, damaged or unnamed, where the directory
    may not be writable (nothing was saved). Left alone while another thread or process
    writes a copy (``sole_writer``): the files may be its own, half-written, and its
    state will name them. (An erasure removes the copies whoever writes:
    ``remove_files``.)"""
    with sole_writer(store_path, kind) as sole:
        if sole:
            with contextlib.suppress(OSError):
                remove_files(store_path, kind)


def private_file(path: Path) -> BinaryIO:
    """A new file open for writing, readable by its owner only."""
    return open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")


def finish(out: BinaryIO) -> None:
    """Flush a file written with ``private_file`` to disk."""
    out.flush()
    os.fsync(out.fileno())


def write_array(path: Path, array: np.ndarray, spare_rows: int = 0) -> None:
    """Write ``array`` as a ``.npy`` file that ``np.load(mmap_mode=...)`` maps, with
    ``spare_rows`` zeroed rows after it (a sparse tail: no disk used for them)."""
    array = np.ascontiguousarray(array)
    shape = (array.shape[0] + spare_rows, *array.shape[1:])
    header = {
        "descr": np.lib.format.dtype_to_descr(array.dtype),
        "fortran_order": False,
        "shape": shape,
    }
    with private_file(path) as out:
        np.lib.format.write_array_header_1_0(out, header)
        out.write(array.tobytes())
        if spare_rows:
            out.truncate(out.tell() + spare_rows * array[:1].nbytes)
        finish(out)


def write_json(path: Path, value: Any) -> None:
    with private_file(path) as out:
        out.write(json.dumps(value).encode("utf-8"))
        finish(out)


def write_state(store_path: Path, kind: str, state: dict[str, Any]) -> None:
    """Name a complete generation (atomically), then remove every other one."""
    target = state_path(store_path, kind)
    temporary = target.with_name(target.name + ".tmp")
    write_json(temporary, state)
    os.replace(temporary, target)
    keep = f"{store_path.name}.{kind}.{state['generation']}."
    for stale in store_path.parent.glob(f"{store_path.name}.{kind}.*"):
        if stale.name != target.name and not stale.name.startswith(keep):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()


def read_state(store_path: Path, kind: str) -> dict[str, Any] | None:
    """The state of a store's ``kind`` index; None when there is none. Raises
    ``ValueError`` or ``OSError`` when it cannot be read."""
    target = state_path(store_path, kind)
    if not target.exists():
        return None
    value = json.loads(target.read_text(encoding="utf-8"))
    if not isinstance(value, dict):
        raise ValueError("not a state")
    return value


def file_digest(path: Path, length: int | None = None) -> list:
    """``[length, digest]`` of the first ``length`` bytes of a file (all of it by
    default), read from disk rather than through a mapping, so that checking a mapped
    file does not make its pages resident in the process."""
    if length is None:
        length = path.stat().st_size
    with open(path, "rb") as file:
        return _digest(file, length)


def _digest(file: BinaryIO, length: int) -> list:
    hashed = hashlib.blake2b(digest_size=16)
    left = length
    while left > 0:
        chunk = file.read(min(_HASH_CHUNK, left))
        if not chunk:
            break
        hashed.update(chunk)
        left -= len(chunk)
    if left:
        return [length, "truncated"]
    return [length, hashed.hexdigest()]


def array_bytes(path: Path, rows: int) -> int:
    """The length of a ``.npy`` file's header and its first ``rows`` rows."""
    with open(path, "rb") as file:
        version = np.lib.format.read_magic(file)
        read = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read(file)
        start = file.tell()
    row = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
    return start + rows * row


class DigestCheck:
    """A check of a loaded copy's files against their digests, to run outside the
    store's lock (``__call__``): False when they differ, after removing them (unless a
    newer copy has replaced them meanwhile) with a warning that says ``damaged`` (what
    was damaged and what happens instead). The files are opened when the copy is
    loaded, so an erasure that removes them before the check reads them is not taken
    for damage: the check reads the bytes that were loaded."""

    def __init__(
        self, store_path: Path, kind: str, generation: str, digests: dict[str, list], damaged: str
    ) -> None:
        self._store_path, self._kind, self._generation = store_path, kind, generation
        self._digests, self._damaged = digests, damaged
        self._opened: dict[str, BinaryIO] = {}
        try:
            for part in digests:
                path = part_path(store_path, kind, generation, part)
                self._opened[part] = open(path, "rb")  # noqa: SIM115 - closed by close()
        except OSError:
            pass  # a part that cannot be opened fails the check

    def __call__(self) -> bool:
        try:
            match = len(self._opened) == len(self._digests) and all(
                _digest(self._opened[part], length) == [length, value]
                for part, (length, value) in self._digests.items()
            )
        except (OSError, ValueError, TypeError):
            match = False
        finally:
            self.close()
        if match:
            return True
        with contextlib.suppress(OSError, ValueError):
            state = read_state(self._store_path, self._kind)
            if state is None or state.get("generation") == self._generation:
                remove_if_possible(self._store_path, self._kind)
        warnings.warn(f"{self._damaged} (beside {self._store_path})", RuntimeWarning, stacklevel=2)
        return False

    def close(self) -> None:
        """Let the files go unchecked (the copy is no longer in use)."""
        opened, self._opened = self._opened, {}
        for file in opened.values():
            file.close()


def save_threshold(default: int) -> int:
    """``default``, or ``$ANAMNESIS_INDEX_FILES_THRESHOLD`` when set (for benchmarks
    that force the saved and mapped copies on for small stores)."""
    raw = os.environ.get(THRESHOLD_ENV)
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidInputError(
            f"{THRESHOLD_ENV}={raw!r} is not a number of rows; unset it or give an integer"
        ) from None


def save_wanted(
    persist: bool, rows: int, minimum: int, unsaved: int, resave: int, store_path: Path, kind: str
) -> bool:
    """Whether a copy should be written: saving is on, the index holds at least
    ``minimum`` rows, and the files lack ``resave`` of them or do not exist."""
    return (
        persist
        and rows >= minimum
        and (unsaved >= resave or not state_path(store_path, kind).exists())
    )


class SavedCopy:
    """What the copies of a store's indexes saved beside it share (``DenseFile``,
    ``LexicalFile``): the store's path, the digest check of the copy in use until it
    runs, the rows the copy lacks, and whether and from how many rows it is saved."""

    def __init__(self, path: Path, min_rows: int) -> None:
        self._path = path
        #: The check of the copy in use, until it runs (``checking``).
        self._unverified: DigestCheck | None = None
        #: Rows of the index in use that the saved copy lacks.
        self.unsaved = 0
        #: False for a store that cannot be written here: nothing is saved beside it.
        self.persist = True
        #: Rows from which the index is saved (``min_rows`` unless the environment says).
        self.min_rows = save_threshold(min_rows)

    def checking(self) -> Callable[[], bool] | None:
        """For a copy in use and not yet checked: a check of its files' digests to run
        outside the store's lock (it reads each file once), False when they do not
        match (the files are then removed, and the caller reads the store again). None
        when there is nothing to check. Call under the lock."""
        check, self._unverified = self._unverified, None
        return check

    def drop_check(self) -> None:
        """Let a pending check go (the store is closing, or loads another copy)."""
        check, self._unverified = self._unverified, None
        if check is not None:
            check.close()
