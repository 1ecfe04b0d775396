"""Batching rules: how each HLO opcode runs on a batch of values (the core of `vmap`).

`Batching.run` walks a traced computation in post order and emits its batched form into the
current trace. A value is `(op, bdim)`: an XlaOp plus the dimension holding the batch, or
`bdim=None` when the value does not depend on a batched input (it stays unbatched and is
broadcast only where an op needs it). Tuple-shaped values are Python lists of values.

`BATCHING_RULES` maps every supported opcode to its rule, `rule(batching, instr, args)`, which
returns the batched value of `instr` given its operands' values. The elementwise rows come
from the opcode table's kind. Ops without operands (constant, iota) never depend on a batched
input, so they need no row. Opcodes without a row raise an error naming them.
"""
from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from ..frontend.errors import FrontendError
from ..frontend.tracer import Tracer, current_builder
from ..ir import Shape, WindowDim, Window, parse_dim_labels
from ..ir.opcodes import ELEMENTWISE, OPCODES
from .tracing import emit_like


class BatchingError(FrontendError, UnsupportedError):
    """An op `vmap` cannot batch (no rule, or an unsupported combination of batched operands)."""


def _emit(opcode, operands, attrs=None, shape=None):
    return current_builder().emit(opcode, list(operands), attrs or {}, shape=shape)


def _constant(value, dtype: str):
    return current_builder().constant(np.asarray(value, Shape.array(dtype).numpy_dtype))


def is_batched(value) -> bool:
    if isinstance(value, list):
        return any(map(is_batched, value))
    return value[1] is not None


def flags_of(value):
    """The structure of `value` with True where batched."""
    if isinstance(value, list):
        return [flags_of(v) for v in value]
    return value[1] is not None


def expand(value):
    """`value` with unbatched tuple-shaped ops split into lists of their elements."""
    if isinstance(value, list):
        return [expand(v) for v in value]
    op, bdim = value
    if op.shape.is_tuple:
        return [expand((_emit("get-tuple-element", [op], {"index": i}), None))
                for i in range(len(op.shape.tuple_shapes))]
    return value


def _flags_like(shape: Shape, flags):
    if shape.is_tuple and not isinstance(flags, list):
        return [_flags_like(s, flags) for s in shape.tuple_shapes]
    return flags


def _or(a, b):
    if isinstance(a, list):
        return [_or(x, y) for x, y in zip(a, b)]
    return a or b


def _any(flags) -> bool:
    return any(map(_any, flags)) if isinstance(flags, list) else bool(flags)


def _all_true(flags):
    return [_all_true(f) for f in flags] if isinstance(flags, list) else True


def batched_flags(comp, param_flags: list):
    """Which outputs of `comp` depend on batched inputs (a conservative dataflow walk)."""
    flags: dict[int, object] = {}
    for instr in comp.post_order():
        if instr.opcode == "parameter":
            flag = _flags_like(instr.shape, param_flags[instr.parameter_number])
        elif instr.opcode == "tuple":
            flag = [flags[id(o)] for o in instr.operands]
        elif instr.opcode == "get-tuple-element":
            inner = flags[id(instr.operand(0))]
            flag = inner[instr.attrs["index"]] if isinstance(inner, list) else inner
        elif instr.opcode == "while":
            flag = _while_flags(instr, _flags_like(instr.shape, flags[id(instr.operand(0))]))
        else:
            flag = any(_any(flags[id(o)]) for o in instr.operands)
        flags[id(instr)] = flag
    return flags[id(comp.root)]


def _while_flags(instr, state):
    cond, body = instr.attrs["condition"], instr.attrs["body"]
    while True:
        new = _or(state, _flags_like(body.root.shape, batched_flags(body, [state])))
        if new == state:
            break
        state = new
    if _any(batched_flags(cond, [state])):
        return _all_true(state)
    return state


