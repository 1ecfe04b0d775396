"""What the CPU and CUDA drivers (cpu/driver.py, cuda/driver.py) share: the builder's naming
and kernel bookkeeping, the skeleton of one emitted driver function, and the lowerings that only
rename values (parameters' tuples, views, aliases, tokens, calls)."""
from __future__ import annotations

from ...errors import ExecutionError


class DriverBuilder:
    """Naming, kernel and evaluator bookkeeping; subclasses set `module`, `kernels`,
    `kernel_names`, `counter` and `_evaluator` in their __init__, and provide
    `bind_host(prefix, fn)` (a name for a host function in the driver's namespace)."""

    max_while_iterations: int | None = None  # the compile option; None: loops are unbounded

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


class DriverFunction:
    """Source of one driver function; subclasses provide `lowering` (how -> lowering),
    `exit(value, kinds, shape)` (the returned expression) and `operands`."""

    lowering: dict = {}
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
            self.lowering[how](self, instr, detail)
        root = self.comp.root
        result = self.exit(self.names[id(root)], self.plan.kinds[id(root)], root.shape)
        body = "\n".join("    " + line for line in self.lines)
        return f"def {name}({', '.join(params)}):\n{body}\n    return {result}\n"

    def value(self, instr):
        return self.names[id(instr)]

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


# ---- lowerings both drivers use ---------------------------------------------------------------

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


def while_lines(fn: DriverFunction, instr, state: str, init: str, cond: str,
                body: str) -> list[str]:
    """The driver's loop: `state = init`, then `state = body(state)` while `cond(state)`.
    With max_while_iterations, a runaway loop is an error naming it."""
    lines = [f"{state} = {init}", f"while {fn.truth.format(f'{cond}({state})')}:",
             f"    {state} = {body}({state})"]
    limit = fn.b.max_while_iterations
    if limit is None:
        return lines
    count, fail = fn.b.fresh_name("n"), fn.b.bind_host("loop_limit", loop_limit)
    return [f"{count} = 0", *lines[:2], f"    {count} += 1",
            f"    if {count} > {int(limit)}:", f"        {fail}({instr.name!r}, {int(limit)})",
            lines[2]]


def loop_limit(name: str, limit: int):
    raise ExecutionError(f"while %{name} ran more than {limit} iterations "
                         f"(max_while_iterations)")


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
            fn.lines += [f"{'if' if k == 0 else 'elif'} {chosen} == {k}:",
                         f"    {result} = {name}({arg})"]
    fn.names[id(instr)] = result


def lower_call(fn: DriverFunction, instr, _):
    comp = instr.attrs["to_apply"] if instr.opcode == "call" else instr.attrs["calls"]
    name = fn.b.function(comp)
    fn.assign(instr, f"{name}({', '.join(source(o) for o in fn.operands(instr))})")
