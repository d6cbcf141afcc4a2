"""Correct alternatives of 02_qkv_attention (instructor side only): validate grades each as a submission."""
from __future__ import annotations

import torch

from autograder.catalog import alternative


@alternative("2.2", "logsumexp", zh="减去 logsumexp 再取指数", en="exp(x - logsumexp(x))")
def _softmax_logsumexp(x, dim=-1):
    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))
