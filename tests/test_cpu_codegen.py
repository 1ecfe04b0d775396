"""FileCheck over the CPU backend's emitted sources: kernels and driver code, no compiling.

Emitting needs neither Numba's compiler nor a run, so these pin down the code generator's
decisions (loop structure, tiling, hoisting, semantics helpers, buffer use) cheaply.
"""

from __future__ import annotations

import numpy as np

import minixla
from minixla.backends.cpu import driver
from minixla.testing import check_hlo

ADD = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"


def emit(text: str, passes=None):
    module = minixla.parse_hlo_module(text)
    if passes is not None:
        from minixla.passes import make_pipeline, run_pipeline

        run_pipeline(make_pipeline(passes), module)
    return driver.build_program(module, {"parallel_threshold": 1 << 62})


def kernel_source(program, index: int = 0) -> str:
    return list(program.kernels.values())[index].source


def test_elementwise_fusion_is_one_flat_loop_with_typed_constants():
    program = emit("""
    HloModule m
    fused {
      x = f32[64,32] parameter(0)
      h = f32[64,32] broadcast(f32[] constant(0.5)), dimensions={}
      ROOT t = f32[64,32] tanh(multiply(x, h))
    }
    ENTRY main {
      x = f32[64,32] parameter(0)
      ROOT f = f32[64,32] fusion(x), kind=kLoop, calls=fused
    }""")
    check_hlo(
        kernel_source(program),
        """
        // CHECK: K0 = np.float32(float.fromhex('0x1.0000000000000p-1'))
        // CHECK: tanh_f32 = MATH_F32['tanh']
        // CHECK: def kernel(p0, o0):
        // CHECK-NEXT: for i0 in range(o0.shape[0]):
        // CHECK-NEXT: v{{[0-9]+}} = p0[i0]
        // CHECK: tanh_f32(
        // CHECK-NEXT: o0[i0] = v
    """,
    )
    check_hlo(
        program.source,
        """
        // CHECK: k0(p0.reshape(-1), v{{[0-9]+}}.reshape(-1))
    """,
    )


def test_transpose_is_tiled_and_integer_division_uses_the_xla_helper():
    program = emit("""
    HloModule m
    ENTRY main {
      x = s32[64,48] parameter(0)
      t = s32[48,64] transpose(x), dimensions={1,0}
      ROOT d = s32[48,64] divide(t, t)
    }""")
    check_hlo(
        kernel_source(program, 0),
        """
        // CHECK: for t0 in range(2):
        // CHECK-NEXT: for t1 in range(2):
        // CHECK-NEXT: for i0 in range(t0 * 32, min(t0 * 32 + 32, 48)):
        // CHECK-NEXT: for i1 in range(t1 * 32, min(t1 * 32 + 32, 64)):
        // CHECK-NEXT: p0[i1, i0]
    """,
    )
    check_hlo(
        kernel_source(program, 1),
        """
        // CHECK: np.int32(h.sdiv(
    """,
    )


def test_column_reduction_accumulates_along_the_minor_dim():
    program = emit(f"""
    HloModule m
    {ADD}
    ENTRY main {{
      x = f32[128,64] parameter(0)
      ROOT r = f32[64] reduce(x, f32[] constant(0)), dimensions={{0}}, to_apply=add
    }}""")
    check_hlo(
        kernel_source(program),
        """
        // CHECK: o0[i0] = v
        // CHECK: for i0 in range(128):
        // CHECK-NEXT: for i1 in range(64):
        // CHECK: v[[SUM:[0-9]+]] = np.float32(o0[i1] + v
        // CHECK-NEXT: o0[i1] = v[[SUM]]
    """,
    )


# A sum over the batch of exp(x) * w, as a gradient's.
COLUMN_SUM_OF_EXP = """
      x = f32[256,8,16] parameter(0)
      w = f32[8,16] parameter(1)
      e = f32[256,8,16] exponential(x)
      b = f32[256,8,16] broadcast(w), dimensions={1,2}
      m = f32[256,8,16] multiply(e, b)
      s = f32[8,16] reduce(m, f32[] constant(0)), dimensions={0}, to_apply=add"""

COLUMN_SUMS = f"""
    HloModule m
    {ADD}
    fused {{{COLUMN_SUM_OF_EXP}
      d = f32[256,8,16] divide(e, b)
      t = f32[8,16] reduce(d, f32[] constant(1)), dimensions={{0}}, to_apply=add
      ROOT r = (f32[8,16], f32[8,16]) tuple(s, t)
    }}
    ENTRY main {{
      x = f32[256,8,16] parameter(0)
      w = f32[8,16] parameter(1)
      ROOT f = (f32[8,16], f32[8,16]) fusion(x, w), kind=kInput, calls=fused
    }}"""


