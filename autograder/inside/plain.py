"""Plain data: the only thing that crosses the trust boundary.

A value is encoded as a JSON *spec* plus a table of NumPy arrays sent as raw bytes (dtype,
shape, offset and size in the JSON head; never pickle). The decoding side accepts exactly
``numpy.ndarray`` of bool/int/uint/float dtype and JSON scalars, never pickle,
never an object of the sender's choosing. The same encoding is used in-process
(self-check, validate) so every path sees identical data.

Spec nodes::

    {"t": "tensor", "k": KEY, "dtype": "torch.float32", "device": "cpu", "shape": [..]}
    {"t": "ndarray", "k": KEY, "dtype": "float64", "shape": [..]}
    {"t": "float" | "int" | "bool", "v": ..., "type": "float" | "numpy.float64" | ...}
    {"t": "none"} | {"t": "str", "v": ...}
    {"t": "tuple" | "list", "items": [...]} | {"t": "dict", "items": {key: ...}}
    {"t": "other", "type": "qualified.name"}        # anything else, described not sent
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from autograder.core.compact_json import compact_encoder
from autograder.core.text import line

ALLOWED_KINDS = "biuf"  # numpy dtype kinds accepted across the boundary
_DEVICE = re.compile(r"^(cpu|cuda|mps|xpu|meta)(:[0-9]{1,3})?$")
_TORCH_DTYPES = {
    "torch.float16": torch.float16, "torch.bfloat16": torch.bfloat16, "torch.float32": torch.float32,
    "torch.float64": torch.float64, "torch.int8": torch.int8, "torch.int16": torch.int16,
    "torch.int32": torch.int32, "torch.int64": torch.int64, "torch.uint8": torch.uint8,
    "torch.bool": torch.bool,
}


_TENSOR, _PARAMETER = torch.Tensor, torch.nn.Parameter
_HEAD = compact_encoder(allow_nan=True)     # encode()'s head
_DTYPE_NAMES = {dtype: name for name, dtype in _TORCH_DTYPES.items()}
#: The array dtypes an honest encoder writes (``arr.dtype.str``), each made once: decode looks them up
#: rather than parsing the text again (any other text is parsed and checked as before).
_DTYPES = {np.dtype(code).str: np.dtype(code) for code in
           ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "float16", "float32", "float64")}


class PlainDataError(ValueError):
    """Data that is not plain (wrong type, object array, oversized, malformed)."""


def _qualname(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}" if cls.__module__ != "builtins" else cls.__qualname__


#: The most values (list, tuple and dict items, each scalar or array counted once) one value may hold: far above
#: what a statement asks for (a sequence of a few thousand numbers), far below what would slow the JSON head.
MAX_NODES = 200_000


@dataclass
class Encoder:
    """Turns a Python value into (spec, arrays). Used on both sides of the boundary.

    Lists, tuples and dicts of any length cross it, nested up to 8 deep, up to :data:`MAX_NODES` values in all
    (a reference's answer standing in for a student's function is sent as any other value)."""

    max_bytes: float = float("inf")
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    total: int = 0
    max_nodes: int = MAX_NODES
    nodes: int = 0

    def _store(self, arr: np.ndarray) -> str:
        self.total += arr.nbytes
        if self.total > self.max_bytes:
            raise PlainDataError(f"output too large: more than {self.max_bytes / 2**20:.0f} MiB of tensor data")
        key = f"a{len(self.arrays)}"
        self.arrays[key] = arr
        return key

    def _count(self, items: int, kind: str) -> None:
        self.nodes += items
        if self.nodes > self.max_nodes:
            raise PlainDataError(f"output too large: more than {self.max_nodes} values in lists, tuples and dicts "
                                 f"(a {kind} of {items})")

    def spec(self, value: Any, depth: int = 0) -> dict[str, Any]:
        if depth > 8:
            return {"t": "other", "type": "nested too deep"}
        cls = type(value)
        if cls is _TENSOR or cls is _PARAMETER:
            # Exact type only: subclasses and __torch_function__ objects are described, not sent.
            return self._tensor_spec(value)
        if cls is np.ndarray:
            return self._array_spec(value)
        if cls is bool or cls is np.bool_:
            return {"t": "bool", "v": bool(value), "type": _qualname(value)}
        if cls is int or isinstance(value, np.integer):
            return _int_spec(value)
        if cls is float or isinstance(value, np.floating):
            return {"t": "float", "v": float(value), "type": _qualname(value)}
        if value is None:
            return {"t": "none"}
        if cls is str:
            return {"t": "str", "v": value[:200]}
        if cls is tuple or cls is list or cls is dict:
            return self._container_spec(value, depth)
        return {"t": "other", "type": _qualname(value)}

    def _array_spec(self, value: np.ndarray) -> dict[str, Any]:
        """A NumPy array's node: its data stored where its dtype may cross, else described."""
        if value.dtype.kind not in ALLOWED_KINDS:
            return {"t": "other", "type": f"numpy array of {value.dtype}"}
        return {"t": "ndarray", "k": self._store(np.ascontiguousarray(value)), "dtype": str(value.dtype),
                "shape": list(value.shape)}

    def _container_spec(self, value: Any, depth: int) -> dict[str, Any]:
        """A tuple's, a list's or a dict's node: its items', each counted; a dict with a key not a str described."""
        cls = type(value)
        if cls is tuple or cls is list:
            self._count(len(value), cls.__name__)
            return {"t": cls.__name__, "items": [self.spec(v, depth + 1) for v in value]}
        if not all(type(k) is str for k in value):
            return {"t": "other", "type": "dict"}
        self._count(len(value), "dict")
        return {"t": "dict", "items": {k: self.spec(v, depth + 1) for k, v in value.items()}}

    def _tensor_spec(self, value: Any) -> dict[str, Any]:
        t = value.detach() if value.requires_grad else value
        dtype = _DTYPE_NAMES.get(t.dtype)
        if dtype is None:
            return {"t": "other", "type": f"tensor of {t.dtype}"}
        nbytes = t.numel() * t.element_size()
        if nbytes > self.max_bytes:
            raise PlainDataError(
                f"output too large: a tensor of shape {tuple(t.shape)} ({nbytes / 2**20:.0f} MiB)")
        if t.is_cpu:
            device = "cpu"
        else:
            device = str(t.device)
            t = t.cpu()
        if dtype == "torch.bfloat16":
            t = t.float()
        arr = t.contiguous().numpy()
        return {"t": "tensor", "k": self._store(arr), "dtype": dtype, "device": device,
                "shape": list(value.shape)}


