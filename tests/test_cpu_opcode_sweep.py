"""Every opcode of the table on cpu against the interpreter, in awkward shapes: a plain one, a
zero-size one and a transposed layout (minor_to_major {0,1}) with an odd extent, all three in
one module so each opcode costs one compile. Elementwise rows are swept from the table (every
element kind they accept with `--opcode-sweep-full`, one per row otherwise); the others have a
template each below, or a reason in NOT_SWEPT. A new row fails here until it is one or the
other."""

from __future__ import annotations

import numpy as np

import minixla
from minixla.ir.opcodes import COLLECTIVE, ELEMENTWISE, OPCODES
from minixla.testing import fuzz
from minixla.testing.compare import compare_values

# (dims, layout) of the three variants: plain, zero-size, transposed with odd extents
VARIANTS = (((3, 5), "{1,0}"), ((0, 5), "{1,0}"), ((4, 3), "{0,1}"))
DTYPE_OF_KIND = {"float": "f32", "signed": "s32", "unsigned": "u8", "pred": "pred"}
MORE_DTYPES = {"float": ("f16", "bf16", "f64"), "signed": ("s8", "s64"), "unsigned": ("u32",)}
TEMPLATE_DTYPE = "f32"

NOT_SWEPT = {
    "parameter": "every module has them",
    "constant": "every module has them",
    "rng": "random by design; its distributions are checked by unit tests",
    "rng-get-and-update-state": "expanded before backends see it",
    "dynamic-reshape": "dynamic shapes",
    "set-dimension-size": "dynamic shapes",
    "get-dimension-size": "static shapes: folded before backends",
    "batch-norm-training": "expanded before backends",
    "batch-norm-inference": "expanded before backends",
    "batch-norm-grad": "expanded before backends",
    "custom-call": "one per registered target: tests/test_custom_calls.py",
    "fusion": "made by the pipeline from the ops swept here",
    "domain": "an identity with sharding annotations",
    "add-dependency": "tokens carry no values",
    "after-all": "tokens carry no values",
    "opt-barrier": "an identity",
    "async-start": "async wrappers of the ops swept here",
    "async-update": "async wrappers of the ops swept here",
    "async-done": "async wrappers of the ops swept here",
    "copy-start": "asynchronous copies",
    "copy-done": "asynchronous copies",
    "send": "peer-to-peer I/O",
    "send-done": "peer-to-peer I/O",
    "recv": "peer-to-peer I/O",
    "recv-done": "peer-to-peer I/O",
    "infeed": "host I/O",
    "outfeed": "host I/O",
    "scan": "a while loop on cpu (scan-expander); tests/test_scan.py compares the values",
    "ragged-dot": "not implemented by the reference",
    "scaled-dot": "checked against NumPy by its own tests",
    "stochastic-convert": "random by design",
    "map": "its scalar computation is swept in tests/test_scalar_computations.py",
    "bitcast": "layout-dependent: made by layout assignment, checked by its tests",
    **{op: "needs several devices" for op, row in OPCODES.items() if row.kind == COLLECTIVE},
}


def _array(dtype: str, dims, layout: str = "") -> str:
    return f"{dtype}[{','.join(map(str, dims))}]{layout}"


# Templates: (T, (a, b), layout) -> the body lines of one variant, `r` its result; names get a
# per-variant suffix. None: the opcode has no valid instance of that variant.
def _broadcast(t, d, lay):
    a, b = d
    return [
        f"p = {_array(t, (b,))} parameter(0)",
        f"r = {_array(t, d, lay)} broadcast(p), dimensions={{1}}",
    ]


def _reshape(t, d, lay):
    a, b = d
    return [f"p = {_array(t, d, lay)} parameter(0)", f"r = {_array(t, (b, a), lay)} reshape(p)"]


def _transpose(t, d, lay):
    a, b = d
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        f"r = {_array(t, (b, a), lay)} transpose(p), dimensions={{1,0}}",
    ]


def _slice(t, d, lay):
    a, b = d
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        f"r = {_array(t, (a, b - 2), lay)} slice(p), slice={{[0:{a}], [1:{b - 1}]}}",
    ]


def _concatenate(t, d, lay):
    a, b = d
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        f"q = {_array(t, (a, 2), lay)} parameter(1)",
        f"r = {_array(t, (a, b + 2), lay)} concatenate(p, q), dimensions={{1}}",
    ]


