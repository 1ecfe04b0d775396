"""examples/pallas_kernels.py: every kernel against NumPy, compiled for cpu (each grid one
native function) and interpreted."""

import importlib.util
import pathlib

import numpy as np
import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "pallas_kernels.py"


def _load():
    spec = importlib.util.spec_from_file_location("example_pallas_kernels", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "options", [{"backend": "cpu"}, {"interpret": True}], ids=["cpu", "interpret"]
)
def test_example_kernels_match_numpy(options):
    from minixla.runtime.metrics import metrics

    before = metrics().get("pallas.native.cpu", {}).get("count", 0)
    results = _load().main(verbose=False, **options)
    assert len(results) == 7
    native = metrics().get("pallas.native.cpu", {}).get("count", 0) - before
    assert native == (7 if options.get("backend") == "cpu" else 0)
    for name, (got, want) in results.items():
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=name)
