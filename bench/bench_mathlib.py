"""Fused tanh chain on 4M float32: NumPy eager vs Numba+libm vs Numba+mathlib.

    out = tanh(x*a + b) * 0.5 + c*c

Run: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/bench_mathlib.py
"""

import math
import os
import sys
import time

import numpy as np
from numba import get_num_threads, njit, prange, set_num_threads

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from minixla.backends.cpu import mathlib  # noqa: E402

N, REPS = 4 * 1024 * 1024, 30
HALF = np.float32(0.5)  # a float32 constant keeps the chain in float32
tanh32 = mathlib.MATH_F32["tanh"]


def numpy_eager(x, a, b, c, out):
    np.multiply(np.tanh(x * a + b), HALF, out=out)
    out += c * c


@njit(parallel=True, fastmath=True)
def numba_libm(x, a, b, c, out):
    for i in prange(x.size):
        out[i] = math.tanh(x[i] * a[i] + b[i]) * HALF + c[i] * c[i]


@njit(parallel=True, fastmath=True)
def numba_mathlib(x, a, b, c, out):
    for i in prange(x.size):
        out[i] = tanh32(x[i] * a[i] + b[i]) * HALF + c[i] * c[i]


@njit(parallel=True, fastmath=mathlib.FASTMATH)
def apply_op(f, x, out):
    for i in prange(x.size):
        out[i] = f(x[i])


NUMPY_OPS = {
    "exponential": np.exp,
    "exponential-minus-one": np.expm1,
    "log": np.log,
    "log-plus-one": np.log1p,
    "tanh": np.tanh,
    "sine": np.sin,
    "cosine": np.cos,
    "tan": np.tan,
    "cbrt": np.cbrt,
    "sqrt": np.sqrt,
    "logistic": lambda x, out: np.divide(1, 1 + np.exp(-x), out=out),
}


def median_ms(fn, *args):
    fn(*args)  # warm up / compile
    times = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    BEST[fn] = 1e3 * min(times)  # the minimum shows less scheduler noise
    return 1e3 * float(np.median(times))


BEST = {}


def main():
    rng = np.random.default_rng(0)
    x, a, b, c = (rng.standard_normal(N).astype(np.float32) for _ in range(4))
    outs = {k: np.empty_like(x) for k in ("numpy", "libm", "mathlib")}
    threads = get_num_threads()
    print(f"out = tanh(x*a + b)*0.5 + c*c, N={N} float32, median of {REPS} runs")
    for nt in sorted({threads, 1}, reverse=True):
        set_num_threads(nt)
        t_np = median_ms(numpy_eager, x, a, b, c, outs["numpy"])
        t_libm = median_ms(numba_libm, x, a, b, c, outs["libm"])
        t_ml = median_ms(numba_mathlib, x, a, b, c, outs["mathlib"])
        print(f" numba threads={nt}:")
        b_np, b_libm, b_ml = BEST[numpy_eager], BEST[numba_libm], BEST[numba_mathlib]
        print(f"  numpy eager            {t_np:8.2f} ms   (min {b_np:7.2f})")
        print(
            f"  numba + math.tanh      {t_libm:8.2f} ms   (min {b_libm:7.2f})   "
            f"{t_np / t_libm:5.2f}x vs numpy"
        )
        print(
            f"  numba + mathlib tanh   {t_ml:8.2f} ms   (min {b_ml:7.2f})   "
            f"{t_np / t_ml:5.2f}x vs numpy, {t_libm / t_ml:5.2f}x vs math.tanh"
        )
    set_num_threads(threads)
    ref = np.tanh((x * a + b).astype(np.float64)) * 0.5 + c.astype(np.float64) ** 2
    print(
        "  max abs err vs float64: "
        + ", ".join(f"{k} {np.max(np.abs(o - ref)):.1e}" for k, o in outs.items())
    )
    print(f"single ops, |x| < 4: numpy ufunc vs mathlib in a prange loop ({threads} threads)")
    xs = (4 * x / np.abs(x).max()).astype(np.float32)
    for op, fn in mathlib.MATH_F32.items():
        if op in ("power", "atan2"):
            continue
        positive = op in ("log", "log-plus-one", "sqrt", "rsqrt")
        arg = np.abs(xs) + np.float32(1e-3) if positive else xs
        t_ml = median_ms(apply_op, fn, arg, outs["mathlib"])
        if op in NUMPY_OPS:
            t_np = median_ms(NUMPY_OPS[op], arg, outs["numpy"])
            print(
                f"  {op:22s} numpy {t_np:6.2f} ms   mathlib {t_ml:6.2f} ms   "
                f"{t_np / t_ml:5.2f}x  (min {BEST[NUMPY_OPS[op]]:5.2f} / {BEST[apply_op]:5.2f})"
            )
        else:
            print(f"  {op:22s} {'':18s}mathlib {t_ml:6.2f} ms {'':10s}(min {BEST[apply_op]:5.2f})")


if __name__ == "__main__":
    main()
