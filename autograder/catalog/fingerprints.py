"""Known-mistake fingerprints: naming a mistake in self-check without shipping its code.

The student bundle may hold neither the reference solutions nor the known
mistakes (either would give the answer away), yet self-check should say "looks
like the 1/sqrt(d) scale is missing". Public inputs are seeded (the public seed
is fixed), so the instructor's build can run every public check once, record each call it makes into the student's
function, and store what every known mistake *returns* on those arguments.
Self-check looks the failing call up by its *site* (which check, which of its
calls; see ``probes.Request.site``) and compares the student's output with the
stored outputs within the course's tolerances; a mistake stored for one of the
student's other calls whose output there the student's does not match is not named
(the live diagnoser's evidence, :class:`autograder.catalog.runners.LiveDiagnoser`).

A call is keyed by its site and the structure of its arguments (dtypes, shapes,
exact ints and strings), never by the bits of a float: the same seeded call gives
other bits on another CPU (torch's float32 ``randn`` and matmul kernels differ by
vector unit, even by memory alignment), and a lookup keyed on them would miss
there. For the same reason the stored values are this machine's: the file is a
build output (``autograder build`` writes it and the student bundle carries it),
never committed; ``build --check`` judges only what is deterministic.

Requests are recorded along the reference's path through the checks and along
each mistake's path (a check stops at its first failure, and later inputs may
depend on earlier outputs), so the call a student with that mistake fails on is
the call that was recorded; a site reached with different arguments on
different paths keeps the candidates of each.

File format (``autograder/data/fingerprints.json``, sorted keys)::

    {"format": 2,
     "exercises": {"2.4": {
         "mistakes": {"no-scale": {"zh": "...", "en": "..."}},
         "requests": {REQUEST_KEY: [["no-scale", VALUE_KEY], ...]},   # catalog order
         "values": {VALUE_KEY: {"spec": PLAIN_SPEC,
                                "arrays": {"a0": {"dtype": "float64", "stored": "<f4", "shape": [7, 8, 3],
                                                  "idx": "0,3,...", "b64": "..."}}}}}}}

Arrays are raw little-endian bytes in base64 (``np.savez`` would stamp zip
times into the file). An array of more than :data:`SAMPLE` elements keeps only
those at ``idx`` (flat indices): where the mistake departs most from the
reference, then evenly spread; the student's output is compared at the same
places, and its full shape must match. Floating elements are stored as float32
when that loses less than the diagnosis tolerance (``values_match`` never
compares tighter than rtol 1e-6). A mistake whose output equals the
reference's on a call is not stored for that call: it cannot explain a failure
there; nor is one whose output there depends on the state of torch's global
generator (an unseeded draw). :func:`autograder.authoring.fingerprints.verify_fingerprints` proves that nothing the live
diagnoser would name is lost.

This module is the student's side (it ships in the bundle): the format, reading the file and naming a
mistake from it. Building the file needs the references and the mistakes, and lives on the instructor's
side, in :mod:`autograder.authoring.fingerprints`.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from autograder.inside import plain
from autograder.catalog import (in_process_runner, Mistake, Msg, values_match)
from autograder.catalog.comparison import same_kinds
from autograder.inside.probes import Request

if TYPE_CHECKING:
    from autograder.course.config import Course

FORMAT = 2
#: The fingerprints of a course, beside its course.yml: where a student bundle carries them
#: (``autograder/data/``, the packaged course's folder), else the instructor's build output under dist/.
FINGERPRINTS_NAME = "fingerprints.json"
BUILT_FINGERPRINTS = f"dist/{FINGERPRINTS_NAME}"
#: Largest relative error tolerated when a float64 array is stored as float32.
F32_RTOL, F32_ATOL = 1e-7, 1e-12


# -- request keys and stored values ------------------------------------------------
def request_key(request: Request) -> str:
    """What identifies a call on every machine: its probe, its site and its arguments' structure.

    A request without a site (made outside a check) is keyed by its arguments' exact data.
    """
    if not request.site:
        return plain.fingerprint((request.probe, request.args, request.kwargs))
    shape = [request.probe, request.site, _structure(plain.Encoder().spec(request.args)),
             _structure(plain.Encoder().spec(request.kwargs))]
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:20]


def _structure(spec: Any) -> Any:
    """A plain spec without what may differ between machines: float values and devices."""
    if isinstance(spec, dict):
        drop = {"device"} | ({"v"} if spec.get("t") == "float" else set())
        return {k: _structure(v) for k, v in spec.items() if k not in drop}
    if isinstance(spec, list):
        return [_structure(v) for v in spec]
    return spec


def _unpack_array(rec: dict[str, Any]) -> tuple[np.ndarray, np.ndarray | None]:
    """(stored elements, their flat indices or None when the array is stored whole)."""
    raw = base64.b64decode(rec["b64"])
    values = np.frombuffer(raw, dtype=np.dtype(rec["stored"])).astype(np.dtype(rec["dtype"]))
    if "idx" in rec:
        return values, np.array([int(i) for i in rec["idx"].split(",")], dtype=np.int64)
    return values.reshape(rec["shape"]), None


def array_nodes(spec: Any) -> list[dict[str, Any]]:
    """The tensor/ndarray nodes of a spec, in traversal order (dict keys sorted: the file's JSON sorts them)."""
    if not isinstance(spec, dict):
        return []
    t = spec.get("t")
    if t in ("tensor", "ndarray"):
        return [spec]
    if t in ("tuple", "list"):
        return [n for s in spec.get("items", []) for n in array_nodes(s)]
    if t == "dict":
        items = spec.get("items", {})
        return [n for k in sorted(items) for n in array_nodes(items[k])]
    return []


@dataclass(frozen=True)
class Stored:
    """A stored output: the spec, and per array its kept elements and their flat indices."""

    spec: dict[str, Any]
    arrays: dict[str, tuple[np.ndarray, np.ndarray | None]]
    shapes: dict[str, list[int]]


def unpack_value(data: dict[str, Any]) -> Stored:
    arrays = {k: _unpack_array(r) for k, r in data["arrays"].items()}
    return Stored(data["spec"], arrays, {k: list(r["shape"]) for k, r in data["arrays"].items()})


def stored_matches(got: plain.Value, stored: Stored, tolerances: Any) -> bool:
    """values_match on the elements stored: same structure, same full shapes, close kept elements."""
    if all(idx is None for _, idx in stored.arrays.values()):
        whole = {k: values for k, (values, _) in stored.arrays.items()}
        return values_match(got, plain.Value(stored.spec, whole), tolerances)
    mine, theirs = array_nodes(got.spec), array_nodes(stored.spec)
    if len(mine) != len(theirs):
        return False
    got_arrays: dict[str, np.ndarray] = {}
    kept_arrays: dict[str, np.ndarray] = {}
    for m, t in zip(mine, theirs):
        arr = got.arrays.get(m["k"])
        if arr is None or list(arr.shape) != stored.shapes.get(t["k"]):
            return False
        values, idx = stored.arrays[t["k"]]
        got_arrays[m["k"]] = arr.reshape(-1)[idx] if idx is not None else arr
        kept_arrays[t["k"]] = values
    return values_match(plain.Value(_flat_spec(got.spec, got_arrays), got_arrays),
                        plain.Value(_flat_spec(stored.spec, kept_arrays), kept_arrays), tolerances)


def _flat_spec(spec: Any, arrays: dict[str, np.ndarray]) -> Any:
    """The spec with every array node's shape set to its (possibly sampled) array's shape."""
    if not isinstance(spec, dict):
        return spec
    t = spec.get("t")
    if t in ("tensor", "ndarray"):
        return {**spec, "shape": list(arrays[spec["k"]].shape)}
    if t in ("tuple", "list"):
        return {**spec, "items": [_flat_spec(s, arrays) for s in spec["items"]]}
    if t == "dict":
        return {**spec, "items": {k: _flat_spec(s, arrays) for k, s in spec["items"].items()}}
    return spec


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=True)


