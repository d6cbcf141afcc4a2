"""The template's warm-up: a worker's usual path run once in the template, before it says ready.

Run by the sandbox's template process (:mod:`autograder.inside.template`) after it imported everything and
before it forks any worker, so that each worker is forked warm. It runs no student code and computes nothing
of any exercise: neutral torch operations on constant tensors, through :func:`autograder.inside.probes.execute`
and each probe as a grader's calls go, under the guards (:mod:`autograder.inside.guards`). It is given nothing
and holds nothing secret, and it leaves nothing a worker could see: torch's default generator as it was, no
thread started, nothing imported that every template does not import alike.
"""
from __future__ import annotations

import traceback
from typing import Any


#: Forbidden names the warm-up's calls run under (so both guard levels run): names of the catalog that
#: the warm-up itself never calls.
WARM_UP_FORBIDDEN = ("F.scaled_dot_product_attention", "nn.MultiheadAttention")


def warm_up() -> list[str]:
    """A worker's usual path once in the template, before it says ready: each worker is forked with it
    warm instead of paying for it on its first calls (a first call of a function through the guards
    costs a millisecond or more: torch builds its operator objects and dispatch caches, CPython
    specializes the bytecode that runs, only once per process). The calls go through probes.execute
    as a grader's do, under the guards and through each probe, on tensors of both float dtypes.

    Neutral on purpose: torch operations one by one on constant tensors, no exercise's computation. No
    random number is drawn from a generator that stays drawn (torch's default generator is put back as
    it was: a module's initialization draws), no thread is started (the template's thread settings are
    1), and what it imports is imported before ready, in every template alike. Returns each call's status."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    from autograder.inside import plain, probes

    def ops(x: torch.Tensor, mask: torch.Tensor) -> Any:
        y = (x @ x.transpose(-2, -1)) / x.shape[-1] ** 0.5
        y = y.masked_fill(mask, float("-inf")).softmax(-1).nan_to_num()
        z = torch.where(mask, torch.zeros_like(y), y).sum(-1, keepdim=True) + y.amax(-1, keepdim=True)
        w = torch.exp(x - x.max(-1, keepdim=True).values).log1p() + torch.tanh(x) * torch.sigmoid(x)
        w = w + torch.log(x.abs() + 1) - x.mean(-1, keepdim=True) / torch.sqrt(x.var(-1, keepdim=True) + 1)
        v = torch.cat([x, w], -1).reshape(*x.shape[:-1], 2, -1).chunk(2, -1)[0].squeeze(-1).unsqueeze(0)
        u = torch.stack([x, x]).permute(1, 0, 2, 3).contiguous().view(-1, x.shape[-1]).split(1)[0]
        t = torch.einsum("btd,bsd->bts", x, x) + torch.bmm(x, x.transpose(1, 2)) + torch.matmul(x, x.mT)
        r = F.relu(x) + F.gelu(x) + F.silu(x) + torch.sin(x) * torch.cos(x) + x.pow(2) + x.clamp(-1, 1)
        n = F.layer_norm(x, x.shape[-1:]) + F.linear(x, x[0].T @ x[0], x[0, 0]) + F.dropout(x, 0.0)
        k = torch.arange(x.shape[-1]).float().to(x.dtype) + torch.ones(x.shape[-1], dtype=x.dtype)
        c = torch.ones(3, 3, dtype=torch.bool).triu(1) | torch.tril(torch.ones(3, 3, dtype=torch.bool))
        g = x.gather(-1, torch.zeros(*x.shape[:-1], 1, dtype=torch.long)).expand_as(x) + x.new_zeros(x.shape)
        e = F.cross_entropy(x.reshape(-1, x.shape[-1]), torch.zeros(x.shape[0] * x.shape[1], dtype=torch.long),
                            reduction="none") + F.log_softmax(x, -1).flatten()[: x.shape[0] * x.shape[1]]
        i = x.argmax(-1) + torch.isinf(x).sum(-1) + torch.isnan(x).any(-1).long() + torch.isfinite(x).all(-1)
        total = y.sum() + z.sum() + w.sum() + v.sum() + u.sum() + t.sum() + r.sum() + n.sum() + k.sum() + e.sum()
        return total + g.sum() + i.sum() + c.sum(), (x.numel(), x.dim(), x.element_size(), float(total.item()))

    class Layer(nn.Module):
        def __init__(self, d: int):
            super().__init__()
            self.proj = nn.Linear(d, d)
            self.norm = nn.LayerNorm(d)
            self.scale = nn.Parameter(torch.ones(d))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.norm(self.proj(x)) * self.scale

    state = torch.random.get_rng_state()
    namespace = {"ops": ops, "Layer": Layer, "__name__": "__main__"}
    statuses: list[str] = []
    try:
        for dtype in (torch.float32, torch.float64):
            x = torch.linspace(-2, 2, 2 * 3 * 4, dtype=dtype).reshape(2, 3, 4)
            mask = torch.tensor([False, False, True]).expand(2, 3, 3)
            weights = {"proj.weight": torch.eye(4, dtype=dtype), "proj.bias": torch.zeros(4, dtype=dtype),
                       "norm.weight": torch.ones(4, dtype=dtype), "norm.bias": torch.zeros(4, dtype=dtype)}
            requests = [probes.Request("ops", (x, mask)), probes.Request("ops", (x, mask), probe="inputs"),
                        probes.Request("ops", (x, mask), probe="random"),
                        probes.Request("ops", ((0,), (torch.ones((), dtype=dtype), None), x, mask), probe="grad"),
                        probes.Request("Layer", ((4,), {}, weights, (x,), {}, torch.ones_like(x), (0,)),
                                       probe="module")]
            for request in requests:
                for forbidden in ((), WARM_UP_FORBIDDEN):
                    request.forbidden = forbidden
                    blob = plain.encode((request.args, request.kwargs))
                    plain.decode_trusted(blob).to_python()
                    reply = probes.execute(namespace, request)
                    statuses.append(reply.status if reply.status == "ok" else f"{reply.status}: {reply.error}")
                    if reply.status == "ok":
                        plain.decode(reply.blob).to_python()
    except Exception:  # noqa: BLE001 - a warm-up that fails costs speed only: into the template's log
        traceback.print_exc()
    finally:
        torch.random.set_rng_state(state)
    return statuses