class Batching:
    """Emits batched programs for one batch size."""

    def __init__(self, size: int):
        self.size = size

    # -- the walk -----------------------------------------------------------------------------
    def run(self, comp, params: list):
        """The value of `comp`'s root, given one value per parameter."""
        values: dict[int, object] = {}
        for instr in comp.post_order():
            if instr.opcode == "parameter":
                values[id(instr)] = params[instr.parameter_number]
                continue
            args = [values[id(o)] for o in instr.operands]
            values[id(instr)] = self.apply(instr, args)
        return values[id(comp.root)]

    def apply(self, instr, args):
        if instr.opcode in ("tuple", "get-tuple-element"):
            return BATCHING_RULES[instr.opcode](self, instr, args)
        if not any(map(is_batched, args)):
            return emit_like(instr, [self.materialize(a) for a in args]), None
        rule = BATCHING_RULES.get(instr.opcode)
        if rule is None:
            raise BatchingError(f"vmap has no batching rule for the HLO op {instr.opcode} "
                                f"(%{instr.name})")
        return rule(self, instr, args)

    # -- value helpers ------------------------------------------------------------------------
    def materialize(self, value):
        """An unbatched value as one XlaOp (lists become HLO tuples)."""
        if isinstance(value, list):
            return _emit("tuple", [self.materialize(v) for v in value])
        return value[0]

    def shape(self, shape: Shape, bdim: int = 0) -> Shape:
        dims = list(shape.dims)
        dims.insert(bdim, self.size)
        return Shape.array(shape.dtype, dims)

    def front(self, value):
        """The op of a batched value with the batch moved to dimension 0."""
        op, bdim = value
        if bdim == 0:
            return op
        perm = [bdim] + [d for d in range(op.rank) if d != bdim]
        return _emit("transpose", [op], {"dimensions": tuple(perm)})

    def batched(self, value):
        """The op of `value` with the batch at dimension 0, broadcast there if unbatched."""
        op, bdim = value
        if bdim is not None:
            return self.front(value)
        return _emit("broadcast", [op], {"dimensions": tuple(range(1, op.rank + 1))},
                     shape=self.shape(op.shape))

    def full(self, value, dims):
        """`batched(value)` broadcast to [size, *dims] (scalars of clamp/select/pad)."""
        op = self.batched(value)
        if op.rank == len(dims) + 1:
            return op
        shape = Shape.array(op.dtype, (self.size, *dims))
        return _emit("broadcast", [op], {"dimensions": (0,)}, shape=shape)

    def result(self, op, bdim=0):
        """A rule's output: tuple-shaped ops become lists of batched elements."""
        if op.shape.is_tuple:
            return [(_emit("get-tuple-element", [op], {"index": i}), bdim)
                    for i in range(len(op.shape.tuple_shapes))]
        return op, bdim

    def conform(self, value, flags):
        """`value` batched at 0 where `flags` says, unbatched elsewhere."""
        value = expand(value)
        if isinstance(value, list):
            return [self.conform(v, f) for v, f in zip(value, flags)]
        if flags:
            return self.batched(value), 0
        if value[1] is not None:
            raise BatchingError("internal: a value expected unbatched is batched")
        return value

    def select(self, pred, on_true, on_false):
        """Lane-wise choice between two values of one structure; `pred` is pred[size]."""
        if isinstance(on_true, list):
            return [self.select(pred, t, f) for t, f in zip(on_true, on_false)]
        dims = on_true[0].dims[1:] if on_true[1] is not None else on_true[0].dims
        a, b = self.full(on_true, dims), self.full(on_false, dims)
        mask = _emit("broadcast", [pred], {"dimensions": (0,)},
                     shape=Shape.array("pred", a.dims))
        return _emit("select", [mask, a, b]), 0

    def lane(self, value, index: int):
        """Lane `index` of a batched value, as an unbatched op."""
        op = self.front(value)
        limits = [(0, d, 1) for d in op.dims]
        limits[0] = (index, index + 1, 1)
        piece = _emit("slice", [op], {"slice": tuple(limits)})
        return _emit("reshape", [piece], shape=Shape.array(op.dtype, op.dims[1:]))