def test_column_reductions_of_one_fusion_share_one_walk_of_the_input():
    # a gradient's sums over the batch: walking the input along the reduced dim per output
    # read it at a stride of a whole row (a [4096, 32, 16] one: 11 ms, 2.8 in one walk)
    check_hlo(
        kernel_source(emit(COLUMN_SUMS)),
        """
        // CHECK: o0[i0, i1] = K
        // CHECK-NEXT: o1[i0, i1] = K
        // CHECK: for i0 in range(256):
        // CHECK-NEXT: for i1 in range(8):
        // CHECK-NEXT: for i2 in range(16):
        // CHECK: exponential_f32(
        // CHECK-NOT: exponential_f32(
        // CHECK: o0[i1, i2] = v
        // CHECK: o1[i1, i2] = v
        // CHECK-NOT: for
    """,
    )


def test_column_reductions_of_one_fusion_match_the_interpreter():
    import numpy as np

    rng = np.random.default_rng(0)
    args = [rng.standard_normal((256, 8, 16)).astype(np.float32), rng.uniform(1, 2, (8, 16))]
    args[1] = args[1].astype(np.float32)
    want = minixla.compile(COLUMN_SUMS, backend="interpreter")(*args)
    got = minixla.compile(COLUMN_SUMS, backend="cpu")(*args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5)


# The column sum also stores e and -e (a gradient's value that is summed and kept); q, of
# the sum's shape, gets a loop nest of its own.
COLUMN_SUMS_WITH_SIDES = f"""
    HloModule m
    {ADD}
    fused {{{COLUMN_SUM_OF_EXP}
      n = f32[256,8,16] negate(e)
      q = f32[8,16] multiply(w, w)
      ROOT r = (f32[8,16], f32[256,8,16], f32[256,8,16], f32[8,16]) tuple(s, e, n, q)
    }}
    ENTRY main {{
      x = f32[256,8,16] parameter(0)
      w = f32[8,16] parameter(1)
      ROOT f = (f32[8,16], f32[256,8,16], f32[256,8,16], f32[8,16]) fusion(x, w), kind=kInput, calls=fused
    }}"""


def test_column_reductions_store_their_side_outputs_in_the_same_walk():
    # one exponential per element, not one for the sum's walk and one for the stores
    check_hlo(
        kernel_source(emit(COLUMN_SUMS_WITH_SIDES)),
        """
        // CHECK: for i0 in range(256):
        // CHECK-NEXT: for i1 in range(8):
        // CHECK-NEXT: for i2 in range(16):
        // CHECK: v[[E:[0-9]+]] = exponential_f32(
        // CHECK-NOT: exponential_f32(
        // CHECK: o0[i1, i2] = v
        // CHECK: o1[i0, i1, i2] = v[[E]]
        // CHECK: v[[N:[0-9]+]] = (-v[[E]])
        // CHECK-NEXT: o2[i0, i1, i2] = v[[N]]
    """,
    )
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((256, 8, 16)).astype(np.float32)]
    args.append(rng.uniform(1, 2, (8, 16)).astype(np.float32))
    want = minixla.compile(COLUMN_SUMS_WITH_SIDES, backend="interpreter")(*args)
    got = minixla.compile(COLUMN_SUMS_WITH_SIDES, backend="cpu")(*args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5)


def test_reduction_with_side_output_shares_one_nest():
    program = emit(f"""
    HloModule m
    {ADD}
    fused {{
      x = f32[16,32] parameter(0)
      e = f32[16,32] exponential(x)
      s = f32[16] reduce(e, f32[] constant(0)), dimensions={{1}}, to_apply=add
      ROOT t = (f32[16], f32[16,32]) tuple(s, e)
    }}
    ENTRY main {{
      x = f32[16,32] parameter(0)
      ROOT f = (f32[16], f32[16,32]) fusion(x), kind=kInput, calls=fused
    }}""")
    check_hlo(
        kernel_source(program),
        """
        // CHECK: fastmath={'contract', 'reassoc'}
        // CHECK: def kernel(p0, o0, o1):
        // CHECK-NEXT: for i0 in range(16):
        // CHECK-NEXT: acc{{[0-9]+}} = K0
        // CHECK-NEXT: for i1 in range(32):
        // CHECK: exponential_f32(
        // CHECK: o1[i0, i1] = v
        // CHECK: o0[i0] = acc
    """,
    )


def test_temporaries_use_the_arena_and_results_are_fresh():
    program = emit(
        """
    HloModule m
    ENTRY main {
      x = f32[8] parameter(0)
      y = f32[8] exp(x)
      ROOT z = f32[8] log(y)
    }""".replace("exp(", "exponential(")
    )
    check_hlo(
        program.source,
        """
        // CHECK: def entry_{{[0-9]+}}(p0):
        // CHECK: k0(p0, a[[TMP:[0-9]+]])
        // CHECK: v[[OUT:[0-9]+]] = np.empty((8,), dt_f32)
        // CHECK: k1(a[[TMP]], v[[OUT]])
        // CHECK: return v[[OUT]]
    """,
    )
    assert program.arena_bytes == 64


