"""Interpreter handlers for reductions and windows: reduce, reduce-window, select-and-scatter,
plus the random-number ops (rng-bit-generator, rng). Sort and topk live in ops_sort.py.

Reduce: when to_apply is a single add/multiply/maximum/minimum/and/or/xor of its two parameters,
NumPy's ufunc reduction runs and the init value is combined once at the end (XLA leaves the
combination order unspecified). f16/bf16 accumulate in f32 and are rounded once at the end.
maximum/minimum propagate NaN and order -0 below +0, like the elementwise ops. Any other
to_apply (variadic argmin/argmax, ...) is folded over the reduced elements in index order from
the init values, vectorized over the kept dimensions, as XLA:CPU's loops fold them. Long folds
pair neighbours instead (log2(n) steps, not n) only where the to_apply cannot tell the orders
apart: it picks one of its arguments by comparisons (argmax), or combines each pair of its
arguments by one associative op.

Reduce-window and select-and-scatter visit window offsets in row-major order. Padding and
base-dilation holes are skipped, as in XLA's CPU emitter and HloEvaluator; the documented
"pad with init" gives the same result whenever init is an identity of to_apply.

select-and-scatter follows HloEvaluator: in each window the first valid element is selected,
then each later element replaces it when select(selected, candidate) is false; scatter is
applied in row-major source order. A window lying wholly in padding selects nothing.

rng-bit-generator implements XLA's RngBitGeneratorExpander: rng_philox (and rng_default, which
XLA:CPU maps to Philox) is Philox4x32-10 and rng_three_fry is Threefry2x32-20, with XLA's state
layout (state[0] is the key; a u64[2] Philox state is read reversed as the 128-bit counter).
This follows the expander step by step, so outputs are meant to be bit-identical to XLA:CPU;
the cores are checked against Random123's known-answer vectors, not against XLA itself.
`rng` is implementation-defined in XLA: here it draws from a NumPy generator seeded by how many
rng ops the executable has evaluated so far, so every backend (cpu runs rng through this
handler) gives the same values for the same sequence of calls; they do not match XLA's.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from ..errors import ShapeError, UnsupportedError
from ..ir.dtypes import FLOAT
from ..ir.opcodes import ASSOCIATIVE, opcodes_with
from .convert import compute_dtype, element_type, is_narrow_float, round_to_dtype
from .elementwise import BINARY
from .evaluator import as_dtype
from .ops_sort import HANDLERS as SORT_HANDLERS
from .random_stream import active_stream

_FAST_OPS = ("add", "multiply", "maximum", "minimum", "and", "or", "xor")
_UFUNC = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum}
_INT_UFUNC = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
_BOOL_UFUNC = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}
_SEQUENTIAL_FOLD_LIMIT = 64
# Ops through which a computation only compares its arguments and returns some of them.
_PICKING = frozenset({"parameter", "constant", "compare", "select", "maximum", "minimum", "tuple"})
_PRED_LOGIC = frozenset({"and", "or", "not", "xor"})


# ---- shared helpers ------------------------------------------------------------------------


def _fast_op(comp, dtype) -> str | None:
    """The opcode when `comp` is `op(p0, p1)` (either order) and NumPy can reduce `dtype`."""
    root, params = comp.root, comp.parameters
    if len(params) != 2 or root.opcode not in _FAST_OPS or len(root.operands) != 2:
        return None
    if {id(o) for o in root.operands} != {id(p) for p in params}:
        return None
    kind = np.dtype(dtype).kind
    if kind == "b":
        ok = root.opcode in _BOOL_UFUNC
    elif kind in "iu":
        ok = np.dtype(dtype).itemsize * 8 == element_type(dtype).bits  # no sub-byte ints
    elif kind == "c":
        ok = root.opcode in ("add", "multiply")
    else:
        ok = element_type(dtype).kind == FLOAT and root.opcode in _UFUNC
    return root.opcode if ok else None


def _results(value, n: int) -> list[np.ndarray]:
    """A called computation's result as a list of N arrays."""
    if isinstance(value, tuple):
        return [np.asarray(v) for v in value]
    if n != 1:
        raise ShapeError(f"to_apply returned one value where {n} were expected")
    return [np.asarray(value)]