# -- rules: elementwise and movement ----------------------------------------------------------
def _elementwise(b: Batching, instr, args):
    ops = [b.full(a, instr.shape.dims) for a in args]
    return _emit(instr.opcode, ops, dict(instr.attrs), shape=b.shape(instr.shape)), 0


def _map(b: Batching, instr, args):
    ops = [b.full(a, instr.shape.dims) for a in args]
    attrs = dict(instr.attrs, dimensions=tuple(range(instr.shape.rank + 1)))
    return _emit("map", ops, attrs, shape=b.shape(instr.shape)), 0


def _broadcast(b: Batching, instr, args):
    dims = (0,) + tuple(d + 1 for d in instr.attrs.get("dimensions", ()))
    return _emit("broadcast", [b.front(args[0])], {"dimensions": dims},
                 shape=b.shape(instr.shape)), 0


def _reshape(b: Batching, instr, args):
    return _emit("reshape", [b.front(args[0])], shape=b.shape(instr.shape)), 0


def _shifted(dims) -> tuple:
    return tuple(d + 1 for d in dims)


def _transpose(b: Batching, instr, args):
    perm = (0,) + _shifted(instr.attrs["dimensions"])
    return _emit("transpose", [b.front(args[0])], {"dimensions": perm}), 0


def _slice(b: Batching, instr, args):
    spec = ((0, b.size, 1),) + tuple(instr.attrs["slice"])
    return _emit("slice", [b.front(args[0])], {"slice": spec}), 0


def _with_dims(b: Batching, instr, args):
    """reverse: the same op over shifted dimensions."""
    attrs = dict(instr.attrs, dimensions=_shifted(instr.attrs["dimensions"]))
    return _emit(instr.opcode, [b.front(args[0])], attrs), 0


def _concatenate(b: Batching, instr, args):
    attrs = {"dimensions": _shifted(instr.attrs["dimensions"])}
    return _emit("concatenate", [b.batched(a) for a in args], attrs), 0


def _pad(b: Batching, instr, args):
    operand, value = args
    config = ((0, 0, 0),) + tuple(instr.attrs["padding"])
    if value[1] is None:
        return _emit("pad", [b.batched(operand), value[0]], {"padding": config}), 0
    # a batched padding value: pad with zero, then choose the value where the mask is false
    dtype = instr.shape.dtype
    zero = _constant(0, dtype)
    padded = _emit("pad", [b.batched(operand), zero], {"padding": config})
    inside = _emit("broadcast", [_constant(True, "pred")], {},
                   shape=Shape.array("pred", instr.operand(0).shape.dims))
    mask = _emit("pad", [inside, _constant(False, "pred")],
                 {"padding": tuple(instr.attrs["padding"])})
    mask = _emit("broadcast", [mask], {"dimensions": _shifted(range(mask.rank))},
                 shape=Shape.array("pred", padded.dims))
    fill = b.full(value, instr.shape.dims)
    return _emit("select", [mask, padded, fill]), 0


def _leading(b: Batching, instr, args):
    """Ops whose leading dimensions already batch (cholesky, fft, topk, ...)."""
    ops = [b.batched(a) for a in args]
    return b.result(_emit(instr.opcode, ops, dict(instr.attrs)))


# -- rules: reductions, windows, sorting --------------------------------------------------------
def _unbatched_inits(instr, inits) -> list:
    if any(is_batched(v) for v in inits):
        raise BatchingError(f"vmap cannot batch {instr.opcode} %{instr.name} over a batched "
                            f"initial value")
    return [v[0] for v in inits]


def _reduce(b: Batching, instr, args):
    n = len(args) // 2
    inits = _unbatched_inits(instr, args[n:])
    attrs = dict(instr.attrs, dimensions=_shifted(instr.attrs["dimensions"]))
    return b.result(_emit("reduce", [b.batched(a) for a in args[:n]] + inits, attrs))


def _window(window: Window) -> Window:
    return Window((WindowDim(1),) + tuple(window.dims))


def _reduce_window(b: Batching, instr, args):
    n = len(args) // 2
    inits = _unbatched_inits(instr, args[n:])
    attrs = dict(instr.attrs, window=_window(instr.attrs["window"]))
    return b.result(_emit("reduce-window", [b.batched(a) for a in args[:n]] + inits, attrs))