def test_max_and_nan_semantics_use_llvm_intrinsics():
    program = emit("""
    HloModule m
    ENTRY main {
      a = f32[4] parameter(0)
      b = f32[4] parameter(1)
      ROOT m = f32[4] maximum(a, b)
    }""")
    check_hlo(kernel_source(program), "// CHECK: h.fmax(")
    from minixla.backends.cpu import helpers

    assert "llvm.maximum" in open(helpers.__file__).read()


IN_PLACE = """
HloModule m
ENTRY main {
  x = f32[16,32] parameter(0)
  w = f32[32,32] parameter(1)
  b = f32[32] parameter(2)
  d = f32[16,32] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  s = f32[16,32] add(d, f32[16,32] broadcast(b), dimensions={1})
  e = f32[16,32] erf(s)
  ROOT r = f32[16,32] dot(e, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""


def test_a_kernel_writing_over_its_operand_gets_one_array():
    # buffer assignment puts the fusion's output on the dot's dead buffer; passing the same
    # memory twice would send LLVM's vectorized loop to its scalar fallback
    from minixla.backends.cpu import pipeline
    from minixla.passes import run_pipeline

    module = minixla.parse_hlo_module(IN_PLACE)
    run_pipeline(pipeline(), module)
    program = driver.build_program(module, {"parallel_threshold": 1 << 62})
    check_hlo(
        program.source,
        """
        // CHECK: t{{[0-9]+}}(a{{[0-9]+}}, p0, p1)
        // CHECK: k{{[0-9]+}}(p2, a[[OUT:[0-9]+]])
        // CHECK: t{{[0-9]+}}(v{{[0-9]+}}, a[[OUT]], p1)
    """,
    )
    (fusion,) = [
        s.source for s in program.kernels.values() if "Kernel for a fused computation" in s.source
    ]
    check_hlo(
        fusion,
        """
        // CHECK: def kernel(p1, o0):
        // CHECK: = o0[i0, i1]
        // CHECK: o0[i0, i1] =
    """,
    )


def test_a_reduce_over_several_dims_sums_its_innermost_loop_apart():
    # the innermost loop starts its own accumulator at the identity (LLVM vectorizes only
    # such loops) and folds it into the running one, which starts at the init value
    program = emit(f"""
    HloModule m
    {ADD}
    ENTRY main {{
      x = f32[8,16,4,4] parameter(0)
      ROOT r = f32[16] reduce(x, f32[] constant(5)), dimensions={{0,2,3}}, to_apply=add
    }}""")
    check_hlo(
        kernel_source(program),
        """
        // CHECK: for i0 in range(16):
        // CHECK-NEXT: acc[[RUN:[0-9]+]] = v
        // CHECK-NEXT: for r{{[0-9]+}} in range(8):
        // CHECK-NEXT: for r{{[0-9]+}} in range(4):
        // CHECK-NEXT: acc[[ROW:[0-9]+]] = K0
        // CHECK-NEXT: for r{{[0-9]+}} in range(4):
        // CHECK: acc[[ROW]] = v
        // CHECK: v[[SUM:[0-9]+]] = np.float32(acc[[RUN]] + acc[[ROW]])
        // CHECK-NEXT: acc[[RUN]] = v[[SUM]]
    """,
    )


def test_split_reductions_keep_init_values_nan_and_integer_extremes():
    import numpy as np

    for dtype, op, init, values in [
        ("f32", "maximum", "-5", np.array([[1.0, np.nan], [-7.0, 2.0]], np.float32)),
        ("f32", "minimum", "5", np.array([[1.0, 3.0], [-7.0, 2.0]], np.float32)),
        ("s32", "maximum", "-2147483648", np.array([[-(2**31), -3], [-9, -(2**31)]], np.int32)),
        ("s32", "multiply", "3", np.array([[2, -1], [5, 7]], np.int32)),
        ("pred", "and", "true", np.array([[True, True], [False, True]])),
        ("pred", "or", "false", np.array([[False, False], [False, True]])),
    ]:
        text = f"""
        HloModule m
        f {{
          a = {dtype}[] parameter(0)
          b = {dtype}[] parameter(1)
          ROOT c = {dtype}[] {op}(a, b)
        }}
        ENTRY main {{
          x = {dtype}[3,2,2] parameter(0)
          ROOT r = {dtype}[3] reduce(x, {dtype}[] constant({init})), dimensions={{1,2}}, to_apply=f
        }}"""
        x = np.stack([values, values[::-1], values.T])
        want = minixla.compile(text, backend="interpreter")(x)
        np.testing.assert_array_equal(minixla.compile(text, backend="cpu")(x), want)
