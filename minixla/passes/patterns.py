"""A tiny pattern language over HLO instructions, and the one engine that rewrites with it.

Patterns describe an instruction tree: `m.Add(m.Any("x"), m.Splat(0))` matches an `add` whose
operands are anything (captured as `x`) and a constant zero (or a broadcast of one). Operand
order does not matter for ops the opcode table marks COMMUTATIVE. A capture name used twice
must bind the same instruction, so `m.Maximum(m.Any("x"), m.Any("x"))` is `max(x, x)`.

A `RuleSet` is a list of rules (pattern -> function). `rewrite(module, rules)` walks every
non-fusion computation in post order and applies the first rule that matches an instruction:
the rule is called with its captures as keyword arguments (`root` is the matched instruction)
and returns the replacement, or None for "does not apply". New instructions it builds may be
detached; the engine adds them, names them and removes what became dead. Rounds repeat until
nothing fires. `MINIXLA_TRACE_RULES=1` prints `algsimp.add_zero fired on %sum` to stderr.
`limit_rule_applications(k)` records every application and stops the engine after the k-th,
and keeps the attempt in progress, so a rule that raises can be named (`minixla bisect` uses
it to find the one rewrite that broke a program).

The same patterns back `minixla.testing.m`; `explain()` says where and why a match failed.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import os
import re
import sys
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from ..ir.instruction import HloInstruction
from ..ir.opcodes import COMMUTATIVE, OPCODES
from ..ir.shapes import Shape
from .graph_utils import (
    NameUniquer,
    has_side_effect,
    remove_if_dead,
    rewritable_computations,
    same_layout,
)

# -- patterns ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mismatch:
    """Why a pattern did not match: the operand path from the root, the instruction, a reason."""

    path: tuple[int, ...]
    instr: HloInstruction
    reason: str

    def __str__(self) -> str:
        where = "root" if not self.path else "root" + "".join(f".operand({i})" for i in self.path)
        from ..ir.printer import instruction_to_text

        text = instruction_to_text(self.instr, print_metadata=False)
        return f"at {where} ({text}): {self.reason}"


@dataclass(frozen=True)
class Pattern:
    opcodes: frozenset[str] | None = None  # None: any opcode
    operands: tuple["Pattern", ...] | None = None  # None: operands are not looked at
    name: str | None = None  # capture name
    checks: tuple[tuple[Callable[[HloInstruction], bool], str], ...] = ()
    alternatives: tuple["Pattern", ...] = ()  # non-empty: match any one of these instead
    label: str | None = None  # how repr() shows it, when the opcode and operands do not say
    more_operands: bool = False  # `...` after the operands: further operands are not looked at

    def where(self, check: Callable[[HloInstruction], bool], why: str = "") -> "Pattern":
        """This pattern plus a predicate; `why` describes what the predicate wants."""
        return replace(self, checks=self.checks + ((check, why or check.__name__),))

    def named(self, name: str) -> "Pattern":
        return replace(self, name=name)

    def match(self, instr: HloInstruction, captures: dict | None = None) -> bool:
        """True when `instr` matches; fills `captures` (name -> instruction) if given."""
        env = {} if captures is None else captures
        return _match(self, instr, env, (), None)

    def explain(self, instr: HloInstruction) -> Mismatch | None:
        """None when `instr` matches, else the deepest place where the match failed."""
        failures: list[Mismatch] = []
        if _match(self, instr, {}, (), failures):
            return None
        return max(failures, key=lambda f: len(f.path))

    def __or__(self, other: "Pattern") -> "Pattern":
        return Pattern(alternatives=(self, other))

    def __repr__(self) -> str:
        suffix = f" as {self.name}" if self.name else ""
        if self.label:
            return self.label + suffix
        if self.alternatives:
            return "(" + " | ".join(map(repr, self.alternatives)) + ")" + suffix
        head = "Any" if self.opcodes is None else "|".join(sorted(self.opcodes))
        inner = (
            ""
            if self.operands is None
            else ", ".join(list(map(repr, self.operands)) + ["..."] * self.more_operands)
        )
        return f"{head}({inner})" + suffix


def _match(pat: Pattern, instr, env: dict, path, failures) -> bool:
    def fail(reason: str) -> bool:
        if failures is not None:
            failures.append(Mismatch(path, instr, reason))
        return False

    if pat.opcodes is not None and instr.opcode not in pat.opcodes:
        return fail(f"opcode is {instr.opcode}, wanted {' or '.join(sorted(pat.opcodes))}")
    for check, why in pat.checks:
        if not check(instr):
            return fail(f"not {why}")
    if pat.alternatives:
        for alt in pat.alternatives:
            trial = dict(env)
            if _match(alt, instr, trial, path, failures):
                env.update(trial)
                return _bind(pat, instr, env, fail)
        return fail(f"matches none of {pat!r}")
    if not _bind(pat, instr, env, fail):
        return False
    return pat.operands is None or _match_operands(pat, instr, env, path, failures, fail)


def _match_operands(pat: Pattern, instr, env: dict, path, failures, fail) -> bool:
    assert pat.operands is not None
    count = instr.operand_count
    if count != len(pat.operands) and not (pat.more_operands and count >= len(pat.operands)):
        wanted = f"{'at least ' if pat.more_operands else ''}{len(pat.operands)}"
        return fail(f"has {count} operands, wanted {wanted}")
    orders = [tuple(range(len(pat.operands)))]
    if count == len(pat.operands) == 2 and OPCODES[instr.opcode].has(COMMUTATIVE):
        orders.append((1, 0))
    for order in orders:
        trial = dict(env)
        if all(
            _match(sub, instr.operand(i), trial, path + (i,), failures)
            for sub, i in zip(pat.operands, order)
        ):
            env.update(trial)
            return True
    return False


def _bind(pat: Pattern, instr, env: dict, fail) -> bool:
    if pat.name is None:
        return True
    bound = env.get(pat.name)
    if bound is not None and bound is not instr:
        return fail(f"capture {pat.name!r} is already %{bound.name}")
    env[pat.name] = instr
    return True


def op(
    opcode: str | tuple[str, ...] | None, *operands: Pattern, name: str | None = None
) -> Pattern:
    """An instruction with one of the given opcodes; operands are checked only when given, and
    a trailing `...` lets further operands go unchecked (`m.DynamicSlice(x, ...)`)."""
    codes = None if opcode is None else frozenset((opcode,) if isinstance(opcode, str) else opcode)
    for code in codes or ():
        if code not in OPCODES:
            raise ValueError(f"unknown opcode {code!r} in a pattern")
    more = bool(operands) and operands[-1] is Ellipsis
    operands = operands[:-1] if more else operands
    return Pattern(codes, tuple(operands) or (() if more else None), name, more_operands=more)


def values_equal(literal, value, dtype) -> bool:
    """Every element of `literal` equals `value`; a float zero must have the same sign."""
    arr = np.asarray(literal)
    if arr.size == 0:
        return False
    if callable(value):
        value = value(dtype)
    if value is None:
        return False
    if isinstance(value, (bool, np.bool_)) and dtype.kind != "pred":
        return False  # true/false only describe preds (1.0 is not "true")
    if dtype.is_float:
        arr = arr.astype(np.float64)
        if np.isnan(value):
            return bool(np.isnan(arr).all())
        same = bool((arr == value).all())
        return same and (value != 0 or bool((np.signbit(arr) == np.signbit(value)).all()))
    if dtype.kind == "pred":
        return bool((arr == bool(value)).all())
    return bool((arr == value).all())


def constant(value=None, *, name: str | None = None, scalar: bool = False) -> Pattern:
    """A constant; with `value`, every element equals it (`scalar`: and it is rank 0)."""
    pat = Pattern(frozenset({"constant"}), (), name)
    if scalar:
        pat = pat.where(lambda i: i.shape.rank == 0, "a scalar")
    if value is not None:
        pat = pat.where(
            lambda i: not i.elided and values_equal(i.literal, value, i.shape.element_type),
            f"all {_describe(value)}",
        )
    shown = "" if value is None else _describe(value)
    return replace(pat, label=f"{'scalar ' if scalar else ''}constant({shown})")


def splat(value=None, *, name: str | None = None) -> Pattern:
    """A constant whose elements all equal `value`, or a broadcast of such a constant."""
    inner = constant(value)
    shown = "" if value is None else _describe(value)
    return replace(
        inner | Pattern(frozenset({"broadcast"}), (inner,)), name=name, label=f"splat({shown})"
    )


def _describe(value) -> str:
    return getattr(value, "__name__", None) or str(value)


# Element values that depend on the type, usable wherever a pattern takes a value; None for
# types they do not describe (such a value matches nothing).
def all_ones(dtype):
    """true for pred, -1 (every bit set) for signed and the maximum for unsigned ints."""
    if dtype.kind == "pred":
        return True
    if not dtype.is_integer:
        return None
    return -1 if dtype.is_signed else int(np.iinfo(dtype.numpy).max)


def lowest(dtype):
    """-inf for floats, the minimum for ints, false for pred."""
    if dtype.is_float:
        return -np.inf
    if dtype.kind == "pred":
        return False
    return int(np.iinfo(dtype.numpy).min) if dtype.is_integer else None


def highest(dtype):
    """+inf for floats, the maximum for ints, true for pred."""
    if dtype.is_float:
        return np.inf
    if dtype.kind == "pred":
        return True
    return int(np.iinfo(dtype.numpy).max) if dtype.is_integer else None


class _Matchers:
    """`m.Add(a, b)`, `m.GetTupleElement(t)`, `m.Op("fusion")`, `m.Any("x")`, `m.Parameter(0)`.

    Op names are XLA's matcher names: CamelCase of the opcode, plus a few short aliases."""

    _ALIASES = {
        "Exp": "exponential",
        "Expm1": "exponential-minus-one",
        "Log1p": "log-plus-one",
        "Sin": "sine",
        "Cos": "cosine",
        "Gte": "get-tuple-element",
        "Concat": "concatenate",
        "Max": "maximum",
        "Min": "minimum",
        "Sub": "subtract",
        "Mul": "multiply",
        "Div": "divide",
        "Neg": "negate",
        "Rem": "remainder",
    }

    def __getattr__(self, attr: str):
        opcode = self._ALIASES.get(attr) or re.sub(r"(?<!^)(?=[A-Z])", "-", attr).lower()
        if opcode not in OPCODES:
            raise AttributeError(f"no opcode for matcher m.{attr} (looked for {opcode!r})")
        return lambda *operands, name=None: op(opcode, *operands, name=name)

    @staticmethod
    def Op(opcode=None, *operands: Pattern, name: str | None = None) -> Pattern:
        return op(opcode, *operands, name=name)

    @staticmethod
    def Any(name: str | None = None) -> Pattern:
        return Pattern(name=name)

    @staticmethod
    def Parameter(number: int | None = None, name: str | None = None) -> Pattern:
        pat = Pattern(frozenset({"parameter"}), (), name)
        if number is None:
            return pat
        return replace(
            pat.where(lambda i: i.parameter_number == number, f"parameter({number})"),
            label=f"parameter({number})",
        )

    @staticmethod
    def Constant(value=None, name: str | None = None) -> Pattern:
        return constant(value, name=name)

    @staticmethod
    def ConstantScalar(value=None, name: str | None = None) -> Pattern:
        return constant(value, name=name, scalar=True)

    @staticmethod
    def ConstantEffectiveScalar(value=None, name: str | None = None) -> Pattern:
        return constant(value, name=name)

    @staticmethod
    def Splat(value=None, name: str | None = None) -> Pattern:
        return splat(value, name=name)

    @staticmethod
    def Shape(pattern: Pattern, shape: str | Shape) -> Pattern:
        """`pattern` whose result shape is `shape` (layouts compared only when given)."""
        from ..text.parser import parse_shape

        want = parse_shape(shape) if isinstance(shape, str) else shape

        def same(instr) -> bool:
            got = instr.shape if _has_layout(want) else instr.shape.without_layout()
            return got == want

        return pattern.where(same, f"of shape {want}")