def _select_and_scatter(b: Batching, instr, args):
    init = _unbatched_inits(instr, args[2:])
    attrs = dict(instr.attrs, window=_window(instr.attrs["window"]))
    ops = [b.batched(args[0]), b.batched(args[1])] + init
    return _emit("select-and-scatter", ops, attrs), 0


def _sort(b: Batching, instr, args):
    attrs = dict(instr.attrs, dimensions=_shifted(instr.attrs["dimensions"]))
    return b.result(_emit("sort", [b.batched(a) for a in args], attrs))


# -- rules: contractions -------------------------------------------------------------------------
def _dot(b: Batching, instr, args):
    (lhs, lb), (rhs, rb) = args
    attrs = dict(instr.attrs)
    names = ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims")
    dims = {k: tuple(attrs.get(k, ())) for k in names}
    nbatch = len(dims["lhs_batch_dims"])
    lhs_op = b.front((lhs, lb)) if lb is not None else lhs
    rhs_op = b.front((rhs, rb)) if rb is not None else rhs
    for side, batched in (("lhs", lb is not None), ("rhs", rb is not None)):
        if batched:
            for kind in ("batch", "contracting"):
                key = f"{side}_{kind}_dims"
                dims[key] = _shifted(dims[key])
    if lb is not None and rb is not None:
        dims["lhs_batch_dims"] = (0,) + dims["lhs_batch_dims"]
        dims["rhs_batch_dims"] = (0,) + dims["rhs_batch_dims"]
        out = 0
    elif lb is not None:
        out = nbatch
    else:
        out = nbatch + lhs.rank - nbatch - len(dims["lhs_contracting_dims"])
    attrs.update(dims)
    return _emit("dot", [lhs_op, rhs_op], attrs, shape=b.shape(instr.shape, out)), out


def _merge(b: Batching, value, target: int):
    """A batched op with the batch folded, major, into its unbatched dimension `target`."""
    op = b.front(value)
    perm = list(range(1, op.rank))
    perm.insert(target, 0)
    moved = _emit("transpose", [op], {"dimensions": tuple(perm)})
    dims = list(op.dims[1:])
    dims[target] *= b.size
    return _emit("reshape", [moved], shape=Shape.array(op.dtype, dims))


