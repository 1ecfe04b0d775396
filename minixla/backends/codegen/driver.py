"""The driver both backends generate: one Python function per control computation, calling
kernels and host work in schedule order.

What is shared is here: the builder's naming and kernel bookkeeping, the dispatch that decides
how each instruction is computed (`DriverBuilder.decide`), the skeleton of one emitted driver
function, and the lowerings that only rename values (parameters' tuples, views, aliases,
tokens, calls), run control flow or call a host fallback.

A backend is a table of hooks (`Hooks`): the rules it tries, in order, for the instructions
the shared dispatch does not settle itself; how its host fallback runs the interpreter; and
the lowerings of the kinds its rules return (kernel launches, thunks, in-place updates).
Its builder subclass adds what is really its own: the buffer plan it asks for, the namespace
values live in, kernel specs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import warnings

from ...errors import ExecutionError, UnsupportedError
from ...ir.opcodes import COLLECTIVE
from .plan import constant_value, is_view_op
from .scalar import NotEmittable

CONTROL = frozenset({"while", "conditional", "call"})
ALIASES = frozenset({"opt-barrier", "domain", "add-dependency"})
TOKENS = frozenset({"after-all"})
LEAVES = frozenset({"parameter", "constant", "tuple", "get-tuple-element"})

# (builder, instr) -> (how, detail), or None when the rule does not apply; a rule may raise
# NotEmittable, whose message is the fallback's reason unless a later rule takes the op.
Rule = Callable[..., "tuple[str, object] | None"]
Lowering = Callable[..., None]


@dataclass(frozen=True)
class Hooks:
    """A backend's part of the driver."""

    rules: tuple[Rule, ...]  # tried in order after the ops every backend lowers alike
    fallback: Callable  # (instr, evaluator) -> run(*operands): the interpreter, on its values
    lowering: dict[str, Lowering] = field(default_factory=dict)  # over the shared LOWERING

    def lowering_for(self, how: str) -> Lowering:
        return self.lowering[how] if how in self.lowering else LOWERING[how]


class DriverBuilder:
    """Naming, kernel and evaluator bookkeeping and the shared dispatch. Subclasses set
    `hooks`, and provide `bind_host(prefix, fn)` (a name for a host function in the driver's
    namespace), `dtype(shape)` (a name for an element type), `kernel_spec(comp)` (the target's
    kernel for a fused computation; raises NotEmittable) and `new_function` (the planned driver
    function of one computation)."""

    hooks: Hooks
    max_while_iterations: int | None = None  # the compile option; None: loops are unbounded

    def __init__(self, module, options: dict):
        self.module = module
        self.max_while_iterations = options.get("max_while_iterations")
        self.kernels: dict = {}  # global name -> spec
        self.kernel_names: dict[str, str] = {}  # spec.kid -> global name
        self.functions: dict[int, str] = {}  # id(computation) -> driver function name
        self.chunks: list[str] = []
        self.fallbacks: Counter = Counter()
        self.fallback_reasons: list[tuple] = []  # (instruction, why no kernel)
        self.counter = 0
        self._evaluator = None

    def fresh_name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def kernel(self, spec) -> str:
        name = self.kernel_names.get(spec.kid)
        if name is None:
            name = self.kernel_names[spec.kid] = f"k{len(self.kernel_names)}"
            self.kernels[name] = spec
        return name

    @property
    def evaluator(self):
        if self._evaluator is None:
            from ...reference.evaluator import Evaluator

            self._evaluator = Evaluator(self.module)
        return self._evaluator

    def bind_host(self, prefix: str, fn) -> str:
        raise NotImplementedError

    def decide(self, instr) -> tuple[str, object]:
        """(how, detail): how the driver computes `instr`. `how` is one of plan.py's kinds
        (kernel/thunk/dus/scatter write into storage the plan provides; fallback, call, while
        and conditional return values of their own)."""
        op = instr.opcode
        if op in LEAVES or op in TOKENS:
            return op, None
        if op in ALIASES:
            return "alias", None
        if constant_value(instr) is not None:
            return "constant", None
        reason = "no native implementation"
        for rule in self.hooks.rules:
            try:
                decision = rule(self, instr)
            except NotEmittable as exc:
                reason = str(exc)
                continue
            if decision is not None:
                return decision
        self.fallback_reasons.append((instr, reason))
        return "fallback", self.hooks.fallback(instr, self.evaluator)

    def function(self, comp, *, is_entry: bool = False) -> str:
        """The name of `comp`'s driver function, emitting it the first time."""
        if id(comp) in self.functions:
            return self.functions[id(comp)]
        name = self.functions[id(comp)] = self.fresh_name("entry_" if is_entry else "f_")
        decisions = {id(i): self.decide(i) for i in comp.instructions}
        # A scheduled module runs in its schedule's order (buffer assignment relies on it).
        order = list(comp.instructions) if self.module.is_scheduled else comp.post_order()
        self.chunks.append(self.new_function(comp, order, decisions, is_entry).emit(name))
        return name

    def new_function(self, comp, order, decisions, is_entry: bool) -> DriverFunction:
        raise NotImplementedError


