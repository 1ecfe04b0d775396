"""The opcode table: every HLO opcode is declared here once.

A row gives the text spelling, operand arity, kind, the op-specific attributes in the order the
printer emits them (required ones marked with a trailing `!`), the attributes that name called
computations, the shape rule (a function name in `shape_inference`), whether the text may omit
the result shape, and traits. Parser, printer, shape inference, verifier and the backends' op
tables all read these rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

VARIADIC = None
AT_LEAST_1, AT_LEAST_2, AT_LEAST_3 = (1, None), (2, None), (3, None)
# Kinds decide how passes and backends treat an op.
ELEMENTWISE, MOVEMENT, REDUCTION, CONTRACTION, CONTROL, LEAF, COLLECTIVE, OTHER = (
    "elementwise",
    "movement",
    "reduction",
    "contraction",
    "control",
    "leaf",
    "collective",
    "other",
)
COMMUTATIVE, ASSOCIATIVE, IDEMPOTENT, SIDE_EFFECT, EXPENSIVE = (
    "commutative",
    "associative",
    "idempotent",
    "side_effect",
    "expensive",
)
# IDEMPOTENT: x op x = x for a binary op, f(f(x)) = f(x) for a unary one.
# SEQUENTIAL_CALLS: runs its called computations in line, as part of the caller's sequence
# (while, conditional, call), so dataflow and copy insertion look through it.
# FORWARDS: the result holds its operands' buffers (tuple, get-tuple-element, bitcast, ...).
SEQUENTIAL_CALLS, FORWARDS = "sequential_calls", "forwards"
# EXACT: the result needs no rounding in its element type (a bf16 kernel computing in f32 need
# not round it back).
EXACT = "exact"
# Element kinds an elementwise op accepts (ir/dtypes.py's kinds); NUMERIC when a row says nothing.
NUMERIC_KINDS = frozenset({"pred", "signed", "unsigned", "float", "complex"})
FLOAT_KINDS = frozenset({"float"})
FLOATISH_KINDS = frozenset({"float", "complex"})
INTEGER_KINDS = frozenset({"signed", "unsigned"})
BITWISE_KINDS = frozenset({"pred", "signed", "unsigned"})


@dataclass(frozen=True)
class OpDef:
    name: str
    arity: int | tuple[int, int | None] | None  # exact count, (min, max or None), VARIADIC
    kind: str
    attrs: tuple[str, ...] = ()  # op-specific, print order; "name!" = required
    calls: tuple[str, ...] = ()  # attributes naming called computations, print order
    infer: str = ""  # rule name in shape_inference; "" = the declared shape is taken as is
    shape_optional: bool = False  # may the text omit the result shape?
    traits: frozenset[str] = frozenset()
    kinds: frozenset[str] = NUMERIC_KINDS  # element kinds accepted (elementwise ops)
    # An elementwise op's partial derivatives, one formula per operand, written with the
    # table's own op names (underscores for hyphens) over `x`, `y`, `z` (the operands) and
    # `out` (the result): `sine` has ("cosine(x)",), `divide` ("1 / y", "-out / y"). "0" where
    # the result does not depend on an operand; all "0": the result carries no tangent.
    # None: the op's derivative needs code (transforms/ad_rules.py) or is declined there.
    partials: tuple[str, ...] | None = None

    @cached_property
    def attr_names(self) -> tuple[str, ...]:
        return tuple(a.rstrip("!") for a in self.attrs)

    @cached_property
    def printed_attrs(self) -> tuple[str, ...]:
        """The op's own attributes, then its called computations: the order they print in."""
        return self.attr_names + self.calls

    @cached_property
    def known_attrs(self) -> frozenset[str]:
        """Attributes the text may give this opcode: its own, its calls and the generic ones."""
        from .attrs import GENERIC_ATTRS

        return frozenset(self.attr_names) | frozenset(self.calls) | frozenset(GENERIC_ATTRS)

    @property
    def required_attrs(self) -> tuple[str, ...]:
        return tuple(a[:-1] for a in self.attrs if a.endswith("!"))

    def accepts_arity(self, count: int) -> bool:
        if self.arity is VARIADIC:
            return True
        if isinstance(self.arity, tuple):
            low, high = self.arity
            return low <= count and (high is None or count <= high)
        return count == self.arity

    def has(self, trait: str) -> bool:
        return trait in self.traits