def _pad(t, d, lay):
    a, b = d
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        f"c = {t}[] parameter(1)",
        f"r = {_array(t, (a + 2, b + 1), lay)} pad(p, c), padding=1_1x-1_2",
    ]


def _reverse(t, d, lay):
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        f"r = {_array(t, d, lay)} reverse(p), dimensions={{0,1}}",
    ]


def _reduce(t, d, lay):
    a, b = d  # over the leading dim: a zero-size operand gives the init value
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        f"c = {t}[] parameter(1)",
        f"r = {_array(t, (b,))} reduce(p, c), dimensions={{0}}, to_apply=add",
    ]


def _reduce_window(t, d, lay):
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        f"c = {t}[] parameter(1)",
        f"r = {_array(t, d, lay)} reduce-window(p, c), window={{size=2x2 pad=0_1x1_0}}, to_apply=max",
    ]


def _dot(t, d, lay):
    a, b = d
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        f"q = {_array(t, (b, 4), lay)} parameter(1)",
        f"r = {_array(t, (a, 4), lay)} dot(p, q), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
    ]


def _iota(t, d, lay):
    return [f"r = {_array(t, d, lay)} iota(), iota_dimension=1"]


def _dynamic_slice(t, d, lay):
    a, b = d
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        "i = s32[] parameter(1)",
        "j = s32[] parameter(2)",
        f"r = {_array(t, (min(a, 2), 2), lay)} dynamic-slice(p, i, j), dynamic_slice_sizes={{{min(a, 2)},2}}",
    ]


def _dynamic_update_slice(t, d, lay):
    a, b = d
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        f"u = {_array(t, (min(a, 2), 2), lay)} parameter(1)",
        "i = s32[] parameter(2)",
        "j = s32[] parameter(3)",
        f"r = {_array(t, d, lay)} dynamic-update-slice(p, u, i, j)",
    ]


def _gather(t, d, lay):
    a, b = d
    if a == 0:
        return None  # a one-row slice of no rows is not a valid gather
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        "i = s32[3,1] parameter(1)",
        f"r = {_array(t, (3, b), lay)} gather(p, i), offset_dims={{1}}, collapsed_slice_dims={{0}}, "
        f"start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,{b}}}",
    ]


def _scatter(t, d, lay):
    a, b = d
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        "i = s32[3,1] parameter(1)",
        f"u = {_array(t, (3, b), lay)} parameter(2)",
        f"r = {_array(t, d, lay)} scatter(p, i, u), update_window_dims={{1}}, "
        "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
        "to_apply=add",
    ]


def _sort(t, d, lay):
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        f"r = {_array(t, d, lay)} sort(p), dimensions={{1}}, is_stable=true, to_apply=less",
    ]


def _select(t, d, lay):
    return [
        f"c = {_array('pred', d, lay)} parameter(0)",
        f"p = {_array(t, d, lay)} parameter(1)",
        f"q = {_array(t, d, lay)} parameter(2)",
        f"r = {_array(t, d, lay)} select(c, p, q)",
    ]


def _clamp(t, d, lay):
    return [
        f"lo = {t}[] parameter(0)",
        f"p = {_array(t, d, lay)} parameter(1)",
        f"hi = {t}[] parameter(2)",
        f"r = {_array(t, d, lay)} clamp(lo, p, hi)",
    ]


def _compare(t, d, lay):
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        f"q = {_array(t, d, lay)} parameter(1)",
        f"r = {_array('pred', d, lay)} compare(p, q), direction=LT, type=TOTALORDER",
    ]


def _convert(t, d, lay):
    return [f"p = {_array(t, d, lay)} parameter(0)", f"r = {_array('s32', d, lay)} convert(p)"]


def _bitcast_convert(t, d, lay):
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        f"r = {_array('u32', d, lay)} bitcast-convert(p)",
    ]


def _reduce_precision(t, d, lay):
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        f"r = {_array(t, d, lay)} reduce-precision(p), exponent_bits=5, mantissa_bits=7",
    ]


def _select_and_scatter(t, d, lay):
    a, b = d
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        f"s = {_array(t, (a, 1), lay)} parameter(1)",
        f"c = {t}[] parameter(2)",
        f"r = {_array(t, d, lay)} select-and-scatter(p, s, c), window={{size=1x{b} stride=1x{b}}}, "
        "select=greater_equal, scatter=add",
    ]


