"""connect readers without a worker: offsets compared as JSON values whatever their key order, and every
difference named by connector and partition."""

from __future__ import annotations

from cutover.readers import connect


def test_offsets_compare_as_json_values_and_each_difference_is_named() -> None:
    rest = connect._rest_offsets([{"partition": {"filename": "/a", "x": 1}, "offset": {"position": 10}},
                                  {"partition": {"filename": "/b"}, "offset": {"position": 4}}])
    moved = {connect._canonical({"x": 1, "filename": "/a"}): connect._canonical({"position": 10}),
             connect._canonical({"filename": "/c"}): connect._canonical({"position": 1})}
    assert connect._differences("files", moved, moved, "on the new worker") == []
    said = connect._differences("files", moved, rest, "on the new worker")
    assert said == ['connector files partition {"filename":"/b"}: none moved, {"position":4} on the new worker',
                    'connector files partition {"filename":"/c"}: {"position":1} moved, none on the new worker']
