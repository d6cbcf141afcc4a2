"""Building the self-check data (``dist/fingerprints.json``, see :mod:`autograder.catalog.fingerprints` for
the format and the student's side): the public checks run over the references and every known mistake on
the instructor's machine, and what each mistake returns where it departs from the reference is stored.
Needs solutions/ and each assignment's mistakes.py: never shipped.
"""
from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from autograder import catalog as C
from autograder.inside import plain
from autograder.core.atomic import atomic_write_text
from autograder.catalog import (
    PUBLIC_SEED,
    Audience,
    Mistake,
    checks_for,
    copied,
    load_catalog,
    run_exercise,
    values_match,
)
from autograder.catalog.comparison import same_kinds
from autograder.catalog.runners import Outputs
from autograder.catalog.fingerprints import (
    F32_ATOL,
    F32_RTOL,
    FORMAT,
    FingerprintDiagnoser,
    array_nodes,
    canonical_json,
    copying_runner,
    dumps,
    request_key,
)
from autograder.course.config import Course, load_course
from autograder.core.errors import BuildError
from autograder.grading.references import MissingReference, reference
from autograder.inside.probes import Reply, Request, execute


#: Elements kept per stored array (all of a smaller one), of which up to SAMPLE_DEPARTURES
#: where the mistake departs most from the reference.
SAMPLE, SAMPLE_DEPARTURES = 32, 16

def _pack_array(arr: np.ndarray, ref: np.ndarray | None = None) -> dict[str, Any]:
    """One array as JSON: every element when small, else a sample (see :data:`SAMPLE`)."""
    arr = np.asarray(arr)       # (not ascontiguousarray: it makes a 0-d array 1-d)
    rec: dict[str, Any] = {"dtype": str(arr.dtype), "shape": list(arr.shape)}
    flat = arr.reshape(-1)
    if flat.size > SAMPLE:
        idx = _sample_indices(flat, None if ref is None or ref.shape != arr.shape else ref.reshape(-1))
        rec["idx"] = ",".join(str(int(i)) for i in idx)     # one string: stays one line in indented JSON
        flat = flat[idx]
    stored = flat.dtype.newbyteorder("<")
    if flat.dtype.kind == "f" and flat.dtype.itemsize > 4:
        with np.errstate(over="ignore", invalid="ignore"):
            back = flat.astype(np.float32).astype(flat.dtype)
            finite = np.isfinite(flat)
            same_class = np.array_equal(np.isnan(flat), np.isnan(back)) and np.array_equal(finite, np.isfinite(back))
            err = np.abs(back[finite] - flat[finite])
            if same_class and bool(np.all(err <= F32_RTOL * np.abs(flat[finite]) + F32_ATOL)):
                stored = np.dtype("<f4")
    rec["stored"] = stored.str
    rec["b64"] = base64.b64encode(flat.astype(stored, copy=False).tobytes()).decode("ascii")
    return rec

def _sample_indices(flat: np.ndarray, ref: np.ndarray | None) -> np.ndarray:
    """Flat indices to keep: where the mistake departs most from the reference, then evenly spread.

    The departures are what tell this mistake from a correct answer and from the
    other mistakes; the spread ones pin the rest of the output.
    """
    chosen: list[int] = []
    if ref is not None:
        a, r = flat.astype(np.float64), ref.astype(np.float64)
        with np.errstate(invalid="ignore"):
            same = (a == r) | (np.isnan(a) & np.isnan(r))
            diff = np.where(same, 0.0, np.nan_to_num(np.abs(a - r), nan=np.inf))
        order = np.argsort(-diff, kind="stable")[:SAMPLE_DEPARTURES]
        chosen = [int(i) for i in order if diff[i] > 0]
    taken = set(chosen)
    for i in np.linspace(0, flat.size - 1, SAMPLE).round().astype(np.int64):
        if len(taken) >= SAMPLE:
            break
        taken.add(int(i))
    return np.array(sorted(taken), dtype=np.int64)

def pack_value(value: plain.Value, reference: plain.Value | None = None) -> dict[str, Any]:
    """A plain value as JSON-safe data with deterministic bytes (large arrays sampled)."""
    refs: dict[str, np.ndarray] = {}
    if reference is not None:
        mine, theirs = array_nodes(value.spec), array_nodes(reference.spec)
        if len(mine) == len(theirs):
            refs = {m["k"]: reference.arrays[r["k"]] for m, r in zip(mine, theirs)}
    return {"spec": value.spec,
            "arrays": {k: _pack_array(a, refs.get(k)) for k, a in sorted(value.arrays.items())}}

def _value_key(packed: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(packed).encode()).hexdigest()[:16]

# -- building (instructor side: needs solutions/ and the mistakes.py files) ----------
def _recording_runner(namespace: dict[str, Any], seen: dict[str, dict[str, Request]]) -> Any:
    """In-process runner that remembers every request, by key and then by exact data
    (forbidden calls are not policed here)."""

    def run(request: Request) -> Reply:
        # A snapshot: a check may reuse and edit its input tensors after the call.
        snapshot = copied(request)
        exact = plain.fingerprint((snapshot.probe, snapshot.args, snapshot.kwargs))
        seen.setdefault(request_key(snapshot), {}).setdefault(exact, snapshot)
        return execute(namespace, copied(snapshot))

    return run

