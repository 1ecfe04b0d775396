"""The module verifier: structural invariants plus a replay of every shape rule.

`verify(module)` raises VerificationError naming the computation, the instruction (as HLO text)
and the rule broken. Shapes are compared as XLA's ShapeUtil::Compatible does (element types and
dims; layouts and dynamic flags ignored), so layout-changing ops such as copy and bitcast pass.

Mixed precision (XLA's HloVerifierOpts::allow_mixed_precision) is allowed by default, as in
the verifier XLA's test bases run on every module they load (HloTestBase and
HloHardwareIndependentTestBase: allow_mixed_precision_in_hlo_verifier=true): floats of
different widths may meet in an op, and a result may differ in float width from the inferred
one, except for the ops that only pass data on (_EXACT_RESULT_OPS). `allow_mixed_precision=False`
is XLA's HloVerifier default, used by its compilers and its own verifier tests.
"""

from __future__ import annotations

from ..errors import ShapeError, VerificationError, at_instruction
from .opcodes import OPCODES
from .sharding import HloSharding, check_collective, check_sharding
from .shape_inference import infer_shape
from .shape_rules_base import SignatureError, fmt, same, same_ignoring_fp_precision
from .verifier_attributes import ATTRIBUTE_RULES, GENERAL_RULES, check_buffer_writes
from .verifier_async import ASYNC_RULES, check_loop_async
from .verifier_collectives import COLLECTIVE_RULES, check_module_collectives
from .verifier_rules import INSTRUCTION_RULES, RuleFailure, check_pairs, check_threads

DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")
COMPARE_TYPES = ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")
FUSION_KINDS = ("kLoop", "kInput", "kOutput", "kCustom")
# ops whose `dimensions` name dims of operand 0 (the rest: broadcast's name result dims)
_OPERAND_DIMS = (
    "reverse",
    "reduce",
    "concatenate",
    "sort",
    "get-dimension-size",
    "set-dimension-size",
    "all-gather",
    "all-gather-start",
    "reduce-scatter",
    "all-to-all",
    "map",
    "scan",
)
_SINGLE_DIM = (
    "concatenate",
    "sort",
    "get-dimension-size",
    "set-dimension-size",
    "all-gather",
    "all-gather-start",
    "reduce-scatter",
)
# opcode -> its checks from every rule table
_TABLES = (INSTRUCTION_RULES, ASYNC_RULES, COLLECTIVE_RULES, ATTRIBUTE_RULES)
_RULES = {
    op: tuple(table[op] for table in _TABLES if op in table)
    for op in {op for table in _TABLES for op in table}
}
# ops whose result must have exactly the inferred element types even with mixed precision:
# they reinterpret or pass data on, never convert it (XLA's ShapeVerifier::CheckShape)
_EXACT_RESULT_OPS = frozenset(
    {
        "bitcast",
        "call",
        "conditional",
        "constant",
        "copy-done",
        "copy-start",
        "custom-call",
        "get-tuple-element",
        "infeed",
        "outfeed",
        "opt-barrier",
        "parameter",
        "recv",
        "recv-done",
        "send",
        "send-done",
        "tuple",
        "while",
        "dynamic-update-slice",
    }
)


class _Failure(Exception):
    """A rule broken inside one instruction or computation; verify() adds where."""

    def __init__(self, rule: str, detail: str):
        super().__init__(f"{rule}: {detail}")


def verify(module, *, allow_mixed_precision: bool = True) -> None:
    """Raises VerificationError for the first broken invariant of `module`. With
    `allow_mixed_precision=False`, floating-point types of different widths may not meet."""
    if not module.has_entry or not any(c is module.entry for c in module.computations):
        raise VerificationError(f"module {module.name}: no entry computation in the module")
    _check_unique_names(module)
    for comp in module.computations:  # the call-graph walk below needs known opcodes
        for instr in comp.instructions:
            if instr.opcode not in OPCODES:
                raise at_instruction(
                    VerificationError(f"{_where(comp, instr)}: unknown opcode: {instr.opcode}"),
                    instr,
                )
    _check_no_recursion(module)
    known = {id(c) for c in module.computations}
    for comp in module.computations:
        _check_computation(comp, known, allow_mixed_precision)
    for module_rule in (
        check_threads,
        check_loop_async,
        check_module_collectives,
        check_buffer_writes,
    ):
        found = module_rule(module)
        if found is None:
            continue
        instr, failure = found
        raise at_instruction(VerificationError(f"{_where(instr.parent, instr)}: {failure}"), instr)
    _check_entry(module)
    _check_distribution(module)


