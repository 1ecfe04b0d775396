"""The StableHLO/MHLO/CHLO op table: each MLIR op name -> the HLO opcode it becomes and the
function that converts its attributes (ops with regions or several results name a builder in
minixla.text.stablehlo's Converter instead)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..ir.attrs import Window, WindowDim
from ..ir.sharding import parse_replica_groups, parse_source_target_pairs
from .chlo import DECOMPOSITIONS
from .mlir import Dense, DialectAttr, MlirOp, Slices, Word

TERMINATORS = ("stablehlo.return", "mhlo.return", "func.return", "return", "sdy.return")
API_VERSIONS = {
    0: "API_VERSION_UNSPECIFIED",
    1: "API_VERSION_ORIGINAL",
    2: "API_VERSION_STATUS_RETURNING",
    3: "API_VERSION_STATUS_RETURNING_UNIFIED",
    4: "API_VERSION_TYPED_FFI",
}


# -- attribute helpers -----------------------------------------------------------------------
def ints(value) -> list[int]:
    if value is None:
        return []
    if isinstance(value, Dense):
        if value.shape is not None:
            return [int(v) for v in value.array(value.shape).reshape(-1)]
        return value.ints()
    if isinstance(value, (int, np.integer)):
        return [int(value)]
    return [int(v) for v in value]


def _word(value) -> str:
    return value.text if isinstance(value, Word) else str(value)


def words_of(op: MlirOp) -> list[str]:
    return [w.text for w in op.words if isinstance(w, Word)]


def _padding_pairs(value, rank: int) -> list[tuple[int, int]]:
    if isinstance(value, list) and value and isinstance(value[0], list):
        return [(int(lo), int(hi)) for lo, hi in value]
    flat = ints(value)
    if not flat:
        return [(0, 0)] * rank
    return [(flat[2 * i], flat[2 * i + 1]) for i in range(len(flat) // 2)]


def window_of(sizes, strides=None, padding=None, base=None, dilations=None, reversal=None):
    rank = len(sizes)

    def per_dim(values, default):
        values = ints(values) if not (values and isinstance(values[0], bool)) else list(values)
        return values or [default] * rank

    strides, base, dilations = per_dim(strides, 1), per_dim(base, 1), per_dim(dilations, 1)
    reversal = [bool(v) for v in (reversal or [False] * rank)]
    pads = _padding_pairs(padding, rank)
    return Window(
        tuple(
            WindowDim(
                sizes[i], strides[i], pads[i][0], pads[i][1], base[i], dilations[i], reversal[i]
            )
            for i in range(rank)
        )
    )


# -- attribute converters (one per op that has attributes) -------------------------------------
def _iota(op, operands):
    return {"iota_dimension": int(op.get("dim", "iota_dimension"))}


def broadcast_attrs(op, operands):
    return {"dimensions": tuple(ints(op.get("dims", "broadcast_dimensions")))}


def _permutation(op, operands):
    return {"dimensions": tuple(ints(op.get("dims", "permutation")))}


def _reverse(op, operands):
    return {"dimensions": tuple(ints(op.get("dims", "dimensions")))}


def _concatenate(op, operands):
    return {"dimensions": (int(op.get("dim", "dimension")),)}


def _compare(op, operands):
    words = words_of(op)
    direction = words[0] if words else _word(op.get("comparison_direction"))
    kind = words[1] if len(words) > 1 else op.get("compare_type")
    attrs = {"direction": direction}
    if kind is not None:
        attrs["type"] = _word(kind)
    return attrs


def _slice(op, operands):
    slices = next((w for w in op.words if isinstance(w, Slices)), None)
    if slices is not None:
        return {"slice": tuple(slices.ranges)}
    starts, limits = ints(op.get("start_indices")), ints(op.get("limit_indices"))
    strides = ints(op.get("strides")) or [1] * len(starts)
    return {"slice": tuple(zip(starts, limits, strides))}


def _dynamic_slice(op, operands):
    return {"dynamic_slice_sizes": tuple(ints(op.get("sizes", "slice_sizes")))}


def _pad(op, operands):
    low = ints(op.get("low", "edge_padding_low"))
    high = ints(op.get("high", "edge_padding_high"))
    interior = ints(op.get("interior", "interior_padding")) or [0] * len(low)
    return {"padding": tuple(zip(low, high, interior))}


def _dot_general(op, operands):
    numbers = op.get("dot_dimension_numbers")
    if isinstance(numbers, DialectAttr):
        pairs = {
            "batching_dims": (
                numbers.get("lhs_batching_dimensions", []),
                numbers.get("rhs_batching_dimensions", []),
            ),
            "contracting_dims": (
                numbers.get("lhs_contracting_dimensions", []),
                numbers.get("rhs_contracting_dimensions", []),
            ),
        }
    else:
        pairs = {
            "batching_dims": op.get("batching_dims", default=([], [])),
            "contracting_dims": op.get("contracting_dims", default=([], [])),
        }
    return {
        "lhs_batch_dims": tuple(ints(pairs["batching_dims"][0])),
        "lhs_contracting_dims": tuple(ints(pairs["contracting_dims"][0])),
        "rhs_batch_dims": tuple(ints(pairs["batching_dims"][1])),
        "rhs_contracting_dims": tuple(ints(pairs["contracting_dims"][1])),
    }


def _dot(op, operands):
    return {"lhs_contracting_dims": (operands[0].shape.rank - 1,), "rhs_contracting_dims": (0,)}


def _convolution(op, operands):
    numbers = op.get("dim_numbers", "dimension_numbers")
    text = numbers.raw if isinstance(numbers, DialectAttr) else str(numbers)
    groups = re.findall(r"\[([^\]]*)\]", text)
    if len(groups) != 3:
        raise ValueError(f"bad convolution dimension numbers {text!r}")
    labels = ["".join(p.strip() for p in g.split(",")) for g in groups]
    window = op.get("window", default={}) or {}
    kernel = operands[1].shape
    spatial = [kernel.dims[i] for i, c in enumerate(labels[1]) if c.isdigit()]
    order = sorted((int(c), i) for i, c in enumerate(labels[1]) if c.isdigit())
    spatial = [kernel.dims[i] for _, i in order]
    attrs = {
        "window": window_of(
            spatial,
            window.get("stride", op.get("window_strides")),
            window.get("pad", op.get("padding")),
            window.get("lhs_dilate", op.get("lhs_dilation")),
            window.get("rhs_dilate", op.get("rhs_dilation")),
            window.get("reverse", op.get("window_reversal")),
        ),
        "dim_labels": f"{labels[0]}_{labels[1]}->{labels[2]}",
    }
    for name in ("feature_group_count", "batch_group_count"):
        if int(op.get(name, default=1)) != 1:
            attrs[name] = int(op.get(name))
    return attrs


def _get_tuple_element(op, operands):
    return {"index": int(op.get("index"))}


def _reduce_precision(op, operands):
    fmt = op.get("format")
    if fmt is not None:
        m = re.fullmatch(r"e(\d+)m(\d+)", _word(fmt))
        return {"exponent_bits": int(m.group(1)), "mantissa_bits": int(m.group(2))}
    return {
        "exponent_bits": int(op.get("exponent_bits")),
        "mantissa_bits": int(op.get("mantissa_bits")),
    }


def _triangular_solve(op, operands):
    return {
        "left_side": bool(op.get("left_side")),
        "lower": bool(op.get("lower")),
        "unit_diagonal": bool(op.get("unit_diagonal")),
        "transpose_a": _word(op.get("transpose_a", default=Word("NO_TRANSPOSE"))),
    }


def _cholesky(op, operands):
    return {"lower": bool(op.get("lower", default=False))}


def _fft(op, operands):
    words = words_of(op)
    kind = words[0] if words else _word(op.get("type", "fft_type"))
    return {"fft_type": kind, "fft_length": tuple(ints(op.get("length", "fft_length")))}


def _batch_norm(op, operands):
    return {"epsilon": float(op.get("epsilon")), "feature_index": int(op.get("feature_index"))}


def _dimension(op, operands):
    return {"dimensions": (int(op.get("dim", "dimension")),)}


def _gather(op, operands):
    numbers = op.get("dimension_numbers")
    get = numbers.get if isinstance(numbers, DialectAttr) else op.attrs.get

    def field(name):
        return tuple(ints(get(name)))

    return {
        "offset_dims": field("offset_dims"),
        "collapsed_slice_dims": field("collapsed_slice_dims"),
        "start_index_map": field("start_index_map"),
        "operand_batching_dims": field("operand_batching_dims"),
        "start_indices_batching_dims": field("start_indices_batching_dims"),
        "index_vector_dim": int(get("index_vector_dim") or 0),
        "slice_sizes": tuple(ints(op.get("slice_sizes"))),
        "indices_are_sorted": bool(op.get("indices_are_sorted", default=False)),
    }


def scatter_attrs(op):
    numbers = op.get("scatter_dimension_numbers")
    get = numbers.get if isinstance(numbers, DialectAttr) else op.attrs.get

    def field(name):
        return tuple(ints(get(name)))

    return {
        "update_window_dims": field("update_window_dims"),
        "inserted_window_dims": field("inserted_window_dims"),
        "scatter_dims_to_operand_dims": field("scatter_dims_to_operand_dims"),
        "input_batching_dims": field("input_batching_dims"),
        "scatter_indices_batching_dims": field("scatter_indices_batching_dims"),
        "index_vector_dim": int(get("index_vector_dim") or 0),
        "indices_are_sorted": bool(op.get("indices_are_sorted", default=False)),
        "unique_indices": bool(op.get("unique_indices", default=False)),
    }


def _rng_bit_generator(op, operands):
    algorithm = _word(op.get("rng_algorithm", default=Word("DEFAULT"))).lower()
    return {"algorithm": "rng_" + algorithm.replace("three_fry", "three_fry")}


def _rng(op, operands):
    words = words_of(op)
    kind = words[0] if words else _word(op.get("rng_distribution"))
    return {"distribution": "rng_" + kind.lower()}


def _top_k(op, operands):
    k = op.get("k")
    if k is None:
        k = next(
            v
            for item in op.groups[0]
            if isinstance(item, tuple) and item[0] == "k"
            for v in [item[1]]
        )
    return {"k": int(k), "largest": True}


def _groups_text(value) -> str:
    """A dense<[[0, 1], [2, 3]]> of device ids as HLO's `{{0,1},{2,3}}`; StableHLO pads
    groups of unequal size with -1."""
    rows = value.body if isinstance(value, Dense) else value
    if not rows or not isinstance(rows[0], list):
        rows = [rows] if rows else []
    groups = ("{" + ",".join(str(int(v)) for v in row if int(v) >= 0) + "}" for row in rows)
    return "{" + ",".join(groups) + "}"


def collective_attrs(op, operands) -> dict:
    """channel_id, replica_groups, use_global_device_ids and the op's dimension."""
    attrs: dict = {}
    channel = op.get("channel_handle")
    if isinstance(channel, DialectAttr) and int(channel.get("handle", 0)) > 0:
        attrs["channel_id"] = int(channel.get("handle"))
    if op.get("replica_groups") is not None:
        attrs["replica_groups"] = parse_replica_groups(_groups_text(op.get("replica_groups")))
    if op.get("source_target_pairs") is not None:
        pairs = _groups_text(op.get("source_target_pairs"))
        attrs["source_target_pairs"] = parse_source_target_pairs(pairs)
    if op.get("use_global_device_ids"):
        attrs["use_global_device_ids"] = True
    dimension = op.get("all_gather_dim", "scatter_dimension")
    if dimension is not None:
        attrs["dimensions"] = (int(dimension),)
    return attrs