def _split(b: Batching, op, dim: int):
    dims = list(op.dims)
    dims[dim:dim + 1] = [b.size, dims[dim] // b.size]
    return _emit("reshape", [op], shape=Shape.array(op.dtype, dims)), dim


def _convolution(b: Batching, instr, args):
    lhs, rhs = args
    labels = parse_dim_labels(instr.attrs["dim_labels"])
    attrs = dict(instr.attrs)
    groups = attrs.get("feature_group_count", 1)
    if attrs.get("batch_group_count", 1) != 1:
        return _unrolled(b, instr, args)
    if rhs[1] is None:  # fold the batch into the input batch dimension
        out = _emit("convolution", [_merge(b, lhs, labels.input_batch), rhs[0]], attrs)
        return _split(b, out, labels.output_batch)
    kernel = _merge(b, rhs, labels.kernel_output_feature)
    if lhs[1] is None and groups > 1:  # grouped outputs interleave: batch the input too
        lhs = (b.batched(lhs), 0)
    if lhs[1] is None:  # fold the batch into the output features
        out = _emit("convolution", [lhs[0], kernel], attrs)
        return _split(b, out, labels.output_feature)
    # both batched: one feature group per batch element (and per original group)
    attrs["feature_group_count"] = groups * b.size
    out = _emit("convolution", [_merge(b, lhs, labels.input_feature), kernel], attrs)
    return _split(b, out, labels.output_feature)


def _triangular_solve(b: Batching, instr, args):
    ops = [b.batched(a) for a in args]
    return _emit("triangular-solve", ops, dict(instr.attrs)), 0


def _unrolled(b: Batching, instr, args):
    """The op once per batch element, the results stacked (for rare combinations)."""
    lanes = []
    for i in range(b.size):
        ops = [b.lane(a, i) if a[1] is not None else a[0] for a in args]
        lanes.append(emit_like(instr, ops))
    return _stack(b, lanes)


def _stack(b: Batching, lanes):
    if lanes[0].shape.is_tuple:
        count = len(lanes[0].shape.tuple_shapes)
        return [_stack(b, [_emit("get-tuple-element", [lane], {"index": k}) for lane in lanes])
                for k in range(count)]
    rows = [_emit("reshape", [lane], shape=Shape.array(lane.dtype, (1, *lane.dims)))
            for lane in lanes]
    return _emit("concatenate", rows, {"dimensions": (0,)}), 0


# -- rules: indexing ---------------------------------------------------------------------------
def _index_vector(b: Batching, indices, sizes, bounds):
    """s32[size, n] start indices from n scalar index values, clamped so that each slice
    fits (dynamic-slice semantics; gather and scatter would drop or clamp otherwise)."""
    columns = []
    for value, size, bound in zip(indices, sizes, bounds):
        index = b.batched(value)
        index = _emit("convert", [index], shape=Shape.array("s32", index.dims))
        low = _emit("broadcast", [_constant(0, "s32")], {}, shape=index.shape)
        high = _emit("broadcast", [_constant(bound - size, "s32")], {}, shape=index.shape)
        index = _emit("clamp", [low, index, high])
        columns.append(_emit("reshape", [index], shape=Shape.array("s32", (b.size, 1))))
    return _emit("concatenate", columns, {"dimensions": (1,)})


def _dynamic_slice(b: Batching, instr, args):
    operand, indices = args[0], args[1:]
    sizes = tuple(instr.attrs["dynamic_slice_sizes"])
    if not any(is_batched(i) for i in indices):
        zero = _constant(0, instr.operand(1).shape.dtype)
        attrs = {"dynamic_slice_sizes": (b.size,) + sizes}
        return _emit("dynamic-slice", [b.front(operand), zero] + [i[0] for i in indices],
                     attrs), 0
    bounds = instr.operand(0).shape.dims
    starts = _index_vector(b, indices, sizes, bounds)
    rank = len(sizes)
    attrs = {"offset_dims": tuple(range(1, rank + 1)), "collapsed_slice_dims": (),
             "index_vector_dim": 1, "slice_sizes": sizes, "indices_are_sorted": False}
    if operand[1] is None:
        attrs.update(start_index_map=tuple(range(rank)), operand_batching_dims=(),
                     start_indices_batching_dims=())
        return _emit("gather", [operand[0], starts], attrs), 0
    attrs.update(start_index_map=_shifted(range(rank)), operand_batching_dims=(0,),
                 start_indices_batching_dims=(0,), slice_sizes=(1,) + sizes)
    return _emit("gather", [b.front(operand), starts], attrs), 0


def _dynamic_update_slice(b: Batching, instr, args):
    operand, update, indices = args[0], args[1], args[2:]
    if not any(is_batched(i) for i in indices):
        zero = _constant(0, instr.operand(2).shape.dtype) if indices else None
        ops = [b.batched(operand), b.batched(update), zero] + [i[0] for i in indices]
        return _emit("dynamic-update-slice", ops), 0
    sizes = instr.operand(1).shape.dims
    starts = _index_vector(b, indices, sizes, instr.operand(0).shape.dims)
    rank = len(sizes)
    attrs = {"update_window_dims": _shifted(range(rank)), "inserted_window_dims": (),
             "scatter_dims_to_operand_dims": _shifted(range(rank)),
             "input_batching_dims": (0,), "scatter_indices_batching_dims": (0,),
             "index_vector_dim": 1, "indices_are_sorted": True, "unique_indices": True,
             "to_apply": _take_update(instr.shape.dtype)}
    ops = [b.batched(operand), starts, b.batched(update)]
    return _emit("scatter", ops, attrs), 0


def _take_update(dtype: str):
    builder = current_builder()
    scalar = Shape.array(dtype, ())
    return builder._root().computation(lambda old, new: new, [scalar, scalar], "take_update")


def _gather(b: Batching, instr, args):
    (operand, ob), indices = args
    attrs = dict(instr.attrs)
    ivd = attrs["index_vector_dim"]
    attrs["offset_dims"] = _shifted(attrs["offset_dims"])
    attrs["index_vector_dim"] = ivd + 1
    attrs["start_indices_batching_dims"] = _shifted(attrs.get("start_indices_batching_dims", ()))
    if ob is None:  # the batch is one more batch dimension of the indices
        return _emit("gather", [operand, b.front(indices)], attrs), 0
    for key in ("collapsed_slice_dims", "start_index_map", "operand_batching_dims"):
        attrs[key] = _shifted(attrs.get(key, ()))
    attrs["operand_batching_dims"] = (0,) + attrs["operand_batching_dims"]
    attrs["start_indices_batching_dims"] = (0,) + attrs["start_indices_batching_dims"]
    attrs["slice_sizes"] = (1,) + tuple(attrs["slice_sizes"])
    return _emit("gather", [b.front((operand, ob)), b.batched(indices)], attrs), 0


def _scatter(b: Batching, instr, args):
    n = (len(args) - 1) // 2
    attrs = dict(instr.attrs)
    for key in ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
                "input_batching_dims", "scatter_indices_batching_dims"):
        attrs[key] = _shifted(attrs.get(key, ()))
    attrs["input_batching_dims"] = (0,) + attrs["input_batching_dims"]
    attrs["scatter_indices_batching_dims"] = (0,) + attrs["scatter_indices_batching_dims"]
    attrs["index_vector_dim"] = attrs["index_vector_dim"] + 1
    ops = [b.batched(a) for a in args]
    return b.result(_emit("scatter", ops, attrs))


