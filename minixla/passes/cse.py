"""Common subexpression elimination: one instruction per (opcode, shape, attributes, operands).

Constants merge when their bits agree (so -0.0 and 0.0, or two NaN payloads, stay apart).
Called computations compare by structure. Never merged: side-effecting instructions (a
custom call with `custom_call_has_side_effect=true`; the others are pure, as XLA's CSE reads
them: JAX's LU of one matrix for `inv` and `slogdet` is one call), random number generators
(two draws are not one), parameters, and anything with control edges.
Operands are canonical before their users because each computation is walked in post order.
"""

from __future__ import annotations

from ..ir.module import HloModule
from .base import Pass, register_pass
from .graph_utils import has_side_effect, rewritable_computations

_NEVER = frozenset(
    {
        "parameter",
        "rng",
        "rng-bit-generator",
        "rng-get-and-update-state",
        "after-all",
        "infeed",
        "outfeed",
        "send",
        "recv",
        "send-done",
        "recv-done",
    }
)


def _key(instr) -> tuple:
    literal = b""
    if instr.opcode == "constant" and not instr.shape.is_tuple:
        literal = instr.literal.tobytes()
    return (instr.opcode, str(instr.shape), tuple(id(o) for o in instr.operands), literal)


def _mergeable(instr, memo: dict) -> bool:
    return not (
        instr.opcode in _NEVER
        or instr.elided  # values not printed: two of them need not be the same
        or instr.control_predecessors
        or instr.control_successors
        or has_side_effect(instr, memo)
    )


def eliminate_common_subexpressions(comp) -> bool:
    memo: dict = {}
    seen: dict[tuple, list] = {}
    changed = False
    for instr in comp.post_order():
        if not _mergeable(instr, memo):
            continue
        bucket = seen.setdefault(_key(instr), [])
        twin = next((other for other in bucket if other.same_op(instr)), None)
        if twin is None:
            bucket.append(instr)
            continue
        instr.replace_all_uses_with(twin)
        comp.remove_instruction(instr)
        changed = True
    return changed


@register_pass
class CommonSubexpressionElimination(Pass):
    name = "cse"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in rewritable_computations(module):
            changed |= eliminate_common_subexpressions(comp)
        return changed
