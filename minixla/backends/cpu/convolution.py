"""The convolution thunk: any dimension numbers, strides, padding (negative: cropping), lhs and
rhs dilation, window reversal, feature groups and batch groups, as BLAS GEMMs.

The first two strategies compute channels-last: the input as [batch, spatial..., features],
the kernel as [spatial..., in features, out features], the result as [batch, spatial..., out
features] written through a transposed view of the output, so the contracted features are
the minor dim of every GEMM operand. The third keeps features before spatial dims (NCHW).
A base-dilated convolution (a transposed one: decoders, input gradients of strided layers)
runs as one channels-last sub-convolution per residue class of its outputs, each over the
undilated input with every s-th tap (`_phases`), not over the dilated input, mostly zeros.

* shifted GEMMs (stride 1, no batch groups, enough features per group): the padded input is
  one [batch * positions, features] matrix, and the output row of a position is the sum over
  taps of the input row at the tap's flat offset times the tap's [in, out] kernel slice. Each
  tap is one GEMM on a shifted view of the input (no copy); rows that straddle two lines or
  two batch elements are computed and dropped. This is the dilated 1-D stack's case (a
  [8, 1024, 32] input, three taps: no im2col copy at all).
* im2col: the windows are copied into one [groups, batch * positions, taps * features] matrix
  (taps outer, features minor, so each copied run is contiguous in the input) and multiplied
  with the kernel in one batched GEMM. Used for strides, batch groups (weight gradients),
  few input features (an RGB first layer), and windows with many taps. The padding copy
  puts the input channels-last whatever its layout, so each copied run is a window row's
  taps times the features: for an NCHW input, copying windows straight from NCHW (runs of
  one window row's taps) took 5-10x longer than that transposing copy plus the windows.
* planar im2col (features before spatial dims in the input and the output, as PyTorch's
  NCHW; no batch groups; stride 1 along the minor spatial dim): per batch element the
  windows are copied into a [features * taps, positions] matrix, runs of the output's minor
  spatial dim, and the kernel [out features, features * taps] times it is that element's
  output in its own layout, with no transposing copy on either side. Chosen for few
  features per tap row (an RGB or grayscale first layer: 0.35-0.6x the channels-last
  im2col's time) and where the positions outnumber the taps (not for weight gradients,
  whose windows are whole images).
* overlap-add (base-dilated: transposed convolutions of decoders and the input gradients of
  strided layers): every input position times every tap in one GEMM, [positions, features]
  by [features, taps * out features], then a generated kernel adds each product into the
  output position it lands on (input i, tap t: output s * i + padding_low - t, for a window
  dilation of 1). No padding, no window copy and one GEMM instead of one per phase and tap;
  chosen where most products land inside the output (OVERLAP_ADD_MIN_KEPT) and the driver
  can compile the kernel.
* per-feature GEMMs (no groups; windows larger than the output: weight gradients, whose
  window is the whole image and whose contracted features are the batch): per contracted
  feature, the windows of its plane are copied into a [batch * positions, taps] matrix and
  multiplied with that feature's [taps, out features] block of the kernel, read as stored
  (transposed where the out features come before the taps, as in PyTorch's OIHW gradient):
  the kernel, as large as the image gradient, is never copied (PER_FEATURE_TAPS has the
  measurements).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import numpy as np

from ...ir import WindowDim
from ..codegen.scalar import NotEmittable
from .blas_threads import always_serial, threads_for, use_threads
from .host_blas import accumulate_gemm, matmul
from .kernels import _HEADER, KernelSpec
from .libcalls import _finish, _gemm_dtype, _work_dtype

# When shifted GEMMs beat im2col (measured on [8, 1024, c] 1-D and [8, h, w, c] 2-D cases):
SHIFT_MIN_FEATURES = 16  # fewer input features per group make each tap's GEMM too thin
SHIFT_MAX_TAPS = 32  # more taps: one im2col GEMM beats as many thin GEMMs
# Planar im2col copies runs of the output's minor spatial dim, channels-last runs of the
# window's minor taps times the features; planar won (0.3-0.9x the time) where its runs were
# at least half as long, and lost by 10-15% below that
PLANAR_RUN_RATIO = 2
# Per-feature GEMMs for windows this many times the output positions (weight gradients)
# where im2col would transpose the kernel's minor dim (out features stored before the taps,
# as PyTorch's) or has few rows per position (batch under PER_FEATURE_BATCH: an RGB layer).
# One core: a [32, 3, 32, 32] RGB layer's torch gradient 5.15 -> 0.75 ms, jax's 0.43 -> 0.28;
# elsewhere within 10% either way (jax's [16, 16, 16, 16] -> 32 features 0.68 against 0.75).
PER_FEATURE_TAPS = 8
PER_FEATURE_BATCH = 8
# Overlap-add where at least this share of the products lands inside the output (padding that
# crops the output drops the rest); one [8, 32, 32, 16] -> [8, 64, 64, 3] 4x4 decoder layer:
# 2.2 ms as four phases of shifted GEMMs, 0.42 overlap-added
OVERLAP_ADD_MIN_KEPT = 0.5
SHIFT_MAX_WASTE = 1.2  # computed rows (the padded grid) over kept rows (output positions);
# 3x3 on 16x16 images computes 1.27x the rows and ran 1.1-1.4x slower than im2col


@dataclass(frozen=True)
class Phase:
    """One sub-convolution of a base-dilated one: the outputs `out_index` (spatial slices of
    the channels-last output) from the kernel taps `kernel_index` over the undilated input,
    computed as `plan` says (None: no tap reaches a real input, the outputs are zeros)."""

    out_index: tuple[slice, ...]
    kernel_index: tuple[slice, ...]
    plan: ConvPlan | None


@dataclass(frozen=True)
class ConvPlan:
    """What a convolution needs at run time, decided once at compile time."""

    x_perm: tuple[int, ...]  # operand 0 -> [batch, spatial..., features], as it is padded
    k_perm: tuple[int, ...]  # operand 1 -> [spatial..., in features, out features]
    out_perm: tuple[int, ...]  # the output -> [batch, spatial..., out features]
    window: tuple
    flips: tuple[int, ...]  # kernel axes (channels-last) reversed
    extents: tuple[int, ...]  # dilated window extent per spatial dim
    groups: int
    batch_groups: int
    work: np.dtype
    strategy: str  # "shifted", "im2col", "planar", "per-feature" or "overlap-add"
    flops: float
    kernel_out_first: bool = False  # per-feature: the kernel as [in, out, taps...]
    phases: tuple[Phase, ...] = ()  # base-dilated: the sub-convolutions (see _phases)

    @property
    def one_thread(self) -> bool:
        """Its GEMMs run on one BLAS thread (`threads_for`, from its size alone): they may
        then go to the large-GEMM library (host_blas.matmul)."""
        return always_serial(self.flops)


def plan(instr, strategy: str | None = None, native: bool = False) -> ConvPlan:
    """The plan of a convolution; `strategy` forces one where it applies (tests run both).
    `native`: the caller can compile overlap-add's kernel (the driver can, a bare thunk not)."""
    from ...ir import parse_dim_labels

    attrs = instr.attrs
    dims = parse_dim_labels(str(attrs["dim_labels"]))
    groups, batch_groups = attrs.get("feature_group_count", 1), attrs.get("batch_group_count", 1)
    if groups > 1 and batch_groups > 1:
        raise NotEmittable("convolution with both feature and batch groups")
    lhs, rhs = instr.operand(0).shape, instr.operand(1).shape
    kernel_sizes = [rhs.dims[d] for d in dims.kernel_spatial]
    window = attrs["window"].dims if "window" in attrs else tuple(map(WindowDim, kernel_sizes))
    extents = tuple((k - 1) * wd.rhs_dilation + 1 for k, wd in zip(kernel_sizes, window))
    taps = math.prod(kernel_sizes)
    features = lhs.dims[dims.input_feature] // max(groups, 1)
    work = _gemm_dtype(instr, _work_dtype(instr), taps * features)
    out_spatial = [instr.shape.dims[d] for d in dims.output_spatial]
    padded = [
        (n - 1) * wd.lhs_dilation + 1 + wd.padding_low + wd.padding_high if n else 0
        for n, wd in zip((lhs.dims[d] for d in dims.input_spatial), window)
    ]
    waste = math.prod(padded) / max(math.prod(out_spatial), 1)
    can_shift = all(wd.stride == 1 for wd in window) and batch_groups == 1
    features_first = dims.input_feature < min(dims.input_spatial, default=0) and (
        dims.output_feature < min(dims.output_spatial, default=0)
    )
    can_planar = features_first and batch_groups == 1 and bool(window) and window[-1].stride == 1
    can_per_feature = groups == 1 and batch_groups == 1 and bool(window)
    kernel_out_first = dims.kernel_output_feature < min(dims.kernel_spatial, default=0)
    phased = _can_phase(window, batch_groups)
    sizes = [lhs.dims[d] for d in dims.input_spatial]
    out_features = instr.shape.dims[dims.output_feature] // max(groups, 1)
    can_overlap_add = (
        batch_groups == 1
        and any(wd.lhs_dilation > 1 for wd in window)
        and np.dtype(work) in (np.float32, np.float64)
        and instr.shape.numel() > 0
        and lhs.numel() > 0
        and rhs.numel() > 0
    )
    forced = strategy
    if strategy is None:
        strategy = (
            "overlap-add"
            if native
            and can_overlap_add
            and _overlap_add_pays(
                window,
                sizes,
                kernel_sizes,
                out_spatial,
                features,
                out_features,
                # the products' bytes: every input position times every tap and out feature
                instr.shape.numel()
                // max(math.prod(out_spatial), 1)
                * math.prod(sizes)
                * taps
                * np.dtype(work).itemsize,
            )
            else "per-feature"
            if can_per_feature
            and taps >= PER_FEATURE_TAPS * math.prod(out_spatial)
            and (kernel_out_first or lhs.dims[dims.input_batch] < PER_FEATURE_BATCH)
            else _channels_last(can_shift, features, taps, waste)
            if phased
            else "shifted"
            if _shift_pays(can_shift, features, taps, waste)
            else "planar"
            if can_planar
            and out_spatial[-1] * PLANAR_RUN_RATIO >= kernel_sizes[-1] * features
            and math.prod(out_spatial) >= taps
            else "im2col"
        )
    if (
        strategy not in ("shifted", "im2col", "planar", "per-feature", "overlap-add")
        or strategy == "overlap-add"
        and not can_overlap_add
        or strategy == "shifted"
        and not can_shift
        or strategy == "planar"
        and not can_planar
        or strategy == "per-feature"
        and not can_per_feature
    ):
        raise ValueError(f"convolution strategy {strategy!r} does not apply")

    def made(x_perm, k_perm, out_perm, first_tap: int, out_first: bool = False) -> ConvPlan:
        # first_tap: the kernel axis of the first spatial dim, as the plan permutes it
        return ConvPlan(
            x_perm=tuple(x_perm),
            k_perm=tuple(k_perm),
            out_perm=tuple(out_perm),
            window=tuple(window),
            flips=tuple(first_tap + i for i, wd in enumerate(window) if wd.reversal),
            extents=extents,
            groups=groups,
            batch_groups=batch_groups,
            work=work,
            strategy=strategy,
            flops=2.0 * instr.shape.numel() * taps * features,
            kernel_out_first=out_first,
        )

    channels_last_out = (dims.output_batch, *dims.output_spatial, dims.output_feature)
    if strategy == "per-feature":
        # the kernel as [in features, taps..., out] or, where out comes before the spatial
        # dims in storage, [in features, out, taps...]: a view either way when stored so
        k, o = dims.kernel_input_feature, dims.kernel_output_feature
        if kernel_out_first:
            k_perm = (k, o, *dims.kernel_spatial)
        else:
            k_perm = (k, *dims.kernel_spatial, o)
        x_perm = (dims.input_feature, dims.input_batch, *dims.input_spatial)
        return made(
            x_perm, k_perm, channels_last_out, 2 if kernel_out_first else 1, kernel_out_first
        )
    if strategy == "planar":
        return made(
            (dims.input_batch, dims.input_feature, *dims.input_spatial),
            (dims.kernel_output_feature, dims.kernel_input_feature, *dims.kernel_spatial),
            (dims.output_batch, dims.output_feature, *dims.output_spatial),
            2,
        )
    whole = made(
        (dims.input_batch, *dims.input_spatial, dims.input_feature),
        (*dims.kernel_spatial, dims.kernel_input_feature, dims.kernel_output_feature),
        channels_last_out,
        0,
    )
    if not phased or strategy == "overlap-add":
        return whole
    return replace(whole, phases=_phases(whole, sizes, kernel_sizes, out_spatial, features, forced))


