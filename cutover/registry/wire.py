"""The Confluent wire format: a zero byte, a 4-byte big-endian schema id, then the body.

For Protobuf, the body starts with the message indexes: a zigzag varint count, then that many
zigzag varint indexes into the file's (nested) message types; a lone 0 means [0], the first
message. Pure functions over bytes, used by the audit on the driver and by the decoders on
Spark's executors.
"""

from __future__ import annotations

from dataclasses import dataclass

MAGIC = 0
HEADER = 5


@dataclass(frozen=True)
class Framed:
    """A value's frame: its schema id and where its body starts (after the Protobuf indexes, if any)."""

    schema_id: int
    body_start: int
    indexes: tuple[int, ...] = ()


class NotFramed(ValueError):
    """The bytes are not in the Confluent wire format; the message says why."""


def schema_id(data: bytes | None) -> int:
    """The schema id of a framed value; NotFramed when it is not framed."""
    if data is None:
        raise NotFramed("null (a tombstone): no schema id")
    if len(data) < HEADER:
        raise NotFramed(f"{len(data)} byte(s): shorter than the 5-byte header")
    if data[0] != MAGIC:
        raise NotFramed(f"first byte {data[0]:#04x}, not the magic byte 0x00")
    return int.from_bytes(data[1:HEADER], "big")


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A zigzag varint at `at`: (value, position after it)."""
    shift = result = 0
    while True:
        if at >= len(data):
            raise NotFramed("message indexes run past the end of the value")
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise NotFramed("a message index is not a valid varint")
    return (result >> 1) ^ -(result & 1), at


def protobuf_frame(data: bytes | None) -> Framed:
    """The frame of a Protobuf value: schema id, message indexes, body start."""
    sid = schema_id(data)
    assert data is not None
    count, at = _varint(data, HEADER)
    if count == 0:
        return Framed(sid, at, (0,))
    if count < 0 or count > 100:
        raise NotFramed(f"message index count {count} is not plausible")
    indexes = []
    for _ in range(count):
        index, at = _varint(data, at)
        indexes.append(index)
    return Framed(sid, at, tuple(indexes))


def frame(data: bytes | None, fmt: str) -> Framed:
    return protobuf_frame(data) if fmt == "protobuf" else Framed(schema_id(data), HEADER)


def zigzag(values: list[int]) -> bytes:
    """Message indexes as the Protobuf serializer writes them (a lone [0] as one 0 byte)."""
    if values == [0]:
        return b"\x00"
    out = bytearray()
    for v in [len(values), *values]:
        z = (v << 1) ^ (v >> 63)
        while True:
            byte = z & 0x7F
            z >>= 7
            if z:
                out.append(byte | 0x80)
            else:
                out.append(byte)
                break
    return bytes(out)