def _t(*names: str) -> frozenset[str]:
    return frozenset(names)


_ACCURACY = ("result_accuracy",)


# The partials of ops whose result is piecewise constant or not a float: no tangent.
FLAT = ("0",)
NO_PRED = NUMERIC_KINDS - {"pred"}


def _unary(
    name: str,
    *traits: str,
    infer: str = "elementwise",
    kinds: frozenset[str] = NUMERIC_KINDS,
    partials: tuple[str, ...] | None = None,
) -> OpDef:
    attrs = _ACCURACY if EXPENSIVE in traits else ()
    return OpDef(
        name,
        1,
        ELEMENTWISE,
        attrs,
        infer=infer,
        shape_optional=True,
        traits=_t(*traits),
        kinds=kinds,
        partials=partials,
    )


def _math(name: str, partial: str, kinds: frozenset[str] = FLOATISH_KINDS) -> OpDef:
    """A transcendental function: float (and mostly complex) only, accuracy selectable."""
    return _unary(name, EXPENSIVE, kinds=kinds, partials=(partial,))


def _binary(
    name: str,
    *traits: str,
    infer: str = "elementwise",
    kinds: frozenset[str] = NUMERIC_KINDS,
    partials: tuple[str, ...] | None = None,
) -> OpDef:
    return OpDef(
        name,
        2,
        ELEMENTWISE,
        infer=infer,
        shape_optional=True,
        traits=_t(*traits),
        kinds=kinds,
        partials=partials,
    )


_GATHER_DIMS = (
    "offset_dims!",
    "collapsed_slice_dims!",
    "start_index_map!",
    "operand_batching_dims",
    "start_indices_batching_dims",
    "index_vector_dim!",
    "slice_sizes!",
    "indices_are_sorted",
    "unique_indices",
)
_SCATTER_DIMS = (
    "update_window_dims!",
    "inserted_window_dims!",
    "scatter_dims_to_operand_dims!",
    "input_batching_dims",
    "scatter_indices_batching_dims",
    "index_vector_dim!",
    "indices_are_sorted",
    "unique_indices",
)
_COLLECTIVE = ("channel_id", "replica_groups", "use_global_device_ids", "constrain_layout")