def _has_layout(shape: Shape) -> bool:
    if shape.is_tuple:
        return any(_has_layout(s) for s in shape.tuple_shapes)
    return shape.layout is not None


m = _Matchers()

# -- rules ------------------------------------------------------------------------------------


@dataclass
class Rule:
    name: str
    pattern: Pattern
    fn: Callable[..., HloInstruction | None]
    params: tuple[str, ...] = ()

    def apply(self, instr: HloInstruction) -> HloInstruction | None:
        env: dict = {}
        if not _match(self.pattern, instr, env, (), None):
            return None
        env["root"] = instr
        return self.fn(**{p: env[p] for p in self.params})


@dataclass
class RuleSet:
    """A named list of rules; rules are indexed by the root pattern's opcodes."""

    name: str
    rules: list[Rule] = field(default_factory=list)

    def rule(self, pattern: Pattern, name: str | None = None):
        """Decorator: `@rules.rule(m.Negate(m.Negate(m.Any("x"))))` over `def f(x): ...`."""

        def register(fn):
            params = tuple(inspect.signature(fn).parameters)
            self.rules.append(Rule(name or fn.__name__, pattern, fn, params))
            return fn

        return register

    def extend(self, *others: "RuleSet") -> "RuleSet":
        for other in others:
            self.rules.extend(other.rules)
        return self

    def index(self) -> dict[str | None, list[Rule]]:
        """opcode -> rules whose root can match it (key None: rules for any opcode)."""
        table: dict[str | None, list[Rule]] = {}
        for rule in self.rules:
            for code in _root_opcodes(rule.pattern):
                table.setdefault(code, []).append(rule)
        return table


