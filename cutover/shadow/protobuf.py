"""Protobuf in the Confluent wire format, decoded on Spark's executors with the PyPI protobuf runtime.

spark-protobuf is not served at the pyspark version (STACK.md), so each writer schema's
`.proto` text is compiled once on the driver by the protoc that grpcio-tools bundles into a
FileDescriptorSet; the executors build message classes from those bytes and turn each body
(after the message-index varints, `cutover.registry.wire`) into a row of the table's struct.
"""

from __future__ import annotations

import functools
import importlib.resources
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cutover.errors import DependencyMissing, Refused

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructType


@functools.lru_cache(maxsize=256)
def descriptor_set(proto_text: str) -> bytes:
    """The FileDescriptorSet of one .proto text (its imports of well-known types included)."""
    try:
        tools = importlib.resources.files("grpc_tools")
    except ModuleNotFoundError:
        raise DependencyMissing("decoding Protobuf needs protoc, which the Python package grpcio-tools bundles",
                                fix="pip install grpcio-tools (scripts/setup installs it)") from None
    with tempfile.TemporaryDirectory(prefix="cutover-proto-") as tmp:
        src = Path(tmp) / "schema.proto"
        src.write_text(proto_text)
        out = Path(tmp) / "schema.pb"
        run = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", f"-I{tools / '_proto'}",
                              f"--descriptor_set_out={out}", "--include_imports", str(src)],
                             capture_output=True, text=True, check=False)
        if run.returncode != 0:
            raise Refused(f"a Protobuf schema does not compile: {run.stderr.strip()[:300]}",
                          fix="check the schema registered for the topic")
        return out.read_bytes()


def _messages(fds: bytes) -> tuple[Any, Any]:
    """(pool, the last file's descriptor) of a FileDescriptorSet."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    files = descriptor_pb2.FileDescriptorSet.FromString(fds)
    pool = descriptor_pool.DescriptorPool()
    for f in files.file:
        pool.Add(f)
    return pool, pool.FindFileByName(files.file[-1].name)


def message_descriptor(fds: bytes, indexes: tuple[int, ...]) -> Any:
    """The message the indexes name: [i, j, ...] is the file's i-th message's j-th nested message..."""
    _pool, file = _messages(fds)
    desc = file.message_types_by_name[list(file.message_types_by_name)[indexes[0]]]
    for i in indexes[1:]:
        desc = desc.nested_types[i]
    return desc


def spark_type(desc: Any, depth: int = 0) -> DataType:
    from google.protobuf.descriptor import FieldDescriptor as FD
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        BooleanType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
    )

    def of(fd: Any) -> Any:
        if fd.type == FD.TYPE_MESSAGE:
            if fd.message_type.GetOptions().map_entry:
                k, v = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
                return MapType(of(k), of(v), True)
            return spark_type(fd.message_type, depth + 1) if depth < 10 else StringType()
        return {FD.TYPE_INT32: IntegerType(), FD.TYPE_SINT32: IntegerType(), FD.TYPE_SFIXED32: IntegerType(),
                FD.TYPE_UINT32: LongType(), FD.TYPE_FIXED32: LongType(), FD.TYPE_INT64: LongType(),
                FD.TYPE_SINT64: LongType(), FD.TYPE_SFIXED64: LongType(), FD.TYPE_UINT64: LongType(),
                FD.TYPE_FIXED64: LongType(), FD.TYPE_DOUBLE: DoubleType(), FD.TYPE_FLOAT: FloatType(),
                FD.TYPE_BOOL: BooleanType(), FD.TYPE_STRING: StringType(), FD.TYPE_BYTES: BinaryType(),
                FD.TYPE_ENUM: StringType()}[fd.type]

    fields = []
    for fd in desc.fields:
        kind = of(fd)
        repeated = _repeated(fd) and not isinstance(kind, MapType)
        fields.append(StructField(fd.name, ArrayType(kind, True) if repeated else kind, True))
    return StructType(fields)


def struct_of(proto_text: str) -> StructType:
    """The Spark struct of the first message of a .proto text (what a lone 0 index names)."""
    from pyspark.sql.types import StructType

    out = spark_type(message_descriptor(descriptor_set(proto_text), (0,)))
    assert isinstance(out, StructType)
    return out


def as_row(msg: Any) -> dict[str, Any]:
    """A message as the plain values of its struct (enums by name, unset messages null)."""
    from google.protobuf.descriptor import FieldDescriptor as FD

    out: dict[str, Any] = {}
    for fd in msg.DESCRIPTOR.fields:
        value = getattr(msg, fd.name)
        is_map = fd.type == FD.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry
        if is_map:
            vfd = fd.message_type.fields_by_name["value"]
            out[fd.name] = {k: _plain(vfd, v) for k, v in value.items()}
        elif _repeated(fd):
            out[fd.name] = [_plain(fd, v) for v in value]
        elif fd.type == FD.TYPE_MESSAGE:
            out[fd.name] = as_row(value) if msg.HasField(fd.name) else None
        else:
            out[fd.name] = _plain(fd, value)
    return out


def _repeated(fd: Any) -> bool:
    """protobuf 6+ names it is_repeated (7 dropped `label`); older runtimes only have the label."""
    from google.protobuf.descriptor import FieldDescriptor as FD

    flag = getattr(fd, "is_repeated", None)
    return bool(flag) if flag is not None else bool(fd.label == FD.LABEL_REPEATED)


def _plain(fd: Any, value: Any) -> Any:
    from google.protobuf.descriptor import FieldDescriptor as FD

    if fd.type == FD.TYPE_ENUM:
        named = fd.enum_type.values_by_number.get(value)
        return named.name if named is not None else str(value)
    if fd.type == FD.TYPE_MESSAGE:
        return as_row(value)
    return value


_classes: dict[tuple[bytes, tuple[int, ...]], Any] = {}


def parse(data: bytes | None, sets: dict[int, bytes], target: Any) -> Any:
    """One framed value to a row of `target` (None when it does not decode): runs on the executors."""
    from google.protobuf import message_factory

    from cutover.registry import wire

    if data is None:
        return None
    try:
        frame = wire.protobuf_frame(bytes(data))
        fds = sets.get(frame.schema_id)
        if fds is None:
            return None
        key = (fds, frame.indexes)
        cls = _classes.get(key)
        if cls is None:
            cls = _classes[key] = message_factory.GetMessageClass(message_descriptor(fds, frame.indexes))
        row = as_row(cls.FromString(bytes(data[frame.body_start:])))
    except Exception:  # a body that does not parse, indexes that name no message: not decodable
        return None
    names = {f.name for f in target.fields}
    return {k: v for k, v in row.items() if k in names}


def decode(col: str, texts: dict[int, str], target: StructType) -> Column:
    """The framed column decoded into `target` (null where a record does not decode)."""
    from pyspark.sql import functions as F

    sets = {i: descriptor_set(t) for i, t in texts.items()}
    return F.udf(lambda data: parse(data, sets, target), target)(F.col(col))