def _check_distribution(module, partitions: int | None = None) -> None:
    """Shardings fit their shapes and the header's num_partitions; replica groups fit the
    header's replica_count and num_partitions (counts the header leaves out are not checked)."""
    header = module.header_attrs
    if partitions is None and "num_partitions" in header:
        partitions = int(header["num_partitions"])
    replicas = int(header.get("replica_count", 1))
    for comp in module.computations:
        for instr in comp.instructions:
            try:
                sharding = instr.attrs.get("sharding")
                if isinstance(sharding, HloSharding):
                    check_sharding(sharding, instr.shape, partitions)
                if instr.opdef.kind == "collective" and partitions is not None:
                    check_collective(instr, replicas, partitions)
            except ValueError as exc:
                raise VerificationError(f"{_where(comp, instr)}: {exc}") from None


def verify_distribution(module, partitions: int) -> None:
    """Checks shardings and replica groups against `partitions` devices per replica."""
    _check_distribution(module, partitions)


def _where(comp, instr=None) -> str:
    text = f"computation %{comp.name}"
    if instr is None:
        return text
    try:
        shown = instr.to_text()
    except Exception:  # too broken to print (e.g. an unknown opcode): name it instead
        shown = f"%{instr.name} ({instr.opcode})"
    return f"{text}, instruction {shown}"


def _check_unique_names(module) -> None:
    owners: dict[str, str] = {}
    comp_names: set[str] = set()
    for comp in module.computations:
        if comp.name in comp_names:
            raise VerificationError(
                f"computation %{comp.name}: computation names must be "
                f"unique: %{comp.name} is defined twice"
            )
        comp_names.add(comp.name)
        for instr in comp.instructions:
            if instr.name in owners:
                raise VerificationError(
                    f"{_where(comp, instr)}: instruction names must be unique across the "
                    f"module: %{instr.name} is also defined in %{owners[instr.name]}"
                )
            owners[instr.name] = comp.name


def _check_no_recursion(module) -> None:
    """The call graph must be acyclic (no computation may call itself, even indirectly)."""
    state: dict[int, int] = {}  # 1 = on the current path, 2 = done

    def visit(comp, path):
        state[id(comp)] = 1
        for callee in comp.called_computations():
            if state.get(id(callee)) == 1:
                cycle = " -> ".join(f"%{c.name}" for c in path + [callee])
                raise VerificationError(
                    f"computation %{comp.name}: computations may not call "
                    f"themselves: call cycle {cycle}"
                )
            if id(callee) not in state:
                visit(callee, path + [callee])
        state[id(comp)] = 2

    for comp in module.computations:
        if id(comp) not in state:
            visit(comp, [comp])


def _check_computation(comp, known: set[int], mixed: bool) -> None:
    members = {id(i) for i in comp.instructions}
    if not comp.has_root or id(comp.root) not in members:
        raise VerificationError(
            f"{_where(comp)}: the root must be an instruction of the computation"
        )
    numbers = [p.parameter_number for p in comp.instructions if p.opcode == "parameter"]
    if sorted(numbers) != list(range(len(numbers))):
        duplicates = sorted({n for n in numbers if numbers.count(n) > 1})
        detail = (
            f"parameter number(s) {duplicates} appear more than once"
            if duplicates
            else f"numbers {sorted(numbers)} have gaps"
        )
        raise VerificationError(
            f"{_where(comp)}: parameters must be numbered 0..n-1 exactly once: {detail}"
        )
    for instr in comp.instructions:
        try:
            if instr.parent is not comp:
                raise _Failure(
                    "instruction parent", "the instruction's parent is another computation"
                )
            for operand in list(instr.operands) + list(instr.control_predecessors):
                if id(operand) not in members:
                    raise _Failure(
                        "operands must belong to the same computation",
                        f"%{operand.name} is not in %{comp.name}",
                    )
            _check_instruction(instr, known, mixed)
        except _Failure as failure:
            raise at_instruction(
                VerificationError(f"{_where(comp, instr)}: {failure}"), instr
            ) from None
    unpaired = check_pairs(comp)
    if unpaired is not None:
        instr, unmatched = unpaired
        raise at_instruction(VerificationError(f"{_where(comp, instr)}: {unmatched}"), instr)


