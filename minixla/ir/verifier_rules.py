"""More of XLA's HloVerifier: per-opcode rules on types and copy-start/-done, the pairing of
`*-start` with `*-done` across a computation, and execution threads across calls (async
chains: minixla.ir.verifier_async).

`INSTRUCTION_RULES` maps an opcode to a check `(instr) -> None` that raises `RuleFailure(rule,
detail)`; `check_pairs(comp)` checks that every start has exactly one done, `check_threads`
that calls stay on their thread. minixla.ir.verifier runs them and reports failures like its
own.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .shapes import Shape

if TYPE_CHECKING:
    from .instruction import HloInstruction


class RuleFailure(Exception):
    def __init__(self, rule: str, detail: str):
        super().__init__(f"{rule}: {detail}")
        self.rule, self.detail = rule, detail


def _kind(shape: Shape) -> str:
    return shape.element_type.kind


def _compare_type(instr) -> None:
    """`type=` must suit the operands as XLA's verifier demands: FLOAT or TOTALORDER for
    floats and complex numbers, SIGNED for signed integers, UNSIGNED for unsigned ones and
    pred. Complex numbers have no order: only EQ and NE compare them."""
    kind = instr.attrs.get("type")
    if not instr.operand_count or not instr.operand(0).shape.is_array:
        return
    etype = instr.operand(0).shape.element_type
    if etype.is_complex and instr.attrs.get("direction") not in ("EQ", "NE", None):
        raise RuleFailure(
            "comparison direction", f"{etype.name} values have no order: compare them with EQ or NE"
        )
    if kind is None:
        return
    allowed = {
        "FLOAT": etype.is_float or etype.is_complex,
        "TOTALORDER": etype.is_float or etype.is_complex,
        "SIGNED": etype.is_signed,
        "UNSIGNED": etype.kind in ("unsigned", "pred"),
    }
    if not allowed.get(str(kind), True):
        raise RuleFailure("comparison type", f"type={kind} does not fit {etype.name} operands")


def _rng(instr) -> None:
    shapes = [o.shape for o in instr.operands]
    if len(shapes) != 2:
        raise RuleFailure("rng operands", f"rng takes its two bounds, got {len(shapes)} operands")
    if any(not s.is_array or s.rank for s in shapes):
        raise RuleFailure("rng operands", "the bounds of rng must be scalars")
    if len({s.dtype for s in shapes} | {instr.shape.dtype}) != 1:
        raise RuleFailure(
            "rng element type", "the bounds and the result must have one element type"
        )
    if not (instr.shape.element_type.is_float or instr.shape.element_type.is_integer):
        raise RuleFailure("rng element type", f"rng cannot produce {instr.shape.dtype}")
    if instr.attrs.get("distribution") == "rng_normal" and not instr.shape.element_type.is_float:
        raise RuleFailure("rng element type", "rng_normal produces floats only")


def _iota(instr) -> None:
    if instr.shape.is_array and _kind(instr.shape) == "pred":
        raise RuleFailure("iota element type", "iota cannot produce pred")


def _select(instr) -> None:
    if instr.shape.is_tuple:
        raise RuleFailure("select of tuples", "select works on arrays only")


def _conditional(instr) -> None:
    index = instr.operand(0).shape
    if not (index.is_array and index.rank == 0 and index.dtype in ("pred", "s32")):
        raise RuleFailure(
            "conditional index", f"the branch index must be pred[] or s32[], got {index}"
        )


def _composite_call(instr) -> None:
    if not instr.attrs.get("is_composite"):
        return
    frontend = str(instr.attrs.get("frontend_attributes", ""))
    if "composite.name" not in frontend:
        raise RuleFailure("composite call", "frontend_attributes need composite.name")
    version = re.search(r'composite\.version="?(-?\d+)', frontend)
    if version is not None and int(version.group(1)) < 0:
        raise RuleFailure("composite call", "composite.version must be a non-negative integer")


def _copy_start(instr) -> None:
    shape, operand = instr.shape, instr.operand(0).shape
    if (
        not shape.is_tuple
        or len(shape.tuple_shapes) != 3
        or not shape.tuple_shapes[0].compatible(operand)
        or shape.tuple_shapes[1] != operand
    ):
        raise RuleFailure(
            "copy-start shape",
            f"copy-start of {operand} returns (destination, {operand}, u32[]), declared {shape}",
        )


def _done_of(start: str):
    def check(instr) -> None:
        operand = instr.operand(0)
        if operand.opcode != start:
            raise RuleFailure(
                "async pair", f"{instr.opcode} needs a {start} operand, got {operand.opcode}"
            )
        want = operand.shape.tuple_shapes[0] if start == "copy-start" else None
        if want is not None and not instr.shape.compatible(want):
            raise RuleFailure(
                "copy-done shape", f"copy-done returns {want}, declared {instr.shape}"
            )

    return check


MAIN_THREAD = "main"
ASYNC_OPS = ("async-start", "async-update", "async-done")


def check_threads(module) -> tuple[HloInstruction, RuleFailure] | None:
    """(instruction, failure) for a call across execution threads, else None. A computation
    runs on its execution_thread. One that names none inherits a thread from its callers: an
    async-start's async_execution_thread (XLA's parser gives the called computation that
    thread), or the thread of the computation that calls it. Every other call stays on the
    caller's thread."""
    threads = {id(c): c.execution_thread for c in module.computations if c.execution_thread}
    pending = [
        (instr.attrs["calls"], instr.attrs.get("async_execution_thread", MAIN_THREAD))
        for c in module.computations
        for instr in c.instructions
        if instr.opcode == "async-start" and instr.attrs.get("calls") is not None
    ]
    pending += [(c, MAIN_THREAD) for c in module.computations if c is module.entry]
    pending += [(c, c.execution_thread) for c in module.computations if c.execution_thread]
    while pending:  # hand threads down the call graph
        comp, thread = pending.pop()
        if threads.setdefault(id(comp), thread) != thread:
            continue
        pending += [
            (callee, thread)
            for instr in comp.instructions
            if instr.opcode not in ASYNC_OPS
            for callee in instr.called_computations
            if id(callee) not in threads
        ]
    for comp in module.computations:
        thread = threads.get(id(comp), MAIN_THREAD)
        for instr in comp.instructions:
            if instr.opcode in ("async-update", "async-done"):
                continue  # they run what their async-start runs
            want = (
                instr.attrs.get("async_execution_thread", MAIN_THREAD)
                if instr.opcode == "async-start"
                else thread
            )
            for callee in instr.called_computations:
                got = threads.get(id(callee), MAIN_THREAD)
                if got != want:
                    return instr, RuleFailure(
                        "execution thread",
                        f'%{callee.name} runs on thread "{got}", the caller on "{want}"',
                    )
    return None


