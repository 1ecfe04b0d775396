"""Automatic sharding: shardings chosen for an unannotated program on N devices (XLA's
auto-sharding pass, after Alpa's intra-operator pass).

Every array instruction of the entry gets a list of strategies (auto_sharding_strategies.py):
the sharding of its result, the shardings it needs of its operands, and what it costs on one
device: flops, bytes sent by the collective it runs itself (the all-reduce of a dot whose
contracting dim is split), and bytes its result holds. Which operand shardings to try comes
from a table per op family (dot: each mesh axis cuts the batch, row (M), column (N) or
contracting (K) dim; elementwise: every operand sharded alike; parameters: any sharding);
spmd_rules.plan() then says what the partitioner would really do with them, so the costs
are those of the program that runs. An edge from a producer to a consumer costs the bytes
resharding sends (all-gather, all-to-all, collective-permute; slicing a replicated value is
free). Ops without a row run replicated and say why.

The choice is an integer linear program (scipy.optimize.milp, HiGHS): one binary per
(instruction, strategy), one [0, 1] variable per (edge, producer strategy, consumer
strategy) that the marginal constraints tie to the product, and the peak per-device memory
over the schedule (a live-range sum per program point, bounded by the memory limit). It
minimizes
    communication bytes + compute_weight * flops + memory_weight * peak bytes.

The result is the module annotated: every chosen sharding as `sharding=`, and a `Sharding`
custom call (as with_sharding_constraint writes) wherever a consumer wants an operand
resharded. Sharding propagation and the SPMD partitioner then do the rest.
The devices form a mesh (`mesh_shape`, by default one axis of all N): each mesh axis cuts at
most one dim of an array, evenly. Instructions that already carry a sharding keep it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import MinixlaError
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule, NameUniquer
from ..ir.sharding import HloSharding
from .auto_sharding_strategies import (
    Strategy,
    replicated_like,
    reshard_bytes,
    shard_bytes,
    strategies,
)
from .base import Pass, register_pass
from .shardy import GLOBAL_TO_LOCAL, shardy_target
from .spmd_partitioner import same_sharding


class AutoShardingError(MinixlaError):
    """No sharding fits the memory limit, the solver is missing, or it failed."""


@dataclass(frozen=True)
class AutoShardingOptions:
    """memory_limit_bytes: the most one device may hold at once (None: no limit).
    memory_weight / compute_weight: what a byte of peak memory and a flop cost, in bytes
    sent (a device that does ~10 flops in the time it sends a byte: 0.1).
    mesh_shape: the devices as a mesh of these axis sizes, in device order (None: one axis
    of all of them); each axis cuts at most one dim of an array.
    time_limit_seconds: the solver stops there with the best choice found so far (the
    report says it is not proven optimal)."""

    memory_limit_bytes: int | None = None
    memory_weight: float = 0.5
    compute_weight: float = 0.1
    mesh_shape: tuple[int, ...] | None = None
    time_limit_seconds: float = 60.0


@dataclass
class Choice:
    instr: HloInstruction
    strategies: list[Strategy]
    chosen: int = 0
    reason: str | None = None  # why the instruction runs replicated without choice

    @property
    def strategy(self) -> Strategy:
        return self.strategies[self.chosen]


@dataclass
class AutoShardingResult:
    """What the solver chose; `module` is the annotated program."""

    module: HloModule
    num_devices: int
    choices: list[Choice]
    communication_bytes: float = 0.0  # estimated, per device: op collectives + resharding
    peak_memory_bytes: float = 0.0
    replicated_peak_memory_bytes: float = 0.0
    parameter_bytes: int = 0  # per device
    replicated_parameter_bytes: int = 0
    objective: float = 0.0
    optimal: bool = True  # False: the solver's time limit ended the search
    fallbacks: dict[str, str] = field(default_factory=dict)  # name -> reason

    def sharding_of(self, name: str) -> HloSharding:
        for choice in self.choices:
            if choice.instr.name == name:
                return choice.strategy.out
        raise KeyError(f"no instruction %{name} among the auto-sharded ones")

    @property
    def parameter_shardings(self) -> list[HloSharding]:
        """The chosen sharding of each entry parameter, in parameter order."""
        params = sorted(
            (c for c in self.choices if c.instr.opcode == "parameter"),
            key=lambda c: c.instr.parameter_number or 0,
        )
        return [c.strategy.out for c in params]

    def __str__(self) -> str:
        lines = [
            f"auto-sharding on {self.num_devices} devices"
            f"{'' if self.optimal else ' (time limit: best found, not proven optimal)'}"
            f": estimated "
            f"{self.communication_bytes:.0f} bytes sent per device, peak memory "
            f"{self.peak_memory_bytes:.0f} bytes per device (replicated: "
            f"{self.replicated_peak_memory_bytes:.0f}), parameters "
            f"{self.parameter_bytes} bytes per device (replicated: "
            f"{self.replicated_parameter_bytes})"
        ]
        for choice in self.choices:
            why = (
                f"  ({choice.reason})"
                if choice.reason
                else f"  [{len(choice.strategies)} strategies]"
            )
            lines.append(f"  %{choice.instr.name}: {choice.strategy.label}{why}")
        return "\n".join(lines)


# -- the integer program ----------------------------------------------------------------------
class _Program:
    """Variables and constraints of the ILP, built up row by row."""

    def __init__(self):
        self.costs: list[float] = []
        self.integral: list[int] = []
        self.upper: list[float] = []
        self.rows: list[tuple[dict[int, float], float, float]] = []

    def variables(self, costs, integral: bool, upper: float = 1.0) -> list[int]:
        start = len(self.costs)
        self.costs += list(costs)
        self.integral += [int(integral)] * len(costs)
        self.upper += [upper] * len(costs)
        return list(range(start, len(self.costs)))

    def row(self, coefficients: dict[int, float], lower: float, upper: float) -> None:
        self.rows.append((coefficients, lower, upper))

    def solve(self, time_limit: float):
        try:
            from scipy.optimize import Bounds, LinearConstraint, milp
            from scipy.sparse import coo_matrix
        except ImportError:
            raise AutoShardingError(
                "auto-sharding solves an integer program with scipy.optimize.milp; install "
                "scipy (pip install 'minixla[autoshard]')"
            ) from None
        entries = [
            (r, c, v)
            for r, (coefficients, _, _) in enumerate(self.rows)
            for c, v in coefficients.items()
        ]
        rows, columns, values = zip(*entries) if entries else ((), (), ())
        matrix = coo_matrix(
            (values, (rows, columns)), shape=(len(self.rows), len(self.costs))
        ).tocsr()
        constraint = LinearConstraint(
            matrix, [lo for _, lo, _ in self.rows], [hi for _, _, hi in self.rows]
        )
        # without presolve: with it, HiGHS (scipy 1.17) called a choice 0.2% above the
        # optimum optimal on the 4-layer MLP of bench/auto_sharding.py
        return milp(
            np.array(self.costs),
            constraints=constraint,
            integrality=np.array(self.integral),
            bounds=Bounds(np.zeros(len(self.costs)), np.array(self.upper)),
            options={"presolve": False, "time_limit": time_limit},
        )


def _live_ranges(comp, order) -> dict[int, tuple[int, int]]:
    """id(instr) -> (first, last) program point it is live at; parameters and the outputs
    live throughout."""
    position = {id(i): t for t, i in enumerate(order)}
    end = len(order) - 1
    ranges = {}
    outputs = {id(comp.root)} | (
        {id(o) for o in comp.root.operands} if comp.root.opcode == "tuple" else set()
    )
    for instr in order:
        last = max(
            (position[id(u)] for u in instr.users if id(u) in position), default=position[id(instr)]
        )
        first = 0 if instr.opcode == "parameter" else position[id(instr)]
        ranges[id(instr)] = (
            first,
            end if id(instr) in outputs or instr.opcode == "parameter" else last,
        )
    return ranges


def solve(comp, n: int, options: AutoShardingOptions) -> tuple[list[Choice], float, bool]:
    """The chosen strategy of every instruction of `comp`, the objective's value, and whether
    the solver proved it optimal (else its time limit ended the search)."""
    order = comp.post_order()
    mesh = tuple(options.mesh_shape or (n,))
    if int(np.prod(mesh)) != n:
        raise AutoShardingError(
            f"a mesh of shape {mesh} has {int(np.prod(mesh))} devices, "
            f"not the {n} the program runs on"
        )
    root_tuple = comp.root if comp.root.opcode == "tuple" else None
    choices: dict[int, Choice] = {}
    for instr in order:
        if instr is not root_tuple:  # a tuple of outputs: each keeps its own sharding
            found, reason = strategies(instr, mesh)
            choices[id(instr)] = Choice(instr, found, reason=reason)
    program = _Program()
    select: dict[int, list[int]] = {}
    for key, choice in choices.items():
        costs = [s.communication + options.compute_weight * s.flops for s in choice.strategies]
        select[key] = program.variables(costs, integral=True)
        program.row({v: 1.0 for v in select[key]}, 1.0, 1.0)
    ranges = _live_ranges(comp, order)
    _memory_rows(program, choices, select, order, ranges, n, options)
    result = program.solve(options.time_limit_seconds)
    if result.x is None:
        raise _no_solution(comp, result, choices, ranges, len(order), n, options)
    for key, choice in choices.items():
        choice.chosen = int(np.argmax([result.x[v] for v in select[key]]))
    return list(choices.values()), float(result.fun), result.status == 0


def _no_solution(comp, result, choices, ranges, points: int, n: int, options) -> AutoShardingError:
    limit = options.memory_limit_bytes
    smallest = _smallest_peak(choices, ranges, points)
    if limit is not None and (result.status == 2 or smallest > limit):
        return AutoShardingError(
            f"%{comp.name}: no sharding on {n} devices keeps the memory per device under "
            f"{limit} bytes (with every value at its smallest, the values alone peak at "
            f"{smallest:.0f} bytes); raise memory_limit_bytes or use more devices"
        )
    if result.status == 1:
        return AutoShardingError(
            f"%{comp.name}: the auto-sharding solver found no sharding within "
            f"time_limit_seconds={options.time_limit_seconds}; raise the limit"
        )
    return AutoShardingError(f"%{comp.name}: the auto-sharding solver failed: {result.message}")


def _memory_rows(program, choices, select, order, ranges, n, options) -> None:
    """The resharding edges, and the peak variable: at least the bytes live at every program
    point (the values in their live ranges plus the resharded copies their consumers hold)."""
    position = {id(instr): t for t, instr in enumerate(order)}
    copies: list[dict[int, float]] = [{} for _ in order]
    for key, choice in choices.items():
        for k, operand in enumerate(choice.instr.operands):
            if id(operand) not in choices:
                continue
            extra = _edge(
                program, choices[id(operand)], select[id(operand)], choice, select[key], k, n
            )
            here = copies[position[key]]
            for v, m in extra.items():
                here[v] = here.get(v, 0.0) + m
    limit = options.memory_limit_bytes
    peak = program.variables(
        [options.memory_weight], integral=False, upper=np.inf if limit is None else float(limit)
    )[0]
    for t in range(len(order)):
        live = dict(copies[t])
        for key, c in choices.items():
            if ranges[key][0] <= t <= ranges[key][1]:
                for v, s in zip(select[key], c.strategies):
                    live[v] = live.get(v, 0.0) + s.memory
        if live:
            program.row({**live, peak: -1.0}, -np.inf, 0.0)


def _edge(
    program, producer: Choice, produced, consumer: Choice, consumed, k: int, n: int
) -> dict[int, float]:
    """Adds the resharding cost of operand k of `consumer`, linear where either side has one
    strategy, else through product variables; returns the bytes the resharded copy holds
    while the consumer runs, per variable."""
    shape = consumer.instr.operand(k).shape
    cost = np.array(
        [
            [reshard_bytes(shape, p.out, c.operands[k], n) for c in consumer.strategies]
            for p in producer.strategies
        ]
    )
    if not cost.any():
        return {}
    copy = np.array(
        [
            [
                shard_bytes(shape, c.operands[k]) if cost[i, j] else 0.0
                for j, c in enumerate(consumer.strategies)
            ]
            for i in range(len(producer.strategies))
        ]
    )
    memory: dict[int, float] = {}
    if len(produced) == 1 or len(consumed) == 1:
        for i, v in enumerate(produced):
            for j, w in enumerate(consumed):
                target = w if len(produced) == 1 else v
                program.costs[target] += cost[i, j]
                memory[target] = memory.get(target, 0.0) + copy[i, j]
        return memory
    pairs = program.variables(cost.reshape(-1), integral=False)
    grid = np.array(pairs).reshape(cost.shape)
    for i, v in enumerate(produced):
        program.row({**{int(p): 1.0 for p in grid[i]}, v: -1.0}, 0.0, 0.0)
    for j, w in enumerate(consumed):
        program.row({**{int(p): 1.0 for p in grid[:, j]}, w: -1.0}, 0.0, 0.0)
    return {int(p): float(m) for p, m in zip(grid.reshape(-1), copy.reshape(-1)) if m}


def _smallest_peak(choices, ranges, points: int) -> float:
    return max(
        (
            sum(
                min(s.memory for s in c.strategies)
                for key, c in choices.items()
                if ranges[key][0] <= t <= ranges[key][1]
            )
            for t in range(points)
        ),
        default=0.0,
    )


# -- annotating -------------------------------------------------------------------------------
def annotate(module: HloModule, choices: list[Choice]) -> None:
    """Writes the chosen shardings; a `Sharding` custom call reshards each operand whose
    producer's sharding is not the one its consumer's strategy needs."""
    comp, names = module.entry, NameUniquer(module)
    by_id = {id(c.instr): c for c in choices}
    constraints: dict[tuple, HloInstruction] = {}
    for choice in choices:
        instr, strategy = choice.instr, choice.strategy
        if not instr.shape.is_tuple:
            instr.attrs["sharding"] = strategy.out
        for k, operand in enumerate(list(instr.operands)):
            have = by_id[id(operand)].strategy.out if id(operand) in by_id else None
            want = strategy.operands[k]
            if have is None or operand.shape.is_tuple or same_sharding(have, want):
                continue
            key = (id(operand), str(want))
            if key not in constraints:
                call = HloInstruction(
                    "custom-call",
                    operand.shape,
                    [operand],
                    {"custom_call_target": "Sharding", "sharding": want},
                    name=names(f"{operand.name}.reshard"),
                )
                constraints[key] = comp.add_instruction(call)
            instr.replace_operand(k, constraints[key])


def evaluate(comp, choices: list[Choice], n: int) -> tuple[float, float, float]:
    """(bytes sent, flops, peak bytes) per device of the chosen strategies, counted as the
    integer program counts them (resharded copies live while their consumer runs)."""
    order = comp.post_order()
    position = {id(instr): t for t, instr in enumerate(order)}
    by_id = {id(c.instr): c for c in choices}
    sent = sum(c.strategy.communication for c in choices)
    flops = sum(c.strategy.flops for c in choices)
    copies = [0.0] * len(order)
    for choice in choices:
        for k, operand in enumerate(choice.instr.operands):
            if id(operand) not in by_id:
                continue
            want = choice.strategy.operands[k]
            moved = reshard_bytes(operand.shape, by_id[id(operand)].strategy.out, want, n)
            if moved:
                sent += moved
                copies[position[id(choice.instr)]] += shard_bytes(operand.shape, want)
    ranges = _live_ranges(comp, order)
    peak = max(
        (
            copies[t]
            + sum(
                c.strategy.memory
                for c in choices
                if ranges[id(c.instr)][0] <= t <= ranges[id(c.instr)][1]
            )
            for t in range(len(order))
        ),
        default=0.0,
    )
    return sent, flops, peak


def _whole_bytes(shape) -> int:
    return shard_bytes(shape, replicated_like(shape))


def _totals(result: AutoShardingResult, comp, n: int) -> None:
    choices = result.choices
    result.communication_bytes, _, result.peak_memory_bytes = evaluate(comp, choices, n)
    ranges = _live_ranges(comp, comp.post_order())
    result.replicated_peak_memory_bytes = max(
        (
            sum(
                _whole_bytes(c.instr.shape)
                for c in choices
                if ranges[id(c.instr)][0] <= t <= ranges[id(c.instr)][1]
            )
            for t in range(len(ranges))
        ),
        default=0.0,
    )
    params = [c for c in choices if c.instr.opcode == "parameter"]
    result.parameter_bytes = sum(c.strategy.memory for c in params)
    result.replicated_parameter_bytes = sum(_whole_bytes(c.instr.shape) for c in params)
    result.fallbacks = {
        c.instr.name: c.reason for c in choices if c.reason and c.reason != "sharding given"
    }


def auto_shard(
    module: HloModule, num_devices: int, options: AutoShardingOptions | None = None
) -> AutoShardingResult:
    """A copy of `module` with shardings chosen for `num_devices` devices, and the report."""
    return auto_shard_in_place(module.clone(), num_devices, options)


def auto_shard_in_place(
    module: HloModule, num_devices: int, options: AutoShardingOptions | None = None
) -> AutoShardingResult:
    from .call_inliner import CallInliner

    if num_devices < 1:
        raise AutoShardingError(f"auto-sharding needs at least one device, got {num_devices}")
    if any(shardy_target(i) == GLOBAL_TO_LOCAL for i in module.all_instructions()):
        raise AutoShardingError(
            f"{module.name}: auto-sharding does not handle shard_map "
            f"(manual) regions; annotate this program by hand"
        )
    CallInliner().run(module)  # shardings flow through calls, as in the partitioner
    comp = module.entry
    choices, objective, optimal = solve(comp, num_devices, options or AutoShardingOptions())
    # costs are measured on the program as written, before resharding calls go in
    result = AutoShardingResult(module, num_devices, choices, objective=objective, optimal=optimal)
    _totals(result, comp, num_devices)
    annotate(module, choices)
    module.header_attrs["num_partitions"] = str(num_devices)
    return result


@register_pass
class AutoSharding(Pass):
    """`auto-sharding`: chooses and writes shardings for the header's num_partitions devices
    (run spmd-partitioner after it); `result` keeps the last report."""

    name = "auto-sharding"

    def __init__(self, options: AutoShardingOptions | None = None):
        self.options = options
        self.result: AutoShardingResult | None = None

    def run(self, module: HloModule) -> bool:
        partitions = int(module.header_attrs.get("num_partitions", 1))
        if partitions == 1:
            return False
        self.result = auto_shard_in_place(module, partitions, self.options)
        return True