def _int_spec(value: Any) -> dict[str, Any]:
    """An int's node (a Python or a NumPy int): a float where it does not fit in 64 bits."""
    v = int(value)
    if abs(v) >= 2**63:
        return {"t": "float", "v": float(v), "type": "int (huge)"}
    return {"t": "int", "v": v, "type": _qualname(value)}


def encode(value: Any, max_bytes: float = float("inf")) -> bytes:
    """8-byte head length, JSON head {spec, arrays: [[key, dtype, shape, offset, nbytes]]}, raw array bytes."""
    enc = Encoder(max_bytes=max_bytes)
    return pack(enc, enc.spec(value))


def pack(enc: Encoder, spec: dict[str, Any]) -> bytes:
    """:func:`encode`'s bytes of ``spec``, made by ``enc`` (whose arrays it names)."""
    table: list[list[Any]] = []
    parts: list[bytes | memoryview] = [b"", b""]
    offset = 0
    for key, arr in enc.arrays.items():
        # The array's own buffer where it is one contiguous block (every array the Encoder stores is): joined
        # below, copied once.
        data = arr.data if arr.flags.c_contiguous else np.ascontiguousarray(arr).data
        nbytes = arr.nbytes
        table.append([key, arr.dtype.str, list(arr.shape), offset, nbytes])
        parts.append(data)
        offset += nbytes
    head = _HEAD({"spec": spec, "arrays": table}).encode()
    parts[0], parts[1] = len(head).to_bytes(8, "little"), head
    return b"".join(parts)


