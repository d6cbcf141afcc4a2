"""A call into the student's code as a check sees it: the request, copied as a sandbox would see it
(:func:`copied`), and the runner's reply, read: a forbidden call refused (:func:`refuse_forbidden`), a reply
that is not ``ok`` turned into a :class:`~autograder.catalog.outcomes.CheckFailed` in zh and en
(:func:`reply_failure`).

A reply is the student's process speaking (its error text, the forbidden names its worker saw) or the
sandbox's (a timeout, a crash): a hidden check's message repeats only what holds no value, the forbidden names
it already knows and the sandbox's words without their numbers.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

from autograder.catalog.outcomes import CheckFailed, Status, number_free
from autograder.core.messages import Msg, say
from autograder.inside.forbidden import GUARD_OFF
from autograder.inside.probes import Reply, Request


# -- the request ------------------------------------------------------------------
def copied(request: Request) -> Request:
    """The request with fresh copies of its tensors and arrays, as a sandbox would see them.

    A function that edits its arguments in place then cannot change the check's
    inputs, nor the fingerprint the diagnoser computes afterwards.
    """
    return Request(request.function, _copy(request.args), _copy(request.kwargs), probe=request.probe,
                   forbidden=request.forbidden, device=request.device, site=request.site,
                   stand_ins=dict(request.stand_ins))


def _copy(value: Any) -> Any:
    if type(value) is torch.Tensor:
        copy = value.detach().clone()
        return copy.requires_grad_(True) if value.requires_grad else copy
    if type(value) is np.ndarray:
        return value.copy()
    if isinstance(value, tuple):
        return tuple(_copy(v) for v in value)
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return value


# -- the reply --------------------------------------------------------------------
def refuse_forbidden(reply: Reply, known: Iterable[str] = ()) -> None:
    """Fail on a forbidden call. The names come from the worker: a hidden check repeats only known ones."""
    if GUARD_OFF in reply.forbidden:
        said = say("check.guard_off")
        raise CheckFailed(said, status=Status.FORBIDDEN, hidden=said)
    if reply.forbidden:
        known = set(known)
        named = [n for n in reply.forbidden if n in known] or ["a forbidden call"]
        raise CheckFailed(say("check.forbidden", names=", ".join(reply.forbidden)), status=Status.FORBIDDEN,
                          hidden=say("check.forbidden", names=", ".join(named)))


def reply_failure(reply: Reply, function: str) -> CheckFailed:
    """The failure a reply that is not ``ok`` means, its status the reply's (``function``: the one called)."""
    # Hidden messages: the worker's text (too_large) is the student's process speaking, the
    # sandbox's own (timeout, crashed) is bounded; neither repeats a value.
    if reply.status == "not_attempted":
        message = say("check.not_attempted")
        return CheckFailed(message, status=Status.NOT_ATTEMPTED, hidden=message)
    if reply.status == "missing":
        message = say("check.missing", function=function)
        return CheckFailed(message, status=Status.MISSING, hidden=message)
    if reply.status == "too_large":
        return CheckFailed(_sandbox_said("check.too_large", reply), status=Status.TOO_LARGE,
                           hidden=say("check.too_large_hidden"))
    if reply.status == "timeout":
        return CheckFailed(_sandbox_said("check.timeout", reply), status=Status.TIMEOUT,
                           hidden=_sandbox_said("check.timeout", reply, hidden=True))
    if reply.status == "crashed":
        return CheckFailed(_sandbox_said("check.crashed", reply), status=Status.CRASHED,
                           hidden=_sandbox_said("check.crashed", reply, hidden=True))
    return CheckFailed(say("check.raised", kind=reply.error_type, detail=reply.error),
                       status=Status.ERROR, error_type=reply.error_type)


def _sandbox_said(key: str, reply: Reply, hidden: bool = False) -> Msg:
    """``key``'s sentence around what the sandbox said: its own words in both languages when it gave
    them (``Reply.message``), else its text; a hidden check's without any number."""
    said = getattr(reply, "message", None)
    if not isinstance(said, Msg):
        said = Msg(reply.error or "", reply.error or "")
    if hidden:
        said = Msg(number_free(said.zh, 160), number_free(said.en, 160))
    return say(key, detail=said)