# -- rules: tuples, calls and control flow -----------------------------------------------------
def _tuple(b: Batching, instr, args):
    return list(args)


def _get_tuple_element(b: Batching, instr, args):
    value = expand(args[0])
    return value[instr.attrs["index"]]


def _call(b: Batching, instr, args):
    return b.run(instr.attrs["to_apply"], args)


def _opt_barrier(b: Batching, instr, args):
    value = b.conform(args[0], flags_of(expand(args[0])))
    fenced = _emit("opt-barrier", [_tuple_op(value)])
    return _unpack(fenced, value)


def _tuple_op(value):
    if isinstance(value, list):
        return _emit("tuple", [_tuple_op(v) for v in value])
    return value[0]


def _unpack(op, like):
    if isinstance(like, list):
        return [_unpack(_emit("get-tuple-element", [op], {"index": i}), v)
                for i, v in enumerate(like)]
    return op, like[1]


def _to_tracers(value):
    if isinstance(value, list):
        return [_to_tracers(v) for v in value]
    return Tracer(value[0])


def _from_tracers(tree, flags):
    if isinstance(flags, list):
        return [_from_tracers(t, f) for t, f in zip(tree, flags)]
    return tree.op, (0 if flags else None)


def _while(b: Batching, instr, args):
    from ..frontend.lax_api import while_loop
    from ..frontend.numpy_reduce import any as any_
    cond, body = instr.attrs["condition"], instr.attrs["body"]
    init = expand(args[0])
    flags = _while_flags(instr, flags_of(init))
    lanes_differ = _any(batched_flags(cond, [flags]))

    def predicate(state):
        return b.run(cond, [_from_tracers(state, flags)])

    def cond_fun(state):
        pred = predicate(state)
        return Tracer(pred[0]) if pred[1] is None else any_(Tracer(b.front(pred)))

    def body_fun(state):
        values = _from_tracers(state, flags)
        out = b.conform(b.run(body, [values]), flags)
        if lanes_differ:  # finished lanes keep their state
            out = b.select(b.front(predicate(state)), out, values)
        return _to_tracers(out)
    final = while_loop(cond_fun, body_fun, _to_tracers(b.conform(init, flags)))
    return _from_tracers(final, flags)


