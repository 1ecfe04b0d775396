"""Sharding propagation and the SPMD partitioner: a global program with `sharding=`
annotations in, the per-device program for N devices out (XLA's ShardingPropagation and
SpmdPartitioner, reduced to the rules in spmd_rules.py).

Propagation walks the entry in post order: an annotated instruction (a `sharding=` attribute,
or the `Sharding` custom call of with_sharding_constraint) keeps its sharding; any other gets
the result sharding its rule's plan produces from its operands' shardings. Calls are inlined
first, so shardings flow through them; a while loop's state keeps its sharding through the
condition and body, and each branch of a conditional is partitioned for its operand. Ops
without a rule run replicated.

The partitioner then rebuilds each computation with per-device shapes: operands are
resharded to what the plan asks for, the op runs on the local pieces, partial results are
all-reduced, and the result is resharded to the instruction's own sharding. Resharding:
  * split -> replicated: one all-gather per cut dim (then a slice drops uneven padding);
  * replicated -> split, or to a finer cut of what each device holds: a dynamic-slice at
    this partition's offset (no communication);
  * 1-D split of dim d -> 1-D split of dim e: one all-to-all;
  * the same grid with the pieces on other devices: one collective-permute;
  * anything else: through replicated.
The entry keeps its parameters' shardings and its ROOT gets the result's sharding, which is
how a multi-device executable splits arguments and assembles results.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule, NameUniquer
from ..ir.sharding import HloSharding, ReplicaGroups, SourceTargetPairs
from ..ir.shapes import Shape
from .base import Pass, register_pass
from .hlo_utils import add_computation
from .shardy import (
    FUNC_RESULT_SHARDING,
    GLOBAL_TO_LOCAL,
    LOCAL_TO_GLOBAL,
    sdy_shardings,
    shardy_target,
)
from .spmd_rules import R, even, plan, split_dim
from .spmd_rules_indexing import unsplit


def annotation(instr) -> HloSharding | None:
    """The sharding written on `instr`, with tuple-shaped values given one per leaf."""
    sharding = instr.attrs.get("sharding")
    if not isinstance(sharding, HloSharding) or sharding.kind == "named":
        return None
    if sharding.is_manual:
        raise UnsupportedError(
            f"%{instr.name}: manual shardings are not partitioned; "
            f"write the per-device program (shard_map) instead"
        )
    return _per_leaf(_simplify(sharding), instr.shape)


def _simplify(sharding: HloSharding) -> HloSharding:
    if sharding.is_tuple:
        return HloSharding.tuple_of(_simplify(e) for e in sharding.elements)
    if sharding.kind in ("maximal", "unknown", "unreduced"):
        return R  # every device computes the value
    return sharding.normalized()


def _per_leaf(sharding: HloSharding, shape: Shape) -> HloSharding:
    if not shape.is_tuple or sharding.is_tuple:
        return sharding
    return HloSharding.tuple_of(_per_leaf(sharding, s) for s in shape.tuple_shapes)


def _replicated(shape: Shape) -> HloSharding:
    return _per_leaf(R, shape) if shape.is_tuple else R


def is_sharding_call(instr) -> bool:
    return instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") == "Sharding"


def propagate(comp: HloComputation, n: int, module=None, params=None) -> tuple[dict, set]:
    """(id(instruction) -> its sharding, ids of the manual instructions: shard_map bodies,
    which compute on per-device pieces as written)."""
    shardings: dict[int, HloSharding] = {}
    manual: set[int] = set()
    for instr in comp.post_order():
        target = shardy_target(instr)
        if target == GLOBAL_TO_LOCAL or (
            target != LOCAL_TO_GLOBAL and any(id(o) in manual for o in instr.operands)
        ):
            manual.add(id(instr))
            shardings[id(instr)] = _replicated(instr.shape)
            continue
        given = _shardy_annotation(instr, module) if target else annotation(instr)
        if instr.opcode == "parameter" and params is not None:
            given = params[instr.parameter_number]
        if given is None:
            operands = [shardings[id(o)] for o in instr.operands]
            given = (
                _replicated(instr.shape)
                if instr.opcode == "parameter"
                else shardings[id(instr.operand(0))]
                if instr.opcode == "while"
                else plan(instr, operands, n).out
            )
        shardings[id(instr)] = given
    return shardings, manual


def _shardy_annotation(instr, module) -> HloSharding:
    key = "xla.sdy.out_shardings" if shardy_target(instr) == LOCAL_TO_GLOBAL else "xla.sdy.sharding"
    values = sdy_shardings(instr, key, module)
    return HloSharding.tuple_of(values) if instr.shape.is_tuple else values[0]


def same_sharding(a: HloSharding, b: HloSharding) -> bool:
    if a.is_tuple or b.is_tuple:
        return (
            a.is_tuple
            and b.is_tuple
            and len(a.elements) == len(b.elements)
            and all(same_sharding(x, y) for x, y in zip(a.elements, b.elements))
        )
    a, b = a.normalized(), b.normalized()
    if a.kind != b.kind:
        return False
    if a.kind != "tiled":
        return True
    return (
        a.subgroups == b.subgroups
        and a.grid.dims == b.grid.dims
        and np.array_equal(a.grid.devices(), b.grid.devices())
    )


def local_shape(shape: Shape, sharding: HloSharding) -> Shape:
    if shape.is_tuple:
        elements = sharding.elements if sharding.is_tuple else [sharding] * len(shape.tuple_shapes)
        return Shape.tuple_of([local_shape(s, e) for s, e in zip(shape.tuple_shapes, elements)])
    if not shape.is_array:
        return shape
    return Shape.array(shape.dtype, sharding.shard_dims(shape.dims)).with_default_layout()


class _Partitioner:
    def __init__(self, module: HloModule, n: int):
        self.module = module
        self.n = n
        self.names = NameUniquer(module)
        self.comp: HloComputation | None = None  # the computation being built
        self.channel = max(
            (i.attrs.get("channel_id") or 0 for i in module.all_instructions()), default=0
        )  # after the channels of shard_map bodies
        self._partition_offsets: dict[tuple, HloInstruction] = {}
        self._partition_id: HloInstruction | None = None
        self._reshards: dict[tuple, HloInstruction] = {}
        self._adders: dict[str, HloComputation] = {}

    # -- building -------------------------------------------------------------------------
    @property
    def building(self) -> HloComputation:
        """The computation being built (only while a partition or the finish runs)."""
        if self.comp is None:
            raise AssertionError("the partitioner is not building a computation")
        return self.comp

    def add(
        self, opcode: str, shape: Shape, operands=(), attrs=None, name: str = "", **kw
    ) -> HloInstruction:
        instr = HloInstruction(
            opcode,
            shape.with_default_layout(),
            operands,
            attrs,
            name=self.names(name or opcode),
            **kw,
        )
        return self.building.add_instruction(instr)

    def next_channel(self) -> int:
        self.channel += 1
        return self.channel

    def constant(self, values, dtype: str = "s32") -> HloInstruction:
        array = np.asarray(values, dtype=Shape.array(dtype, ()).numpy_dtype)
        shape = Shape.array(dtype, array.shape).with_default_layout()
        instr = HloInstruction.constant(array, shape, name=self.names("constant"))
        return self.building.add_instruction(instr)

    def partition_offset(self, table: tuple[int, ...]) -> HloInstruction:
        """s32[] table[partition-id]: this device's offset along one dim."""
        if table in self._partition_offsets:
            return self._partition_offsets[table]
        if len(set(table)) == 1:
            offset = self.constant(table[0])
        else:
            if self._partition_id is None:
                pid = self.add("partition-id", Shape.array("u32", ()))
                self._partition_id = self.add("convert", Shape.array("s32", ()), [pid])
            values = self.constant(table)
            one = self.add(
                "dynamic-slice",
                Shape.array("s32", (1,)),
                [values, self._partition_id],
                {"dynamic_slice_sizes": (1,)},
            )
            offset = self.add("reshape", Shape.array("s32", ()), [one])
        self._partition_offsets[table] = offset
        return offset

    def adder(self, dtype: str) -> HloComputation:
        if dtype not in self._adders:
            self._adders[dtype] = add_computation(self.module, dtype, self.names, f"add_{dtype}")
        return self._adders[dtype]

    # -- resharding -----------------------------------------------------------------------
    def reshard(self, value, have: HloSharding, want: HloSharding, shape: Shape):
        if same_sharding(have, want):
            return value
        key = (id(value), str(want))  # one reshard per value and target, however many users
        if key not in self._reshards:
            self._reshards[key] = self._reshard(value, have, want, shape)
        return self._reshards[key]

    def _reshard(self, value, have: HloSharding, want: HloSharding, shape: Shape):
        if shape.is_tuple:
            haves = have.elements if have.is_tuple else [have] * len(shape.tuple_shapes)
            wants = want.elements if want.is_tuple else [want] * len(shape.tuple_shapes)
            parts = []
            for i, (h, w, s) in enumerate(zip(haves, wants, shape.tuple_shapes)):
                part = self.add("get-tuple-element", local_shape(s, h), [value], {"index": i})
                parts.append(self.reshard(part, h, w, s))
            return self.add("tuple", Shape.tuple_of([p.shape for p in parts]), parts)
        have_dim, want_dim = split_dim(have, shape, self.n), split_dim(want, shape, self.n)
        if have_dim is not None and want_dim is not None:
            return self.all_to_all(value, have_dim, want_dim, shape)
        if have.is_tiled and want.is_tiled:
            refined = self.refine(value, have, want, shape)
            if refined is not None:
                return refined
        pairs = self.permutation(have, want, shape)
        if pairs is not None:
            return self.add(
                "collective-permute",
                value.shape,
                [value],
                {
                    "channel_id": self.next_channel(),
                    "source_target_pairs": SourceTargetPairs(pairs),
                },
            )
        if have.is_tiled and want.is_tiled:  # gather only the dims `want` holds whole
            axes = [
                a
                for a, (h, w) in enumerate(zip(have.tile_dims, want.tile_dims))
                if h > 1 and w == 1
            ]
            partial = unsplit(have, axes) if axes else None
            if partial is not None and partial.is_tiled:
                gathered = self.to_replicated(value, have, shape, axes)
                return self.reshard(gathered, partial, want, shape)
        if not have.normalized().kind == "replicated":
            value = self.to_replicated(value, have, shape)
        return self.from_replicated(value, want, shape)

    def refine(self, value, have: HloSharding, want: HloSharding, shape: Shape):
        """Every device's `want` piece lies inside its `have` piece: cut it out locally."""
        if not (even(have, shape) and even(want, shape)):
            return None
        offsets = []
        for axis in range(shape.rank):
            table = []
            for device in range(self.n):
                (h_lo, h_hi) = have.shard_bounds(shape.dims, device)[axis]
                (w_lo, w_hi) = want.shard_bounds(shape.dims, device)[axis]
                if not h_lo <= w_lo <= w_hi <= h_hi:
                    return None
                table.append(w_lo - h_lo)
            offsets.append(tuple(table))
        pieces = want.shard_dims(shape.dims)
        return self.add(
            "dynamic-slice",
            Shape.array(shape.dtype, pieces),
            [value, *(self.partition_offset(t) for t in offsets)],
            {"dynamic_slice_sizes": pieces},
        )

    def permutation(self, have: HloSharding, want: HloSharding, shape: Shape):
        """(source, target) pairs when `want` only puts the same pieces on other devices."""
        if not (have.is_tiled and want.is_tiled) or have.tile_dims != want.tile_dims:
            return None
        holders: dict[tuple, list[int]] = {}
        for device in range(self.n):
            holders.setdefault(have.tile_index(device), []).append(device)
        # a device that is no target receives zeros, so one that keeps its piece sends it
        # to itself; each device sends once
        keeps = [d for d in range(self.n) if have.tile_index(d) == want.tile_index(d)]
        if len(keeps) == self.n:
            return None
        pairs, sources = [(d, d) for d in keeps], set(keeps)
        for device in range(self.n):
            if device in keeps:
                continue
            free = [h for h in holders[want.tile_index(device)] if h not in sources]
            if not free:
                return None
            pairs.append((free[0], device))
            sources.add(free[0])
        return tuple(sorted(pairs, key=lambda p: p[1]))

    def to_replicated(self, value, have: HloSharding, shape: Shape, axes=None):
        """All-gathers the cut dims (only `axes` when given) and drops uneven padding."""
        grid = have.grid.devices()
        dims = list(value.shape.dims)
        for axis, pieces in enumerate(have.tile_dims):
            if pieces == 1 or (axes is not None and axis not in axes):
                continue
            groups = np.moveaxis(grid, axis, -1).reshape(-1, pieces)
            dims[axis] *= pieces
            value = self.add(
                "all-gather",
                Shape.array(shape.dtype, dims),
                [value],
                {
                    "dimensions": (axis,),
                    "channel_id": self.next_channel(),
                    "replica_groups": ReplicaGroups.of(groups.tolist()),
                    "use_global_device_ids": True,
                },
            )
        whole = [
            d if axes is None or a in axes else p for a, (d, p) in enumerate(zip(shape.dims, dims))
        ]
        if dims != whole:  # uneven: drop the padding
            value = self.add(
                "slice",
                Shape.array(shape.dtype, whole),
                [value],
                {"slice": tuple((0, d, 1) for d in whole)},
            )
        return value

    def from_replicated(self, value, want: HloSharding, shape: Shape):
        if not want.is_tiled:
            return value
        pieces = want.shard_dims(shape.dims)
        padded = tuple(p * t for p, t in zip(pieces, want.tile_dims))
        if padded != shape.dims:
            zero = self.constant(0, shape.dtype)
            value = self.add(
                "pad",
                Shape.array(shape.dtype, padded),
                [value, zero],
                {"padding": tuple((0, p - d, 0) for p, d in zip(padded, shape.dims))},
            )
        offsets = []
        for axis in range(shape.rank):
            table = tuple(want.tile_index(p)[axis] * pieces[axis] for p in range(self.n))
            offsets.append(self.partition_offset(table))
        return self.add(
            "dynamic-slice",
            Shape.array(shape.dtype, pieces),
            [value, *offsets],
            {"dynamic_slice_sizes": pieces},
        )

    def all_to_all(self, value, have_dim: int, want_dim: int, shape: Shape):
        """Split of dim d -> split of dim e: cut e into (n, e/n), exchange the n pieces, and
        fold the received axis (indexed by source, i.e. by d-block) into d."""
        n, dims = self.n, list(value.shape.dims)
        cut = dims[:want_dim] + [n, dims[want_dim] // n] + dims[want_dim + 1 :]
        x = self.add("reshape", Shape.array(shape.dtype, cut), [value])
        x = self.add(
            "all-to-all",
            x.shape,
            [x],
            {
                "dimensions": (want_dim,),
                "channel_id": self.next_channel(),
                "replica_groups": ReplicaGroups.of([range(n)]),
            },
        )
        source_axis = want_dim
        block_axis = have_dim + (1 if have_dim > want_dim else 0)
        order = [a for a in range(len(cut)) if a != source_axis]
        order.insert(order.index(block_axis), source_axis)
        x = self.add(
            "transpose",
            Shape.array(shape.dtype, [cut[a] for a in order]),
            [x],
            {"dimensions": tuple(order)},
        )
        final = list(dims)
        final[have_dim] *= n
        final[want_dim] //= n
        return self.add("reshape", Shape.array(shape.dtype, final), [x])

    # -- computations ---------------------------------------------------------------------
    def run(self) -> HloModule:
        entry = self.module.entry
        params = [annotation(p) or _replicated(p.shape) for p in entry.parameters]
        comp, root_sharding = self.partition(entry, params, entry.name + "_spmd", entry=True)
        root = comp.root
        if root.opcode == "parameter" or root.users:
            root = comp.add_instruction(
                HloInstruction("copy", root.shape, [root], name=self.names("copy"))
            )
            comp.root = root
        root.attrs["sharding"] = root_sharding
        self.comp = comp
        return self.finish()

    def partition(
        self,
        comp,
        param_shardings,
        name: str,
        *,
        entry: bool = False,
        out: HloSharding | None = None,
    ):
        """(the per-device copy of `comp` whose parameters have `param_shardings`, its root's
        sharding); with `out`, the root is resharded to it."""
        saved = self.comp, self._partition_offsets, self._partition_id, self._reshards
        self.comp = HloComputation(self.names(name))
        self._partition_offsets, self._partition_id, self._reshards = {}, None, {}
        try:
            shardings, manual = propagate(comp, self.n, self.module, param_shardings)
            local: dict[int, HloInstruction] = {}
            for instr in comp.post_order():
                local[id(instr)] = self.instruction(instr, shardings, manual, local, entry)
            root, root_sharding = local[id(comp.root)], shardings[id(comp.root)]
            if out is not None:
                root = self.reshard(root, root_sharding, out, comp.root.shape)
                root_sharding = out
            self.comp.root = root
            return self.comp, root_sharding
        finally:
            self.comp, self._partition_offsets, self._partition_id, self._reshards = saved

    def instruction(self, instr, shardings, manual, local, entry: bool) -> HloInstruction:
        want = shardings[id(instr)]
        target = shardy_target(instr)
        if target == GLOBAL_TO_LOCAL:
            return self.enter_manual(instr, shardings, local)
        if id(instr) in manual:  # a shard_map body: per-device already
            return self.local_op(instr, [local[id(o)] for o in instr.operands], None)
        if target == LOCAL_TO_GLOBAL:  # the pieces are the shards of `want`
            pieces = [local[id(o)] for o in instr.operands]
            if len(pieces) == 1:
                return pieces[0]
            return self.add("tuple", Shape.tuple_of(p.shape for p in pieces), pieces)
        if instr.opcode == "parameter":
            param = HloInstruction.parameter(
                instr.parameter_number, local_shape(instr.shape, want), instr.name
            )
            if entry:
                param.attrs["sharding"] = want
            return self.building.add_instruction(param)
        have = [shardings[id(o)] for o in instr.operands]
        if is_sharding_call(instr) or target == FUNC_RESULT_SHARDING:
            return self.reshard(local[id(instr.operand(0))], have[0], want, instr.shape)
        if instr.opcode in ("while", "conditional"):
            value, got = self.control_flow(instr, have, [local[id(o)] for o in instr.operands])
            return self.reshard(value, got, want, instr.shape)
        step = plan(instr, have, self.n)
        operands = [
            self.reshard(local[id(o)], h, w, o.shape)
            for o, h, w in zip(instr.operands, have, step.operands)
        ]
        value = (
            step.build(self, instr, operands, step)
            if step.build
            else self.local_op(instr, operands, step.out)
        )
        if step.all_reduce:
            value = self.add(
                "all-reduce",
                value.shape,
                [value],
                {
                    "channel_id": self.next_channel(),
                    "replica_groups": ReplicaGroups.of(step.groups or [range(self.n)]),
                    "use_global_device_ids": True,
                    "to_apply": instr.attrs.get("to_apply")
                    if instr.opcode == "reduce"
                    else self.adder(instr.shape.dtype),
                },
            )
        return self.reshard(value, step.out, want, instr.shape)

    def control_flow(self, instr, have, operands):
        """while: the loop state keeps its sharding through condition and body (the body's
        result is resharded to it). conditional: the selector is replicated, each branch
        is partitioned for its operand, and all branches return the first one's sharding."""
        attrs = dict(instr.attrs)
        attrs.pop("sharding", None)
        if instr.opcode == "while":
            state = have[0]
            attrs["condition"], _ = self.partition(
                instr.attrs["condition"], [state], instr.attrs["condition"].name, out=R
            )
            attrs["body"], _ = self.partition(
                instr.attrs["body"], [state], instr.attrs["body"].name, out=state
            )
            new_operands, out = operands, state
        else:
            names = (
                ("true_computation", "false_computation") if "true_computation" in attrs else None
            )
            branches = [attrs[n] for n in names] if names else list(attrs["branch_computations"])
            parts, out = [], None
            for branch, sharding in zip(branches, have[1:]):
                part, got = self.partition(branch, [sharding], branch.name, out=out)
                out = got if out is None else out
                parts.append(part)
            if names:
                attrs.update(dict(zip(names, parts)))
            else:
                attrs["branch_computations"] = parts
            selector = self.reshard(operands[0], have[0], R, instr.operand(0).shape)
            new_operands = [selector] + list(operands[1:])
        for comp in [attrs["condition"], attrs["body"]] if instr.opcode == "while" else (parts):
            self.module.add_computation(comp)
        return self.add(
            instr.opcode, local_shape(instr.shape, out), new_operands, attrs, name=instr.name
        ), out

    def enter_manual(self, instr, shardings, local) -> HloInstruction:
        """GlobalToLocalShape: each operand resharded to its in-sharding; its piece here."""
        wants = sdy_shardings(instr, "xla.sdy.in_shardings", self.module)
        pieces = [
            self.reshard(local[id(o)], shardings[id(o)], w, o.shape)
            for o, w in zip(instr.operands, wants)
        ]
        if not instr.shape.is_tuple:
            return pieces[0]
        return self.add("tuple", Shape.tuple_of([p.shape for p in pieces]), pieces)

    def local_op(self, instr, operands, out: HloSharding | None) -> HloInstruction:
        """`instr` on local pieces; out=None keeps the declared shape (manual code)."""
        if out is None:
            shape = instr.shape
        elif instr.opcode == "get-tuple-element":
            shape = operands[0].shape.tuple_shapes[instr.attrs["index"]]
        elif instr.opcode == "tuple":
            shape = Shape.tuple_of([o.shape for o in operands])
        else:
            shape = local_shape(instr.shape, out)
        copy = HloInstruction(
            instr.opcode,
            shape,
            operands,
            instr.attrs,
            name=self.names(instr.name),
            literal=instr.literal,
        )
        copy.attrs.pop("sharding", None)
        copy.attrs.pop("control-predecessors", None)
        if instr.opcode == "slice":  # the split dim is taken whole: its local size
            copy.attrs["slice"] = tuple(
                (0, shape.dims[d], 1)
                if (lo, hi, st) == (0, instr.operand(0).shape.dims[d], 1)
                else (lo, hi, st)
                for d, (lo, hi, st) in enumerate(instr.attrs["slice"])
            )
        return self.building.add_instruction(copy)

    def finish(self) -> HloModule:
        module = self.module
        old = module.entry
        module.add_computation(self.building, entry=True)
        module.remove_computation(old)
        module.remove_unreachable_computations()
        module.entry_computation_layout = None
        module.input_output_alias = []
        module.buffer_donors = []
        module.header_attrs["num_partitions"] = str(self.n)
        return module


def partition_module(module: HloModule, num_partitions: int) -> HloModule:
    """The per-device program of `module` for `num_partitions` devices (a new module)."""
    from ..ir.verifier import verify

    copy = module.clone()
    _partition_in_place(copy, num_partitions)
    verify(copy)
    return copy


def _partition_in_place(module: HloModule, num_partitions: int) -> None:
    from .call_inliner import CallInliner

    if int(module.header_attrs.get("replica_count", 1)) != 1:
        raise UnsupportedError("the SPMD partitioner handles one replica (replica_count=1)")
    CallInliner().run(module)
    _Partitioner(module, num_partitions).run()


@register_pass
class SpmdPartitioner(Pass):
    """`spmd-partitioner`: propagates shardings and partitions the entry for the header's
    num_partitions devices."""

    name = "spmd-partitioner"

    def run(self, module: HloModule) -> bool:
        partitions = int(module.header_attrs.get("num_partitions", 1))
        if partitions == 1:
            return False
        _partition_in_place(module, partitions)
        return True


# -- communication volume ---------------------------------------------------------------------
# Bytes one device sends for each collective with a group of n, S = the named array's bytes
# (ring algorithms, the usual cost model): what `collective_bytes` adds up.
BYTES_SENT = {
    "all-reduce": lambda n, operand, result: 2 * (n - 1) * operand // n,
    "all-gather": lambda n, operand, result: (n - 1) * result // n,
    "reduce-scatter": lambda n, operand, result: (n - 1) * operand // n,
    "all-to-all": lambda n, operand, result: (n - 1) * operand // n,
    "collective-permute": lambda n, operand, result: operand,
    "collective-broadcast": lambda n, operand, result: operand,
}
_START_FORMS = {
    "all-reduce-start": "all-reduce",
    "all-gather-start": "all-gather",
    "collective-permute-start": "collective-permute",
}


def _bytes(shape: Shape) -> int:
    if shape.is_tuple:
        return sum(_bytes(s) for s in shape.tuple_shapes)
    return shape.byte_size() if shape.is_array else 0


def collective_bytes(module: HloModule, num_devices: int | None = None) -> dict[str, int]:
    """{opcode: bytes one device sends} over every collective of `module`, counted once per
    instruction (loop bodies once, not per trip); `total` sums them."""
    devices = num_devices or int(module.header_attrs.get("num_partitions", 1))
    totals: dict[str, int] = {}
    for instr in module.all_instructions():
        opcode = _START_FORMS.get(instr.opcode, instr.opcode)
        if opcode not in BYTES_SENT:
            continue
        groups = instr.attrs.get("replica_groups")
        n = len(groups.groups[0]) if groups is not None and groups.groups else devices
        operand = sum(_bytes(o.shape) for o in instr.operands)
        result = (
            _bytes(instr.shape)
            if instr.opcode == opcode
            else _bytes(instr.shape.tuple_shapes[1])
            if instr.shape.is_tuple
            else _bytes(instr.shape)
        )
        totals[opcode] = totals.get(opcode, 0) + BYTES_SENT[opcode](n, operand, result)
    totals["total"] = sum(totals.values())
    return totals