@dataclass(frozen=True)
class Rule:
    opcode: str  # the HLO opcode ("" for ops a builder lowers to several instructions)
    attrs: Callable | None = None  # (op, operands) -> HLO attributes
    build: str = ""  # Converter method for ops with regions, packs or decompositions


_SAME_NAME = (
    "abs add and atan2 cbrt ceil clamp complex convert cosine count_leading_zeros divide "
    "exponential exponential_minus_one floor imag is_finite log log_plus_one logistic maximum "
    "minimum multiply negate not or popcnt power real remainder round_nearest_afz "
    "round_nearest_even rsqrt select shift_left shift_right_arithmetic shift_right_logical sign "
    "sine sqrt subtract tan tanh xor bitcast_convert reshape dynamic_update_slice copy "
    "partition_id replica_id after_all"
).split()
_CHLO_SAME_NAME = "asin acos atan sinh cosh asinh acosh atanh tan erf".split()

RULES: dict[str, Rule] = {
    **{f"stablehlo.{n}": Rule(n.replace("_", "-")) for n in _SAME_NAME},
    **{f"chlo.{n}": Rule(n) for n in _CHLO_SAME_NAME},
    "stablehlo.constant": Rule("constant", build="constant"),
    "stablehlo.iota": Rule("iota", _iota),
    "stablehlo.broadcast_in_dim": Rule("broadcast", broadcast_attrs, build="broadcast_in_dim"),
    "stablehlo.transpose": Rule("transpose", _permutation),
    "stablehlo.reverse": Rule("reverse", _reverse),
    "stablehlo.concatenate": Rule("concatenate", _concatenate),
    "stablehlo.compare": Rule("compare", _compare),
    "stablehlo.slice": Rule("slice", _slice),
    "stablehlo.dynamic_slice": Rule("dynamic-slice", _dynamic_slice),
    "stablehlo.pad": Rule("pad", _pad),
    "stablehlo.dot_general": Rule("dot", _dot_general),
    "stablehlo.dot": Rule("dot", _dot),
    "stablehlo.convolution": Rule("convolution", _convolution),
    "stablehlo.gather": Rule("gather", _gather),
    "stablehlo.get_tuple_element": Rule("get-tuple-element", _get_tuple_element),
    "stablehlo.tuple": Rule("tuple"),
    "stablehlo.reduce_precision": Rule("reduce-precision", _reduce_precision),
    "stablehlo.triangular_solve": Rule("triangular-solve", _triangular_solve),
    "stablehlo.cholesky": Rule("cholesky", _cholesky),
    "stablehlo.fft": Rule("fft", _fft),
    "stablehlo.batch_norm_inference": Rule("batch-norm-inference", _batch_norm),
    "stablehlo.batch_norm_training": Rule("batch-norm-training", _batch_norm, build="packed"),
    "stablehlo.batch_norm_grad": Rule("batch-norm-grad", _batch_norm, build="packed"),
    "stablehlo.get_dimension_size": Rule("get-dimension-size", _dimension),
    "stablehlo.rng_bit_generator": Rule("rng-bit-generator", _rng_bit_generator, build="packed"),
    "stablehlo.rng": Rule("rng", _rng),
    "stablehlo.create_token": Rule("after-all"),
    "stablehlo.optimization_barrier": Rule("opt-barrier", build="packed_operands"),
    "stablehlo.reduce": Rule("reduce", build="reduce"),
    "stablehlo.reduce_window": Rule("reduce-window", build="reduce_window"),
    "stablehlo.select_and_scatter": Rule("select-and-scatter", build="select_and_scatter"),
    "stablehlo.sort": Rule("sort", build="sort"),
    "stablehlo.scatter": Rule("scatter", build="scatter"),
    "stablehlo.map": Rule("map", build="map"),
    "stablehlo.while": Rule("while", build="while_"),
    "stablehlo.case": Rule("conditional", build="case"),
    "stablehlo.if": Rule("conditional", build="if_"),
    "stablehlo.custom_call": Rule("custom-call", build="custom_call"),
    "stablehlo.all_reduce": Rule("all-reduce", collective_attrs, build="collective"),
    "stablehlo.all_gather": Rule("all-gather", collective_attrs, build="collective"),
    "stablehlo.reduce_scatter": Rule("reduce-scatter", collective_attrs, build="collective"),
    "stablehlo.collective_permute": Rule("collective-permute", collective_attrs),
    "stablehlo.collective_broadcast": Rule("collective-broadcast", collective_attrs),
    "stablehlo.all_to_all": Rule("all-to-all", collective_attrs, build="all_to_all"),
    "stablehlo.composite": Rule("", build="composite"),
    "func.call": Rule("call", build="call"),
    "call": Rule("call", build="call"),
    "chlo.top_k": Rule("topk", _top_k, build="packed"),
    "chlo.is_inf": Rule("", build="is_inf"),
    "chlo.is_pos_inf": Rule("", build="is_inf"),
    "chlo.is_neg_inf": Rule("", build="is_inf"),
    "chlo.square": Rule("", build="square"),
    "chlo.conj": Rule("", build="conj"),
    # Shardy (JAX's default partitioner): as XLA's import writes them into HLO
    "sdy.sharding_constraint": Rule("custom-call", build="sharding_constraint"),
    "sdy.reshard": Rule("custom-call", build="sharding_constraint"),
    "sdy.manual_computation": Rule("call", build="manual_computation"),
    "sdy.propagation_barrier": Rule("", build="identity"),
    "sdy.data_flow_edge": Rule("", build="identity"),
    "sdy.sharding_group": Rule("", build="nothing"),
    "chlo.mulhi": Rule("mulhi"),
    **{name: Rule("", build="chlo") for name in DECOMPOSITIONS},
}
# MHLO spells most ops as StableHLO does.
RULES.update(
    {
        "mhlo." + name.split(".", 1)[1]: rule
        for name, rule in list(RULES.items())
        if name.startswith("stablehlo.")
    }
)


# -- the converter ---------------------------------------------------------------------------


__all__ = [
    "API_VERSIONS",
    "collective_attrs",
    "RULES",
    "Rule",
    "TERMINATORS",
    "broadcast_attrs",
    "ints",
    "scatter_attrs",
    "window_of",
    "words_of",
]
