"""`minixla.shard_map` and the collectives of `minixla.lax` (psum, all_gather, ...).

`shard_map(f, mesh=, in_specs=, out_specs=)` traces `f` once on the per-device pieces of its
arguments, so `f` is the per-device program: collectives name mesh axes and become HLO
collectives whose replica groups are the devices along those axes (the other axes fixed).
The traced module is already partitioned; it is compiled for `mesh.size` devices and called
with global arrays, split by `in_specs` and assembled by `out_specs`.
"""

from __future__ import annotations

import threading

import numpy as np

from ..ir import Shape
from ..ir.sharding import ReplicaGroups, SourceTargetPairs
from .errors import FrontendTypeError
from .sharding import Mesh, NamedSharding, PartitionSpec

_local = threading.local()


def _mesh(what: str) -> Mesh:
    stack = getattr(_local, "meshes", [])
    if not stack:
        raise FrontendTypeError(f"{what} names mesh axes, so it only works inside shard_map")
    return stack[-1]


def _axes(axis_name) -> tuple[str, ...]:
    return (axis_name,) if isinstance(axis_name, str) else tuple(axis_name)


class _Channels:
    count = 0


def _collective(opcode: str, operand, axis_name, shape, attrs=None, reducer=None):
    from .numpy_api import asarray
    from .ops_core import Op, _reducer
    from .tracer import Tracer

    mesh = _mesh(f"lax collective {opcode}")
    tracer = asarray(operand)
    _Channels.count += 1
    attrs = dict(attrs or {})
    attrs.update(
        {
            "channel_id": _Channels.count,
            "replica_groups": ReplicaGroups.of(mesh.groups(_axes(axis_name))),
        }
    )
    if opcode in ("all-reduce", "all-gather", "reduce-scatter"):
        attrs["use_global_device_ids"] = True
    builder = tracer.op.builder
    if shape is None:  # the ops that keep their operand's shape
        shape = tracer.op.shape.without_layout()
    if reducer is not None:
        attrs["to_apply"] = _reducer(builder, reducer, [tracer.op], [tracer.op], "region")
    return Tracer(Op(opcode, [tracer.op], attrs, shape, builder), tracer.weak)


def _group_size(axis_name) -> int:
    mesh = _mesh("the collective")
    return int(np.prod([mesh.shape[a] for a in _axes(axis_name)]))


def psum(x, axis_name):
    from .ops_core import Add

    return _collective("all-reduce", x, axis_name, None, reducer=Add)


def pmax(x, axis_name):
    from .ops_core import Maximum as Max

    return _collective("all-reduce", x, axis_name, None, reducer=Max)


def pmin(x, axis_name):
    from .ops_core import Minimum as Min

    return _collective("all-reduce", x, axis_name, None, reducer=Min)


def pmean(x, axis_name):
    return psum(x, axis_name) / _group_size(axis_name)


def all_gather(x, axis_name, *, axis: int = 0, tiled: bool = False):
    """The pieces of every device along `axis_name`, stacked on a new `axis` (or concatenated
    along `axis` with tiled=True)."""
    from .. import numpy as mnp
    from .numpy_api import asarray

    x = asarray(x)
    if not tiled:
        x = mnp.expand_dims(x, axis)
    dims = list(x.shape)
    dims[axis] *= _group_size(axis_name)
    return _collective(
        "all-gather", x, axis_name, Shape.array(_dtype(x), dims), {"dimensions": (axis,)}
    )


def psum_scatter(x, axis_name, *, scatter_dimension: int = 0, tiled: bool = False):
    """The sum over `axis_name`, of which each device keeps its piece along
    `scatter_dimension` (that dim removed unless tiled=True)."""
    from .. import numpy as mnp
    from .numpy_api import asarray
    from .ops_core import Add

    x = asarray(x)
    n = _group_size(axis_name)
    dims = list(x.shape)
    if dims[scatter_dimension] % n:
        raise FrontendTypeError(
            f"psum_scatter: dim {scatter_dimension} of size "
            f"{dims[scatter_dimension]} does not split {n} ways"
        )
    dims[scatter_dimension] //= n
    out = _collective(
        "reduce-scatter",
        x,
        axis_name,
        Shape.array(_dtype(x), dims),
        {"dimensions": (scatter_dimension,)},
        reducer=Add,
    )
    return out if tiled else mnp.squeeze(out, scatter_dimension)


def ppermute(x, axis_name, perm):
    """Sends each device's `x` from index i to index j along `axis_name` for (i, j) in perm;
    devices nobody sends to get zeros."""
    from .numpy_api import asarray
    from .ops_core import Op
    from .tracer import Tracer

    mesh = _mesh("ppermute")
    tracer = asarray(x)
    pairs = [(group[i], group[j]) for group in mesh.groups(_axes(axis_name)) for i, j in perm]
    _Channels.count += 1
    return Tracer(
        Op(
            "collective-permute",
            [tracer.op],
            {"channel_id": _Channels.count, "source_target_pairs": SourceTargetPairs(tuple(pairs))},
            tracer.op.shape.without_layout(),
            tracer.op.builder,
        ),
        tracer.weak,
    )