def _topk(t, d, lay):
    a, b = d
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        f"top = ({_array(t, (a, 2), lay)}, {_array('s32', (a, 2), lay)}) topk(p), k=2, largest=true",
        f"r = {_array(t, (a, 2), lay)} get-tuple-element(top), index=0",
    ]


def _convolution(t, d, lay):
    a, b = d
    return [
        f"p = {_array(t, (2, a, b, 3))} parameter(0)",
        f"w = {_array(t, (2, 2, 3, 4))} parameter(1)",
        f"r = {_array(t, (2, a, b, 4))} convolution(p, w), window={{size=2x2 pad=1_0x0_1}}, "
        "dim_labels=b01f_01io->b01f",
    ]


def _fft(t, d, lay):
    a, b = d
    return [
        f"p = {_array('c64', d, lay)} parameter(0)",
        f"r = {_array('c64', d, lay)} fft(p), fft_type=FFT, fft_length={{{b}}}",
    ]


def _spd(t, n, lay):
    """x x^T + n I, positive definite, from a parameter x."""
    return [
        f"x = {_array(t, (n, n), lay)} parameter(0)",
        f"xx = {_array(t, (n, n))} dot(x, x), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}",
        f"eye = {_array('s32', (n, n))} iota(), iota_dimension=0",
        f"eye2 = {_array('s32', (n, n))} iota(), iota_dimension=1",
        f"diag = {_array('pred', (n, n))} compare(eye, eye2), direction=EQ",
        f"big = {t}[] constant(8)",
        f"zero = {t}[] constant(0)",
        f"bigs = {_array(t, (n, n))} broadcast(big), dimensions={{}}",
        f"zeros = {_array(t, (n, n))} broadcast(zero), dimensions={{}}",
        f"shift = {_array(t, (n, n))} select(diag, bigs, zeros)",
        f"spd = {_array(t, (n, n), lay)} add(xx, shift)",
    ]


def _cholesky(t, d, lay):
    n = d[0]
    return _spd(t, n, lay) + [f"r = {_array(t, (n, n), lay)} cholesky(spd), lower=true"]


def _triangular_solve(t, d, lay):
    n, b = d
    return _spd(t, n, lay) + [
        f"l = {_array(t, (n, n))} cholesky(spd), lower=true",
        f"rhs = {_array(t, (n, b), lay)} parameter(1)",
        f"r = {_array(t, (n, b), lay)} triangular-solve(l, rhs), left_side=true, lower=true, "
        "transpose_a=NO_TRANSPOSE",
    ]


def _rng_bit_generator(t, d, lay):
    return [
        "s = u64[2] parameter(0)",
        f"g = (u64[2], {_array('u32', d, lay)}) rng-bit-generator(s), algorithm=rng_three_fry",
        f"r = {_array('u32', d, lay)} get-tuple-element(g), index=1",
    ]


def _complex(t, d, lay):
    return [
        f"p = {_array('f32', d, lay)} parameter(0)",
        f"q = {_array('f32', d, lay)} parameter(1)",
        f"r = {_array('c64', d, lay)} complex(p, q)",
    ]


def _complex_part(opcode):
    def template(t, d, lay):
        return [
            f"p = {_array('c64', d, lay)} parameter(0)",
            f"r = {_array('f32', d, lay)} {opcode}(p)",
        ]

    return template


def _tuple(t, d, lay):
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        f"tup = ({_array(t, d, lay)}, {_array(t, d, lay)}) tuple(p, p)",
        f"r = {_array(t, d, lay)} get-tuple-element(tup), index=1",
    ]


def _call(t, d, lay):
    return [
        f"p = {_array(t, d, lay)} parameter(0)",
        f"r = {_array(t, d, lay)} call(p), to_apply=double_{'x'.join(map(str, d))}",
    ]


def _while(t, d, lay):
    a, b = d
    shape = _array(t, d, lay)
    return [
        f"p = {shape} parameter(0)",
        "zero = s32[] constant(0)",
        f"init = (s32[], {shape}) tuple(zero, p)",
        f"loop = (s32[], {shape}) while(init), condition=below_3_{a}x{b}, body=double_loop_{a}x{b}",
        f"r = {shape} get-tuple-element(loop), index=1",
    ]