# ---- rules both backends use ------------------------------------------------------------------


def view_rule(b: DriverBuilder, instr):
    """Ops that are a view of operand 0 (reshape, a bitcast between row-major layouts)."""
    return ("view", None) if is_view_op(instr) else None


def control_rule(b: DriverBuilder, instr):
    """while, conditional and call: Python control flow around other driver functions."""
    return (instr.opcode, None) if instr.opcode in CONTROL else None


def dus_rule(b: DriverBuilder, instr):
    """dynamic-update-slice: the backend's in-place or copying update (its "dus" lowering)."""
    return ("dus", None) if instr.opcode == "dynamic-update-slice" else None


def fusion_rule(b, instr):
    """A fusion is one kernel (`b.kernel_spec`), or else a driver function of its own."""
    if instr.opcode != "fusion":
        return None
    try:
        return "kernel", b.kernel_spec(instr.attrs["calls"])
    except NotEmittable:
        return "call", None


def single_op_rule(opcodes: frozenset, *, tuples: frozenset = frozenset()) -> Rule:
    """A lone elementwise op, or one of `opcodes`, as the kernel of a one-instruction
    computation; tuple-shaped results only for `tuples`."""
    from ...passes.hlo_utils import single_op_computation

    def rule(b, instr):
        if instr.opdef.kind != "elementwise" and instr.opcode not in opcodes:
            return None
        if instr.shape.is_tuple and instr.opcode not in tuples:
            return None
        return "kernel", b.kernel_spec(single_op_computation(instr))

    return rule


class DriverFunction:
    """Source of one driver function; subclasses provide `exit(value, kinds, shape)` (the
    returned expression) and `outputs(instr)` (a buffer name per array leaf)."""

    # How the driver reads a predicate (while, two-way conditional) and a branch index.
    truth, index = "{}", "int({})"

    def __init__(self, builder, comp, plan, decisions, base: int, is_entry: bool):
        self.b, self.comp, self.plan, self.decisions = builder, comp, plan, decisions
        self.base, self.is_entry = base, is_entry
        self.lines: list[str] = []
        self.names: dict[int, object] = {}  # id(instr) -> value name (or tuple of names)

    def emit(self, name: str) -> str:
        params = [f"p{p.parameter_number}" for p in self.comp.parameters]
        for instr in self.plan.order:
            how, detail = self.decisions[id(instr)]
            self.lines.append(f"# {instr.name} = {instr.opcode} {instr.shape}")
            self.b.hooks.lowering_for(how)(self, instr, detail)
        root = self.comp.root
        result = self.exit(self.names[id(root)], self.plan.kinds[id(root)], root.shape)
        body = "\n".join("    " + line for line in self.lines)
        return f"def {name}({', '.join(params)}):\n{body}\n    return {result}\n"

    def value(self, instr):
        return self.names[id(instr)]

    def operands(self, instr) -> list[str]:
        return [source(self.value(op)) for op in instr.operands]

    def host_value(self, expr: str) -> str:
        """The expression a host fallback's result is used as (a backend may wrap it)."""
        return expr

    def assign(self, instr, expr: str) -> None:
        var = self.b.fresh_name("v")
        self.lines.append(f"{var} = {expr}")
        self.names[id(instr)] = var


def nest(shape, names):
    """`names` (an iterator, one per array leaf) nested the way `shape`'s tuples are."""
    if shape.is_tuple:
        return tuple(nest(s, names) for s in shape.tuple_shapes)
    return next(names)


def source(value) -> str:
    """A value name, or a nested tuple of them, as a source expression."""
    if isinstance(value, tuple):
        return "(" + "".join(source(v) + ", " for v in value) + ")"
    return value


# ---- lowerings both backends use ---------------------------------------------------------------


def lower_tuple(fn: DriverFunction, instr, _):
    fn.names[id(instr)] = tuple(fn.value(op) for op in instr.operands)


def lower_get_tuple_element(fn: DriverFunction, instr, _):
    operand = fn.value(instr.operand(0))
    index = instr.attrs["index"]
    if isinstance(operand, tuple):
        fn.names[id(instr)] = operand[index]
    else:
        fn.assign(instr, f"{operand}[{index}]")


