"""Meshes and named shardings, as in jax.sharding, and how they become HLO shardings.

A `Mesh` lays device ids out on named axes; a `PartitionSpec` says, per array dim, which mesh
axes cut it (None: not cut); `NamedSharding(mesh, spec)` is both. `to_hlo(rank)` gives the
`HloSharding` XLA would print: the tile grid is the mesh transposed so that the axes of dim 0
come first, then those of dim 1, ..., then the unused axes as one replicated subgroup dim.
"""

from __future__ import annotations

from math import prod

import numpy as np

from ..ir.sharding import HloSharding, mesh_sharding
from .errors import FrontendTypeError


class Mesh:
    def __init__(self, devices, axis_names):
        ids = np.vectorize(lambda d: getattr(d, "id", d), otypes=[np.int64])(
            np.asarray(devices, dtype=object)
        )
        names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        if ids.ndim != len(names):
            raise FrontendTypeError(
                f"a mesh of rank {ids.ndim} needs {ids.ndim} axis names, got {names}"
            )
        if len(set(names)) != len(names):
            raise FrontendTypeError(f"mesh axis names must be distinct, got {names}")
        if sorted(ids.reshape(-1).tolist()) != list(range(ids.size)):
            raise FrontendTypeError(
                f"a mesh holds devices 0..{ids.size - 1} once each, got {ids.reshape(-1).tolist()}"
            )
        self.device_ids = ids
        self.axis_names = names

    @property
    def shape(self) -> dict[str, int]:
        return dict(zip(self.axis_names, self.device_ids.shape))

    @property
    def size(self) -> int:
        return int(self.device_ids.size)

    def axis_index(self, name: str) -> int:
        if name not in self.axis_names:
            raise FrontendTypeError(f"{name!r} is not an axis of the mesh {self.axis_names}")
        return self.axis_names.index(name)

    def groups(self, axes) -> list[list[int]]:
        """Device groups that vary along `axes` (in that order), the other axes fixed."""
        chosen = [self.axis_index(a) for a in axes]
        others = [i for i in range(len(self.axis_names)) if i not in chosen]
        size = prod(self.device_ids.shape[i] for i in chosen)
        return self.device_ids.transpose(others + chosen).reshape(-1, size).tolist()

    def coordinate_table(self, name: str) -> list[int]:
        """Index along axis `name` of each device id."""
        axis = self.axis_index(name)
        table = [0] * self.size
        for position in np.ndindex(self.device_ids.shape):
            table[int(self.device_ids[position])] = position[axis]
        return table

    def __repr__(self) -> str:
        return f"Mesh({self.shape})"


class PartitionSpec(tuple):
    """Per array dim: None, a mesh axis name, or a tuple of names (major to minor)."""

    def __new__(cls, *entries):
        return super().__new__(cls, entries)

    def axes(self, dim: int) -> tuple[str, ...]:
        entry = self[dim] if dim < len(self) else None
        if entry is None:
            return ()
        return (entry,) if isinstance(entry, str) else tuple(entry)

    def __repr__(self) -> str:
        return "PartitionSpec" + tuple.__repr__(tuple(self))


class NamedSharding:
    def __init__(self, mesh: Mesh, spec: PartitionSpec):
        if not isinstance(mesh, Mesh):
            raise FrontendTypeError(f"NamedSharding needs a Mesh, got {type(mesh).__name__}")
        self.mesh = mesh
        self.spec = spec if isinstance(spec, PartitionSpec) else PartitionSpec(*spec)
        used = [a for d in range(len(self.spec)) for a in self.spec.axes(d)]
        for axis in used:
            mesh.axis_index(axis)
        if len(set(used)) != len(used):
            raise FrontendTypeError(f"{self.spec} uses a mesh axis twice")

    def to_hlo(self, rank: int) -> HloSharding:
        if len(self.spec) > rank:
            raise FrontendTypeError(
                f"{self.spec} has {len(self.spec)} entries for a rank {rank} array"
            )
        return mesh_sharding(
            self.mesh.shape, [self.spec.axes(d) for d in range(rank)], self.mesh.device_ids
        )

    def shard_shape(self, shape) -> tuple[int, ...]:
        return self.to_hlo(len(shape)).shard_dims(tuple(shape))

    def __repr__(self) -> str:
        return f"NamedSharding({self.mesh!r}, {self.spec!r})"