def _conditional(t, d, lay):
    shape = _array(t, d, lay)
    suffix = "x".join(map(str, d))
    return [
        "c = pred[] parameter(0)",
        f"p = {shape} parameter(1)",
        f"r = {shape} conditional(c, p, p), true_computation=double_{suffix}, "
        f"false_computation=negate_{suffix}",
    ]


TEMPLATES = {
    "broadcast": _broadcast,
    "reshape": _reshape,
    "transpose": _transpose,
    "slice": _slice,
    "concatenate": _concatenate,
    "pad": _pad,
    "reverse": _reverse,
    "reduce": _reduce,
    "reduce-window": _reduce_window,
    "dot": _dot,
    "iota": _iota,
    "dynamic-slice": _dynamic_slice,
    "dynamic-update-slice": _dynamic_update_slice,
    "gather": _gather,
    "scatter": _scatter,
    "sort": _sort,
    "select": _select,
    "clamp": _clamp,
    "compare": _compare,
    "convert": _convert,
    "bitcast-convert": _bitcast_convert,
    "reduce-precision": _reduce_precision,
    "select-and-scatter": _select_and_scatter,
    "topk": _topk,
    "convolution": _convolution,
    "fft": _fft,
    "cholesky": _cholesky,
    "triangular-solve": _triangular_solve,
    "rng-bit-generator": _rng_bit_generator,
    "complex": _complex,
    "real": _complex_part("real"),
    "imag": _complex_part("imag"),
    "tuple": _tuple,
    "get-tuple-element": _tuple,
    "call": _call,
    "while": _while,
    "conditional": _conditional,
}


def _elementwise_template(opcode: str):
    arity = OPCODES[opcode].arity

    def template(t, d, lay):
        params = [f"p{i} = {_array(t, d, lay)} parameter({i})" for i in range(arity)]
        operands = ", ".join(f"p{i}" for i in range(arity))
        return [*params, f"r = {opcode}({operands})"]

    return template


def _swept_elementwise() -> list[str]:
    return sorted(
        op
        for op, row in OPCODES.items()
        if row.kind == ELEMENTWISE
        and row.arity in (1, 2)
        and row.shape_optional
        and not row.required_attrs
        and op not in TEMPLATES
        and op not in NOT_SWEPT
    )


def _helpers(t: str) -> str:
    """Called computations the templates name, for every variant's shape and layout."""
    lines = [
        f"add {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n  ROOT s = {t}[] add(a, b)\n}}",
        f"max {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n  ROOT s = {t}[] maximum(a, b)\n}}",
        f"less {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n"
        f"  ROOT s = pred[] compare(a, b), direction=LT, type=TOTALORDER\n}}",
        f"greater_equal {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n"
        f"  ROOT s = pred[] compare(a, b), direction=GE, type=TOTALORDER\n}}",
    ]
    for dims, lay in VARIANTS:
        shape, suffix = _array(t, dims, lay), "x".join(map(str, dims))
        state = f"(s32[], {shape})"
        lines += [
            f"double_{suffix} {{\n  a = {shape} parameter(0)\n  ROOT s = {shape} add(a, a)\n}}",
            f"negate_{suffix} {{\n  a = {shape} parameter(0)\n  ROOT s = {shape} negate(a)\n}}",
            f"below_3_{suffix} {{\n  s = {state} parameter(0)\n"
            f"  i = s32[] get-tuple-element(s), index=0\n"
            f"  three = s32[] constant(3)\n  ROOT c = pred[] compare(i, three), direction=LT\n}}",
            f"double_loop_{suffix} {{\n  s = {state} parameter(0)\n"
            f"  i = s32[] get-tuple-element(s), index=0\n  x = {shape} get-tuple-element(s), index=1\n"
            f"  one = s32[] constant(1)\n  j = s32[] add(i, one)\n  y = {shape} add(x, x)\n"
            f"  ROOT n = {state} tuple(j, y)\n}}",
        ]
    return "\n\n".join(lines)