def _reference(course: Course, exercise_id: str) -> Any:
    try:
        return reference(course, exercise_id)
    except MissingReference as exc:
        raise BuildError(exc.message) from None

def build_fingerprints(course: Course | None = None, exercises: Iterable[str] | None = None) -> dict[str, Any]:
    """Run the public checks over the references and the known mistakes; store the mistakes' outputs.

    Deterministic: the public seed is fixed, torch runs on one thread while
    building, and every dict is written with sorted keys.
    """
    course = course or load_course()
    load_catalog(course, hidden=False, mistakes=True)
    wanted = set(exercises) if exercises is not None else None
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out: dict[str, Any] = {}
        for ex in course.exercises:
            if wanted is not None and ex.id not in wanted:
                continue
            mistakes = C.MISTAKES.get(ex.id, [])
            if not mistakes or not checks_for(ex.id, [Audience.PUBLIC]):
                continue
            out[ex.id] = _exercise_fingerprints(course, ex, mistakes)
    finally:
        torch.set_num_threads(threads)
    return {"format": FORMAT, "exercises": out}

def _exercise_fingerprints(course: Course, ex: Any, mistakes: list[Mistake]) -> dict[str, Any]:
    reference = _reference(course, ex.id)
    seen: dict[str, dict[str, Request]] = {}
    for fn in [reference, *(m.fn for m in mistakes)]:
        run_exercise(ex, _recording_runner({ex.function: fn}, seen),
                     audiences=[Audience.PUBLIC], tolerances=course.tolerances, seed_parts=(PUBLIC_SEED,))
    requests: dict[str, list[list[str]]] = {}
    values: dict[str, Any] = {}
    for key, variants in seen.items():
        matches: list[list[str]] = []
        for request in variants.values():
            for match in _mistake_outputs(ex, reference, mistakes, request, course.tolerances, values):
                if match not in matches:
                    matches.append(match)
        if matches:
            # Catalog order, as the live diagnoser tries them: the first mistake that matches is named.
            order = {m.name: i for i, m in enumerate(mistakes)}
            requests[key] = sorted(matches, key=lambda match: order[match[0]])
    return {"mistakes": {m.name: m.message._asdict() for m in mistakes},
            "requests": requests, "values": values}

def _mistake_outputs(ex: Any, reference: Any, mistakes: list[Mistake], request: Request, tolerances: Any,
                     values: dict[str, Any]) -> list[list[str]]:
    """[mistake name, value key] for each mistake whose output on this request differs from the
    reference's; the outputs go into ``values``. Each runs as the live diagnoser runs it (from the same state of
    torch's global generator); an output that depends on that state (an unseeded draw) is no fingerprint."""
    outputs = Outputs()
    ref_value = outputs.value(reference, request)
    matches: list[list[str]] = []
    for m in mistakes:
        value = outputs.value(m.fn, request)
        if value is None or outputs.random(m.fn, request):
            continue
        if ref_value is not None and _same_value(value, ref_value, tolerances):
            continue
        packed = pack_value(value, ref_value)
        vkey = _value_key(packed)
        values[vkey] = packed
        matches.append([m.name, vkey])
    return matches

def verify_fingerprints(data: dict[str, Any], course: Course | None = None,
                        exercises: Iterable[str] | None = None) -> list[str]:
    """Problems, if any: a public check where the stored fingerprints name a mistake other than
    the live diagnoser does (running every known mistake through the public checks). Instructor side."""
    course = course or load_course()
    load_catalog(course, hidden=False, mistakes=True)
    live = C.LiveDiagnoser(course.tolerances)
    stored = FingerprintDiagnoser(course.tolerances, data)
    wanted = set(exercises) if exercises is not None else None
    problems: list[str] = []
    for ex in course.exercises:
        if (wanted is not None and ex.id not in wanted) or not checks_for(ex.id, [Audience.PUBLIC]):
            continue
        reference = _reference(course, ex.id)
        for m in C.MISTAKES.get(ex.id, []):
            # One run per mistake: the live diagnosis decides, the stored one is compared with it.
            def both(exercise_id: str, request: Request, got: plain.Value, *, m: Mistake = m,
                     reference: Callable[..., Any] | None = None,
                     evidence: Sequence[tuple[Request, plain.Value]] = ()) -> Mistake | None:
                a = live(exercise_id, request, got, reference=reference, evidence=evidence)
                b = stored(exercise_id, request, got, evidence=evidence)
                if (a and a.name) != (b and b.name):
                    problems.append(f"{exercise_id} with mistake {m.name}: live diagnosis {a.name if a else 'none'}, "
                                    f"fingerprints {b.name if b else 'none'}")
                return a

            run_exercise(ex, copying_runner({ex.function: m.fn}),
                         audiences=[Audience.PUBLIC], tolerances=course.tolerances, seed_parts=(PUBLIC_SEED,),
                         reference=reference, diagnoser=both)
    return problems

def _same_value(a: plain.Value, b: plain.Value, tolerances: Any) -> bool:
    """Same kinds and dtypes all the way down, and close (values_match alone lets a Tensor match an ndarray)."""
    return same_kinds(a.spec, b.spec) and values_match(a, b, tolerances)

def write_fingerprints(data: dict[str, Any], path: str | Path) -> Path:
    """Write atomically (a reader never sees half a file)."""
    file = Path(path)
    atomic_write_text(file, dumps(data))
    return file
