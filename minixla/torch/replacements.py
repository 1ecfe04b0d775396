"""Torch functions replaced in dynamo's graphs before AOTAutograd traces them, where the
decomposition torch applies while tracing gives wrong values.

torch 2.13's decomposition of `multilabel_margin_loss_forward` (registered on the autograd
key, so it runs before any decomposition table a backend passes) sums the margins of the
target positions after a target's ending -1 as well; eager torch stops at the -1. The
replacement below computes the loss from differentiable ops, so its gradient follows.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn import _reduction


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """sum over target labels j (those before the first -1) and non-target classes i of
    max(0, 1 - (x[j] - x[i])), divided by the class count; then the reduction."""
    if size_average is not None or reduce is not None:
        reduction = _reduction.legacy_get_string(size_average, reduce)
    return _multilabel_margin_loss(input, target, reduction)


def _multilabel_margin_loss(input, target, reduction: str):
    vector = input.dim() <= 1
    x = input.reshape(1, -1) if vector else input
    labels = target.reshape(1, -1) if vector else target
    classes = x.shape[1]
    position = torch.arange(classes, device=x.device)
    first_end = torch.where(labels == -1, position, classes).amin(-1, keepdim=True)
    used = position < first_end  # [N, j]: the label slots before the ending -1
    picked = torch.where(used, labels, 0)
    named = torch.where(used, labels, -1)
    is_target = (position.view(1, 1, -1) == named.unsqueeze(-1)).any(1)  # [N, i]
    margins = (1 - x.gather(1, picked).unsqueeze(2) + x.unsqueeze(1)).clamp_min(0)
    counted = used.unsqueeze(2) & ~is_target.unsqueeze(1)  # [N, j, i]
    loss = torch.where(counted, margins, 0).sum((1, 2)) / classes
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss[0] if vector else loss


def _multilabel_margin_loss_enum(input, target, reduction: int):
    names = {0: "none", 1: "mean", 2: "sum"}  # torch's Reduction enum
    return _multilabel_margin_loss(input, target, names[reduction])


REPLACEMENTS = {
    F.multilabel_margin_loss: multilabel_margin_loss,
    torch._C._nn.multilabel_margin_loss: _multilabel_margin_loss_enum,
}


def replace_calls(gm: torch.fx.GraphModule) -> None:
    """Points each call of a function in REPLACEMENTS at its replacement (in place)."""
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in REPLACEMENTS:
            node.target = REPLACEMENTS[node.target]
            changed = True
    if changed:
        gm.recompile()
