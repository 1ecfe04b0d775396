"""HloVerifier rules on what instructions carry besides operands: output_to_operand_aliasing,
buffers (`b(T)` shapes), custom-call attributes, result_accuracy, origin= and layouts.

`GENERAL_RULES` are checked on every instruction, `ATTRIBUTE_RULES` by opcode; both raise
verifier_rules.RuleFailure, which minixla.ir.verifier reports with the instruction.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any

from .verifier_rules import ASYNC_OPS, RuleFailure

if TYPE_CHECKING:
    from .instruction import HloInstruction

_ALIAS = re.compile(r"\{([-\d,\s]*)\}\s*:\s*\(\s*(-?\d+)\s*,\s*\{([-\d,\s]*)\}\s*\)")


def output_to_operand_pairs(text: str):
    """`{{1}: (0, {}), ...}` as ((output index), operand number, (operand index)) triples;
    None when the text is not of that form."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        return None
    body = body[1:-1]
    pairs = [
        (
            tuple(int(v) for v in m.group(1).split(",") if v.strip()),
            int(m.group(2)),
            tuple(int(v) for v in m.group(3).split(",") if v.strip()),
        )
        for m in _ALIAS.finditer(body)
    ]
    if _ALIAS.sub("", body).replace(",", "").strip():
        return None
    return pairs


def _subshape(shape, index, what: str):
    try:
        return shape.subshape(index)
    except IndexError:
        raise RuleFailure(
            "output_to_operand_aliasing",
            f"{what} index {{{','.join(map(str, index))}}} does not exist in {shape}",
        ) from None


def _output_to_operand_aliasing(instr) -> None:
    """Each aliased output names a valid operand and shape index, and both buffers hold the
    same shape. (Async ops alias into their chain's state: minixla.ir.verifier_async.)"""
    attr = instr.attrs.get("output_to_operand_aliasing")
    if attr is None or instr.opcode in ASYNC_OPS:
        return
    pairs = output_to_operand_pairs(str(getattr(attr, "text", attr)))
    if pairs is None:
        raise RuleFailure("output_to_operand_aliasing", f"cannot read {attr}")
    for output_index, number, operand_index in pairs:
        if not 0 <= number < instr.operand_count:
            raise RuleFailure(
                "output_to_operand_aliasing",
                f"operand {number} does not exist ({instr.operand_count} operands)",
            )
        output = _subshape(instr.shape, output_index, "output")
        operand = _subshape(instr.operand(number).shape, operand_index, "operand")
        # layouts may differ: a custom call may re-lay-out what it aliases (Pin does)
        if not same_array(output, operand):
            where = ",".join(map(str, output_index))
            raise RuleFailure(
                "output_to_operand_aliasing",
                f"output {{{where}}} is {output}, but operand {number} there is {operand}",
            )


_API_VERSIONS = (
    "API_VERSION_ORIGINAL",
    "API_VERSION_STATUS_RETURNING",
    "API_VERSION_STATUS_RETURNING_UNIFIED",
    "API_VERSION_TYPED_FFI",
)
# custom-call targets whose signature XLA fixes: target -> (operand count, result shape)
_CUSTOM_CALL_SIGNATURES = {"GetRngSeed": (0, "u64[]")}


def _custom_call(instr) -> None:
    """A known api_version; one operand_layout_constraints entry per operand, each a shape
    the operand has; the signature of targets XLA fixes."""
    version = instr.attrs.get("api_version")
    if version is not None and str(version) not in _API_VERSIONS:
        raise RuleFailure(
            "custom-call api_version", f"{version} is not one of {', '.join(_API_VERSIONS)}"
        )
    constraints = instr.attrs.get("operand_layout_constraints")
    if constraints is not None:
        if len(constraints) != instr.operand_count:
            raise RuleFailure(
                "operand_layout_constraints",
                f"{len(constraints)} constraints for {instr.operand_count} operands",
            )
        for i, (want, operand) in enumerate(zip(constraints, instr.operands)):
            if not same_array(want, operand.shape):
                raise RuleFailure(
                    "operand_layout_constraints",
                    f"operand {i} is {operand.shape}, its constraint {want}",
                )
    target = instr.attrs.get("custom_call_target")
    if target in _CUSTOM_CALL_SIGNATURES:
        count, result = _CUSTOM_CALL_SIGNATURES[target]
        if instr.operand_count != count or str(instr.shape.without_layout()) != result:
            raise RuleFailure(
                "custom-call signature", f"{target} takes {count} operands and returns {result}"
            )


