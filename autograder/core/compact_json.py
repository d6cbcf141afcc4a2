"""One compact JSON encoder, made once: what ``json.JSONEncoder(separators=(",", ":")).encode`` writes, without
the encoder that method makes again on every call (the frames of a sandbox call and the heads of their
values are encoded four times a call, each a small dict: the set-up was a third of each encoding).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from json import encoder as _json_encoder
from typing import Any


def _no_default(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def compact_encoder(*, allow_nan: bool) -> Callable[[Any], str]:
    """``value -> str``: ASCII-only JSON with no spaces, no circularity check (the callers encode trees they
    built); NaN and infinities as ``NaN``/``Infinity`` where ``allow_nan``, else ValueError."""
    make = getattr(_json_encoder, "c_make_encoder", None)
    if make is None:                  # a Python without the C accelerator: the standard encoder
        return json.JSONEncoder(separators=(",", ":"), allow_nan=allow_nan, check_circular=False).encode
    chunks = make(None, _no_default, _json_encoder.encode_basestring_ascii, None, ":", ",", False, False,
                  allow_nan)

    def encode(value: Any) -> str:
        return "".join(chunks(value, 0))

    return encode