INSTRUCTION_RULES = {
    "compare": _compare_type,
    "rng": _rng,
    "iota": _iota,
    "select": _select,
    "conditional": _conditional,
    "call": _composite_call,
    "copy-start": _copy_start,
    "copy-done": _done_of("copy-start"),
    "all-reduce-done": _done_of("all-reduce-start"),
    "all-gather-done": _done_of("all-gather-start"),
    "collective-permute-done": _done_of("collective-permute-start"),
}

# start opcode -> the opcodes that continue it, ending with the done
_PAIRS = {
    "async-start": ("async-update", "async-done"),
    "copy-start": ("copy-done",),
    "all-reduce-start": ("all-reduce-done",),
    "all-gather-start": ("all-gather-done",),
    "collective-permute-start": ("collective-permute-done",),
}


def check_pairs(comp) -> tuple[object, RuleFailure] | None:
    """(instruction, failure) for a start without exactly one done, else None."""
    for instr in comp.instructions:
        follow = _PAIRS.get(instr.opcode)
        if follow is None:
            continue
        current, dones = instr, 0
        while True:
            users = [u for u in current.users if u.opcode in follow]
            if len(users) > 1:
                return instr, RuleFailure(
                    "async pair", f"%{current.name} has {len(users)} continuations"
                )
            if not users:
                if current.users or (current.is_root() and not comp.is_entry):
                    dones = 1  # passed on (a loop's state, a tuple): the done is elsewhere
                break
            current = users[0]
            if current.opcode == follow[-1]:
                dones += 1
                break
        if dones != 1:
            return instr, RuleFailure(
                "async pair", f"%{instr.name} ({instr.opcode}) has no {follow[-1]}"
            )
    for instr in comp.instructions:
        if instr.opcode == "async-update" and not instr.users and not instr.is_root():
            return instr, RuleFailure(
                "async pair", f"%{instr.name} (async-update) is neither continued nor passed on"
            )
    return None


__all__ = [
    "ASYNC_OPS",
    "INSTRUCTION_RULES",
    "MAIN_THREAD",
    "RuleFailure",
    "check_pairs",
    "check_threads",
]
