"""The plain-data format at the trust boundary: round trips, and every malformed blob is refused."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from autograder.inside import plain


def _blob(head: dict, body: bytes = b"") -> bytes:
    raw = json.dumps(head).encode()
    return len(raw).to_bytes(8, "little") + raw + body


def test_round_trip_keeps_types_dtypes_and_values():
    class Sub(torch.Tensor):
        pass

    value = (torch.arange(6, dtype=torch.float32).reshape(2, 3), np.array([1.5, -2.0]), 3, 2.5, True, None,
             {"w": torch.ones(2, dtype=torch.bool)}, torch.zeros(1).as_subclass(Sub))
    got = plain.roundtrip(value)
    items = got.items()
    assert items[0].tensor().dtype == torch.float32 and torch.equal(items[0].tensor(), value[0])
    assert items[1].ndarray().tolist() == [1.5, -2.0]
    assert [i.kind for i in items[2:6]] == ["int", "float", "bool", "none"]
    assert items[7].kind == "other" and "Sub" in items[7].describe()  # subclasses are described, not sent


@pytest.mark.parametrize("blob, fragment", [
    (b"", "empty"),
    ((10**6).to_bytes(8, "little") + b"{}", "truncated"),
    (_blob({"spec": {"t": "int", "v": 1}, "arrays": [["a0", "|O", [1], 0, 8]]}, b"\0" * 8), "forbidden dtype"),
    (_blob({"spec": {"t": "int", "v": 1}, "arrays": [["a0", "<f8", [4], 0, 32]]}, b"\0" * 8), "malformed array"),
    (_blob({"spec": {"t": "int", "v": 1}, "arrays": [["a0", "<f8", [1], -8, 8]]}, b"\0" * 8), "malformed array"),
    (_blob({"spec": {"t": "tensor", "k": "a9", "dtype": "torch.float32", "device": "cpu", "shape": [1]},
            "arrays": []}), "not sent"),
    (_blob({"spec": {"t": "float", "v": "1.0"}, "arrays": []}), "malformed float"),
    (_blob({"spec": {"t": "pickle"}, "arrays": []}), "unknown value type"),
    (b"\x05\0\0\0\0\0\0\0{bad}", "unreadable"),
    (_blob({"spec": {"t": "int", "v": 1}, "arrays": [["a0", "<f8", [1, -1], 0, 8]]}, b"\0" * 8), "malformed array"),
    (_blob({"spec": {"t": "int", "v": 1}, "arrays": [["a0", "<f8", [1.0], 0, 8]]}, b"\0" * 8), "malformed array"),
    (_blob({"spec": {"t": "int", "v": 1}, "arrays": [["a0", "<f8", [1], 1.5, 8]]}, b"\0" * 16), "malformed array"),
    (_blob({"spec": {"t": "int", "v": 1}, "arrays": [["a0", "<U4", [1], 0, 16]]}, b"\0" * 16), "forbidden dtype"),
    (_blob({"spec": {"t": "int", "v": 1}, "arrays": [["a0", ["<f8"], [1], 0, 8]]}, b"\0" * 8), "unreadable"),
])
def test_malformed_blobs_are_refused(blob, fragment):
    with pytest.raises(plain.PlainDataError, match=fragment):
        plain.decode(blob)


def test_oversized_output_is_refused_before_sending():
    with pytest.raises(plain.PlainDataError, match="too large"):
        plain.encode(torch.zeros(1024, 1024), max_bytes=2**20)


def test_arrays_of_any_byte_order_the_encoder_does_not_write_are_still_read_as_sent():
    # Not a dtype the encoder writes (its table of known codes): parsed and checked as any other text.
    raw = np.array([1.0, -2.0], dtype=">f8")
    value = plain.decode(_blob({"spec": {"t": "ndarray", "k": "a0", "dtype": ">f8", "shape": [2]},
                                "arrays": [["a0", ">f8", [2], 0, 16]]}, raw.tobytes()))
    assert value.ndarray().tolist() == [1.0, -2.0] and value.arrays["a0"].dtype == np.dtype(">f8")


def test_the_compact_encoder_writes_what_the_standard_one_writes():
    from autograder.core.compact_json import compact_encoder

    standard = json.JSONEncoder(separators=(",", ":"), allow_nan=True)
    fast = compact_encoder(allow_nan=True)
    for value in ({"spec": {"t": "float", "v": float("nan")}, "arrays": [["a0", "<f4", [2, 3], 0, 24]]},
                  {"v": [float("inf"), -float("inf"), -0.0, 1e300, 5e-324]}, {"s": "中文\x00\u2028\ud800"},
                  [True, False, None, 1, -(2**70)], "text", 3, {}, {1: 2}):
        assert fast(value) == standard.encode(value)
    strict = compact_encoder(allow_nan=False)
    with pytest.raises(ValueError):
        strict({"seconds": float("nan")})
    with pytest.raises(TypeError):
        fast({"x": object()})
    assert plain._HEAD({"a": 1}) == '{"a":1}'
