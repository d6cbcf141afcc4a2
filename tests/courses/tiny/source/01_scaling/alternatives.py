"""Correct alternatives of 01_scaling (instructor side only): validate grades each as a submission."""
from __future__ import annotations

import torch

from autograder.catalog import alternative


@alternative("1.1", "added-to-itself", zh="x + x", en="x + x")
def _double_added(x):
    return x + x


@alternative("1.1", "torch-mul", zh="torch.mul(x, 2)", en="torch.mul(x, 2)")
def _double_mul(x):
    return torch.mul(x, 2)


@alternative("1.1", "float64-and-back", zh="在 float64 中计算再转回", en="computed in float64, cast back")
def _double_wide(x):
    return (x.double() * 2).to(x.dtype)