@dataclass(frozen=True)
class Value:
    """A decoded value on the trusted side: the spec plus the arrays it names."""

    spec: dict[str, Any]
    arrays: dict[str, np.ndarray]

    @property
    def kind(self) -> str:
        return self.spec["t"]

    def items(self) -> list[Value]:
        if self.kind not in ("tuple", "list"):
            raise PlainDataError(f"not a tuple: {self.describe()}")
        return [Value(s, self.arrays) for s in self.spec["items"]]

    def describe(self) -> str:
        s = self.spec
        t = s["t"]
        if t == "tensor":
            return f"Tensor{tuple(s['shape'])} {s['dtype'].removeprefix('torch.')}, {s['device']}"
        if t == "ndarray":
            return f"ndarray{tuple(s['shape'])} {s['dtype']}"
        if t in ("float", "int", "bool"):
            return f"{s.get('type', t)} {s['v']!r}"
        if t in ("tuple", "list"):
            return f"{t}[{len(s['items'])}]: (" + ", ".join(Value(i, self.arrays).describe() for i in s["items"]) + ")"
        if t == "dict":
            return "dict {" + ", ".join(f"{k}: {Value(v, self.arrays).describe()}" for k, v in s["items"].items()) + "}"
        if t == "none":
            return "None"
        if t == "str":
            return f"str {s['v']!r}"
        return f"<{s.get('type', '?')}>"

    def tensor(self) -> torch.Tensor:
        """The CPU tensor this node holds (with the sender's dtype); PlainDataError if none."""
        if self.kind != "tensor":
            raise PlainDataError(f"expected a torch.Tensor, got {self.describe()}")
        arr = self.arrays[self.spec["k"]]
        t = torch.from_numpy(arr.copy())
        want = _TORCH_DTYPES[self.spec["dtype"]]
        return t.to(want) if t.dtype != want else t

    def ndarray(self) -> np.ndarray:
        if self.kind != "ndarray":
            raise PlainDataError(f"expected a numpy.ndarray, got {self.describe()}")
        return self.arrays[self.spec["k"]].copy()

    def to_python(self) -> Any:
        """Rebuild the value as Python objects (tensors on the CPU, arrays, scalars, tuples)."""
        return _python(self.spec, self.arrays)


