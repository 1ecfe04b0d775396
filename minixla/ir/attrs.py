"""Attribute kinds: each owns how its value is parsed from and printed as HLO text.

`ATTR_KINDS` maps an attribute name to its kind; the parser and printer stay generic. Values are
plain Python data (ints, tuples, strings) or the small dataclasses below. An attribute whose name
is not in the table is kept as `Raw` text and printed back verbatim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Raw:
    """Attribute text kept verbatim (metadata, sharding, backend_config, unknown attributes)."""

    text: str

    def __str__(self) -> str:
        return self.text


def backend_config_string(value) -> str:
    """The text of a backend_config: a quoted string's contents, or a raw `{...}` dict as is."""
    if value is None:
        return ""
    text = str(value)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        from .strings import unescape

        return unescape(text[1:-1])
    return text


@dataclass(frozen=True)
class WindowDim:
    size: int
    stride: int = 1
    padding_low: int = 0
    padding_high: int = 0
    lhs_dilation: int = 1  # base dilation
    rhs_dilation: int = 1  # window dilation
    reversal: bool = False


@dataclass(frozen=True)
class Window:
    dims: tuple[WindowDim, ...]

    def __str__(self) -> str:
        def field(name, values, default):
            return f"{name}={'x'.join(values)}" if any(v != default for v in values) else ""

        dims = self.dims
        parts = [
            "size=" + "x".join(str(d.size) for d in dims) if dims else "",
            field("stride", [str(d.stride) for d in dims], "1"),
            field("pad", [f"{d.padding_low}_{d.padding_high}" for d in dims], "0_0"),
            field("lhs_dilate", [str(d.lhs_dilation) for d in dims], "1"),
            field("rhs_dilate", [str(d.rhs_dilation) for d in dims], "1"),
            field("rhs_reversal", [str(int(d.reversal)) for d in dims], "0"),
        ]
        return "{" + " ".join(p for p in parts if p) + "}"


@dataclass(frozen=True)
class ConvDims:
    """Convolution dimension numbers, parsed from dim_labels like `b01f_01io->b01f`."""

    input_batch: int
    input_feature: int
    input_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    output_batch: int
    output_feature: int
    output_spatial: tuple[int, ...]


def parse_dim_labels(text: str) -> ConvDims:
    lhs, _, out = text.partition("->")
    inp, _, ker = lhs.partition("_")

    def spatial(labels: str) -> tuple[int, ...]:
        digits = sorted((int(c), i) for i, c in enumerate(labels) if c.isdigit())
        if [d for d, _ in digits] != list(range(len(digits))):
            raise ValueError(f"dim_labels {text!r}: spatial dims must be 0..n-1")
        return tuple(i for _, i in digits)

    def find(labels: str, letter: str) -> int:
        if labels.count(letter) != 1:
            raise ValueError(f"dim_labels {text!r}: '{letter}' must appear once in {labels!r}")
        return labels.index(letter)

    if not (len(inp) == len(ker) == len(out)):
        raise ValueError(f"dim_labels {text!r}: the three parts must have equal rank")
    dims = ConvDims(
        find(inp, "b"),
        find(inp, "f"),
        spatial(inp),
        find(ker, "i"),
        find(ker, "o"),
        spatial(ker),
        find(out, "b"),
        find(out, "f"),
        spatial(out),
    )
    if not len(dims.input_spatial) == len(dims.kernel_spatial) == len(dims.output_spatial):
        raise ValueError(f"dim_labels {text!r}: spatial ranks differ")
    return dims


@dataclass(frozen=True)
class Sparsity:
    """One side of a convolution's sparsity_config: at most `n` of every `m` elements along
    `dimension` are nonzero. With `idx`, the operand is compressed (only those n are stored)
    and operand `idx` holds where they sit (the metadata); without, it is dense as given."""

    n: int
    m: int
    dimension: int
    idx: int | None = None
    stride: int = 1


_SPARSITY_SIDE = re.compile(r"\s*,?\s*(lhs|rhs)\s*=\s*\{([^{}]*)\}")


