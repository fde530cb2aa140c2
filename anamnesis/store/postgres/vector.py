"""numpy <-> pgvector adapters for psycopg, in pgvector's binary wire format.

The format (pgvector's ``vector_send``/``vector_recv``) is a big-endian uint16
dimension, a uint16 that is always zero, then the float32 values big-endian. Using it
avoids the text form, which is several times larger on the wire and costs a float parse
per value.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
from psycopg import Connection
from psycopg.adapt import Buffer, Dumper, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo

_HEADER = struct.Struct(">HH")


class _VectorDumper(Dumper):
    """Sends a 1-d numpy array as a pgvector ``vector``."""

    format = Format.BINARY

    def dump(self, obj: Any) -> Buffer:
        values = np.asarray(obj, dtype=">f4")
        if values.ndim != 1:
            raise ValueError(f"a vector must be 1-d, got shape {values.shape}")
        return _HEADER.pack(values.size, 0) + values.tobytes()


class _VectorBinaryLoader(Loader):
    """Reads a pgvector ``vector`` (binary) as a float32 numpy array."""

    format = Format.BINARY

    def load(self, data: Buffer) -> np.ndarray:
        raw = bytes(data)
        dim, _ = _HEADER.unpack_from(raw)
        return np.frombuffer(raw, dtype=">f4", count=dim, offset=_HEADER.size).astype(np.float32)


class _VectorTextLoader(Loader):
    """Reads a pgvector ``vector`` in text form (``[1,2,3]``) as a float32 numpy array."""

    format = Format.TEXT

    def load(self, data: Buffer) -> np.ndarray:
        text = bytes(data).decode("ascii").strip("[]")
        return np.array(text.split(",") if text else [], dtype=np.float32)


def register_vector(conn: Connection[Any]) -> bool:
    """Teach this connection the ``vector`` type; False if the extension is not installed.

    After this, numpy arrays passed as query parameters are sent as vectors, and vector
    columns come back as float32 arrays.
    """
    info = TypeInfo.fetch(conn, "vector")
    if info is None:
        return False
    info.register(conn)
    dumper = type("VectorDumper", (_VectorDumper,), {"oid": info.oid})
    conn.adapters.register_dumper(np.ndarray, dumper)
    conn.adapters.register_loader(info.oid, _VectorBinaryLoader)
    conn.adapters.register_loader(info.oid, _VectorTextLoader)
    return True
