"""Large f32 GEMMs on a second OpenBLAS started with another kernel set (gemm.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

from minixla.backends.cpu import gemm

ZEN4 = "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nflags\t\t: fpu sse2 avx2 avx512f avx512bw\n"
ZEN3 = "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nflags\t\t: fpu sse2 avx2\n"
INTEL = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nflags\t\t: fpu sse2 avx2 avx512f\n"


def test_cpu_name_knows_zen4_by_its_family_and_avx512():
    assert gemm.cpu_name(ZEN4) == "znver4"
    assert gemm.cpu_name(ZEN3) == ""
    assert gemm.cpu_name(INTEL) == ""
    assert gemm.cpu_name(ZEN4 + "\nvendor_id\t: GenuineIntel\n") == "znver4"  # first processor


def test_large_gemm_core_follows_the_cpu_and_the_environment(monkeypatch):
    monkeypatch.delenv("MINIXLA_LARGE_GEMM_CORETYPE", raising=False)
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    assert gemm.large_gemm_core("znver4") == "Haswell"
    assert gemm.large_gemm_core("") is None
    monkeypatch.setenv("OPENBLAS_CORETYPE", "SkylakeX")  # the user chose for every OpenBLAS
    assert gemm.large_gemm_core("znver4") is None
    monkeypatch.setenv("MINIXLA_LARGE_GEMM_CORETYPE", "Haswell")
    assert gemm.large_gemm_core("") == "Haswell"
    monkeypatch.setenv("MINIXLA_LARGE_GEMM_CORETYPE", "default")
    assert gemm.large_gemm_core("znver4") is None


def test_only_dots_that_run_on_one_thread_may_use_the_large_library(monkeypatch):
    # the large library has one thread: a threaded GEMM there would run at a single core's speed
    large = gemm.LargeGemm("lib.so", "Haswell", {("f32", "gemm"): "large_sgemm"}, {})
    blas = gemm.Blas("numpy.so", {}, 64, True, {}, large)
    monkeypatch.setattr(gemm, "_FOUND", [blas])
    assert gemm._large_allowed("f32", 1, 128, 128, 256) == 1  # 2^23 flops: one thread
    assert gemm._large_allowed("f32", 1, 128, 256, 256) == 0  # 2^24: two threads
    assert gemm._large_allowed("f32", 2, 128, 128, 256) == 0  # two as a whole batch
    assert gemm._large_allowed("f64", 1, 128, 128, 256) == 0  # f32 only
    monkeypatch.setattr(gemm, "_FOUND", [gemm.Blas("numpy.so", {}, 64, True, {}, None)])
    assert gemm._large_allowed("f32", 1, 128, 128, 256) == 0


_CHILD = textwrap.dedent(
    """
    import ctypes, json, sys
    import numpy as np
    import minixla
    from minixla.backends.cpu import gemm

    # (m, k, n, batch, b stored [n, k]): under and over the small path's limit, a GEMM with
    # few rows in column blocks, the transposed product, a batched dot
    cases = [(16, 64, 64, 1, False), (256, 256, 512, 1, False), (8, 256, 1024, 1, False),
             (32, 256, 1024, 1, True), (128, 96, 200, 3, True), (300, 257, 129, 1, False)]
    rng = np.random.default_rng(11)
    errors, sources = [], set()
    for m, k, n, batch, transposed in cases:
        lead = "" if batch == 1 else f"{batch},"
        dims = "" if batch == 1 else "lhs_batch_dims={0}, rhs_batch_dims={0}, "
        c = 1 if batch == 1 else 2
        rhs = f"f32[{lead}{n},{k}]" if transposed else f"f32[{lead}{k},{n}]"
        text = f'''HloModule m
    ENTRY e {{
      a = f32[{lead}{m},{k}] parameter(0)
      b = {rhs} parameter(1)
      ROOT d = f32[{lead}{m},{n}] dot(a, b), {dims}lhs_contracting_dims={{{c}}}, rhs_contracting_dims={{{c if transposed else c - 1}}}
    }}'''
        exe = minixla.compile(text, backend="cpu", passes=[])
        sources |= {s.source for s in exe.program.kernels.values()}
        a = rng.standard_normal((batch, m, k)).astype(np.float32)
        b = rng.standard_normal((batch, n, k) if transposed else (batch, k, n)).astype(np.float32)
        bb = b.transpose(0, 2, 1) if transposed else b
        want = np.matmul(a.astype(np.float64), bb.astype(np.float64))
        got = exe(a[0], b[0]) if batch == 1 else exe(a, b)
        errors.append(float(np.abs(got.reshape(want.shape) - want).max() / k))
    # the convolution thunk's products (host_blas.matmul) against NumPy's, odd layouts too
    from minixla.backends.cpu import host_blas

    x = rng.standard_normal((3, 200, 130)).astype(np.float32)
    w = rng.standard_normal((3, 130, 90)).astype(np.float32)
    for a, b in [(x, w), (x[0], w[0]), (x[:, ::2], w), (x.transpose(0, 2, 1)[:, :, :130], w), (x[:, :, :64], w[:, :64])]:
        want = np.matmul(a.astype(np.float64), b.astype(np.float64))
        errors.append(float(np.abs(host_blas.matmul(a, b, one_thread=True) - want).max() / a.shape[-1]))
        out = np.zeros(want.shape, np.float32)
        host_blas.matmul(a, b, out=out, one_thread=True)
        errors.append(float(np.abs(out - want).max() / a.shape[-1]))
    for taps, window, size in ((3, "size=3x3 pad=1_1x1_1", 34), (5, "size=5x5 stride=2x2 pad=2_2x2_2", 17)):
        text = f'''HloModule c
    ENTRY e {{
      x = f32[4,34,34,32] parameter(0)
      k = f32[{taps},{taps},32,48] parameter(1)
      ROOT y = f32[4,{size},{size},48] convolution(x, k), window={{{window}}}, dim_labels=b01f_01io->b01f
    }}'''
        args = [rng.standard_normal((4, 34, 34, 32)).astype(np.float32),
                rng.standard_normal((taps, taps, 32, 48)).astype(np.float32)]
        got = minixla.compile(text, backend="cpu")(*args)
        want = minixla.compile(text, backend="interpreter")(*args)
        errors.append(float(np.abs(got - want).max() / (32 * 25)))
    large = gemm.library().large
    core = None
    if large is not None:
        lib = ctypes.CDLL(large.path)
        fn = lib.scipy_openblas_get_corename
        fn.restype = ctypes.c_char_p
        core = fn().decode()
    print(json.dumps({"errors": errors, "core": core,
                      "calls_large": any("gemm_large(" in s for s in sources)}))
    """
)


def _run_child(cache: str, core: str) -> dict:
    env = dict(os.environ, MINIXLA_CACHE_DIR=cache, MINIXLA_LARGE_GEMM_CORETYPE=core)
    env.pop("OPENBLAS_CORETYPE", None)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(
    importlib.util.find_spec("scipy_openblas32") is None, reason="scipy-openblas32 not installed"
)
def test_large_gemms_run_haswell_kernels_cold_and_from_the_cache(tmp_path):
    if gemm.library() is None:
        pytest.skip("no cblas in this NumPy")
    with open("/proc/cpuinfo") as info:
        if "avx2" not in info.read(16384).split():
            pytest.skip("Haswell's kernels need AVX2")
    cold = _run_child(str(tmp_path), "Haswell")
    assert cold["core"] == "Haswell" and cold["calls_large"]
    assert max(cold["errors"]) < 2e-6
    # a new process loads the program library, which links the second OpenBLAS: it must be
    # started with its kernel set first, not by the loader with OpenBLAS's own choice
    warm = _run_child(str(tmp_path), "Haswell")
    assert warm == cold
    plain = _run_child(str(tmp_path), "default")
    assert plain["core"] is None and not plain["calls_large"]
    assert max(plain["errors"]) < 2e-6


_LOAD_CHILD = textwrap.dedent(
    """
    import ctypes, hashlib, json
    import numpy as np
    import minixla
    from minixla.backends.cpu import blas_threads, gemm

    text = '''HloModule loads
    ENTRY e {
      a = f32[512,384] parameter(0)
      b = f32[384,640] parameter(1)
      x = f32[4,20,20,64] parameter(2)
      k = f32[5,5,64,128] parameter(3)
      z = f32[8,16,16,512] parameter(4)
      w = f32[1,1,512,384] parameter(5)
      d = f32[512,640] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
      y = f32[4,10,10,128] convolution(x, k), window={size=5x5 stride=2x2 pad=2_2x2_2}, dim_labels=b01f_01io->b01f
      p = f32[8,16,16,384] convolution(z, w), window={size=1x1}, dim_labels=b01f_01io->b01f
      ROOT t = (f32[512,640], f32[4,10,10,128], f32[8,16,16,384]) tuple(d, y, p)
    }'''
    rng = np.random.default_rng(3)
    shapes = ((512, 384), (384, 640), (4, 20, 20, 64), (5, 5, 64, 128), (8, 16, 16, 512),
              (1, 1, 512, 384))
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    exe = minixla.compile(text, backend="cpu", cache=False)
    digests = []
    for idle in (1, blas_threads.cores()):  # a busy machine, then an idle one
        blas_threads.idle_cores = lambda: idle
        digests.append([hashlib.sha256(r.tobytes()).hexdigest() for r in exe(*args)])
    blas = gemm.library()
    threads = ctypes.CDLL(blas.large.path).scipy_openblas_get_num_threads()
    print(json.dumps({"digests": digests, "large_threads": threads,
                      "core": gemm._core(ctypes.CDLL(blas.path)).lower()}))
    """
)


@pytest.mark.skipif(
    importlib.util.find_spec("scipy_openblas32") is None, reason="scipy-openblas32 not installed"
)
def test_the_large_gemm_library_stays_on_one_thread_however_idle_the_machine():
    # threaded, its idle threads would spin on the cores NumPy's need, and Haswell's kernels
    # round differently for each thread count, which follows the load
    from minixla.backends.cpu import blas_threads

    if gemm.library() is None or blas_threads.cores() < 2:
        pytest.skip("needs cblas and two cores")
    with open("/proc/cpuinfo") as info:
        if "avx2" not in info.read(16384).split():
            pytest.skip("Haswell's kernels need AVX2")
    env = dict(os.environ, MINIXLA_LARGE_GEMM_CORETYPE="Haswell")
    env.pop("OPENBLAS_CORETYPE", None)
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_CHILD], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["large_threads"] == 1
    busy, idle = found["digests"]  # GEMM thread counts do not follow the load either
    assert busy == idle
