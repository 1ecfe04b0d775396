"""Cost analysis: flops, transcendentals and bytes accessed of a module (XLA's HloCostAnalysis).

Per instruction (`instruction_cost`):
- elementwise ops: one flop per output element, or one transcendental for the ops the opcode
  table marks `expensive` (exp, log, tanh, sqrt, power, ...); `compare`, `select` and
  `convert` count one flop per element too;
- dot: 2 flops per multiply-add, `2 * output elements * contracted size`;
- convolution: 2 flops per multiply-add that reads a real input element (padding and holes
  from base dilation are not counted), as XLA does;
- reduce and reduce-window: the reducer's flops once per element folded in;
- fusion: the flops of its fused instructions; bytes accessed are the fusion's operands and
  outputs only (the fused temporaries never reach memory);
- parameter, constant, tuple, get-tuple-element, bitcast and other forwarding ops: nothing.
Bytes accessed of anything else are its array operands plus its outputs, with per-operand keys
`bytes accessed0{}` (operand 0 at shape index {}) and `bytes accessedout{}` as XLA names them.
Control flow adds its callees once (a while body counts one trip, as in XLA).
"""

from __future__ import annotations

from collections import Counter
from math import prod

from ..ir.attrs import WindowDim, parse_dim_labels
from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..ir.opcodes import CONTROL_FLOW, ELEMENTWISE, EXPENSIVE, FORWARDING
from .dataflow import leaf_bytes

FLOPS, TRANSCENDENTALS, BYTES = "flops", "transcendentals", "bytes accessed"
_FREE = FORWARDING | {"parameter", "constant", "after-all", "iota", "partition-id", "replica-id"}


def _shape_bytes(shape) -> int:
    return sum(leaf_bytes(leaf) for _, leaf in shape.leaves())


def _index_key(index) -> str:
    return "{" + ",".join(map(str, index)) + "}"


def _elementwise(instr: HloInstruction) -> Counter:
    kind = TRANSCENDENTALS if instr.opdef.has(EXPENSIVE) else FLOPS
    return Counter({kind: instr.shape.numel()})


def _dot(instr: HloInstruction) -> Counter:
    lhs = instr.operand(0).shape
    contracted = prod(lhs.dims[d] for d in instr.attrs.get("lhs_contracting_dims", ()))
    return Counter({FLOPS: 2 * instr.shape.numel() * contracted})


def valid_window_pairs(out_size: int, in_size: int, wd: WindowDim) -> int:
    """How many (output position, kernel position) pairs of one spatial dimension read a real
    input element: not padding, and not a hole left by base (lhs) dilation."""
    dilated = (in_size - 1) * wd.lhs_dilation + 1 if in_size else 0
    count = 0
    for out in range(out_size):
        for k in range(wd.size):
            position = out * wd.stride + k * wd.rhs_dilation - wd.padding_low
            if 0 <= position < dilated and position % wd.lhs_dilation == 0:
                count += 1
    return count


def _convolution(instr: HloInstruction) -> Counter:
    lhs, rhs, out = instr.operand(0).shape, instr.operand(1).shape, instr.shape
    dims = parse_dim_labels(str(instr.attrs["dim_labels"]))
    kernel_sizes = [rhs.dims[d] for d in dims.kernel_spatial]
    window = (
        instr.attrs["window"].dims
        if "window" in instr.attrs
        else tuple(map(WindowDim, kernel_sizes))
    )
    pairs = prod(
        valid_window_pairs(out.dims[o], lhs.dims[i], wd)
        for o, i, wd in zip(dims.output_spatial, dims.input_spatial, window)
    )
    macs = (
        out.dims[dims.output_batch]
        * out.dims[dims.output_feature]
        * rhs.dims[dims.kernel_input_feature]
        * pairs
    )
    return Counter({FLOPS: 2 * macs})


def _reduce(instr: HloInstruction) -> Counter:
    inputs = instr.operand_count // 2
    folded = sum(o.shape.numel() for o in instr.operands[:inputs]) - sum(
        leaf.numel() for _, leaf in instr.shape.leaves() if leaf.is_array
    )
    return _scaled(computation_cost(instr.attrs["to_apply"]), max(folded, 0))


def _reduce_window(instr: HloInstruction) -> Counter:
    window = instr.attrs["window"].dims
    per_output = prod(wd.size for wd in window)
    outputs = sum(leaf.numel() for _, leaf in instr.shape.leaves() if leaf.is_array)
    return _scaled(computation_cost(instr.attrs["to_apply"]), outputs * max(per_output - 1, 0))


def _scaled(reducer: Counter, times: int) -> Counter:
    return Counter({k: v * times for k, v in reducer.items() if k in (FLOPS, TRANSCENDENTALS)})


# opcode -> its flops and transcendentals; elementwise ops share one rule.
OP_COSTS = {
    "dot": _dot,
    "convolution": _convolution,
    "reduce": _reduce,
    "reduce-window": _reduce_window,
}


def _compute_cost(instr: HloInstruction) -> Counter:
    rule = OP_COSTS.get(instr.opcode)
    if rule is not None:
        return rule(instr)
    if instr.opdef.kind == ELEMENTWISE and instr.opcode != "map":
        return _elementwise(instr)
    if instr.opcode == "map":
        return _scaled(computation_cost(instr.attrs["to_apply"]), instr.shape.numel())
    return Counter()


def instruction_cost(instr: HloInstruction) -> Counter:
    """flops, transcendentals and bytes accessed (with per-operand keys) of one instruction."""
    if instr.opcode in _FREE:
        return Counter()
    if instr.opcode == "fusion":
        cost: Counter[str] = Counter()
        for member in instr.attrs["calls"].instructions:
            cost.update(_compute_cost(member))
    elif instr.opcode in CONTROL_FLOW:
        cost = Counter()
        for callee in instr.called_computations:
            cost.update(computation_cost(callee))
        return cost
    else:
        cost = _compute_cost(instr)
    for number, operand in enumerate(instr.operands):
        size = _shape_bytes(operand.shape)
        if size:
            cost[f"{BYTES}{number}{{}}"] += size
            cost[BYTES] += size
    for index, leaf in instr.shape.leaves():
        if leaf.is_array:
            cost[f"{BYTES}out{_index_key(index)}"] += leaf_bytes(leaf)
            cost[BYTES] += leaf_bytes(leaf)
    return cost


def computation_cost(comp: HloComputation) -> Counter:
    total: Counter[str] = Counter()
    for instr in comp.instructions:
        total.update(instruction_cost(instr))
    return total


def module_cost(module: HloModule) -> dict[str, float]:
    """The entry's cost as XLA's cost_analysis() reports it: per-operand byte keys summed over
    instructions, and `flops`, `transcendentals`, `bytes accessed` always present."""
    cost = computation_cost(module.entry)
    result = {FLOPS: 0.0, TRANSCENDENTALS: 0.0, BYTES: 0.0}
    result.update({key: float(value) for key, value in sorted(cost.items())})
    return result


def instruction_flops(instr: HloInstruction) -> int:
    """flops + transcendentals: what recomputing `instr` costs (rematerialization's measure)."""
    cost = instruction_cost(instr)
    return cost[FLOPS] + cost[TRANSCENDENTALS]
