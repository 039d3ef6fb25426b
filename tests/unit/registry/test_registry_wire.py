"""The Confluent wire format and the Avro reader schema: pure logic over bytes and schemas."""

from __future__ import annotations

import json

import pytest

from cutover.registry import wire
from cutover.registry.client import Schema, safe_url
from cutover.shadow.framed import inline_references, reader_schema


def test_a_framed_value_gives_its_id_and_anything_else_says_why_not() -> None:
    assert wire.schema_id(b"\x00\x00\x00\x01\x2c body") == 300
    for data, why in ((None, "tombstone"), (b"\x00\x01", "shorter"), (b"{\"a\": 1}", "magic")):
        with pytest.raises(wire.NotFramed, match=why):
            wire.schema_id(data)


@pytest.mark.parametrize("indexes", [[0], [1], [0, 2], [3, 1, 4]])
def test_protobuf_message_indexes_round_trip(indexes: list[int]) -> None:
    data = b"\x00\x00\x00\x00\x07" + wire.zigzag(indexes) + b"BODY"
    framed = wire.protobuf_frame(data)
    assert (framed.schema_id, framed.indexes, data[framed.body_start:]) == (7, tuple(indexes), b"BODY")


def test_a_lone_zero_index_is_the_first_message() -> None:
    assert wire.zigzag([0]) == b"\x00"
    assert wire.protobuf_frame(b"\x00\x00\x00\x00\x01\x00X").indexes == (0,)


def test_the_reader_schema_reads_every_version_with_defaults() -> None:
    v1 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"},
                                                     {"name": "b", "type": ["null", "string"], "default": None}]}
    v2 = {**v1, "fields": [v1["fields"][0], {"name": "c", "type": "string", "default": "x"}]}
    v3 = {**v1, "fields": [v1["fields"][0], {"name": "d", "type": "int"}]}
    reader = reader_schema([v1, v2, v3])
    fields = {f["name"]: f for f in reader["fields"]}
    assert list(fields) == ["a", "b", "c", "d"]
    assert fields["a"] == {"name": "a", "type": "long"}  # in every version: as written
    assert fields["c"]["default"] == "x"  # its own default
    assert fields["d"] == {"name": "d", "type": ["null", "int"], "default": None}  # made optional
    as_null = {f["name"]: f for f in reader_schema([v1, v2, v3], "null")["fields"]}
    assert as_null["c"] == {"name": "c", "type": ["null", "string"], "default": None}  # as a writer-schema reader
    assert as_null["a"] == fields["a"]


def test_references_are_defined_in_place_once() -> None:
    addr = {"type": "record", "name": "Addr", "namespace": "shop", "fields": [{"name": "city", "type": "string"}]}
    person = {"type": "record", "name": "Person", "namespace": "shop", "fields": [
        {"name": "home", "type": "shop.Addr"}, {"name": "work", "type": ["null", "shop.Addr"]}]}
    out = inline_references(json.dumps(person), {"shop.Addr": addr})
    assert out["fields"][0]["type"] == addr
    assert out["fields"][1]["type"] == ["null", "shop.Addr"]  # defined once, then referenced by name


def test_schemas_compare_in_a_canonical_form_and_urls_lose_their_credentials() -> None:
    a = Schema('{"type": "record", "name": "R", "fields": []}')
    b = Schema('{"fields":[],"name":"R","type":"record"}')
    assert a.canonical() == b.canonical()
    assert Schema("syntax = 'proto3';  message M {}", "PROTOBUF").canonical() != a.canonical()
    assert safe_url("https://user:pw@reg.example:8081/apis/ccompat/v7?x=1") == "https://reg.example:8081/apis/ccompat/v7"