def all_to_all(x, axis_name, split_axis: int, concat_axis: int, *, tiled: bool = False):
    """Cuts `x` along `split_axis` into one piece per device along `axis_name`, sends piece j
    to device j, and concatenates what arrives along `concat_axis` (tiled=True only)."""
    from .. import numpy as mnp
    from .numpy_api import asarray

    if not tiled:
        raise FrontendTypeError("all_to_all: only tiled=True is supported")
    x = asarray(x)
    n = _group_size(axis_name)
    if x.shape[split_axis] % n:
        raise FrontendTypeError(
            f"all_to_all: dim {split_axis} of size {x.shape[split_axis]} does not split {n} ways"
        )
    dims = list(x.shape)
    cut = dims[:split_axis] + [n, dims[split_axis] // n] + dims[split_axis + 1 :]
    y = mnp.reshape(x, cut)
    y = _collective("all-to-all", y, axis_name, None, {"dimensions": (split_axis,)})
    block = concat_axis + (1 if concat_axis > split_axis else 0)
    order = [a for a in range(len(cut)) if a != split_axis]
    order.insert(order.index(block), split_axis)
    y = mnp.transpose(y, order)
    final = list(dims)
    final[concat_axis] *= n
    final[split_axis] //= n
    return mnp.reshape(y, final)


def axis_index(axis_name):
    """This device's index along mesh axis `axis_name` (an int32 scalar)."""
    from .. import numpy as mnp
    from .ops_core import Op
    from .tracer import Tracer, current_builder

    mesh = _mesh("axis_index")
    builder = current_builder()
    pid = Tracer(Op("partition-id", [], None, None, builder))
    table = mnp.asarray(np.array(mesh.coordinate_table(axis_name), np.int32))
    return table[mnp.asarray(pid).astype(np.int32)]


def _dtype(x) -> str:
    from . import dtypes as dt

    return dt.hlo_name(x.dtype)


class ShardMapped:
    def __init__(self, fn, mesh: Mesh, in_specs, out_specs, backend):
        self.fn, self.mesh, self.backend = fn, mesh, backend
        self.in_specs, self.out_specs = in_specs, out_specs
        self._cache: dict = {}

    def _specs(self, specs, count: int, what: str) -> list[PartitionSpec]:
        if isinstance(specs, PartitionSpec):
            return [specs] * count
        specs = list(specs)
        if len(specs) != count:
            raise FrontendTypeError(f"shard_map: {what} has {len(specs)} entries for {count}")
        return [s if isinstance(s, PartitionSpec) else PartitionSpec(*s) for s in specs]

    def __call__(self, *args):
        from . import dtypes as dt
        from .tracer import current_builder

        if current_builder() is not None:
            raise FrontendTypeError(
                "shard_map inside jit is not supported; call it directly (it compiles itself)"
            )
        arrays = [dt.host_array(a) for a in args]
        specs = self._specs(self.in_specs, len(arrays), "in_specs")
        shardings = [NamedSharding(self.mesh, s) for s in specs]
        key = tuple((a.shape, a.dtype.str) for a in arrays)
        exe = self._cache.get(key)
        if exe is None:
            exe = self._compile(arrays, shardings)
            self._cache[key] = exe
        return exe(*arrays)

    def _compile(self, arrays, shardings):
        from ..backends.compile import compile
        from .jit import Jitted

        local = [np.zeros(s.shard_shape(a.shape), a.dtype) for a, s in zip(arrays, shardings)]
        stack = getattr(_local, "meshes", None)
        if stack is None:
            stack = _local.meshes = []
        stack.append(self.mesh)
        try:
            lowered = Jitted(self.fn, self.backend, (), ()).lower(*local)
        finally:
            stack.pop()
        module = lowered.module
        entry = module.entry
        for param, sharding in zip(entry.parameters, shardings):
            param.attrs["sharding"] = sharding.to_hlo(param.shape.rank)
        root = entry.root
        outs = list(root.shape.tuple_shapes) if root.shape.is_tuple else [root.shape]
        out_specs = self._specs(self.out_specs, len(outs), "out_specs")
        out = [NamedSharding(self.mesh, s).to_hlo(o.rank) for s, o in zip(out_specs, outs)]
        from ..ir.sharding import HloSharding

        module.header_attrs["num_partitions"] = str(self.mesh.size)
        exe = compile(
            module,
            backend=lowered.backend,
            already_partitioned=True,
            out_shardings=HloSharding.tuple_of(out) if root.shape.is_tuple else out[0],
        )
        return _Unwrapped(exe, lowered.out_tree)


class _Unwrapped:
    def __init__(self, exe, out_tree):
        self.exe, self.out_tree = exe, out_tree

    def __call__(self, *arrays):
        from .pytree import LEAF, unflatten

        result = self.exe(*arrays)
        return unflatten(self.out_tree, [result] if self.out_tree == LEAF else list(result))


def shard_map(f=None, *, mesh: Mesh, in_specs, out_specs, backend: str | None = None):
    if f is None:
        return lambda fn: ShardMapped(fn, mesh, in_specs, out_specs, backend)
    return ShardMapped(f, mesh, in_specs, out_specs, backend)
