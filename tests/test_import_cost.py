"""`import minixla` leaves the expensive optional pieces for later: ml_dtypes (its NumPy
registrations are most of the import's time) loads when a narrow type is first used, Numba when
a kernel is first compiled."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import minixla
    after_import = {name: name in sys.modules for name in ("ml_dtypes._finfo", "numba")}
    exe = minixla.compile(open(sys.argv[1]).read(), backend="interpreter")
    exe(*(np.ones(s, np.float32) for s in [(8, 16), (16, 32), (32,), (32, 4)]))
    after_f32 = "ml_dtypes._finfo" in sys.modules
    bf16 = minixla.compile(
        "HloModule b\\nENTRY e {\\n  x = bf16[2] parameter(0)\\n  ROOT y = bf16[2] add(x, x)\\n}",
        backend="interpreter",
    )(np.array([1.5, -2], minixla.numpy.bfloat16))
    print(json.dumps({"import": after_import, "f32": after_f32, "bf16": [float(v) for v in bf16],
                      "bf16_dtype": str(bf16.dtype)}))
""")


def test_narrow_types_and_numba_load_only_when_used():
    from pathlib import Path

    mlp = Path(__file__).parents[1] / "examples" / "mlp.hlo"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(mlp)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["import"] == {"ml_dtypes._finfo": False, "numba": False}
    assert seen["f32"] is False  # an f32 program never needs ml_dtypes
    assert seen["bf16"] == [3.0, -4.0] and seen["bf16_dtype"] == "bfloat16"