def _check_instruction(instr, known: set[int], mixed: bool) -> None:
    opdef = OPCODES[instr.opcode]
    if not opdef.accepts_arity(instr.operand_count):
        raise _Failure(
            "operand count", f"{instr.opcode} does not take {instr.operand_count} operands"
        )
    for name in opdef.required_attrs:
        if name not in instr.attrs:
            raise _Failure("required attribute", f"{instr.opcode} needs {name}")
    for comp in instr.called_computations:
        if id(comp) not in known:
            raise _Failure("called computation", f"%{comp.name} is not in the module")
    if instr.opcode in _ATTR_CHECKS and instr.shape is not None:
        _ATTR_CHECKS[instr.opcode](instr)
    if instr.shape is not None:
        rules = GENERAL_RULES + _RULES.get(instr.opcode, ())
        try:
            for rule in rules:
                rule(instr)
        except RuleFailure as failure:
            raise _Failure(failure.rule, failure.detail) from None
    if instr.opcode == "constant":
        _check_literal(instr)
    try:
        inferred = infer_shape(instr, allow_mixed_precision=mixed)
    except SignatureError as exc:
        raise _Failure("called computation signature", str(exc)) from None
    except ShapeError as exc:
        raise _Failure("shape inference failed", str(exc)) from None
    exact = instr.opcode in _EXACT_RESULT_OPS or _moves_between_memory_spaces(instr)
    matches = same_ignoring_fp_precision if mixed and not exact else same
    if instr.shape is None or not matches(instr.shape, inferred):
        declared = "nothing" if instr.shape is None else fmt(instr.shape)
        raise _Failure("shape mismatch", f"declared {declared}, inferred {fmt(inferred)}")


def _memory_space(shape) -> int:
    return shape.layout.memory_space if shape.is_array and shape.layout is not None else 0


def _moves_between_memory_spaces(instr) -> bool:
    """A copy to or from another memory space (host offloading) moves the bytes as they are:
    it may not change the element type, mixed precision or not."""
    return (
        instr.opcode == "copy"
        and instr.operand_count == 1
        and _memory_space(instr.shape) != _memory_space(instr.operand(0).shape)
    )


def _check_compare(instr) -> None:
    direction, kind = instr.attrs.get("direction"), instr.attrs.get("type", "FLOAT")
    if direction not in DIRECTIONS:
        raise _Failure("comparison direction", f"{direction} is not one of {', '.join(DIRECTIONS)}")
    if kind not in COMPARE_TYPES:
        raise _Failure("comparison type", f"{kind} is not one of {', '.join(COMPARE_TYPES)}")


def _check_fusion(instr) -> None:
    if instr.attrs.get("kind") not in FUSION_KINDS:
        raise _Failure(
            "fusion kind", f"{instr.attrs.get('kind')} is not one of {', '.join(FUSION_KINDS)}"
        )


def _check_reduce_precision(instr) -> None:
    if instr.attrs["exponent_bits"] < 1 or instr.attrs["mantissa_bits"] < 0:
        raise _Failure("reduce-precision bits", "exponent_bits must be >= 1 and mantissa_bits >= 0")


def _check_tuple_index(instr) -> None:
    operand, index = instr.operand(0).shape, instr.attrs["index"]
    size = len(operand.tuple_shapes) if operand.is_tuple else 0
    if not 0 <= index < size:
        raise _Failure("tuple index", f"index={index} is not below the tuple size {size}")


def _check_iota(instr) -> None:
    rank, dim = instr.shape.rank, instr.attrs["iota_dimension"]
    if not 0 <= dim < rank:
        raise _Failure("iota dimension", f"iota_dimension={dim} is not below the rank {rank}")


def _check_dimensions(instr) -> None:
    """`dimensions` name distinct dims of the result (broadcast) or of operand 0."""
    dims, opcode = instr.attrs.get("dimensions"), instr.opcode
    if dims is None or (opcode != "broadcast" and not instr.operand_count):
        return
    shape = instr.shape if opcode == "broadcast" else instr.operand(0).shape
    rank = shape.rank if shape.is_array else 0
    if any(not 0 <= d < rank for d in dims) or len(set(dims)) != len(dims):
        raise _Failure(
            "dimensions", f"dimensions={list(dims)} must be unique and below the rank {rank}"
        )
    if opcode == "transpose" and len(dims) != rank:
        raise _Failure("dimensions", f"dimensions={list(dims)} is not a permutation of rank {rank}")
    if opcode in _SINGLE_DIM and len(dims) != 1:
        raise _Failure("dimensions", f"{opcode} takes exactly one dimension, got {list(dims)}")


_ATTR_CHECKS = {
    "compare": _check_compare,
    "fusion": _check_fusion,
    "reduce-precision": _check_reduce_precision,
    "get-tuple-element": _check_tuple_index,
    "iota": _check_iota,
    "broadcast": _check_dimensions,
    "transpose": _check_dimensions,
    **dict.fromkeys(_OPERAND_DIMS, _check_dimensions),
}