def _out_shapes(instr) -> list:
    return list(instr.shape.tuple_shapes) if instr.shape.is_tuple else [instr.shape]


def _finish(instr, arrays):
    """Broadcasts/casts results to the declared shapes; a tuple for a tuple shape."""
    outs = [
        as_dtype(np.array(np.broadcast_to(a, s.dims)), s)
        for a, s in zip(arrays, _out_shapes(instr))
    ]
    return tuple(outs) if instr.shape.is_tuple else outs[0]


def _from_acc(values, dtype):
    """Rounds an f32 accumulation of narrow floats back once; other types are unchanged."""
    return round_to_dtype(values, dtype) if is_narrow_float(dtype) else np.asarray(values)


# ---- reduce ----------------------------------------------------------------------------------


def _signed_zero_fix(op: str, values: np.ndarray, result: np.ndarray, axes) -> np.ndarray:
    """np.maximum/minimum ignore the sign of zero; XLA's order -0 below +0."""
    zero = result == 0
    if not zero.any():
        return result
    want_negative = op == "minimum"
    present = np.any((values == 0) & (np.signbit(values) == want_negative), axis=axes)
    preferred = np.array(-0.0 if want_negative else 0.0, result.dtype)
    other = np.array(0.0 if want_negative else -0.0, result.dtype)
    return np.where(zero, np.where(present, preferred, other), result)


def _fast_reduce(op: str, operand: np.ndarray, init: np.ndarray, axes) -> np.ndarray:
    dtype = operand.dtype
    acc = compute_dtype(dtype)
    values, init = operand.astype(acc, copy=False), np.asarray(init).astype(acc)
    if any(operand.shape[a] == 0 for a in axes):
        return np.broadcast_to(init, [d for i, d in enumerate(operand.shape) if i not in axes])
    kind = acc.kind
    ufunc = (_BOOL_UFUNC if kind == "b" else _INT_UFUNC).get(op) or _UFUNC[op]
    with np.errstate(all="ignore"):
        # -0.0 is addition's true identity; NumPy starts sums from +0.0, losing the sign of
        # an all-negative-zero sum
        start = (
            {"initial": complex(-0.0, -0.0) if kind == "c" else -0.0}
            if op == "add" and kind in "fc"
            else {}
        )
        partial = ufunc.reduce(values, axis=axes, dtype=acc, **start)
        if kind == "f" and op in ("maximum", "minimum"):
            partial = _signed_zero_fix(op, values, partial, axes)
        return _from_acc(BINARY[op](init, partial), dtype)


def _pairwise_fold(ev, comp, flat, n):
    """Combines neighbours level by level down to one element: log2(count) calls, and the
    element order is kept, so any associative to_apply gives the sequential result."""
    while flat[0].shape[-1] > 1:
        even = flat[0].shape[-1] // 2 * 2
        merged = _results(
            ev.apply_scalar(
                comp, [x[..., 0:even:2] for x in flat] + [x[..., 1:even:2] for x in flat]
            ),
            n,
        )
        flat = [
            np.concatenate(
                [np.broadcast_to(m, x[..., 0:even:2].shape).astype(x.dtype), x[..., even:]], axis=-1
            )
            for m, x in zip(merged, flat)
        ]
    return [x[..., 0] for x in flat]


def reassociates(comp, n: int) -> bool:
    """Whether pairing neighbours gives the in-order fold's result: the computation picks
    among its arguments by comparisons (taken to be a consistent order, as every argmin and
    argmax is), or result k is one associative op of arguments k and n + k."""
    picks = all(
        i.opcode in _PICKING or (i.opcode in _PRED_LOGIC and i.shape.dtype == "pred")
        for i in comp.instructions
    )
    if picks:
        return True
    root = comp.root
    results = root.operands if root.opcode == "tuple" else [root]
    params = comp.parameters
    return len(results) == n and all(
        r.opcode in opcodes_with(ASSOCIATIVE)
        and len(r.operands) == 2
        and {id(o) for o in r.operands} == {id(params[k]), id(params[n + k])}
        for k, r in enumerate(results)
    )


