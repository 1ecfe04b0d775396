"""`minixla.lax.linalg`: jax.lax.linalg's cholesky and triangular_solve, on HLO `cholesky` and
`triangular-solve`."""

from __future__ import annotations

from .eager import api
from .errors import FrontendShapeError
from .linalg_api import _conj, _inexact, _matrix, cholesky as _numpy_cholesky
from .numpy_api import broadcast_shapes, broadcast_to, multiply, add, cast
from .numpy_shape import swapaxes
from .ops_core import Op
from .tracer import Tracer


@api
def cholesky(x, symmetrize_input: bool = True) -> Tracer:
    """The lower Cholesky factor; with symmetrize_input, of (x + x^H) / 2."""
    (a,) = _inexact("cholesky", x)
    _matrix("cholesky", a)
    if symmetrize_input:
        a = multiply(add(a, _conj(swapaxes(a, -1, -2))), cast(0.5, a.dtype))
    return _numpy_cholesky(a)


@api
def triangular_solve(
    a,
    b,
    left_side: bool = False,
    lower: bool = False,
    transpose_a: bool = False,
    conjugate_a: bool = False,
    unit_diagonal: bool = False,
) -> Tracer:
    """jax.lax.linalg.triangular_solve: x with op(a) @ x = b (left_side) or x @ op(a) = b,
    where op transposes and/or conjugates a as asked; only a's `lower` triangle is read."""
    x, y = _inexact("triangular_solve", a, b)
    _matrix("triangular_solve", x)
    _matrix("triangular_solve", y, square=False)
    m = x.shape[-1]
    if y.shape[-2 if left_side else -1] != m:
        raise FrontendShapeError(
            f"triangular_solve: a of shape {x.shape} does not fit b of "
            f"shape {y.shape} (left_side={left_side})"
        )
    batch = broadcast_shapes(x.shape[:-2], y.shape[:-2])
    x, y = broadcast_to(x, batch + x.shape[-2:]), broadcast_to(y, batch + y.shape[-2:])
    if conjugate_a and not transpose_a:
        x = _conj(x)
    mode = ("ADJOINT" if conjugate_a else "TRANSPOSE") if transpose_a else "NO_TRANSPOSE"
    op = Op(
        "triangular-solve",
        [x.op, y.op],
        {
            "left_side": bool(left_side),
            "lower": bool(lower),
            "unit_diagonal": bool(unit_diagonal),
            "transpose_a": mode,
        },
    )
    return Tracer(op)


__all__ = ["cholesky", "triangular_solve"]
