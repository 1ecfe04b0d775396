"""docs/adding-an-op.md's promise, kept: a new elementwise op is three edits (its row, its
reference semantics, its scalar rule), and every layer picks it up from there. The test makes
those three edits to a copy of the package and uses the op through each layer in a fresh
process, so a hard-coded list anywhere that misses the new op fails here."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import minixla

PACKAGE = Path(minixla.__file__).resolve().parent

# file -> (an existing line to insert after, the lines to insert; None: append at the end)
EDITS = {
    "ir/opcodes.py": (
        '    _unary("copy", EXACT, partials=("1",)),\n',
        '    _unary("square", kinds=NO_PRED, partials=("2 * x",)),\n',
    ),
    "reference/elementwise.py": (
        '    "copy": _copy,\n',
        '    "square": _unary("square", fp=np.square, ints=_int(np.square)),\n',
    ),
    "backends/codegen/scalar.py": (
        None,
        """

@rule("square")
def _square(ctx, instr, args):
    return f"({args[0]} * {args[0]})"
""",
    ),
}

USE_THE_OP = r"""
import importlib.util
import os
import warnings

import numpy as np
import minixla
from minixla.backends.cpu import FallbackWarning
from minixla.frontend import ops
from minixla.ir.opcodes import OPCODES
from minixla.testing import fuzz
from minixla.tools.docgen import ops_markdown
from minixla.transforms import autodiff, batching_rules
from minixla.transforms.ad_emit import T

CUDA_SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"

text = '''HloModule m
ENTRY e {
  x = f32[5] parameter(0)
  ROOT y = f32[5] square(x)
}
'''
module = minixla.parse_hlo_module(text)
assert "square(" in module.to_text()
x = np.array([-2.0, -0.5, 0.0, 1.5, 3.0], np.float32)
for backend, options in (("interpreter", {}), ("cpu", {"strict": True})):  # strict: native
    got = minixla.compile(text, backend=backend, **options)(x)
    np.testing.assert_array_equal(got, x * x)

square = lambda v: T(ops.Square(v.op))
grad = minixla.jit(minixla.grad(lambda v: square(v).sum()), backend="interpreter")(x)
np.testing.assert_allclose(grad, 2 * x)
with warnings.catch_warnings():
    warnings.simplefilter("error", FallbackWarning)  # the batched op runs natively too
    batched = minixla.jit(minixla.vmap(square), backend="cpu")(np.stack([x, -x]))
np.testing.assert_array_equal(batched, np.stack([x * x, x * x]))

assert "square" in fuzz.GENERATORS and "square" in autodiff.RULES
assert "square" in batching_rules.BATCHING_RULES
assert "| `square` |" in ops_markdown() and "`2 * x`" in ops_markdown()
assert OPCODES["square"].kinds == OPCODES["negate"].kinds
if CUDA_SIMULATOR:  # the cuda backend emits its kernels from the same scalar rules
    got = minixla.compile(text, backend="cuda", strict=True)(x)
    np.testing.assert_array_equal(np.asarray(got), x * x)
print("ok")
"""


def _edited_copy(root: Path) -> Path:
    package = root / "minixla"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    for relative, (anchor, insertion) in EDITS.items():
        path = package / relative
        source = path.read_text()
        if anchor is None:
            source += insertion
        else:
            assert source.count(anchor) == 1, f"{relative}: the anchor line moved: {anchor!r}"
            source = source.replace(anchor, anchor + insertion)
        path.write_text(source)
    return root


def test_a_new_elementwise_op_needs_three_files(tmp_path):
    root = _edited_copy(tmp_path / "src")
    env = dict(
        os.environ,
        PYTHONPATH=str(root),
        MINIXLA_CACHE_DIR=str(tmp_path / "cache"),
        PYTHONDONTWRITEBYTECODE="1",
    )
    if importlib.util.find_spec("numba_cuda") is not None:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(USE_THE_OP)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]
