"""Small graph helpers shared by the global passes: unique names, call-graph contexts,
reachability, inlining a computation, and rebuilding tuples element by element."""

from __future__ import annotations


from ..ir.computation import HloComputation, dependencies
from ..ir.instruction import HloInstruction
from ..ir.opcodes import CONTROL_FLOW
from ..ir.module import HloModule, NameUniquer  # noqa: F401  (re-exported for the passes)
from ..ir.shapes import Shape

# Opcodes whose called computations run once per call, in sequence with the caller (as opposed
# to per-element "embedded" computations such as reduce's to_apply, or fused computations).


def sequential_computations(module: HloModule) -> list[HloComputation]:
    """The entry and every computation reached from it only through while/conditional/call:
    the computations that run instruction by instruction (callees before callers)."""
    found: dict[int, HloComputation] = {}
    stack = [module.entry]
    while stack:
        comp = stack.pop()
        if id(comp) in found:
            continue
        found[id(comp)] = comp
        for instr in comp.instructions:
            if instr.opcode in CONTROL_FLOW:
                stack.extend(instr.called_computations)
    return [c for c in module.computation_post_order() if id(c) in found]


def fused_computations(module: HloModule) -> set[int]:
    return {
        id(c)
        for i in module.all_instructions()
        if i.opcode == "fusion"
        for c in i.called_computations
    }


def ancestors(instr: HloInstruction) -> set[int]:
    """ids of every instruction `instr` depends on (operands and control predecessors)."""
    return dependencies([instr])


def reaches(source: HloInstruction, target: HloInstruction) -> bool:
    """True when `target` depends (transitively) on `source`."""
    return source is target or id(source) in ancestors(target)


def inline_computation(
    callee: HloComputation, args, into: HloComputation, names: NameUniquer
) -> HloInstruction:
    """Clones `callee` into `into` with parameter i replaced by args[i]; returns the new root."""
    mapping: dict[int, HloInstruction] = {}
    for instr in callee.post_order():
        if instr.opcode == "parameter":
            mapping[id(instr)] = args[instr.parameter_number]
            continue
        clone = instr.clone([mapping[id(o)] for o in instr.operands], name=names(instr.name))
        mapping[id(instr)] = into.add_instruction(clone)
    for instr in callee.instructions:
        for pred in instr.control_predecessors:
            if pred.opcode != "parameter" and instr.opcode != "parameter":
                mapping[id(pred)].add_control_dependency_to(mapping[id(instr)])
    return mapping[id(callee.root)]


def element(tuple_instr: HloInstruction, index: int, names: NameUniquer) -> HloInstruction:
    """Element `index` of a tuple-shaped instruction: the operand of a `tuple`, else a new gte."""
    if tuple_instr.opcode == "tuple":
        return tuple_instr.operand(index)
    gte = HloInstruction(
        "get-tuple-element",
        tuple_instr.shape.tuple_shapes[index],
        [tuple_instr],
        {"index": index},
        name=names("get-tuple-element"),
    )
    return tuple_instr.computation.add_instruction(gte)


def make_tuple(elements, comp: HloComputation, names: NameUniquer) -> HloInstruction:
    shape = Shape.tuple_of([e.shape for e in elements])
    return comp.add_instruction(HloInstruction("tuple", shape, elements, name=names("tuple")))


def remove_if_dead(instr: HloInstruction) -> None:
    """Removes `instr` and then any operands left without users (never parameters)."""
    stack = [instr]
    while stack:
        node = stack.pop()
        comp = node.parent
        if (
            comp is None
            or node.users
            or node is comp.root
            or node.opcode == "parameter"
            or node.control_successors
            or node.opdef.has("side_effect")
        ):
            continue
        operands = list(node.operands)
        comp.remove_instruction(node)
        stack.extend(operands)


def add_computation(module: HloModule, dtype: str, names: NameUniquer, name: str) -> HloComputation:
    """A new computation `name` of `module`: the sum of two `dtype` scalars (a reduce's
    to_apply)."""
    scalar = Shape.array(dtype, ())
    a = HloInstruction.parameter(0, scalar, names("x"))
    b = HloInstruction.parameter(1, scalar, names("y"))
    total = HloInstruction("add", scalar, [a, b], name=names("sum"))
    return module.add_computation(HloComputation(names(name), [a, b, total], total))


def single_op_computation(instr: HloInstruction) -> HloComputation:
    """A computation holding just `instr` (operands become parameters), so a lone op is seen
    as a one-instruction fusion (kernel builders, row fusion's producers)."""
    params = [
        HloInstruction.parameter(i, op.shape, name=f"param_{i}")
        for i, op in enumerate(instr.operands)
    ]
    clone = instr.clone(params)
    clone.name = instr.name
    return HloComputation(f"single.{instr.name}", params + [clone], clone)
