"""Known mistakes of 02_qkv_attention (instructor side only)."""
from __future__ import annotations

import math

import torch

from ..checks import mistake


@mistake("2.4", "no-scale", zh="看起来少了 1/√d 缩放", en="looks like the 1/sqrt(d) scale is missing")
def _no_scale(Q, K, V):
    w = torch.softmax(Q @ K.transpose(-2, -1), dim=-1)
    return w @ V, w


@mistake("2.4", "softmax-wrong-dim", zh="softmax 的维度不对：应当对键（最后一维）归一化",
         en="softmax over the wrong dim: normalize over the keys (the last dim)")
def _wrong_dim(Q, K, V):
    w = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), dim=-2)
    return w @ V, w