def _general_reduce(ev, comp, inputs, inits, axes) -> list[np.ndarray]:
    kept = [d for d in range(inputs[0].ndim) if d not in axes]
    kept_shape = tuple(inputs[0].shape[d] for d in kept)
    count = int(np.prod([inputs[0].shape[d] for d in axes], dtype=np.int64))
    flat = [np.transpose(x, kept + list(axes)).reshape(kept_shape + (count,)) for x in inputs]
    n = len(inputs)
    accs = [np.broadcast_to(i, kept_shape) for i in inits]
    if count > _SEQUENTIAL_FOLD_LIMIT and reassociates(comp, n):
        totals = _pairwise_fold(ev, comp, flat, n)
        return _results(ev.apply_scalar(comp, accs + totals), n)
    for k in range(count):
        accs = _results(ev.apply_scalar(comp, accs + [x[..., k] for x in flat]), n)
    return accs


def reducer_operand_shapes(instr) -> list:
    """The reducer parameter each operand of a reduce or reduce-window feeds: the inputs its
    element parameters, the inits its accumulators (which come first in its signature)."""
    params = instr.attrs["to_apply"].parameter_shapes
    n = instr.operand_count // 2
    return params[n:] + params[:n]


def _in_reducer_types(instr, ops) -> tuple[list, list]:
    """(inputs, inits) converted to the float types of the reducer's parameters: with mixed
    precision an f64 init may start a bf16 reducer, or f32 inputs feed it; the reducer sees
    values of its own types (as XLA's float normalization makes them), on every backend."""
    converted = []
    for value, shape in zip(ops, reducer_operand_shapes(instr)):
        value = np.asarray(value)
        floats = element_type(value.dtype).kind == FLOAT and shape.element_type.kind == FLOAT
        converted.append(as_dtype(value, shape) if floats else value)
    n = len(ops) // 2
    return converted[:n], converted[n:]


def _reduce(ev, instr, ops):
    n = len(ops) // 2
    inputs, inits = _in_reducer_types(instr, ops)
    axes = tuple(sorted(instr.attrs["dimensions"]))
    comp = instr.attrs["to_apply"]
    op = _fast_op(comp, inputs[0].dtype) if n == 1 else None
    if op is not None:
        return _finish(instr, [_fast_reduce(op, inputs[0], inits[0], axes)])
    return _finish(instr, _general_reduce(ev, comp, inputs, inits, axes))


# ---- windows ---------------------------------------------------------------------------------


def _window_out_size(n: int, wd) -> int:
    padded = wd.padding_low + wd.padding_high + ((n - 1) * wd.lhs_dilation + 1 if n else 0)
    extent = (wd.size - 1) * wd.rhs_dilation + 1
    return 0 if padded < extent else (padded - extent) // wd.stride + 1


def scan_axis(dims, window) -> tuple[int, bool] | None:
    """(axis, reverse) when the window is one whole axis padded on one side (JAX's cumsum and
    friends: output i reduces elements 0..i, or i..n-1 when reverse) and every other dim is
    the identity window; else None."""
    found = None
    for d, (n, wd) in enumerate(zip(dims, window.dims)):
        plain = wd.stride == 1 and wd.lhs_dilation == 1 and wd.rhs_dilation == 1
        if not plain or wd.reversal:
            return None
        if wd.size == 1 and wd.padding_low == 0 and wd.padding_high == 0:
            continue
        if found is not None or n < 2 or wd.size != n:
            return None
        if (wd.padding_low, wd.padding_high) == (n - 1, 0):
            found = (d, False)
        elif (wd.padding_low, wd.padding_high) == (0, n - 1):
            found = (d, True)
        else:
            return None
    return found