def _root_opcodes(pat: Pattern) -> set[str | None]:
    if pat.alternatives:
        return set().union(*(_root_opcodes(a) for a in pat.alternatives))
    return {None} if pat.opcodes is None else set(pat.opcodes)


# -- building replacements --------------------------------------------------------------------


def new(opcode: str, shape: Shape, *operands: HloInstruction, **attrs) -> HloInstruction:
    """A detached instruction; the engine adds it to the computation and names it."""
    return HloInstruction(opcode, shape, operands, attrs, name=opcode)


def scalar_constant(value, dtype: str) -> HloInstruction:
    return HloInstruction.constant(value, Shape.array(dtype, ()))


def filled(value, shape: Shape) -> HloInstruction:
    """`value` in every element of `shape`: a scalar constant, broadcast when shape has rank."""
    scalar = scalar_constant(value, shape.dtype)
    if shape.rank == 0:
        scalar.shape = shape
        return scalar
    return new("broadcast", shape, scalar, dimensions=())


# -- the engine -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuleApplication:
    """One rewrite the engine made: `rules.rule` replaced the instruction `%instr`."""

    rules: str
    rule: str
    instr: str

    def __str__(self) -> str:
        return f"{self.rules}.{self.rule} on %{self.instr}"


@dataclass
class RuleBudget:
    """The applications made so far, how many may be made (None: no limit), and the rule
    being tried right now (so a rule that raises can be named)."""

    limit: int | None = None
    applied: list[RuleApplication] = field(default_factory=list)
    trying: RuleApplication | None = None

    def begin(self, rules: str, rule: str, instr: str) -> bool:
        """Notes an attempt; False when the budget is spent and no rule may be tried."""
        if self.limit is not None and len(self.applied) >= self.limit:
            return False
        self.trying = RuleApplication(rules, rule, instr)
        return True


