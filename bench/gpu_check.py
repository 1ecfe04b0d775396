#!/usr/bin/env python
"""GPU check: minixla's cuda backend on a real NVIDIA GPU, in one run of a few minutes.

    python bench/gpu_check.py [--skip-corpus] [--skip-bench] [--only NAME] [--repeat N]
        [--budget SECONDS]

1. environment: Python, NumPy, Numba, numba-cuda, the GPU, whether CuPy / JAX-on-GPU are there;
2. the conformance corpus (../shared/conformance) compiled and run on `cuda`, each output
   compared with XLA's under the case's tolerances (the corpus's own run.py), with the host
   fallbacks each case used;
3. the benchmark workloads (bench/workloads.py) at full size: compile time, the median run
   time with inputs and results on the device (`device_results=True`, synchronized), the time
   with host copies, and CuPy's and JAX's times for the same math when they are installed,
   each result checked against NumPy.

It installs nothing and needs: a CUDA GPU with its driver, numba-cuda with a CUDA toolkit it can
find (e.g. `pip install "minixla[cuda]" "numba-cuda[cu12]"`, chosen before the run), optionally
CuPy and JAX with CUDA. Missing pieces are reported and skipped; work stops when the budget
(default 420 s) is spent. Exit status: 0 when everything that ran passed, 1 on failures,
2 when the cuda backend is not available.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]
from run_benchmarks import NumpyOps, jax_ops
from workloads import WORKLOADS

START = time.perf_counter()
# numba-cuda warns about every small grid; the corpus is made of small grids.
warnings.filterwarnings("ignore", message=".*under-utilization.*")


def elapsed() -> float:
    return time.perf_counter() - START


def version(module: str) -> str:
    if importlib.util.find_spec(module) is None:
        return "not installed"
    try:
        return getattr(__import__(module), "__version__", "installed")
    except Exception as exc:  # noqa: BLE001 - report, do not stop
        return f"broken ({type(exc).__name__}: {exc})"


def environment():
    import minixla

    print(
        f"python {platform.python_version()}, numpy {np.__version__}, numba "
        f"{version('numba')}, numba-cuda {version('numba_cuda')}, cupy {version('cupy')}, "
        f"jax {version('jax')}"
    )
    status = minixla.backends.available().get("cuda")
    if status is not True:
        print(f"cuda backend not available: {status}")
        return False
    from numba import cuda

    device = cuda.get_current_device()
    name = getattr(device, "name", "numba's CUDA simulator (not a GPU)")
    name = name.decode() if isinstance(name, bytes) else name
    print(f"GPU: {name}, compute capability {device.compute_capability}")
    try:  # one tiny kernel first: a missing toolkit (NVVM) fails here, once, with its reason
        exe = minixla.compile(
            "HloModule smoke\nENTRY e {\n  x = f32[4] parameter(0)\n"
            "  ROOT y = f32[4] add(x, x)\n}\n",
            backend="cuda",
        )
        assert list(exe(np.arange(4, dtype=np.float32))) == [0, 2, 4, 6]
    except Exception as exc:  # noqa: BLE001
        print(
            f"a first CUDA kernel does not compile or run: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}\n(is a CUDA toolkit installed "
            f"where numba-cuda finds it, e.g. numba-cuda[cu12]?)"
        )
        return False
    return True


# ---- the conformance corpus ---------------------------------------------------------------------


def run_corpus(budget: float) -> tuple[int, int]:
    import ml_dtypes
    from conformance_paths import CONFORMANCE, case_dirs

    import minixla

    cases = case_dirs()
    if not cases:
        print(f"conformance corpus not found at {CONFORMANCE}: skipped")
        return 0, 0
    spec = importlib.util.spec_from_file_location("conformance_run", CONFORMANCE / "run.py")
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    passed = failed = 0
    print(f"\n== conformance corpus: {len(cases)} cases on cuda ==")
    for case in cases:
        if elapsed() > budget:
            print(f"budget spent: {len(cases) - passed - failed} cases not run")
            break
        start = time.perf_counter()
        try:
            meta = json.loads((case / "meta.json").read_text())
            data = np.load(case / "data.npz")
            args = [data[f"arg{i}"] for i in range(meta["num_args"])]
            args = [
                a.view(ml_dtypes.bfloat16) if f"arg{i}" in meta.get("bf16_args", []) else a
                for i, a in enumerate(args)
            ]
            exe = minixla.compile((case / "module.hlo").read_text(), backend="cuda")
            outputs = runner.flatten_result(exe(*args))
            problems = [
                runner.compare_output(
                    f"out{i}",
                    got,
                    data[f"out{i}"],
                    f"out{i}" in meta.get("bf16_outs", []),
                    meta["rtol"],
                    meta["atol"],
                )
                for i, got in enumerate(outputs)
            ]
            problems = [p for p in problems if p]
            if len(outputs) != meta["num_outputs"]:
                problems.append(f"{len(outputs)} outputs, expected {meta['num_outputs']}")
            fallbacks = ", ".join(f"{op} x{n}" for op, n in exe.program.fallbacks.items())
            verdict = "ok" if not problems else "FAIL " + "; ".join(problems)
        except Exception as exc:  # noqa: BLE001 - one case must not stop the check
            fallbacks, verdict = "", f"ERROR {type(exc).__name__}: {str(exc).splitlines()[0]}"
            traceback.print_exc(limit=3)
        ok = verdict == "ok"
        passed, failed = passed + ok, failed + (not ok)
        print(
            f"  {case.name:34s} {time.perf_counter() - start:6.2f}s  {verdict}"
            + (f"  [host: {fallbacks}]" if fallbacks else "")
        )
    print(f"corpus: {passed} passed, {failed} failed")
    return passed, failed


# ---- benchmark workloads ------------------------------------------------------------------------


def cupy_ops():
    import cupy as cp

    if cp.cuda.runtime.getDeviceCount() == 0:
        raise ImportError("CuPy sees no GPU")

    class CupyOps(NumpyOps):
        name = "cupy"
        tanh, exp, maximum = staticmethod(cp.tanh), staticmethod(cp.exp), staticmethod(cp.maximum)
        minimum, matmul = staticmethod(cp.minimum), staticmethod(cp.matmul)
        sum = staticmethod(lambda x, axis, keepdims=False: cp.sum(x, axis=axis, keepdims=keepdims))
        max = staticmethod(lambda x, axis, keepdims=False: cp.max(x, axis=axis, keepdims=keepdims))
        rsqrt = staticmethod(lambda x: 1 / cp.sqrt(x))
        swap_last = staticmethod(lambda x: cp.swapaxes(x, -1, -2))

    return CupyOps


def median_ms(fn, repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def bench_minixla(text, inputs, repeat):
    from numba import cuda

    import minixla

    start = time.perf_counter()
    exe = minixla.compile(text, backend="cuda", device_results=True)
    compile_s = time.perf_counter() - start
    device_inputs = [cuda.to_device(x) for x in inputs]

    def resident():
        exe(*device_inputs)
        cuda.synchronize()

    host = minixla.compile(text, backend="cuda")
    result = host(*inputs)
    return {
        "compile": compile_s,
        "device": median_ms(resident, repeat),
        "host": median_ms(lambda: host(*inputs), repeat),
        "result": result,
        "kernels": len(exe.program.kernels),
        "fallbacks": dict(exe.program.fallbacks),
    }


def bench_library(make_ops, ref, inputs, repeat):
    """(milliseconds, result as NumPy), or (None, why not)."""
    try:
        ops = make_ops()
        if ops.name == "jax":
            import jax

            if jax.default_backend() != "gpu":
                return None, f"JAX runs on {jax.default_backend()}"
            args = [jax.device_put(x) for x in inputs]
            fn = jax.jit(lambda *a: ref(ops, *a))
            run = lambda: fn(*args).block_until_ready()
            to_host = lambda r: np.asarray(r)
        else:
            import cupy as cp

            args = [cp.asarray(x) for x in inputs]
            run = lambda: (ref(ops, *args), cp.cuda.Device().synchronize())[0]
            to_host = cp.asnumpy
        return median_ms(run, repeat), to_host(run())
    except Exception as exc:  # noqa: BLE001 - a missing or broken library is reported, not fatal
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def close(got, want) -> bool:
    return got is not None and np.allclose(got, want, rtol=2e-3, atol=2e-3)


def run_benchmarks(names, repeat: int, budget: float) -> int:
    print("\n== benchmark workloads, full size ==")
    header = [
        "workload",
        "compile s",
        "minixla ms",
        "incl. copies ms",
        "cupy ms",
        "jax ms",
        "kernels",
        "host fallbacks",
        "ok",
    ]
    rows, failures, notes = [], 0, set()
    rng = np.random.default_rng(0)
    for name, (text, make_inputs, ref) in WORKLOADS.items():
        if names and not any(n in name for n in names):
            continue
        if elapsed() > budget:
            print(f"budget spent: {name} and later workloads not run")
            break
        inputs = make_inputs(rng)
        want = ref(NumpyOps, *inputs)
        try:
            mine = bench_minixla(text, inputs, repeat)
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc(limit=3)
            rows.append([name, "-", f"ERROR {type(exc).__name__}", "", "", "", "", "", "no"])
            failures += 1
            continue
        cells = []
        for make_ops in (cupy_ops, jax_ops):
            ms, result = bench_library(make_ops, ref, inputs, repeat)
            if ms is None:
                notes.add(f"{make_ops.__name__.replace('_ops', '')}: {result}")
                cells.append("n/a")
            else:
                cells.append(f"{ms:.3f}" + ("" if close(result, want) else " (wrong!)"))
        ok = close(mine["result"], want)
        failures += not ok
        fallbacks = ", ".join(f"{k} x{v}" for k, v in mine["fallbacks"].items()) or "-"
        rows.append(
            [
                name,
                f"{mine['compile']:.2f}",
                f"{mine['device']:.3f}",
                f"{mine['host']:.3f}",
                *cells,
                str(mine["kernels"]),
                fallbacks,
                "yes" if ok else "NO",
            ]
        )
        print(f"  {name}: {rows[-1][2]} ms on device, {rows[-1][3]} ms with copies")
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths]] + rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths)) + " |")
    for note in sorted(notes):
        print(f"note: {note}")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-corpus", action="store_true")
    parser.add_argument("--skip-bench", action="store_true")
    parser.add_argument("--only", action="append", default=[], help="workload name filter")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--budget", type=float, default=420.0, help="seconds before stopping")
    args = parser.parse_args()
    try:
        if not environment():
            return 2
    except Exception as exc:  # noqa: BLE001 - e.g. a driver/toolkit mismatch
        print(f"cannot start CUDA: {type(exc).__name__}: {exc}")
        return 2
    failures = 0
    if not args.skip_corpus:
        failures += run_corpus(args.budget * 0.6 if not args.skip_bench else args.budget)[1]
    if not args.skip_bench:
        failures += run_benchmarks(args.only, args.repeat, args.budget)
    print(f"\ndone in {elapsed():.0f} s: {'all passed' if not failures else f'{failures} failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