def _share(part, whole) -> float:
    return math.prod(part) / max(math.prod(whole), 1)


def _shift_pays(can_shift: bool, features: int, taps: int, waste: float) -> bool:
    return (
        can_shift
        and features >= SHIFT_MIN_FEATURES
        and taps <= SHIFT_MAX_TAPS
        and waste <= SHIFT_MAX_WASTE
    )


def _channels_last(can_shift: bool, features: int, taps: int, waste: float) -> str:
    return "shifted" if _shift_pays(can_shift, features, taps, waste) else "im2col"


def _can_phase(window, batch_groups: int) -> bool:
    """A base-dilated convolution runs as sub-convolutions over the undilated input where
    each base-dilated dim has stride 1 and no window dilation (the transposed convolutions of
    gradients and decoders)."""
    dilated = [wd for wd in window if wd.lhs_dilation > 1]
    return (
        batch_groups == 1
        and bool(dilated)
        and all(wd.stride == 1 and wd.rhs_dilation == 1 for wd in dilated)
    )


def _phases(whole: ConvPlan, sizes, kernel_sizes, out_spatial, features, forced):
    """The sub-convolutions of a base-dilated convolution, one per residue class of the
    outputs modulo the dilation along each dilated dim. Output o reads dilated position
    o + t - padding_low, a real input only where that is a multiple of the dilation s: for
    outputs o = r + s i only the taps t = t0 + s j with t0 = (padding_low - r) mod s do, and
    they read input i + j + c with c = (r + t0 - padding_low) / s. Each class is then an
    ordinary convolution with the taps t0, t0 + s, ... padded by -c: s^d fewer
    multiply-adds and a copied input s^d times smaller than over the dilated input, which is
    mostly zeros. The kernel is flipped before it is sliced, so no sub-window is reversed."""
    options = []
    for n, k, count, wd in zip(sizes, kernel_sizes, out_spatial, whole.window):
        s = wd.lhs_dilation
        if s == 1:
            options.append([(slice(None), slice(None), replace(wd, reversal=False))])
            continue
        dim_options = []
        for r in range(min(s, count)):
            first_tap = (wd.padding_low - r) % s
            taps = len(range(first_tap, k, s))
            offset = (r + first_tap - wd.padding_low) // s
            outputs = len(range(r, count, s))
            sub = WindowDim(
                size=taps,
                padding_low=-offset,
                padding_high=outputs + taps - 1 - n + offset,
            )
            dim_options.append((slice(r, count, s), slice(first_tap, k, s), sub))
        options.append(dim_options)
    phases = []
    for choice in itertools.product(*options):
        out_index, kernel_index, window = zip(*choice) if choice else ((), (), ())
        taps = [len(range(k)[i]) for k, i in zip(kernel_sizes, kernel_index)]
        if 0 in taps:
            phases.append(Phase(out_index, kernel_index, None))
            continue
        outputs = [len(range(n)[i]) for n, i in zip(out_spatial, out_index)]
        padded = [n + w.padding_low + w.padding_high for n, w in zip(sizes, window)]
        can_shift = all(w.stride == 1 for w in window)
        waste = math.prod(padded) / max(math.prod(outputs), 1)
        strategy = forced or _channels_last(can_shift, features, math.prod(taps), waste)
        if strategy == "shifted" and not can_shift:
            strategy = "im2col"
        sub = replace(
            whole,
            window=tuple(window),
            flips=(),
            extents=tuple(taps),
            strategy=strategy,
            flops=whole.flops * _share(taps, kernel_sizes) * _share(outputs, out_spatial),
        )
        phases.append(Phase(out_index, kernel_index, sub))
    return tuple(phases)