def as_hlo_sharding(sharding, rank: int) -> HloSharding:
    if isinstance(sharding, NamedSharding):
        return sharding.to_hlo(rank)
    if isinstance(sharding, HloSharding):
        return sharding
    raise FrontendTypeError(f"expected a NamedSharding, got {type(sharding).__name__}")


def _mesh_size(shardings) -> int | None:
    sizes = {s.mesh.size for s in shardings if isinstance(s, NamedSharding)}
    if len(sizes) > 1:
        raise FrontendTypeError(f"shardings over meshes of different sizes {sorted(sizes)}")
    return sizes.pop() if sizes else None


def _per_leaf(spec, count: int, what: str) -> list:
    if spec is None or isinstance(spec, (NamedSharding, HloSharding)):
        return [spec] * count
    spec = list(spec)
    if len(spec) != count:
        raise FrontendTypeError(f"{what} has {len(spec)} entries for {count} values")
    return spec


def annotate(module, in_shardings, out_shardings, params_per_arg: list[int]) -> None:
    """Writes jit's in/out shardings onto the traced module's parameters and root."""
    from ..ir import HloInstruction

    args = _per_leaf(in_shardings, len(params_per_arg), "in_shardings")
    leaves = [s for s, count in zip(args, params_per_arg) for _ in range(count)]
    entry = module.entry
    for param, sharding in zip(entry.parameters, leaves):
        if sharding is not None:
            param.attrs["sharding"] = as_hlo_sharding(sharding, param.shape.rank)
    root = entry.root
    if out_shardings is not None:
        outs = root.shape.tuple_shapes if root.shape.is_tuple else [root.shape]
        specs = _per_leaf(out_shardings, len(outs), "out_shardings")
        hlo = [
            as_hlo_sharding(s, o.rank) if s is not None else HloSharding.replicate()
            for s, o in zip(specs, outs)
        ]
        if root.opcode == "parameter" or root.users:
            copy = HloInstruction("copy", root.shape, [root], name="out_copy")
            entry.add_instruction(copy)
            entry.root = root = copy
        root.attrs["sharding"] = HloSharding.tuple_of(hlo) if root.shape.is_tuple else hlo[0]
    size = _mesh_size(
        list(_per_leaf(in_shardings, len(params_per_arg), "in_shardings"))
        + list(out_shardings if isinstance(out_shardings, (list, tuple)) else [out_shardings])
    )
    if size is not None:
        module.header_attrs["num_partitions"] = str(size)


def auto_sharding_options(mesh) -> dict:
    """jit's compile options for auto_sharding=mesh (or (mesh, AutoShardingOptions)): the
    shardings are chosen over the mesh's axes, whose devices must be in order."""
    import dataclasses

    from ..passes.auto_sharding import AutoShardingOptions

    mesh, chosen = mesh if isinstance(mesh, tuple) else (mesh, AutoShardingOptions())
    if not isinstance(mesh, Mesh) or not isinstance(chosen, AutoShardingOptions):
        raise FrontendTypeError(
            f"auto_sharding takes a Mesh (or a (Mesh, "
            f"AutoShardingOptions) pair), got {type(mesh).__name__}"
        )
    if mesh.device_ids.reshape(-1).tolist() != list(range(mesh.size)):
        raise FrontendTypeError(
            f"auto_sharding needs a mesh of devices 0..{mesh.size - 1} in "
            f"order, got {mesh.device_ids.tolist()}"
        )
    shape = tuple(int(d) for d in mesh.device_ids.shape)
    return {
        "num_partitions": mesh.size,
        "auto_sharding": dataclasses.replace(chosen, mesh_shape=shape),
    }


def with_sharding_constraint(x, sharding):
    """Inside a trace: `x`, with its sharding pinned (the `Sharding` custom call); outside one,
    `x` itself."""
    from .numpy_api import asarray
    from .ops_core import Op
    from .tracer import Tracer, current_builder

    if current_builder() is None:
        return x
    tracer = asarray(x)
    op = Op(
        "custom-call",
        [tracer.op],
        {"custom_call_target": "Sharding"},
        tracer.op.shape.without_layout(),
    )
    op.instr.attrs["sharding"] = as_hlo_sharding(sharding, tracer.ndim)
    return Tracer(op, tracer.weak)
