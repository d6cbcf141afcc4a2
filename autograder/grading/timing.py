"""Where a submission's grading time goes: one flat profile whose sections add up to the whole
(``result["timing"]["profile"]``; bench/ reports it). The checks and the sandbox only accumulate
seconds per section into dicts; this module names the sections and adds them up.
"""
from __future__ import annotations


#: The sections of one submission's profile (result["timing"]["profile"], seconds), in path order.
PROFILE_SECTIONS = {
    "read": "read and parse the notebook, cells to plain Python",
    "fork": "fork a worker from the warm template (its cage excluded)",
    "cage": "the worker's cage: namespaces, tmpfs root, uid, seccomp, Landlock (see autograder.inside.cage)",
    "cells": "run the notebook's code cells in the worker",
    "scan": "the trusted side's static scan of the code, made while the worker runs the cells",
    "inputs": "generate seeded inputs (ctx.randn, randint)",
    "encode": "encode call arguments as plain data",
    "ipc": "round trips to the worker less its own work: sockets, scheduling, waking up",
    "worker": "the worker's side of calls less the student's code: decode, ForbiddenGuard, encode",
    "student": "the student's functions, timed inside the worker",
    "decode": "decode and validate the worker's replies",
    "reference": "reference solutions on float64 copies",
    "overlap": "the worker's work done while the trusted side computed expected values (Context.start): minus",
    "compare": "expectations: shapes, dtypes, float64 comparisons",
    "diagnose": "run known mistakes on the failing inputs",
    "checks_other": "the rest of the checks' own code and scoring",
    "results": "build the result JSON",
    "close": "stop the worker (reaped in the background)",
    "other": "everything else in grade_submission",
}


def flat_profile(grader: dict[str, float], sandbox: dict[str, float], total: float) -> dict[str, float]:
    """One flat breakdown whose sections add up to ``total`` (``other`` is what no section covers)."""
    cage = min(sandbox.get("cage", 0.0), sandbox.get("fork", 0.0))
    out = {"read": grader.get("read", 0.0), "fork": sandbox.get("fork", 0.0) - cage, "cage": cage,
           "cells": sandbox.get("cells", 0.0), "scan": sandbox.get("meanwhile", 0.0) + grader.get("scan", 0.0),
           "inputs": grader.get("inputs", 0.0), "encode": sandbox.get("encode", 0.0),
           "student": grader.get("student", 0.0), "decode": sandbox.get("decode", 0.0),
           "reference": grader.get("reference", 0.0), "compare": grader.get("compare", 0.0),
           "diagnose": grader.get("diagnose", 0.0), "results": grader.get("results", 0.0),
           "close": grader.get("close", 0.0)}
    # The worker's figure comes from the worker (plain data, profile only); without it, all is "ipc". The
    # round trip counts only this side's waiting: the worker's work done while this side computed an expected
    # value (``hidden``) is in the worker's figures and taken off again as ``overlap``, so the sum holds.
    hidden = sandbox.get("hidden", 0.0)
    trip = sandbox.get("roundtrip", 0.0) + hidden
    busy = min(max(sandbox.get("worker", 0.0), out["student"]), trip)
    out["worker"] = max(busy - out["student"], 0.0)
    out["ipc"] = max(trip - busy, 0.0)
    out["overlap"] = -hidden
    # A worker re-forked inside a call counts as fork/cells inside that call: not the checks' own time.
    within_checks = grader.get("call", 0.0) + sum(grader.get(k, 0.0) for k in ("inputs", "reference", "compare",
                                                                              "diagnose"))
    out["checks_other"] = max(grader.get("checks", 0.0) - within_checks, 0.0)
    out["other"] = max(total - sum(out.values()), 0.0)
    return {k: round(out[k], 4) for k in PROFILE_SECTIONS}
