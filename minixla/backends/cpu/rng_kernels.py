"""rng-bit-generator kernels: XLA's Philox and ThreeFry generators, bit for bit."""

from __future__ import annotations

import math

from .kernel_source import OpSource
from .kernels import KernelSpec
from ..codegen.scalar import NotEmittable, kernel_type


def rng_bit_generator(instr) -> KernelSpec:
    """XLA's Philox generator (rng_default, rng_philox) on a u64 state: block b encrypts the
    128-bit counter (state[1], state[2]) + b with key state[0]; 32-bit outputs take the four
    words of each block in order, 64-bit outputs two words each. The new state advances the
    counter by the blocks used. Other algorithms and states are not emittable."""
    from ..codegen.scalar import BITS

    algorithm = str(instr.attrs.get("algorithm", "rng_default"))
    state, data = instr.shape.tuple_shapes
    if algorithm == "rng_three_fry":
        return _threefry(instr)
    if (
        algorithm not in ("rng_default", "rng_philox")
        or state.dtype != "u64"
        or instr.operand(0).shape.dtype != "u64"
        or state.numel() < 2
        or data.dtype not in BITS
        or data.dtype in ("pred", "bf16")
    ):
        raise NotEmittable(f"rng-bit-generator {algorithm} on {state.dtype} -> {data.dtype}")
    src = OpSource(instr)
    words, count, width = state.numel(), data.numel(), BITS[data.dtype]
    bits = 64 if width == 64 else 32
    blocks = -(-count * (2 if bits == 64 else 1) // 4)
    u64 = "np.uint64"
    src.line(f"mask = {u64}(0xFFFFFFFF)")
    src.line(f"shift = {u64}(32)")
    src.line("key = p0[0]")
    src.line("low = p0[1]")
    src.line(f"high = p0[{2 if words >= 3 else 0}]")
    src.line("k0 = key & mask")
    src.line("k1 = key >> shift")
    src.open("b", blocks)
    src.line(f"cl = low + {u64}(b)")
    src.line(f"ch = high + {u64}(1) if cl < low else high")
    src.line(
        "r0, r1, r2, r3 = h.philox4x32(cl & mask, cl >> shift, ch & mask, ch >> shift, k0, k1)"
    )
    if bits == 32:
        pieces = [(f"4 * b + {j}", f"r{j}") for j in range(4)]
    else:
        pieces = [("2 * b", "r0 | (r1 << shift)"), ("2 * b + 1", "r2 | (r3 << shift)")]
    unsigned = f"np.uint{width}"
    for at, word in pieces:
        src.line(f"if {at} < {count}:")
        value = f"{unsigned}({word} & {u64}({(1 << width) - 1}))" if width < 64 else word
        if data.dtype != f"u{width}":
            value = f"h.bitcast({value}, {kernel_type(data.dtype)})"
        src.line(f"    o1[{at}] = {value}")
    src.close()
    src.open("w", words)
    src.line("o0[w] = p0[w]")
    src.close()
    src.line(f"new_low = low + {u64}({blocks})")
    src.line("o0[1] = new_low")
    if words >= 3:
        src.line(f"o0[2] = high + {u64}(1) if new_low < low else high")
    spec = src.spec()
    spec.flat, spec.ndims = True, [1] * len(spec.ndims)
    spec.kid = spec.content_id("flat")
    return spec


def _threefry(instr) -> KernelSpec:
    """XLA's ThreeFry generator: counter state[1] + n encrypted with key state[0]. 64-bit
    outputs take both words of counter n (row-major position n); 32-bit outputs split one dim
    (the first even one, else the largest) in halves: counter n gives the two neighbours
    2h and 2h + 1 along it."""
    from ..codegen.scalar import BITS

    state, data = instr.shape.tuple_shapes
    if (
        state.dtype != "u64"
        or instr.operand(0).shape.dtype != "u64"
        or state.numel() < 2
        or data.dtype not in BITS
        or data.dtype in ("pred", "bf16")
    ):
        raise NotEmittable(f"rng-bit-generator rng_three_fry on {state.dtype} -> {data.dtype}")
    src = OpSource(instr)
    dims, width = list(data.dims), BITS[data.dtype]
    u64 = "np.uint64"
    src.line(f"mask = {u64}(0xFFFFFFFF)")
    src.line("key = p0[0]")
    src.line("counter = p0[1]")
    src.line("k0 = key & mask")
    src.line(f"k1 = key >> {u64}(32)")
    split = None
    if width == 64:
        loop_dims = dims
    elif not dims:
        loop_dims = []
    else:
        even = [i for i, d in enumerate(dims) if d % 2 == 0]
        split = even[0] if even else dims.index(max(dims))
        loop_dims = dims[:split] + [-(-dims[split] // 2)] + dims[split + 1 :]
    index = [f"i{d}" for d in range(len(loop_dims))]
    for d, n in enumerate(loop_dims):
        src.open(index[d], n)
    terms, stride = [], 1
    for d in reversed(range(len(loop_dims))):
        terms.append(f"{index[d]} * {stride}")
        stride *= loop_dims[d]
    flat = " + ".join(terms) or "0"
    src.line(f"c = counter + {u64}({flat})")
    src.line(f"x0, x1 = h.threefry2x32(c & mask, c >> {u64}(32), k0, k1)")

    def store(at, word):
        value = f"np.uint{width}({word} & {u64}({(1 << width) - 1}))" if width < 64 else word
        if data.dtype != f"u{width}":
            value = f"h.bitcast({value}, {kernel_type(data.dtype)})"
        src.line(f"o1[{', '.join(at) or '0'}] = {value}")

    if width == 64:
        store(index, f"x0 | (x1 << {u64}(32))")
    elif split is None:
        store([], "x0")
    else:
        for word in (0, 1):
            at = list(index)
            at[split] = f"2 * {index[split]} + {word}"
            if dims[split] % 2 and word == 1:
                src.line(f"if 2 * {index[split]} + 1 < {dims[split]}:")
                src.w.depth += 1
            store(at, f"x{word}")
            if dims[split] % 2 and word == 1:
                src.w.depth -= 1
    src.close(len(loop_dims))
    src.open("w", state.numel())
    src.line("o0[w] = p0[w]")
    src.close()
    src.line(f"o0[1] = counter + {u64}({math.prod(loop_dims)})")
    return src.spec()
