"""input_output_alias between an output and a parameter of different shapes: XLA's default
verifier allows it (it compares byte sizes only when layout-sensitive). Buffer assignment
aliases only buffers of one byte size; the cpu driver writes an output of another shape as a
view of the donated argument's bytes, and refuses nothing it can run. Never a wrong answer."""

import numpy as np
import pytest

import minixla
from minixla.errors import MinixlaError

TRANSPOSED = """HloModule m, input_output_alias={ {}: (0, {}, %s) }
ENTRY e {
  p = f32[2,3] parameter(0)
  ROOT t = f32[3,2] transpose(negate(p)), dimensions={1,0}
}
"""

SMALLER = """HloModule m, input_output_alias={ {}: (0, {}, %s) }
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[2,3] parameter(0)
  ROOT r = f32[3] reduce(p, f32[] constant(0)), dimensions={0}, to_apply=add
}
"""


def test_both_verify():
    for text in (TRANSPOSED, SMALLER):
        for kind in ("may-alias", "must-alias"):
            minixla.parse_hlo_module(text % kind)
    with pytest.raises(MinixlaError, match="only arrays alias"):
        minixla.parse_hlo_module("""HloModule m, input_output_alias={ {}: (0, {}) }
ENTRY e {
  p = (f32[2]) parameter(0)
  ROOT t = (f32[2]) tuple(get-tuple-element(p), index=0)
}
""")


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_an_output_of_another_shape_and_the_same_byte_size_comes_back_right(backend):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    donated = x.copy()
    got = minixla.compile(TRANSPOSED % "may-alias", backend)(donated)
    np.testing.assert_array_equal(got, -x.T)
    assert got.shape == (3, 2)
    if backend == "cpu":  # written into the donated memory, which the caller gives up
        assert np.may_share_memory(got, donated) and not donated.flags.writeable


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_a_may_alias_of_another_byte_size_is_not_taken(backend):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    donated = x.copy()
    got = minixla.compile(SMALLER % "may-alias", backend)(donated)
    np.testing.assert_array_equal(got, x.sum(0))
    assert not np.may_share_memory(got, donated)


def test_a_must_alias_of_another_byte_size_is_refused_at_compile():
    with pytest.raises(MinixlaError, match="their sizes differ"):
        minixla.compile(SMALLER % "must-alias", "cpu")