_ACCURACY = re.compile(
    r"\{\s*(?:mode\s*=\s*(?:default|highest)|tolerance\s*=\s*\{\s*"
    r"(?:(?:atol|rtol|ulps)\s*=\s*[-+.\deE]+\s*,?\s*)+\})\s*\}",
    re.I,
)


def _result_accuracy(instr) -> None:
    """result_accuracy={mode=default|highest} or {tolerance={atol=A,rtol=R,ulps=U}}."""
    accuracy = instr.attrs.get("result_accuracy")
    text = str(getattr(accuracy, "text", accuracy))
    if accuracy is not None and not _ACCURACY.fullmatch(text.strip()):
        raise RuleFailure(
            "result_accuracy",
            f"{text} is neither {{mode=default|highest}} nor "
            f"{{tolerance={{atol=..,rtol=..,ulps=..}}}}",
        )


# ops that may hold buffers `b(T)`: custom calls make and change them, the rest pass them on
_BUFFER_OPS = frozenset(
    {
        "custom-call",
        "parameter",
        "get-tuple-element",
        "tuple",
        "while",
        "conditional",
        "call",
        "opt-barrier",
        *ASYNC_OPS,
    }
)
# custom-call targets that make a buffer rather than take one over
_BUFFER_MAKERS = ("Pin", "CreateBuffer")


def _buffer_leaves(shape) -> list[tuple[int, ...]]:
    return [index for index, leaf in shape.leaves() if leaf.is_buffer]


def _buffers(instr) -> None:
    """XLA's buffer rules: only custom calls and the ops that pass values on hold buffers, and
    a custom call hands every buffer it takes back out (output_to_operand_aliasing) exactly
    once and returns no buffer it did not take (except the targets that make one); Pin and
    Unpin alias their result to their operand."""
    results = _buffer_leaves(instr.shape)
    if results and instr.opcode not in _BUFFER_OPS:
        raise RuleFailure("buffer", f"{instr.opcode} cannot produce a buffer")
    if instr.opcode != "custom-call":
        return
    target = instr.attrs.get("custom_call_target")
    attr = instr.attrs.get("output_to_operand_aliasing")
    pairs = output_to_operand_pairs(str(getattr(attr, "text", attr))) if attr is not None else []
    if target in ("Pin", "Unpin") and (tuple(), 0, tuple()) not in (pairs or []):
        raise RuleFailure(
            "buffer",
            f"{target} must alias its result to its operand: "
            f"output_to_operand_aliasing={{{{}}: (0, {{}})}}",
        )
    if pairs is None:
        return  # reported by the aliasing rule
    aliased_outputs = {out for out, _, _ in pairs}
    taken = [(number, index) for _, number, index in pairs]
    for output in results:
        if output not in aliased_outputs and target not in _BUFFER_MAKERS:
            raise RuleFailure(
                "buffer",
                f"output {{{','.join(map(str, output))}}} is a buffer no operand passed in",
            )
    for number, operand in enumerate(instr.operands):
        for index in _buffer_leaves(operand.shape):
            count = taken.count((number, index))
            if count > 1 or (count == 0 and target != "Unpin"):
                raise RuleFailure(
                    "buffer",
                    f"operand {number} buffer "
                    f"{{{','.join(map(str, index))}}} appears "
                    f"{count} times in the result, must once",
                )


def _buffer_source(instr, index: tuple[int, ...]):
    """The (instruction, index) that defines the buffer at `index` of `instr`, looking through
    get-tuple-element and tuple (which pass buffers on without writing them)."""
    while True:
        if instr.opcode == "get-tuple-element":
            instr, index = instr.operand(0), (instr.attrs["index"], *index)
        elif instr.opcode == "tuple" and index:
            instr, index = instr.operand(index[0]), index[1:]
        else:
            return instr, index