def _window_taps(dims, window):
    """For each window offset in row-major order: (index tuple for np arrays, valid mask), both
    shaped like the output. Invalid positions (padding, dilation holes) index element 0."""
    if len(window.dims) != len(dims):
        raise ShapeError(f"window has {len(window.dims)} dims, operand has {len(dims)}")
    bases = []
    for n, wd in zip(dims, window.dims):
        if wd.reversal:
            raise UnsupportedError("window reversal is only meaningful for convolution")
        bases.append(np.arange(_window_out_size(n, wd)) * wd.stride - wd.padding_low)

    def tap(d: int, offset: int):  # made per use: a whole-axis window has as many taps as
        n, wd = dims[d], window.dims[d]  # outputs, and all of them at once are quadratic
        pos = bases[d] + offset * wd.rhs_dilation
        valid = (pos >= 0) & (pos % wd.lhs_dilation == 0) & (pos <= (n - 1) * wd.lhs_dilation)
        return np.where(valid, pos // wd.lhs_dilation, 0), valid

    rank = len(dims)
    for offsets in itertools.product(*(range(wd.size) for wd in window.dims)):
        combo = [tap(d, offset) for d, offset in enumerate(offsets)]
        # Open-mesh vectors (np.ix_ would read the bool masks as index lists).
        index = tuple(
            c[0].reshape([-1 if i == d else 1 for i in range(rank)]) for d, c in enumerate(combo)
        )
        valid = functools.reduce(
            np.logical_and, (c[1].reshape(i.shape) for c, i in zip(combo, index)), np.True_
        )
        yield index, np.asarray(valid)


def _window_shape(dims, window) -> tuple[int, ...]:
    return tuple(_window_out_size(n, wd) for n, wd in zip(dims, window.dims))


def _reduce_window(ev, instr, ops):
    n = len(ops) // 2
    inputs, inits = _in_reducer_types(instr, ops)
    comp, window = instr.attrs["to_apply"], instr.attrs["window"]
    out_shape = _window_shape(inputs[0].shape, window)
    op = _fast_op(comp, inputs[0].dtype) if n == 1 else None
    if op is not None:
        acc = compute_dtype(inputs[0].dtype)
        inputs = [inputs[0].astype(acc, copy=False)]
        inits = [np.asarray(inits[0]).astype(acc)]
    accs = [np.broadcast_to(i, out_shape) for i in inits]
    scan = scan_axis(inputs[0].shape, window)
    prefix = scan is not None and not scan[1]  # output i reduces elements 0..i
    if prefix and op in ("add", "multiply") and inputs[0].dtype.kind == "f":
        axis = scan[0]
        # init, then each element in position order, as the taps below add them: one
        # sequential accumulate instead of a pass per tap (a whole axis has n taps)
        first = np.expand_dims(np.take(accs[0], 0, axis=axis), axis)
        with np.errstate(all="ignore"):
            running = _UFUNC[op].accumulate(
                np.concatenate([first, inputs[0]], axis=axis), axis=axis
            )
        accs = [np.delete(running, 0, axis=axis)]
    elif inputs[0].size:
        for index, valid in _window_taps(inputs[0].shape, window):
            if not valid.any():
                continue
            values = [x[index] for x in inputs]
            if op is not None:
                with np.errstate(all="ignore"):
                    new = [BINARY[op](accs[0], values[0])]
            else:
                new = _results(ev.apply_scalar(comp, accs + values), n)
            accs = [np.where(valid, b, a) for a, b in zip(accs, new)]
    if op is not None:
        accs = [_from_acc(accs[0], ops[0].dtype)]
    return _finish(instr, accs)


def _select_and_scatter(ev, instr, ops):
    operand, source, init = ops
    window = instr.attrs["window"]
    select, scatter = instr.attrs["select"], instr.attrs["scatter"]
    if source.shape != _window_shape(operand.shape, window):
        raise ShapeError(f"select-and-scatter source {source.shape} does not match the windows")
    best = best_at = have = None
    strides = np.array([int(np.prod(operand.shape[d + 1 :])) for d in range(operand.ndim)])
    for index, valid in _window_taps(operand.shape, window) if operand.size else ():
        values = operand[index]
        flat = sum((i * s for i, s in zip(index, strides)), np.zeros((), np.int64))
        if best is None:
            best, best_at, have = values, np.broadcast_to(flat, source.shape), valid
            continue
        keep = np.broadcast_to(np.asarray(ev.apply_scalar(select, [best, values])), source.shape)
        take = valid & (~have | ~keep)
        best, best_at = np.where(take, values, best), np.where(take, flat, best_at)
        have = have | valid
    out = np.full(operand.size, init, dtype=operand.dtype)
    if have is not None and have.any():
        targets, updates = best_at[have], source[have]
        # Updates to one element are applied in source order: one round per repeat.
        order = np.argsort(targets, kind="stable")
        targets, updates = targets[order], updates[order]
        starts = np.r_[0, np.flatnonzero(np.diff(targets)) + 1]
        rank = np.arange(targets.size) - np.repeat(starts, np.diff(np.r_[starts, targets.size]))
        for r in range(int(rank.max()) + 1):
            at = targets[rank == r]
            out[at] = np.broadcast_to(
                ev.apply_scalar(scatter, [out[at], updates[rank == r]]), at.shape
            )
    return as_dtype(out.reshape(operand.shape), instr.shape)


# ---- random numbers ------------------------------------------------------------------------

_M32 = 0xFFFFFFFF


def _philox4x32(counter, key):
    """Philox4x32-10 on four u32 arrays with a key of two Python ints (Random123's rounds)."""
    c0, c1, c2, c3 = (np.asarray(c, np.uint32) for c in counter)
    k0, k1 = key
    for _ in range(10):
        p0 = c0.astype(np.uint64) * np.uint64(0xD2511F53)
        p1 = c2.astype(np.uint64) * np.uint64(0xCD9E8D57)
        c0, c1, c2, c3 = (
            (p1 >> np.uint64(32)).astype(np.uint32) ^ c1 ^ np.uint32(k0),
            p1.astype(np.uint32),
            (p0 >> np.uint64(32)).astype(np.uint32) ^ c3 ^ np.uint32(k1),
            p0.astype(np.uint32),
        )
        k0, k1 = (k0 + 0x9E3779B9) & _M32, (k1 + 0xBB67AE85) & _M32
    return c0, c1, c2, c3


def _rotl(v, r: int):
    return (v << np.uint32(r)) | (v >> np.uint32(32 - r))


def _threefry2x32(counter, key):
    """Threefry2x32-20 on two u32 arrays with a key of two Python ints."""
    rotations = (13, 15, 26, 6, 17, 29, 16, 24)
    ks = (key[0], key[1], 0x1BD11BDA ^ key[0] ^ key[1])
    x0 = np.asarray(counter[0], np.uint32) + np.uint32(ks[0])  # arrays: wrap silently
    x1 = np.asarray(counter[1], np.uint32) + np.uint32(ks[1])
    for block in range(1, 6):
        for r in rotations[0:4] if block % 2 else rotations[4:8]:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + np.uint32(ks[block % 3])
        x1 = x1 + np.uint32((ks[(block + 1) % 3] + block) & _M32)
    return x0, x1


def _split_u64(values):
    values = np.asarray(values, np.uint64)
    return (values & np.uint64(_M32)).astype(np.uint32), (values >> np.uint64(32)).astype(np.uint32)


def _join_u64(low, high):
    return low.astype(np.uint64) | (high.astype(np.uint64) << np.uint64(32))


def _philox_bits(key: int, low: int, high: int, count: int, bits: int):
    """XLA's PhiloxRngBit32/64: returns (flat words, new 128-bit counter as (low, high))."""
    blocks = -(-count * (2 if bits == 64 else 1) // 4)
    ctr_low = np.uint64(low) + np.arange(blocks, dtype=np.uint64)
    ctr_high = np.where(ctr_low < np.uint64(low), np.uint64((high + 1) % 2**64), np.uint64(high))
    out = _philox4x32((*_split_u64(ctr_low), *_split_u64(ctr_high)), (key & _M32, key >> 32))
    if bits == 64:
        out = (_join_u64(out[0], out[1]), _join_u64(out[2], out[3]))
    new_low = (low + blocks) % 2**64
    new_high = (high + (new_low < low)) % 2**64
    return np.stack(out, axis=1).reshape(-1)[:count], (new_low, new_high)


def _threefry_bits(key: int, counter: int, dims, bits: int):
    """XLA's ThreeFryRngBit32/64: returns (words shaped `dims`, new counter)."""
    key_words = (key & _M32, key >> 32)
    if bits == 64:
        count = int(np.prod(dims))
        ctr = np.uint64(counter) + np.arange(count, dtype=np.uint64)
        out = _threefry2x32(_split_u64(ctr), key_words)
        return _join_u64(*out).reshape(dims), (counter + count) % 2**64
    # 32 bits: split one dimension in halves, the two output words fill alternate positions.
    dims = list(dims)
    if not dims:
        split = 0
        half = [1]
    else:
        even = [i for i, d in enumerate(dims) if d % 2 == 0]
        split = even[0] if even else int(np.argmax(dims))
        half = dims[:split] + [-(-dims[split] // 2)] + dims[split + 1 :]
    count = int(np.prod(half))
    ctr = np.uint64(counter) + np.arange(count, dtype=np.uint64)
    x0, x1 = (w.reshape(half) for w in _threefry2x32(_split_u64(ctr), key_words))
    if not dims:
        return x0.reshape(()), (counter + count) % 2**64
    both = np.stack([x0, x1], axis=split + 1).reshape(
        dims[:split] + [2 * half[split]] + dims[split + 1 :]
    )
    return np.take(both, np.arange(dims[split]), axis=split), (counter + count) % 2**64


def _rng_bit_generator(ev, instr, ops):
    state = np.asarray(ops[0])
    state_shape, data_shape = instr.shape.tuple_shapes
    words = state.view(np.uint64) if state.dtype == np.uint32 else state.astype(np.uint64)
    algorithm = instr.attrs.get("algorithm", "rng_default")
    width = element_type(data_shape.numpy_dtype).bits
    bits = 64 if width == 64 else 32
    dims = data_shape.dims
    key, new_state = int(words[0]), [int(w) for w in words]
    if algorithm in ("rng_default", "rng_philox"):
        if words.size < 2:
            raise ShapeError("rng-bit-generator Philox state needs at least two u64 words")
        low, high = (
            (int(words[1]), int(words[2])) if words.size >= 3 else (int(words[1]), int(words[0]))
        )
        flat, (new_low, new_high) = _philox_bits(key, low, high, int(np.prod(dims)), bits)
        data = flat.reshape(dims)
        new_state[1:3] = [new_low, new_high][: words.size - 1]
    elif algorithm == "rng_three_fry":
        data, new_state[1] = _threefry_bits(key, int(words[1]), dims, bits)
    else:
        raise UnsupportedError(f"rng-bit-generator algorithm {algorithm} is not supported")
    data = data.astype(np.dtype(f"u{width // 8}")) if width < 32 else data
    if np.dtype(data_shape.numpy_dtype).itemsize != data.dtype.itemsize:
        raise UnsupportedError(f"rng-bit-generator cannot produce {data_shape.dtype}")
    new_words = np.array(new_state, np.uint64)
    new_words = new_words.view(np.uint32) if state.dtype == np.uint32 else new_words
    return (
        as_dtype(new_words.reshape(state_shape.dims), state_shape),
        np.array(data).view(data_shape.numpy_dtype),
    )


def _rng(ev, instr, ops):
    low, high = (np.asarray(o) for o in ops)
    generator = (active_stream() or ev.random_stream).generator()
    dims, dtype = instr.shape.dims, instr.shape.numpy_dtype
    distribution = instr.attrs.get("distribution", "rng_uniform")
    if distribution == "rng_normal":
        # mu + sigma * N(0, 1), as XLA expands it: a negative or NaN sigma is no error
        values = float(low) + float(high) * generator.standard_normal(dims)
    elif distribution != "rng_uniform":
        raise UnsupportedError(f"rng distribution {distribution} is not supported")
    elif np.dtype(dtype).kind in "iub":
        values = generator.integers(int(low), max(int(high), int(low) + 1), dims)
    else:
        # low + (high - low) * U[0, 1), as NumPy's uniform() but no error for high < low
        low_f, high_f = float(low), float(high)
        values = low_f + (high_f - low_f) * generator.random(dims)
        if high_f > low_f:
            values = np.where(values >= high_f, low_f, values)  # keep [low, high)
    return as_dtype(np.asarray(values), instr.shape)


HANDLERS = {
    "reduce": _reduce,
    "reduce-window": _reduce_window,
    "select-and-scatter": _select_and_scatter,
    "rng-bit-generator": _rng_bit_generator,
    "rng": _rng,
    **SORT_HANDLERS,
}