_BUDGET: contextvars.ContextVar[RuleBudget | None] = contextvars.ContextVar(
    "rule_budget", default=None
)


@contextlib.contextmanager
def limit_rule_applications(limit: int | None = None):
    """Within the block every rule engine records its applications in the yielded budget and
    stops after `limit` of them (None: records without stopping)."""
    budget = RuleBudget(limit)
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def _mixed_precision(replacement: Shape, shape: Shape) -> bool:
    """The same dims in two float types: what mixed-precision operands give a rule."""
    return (
        replacement.is_array
        and shape.is_array
        and replacement.dims == shape.dims
        and replacement.element_type != shape.element_type
        and replacement.element_type.is_float
        and shape.element_type.is_float
    )


class RuleError(RuntimeError):
    """A rule returned a replacement whose shape is not compatible with the instruction's."""


def rewrite(module, rules: RuleSet, *, max_rounds: int = 16) -> bool:
    """Applies `rules` until none fires (at most `max_rounds` sweeps per computation)."""
    engine = _Engine(module, rules)
    changed = False
    for comp in rewritable_computations(module):
        for _ in range(max_rounds):
            if not engine.sweep(comp):
                break
            changed = True
    if engine.budget is not None:
        engine.budget.trying = None  # finished: nothing is being tried any more
    return changed


