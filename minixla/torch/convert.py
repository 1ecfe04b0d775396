"""Tensors across the torch/minixla boundary: dtype names both ways, and torch tensors to
NumPy arrays and back without a copy where the memory allows (a contiguous CPU tensor shares
its buffer with the array `Tensor.numpy()` gives; `torch.from_numpy` shares it back)."""

from __future__ import annotations

import numpy as np
import torch

from ..errors import UnsupportedError
from ..ir.dtypes import ml_dtypes  # loaded on first use

# torch dtype -> HLO element type; the one place either side's spelling is decided.
HLO_DTYPES = {
    torch.bool: "pred",
    torch.uint8: "u8",
    torch.int8: "s8",
    torch.int16: "s16",
    torch.int32: "s32",
    torch.int64: "s64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float32: "f32",
    torch.float64: "f64",
    torch.complex64: "c64",
    torch.complex128: "c128",
}
TORCH_DTYPES = {name: dtype for dtype, name in HLO_DTYPES.items()}


def hlo_dtype(dtype: torch.dtype) -> str:
    name = HLO_DTYPES.get(dtype)
    if name is None:
        raise UnsupportedError(f"torch dtype {dtype} has no minixla element type")
    return name


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """The tensor's data as an array sharing its memory (a copy only when not contiguous or
    not on the CPU). NumPy has no bfloat16, so bf16 travels as int16 bits viewed as
    ml_dtypes.bfloat16."""
    if tensor.requires_grad:
        tensor = tensor.detach()
    if tensor.is_cpu and tensor.dtype is not torch.bfloat16 and tensor.is_contiguous():
        return tensor.numpy()  # the common case, checked in the order that is cheapest
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    tensor = tensor.contiguous()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()


def owned_tensors(arrays) -> list[torch.Tensor] | None:
    """Tensors over `arrays` when each owns its memory, is writeable and C-contiguous, and
    none appears twice (so no two can overlap); None when any array needs from_numpy's
    checks."""
    seen = set()
    for array in arrays:
        if type(array) is not np.ndarray or array.base is not None or id(array) in seen:
            return None
        flags = array.flags
        if not (flags.writeable and flags.c_contiguous) or array.dtype == ml_dtypes.bfloat16:
            return None
        seen.add(id(array))
    return [torch.from_numpy(array) for array in arrays]


def from_numpy(array: np.ndarray, others: list[np.ndarray] = ()) -> torch.Tensor:
    """A tensor sharing `array`'s memory, or a copy when the array is read-only, not
    contiguous, or overlaps one of `others` (an output must never alias another output or an
    argument: optimizers and the autograd engine update outputs in place)."""
    array = np.asarray(array)
    shared = any(np.may_share_memory(array, x) for x in others)
    if shared or not array.flags.writeable or not array.flags.c_contiguous:
        array = np.array(array, order="C")
    if array.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def memory_owner(array: np.ndarray) -> int:
    """The id of the object that owns `array`'s memory: arrays with different owners cannot
    overlap, so only arrays with the same owner need np.may_share_memory."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return id(array if array.base is None else array.base)