def check_buffer_writes(module) -> tuple[HloInstruction, RuleFailure] | None:
    """(instruction, failure) for a buffer value two custom calls take over, else None. A custom
    call that aliases an operand buffer to its output writes it and returns the next version,
    so the versions form one chain: each may be taken over once (XLA's VerifyBuffers)."""
    for comp in module.computations:
        writers: dict[tuple[int, tuple[int, ...]], Any] = {}
        for instr in comp.instructions:
            if instr.opcode != "custom-call":
                continue
            attr = instr.attrs.get("output_to_operand_aliasing")
            pairs = (
                output_to_operand_pairs(str(getattr(attr, "text", attr)))
                if attr is not None
                else None
            )
            for number, index in {(n, i) for _, n, i in pairs or []}:
                if number >= instr.operand_count:
                    continue  # reported by the aliasing rule
                operand = instr.operand(number)
                if tuple(index) not in _buffer_leaves(operand.shape):
                    continue
                source, at = _buffer_source(operand, tuple(index))
                first = writers.setdefault((id(source), at), instr)
                if first is not instr:
                    where = "{" + ",".join(map(str, at)) + "}" if at else ""
                    return instr, RuleFailure(
                        "buffer",
                        f"the buffer %{source.name}{where} is written by "
                        f"%{first.name} and again by %{instr.name}: each write "
                        f"must take the buffer the previous one returned",
                    )
    return None


def _origin_tree(text: str, pos: int = 0):
    """The structure of an original value: a list for `(a, b, ...)`, "leaf" for `{...}`,
    "any" for a placeholder like `[synthetic_call]`; with the position after it."""
    while text[pos : pos + 1].isspace():
        pos += 1
    opener = text[pos : pos + 1]
    if opener == "(":
        items, pos = [], pos + 1
        while True:
            item, pos = _origin_tree(text, pos)
            items.append(item)
            while text[pos : pos + 1].isspace():
                pos += 1
            if text[pos : pos + 1] != ",":
                break
            pos += 1
        if text[pos : pos + 1] != ")":
            raise ValueError(text)
        return items, pos + 1
    closer = {"{": "}", "[": "]"}.get(opener)
    if closer is None:
        raise ValueError(text)
    depth, i = 0, pos
    for i in range(pos, len(text)):
        depth += text[i] == opener
        depth -= text[i] == closer
        if depth == 0:
            break
    return ("leaf" if opener == "{" else "any"), i + 1


def _origin_fits(tree, shape) -> bool:
    if tree == "any":
        return True
    if shape.is_tuple:
        return (
            isinstance(tree, list)
            and len(tree) == len(shape.tuple_shapes)
            and all(_origin_fits(t, s) for t, s in zip(tree, shape.tuple_shapes))
        )
    return tree == "leaf"


def _origin(instr) -> None:
    """origin={...} (XLA's original value) has the instruction's tuple structure."""
    origin = instr.attrs.get("origin")
    if origin is None:
        return
    text = str(getattr(origin, "text", origin)).strip()
    try:
        tree, _ = _origin_tree(text[1:-1]) if text.startswith("{") else ("any", 0)
    except ValueError:
        return  # a spelling this reader does not know: left to the printer
    if not _origin_fits(tree, instr.shape):
        raise RuleFailure("origin", f"origin={text} does not have the structure of {instr.shape}")


def _physical_shapes(instr) -> None:
    """A layout's P(shape) describes the storage of a sparse array; dense ones have none."""
    for _, leaf in instr.shape.leaves():
        layout = leaf.layout if leaf.is_array else None
        if layout is not None and layout.physical_shape is not None and not layout.dim_level_types:
            raise RuleFailure(
                "layout", f"{leaf}: only sparse layouts (D(...)) take a physical shape P(...)"
            )


def same_array(a, b) -> bool:
    """Same element types and dims; a buffer `b(T)` holds a T."""
    strip = dataclasses.replace
    return strip(a, is_buffer=False).compatible(strip(b, is_buffer=False))


GENERAL_RULES = (_output_to_operand_aliasing, _result_accuracy, _buffers, _origin, _physical_shapes)
ATTRIBUTE_RULES = {"custom-call": _custom_call}

__all__ = ["ATTRIBUTE_RULES", "GENERAL_RULES", "output_to_operand_pairs", "same_array"]
