"""The forbidden calls: one table, read by the run-time guard (:mod:`autograder.inside.guards`, at the torch
function and at the aten operator) and by the static scan of a submission's source
(:mod:`autograder.grading.source_scan`), and checked when a course declares what an exercise forbids
(:func:`autograder.catalog.exercise`).

Each entry is a name as exercises.md spells it (``F.softmax``) with what *is* that call: the torch
function objects the function-level guard recognizes, the aten operators the operator-level guard
recognizes, and the qualified names (and name prefixes) the static scan recognizes in source code.
Entries of one ``family`` do the same thing (torch.softmax, F.softmax, Tensor.softmax): where an exercise
forbids one of them, the static scan names a call of another by the first of the family the exercise
forbids. Adding a forbidden call is one entry here.

This module is imported next to student code (the guard binds everything at import, before any cell
runs) and by the trusted side alike; it holds no check and no solution.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


#: What the run-time guard reports, as if it were a forbidden name, when a call returns with the guard no
#: longer in force (torch's function modes switched off, a guard popped off its mode stack, the Python
#: dispatch key excluded): whatever the call did, it did unseen, and the exercise scores 0.
GUARD_OFF = "guard-off"


@dataclass(frozen=True)
class Forbidden:
    name: str                                   # as exercises.md spells it
    family: str                                 # calls that do the same thing
    objects: Callable[[], list[Any]]            # the torch function objects (the function-level guard)
    operators: tuple[str, ...] = ()             # aten operators (the operator-level guard)
    spellings: tuple[str, ...] = ()             # canonical qualified names (the static scan)
    prefixes: tuple[str, ...] = ()              # qualified-name prefixes (the static scan)
    methods: tuple[str, ...] = ()               # method names on a value the scan cannot name: ``x.softmax``


def _torch() -> Any:
    import torch

    return torch


def _F() -> Any:
    import torch.nn.functional as F

    return F


# The aten operators each call runs on (torch 2.13; CPU measured, CUDA kernels listed from the operator
# registry). Composite operators (softmax.int, scaled_dot_product_attention, cross_entropy_loss) never reach
# a dispatch mode but are seen when called as ``torch.ops.aten.X``. Only an operator's own names:
# ``F.cross_entropy`` runs on ``_log_softmax`` and ``nll_loss_forward``, which an exercise that forbids it may
# still allow, so they count only where their own names are forbidden.
_SOFTMAX_OPS = ("softmax", "_softmax", "special_softmax", "_safe_softmax", "_masked_softmax", "_sparse_softmax",
                "_nested_tensor_softmax_with_shape")
_LOG_SOFTMAX_OPS = ("log_softmax", "_log_softmax", "special_log_softmax", "_sparse_log_softmax")
# _safe_softmax: the softmax of sdpa's math path (inputs that are not 4-D), used by nothing else public.
_SDPA_OPS = ("scaled_dot_product_attention", "_scaled_dot_product_attention_math", "_safe_softmax",
             "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
             "_scaled_dot_product_fused_attention_overrideable", "_scaled_dot_product_attention_math_for_mps",
             "_flash_attention_forward", "_flash_attention_forward_no_dropout_inplace",
             "_efficient_attention_forward", "_triton_scaled_dot_attention")
_MHA_OPS = ("_native_multi_head_attention", "_transformer_encoder_layer_fwd", "_triton_multi_head_attention")
_LAYER_NORM_OPS = ("layer_norm", "native_layer_norm")
_NLL_OPS = ("nll_loss", "nll_loss_nd", "nll_loss2d", "nll_loss_forward", "nll_loss2d_forward")

TABLE: tuple[Forbidden, ...] = (
    Forbidden("torch.softmax", "softmax", lambda: [_torch().softmax, _torch()._softmax, _torch().special.softmax],  # noqa: SLF001 - torch's private op, forbidden too
              _SOFTMAX_OPS,
              ("torch.softmax", "torch._softmax", "torch.special.softmax", "torch.sparse.softmax",
               "torch.masked.softmax", "torch._safe_softmax", "torch._masked_softmax", "torch.ops.aten.softmax",
               "torch.ops.aten._softmax", "torch.ops.aten._safe_softmax", "torch.ops.aten._masked_softmax",
               "torch.ops.aten.special_softmax", "torch.ops.aten._sparse_softmax")),
    Forbidden("F.softmax", "softmax", lambda: [_F().softmax], _SOFTMAX_OPS,
              ("torch.nn.functional.softmax", "torch.nn.functional.softmin", "torch.nn.functional.gumbel_softmax",
               "torch.nn.Softmax", "torch.nn.Softmin", "torch.nn.Softmax2d")),
    Forbidden("Tensor.softmax", "softmax", lambda: [_torch().Tensor.softmax], _SOFTMAX_OPS,
              ("torch.Tensor.softmax",), methods=("softmax",)),
    Forbidden("torch.log_softmax", "log_softmax",
              lambda: [_torch().log_softmax, _torch()._log_softmax, _torch().Tensor.log_softmax,  # noqa: SLF001 - torch's private op, forbidden too
                       _torch().special.log_softmax], _LOG_SOFTMAX_OPS,
              ("torch.log_softmax", "torch._log_softmax", "torch.special.log_softmax", "torch.sparse.log_softmax",
               "torch.masked.log_softmax", "torch.Tensor.log_softmax", "torch.ops.aten.log_softmax",
               "torch.ops.aten._log_softmax", "torch.ops.aten.special_log_softmax",
               "torch.ops.aten._sparse_log_softmax"), methods=("log_softmax",)),
    Forbidden("F.log_softmax", "log_softmax", lambda: [_F().log_softmax], _LOG_SOFTMAX_OPS,
              ("torch.nn.functional.log_softmax", "torch.nn.LogSoftmax")),
    Forbidden("F.scaled_dot_product_attention", "sdpa", lambda: [_F().scaled_dot_product_attention], _SDPA_OPS,
              ("torch.nn.functional.scaled_dot_product_attention", "torch._C._nn.scaled_dot_product_attention",
               "torch.ops.aten.scaled_dot_product_attention"),
              # the fused attention kernels behind it
              ("torch._scaled_dot_product_", "torch.ops.aten._scaled_dot_product_", "torch._flash_attention",
               "torch.ops.aten._flash_attention", "torch._efficient_attention", "torch.ops.aten._efficient_attention",
               "torch._fused_sdp", "torch.ops.aten._fused_sdp")),
    Forbidden("nn.MultiheadAttention", "mha", lambda: [_F().multi_head_attention_forward], _MHA_OPS,
              ("torch.nn.MultiheadAttention", "torch.nn.Transformer", "torch.nn.TransformerEncoder",
               "torch.nn.TransformerDecoder", "torch.nn.TransformerEncoderLayer", "torch.nn.TransformerDecoderLayer",
               "torch._native_multi_head_attention", "torch.ops.aten._native_multi_head_attention",
               "torch._transformer_encoder_layer_fwd", "torch.ops.aten._transformer_encoder_layer_fwd")),
    Forbidden("F.multi_head_attention_forward", "mha", lambda: [_F().multi_head_attention_forward], _MHA_OPS,
              ("torch.nn.functional.multi_head_attention_forward",)),
    Forbidden("F.cross_entropy", "cross_entropy", lambda: [_F().cross_entropy], ("cross_entropy_loss",),
              ("torch.nn.functional.cross_entropy", "torch._C._nn.cross_entropy_loss",
               "torch.ops.aten.cross_entropy_loss")),
    Forbidden("nn.CrossEntropyLoss", "cross_entropy", lambda: [_F().cross_entropy], ("cross_entropy_loss",),
              ("torch.nn.CrossEntropyLoss",)),
    Forbidden("F.nll_loss", "nll_loss", lambda: [_F().nll_loss], _NLL_OPS,
              ("torch.nn.functional.nll_loss", "torch._C._nn.nll_loss", "torch._C._nn.nll_loss2d",
               "torch._C._nn.nll_loss_nd", "torch.ops.aten.nll_loss", "torch.ops.aten.nll_loss2d",
               "torch.ops.aten.nll_loss_nd", "torch.ops.aten.nll_loss_forward", "torch.ops.aten.nll_loss2d_forward")),
    Forbidden("nn.NLLLoss", "nll_loss", lambda: [_F().nll_loss], _NLL_OPS, ("torch.nn.NLLLoss", "torch.nn.NLLLoss2d")),
    Forbidden("F.layer_norm", "layer_norm", lambda: [_F().layer_norm, _torch().layer_norm, _torch().native_layer_norm],
              _LAYER_NORM_OPS,
              ("torch.nn.functional.layer_norm", "torch.layer_norm", "torch.native_layer_norm",
               "torch.ops.aten.layer_norm", "torch.ops.aten.native_layer_norm")),
    Forbidden("nn.LayerNorm", "layer_norm", lambda: [_F().layer_norm], _LAYER_NORM_OPS, ("torch.nn.LayerNorm",)),
)

#: Every forbidden name, in the table's order.
NAMES: tuple[str, ...] = tuple(f.name for f in TABLE)
BY_NAME: dict[str, Forbidden] = {f.name: f for f in TABLE}


def candidates(name: str) -> tuple[str, ...]:
    """The forbidden names a call of ``name`` counts as: itself, then the rest of its family in table order."""
    family = BY_NAME[name].family
    return (name, *(f.name for f in TABLE if f.family == family and f.name != name))


def unknown(names: tuple[str, ...] | list[str]) -> list[str]:
    """The names of ``names`` that are not forbidden calls of this table."""
    return [n for n in names if n not in BY_NAME]