#: In-process runner handing the function copies of its arguments (self-check, verification).
copying_runner = in_process_runner


def dumps(data: dict[str, Any]) -> str:
    """The file's text: sorted keys, no spaces, UTF-8 (same bytes for the same data)."""
    return canonical_json(data) + "\n"


# -- reading (student side: no solutions, no mistakes) -------------------------------
def fingerprints_file(course: Course | None = None) -> Path:
    """$AUTOGRADER_FINGERPRINTS (tests, a kernel pointed elsewhere), else the course's own: beside its
    course.yml (a student bundle's) or its build output (``dist/fingerprints.json``)."""
    override = os.environ.get("AUTOGRADER_FINGERPRINTS")
    if override:
        return Path(override)
    if course is None:
        from autograder.course.config import load_course  # noqa: PLC0415 - loads pydantic and yaml (course.yml)

        course = load_course()
    beside = course.root / FINGERPRINTS_NAME
    return beside if beside.is_file() else course.root / BUILT_FINGERPRINTS


def load_fingerprints(path: str | Path | None = None, course: Course | None = None) -> dict[str, Any]:
    """The stored fingerprints, or an empty set when the file is missing or unreadable.

    Self-check still works without them; it just cannot name mistakes.
    """
    file = Path(path) if path is not None else fingerprints_file(course)
    try:
        stat = file.stat()
    except OSError:
        return {"format": FORMAT, "exercises": {}}
    return _load(str(file.resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _load(file: str, _mtime: int, _size: int) -> dict[str, Any]:
    try:
        data = json.loads(Path(file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"format": FORMAT, "exercises": {}}
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("exercises"), dict):
        return {"format": FORMAT, "exercises": {}}
    return data


def _not_shipped(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("the code of a known mistake is not shipped with self-check")


class FingerprintDiagnoser:
    """Diagnoser (see autograder.catalog) over stored outputs: names a mistake without its code."""

    def __init__(self, tolerances: Any, fingerprints: dict[str, Any] | None = None, course: Course | None = None):
        self.tolerances = tolerances
        self.data = fingerprints if fingerprints is not None else load_fingerprints(course=course)
        self._values: dict[tuple[str, str], Stored] = {}

    def __call__(self, exercise_id: str, request: Request, got: plain.Value, *,
                 reference: Callable[..., Any] | None = None,
                 evidence: Sequence[tuple[Request, plain.Value]] = ()) -> Mistake | None:
        """As the live diagnoser names a mistake, from what is stored: only mistakes whose output departs from the
        reference's on this call are stored for it (``reference`` is not needed, and never shipped), and one that
        a call of ``evidence`` contradicts is not named (see :meth:`_consistent`)."""
        try:
            entry = self.data["exercises"][exercise_id]
            candidates = list(entry["requests"].get(request_key(request), []))
        except (KeyError, TypeError, AttributeError):
            return None
        loose = None
        for candidate in candidates:
            try:
                name, vkey = candidate
                stored = self._value(exercise_id, entry, vkey)
                if stored_matches(got, stored, self.tolerances) and self._consistent(exercise_id, entry, name,
                                                                                     evidence):
                    msg = entry.get("mistakes", {}).get(name, {})
                    found = Mistake(exercise_id, name, Msg(msg.get("zh", name), msg.get("en", name)), _not_shipped)
                    # As the live diagnoser: the same kinds and dtypes first, then values alone.
                    if same_kinds(got.spec, stored.spec):
                        return found
                    loose = loose or found
            except Exception:  # noqa: BLE001 - a damaged entry must not break self-check
                continue
        return loose

    def _consistent(self, exercise_id: str, entry: dict[str, Any], name: str,
                    evidence: Sequence[tuple[Request, plain.Value]]) -> bool:
        """No call of ``evidence`` contradicts mistake ``name``: where its output was stored for a call (it departs
        from the reference's there), the student's output matches one stored for it."""
        for request, seen in evidence:
            stored = [vkey for n, vkey in entry["requests"].get(request_key(request), []) if n == name]
            if stored and not any(stored_matches(seen, self._value(exercise_id, entry, vkey), self.tolerances)
                                  for vkey in stored):
                return False
        return True

    def _value(self, exercise_id: str, entry: dict[str, Any], vkey: str) -> Stored:
        cached = self._values.get((exercise_id, vkey))
        if cached is None:
            cached = unpack_value(entry["values"][vkey])
            self._values[(exercise_id, vkey)] = cached
        return cached