def parse_sparsity_config(text: str) -> dict[str, Sparsity]:
    """`{lhs={sparsity=2x4 dimension=1 idx=2} rhs={sparsity=1x4 dimension=0 stride=1 idx=3}}`
    (kept verbatim by the parser) as {side: Sparsity}."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError(f"sparsity_config {text!r} must be braced")
    body, sides, pos = body[1:-1], {}, 0
    while body[pos:].strip():
        found = _SPARSITY_SIDE.match(body, pos)
        if found is None:
            raise ValueError(
                f"sparsity_config: expected lhs={{...}} or rhs={{...}} at {body[pos:].strip()!r}"
            )
        side, fields = found.group(1), dict(f.partition("=")[::2] for f in found.group(2).split())
        if side in sides:
            raise ValueError(f"sparsity_config: {side} is given twice")
        if set(fields) - {"sparsity", "dimension", "idx", "stride"} or not {
            "sparsity",
            "dimension",
        } <= set(fields):
            raise ValueError(
                f"sparsity_config: {side} needs sparsity=NxM and dimension= "
                f"(idx= and stride= optional), got {found.group(2).strip()!r}"
            )
        n, _, m = fields["sparsity"].partition("x")
        try:
            idx = int(fields["idx"]) if "idx" in fields else None
            sides[side] = Sparsity(
                int(n), int(m), int(fields["dimension"]), idx, int(fields.get("stride", "1"))
            )
        except ValueError:
            raise ValueError(
                f"sparsity_config: {side} has a field that is not an integer: "
                f"{found.group(2).strip()!r}"
            ) from None
        pos = found.end()
    if not sides:
        raise ValueError("sparsity_config names neither lhs nor rhs")
    return sides


@dataclass(frozen=True)
class AttrKind:
    name: str
    parse: Callable[[Any], Any]  # called with the parser positioned at the value
    format: Callable[[Any], str]


def _int_list(values) -> str:
    return "{" + ",".join(map(str, values)) + "}"


def _format_slice(value) -> str:
    with_strides = any(stride != 1 for _, _, stride in value)
    return (
        "{"
        + ", ".join(
            f"[{start}:{limit}" + (f":{stride}]" if with_strides else "]")
            for start, limit, stride in value
        )
        + "}"
    )


def _format_padding(value) -> str:
    interior = any(dim[2] for dim in value)
    return "x".join(f"{lo}_{hi}" + (f"_{mid}" if interior else "") for lo, hi, mid in value)


def _format_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _format_computation(comp) -> str:
    return "%" + comp.name


def _format_names(items) -> str:
    return "{" + ", ".join("%" + item.name for item in items) + "}"


INT_LIST = AttrKind("int_list", lambda p: p.parse_int_list(), _int_list)
INT = AttrKind("int", lambda p: p.parse_int(), str)
FLOAT = AttrKind("float", lambda p: p.parse_float(), lambda v: repr(float(v)))
BOOL = AttrKind("bool", lambda p: p.parse_bool(), lambda v: "true" if v else "false")
ENUM = AttrKind("enum", lambda p: p.parse_identifier(), str)
STRING = AttrKind("string", lambda p: p.parse_string(), _format_string)
SHAPE = AttrKind("shape", lambda p: p.parse_shape(), str)
SHAPE_LIST = AttrKind(
    "shape_list", lambda p: p.parse_shape_list(), lambda v: "{" + ", ".join(map(str, v)) + "}"
)
SLICE = AttrKind("slice", lambda p: p.parse_slice(), _format_slice)
PADDING = AttrKind("padding", lambda p: p.parse_padding(), _format_padding)
WINDOW = AttrKind("window", lambda p: p.parse_window(), str)
DIM_LABELS = AttrKind("dim_labels", lambda p: p.parse_dim_labels(), str)
COMPUTATION = AttrKind("computation", lambda p: p.parse_computation_ref(), _format_computation)
COMPUTATION_LIST = AttrKind("computation_list", lambda p: p.parse_computation_list(), _format_names)
INSTRUCTION_LIST = AttrKind("instruction_list", lambda p: p.parse_instruction_list(), _format_names)
RAW = AttrKind("raw", lambda p: p.parse_raw(), str)
# gather's `{1,2}`; collective-permute's list of lists is kept Raw
SLICE_SIZES = AttrKind(
    "slice_sizes",
    lambda p: p.parse_slice_sizes(),
    lambda v: str(v) if isinstance(v, Raw) else _int_list(v),
)


def _structured(parse_text: Callable[[str], Any]) -> Callable[[Any], Any]:
    """Parses a value from its raw text span; a ValueError becomes a parse error there."""

    def parse(p):
        start = p.peek().start
        text = p.lexer.raw_span()
        try:
            return parse_text(text)
        except ValueError as exc:
            raise p.error(str(exc), start) from None

    return parse


def _sharding_kinds() -> tuple[AttrKind, AttrKind, AttrKind]:
    from .sharding import parse_replica_groups, parse_sharding, parse_source_target_pairs

    return (
        AttrKind("sharding", _structured(parse_sharding), str),
        AttrKind("replica_groups", _structured(parse_replica_groups), str),
        AttrKind("source_target_pairs", _structured(parse_source_target_pairs), str),
    )


SHARDING, REPLICA_GROUPS, SOURCE_TARGET_PAIRS = _sharding_kinds()

ATTR_KINDS: dict[str, AttrKind] = {
    **dict.fromkeys(
        [
            "dimensions",
            "lhs_batch_dims",
            "rhs_batch_dims",
            "lhs_contracting_dims",
            "rhs_contracting_dims",
            "dynamic_slice_sizes",
            "offset_dims",
            "collapsed_slice_dims",
            "start_index_map",
            "operand_batching_dims",
            "start_indices_batching_dims",
            "update_window_dims",
            "inserted_window_dims",
            "scatter_dims_to_operand_dims",
            "input_batching_dims",
            "scatter_indices_batching_dims",
            "fft_length",
        ],
        INT_LIST,
    ),
    **dict.fromkeys(
        [
            "index",
            "iota_dimension",
            "index_vector_dim",
            "feature_group_count",
            "batch_group_count",
            "channel_id",
            "k",
            "exponent_bits",
            "mantissa_bits",
            "feature_index",
            "delta",
            "inferred_dimension",
            "cross_program_prefetch_index",
            "num_carries",
        ],
        INT,
    ),
    **dict.fromkeys(
        [
            "is_stable",
            "indices_are_sorted",
            "unique_indices",
            "largest",
            "use_global_device_ids",
            "constrain_layout",
            "is_host_transfer",
            "custom_call_has_side_effect",
            "is_composite",
            "left_side",
            "lower",
            "unit_diagonal",
            "is_reverse",
            "is_associative",
        ],
        BOOL,
    ),
    **dict.fromkeys(
        [
            "direction",
            "type",
            "kind",
            "distribution",
            "algorithm",
            "fft_type",
            "api_version",
            "schedule",
            "transpose_a",
            "padding_type",
        ],
        ENUM,
    ),
    **dict.fromkeys(
        ["custom_call_target", "infeed_config", "outfeed_config", "async_execution_thread"], STRING
    ),
    **dict.fromkeys(
        [
            "to_apply",
            "calls",
            "condition",
            "body",
            "select",
            "scatter",
            "true_computation",
            "false_computation",
        ],
        COMPUTATION,
    ),
    **dict.fromkeys(["branch_computations", "called_computations"], COMPUTATION_LIST),
    "control-predecessors": INSTRUCTION_LIST,
    "epsilon": FLOAT,
    "outfeed_shape": SHAPE,
    "operand_layout_constraints": SHAPE_LIST,
    "slice": SLICE,
    "slice_sizes": SLICE_SIZES,
    "padding": PADDING,
    "window": WINDOW,
    "dim_labels": DIM_LABELS,
    "sharding": SHARDING,
    "replica_groups": REPLICA_GROUPS,
    "source_target_pairs": SOURCE_TARGET_PAIRS,
}

# Attributes any instruction may carry, in the order the printer emits them (after op-specific
# attributes and called computations).
GENERIC_ATTRS = (
    "sharding",
    "frontend_attributes",
    "statistics",
    "origin",
    "parameter_replication",
    "control-predecessors",
    "metadata",
    "backend_config",
)


def attr_kind(name: str) -> AttrKind:
    return ATTR_KINDS.get(name, RAW)