_ROWS = [
    # leaves
    OpDef("parameter", 0, LEAF, ("parameter_replication",)),
    OpDef("constant", 0, LEAF),
    OpDef("iota", 0, LEAF, ("iota_dimension!",), infer="iota"),
    # XLA's parser takes any operands (its rng_expander tests give a third), its verifier two
    OpDef("rng", VARIADIC, OTHER, ("distribution!",), traits=_t(SIDE_EFFECT)),
    OpDef("rng-bit-generator", 1, OTHER, ("algorithm",), infer="rng_bit_generator"),
    OpDef("rng-get-and-update-state", 0, OTHER, ("delta!",), traits=_t(SIDE_EFFECT)),
    OpDef("replica-id", 0, COLLECTIVE, infer="u32_scalar", shape_optional=True),
    OpDef("partition-id", 0, COLLECTIVE, infer="u32_scalar", shape_optional=True),
    OpDef("after-all", VARIADIC, CONTROL, infer="token", shape_optional=True),
    # elementwise unary
    _unary("abs", EXACT, IDEMPOTENT, infer="abs", kinds=NO_PRED, partials=("sign(x)",)),
    _unary("negate", EXACT, kinds=NO_PRED, partials=("-1",)),
    _unary("sign", EXACT, IDEMPOTENT, kinds=NO_PRED - {"unsigned"}, partials=FLAT),
    _unary("floor", EXACT, IDEMPOTENT, kinds=FLOAT_KINDS, partials=FLAT),
    _unary("ceil", EXACT, IDEMPOTENT, kinds=FLOAT_KINDS, partials=FLAT),
    _unary("round-nearest-afz", EXACT, IDEMPOTENT, kinds=FLOAT_KINDS, partials=FLAT),
    _unary("round-nearest-even", EXACT, IDEMPOTENT, kinds=FLOAT_KINDS, partials=FLAT),
    _math("exponential", "out"),
    _math("exponential-minus-one", "out + 1"),
    _math("log", "1 / x"),
    _math("log-plus-one", "1 / (x + 1)"),
    _math("logistic", "out * (1 - out)"),
    _math("sqrt", "0.5 / out"),
    _math("rsqrt", "-0.5 * out / x"),
    _math("cbrt", "out / (3 * x)", FLOAT_KINDS),
    _math("sine", "cosine(x)"),
    _math("cosine", "-sine(x)"),
    _math("tan", "1 + out * out"),
    _math("tanh", "1 - out * out"),
    _math("sinh", "cosh(x)"),
    _math("cosh", "sinh(x)"),
    _math("asin", "1 / sqrt(1 - x * x)"),
    _math("acos", "-1 / sqrt(1 - x * x)"),
    _math("atan", "1 / (1 + x * x)"),
    _math("asinh", "1 / sqrt(x * x + 1)"),
    _math("acosh", "1 / sqrt(x * x - 1)"),
    _math("atanh", "1 / (1 - x * x)"),
    _math("erf", "1.1283791670955126 * exponential(-x * x)", FLOAT_KINDS),  # 2/sqrt(pi)
    _unary("not", kinds=BITWISE_KINDS, partials=FLAT),
    _unary("popcnt", kinds=INTEGER_KINDS, partials=FLAT),
    _unary("count-leading-zeros", kinds=INTEGER_KINDS, partials=FLAT),
    _unary("is-finite", EXACT, infer="is_finite", kinds=FLOAT_KINDS, partials=FLAT),
    _unary("real", infer="complex_part", kinds=FLOATISH_KINDS),
    _unary("imag", infer="complex_part", kinds=FLOATISH_KINDS),
    _unary("copy", EXACT, partials=("1",)),
    OpDef("convert", 1, ELEMENTWISE, infer="convert"),
    OpDef("bitcast-convert", 1, ELEMENTWISE, infer="bitcast_convert", partials=FLAT),
    OpDef(
        "reduce-precision",
        1,
        ELEMENTWISE,
        ("exponent_bits!", "mantissa_bits!"),
        infer="elementwise",
        kinds=FLOAT_KINDS,
        partials=("1",),
    ),
    OpDef("stochastic-convert", 2, ELEMENTWISE, infer="convert", partials=FLAT * 2),
    # elementwise binary
    _binary("add", COMMUTATIVE, ASSOCIATIVE, partials=("1", "1")),
    _binary("subtract", kinds=NO_PRED, partials=("1", "-1")),
    _binary("multiply", COMMUTATIVE, ASSOCIATIVE, partials=("y", "x")),
    _binary("divide", kinds=NO_PRED, partials=("1 / y", "-out / y")),
    _binary("remainder", EXACT, kinds=NO_PRED, partials=("1", "-sign(x / y) * floor(abs(x / y))")),
    _binary("maximum", EXACT, COMMUTATIVE, ASSOCIATIVE, IDEMPOTENT),
    _binary("minimum", EXACT, COMMUTATIVE, ASSOCIATIVE, IDEMPOTENT),
    # XLA defines integer power too
    _binary("power", EXPENSIVE, kinds=NO_PRED),
    _binary(
        "atan2",
        EXPENSIVE,
        kinds=FLOATISH_KINDS,
        partials=("y / (x * x + y * y)", "-x / (x * x + y * y)"),
    ),
    _binary("complex", infer="complex", kinds=FLOAT_KINDS),
    _binary("and", COMMUTATIVE, ASSOCIATIVE, IDEMPOTENT, kinds=BITWISE_KINDS, partials=FLAT * 2),
    _binary("or", COMMUTATIVE, ASSOCIATIVE, IDEMPOTENT, kinds=BITWISE_KINDS, partials=FLAT * 2),
    _binary("xor", COMMUTATIVE, ASSOCIATIVE, kinds=BITWISE_KINDS, partials=FLAT * 2),
    _binary("shift-left", kinds=INTEGER_KINDS, partials=FLAT * 2),
    _binary("shift-right-arithmetic", kinds=INTEGER_KINDS, partials=FLAT * 2),
    _binary("shift-right-logical", kinds=INTEGER_KINDS, partials=FLAT * 2),
    _binary("mulhi", kinds=INTEGER_KINDS, partials=FLAT * 2),
    OpDef(
        "compare",
        2,
        ELEMENTWISE,
        ("direction!", "type"),
        infer="compare",
        shape_optional=True,
        traits=_t(EXACT),
        partials=FLAT * 2,
    ),
    # ternary
    OpDef("select", 3, ELEMENTWISE, infer="select", shape_optional=True, traits=_t(EXACT)),
    OpDef("clamp", 3, ELEMENTWISE, infer="clamp", shape_optional=True, traits=_t(EXACT)),
    OpDef(
        "map",
        AT_LEAST_1,
        ELEMENTWISE,
        ("dimensions",),
        ("to_apply",),
        infer="map",
        shape_optional=True,
    ),
    # data movement
    OpDef("broadcast", 1, MOVEMENT, ("dimensions",), infer="broadcast", shape_optional=True),
    OpDef("reshape", 1, MOVEMENT, ("inferred_dimension",), infer="reshape"),
    OpDef("dynamic-reshape", AT_LEAST_1, MOVEMENT, infer="dynamic_reshape"),
    OpDef("transpose", 1, MOVEMENT, ("dimensions!",), infer="transpose", shape_optional=True),
    OpDef("bitcast", 1, MOVEMENT, infer="bitcast", traits=_t(FORWARDS)),
    OpDef("slice", 1, MOVEMENT, ("slice!",), infer="slice"),
    OpDef("dynamic-slice", AT_LEAST_1, MOVEMENT, ("dynamic_slice_sizes!",), infer="dynamic_slice"),
    OpDef(
        "dynamic-update-slice",
        AT_LEAST_2,
        MOVEMENT,
        infer="dynamic_update_slice",
        shape_optional=True,
    ),
    OpDef(
        "concatenate",
        AT_LEAST_1,
        MOVEMENT,
        ("dimensions!",),
        infer="concatenate",
        shape_optional=True,
    ),
    OpDef("pad", 2, MOVEMENT, ("padding!",), infer="pad", shape_optional=True),
    OpDef("reverse", 1, MOVEMENT, ("dimensions!",), infer="same_as_operand", shape_optional=True),
    OpDef("gather", 2, MOVEMENT, _GATHER_DIMS, infer="gather", shape_optional=True),
    OpDef(
        "scatter",
        AT_LEAST_3,
        MOVEMENT,
        _SCATTER_DIMS,
        ("to_apply",),
        infer="scatter",
        shape_optional=True,
    ),
    OpDef("tuple", VARIADIC, CONTROL, infer="tuple", shape_optional=True, traits=_t(FORWARDS)),
    OpDef(
        "get-tuple-element",
        1,
        CONTROL,
        ("index!",),
        infer="get_tuple_element",
        shape_optional=True,
        traits=_t(FORWARDS),
    ),
    OpDef(
        "get-dimension-size",
        1,
        OTHER,
        ("dimensions!",),
        infer="get_dimension_size",
        shape_optional=True,
    ),
    OpDef(
        "set-dimension-size",
        2,
        OTHER,
        ("dimensions!",),
        infer="set_dimension_size",
        shape_optional=True,
    ),
    # reductions and windows
    OpDef(
        "reduce",
        AT_LEAST_2,
        REDUCTION,
        ("dimensions!",),
        ("to_apply",),
        infer="reduce",
        shape_optional=True,
    ),
    OpDef(
        "reduce-window",
        AT_LEAST_2,
        REDUCTION,
        ("window",),
        ("to_apply",),
        infer="reduce_window",
        shape_optional=True,
    ),
    OpDef(
        "select-and-scatter",
        3,
        REDUCTION,
        ("window",),
        ("select", "scatter"),
        infer="select_and_scatter",
        shape_optional=True,
    ),
    OpDef(
        "sort",
        AT_LEAST_1,
        REDUCTION,
        ("dimensions!", "is_stable"),
        ("to_apply",),
        infer="sort",
        shape_optional=True,
    ),
    OpDef("topk", 1, REDUCTION, ("k!", "largest", "is_stable"), infer="topk", shape_optional=True),
    OpDef(
        "scan",
        VARIADIC,
        REDUCTION,
        ("dimensions!", "num_carries", "is_reverse", "is_associative"),
        ("to_apply",),
        infer="scan",
    ),
    # linear algebra
    OpDef(
        "dot",
        2,
        CONTRACTION,
        (
            "lhs_batch_dims",
            "lhs_contracting_dims",
            "rhs_batch_dims",
            "rhs_contracting_dims",
            "operand_precision",
            "algorithm",
        ),
        infer="dot",
        shape_optional=True,
        traits=_t(EXPENSIVE),
    ),
    # dot(lhs * lhs_scale, rhs * rhs_scale), each scale element covering a block (MX formats)
    OpDef(
        "scaled-dot",
        4,
        CONTRACTION,
        (
            "lhs_batch_dims",
            "lhs_contracting_dims",
            "rhs_batch_dims",
            "rhs_contracting_dims",
            "operand_precision",
            "algorithm",
        ),
        infer="scaled_dot",
        shape_optional=True,
        traits=_t(EXPENSIVE),
    ),
    # operands after lhs and rhs: the metadata of a sparsity_config (XLA's sparse convolution)
    OpDef(
        "convolution",
        (2, 4),
        CONTRACTION,
        (
            "window",
            "dim_labels!",
            "feature_group_count",
            "batch_group_count",
            "operand_precision",
            "sparsity_config",
        ),
        infer="convolution",
        shape_optional=True,
        traits=_t(EXPENSIVE),
    ),
    OpDef(
        "ragged-dot",
        3,
        CONTRACTION,
        (
            "lhs_batch_dims",
            "lhs_contracting_dims",
            "rhs_batch_dims",
            "rhs_contracting_dims",
            "lhs_ragged_dims",
            "rhs_group_dims",
            "operand_precision",
        ),
        traits=_t(EXPENSIVE),
    ),
    OpDef(
        "fft",
        1,
        CONTRACTION,
        ("fft_type!", "fft_length!"),
        infer="fft",
        shape_optional=True,
        traits=_t(EXPENSIVE),
    ),
    OpDef(
        "triangular-solve",
        2,
        CONTRACTION,
        ("left_side", "lower", "unit_diagonal", "transpose_a"),
        infer="triangular_solve",
        shape_optional=True,
        traits=_t(EXPENSIVE),
    ),
    OpDef(
        "cholesky",
        1,
        CONTRACTION,
        ("lower",),
        infer="same_as_operand",
        shape_optional=True,
        traits=_t(EXPENSIVE),
    ),
    OpDef(
        "batch-norm-training",
        3,
        OTHER,
        ("epsilon!", "feature_index!"),
        infer="batch_norm_training",
        shape_optional=True,
    ),
    OpDef(
        "batch-norm-inference",
        5,
        OTHER,
        ("epsilon!", "feature_index!"),
        infer="same_as_operand",
        shape_optional=True,
    ),
    OpDef(
        "batch-norm-grad",
        5,
        OTHER,
        ("epsilon!", "feature_index!"),
        infer="batch_norm_grad",
        shape_optional=True,
    ),
    # control flow and calls
    OpDef(
        "while",
        1,
        CONTROL,
        (),
        ("condition", "body"),
        infer="while_",
        shape_optional=True,
        traits=_t(SEQUENTIAL_CALLS),
    ),
    OpDef(
        "conditional",
        AT_LEAST_1,
        CONTROL,
        (),
        ("true_computation", "false_computation", "branch_computations"),
        infer="conditional",
        shape_optional=True,
        traits=_t(SEQUENTIAL_CALLS),
    ),
    OpDef(
        "call",
        VARIADIC,
        CONTROL,
        ("is_composite",),
        ("to_apply",),
        infer="call",
        shape_optional=True,
        traits=_t(SEQUENTIAL_CALLS),
    ),
    OpDef(
        "fusion",
        VARIADIC,
        CONTROL,
        ("kind!", "output_to_operand_aliasing"),
        ("calls",),
        infer="call",
    ),
    OpDef(
        "custom-call",
        VARIADIC,
        OTHER,
        (
            "window",
            "dim_labels",
            "feature_group_count",
            "batch_group_count",
            "custom_call_target!",
            "api_version",
            "schedule",
            "custom_call_has_side_effect",
            "operand_layout_constraints",
            "output_to_operand_aliasing",
            "literal",
            "padding_type",
            "operand_precision",
        ),
        ("to_apply", "called_computations"),
    ),
    OpDef(
        "opt-barrier", 1, CONTROL, infer="same_as_operand", shape_optional=True, traits=_t(FORWARDS)
    ),
    OpDef(
        "add-dependency",
        2,
        CONTROL,
        infer="same_as_operand",
        shape_optional=True,
        traits=_t(FORWARDS),
    ),
    OpDef(
        "domain",
        1,
        CONTROL,
        ("domain",),
        infer="same_as_operand",
        shape_optional=True,
        traits=_t(FORWARDS),
    ),
    OpDef(
        "async-start",
        VARIADIC,
        CONTROL,
        ("async_execution_thread", "output_to_operand_aliasing"),
        ("calls",),
    ),
    # async-update's operands after the first bind more of the wrapped computation's
    # parameters (late binding)
    OpDef(
        "async-update",
        (1, None),
        CONTROL,
        ("async_execution_thread", "output_to_operand_aliasing"),
        ("calls",),
    ),
    OpDef("async-done", 1, CONTROL, ("async_execution_thread",), ("calls",)),
    OpDef("copy-start", 1, OTHER, ("cross_program_prefetch_index",)),
    OpDef("copy-done", 1, OTHER),
    # collectives (single-device semantics in the interpreter) and I/O
    OpDef(
        "all-reduce",
        AT_LEAST_1,
        COLLECTIVE,
        _COLLECTIVE,
        ("to_apply",),
        infer="all_reduce",
        shape_optional=True,
    ),
    OpDef("all-reduce-start", AT_LEAST_1, COLLECTIVE, _COLLECTIVE, ("to_apply",)),
    OpDef("all-reduce-done", 1, COLLECTIVE),
    OpDef("all-gather", AT_LEAST_1, COLLECTIVE, ("dimensions!",) + _COLLECTIVE),
    OpDef("all-gather-start", AT_LEAST_1, COLLECTIVE, ("dimensions!",) + _COLLECTIVE),
    OpDef("all-gather-done", 1, COLLECTIVE),
    OpDef("reduce-scatter", AT_LEAST_1, COLLECTIVE, ("dimensions!",) + _COLLECTIVE, ("to_apply",)),
    OpDef("all-to-all", AT_LEAST_1, COLLECTIVE, ("dimensions",) + _COLLECTIVE),
    OpDef("ragged-all-to-all", 6, COLLECTIVE, _COLLECTIVE),
    OpDef(
        "collective-permute",
        (1, 4),
        COLLECTIVE,
        ("channel_id", "source_target_pairs!", "slice_sizes"),
    ),
    OpDef(
        "collective-permute-start",
        (1, 4),
        COLLECTIVE,
        ("channel_id", "source_target_pairs!", "slice_sizes"),
    ),
    OpDef("collective-permute-done", 1, COLLECTIVE),
    OpDef("collective-broadcast", VARIADIC, COLLECTIVE, _COLLECTIVE + ("has_dynamic_root",)),
    OpDef("send", 2, COLLECTIVE, ("channel_id", "is_host_transfer"), traits=_t(SIDE_EFFECT)),
    OpDef("send-done", 1, COLLECTIVE, ("channel_id", "is_host_transfer"), traits=_t(SIDE_EFFECT)),
    OpDef("recv", 1, COLLECTIVE, ("channel_id", "is_host_transfer"), traits=_t(SIDE_EFFECT)),
    OpDef("recv-done", 1, COLLECTIVE, ("channel_id", "is_host_transfer"), traits=_t(SIDE_EFFECT)),
    OpDef("infeed", 1, OTHER, ("infeed_config",), traits=_t(SIDE_EFFECT)),
    OpDef("outfeed", 2, OTHER, ("outfeed_shape", "outfeed_config"), traits=_t(SIDE_EFFECT)),
]

OPCODES: dict[str, OpDef] = {row.name: row for row in _ROWS}


def opcodes_with(trait: str, arity: int | None = None) -> frozenset[str]:
    """The opcodes whose row has `trait` (and, if given, exactly `arity` operands)."""
    return frozenset(
        row.name for row in _ROWS if trait in row.traits and (arity is None or row.arity == arity)
    )


CONTROL_FLOW = opcodes_with(SEQUENTIAL_CALLS)
FORWARDING = opcodes_with(FORWARDS)

# Opcodes that XLA's text allows as `<stem>-start/-update/-done` async sugar.
ASYNC_SUFFIXES = ("-start", "-update", "-done")


def opdef(name: str) -> OpDef:
    return OPCODES[name]