def _python(spec: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
    """:meth:`Value.to_python` of one node, read off its spec (no Value per node: a call's arguments are
    rebuilt in every worker call)."""
    t = spec["t"]
    if t == "tensor":
        x = torch.from_numpy(arrays[spec["k"]].copy())
        want = _TORCH_DTYPES[spec["dtype"]]
        return x.to(want) if x.dtype != want else x
    if t == "ndarray":
        return arrays[spec["k"]].copy()
    if t in ("float", "int", "bool", "str"):
        return spec["v"]
    if t == "none":
        return None
    if t in ("tuple", "list"):
        seq = [_python(s, arrays) for s in spec["items"]]
        return tuple(seq) if t == "tuple" else seq
    if t == "dict":
        return {k: _python(v, arrays) for k, v in spec["items"].items()}
    raise PlainDataError(f"cannot rebuild {Value(spec, arrays).describe()}")


def _check_array_spec(spec: dict[str, Any], arrays: dict[str, np.ndarray], t: str) -> None:
    """A tensor's or an array's description: its array sent, of the shape it says; a tensor's dtype and device
    ones torch knows."""
    key = spec.get("k")
    if key not in arrays:
        raise PlainDataError("value names an array that was not sent")
    arr = arrays[key]
    if t == "tensor" and spec.get("dtype") not in _TORCH_DTYPES:
        raise PlainDataError("unknown tensor dtype")
    if t == "tensor" and not (isinstance(spec.get("device"), str) and _DEVICE.match(spec["device"])):
        raise PlainDataError("tensor without a device torch knows")
    if list(arr.shape) != spec.get("shape"):
        raise PlainDataError("array shape does not match its description")


def _check_spec(spec: Any, arrays: dict[str, np.ndarray], depth: int = 0) -> None:
    """Validate an untrusted spec: known node types, arrays present, scalars of the right JSON type."""
    if depth > 10 or not isinstance(spec, dict) or not isinstance(spec.get("t"), str):
        raise PlainDataError("malformed value description")
    t = spec["t"]
    if t in ("tensor", "ndarray"):
        _check_array_spec(spec, arrays, t)
    elif t in ("float", "int", "bool"):
        _check_scalar_spec(spec, t)
    elif t in ("tuple", "list", "dict"):
        _check_items_spec(spec, arrays, t, depth)
    elif t not in ("none", "str", "other"):
        raise PlainDataError(f"unknown value type {t!r}")


def _check_scalar_spec(spec: dict[str, Any], t: str) -> None:
    """A float's, an int's or a bool's description: its value of that JSON type."""
    want = {"float": float, "int": int, "bool": bool}[t]
    if type(spec.get("v")) is not want:
        raise PlainDataError(f"malformed {t}")


def _check_items_spec(spec: dict[str, Any], arrays: dict[str, np.ndarray], t: str, depth: int) -> None:
    """A tuple's, a list's or a dict's description: its items a list (a dict for a dict), each item valid."""
    items = spec.get("items")
    if t == "dict":
        if not isinstance(items, dict):
            raise PlainDataError("malformed dict")
        items = items.values()
    elif not isinstance(items, list):
        raise PlainDataError("malformed sequence")
    for s in items:
        _check_spec(s, arrays, depth + 1)


def decode(blob: bytes) -> Value:
    """Decode an untrusted blob from :func:`encode`; raises PlainDataError on anything else."""
    if not isinstance(blob, (bytes, bytearray)) or len(blob) < 8:
        raise PlainDataError("empty or truncated data")
    n = int.from_bytes(blob[:8], "little")
    if n > len(blob) - 8:
        raise PlainDataError("truncated data")
    body = memoryview(blob)[8 + n:]
    size = len(body)
    arrays = {}
    try:
        head = json.loads(blob[8:8 + n])
        spec, table = head["spec"], head["arrays"]
        for key, dtype_str, shape, offset, nbytes in table:
            arrays[key] = _read_array(body, size, dtype_str, shape, offset, nbytes)
    except PlainDataError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a forged blob provokes is one PlainDataError
        raise PlainDataError(f"unreadable data ({type(exc).__name__})") from None
    _check_spec(spec, arrays)
    return Value(_clean_spec(spec), arrays)


def _read_array(body: memoryview, size: int, dtype_str: Any, shape: Any, offset: Any, nbytes: Any) -> np.ndarray:
    """A copy of one array of an untrusted table's row, its dtype allowed and its bytes inside the body."""
    dtype = _DTYPES.get(dtype_str) if type(dtype_str) is str else None
    if dtype is None:
        dtype = np.dtype(dtype_str)
        if dtype.kind not in ALLOWED_KINDS or dtype.hasobject:
            raise PlainDataError("array of a forbidden dtype")
    count = 1
    for d in shape:
        if type(d) is not int or d < 0:
            raise PlainDataError("malformed array")
        count *= d
    if count * dtype.itemsize != nbytes or type(offset) is not int or offset < 0 or offset + nbytes > size:
        raise PlainDataError("malformed array")
    return np.frombuffer(body, dtype=dtype, count=count, offset=offset).reshape(shape).copy()


def decode_trusted(blob: bytes) -> Value:
    """:func:`encode`'s bytes from the trusted side, decoded in a sandbox worker: the arguments of a call.

    The worker believes what the grader sends, so the checks :func:`decode` makes of untrusted data (node
    types, text through the gate, array bounds) are left out, and arrays are views of ``blob`` (read-only;
    :meth:`Value.tensor` copies). Never use it for bytes a worker or a student wrote.
    """
    n = int.from_bytes(blob[:8], "little")
    body = memoryview(blob)[8 + n:]
    head = json.loads(blob[8:8 + n])
    arrays = {key: np.frombuffer(body, dtype=_DTYPES.get(dtype) or np.dtype(dtype), count=math.prod(shape),
                                 offset=offset).reshape(shape)
              for key, dtype, shape, offset, _nbytes in head["arrays"]}
    return Value(head["spec"], arrays)


#: Bounds on the text a value description may carry across (type names, strings, dict keys):
#: a class named after its input tensors must not carry them into a student's feedback.
TYPE_CHARS, STR_CHARS, KEY_CHARS = 80, 200, 64


_CLEANED_FIELDS = (("type", TYPE_CHARS), ("device", 32), ("dtype", 32))


def _clean_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with every text the sender chose through the text gate, each bounded."""
    out = dict(spec)
    for field_name, limit in _CLEANED_FIELDS:
        value = out.get(field_name, out)
        if value is not out:
            out[field_name] = line(value, limit)
    t = out["t"]
    if t == "str":
        out["v"] = line(out.get("v"), STR_CHARS)
    elif t in ("tuple", "list"):
        out["items"] = [_clean_spec(s) for s in out["items"]]
    elif t == "dict":
        out["items"] = {line(k, KEY_CHARS): _clean_spec(v) for k, v in out["items"].items()}
    return out


def roundtrip(value: Any, max_bytes: float = float("inf")) -> Value:
    """Encode then decode: what the trusted side would see of ``value``."""
    return decode(encode(value, max_bytes=max_bytes))


def fingerprint(value: Any) -> str:
    """A stable hash of a value's plain data (dtype, shape and bytes of every array)."""
    enc = Encoder()
    spec = enc.spec(value)
    h = hashlib.sha256(json.dumps(spec, sort_keys=True, allow_nan=True).encode())
    for key in sorted(enc.arrays, key=lambda k: int(k[1:])):
        arr = enc.arrays[key]
        h.update(str(arr.dtype).encode() + str(arr.shape).encode())
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()[:20]


def finite(x: float) -> bool:
    return math.isfinite(x)
