"""Interpreter handlers for sort and topk.

Every sort is stable (a valid implementation of is_stable=false too). Comparators that order by
keys are recognised and sorted with np.lexsort: `compare(f(p2k), f(p2k+1))` with direction LT/GT
(f any expression of that one parameter, e.g. JAX's NaN/-0 canonicalisation), and the
lexicographic chains JAX emits, `or(lt0, and(eq0, rest))` or `select(eq0, rest, lt0)`. A FLOAT
comparison over data holding NaN is no strict weak order, so it takes the general path, as does
any other comparator: a bottom-up merge sort whose merges place each element by a vectorized
binary search, one comparator call per search step for all rows at once.

topk is XLA's TopkDecomposer: a stable sort under the total order (-NaN < -inf < ... < -0 < +0
< ... < inf < NaN), descending for largest=true, ascending otherwise, so ties keep index order.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir.attrs import GENERIC_ATTRS
from ..ir.dtypes import FLOAT
from .convert import element_type
from .evaluator import as_dtype

_DEFAULT_TYPE = {"f": "FLOAT", "i": "SIGNED", "u": "UNSIGNED", "b": "UNSIGNED"}


# ---- sort keys ---------------------------------------------------------------------------------


def total_order_key(values: np.ndarray) -> np.ndarray:
    """Signed integers whose order is the float total order (sign-magnitude -> two's complement)."""
    values = np.asarray(values)
    if values.dtype.itemsize * 8 != element_type(values.dtype).bits or values.dtype.itemsize == 1:
        values = values.astype(np.float32)  # sub-byte and 8-bit floats: f32 keeps order and -0
    ints = np.ascontiguousarray(values).view(np.dtype(f"i{values.dtype.itemsize}"))
    return np.where(ints < 0, ints ^ np.iinfo(ints.dtype).max, ints)


def _is_float(dtype) -> bool:
    return element_type(dtype).kind == FLOAT


def _sort_key(values: np.ndarray, compare_type: str | None, descending: bool):
    """Values mapped to NumPy-sortable keys, or None when the comparison is no strict weak order
    on this data (FLOAT with NaN) or has no key form."""
    values = np.asarray(values)
    kind = "f" if _is_float(values.dtype) else values.dtype.kind
    ctype = (compare_type or _DEFAULT_TYPE.get(kind, "")).upper()
    if kind == "f" and ctype == "TOTALORDER":
        key = total_order_key(values)
    elif kind == "f" and ctype == "FLOAT":
        key = values.astype(np.float64)
        if np.isnan(key).any():
            return None
        return -key if descending else key
    elif kind in "iub" and ctype in ("SIGNED", "UNSIGNED"):
        if kind != "b" and values.dtype.itemsize * 8 != element_type(values.dtype).bits:
            return None  # sub-byte integers
        key = values.astype(np.uint8) if kind == "b" else values
        key = key.view(np.dtype(f"{'i' if ctype == 'SIGNED' else 'u'}{key.dtype.itemsize}"))
    else:
        return None
    return ~key if descending else key  # bitwise not reverses integer order, signed or not


# ---- comparator pattern matching ----------------------------------------------------------


def _params_of(instr, memo: dict) -> frozenset:
    if id(instr) not in memo:
        if instr.opcode == "parameter":
            memo[id(instr)] = frozenset([instr.parameter_number])
        else:
            memo[id(instr)] = frozenset().union(*(_params_of(o, memo) for o in instr.operands))
    return memo[id(instr)]


def _same_expr(a, b, pmap: dict, memo: dict) -> bool:
    """a and b compute the same function once a's parameter p is renamed pmap.get(p, p)."""
    if a is b:
        return all(pmap.get(p, p) == p for p in _params_of(a, memo))
    if a.opcode == "parameter":
        return (
            b.opcode == "parameter"
            and pmap.get(a.parameter_number, a.parameter_number) == b.parameter_number
        )
    if a.opcode != b.opcode or a.shape != b.shape or len(a.operands) != len(b.operands):
        return False
    if a.opcode == "constant":
        la, lb = a.literal, b.literal
        return (
            isinstance(la, np.ndarray)
            and isinstance(lb, np.ndarray)
            and la.dtype == lb.dtype
            and la.shape == lb.shape
            and la.tobytes() == lb.tobytes()
        )
    own = {k: v for k, v in a.attrs.items() if k not in GENERIC_ATTRS}
    if own != {k: v for k, v in b.attrs.items() if k not in GENERIC_ATTRS}:
        return False
    return all(_same_expr(x, y, pmap, memo) for x, y in zip(a.operands, b.operands))


def _key_spec(cmp, memo):
    """(operand index, expression of p2k, compare type, descending) for compare(f(p2k), f(p2k+1))
    with direction LT or GT (either operand order); None otherwise."""
    if cmp.opcode != "compare" or cmp.attrs.get("direction") not in ("LT", "GT"):
        return None
    lhs, rhs = cmp.operands
    pl, pr = _params_of(lhs, memo), _params_of(rhs, memo)
    if len(pl) != 1 or len(pr) != 1:
        return None
    (a,), (b,) = pl, pr
    if a // 2 != b // 2 or a == b or not _same_expr(lhs, rhs, {a: b}, memo):
        return None
    descending = (cmp.attrs["direction"] == "GT") == (a % 2 == 0)
    return a // 2, (lhs if a % 2 == 0 else rhs), cmp.attrs.get("type"), descending


def _is_tie_test(eq, lt, memo) -> bool:
    """eq is compare(EQ) of the same two expressions (and comparison type) as lt."""
    if (
        eq.opcode != "compare"
        or eq.attrs.get("direction") != "EQ"
        or eq.attrs.get("type") != lt.attrs.get("type")
    ):
        return False
    (e0, e1), (l0, l1) = eq.operands, lt.operands
    same = lambda x, y: _same_expr(x, y, {}, memo)  # noqa: E731
    return (same(e0, l0) and same(e1, l1)) or (same(e0, l1) and same(e1, l0))


def _lex_keys(node, memo):
    """The key list of a lexicographic comparator, most significant first, or None."""
    spec = _key_spec(node, memo)
    if spec is not None:
        return [spec]
    if node.opcode == "or" and len(node.operands) == 2:
        for lt, tie in (node.operands, node.operands[::-1]):
            head = _key_spec(lt, memo)
            if head is None or tie.opcode != "and" or len(tie.operands) != 2:
                continue
            for eq, rest in (tie.operands, tie.operands[::-1]):
                tail = _lex_keys(rest, memo) if _is_tie_test(eq, lt, memo) else None
                if tail is not None:
                    return [head] + tail
    if node.opcode == "select":
        eq, rest, lt = node.operands
        head = _key_spec(lt, memo)
        tail = _lex_keys(rest, memo) if head and _is_tie_test(eq, lt, memo) else None
        if tail is not None:
            return [head] + tail
    return None


def _eval_expr(ev, root, value):
    """Evaluates `root` (depending on one parameter, bound to `value`) on whole arrays."""
    memo: dict = {}

    def visit(node):
        if id(node) not in memo:
            if node.opcode == "parameter":
                memo[id(node)] = value
            else:
                memo[id(node)] = ev.table[node.opcode](ev, node, [visit(o) for o in node.operands])
        return memo[id(node)]

    return visit(root)


def _lexsort_perm(ev, comp, operands):
    """The stable sorting permutation along the last axis when `comp` orders by keys, else None."""
    specs = _lex_keys(comp.root, {})
    if specs is None:
        return None
    keys = []
    for index, expr, ctype, descending in specs:
        values = np.broadcast_to(_eval_expr(ev, expr, operands[index]), operands[index].shape)
        key = _sort_key(values, ctype, descending)
        if key is None:
            return None
        keys.append(key)
    if len(keys) == 1:
        return np.argsort(keys[0], axis=-1, kind="stable")
    return np.lexsort(keys[::-1], axis=-1)


# ---- general merge sort ----------------------------------------------------------------------


def _merge_level(ev, comp, rows, order, width, n):
    """Merges neighbouring sorted runs of `width` in `order` (rows x size; entries >= n are
    padding that sorts last). Each element of a left run finds, by binary search, how many
    elements of its right run sort strictly before it; the right run fills the other slots."""
    r, size = order.shape
    runs = order.reshape(r, size // (2 * width), 2, width)
    left, right = runs[:, :, 0, :], runs[:, :, 1, :]
    lo = np.zeros(left.shape, np.int64)
    hi = np.full(left.shape, width, np.int64)
    flat = lambda idx: np.minimum(idx, n - 1).reshape(r, -1)  # noqa: E731
    for _ in range(width.bit_length()):
        mid = (lo + hi) // 2
        other = np.take_along_axis(right, np.minimum(mid, width - 1), axis=-1)
        args = []
        for values in rows:  # comparator(right element, left element), operands interleaved
            args += [
                np.take_along_axis(values, flat(other), 1).reshape(other.shape),
                np.take_along_axis(values, flat(left), 1).reshape(left.shape),
            ]
        less = np.broadcast_to(np.asarray(ev.apply_scalar(comp, args), bool), left.shape)
        less = (other < n) & (less | (left >= n))
        active = lo < hi
        lo = np.where(active & less, mid + 1, lo)
        hi = np.where(active & ~less, mid, hi)
    before = np.maximum.accumulate(lo, axis=-1)  # monotone even for an inconsistent comparator
    merged = np.empty(runs.shape[:2] + (2 * width,), order.dtype)
    taken = np.zeros(merged.shape, bool)
    slots = np.arange(width) + before
    np.put_along_axis(merged, slots, left, axis=-1)
    np.put_along_axis(taken, slots, True, axis=-1)
    merged[~taken] = right.reshape(-1)
    return merged.reshape(r, size)


def _merge_sort_perm(ev, comp, operands):
    shape = operands[0].shape
    n = shape[-1]
    if n <= 1 or operands[0].size == 0:
        return np.broadcast_to(np.arange(n), shape).copy()
    rows = [x.reshape(-1, n) for x in operands]
    r = rows[0].shape[0]
    size = 1 << (n - 1).bit_length()
    order = np.broadcast_to(np.arange(size), (r, size)).copy()
    width = 1
    while width < size:
        order = _merge_level(ev, comp, rows, order, width, n)
        width *= 2
    return order[:, :n].reshape(shape)


def _sort(ev, instr, ops):
    dim = instr.attrs["dimensions"][0]
    comp = instr.attrs["to_apply"]
    if len(comp.parameters) != 2 * len(ops):
        raise ShapeError(
            f"sort comparator takes {len(comp.parameters)} parameters, expected {2 * len(ops)}"
        )
    moved = [np.moveaxis(np.asarray(x), dim, -1) for x in ops]
    perm = _lexsort_perm(ev, comp, moved) if moved[0].size else None
    if perm is None:
        perm = _merge_sort_perm(ev, comp, moved)
    outs = [np.moveaxis(np.take_along_axis(x, perm, axis=-1), -1, dim) for x in moved]
    shapes = instr.shape.tuple_shapes if instr.shape.is_tuple else (instr.shape,)
    outs = [as_dtype(np.asarray(o, order="C"), s) for o, s in zip(outs, shapes)]
    return tuple(outs) if instr.shape.is_tuple else outs[0]


def _topk(ev, instr, ops):
    operand = np.asarray(ops[0])
    k = instr.attrs["k"]
    largest = instr.attrs.get("largest", True)
    ctype = "TOTALORDER" if _is_float(operand.dtype) else None
    key = _sort_key(operand, ctype, descending=largest)
    perm = np.argsort(key, axis=-1, kind="stable")[..., :k]
    values_shape, indices_shape = instr.shape.tuple_shapes
    return (
        as_dtype(np.take_along_axis(operand, perm, axis=-1), values_shape),
        as_dtype(perm, indices_shape),
    )


HANDLERS = {"sort": _sort, "topk": _topk}