def sweep_module(opcode: str, dtype: str) -> str:
    """One module holding the opcode once per variant; the root is a tuple of the results."""
    template = TEMPLATES.get(opcode) or _elementwise_template(opcode)
    body, params, results = [], 0, []
    for number, (dims, lay) in enumerate(VARIANTS):
        lines = template(dtype, dims, lay)
        if lines is None:
            continue
        for line in lines:
            name, rest = line.split(" = ", 1)
            for prior in sorted({ln.split(" = ", 1)[0] for ln in lines}, key=len, reverse=True):
                rest = _rename(rest, prior, f"{prior}_{number}")
            if " parameter(" in rest:
                rest = rest[: rest.index(" parameter(")] + f" parameter({params})"
                params += 1
            body.append(f"  {name}_{number} = {rest}")
        results.append(f"r_{number}")
    body.append(f"  ROOT out = tuple({', '.join(results)})")
    helpers = f"{_helpers(dtype)}\n\n" if opcode in TEMPLATES else ""
    return f"HloModule sweep_{opcode}\n\n{helpers}ENTRY e {{\n" + "\n".join(body) + "\n}\n"


def _rename(text: str, old: str, new: str) -> str:
    import re

    return re.sub(rf"(?<![\w.%-]){re.escape(old)}(?![\w-])", new, text)


def _cases(full: bool) -> list[tuple[str, str]]:
    cases = [(op, TEMPLATE_DTYPE) for op in sorted(TEMPLATES)]
    for op in _swept_elementwise():
        kinds = sorted(OPCODES[op].kinds - {"complex"})
        dtypes = [DTYPE_OF_KIND[k] for k in kinds]
        if full:
            dtypes += [more for k in kinds for more in MORE_DTYPES.get(k, ())]
        else:
            dtypes = [dtypes[0] if "float" not in kinds else "f32"]
        cases += [(op, t) for t in dtypes]
    return cases


def pytest_generate_tests(metafunc):
    if "sweep_case" in metafunc.fixturenames:
        full = metafunc.config.getoption("--opcode-sweep-full")
        cases = _cases(full)
        metafunc.parametrize("sweep_case", cases, ids=[f"{op}-{t}" for op, t in cases])


# Library calls skip work the interpreter does, so inf and NaN inputs reach fewer outputs
# (docs/semantics.md, "inf and NaN inside library calls"): these get finite values.
# sums in another order, or in another precision (cpu's fft in the operand's, as XLA's; the
# interpreter's in f64): compared within rounding, on finite inputs
FINITE_INPUTS = {"convolution", "cholesky", "triangular-solve", "fft"}


def _argument(rng, shape, finite: bool = False) -> np.ndarray:
    """Special values (NaN, +-0, +-inf, integer extremes) where the fuzzer makes them; index
    operands get them too, since out-of-range starts and indices have defined meanings."""
    if finite and shape.dtype.startswith("f"):
        return rng.standard_normal(shape.dims).astype(shape.numpy_dtype)
    if shape.dtype in fuzz.DTYPES:
        return fuzz.special_values(rng, shape.dtype, shape.dims)
    if shape.dtype.startswith("c"):
        parts = rng.standard_normal((2, *shape.dims))
        return (parts[0] + 1j * parts[1]).astype(shape.numpy_dtype)
    return rng.integers(0, 2**32, shape.dims).astype(shape.numpy_dtype)


def test_every_row_is_swept_or_says_why_not():
    swept = set(TEMPLATES) | set(_swept_elementwise())
    assert not [op for op in OPCODES if op not in swept and op not in NOT_SWEPT]
    assert not swept & set(NOT_SWEPT)


def test_cpu_matches_the_interpreter(sweep_case):
    opcode, dtype = sweep_case
    module = minixla.parse_hlo_module(sweep_module(opcode, dtype))
    rng = np.random.default_rng(7)
    finite = opcode in FINITE_INPUTS
    args = [_argument(rng, shape, finite) for shape in module.entry.parameter_shapes]
    if finite:  # sums in another order: within rounding of the terms, not of the result
        want = minixla.compile(module, backend="interpreter")(*args)
        got = minixla.compile(module, backend="cpu")(*args)
        problems = compare_values(got, want, rtol=1e-4, atol=1e-5, what="cpu")
    else:
        problems = fuzz.check_module(module, args, backends=("cpu",))
    assert not problems, "\n".join(problems) + "\n" + module.to_text()
    built = minixla.compile(module, backend="cpu")
    assert not built.program.fallback_reasons, built.program.fallback_reasons


def test_the_variants_hold_a_zero_size_and_a_transposed_layout():
    module = minixla.parse_hlo_module(sweep_module("add", "f32"))
    shapes = module.entry.parameter_shapes
    assert any(0 in s.dims for s in shapes)
    assert any(s.layout is not None and list(s.layout.minor_to_major) == [0, 1] for s in shapes)