# ---- overlap-add ----------------------------------------------------------------------------


def _landing_count(n: int, taps: int, wd, count: int) -> int:
    """How many (input position i, tap t) pairs of one spatial dim meet inside the output:
    the dilated input position s * i meets tap t at output o where o * stride +
    t * rhs_dilation - padding_low = s * i."""
    s, d, low = wd.lhs_dilation, wd.rhs_dilation, wd.padding_low
    if wd.stride != 1:
        return sum(
            (s * i + low - d * t) % wd.stride == 0
            and 0 <= (s * i + low - d * t) // wd.stride < count
            for i in range(n)
            for t in range(taps)
        )
    landed = 0
    for t in range(taps):  # 0 <= s * i + low - d * t < count
        first = max(0, -((low - d * t) // s))
        last = min(n - 1, (count - 1 - low + d * t) // s)
        landed += max(0, last - first + 1)
    return landed


def _overlap_add_pays(window, sizes, kernel_sizes, out_spatial, features, out_features, products):
    """Most products land inside the output, they fit one im2col-sized buffer, and there are
    no more out features than in features: the products are taps * out features per input
    position, and with more out than in (a [8, 16, 16, 16] -> 64 features 4x4 decoder layer:
    1.95 ms against 1.47 as phases) writing and adding them costs more than the phases' copies
    of taps * in features per output position."""
    if out_features > features:
        return False
    kept = 1.0
    for n, k, count, wd in zip(sizes, kernel_sizes, out_spatial, window):
        kept *= _landing_count(n, k, wd, count) / (n * k)
    return kept >= OVERLAP_ADD_MIN_KEPT and products <= IM2COL_BYTES


def overlap_add_kernel(instr, spec: ConvPlan) -> KernelSpec:
    """kernel(products, out) for `instr` planned as overlap-add (`spec`): out (channels-last,
    flat) = 0, then each product of the GEMM [groups, batch, positions..., taps..., out
    features per group] added where it lands."""
    lhs, rhs, out = instr.operand(0).shape.dims, instr.operand(1).shape.dims, instr.shape.dims
    batch = lhs[spec.x_perm[0]]
    sizes = [lhs[d] for d in spec.x_perm[1:-1]]
    taps = [rhs[d] for d in spec.k_perm[:-2]]
    count = [out[d] for d in spec.out_perm[1:-1]]
    groups = spec.groups
    per_group = out[spec.out_perm[-1]] // groups
    lines = ["out[:] = 0", f"for g in range({groups}):", f"    for b in range({batch}):"]
    depth = 2
    for d, (n, k, q, wd) in enumerate(zip(sizes, taps, count, spec.window)):
        indent = "    " * depth
        lines += [f"{indent}for i{d} in range({n}):", f"{indent}    for t{d} in range({k}):"]
        indent += "        "
        reach = f"{wd.lhs_dilation} * i{d} + {wd.padding_low} - {wd.rhs_dilation} * t{d}"
        if wd.stride == 1:
            lines.append(f"{indent}o{d} = {reach}")
        else:
            lines += [
                f"{indent}q{d} = {reach}",
                f"{indent}if q{d} % {wd.stride} != 0:",
                f"{indent}    continue",
                f"{indent}o{d} = q{d} // {wd.stride}",
            ]
        lines += [f"{indent}if o{d} < 0 or o{d} >= {q}:", f"{indent}    continue"]
        depth += 2
    indent = "    " * depth
    source_index = "g * " + str(batch) + " + b"
    for d, n in enumerate(sizes):
        source_index = f"({source_index}) * {n} + i{d}"
    for d, k in enumerate(taps):
        source_index = f"({source_index}) * {k} + t{d}"
    target_index = "b"
    for d, q in enumerate(count):
        target_index = f"({target_index}) * {q} + o{d}"
    lines += [
        f"{indent}src = ({source_index}) * {per_group}",
        f"{indent}dst = (({target_index}) * {groups} + g) * {per_group}",
        f"{indent}for f in range({per_group}):",
        f"{indent}    out[dst + f] += products[src + f]",
    ]
    source = "\n".join(
        [
            _HEADER.format(doc="Overlap-add of a base-dilated convolution's products."),
            "",
            "@njit(parallel=False, fastmath={'contract'}, error_model='numpy', "
            "boundscheck=False, nogil=True, cache=CACHE)",
            "def kernel(products, out):",
            *("    " + line for line in lines),
        ]
    )
    dtype = "f32" if spec.work == np.float32 else "f64"
    kernel = KernelSpec(
        "kernel",
        source + "\n",
        [("scratch", None), ("out", 0)],
        [1, 1],
        [dtype, dtype],
        True,
        False,
    )
    kernel.kid = kernel.content_id()
    return kernel


class OverlapAdd:
    """The overlap-add convolution thunk of the plan `spec`: the products' GEMM here, their
    sums in the compiled `overlap_add_kernel`, looked up by its global name in the driver's
    namespace (as GemmDot's)."""

    def __init__(self, spec: ConvPlan, namespace: dict, kernel: str):
        self.spec, self.namespace, self.kernel = spec, namespace, kernel

    def __call__(self, out, x, weights):
        spec = self.spec
        use_threads(threads_for(spec.flops))
        x = np.ascontiguousarray(x.transpose(spec.x_perm), spec.work)  # [batch, spatial.., in]
        weights = weights.transpose(spec.k_perm).astype(spec.work, copy=False)
        if spec.flips:
            weights = np.flip(weights, spec.flips)
        g, per_group = spec.groups, weights.shape[-1] // spec.groups
        taps = math.prod(weights.shape[:-2])
        rows = x.reshape(-1, g, x.shape[-1] // g).transpose(1, 0, 2)  # [g, positions, in / g]
        by_group = weights.reshape(taps, -1, g, per_group).transpose(2, 1, 0, 3)
        matrix = np.ascontiguousarray(by_group).reshape(g, -1, taps * per_group)
        products = matmul(rows, matrix, one_thread=spec.one_thread)
        target = out.transpose(spec.out_perm)
        direct = target.flags.c_contiguous and target.dtype == spec.work
        summed = target if direct else np.empty(target.shape, spec.work)
        self.namespace[self.kernel](products.reshape(-1), summed.reshape(-1))
        if not direct:
            _finish(target, summed)


def convolution(instr, strategy: str | None = None):
    spec = plan(instr, strategy)
    nsp = len(spec.window)
    gemm = _accumulating_gemm(spec.work) if spec.strategy == "shifted" else None

    def run(out, x, kernel):
        use_threads(threads_for(spec.flops))
        if spec.strategy == "planar":
            _planar(spec, out, x, kernel)
            return
        if spec.strategy == "per-feature":
            _per_feature(spec, out, x, kernel)
            return
        x = x.transpose(spec.x_perm).astype(spec.work, copy=False)
        kernel = kernel.transpose(spec.k_perm).astype(spec.work, copy=False)
        if spec.flips:
            kernel = np.flip(kernel, spec.flips)
        target = out.transpose(spec.out_perm)
        if not spec.phases:
            padded = _dilate_and_pad(x, range(1, 1 + nsp), spec.window)
            _channels_last_into(spec, target, padded, kernel, gemm)
            return
        for phase in spec.phases:
            part = target[(slice(None),) + phase.out_index]
            if phase.plan is None:
                part[...] = 0
                continue
            _channels_last_into(
                phase.plan,
                part,
                _dilate_and_pad(x, range(1, 1 + nsp), phase.plan.window),
                kernel[phase.kernel_index],
                gemm,
            )

    return run


def _channels_last_into(spec: ConvPlan, target, x, kernel, gemm) -> None:
    """The shifted or im2col strategy on the padded channels-last input `x` and the kernel
    [spatial..., in, out], written into the channels-last view `target` of the output."""
    nsp = len(spec.window)
    if (
        any(x.shape[1 + i] < e for i, e in enumerate(spec.extents))
        or x.shape[0] == 0
        or x.shape[-1] == 0
        or kernel.size == 0
        or target.size == 0
    ):
        target[...] = 0
        return
    positions = target.shape[1 : 1 + nsp]
    _finish(
        target,
        _shifted(spec, x, kernel, positions, gemm)
        if spec.strategy == "shifted"
        else _im2col(spec, x, kernel, positions),
    )


def _shifted(spec: ConvPlan, x: np.ndarray, kernel: np.ndarray, positions, gemm) -> np.ndarray:
    """[batch, positions..., out features]: per tap, one GEMM of the flat input shifted by the
    tap's offset, accumulated over all padded-grid rows; the rows of real positions are kept."""
    n, spatial, c = x.shape[0], x.shape[1:-1], x.shape[-1]
    g = spec.groups
    o = kernel.shape[-1]
    x = np.ascontiguousarray(x)
    pitches = [math.prod(spatial[i + 1 :]) for i in range(len(spatial))]
    volume = math.prod(spatial)
    rows = (n - 1) * volume + sum((p - 1) * pitch for p, pitch in zip(positions, pitches)) + 1
    flat = x.reshape(n * volume, g, c // g).transpose(1, 0, 2)  # [g, rows, c / g]
    total = np.empty((g, n * volume, o // g), spec.work)
    scratch = None
    first = (0,) * (kernel.ndim - 2)
    for tap in np.ndindex(*kernel.shape[:-2]):
        offset = sum(t * wd.rhs_dilation * pitch for t, wd, pitch in zip(tap, spec.window, pitches))
        weights = kernel[tap].reshape(c // g, g, o // g).transpose(1, 0, 2)  # [g, in, out]
        lhs = flat[:, offset : offset + rows]
        if gemm is not None and g == 1:  # total += lhs @ weights
            accumulate_gemm(
                gemm,
                total[0, :rows],
                lhs[0],
                np.ascontiguousarray(weights[0]),
                0.0 if tap == first else 1.0,
                spec.one_thread,
            )
            continue
        if scratch is None:
            matmul(lhs, weights, out=total[:, :rows], one_thread=spec.one_thread)
            scratch = np.empty((g, rows, o // g), spec.work)
            continue
        matmul(lhs, weights, out=scratch, one_thread=spec.one_thread)
        np.add(total[:, :rows], scratch, out=total[:, :rows])
    grid = (
        total.transpose(1, 0, 2).reshape((n,) + tuple(spatial) + (o,))
        if g > 1
        else total.reshape((n,) + tuple(spatial) + (o,))
    )
    return grid[(slice(None),) + tuple(slice(0, p) for p in positions)]


def _planar(spec: ConvPlan, out: np.ndarray, x: np.ndarray, kernel: np.ndarray) -> None:
    """Per batch element and group, kernel [out features, features * taps] times the windows
    [features * taps, positions]: the output in [batch, features, spatial...] order."""
    nsp = len(spec.window)
    x = x.transpose(spec.x_perm).astype(spec.work, copy=False)
    x = _dilate_and_pad(x, range(2, 2 + nsp), spec.window)
    kernel = kernel.transpose(spec.k_perm).astype(spec.work, copy=False)
    if spec.flips:
        kernel = np.flip(kernel, spec.flips)
    target = out.transpose(spec.out_perm)
    n, o, positions = target.shape[0], target.shape[1], target.shape[2:]
    if (
        any(x.shape[2 + i] < e for i, e in enumerate(spec.extents))
        or n == 0
        or x.shape[1] == 0
        or kernel.size == 0
        or out.size == 0
    ):
        out[...] = 0
        return
    view = _windows(x, 2, positions, spec.window, kernel.shape[2:])  # [n, c, positions..., taps...]
    order = (0, 1) + tuple(range(2 + nsp, 2 + 2 * nsp)) + tuple(range(2, 2 + nsp))
    g, count = spec.groups, math.prod(positions)
    cols = view.transpose(order).reshape(n, g, -1, count)  # [n, g, c / g * taps, positions]
    weights = kernel.reshape(g, o // g, -1)  # [g, o / g, c / g * taps]
    if target.flags.c_contiguous and target.dtype == spec.work:
        np.matmul(weights, cols, out=target.reshape(n, g, o // g, count))
        return
    _finish(target, np.matmul(weights, cols).reshape(target.shape))


def _per_feature(spec: ConvPlan, out: np.ndarray, x: np.ndarray, kernel: np.ndarray) -> None:
    """Sum over the contracted features f of windows(x[f]) [batch * positions, taps] times
    kernel[f] [taps, out features]: one batched GEMM, then a sum over f."""
    nsp = len(spec.window)
    x = x.transpose(spec.x_perm).astype(spec.work, copy=False)  # [f, batch, spatial...]
    x = _dilate_and_pad(x, range(2, 2 + nsp), spec.window)
    kernel = kernel.transpose(spec.k_perm).astype(spec.work, copy=False)
    if spec.flips:
        kernel = np.flip(kernel, spec.flips)
    target = out.transpose(spec.out_perm)  # [batch, positions..., out features]
    taps = kernel.shape[2:] if spec.kernel_out_first else kernel.shape[1:-1]
    positions = target.shape[1 : 1 + nsp]
    if (
        any(x.shape[2 + i] < e for i, e in enumerate(spec.extents))
        or x.shape[0] == 0
        or x.shape[1] == 0
        or kernel.size == 0
        or out.size == 0
    ):
        out[...] = 0
        return
    f, n, o = x.shape[0], x.shape[1], target.shape[-1]
    view = _windows(x, 2, positions, spec.window, taps)  # [f, batch, positions..., taps...]
    cols = view.reshape(f, n * math.prod(positions), math.prod(taps))  # the one copy
    if spec.kernel_out_first:
        weights = kernel.reshape(f, o, -1).transpose(0, 2, 1)  # [f, taps, o]: BLAS transposes
    else:
        weights = kernel.reshape(f, -1, o)
    _finish(target, np.matmul(cols, weights).sum(axis=0).reshape(target.shape))


def _accumulating_gemm(work: np.dtype):
    """NumPy's BLAS gemm for float32/float64 (it accumulates into C in place), else None."""
    if work not in (np.float32, np.float64):
        return None
    from .host_blas import accumulating_gemm

    return accumulating_gemm()  # None: NumPy's matmul and an add instead


# The most bytes one im2col copy takes; windows larger than that are copied and multiplied in
# slices of their first spatial dim, the products summed (XLA's depthwise filter gradients
# have windows of thousands of taps over every output position: 12.7 GiB as one copy)
IM2COL_BYTES = 1 << 28


def _im2col(spec: ConvPlan, x: np.ndarray, kernel: np.ndarray, positions) -> np.ndarray:
    """[batch, positions..., out features] from one batched GEMM over copied windows; the
    contracted axes are (taps..., features), so the copy reads runs of a window row's taps
    times the features, contiguous in the channels-last input."""
    nsp = len(spec.window)
    view = _windows(
        x, 1, positions, spec.window, kernel.shape[:nsp]
    )  # [n, positions..., taps..., c]
    rows = max(view.size * view.itemsize // IM2COL_BYTES, 1)
    if rows == 1 or kernel.shape[0] == 1:
        return _im2col_gemm(spec, view, kernel, positions)
    step = max(kernel.shape[0] // rows, 1)
    total = None
    for first in range(0, kernel.shape[0], step):
        taps = slice(first, first + step)
        rows_of_taps = view[(slice(None),) * (1 + nsp) + (taps,)]
        part = _im2col_gemm(spec, rows_of_taps, kernel[taps], positions)
        total = part if total is None else np.add(total, part, out=total)
    return total


def _im2col_gemm(spec: ConvPlan, view: np.ndarray, kernel: np.ndarray, positions) -> np.ndarray:
    """One batched GEMM of the windows `view` [n, positions..., taps..., c] copied as rows."""
    nsp = len(spec.window)
    n, o = view.shape[0], kernel.shape[-1]
    count, depth = math.prod(positions), kernel.size // max(o, 1)
    g = spec.batch_groups if spec.batch_groups > 1 else spec.groups
    if spec.batch_groups > 1:  # batch element j * (n / g) + b pairs with output group j
        cols = view.reshape(g, n // g * count, depth)
        n //= g
    elif g == 1:
        cols = view.reshape(1, n * count, depth)
    else:  # [g, n * positions, K], group j's features
        axis = 1 + 2 * nsp
        grouped = view.reshape(view.shape[:axis] + (g, -1) + view.shape[axis + 1 :])
        cols = np.moveaxis(grouped, axis, 0).reshape(g, n * count, depth)
    weights = kernel.reshape(depth, g, o // g).transpose(1, 0, 2)  # [g, K, o / g]
    result = matmul(cols, weights, one_thread=spec.one_thread).reshape(
        (g, n) + tuple(positions) + (o // g,)
    )
    if g == 1:
        return result[0]
    return np.moveaxis(result, 0, -2).reshape((n,) + tuple(positions) + (o,))


def _windows(x: np.ndarray, first: int, positions, window, taps) -> np.ndarray:
    """A read-only view of every window of the C-contiguous `x`: its spatial dims (from axis
    `first`) become (positions..., taps...), each position `stride` apart and each tap
    `rhs_dilation` apart. One ndarray over x's buffer: sliding_window_view with its slicing
    and moveaxis cost 10-15 us per call, as much as a small convolution's GEMM."""
    nsp = len(window)
    strides = x.strides
    spatial = strides[first : first + nsp]
    view = np.ndarray(
        x.shape[:first] + tuple(positions) + tuple(taps) + x.shape[first + nsp :],
        x.dtype,
        buffer=x,
        strides=strides[:first]
        + tuple(s * wd.stride for s, wd in zip(spatial, window))
        + tuple(s * wd.rhs_dilation for s, wd in zip(spatial, window))
        + strides[first + nsp :],
    )
    view.flags.writeable = False
    return view


def _dilate_and_pad(x: np.ndarray, axes, window) -> np.ndarray:
    """Base dilation and edge padding (negative: cropping) of the spatial `axes`: one
    contiguous copy (none when the operand is contiguous and needs neither)."""
    shape, src, dst = list(x.shape), [slice(None)] * x.ndim, [slice(None)] * x.ndim
    plain = True
    for axis, wd in zip(axes, window):
        n = x.shape[axis]
        dilated = (n - 1) * wd.lhs_dilation + 1 if n else 0
        size = max(dilated + wd.padding_low + wd.padding_high, 0)
        # element k of the operand lands at low + k * dilation; keep those inside [0, size)
        low, step = wd.padding_low, wd.lhs_dilation
        first = 0 if low >= 0 else (-low + step - 1) // step
        last = min(n, (size - 1 - low) // step + 1) if size else 0
        last = max(last, first)
        start = low + first * step
        src[axis] = slice(first, last)
        dst[axis] = (
            slice(start, start + (last - first - 1) * step + 1, step)
            if last > first
            else slice(0, 0)
        )
        shape[axis] = size
        plain = plain and wd.lhs_dilation == 1 and wd.padding_low == 0 and wd.padding_high == 0
    if plain:
        return np.ascontiguousarray(x)
    padded = np.zeros(shape, x.dtype)
    padded[tuple(dst)] = x[tuple(src)]
    return padded