class _Engine:
    def __init__(self, module, rules: RuleSet):
        self.rules = rules
        self.index = rules.index()
        self.names = NameUniquer(module)
        self.trace = os.environ.get("MINIXLA_TRACE_RULES", "") not in ("", "0")
        self.effects: dict = {}  # computation -> contains a side effect (memo)
        self.budget = _BUDGET.get()

    def sweep(self, comp) -> bool:
        changed = False
        for instr in comp.post_order():
            if instr.parent is not comp or not self._rewritable(instr):
                continue
            for rule in self.index.get(instr.opcode, []) + self.index.get(None, []):
                budget = self.budget
                if budget is not None and not budget.begin(self.rules.name, rule.name, instr.name):
                    return changed  # spent: stop before trying another rule
                replacement = rule.apply(instr)
                if replacement is None or replacement is instr:
                    continue
                if self.trace:
                    print(f"{self.rules.name}.{rule.name} fired on %{instr.name}", file=sys.stderr)
                self.replace(comp, instr, replacement, rule.name)
                if budget is not None and budget.trying is not None:
                    budget.applied.append(budget.trying)
                changed = True
                break
        return changed

    def _rewritable(self, instr) -> bool:
        # Control edges pin an instruction in place; side effects must run as written.
        return not (
            instr.control_predecessors
            or instr.control_successors
            or has_side_effect(instr, self.effects)
        )

    def replace(self, comp, old, new_instr, rule: str) -> None:
        new_instr = self._fit(new_instr, old, rule)
        if new_instr.parent is None:
            self._install(comp, new_instr, top_name=old.name)
        operands = list(old.operands)
        old.replace_all_uses_with(new_instr)
        comp.remove_instruction(old)
        remove_if_dead(comp, operands)

    @staticmethod
    def _fit(new_instr, old, rule: str):
        if new_instr.parent is not None and _mixed_precision(new_instr.shape, old.shape):
            # An operand of a mixed-precision op (max(f16 x, f32 -inf) is f32): the rule's
            # identity gives the value, the instruction its type; widening is exact and
            # narrowing rounds once, as the op itself does. (What a rule builds must be typed.)
            return new("convert", old.shape, new_instr)
        if not new_instr.shape.compatible(old.shape):
            raise RuleError(f"rule {rule} replaced {old.to_text()} with a {new_instr.shape} value")
        if same_layout(new_instr.shape, old.shape):
            return new_instr
        if new_instr.parent is None:  # built by the rule: give it the layout it replaces
            new_instr.shape = old.shape
            return new_instr
        return new("copy", old.shape, new_instr)  # keep the value, restore the layout

    def _install(self, comp, root, top_name: str) -> None:
        """Adds `root` and its detached operands, operands first."""
        stack, order, seen = [root], [], set()
        while stack:
            instr = stack.pop()
            if id(instr) in seen:
                continue
            seen.add(id(instr))
            order.append(instr)
            stack.extend(o for o in instr.operands if o.parent is None)
        for instr in reversed(order):
            instr.name = top_name if instr is root else self.names.fresh(instr.name)
            comp.add_instruction(instr)