def _check_literal(instr) -> None:
    shape, literal = instr.shape, instr.literal
    if (
        shape is not None
        and shape.is_array
        and literal is not None
        and tuple(getattr(literal, "shape", ())) != shape.dims
    ):
        raise _Failure(
            "constant literal", f"the literal has dims {literal.shape}, the shape {fmt(shape)}"
        )


def _check_entry(module) -> None:
    entry = module.entry
    params = entry.parameters
    layout = module.entry_computation_layout
    where = f"computation %{entry.name}"
    for param in params:
        if any(leaf.is_buffer for _, leaf in param.shape.leaves()):
            raise at_instruction(
                VerificationError(
                    f"{where}, instruction {param.to_text()}: buffer: entry parameters cannot be "
                    f'buffers (b(...)); the entry pins arrays with custom_call_target="Pin"'
                ),
                param,
            )
    if layout is not None:
        if len(layout.parameters) != len(params):
            raise VerificationError(
                f"{where}: entry_computation_layout has {len(layout.parameters)} parameters, "
                f"the entry computation {len(params)}"
            )
        for param, shape in zip(params, layout.parameters):
            if not same(param.shape, shape):
                raise at_instruction(
                    VerificationError(
                        f"{where}, instruction {param.to_text()}: entry_computation_layout "
                        f"mismatch: the layout says {fmt(shape)}, the parameter is "
                        f"{fmt(param.shape)}"
                    ),
                    param,
                )
        if not same(entry.root.shape, layout.result):
            raise at_instruction(
                VerificationError(
                    f"{where}, instruction {entry.root.to_text()}: entry_computation_layout "
                    f"mismatch: the layout's result is {fmt(layout.result)}, the root returns "
                    f"{fmt(entry.root.shape)}"
                ),
                entry.root,
            )
    _check_aliasing(module, where)


def _subshape(shape, index, what: str, where: str):
    try:
        return shape.subshape(tuple(index))
    except IndexError:
        raise VerificationError(
            f"{where}: {what}: shape index {{{','.join(map(str, index))}}} "
            f"does not exist in {fmt(shape)}"
        ) from None


def _param_shape(params, number: int, what: str, where: str):
    if not 0 <= number < len(params):
        raise VerificationError(
            f"{where}: {what}: parameter {number} does not exist (the entry has {len(params)})"
        )
    return params[number].shape


def _check_aliasing(module, where: str) -> None:
    params, result = module.entry.parameters, module.entry.root.shape
    outputs, inputs = set(), set()
    for alias in module.input_output_alias:
        what = "input_output_alias"
        out = _subshape(result, alias.output_index, what, where)
        param = _param_shape(params, alias.param_number, what, where)
        inp = _subshape(param, alias.param_index, what, where)
        if not (out.is_array and inp.is_array):  # XLA: both sides dense arrays
            raise VerificationError(
                f"{where}: {what}: output {list(alias.output_index)} is "
                f"{fmt(out)} and parameter {alias.param_number} "
                f"{list(alias.param_index)} is {fmt(inp)}: only arrays "
                f"alias"
            )
        # Shapes and byte sizes may differ, as XLA's verifier allows unless layout-sensitive
        # (bf16[10,11,12] written back as its transpose); buffer assignment aliases only
        # buffers of one byte size and refuses a must-alias of two sizes.
        _check_alias_memory_space(module, alias, where)
        key = (alias.param_number, tuple(alias.param_index))
        if tuple(alias.output_index) in outputs or key in inputs:
            raise VerificationError(
                f"{where}: {what}: output {list(alias.output_index)} or "
                f"parameter {alias.param_number} is aliased twice"
            )
        outputs.add(tuple(alias.output_index))
        inputs.add(key)
    for number, index in module.buffer_donors:
        param = _param_shape(params, number, "buffer_donor", where)
        _subshape(param, index, "buffer_donor", where)


def _check_alias_memory_space(module, alias, where: str) -> None:
    """An aliased output shares its parameter's buffer, so the entry layout must put both in
    one memory space."""
    layout = module.entry_computation_layout
    if layout is None or not 0 <= alias.param_number < len(layout.parameters):
        return
    what = "input_output_alias"
    out = _subshape(layout.result, alias.output_index, what, where)
    inp = _subshape(layout.parameters[alias.param_number], alias.param_index, what, where)
    spaces = [
        s.layout.memory_space if s.is_array and s.layout is not None else 0 for s in (out, inp)
    ]
    if spaces[0] != spaces[1]:
        raise VerificationError(
            f"{where}: {what}: output {list(alias.output_index)} is in "
            f"memory space {spaces[0]}, its parameter "
            f"{alias.param_number} {list(alias.param_index)} in "
            f"{spaces[1]}"
        )