def lower_view(fn: DriverFunction, instr, _):
    expr = f"{source(fn.value(instr.operand(0)))}.reshape({tuple(instr.shape.dims)!r})"
    if instr.shape.dtype != instr.operand(0).shape.dtype:  # a bitcast that retypes the bits
        expr += f".view({fn.b.dtype(instr.shape)})"
    fn.assign(instr, expr)


def lower_alias(fn: DriverFunction, instr, _):
    fn.names[id(instr)] = fn.value(instr.operand(0))


def lower_token(fn: DriverFunction, instr, _):
    fn.names[id(instr)] = "None"


def lower_while(fn: DriverFunction, instr, _):
    cond = fn.b.function(instr.attrs["condition"])
    body = fn.b.function(instr.attrs["body"])
    state = fn.b.fresh_name("s")
    fn.lines += while_lines(fn, instr, state, source(fn.value(instr.operand(0))), cond, body)
    fn.names[id(instr)] = state


def while_lines(
    fn: DriverFunction, instr, state: str, init: str, cond: str, body: str
) -> list[str]:
    """The driver's loop: `state = init`, then `state = body(state)` while `cond(state)`.
    With max_while_iterations, a runaway loop is an error naming it."""
    lines = [
        f"{state} = {init}",
        f"while {fn.truth.format(f'{cond}({state})')}:",
        f"    {state} = {body}({state})",
    ]
    limit = fn.b.max_while_iterations
    if limit is None:
        return lines
    count, fail = fn.b.fresh_name("n"), fn.b.bind_host("loop_limit", loop_limit)
    return [
        f"{count} = 0",
        *lines[:2],
        f"    {count} += 1",
        f"    if {count} > {int(limit)}:",
        f"        {fail}({instr.name!r}, {int(limit)})",
        lines[2],
    ]


def loop_limit(name: str, limit: int):
    raise ExecutionError(f"while %{name} ran more than {limit} iterations (max_while_iterations)")


def lower_conditional(fn: DriverFunction, instr, _):
    attrs = instr.attrs
    selector = source(fn.value(instr.operand(0)))
    if "branch_computations" in attrs:
        branches = list(attrs["branch_computations"])
        index = fn.index.format(selector)
    else:
        branches = [attrs["true_computation"], attrs["false_computation"]]
        index = f"(0 if {fn.truth.format(selector)} else 1)"
    names = [fn.b.function(c) for c in branches]
    chosen, result = fn.b.fresh_name("i"), fn.b.fresh_name("v")
    fn.lines.append(f"{chosen} = {index}")
    for k, name in enumerate(names):
        arg = source(fn.value(instr.operand(k + 1)))
        if k == len(names) - 1:  # XLA runs the last branch for any out-of-range index
            fn.lines += ["else:" if k else "if True:", f"    {result} = {name}({arg})"]
        else:
            fn.lines += [
                f"{'if' if k == 0 else 'elif'} {chosen} == {k}:",
                f"    {result} = {name}({arg})",
            ]
    fn.names[id(instr)] = result


def lower_call(fn: DriverFunction, instr, _):
    comp = instr.attrs["to_apply"] if instr.opcode == "call" else instr.attrs["calls"]
    name = fn.b.function(comp)
    fn.assign(instr, f"{name}({', '.join(fn.operands(instr))})")


def lower_fallback(fn: DriverFunction, instr, run):
    """The interpreter's handler on the operands' values (counted as `fallback.<opcode>`)."""
    fn.b.fallbacks[instr.opcode] += 1
    name = fn.b.bind_host("t", run)
    fn.assign(instr, fn.host_value(f"{name}({', '.join(fn.operands(instr))})"))


LOWERING: dict[str, Lowering] = {
    "tuple": lower_tuple,
    "get-tuple-element": lower_get_tuple_element,
    "view": lower_view,
    "alias": lower_alias,
    "after-all": lower_token,
    "while": lower_while,
    "conditional": lower_conditional,
    "call": lower_call,
    "fallback": lower_fallback,
}


class FallbackWarning(UserWarning):
    """Some instructions run through the reference interpreter's NumPy code (slow)."""


def report_fallbacks(backend: str, fallback_reasons, strict: bool) -> None:
    """One warning per compile naming every instruction without native code; with `strict`,
    a compile error instead."""
    # collectives run as host thunks meeting the other devices: that is their implementation
    slow = [(instr, why) for instr, why in fallback_reasons if instr.opdef.kind != COLLECTIVE]
    if not slow:
        return
    listed = "; ".join(f"{instr.opcode} %{instr.name} ({why})" for instr, why in slow)
    if strict:
        raise UnsupportedError(f"the {backend} backend has no native code for: {listed}")
    warnings.warn(
        f"minixla {backend}: {len(slow)} instruction(s) run through the reference interpreter: "
        f"{listed}",
        FallbackWarning,
        stacklevel=4,
    )