def _conditional(b: Batching, instr, args):
    selector, operands = args[0], [expand(a) for a in args[1:]]
    if "branch_computations" in instr.attrs:
        comps = list(instr.attrs["branch_computations"])
    else:
        comps = [instr.attrs["true_computation"], instr.attrs["false_computation"]]
    if selector[1] is not None:
        return _conditional_as_select(b, selector, comps, operands)
    from ..frontend.lax_api import cond, switch
    flags = False
    for comp, operand in zip(comps, operands):
        flags = _or(_flags_like(comp.root.shape, flags),
                    _flags_like(comp.root.shape, batched_flags(comp, [flags_of(operand)])))

    def branch(k):
        def run(tracers):
            values = _from_tracers(tracers, flags_of(operands[k]))
            return _to_tracers(b.conform(b.run(comps[k], [values]), flags))
        return run
    inputs = [_to_tracers(b.conform(o, flags_of(o))) for o in operands]

    def pick(k):
        return lambda *ops: branch(k)(ops[k])
    if selector[0].dtype == "pred":
        out = cond(Tracer(selector[0]), pick(0), pick(1), *inputs)
    else:
        out = switch(Tracer(_branch_index(selector[0], len(comps))),
                     [pick(k) for k in range(len(comps))], *inputs)
    return _from_tracers(out, flags)


def _branch_index(index, count: int):
    """HLO's rule: an index outside [0, count) runs the last branch."""
    low = _emit("broadcast", [_constant(0, "s32")], {}, shape=index.shape)
    high = _emit("broadcast", [_constant(count, "s32")], {}, shape=index.shape)
    last = _emit("broadcast", [_constant(count - 1, "s32")], {}, shape=index.shape)
    inside = _emit("and", [_emit("compare", [index, low], {"direction": "GE"}),
                           _emit("compare", [index, high], {"direction": "LT"})])
    return _emit("select", [inside, index, last])


def _conditional_as_select(b: Batching, selector, comps, operands):
    """A batched selector: every branch runs, each lane keeps its own branch's result."""
    outs = [b.run(comp, [operand]) for comp, operand in zip(comps, operands)]
    index = b.front(selector)
    if index.dtype == "pred":
        return b.select(index, outs[0], outs[1])
    index = _branch_index(index, len(comps))
    result = outs[-1]
    for k in reversed(range(len(comps) - 1)):
        k_op = _emit("broadcast", [_constant(k, "s32")], {}, shape=index.shape)
        result = b.select(_emit("compare", [index, k_op], {"direction": "EQ"}), outs[k], result)
    return result


def _refuse(reason: str):
    def rule(b: Batching, instr, args):
        raise BatchingError(f"vmap cannot batch {instr.opcode} %{instr.name}: {reason}")
    return rule


_ELEMENTWISE = {name: _elementwise for name, row in OPCODES.items()
                if row.kind == ELEMENTWISE and name != "map"}

BATCHING_RULES = {
    **_ELEMENTWISE,
    "map": _map,
    "broadcast": _broadcast,
    "reshape": _reshape,
    "bitcast": _reshape,
    "transpose": _transpose,
    "slice": _slice,
    "reverse": _with_dims,
    "concatenate": _concatenate,
    "pad": _pad,
    "dynamic-slice": _dynamic_slice,
    "dynamic-update-slice": _dynamic_update_slice,
    "gather": _gather,
    "scatter": _scatter,
    "reduce": _reduce,
    "reduce-window": _reduce_window,
    "select-and-scatter": _select_and_scatter,
    "sort": _sort,
    "topk": _leading,
    "dot": _dot,
    "convolution": _convolution,
    "fft": _leading,
    "cholesky": _leading,
    "triangular-solve": _triangular_solve,
    "rng-bit-generator": _unrolled,
    "tuple": _tuple,
    "get-tuple-element": _get_tuple_element,
    "call": _call,
    "while": _while,
    "conditional": _conditional,
    "opt-barrier": _opt_barrier,
    "custom-call": _refuse("a custom call's batching behaviour is unknown"),
    "rng": _refuse("rng with batched bounds; use minixla.random"),
}
