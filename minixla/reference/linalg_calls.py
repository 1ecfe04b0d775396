"""The `minixla_linalg_*` custom-call targets behind `minixla.numpy.linalg`: one table, each
target a NumPy (LAPACK) routine, registered for the interpreter, cpu and cuda (cuda through a
host copy).

Every routine is batched over leading dims, as numpy.linalg is. `backend_config` carries the
routine's options as `key=value` pairs separated by commas (`full_matrices=1`); an unknown key
is an error. Results are cast to the instruction's declared dtypes, so a float32 program stays
float32 whatever precision LAPACK used.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .custom_call import CustomCallError, register_custom_call


def _options(target: str, config: str, allowed: dict[str, str]) -> dict[str, str]:
    options = dict(allowed)
    for item in filter(None, (p.strip() for p in config.split(","))):
        key, _, value = item.partition("=")
        if key not in allowed:
            raise CustomCallError(
                f"custom-call {target!r}: unknown option {key!r} in "
                f"backend_config {config!r} (known: {sorted(allowed)})"
            )
        options[key] = value
    return options


def _solve(a, b, _):
    return np.linalg.solve(a, b)


def _inv(a, _):
    return np.linalg.inv(a)


def _det(a, _):
    return np.linalg.det(a)


def _slogdet(a, _):
    sign, logabsdet = np.linalg.slogdet(a)
    return sign, logabsdet


def _qr(a, options):
    q, r = np.linalg.qr(a, mode="complete" if options["full_matrices"] == "1" else "reduced")
    return q, r


def _eigh(a, options):
    w, v = np.linalg.eigh(a, UPLO="L" if options["lower"] == "1" else "U")
    return w, v


def _svd(a, options):
    if options["compute_uv"] != "1":
        return np.linalg.svd(a, compute_uv=False)
    u, s, vh = np.linalg.svd(a, full_matrices=options["full_matrices"] == "1")
    return u, s, vh


# target suffix -> (routine(*operands, options), options with their defaults)
LINALG_CALLS: dict[str, tuple[Callable, dict[str, str]]] = {
    "solve": (_solve, {}),
    "inv": (_inv, {}),
    "det": (_det, {}),
    "slogdet": (_slogdet, {}),
    "qr": (_qr, {"full_matrices": "0"}),
    "eigh": (_eigh, {"lower": "1"}),
    "svd": (_svd, {"full_matrices": "1", "compute_uv": "1"}),
}


def target_name(op: str) -> str:
    return f"minixla_linalg_{op}"


def batches_over_leading_dims(target: str) -> bool:
    """Whether a custom-call target maps over its operands' leading dims (so vmap can put the
    batch there): true for every routine in the table."""
    prefix = target_name("")
    return (
        isinstance(target, str)
        and target.startswith(prefix)
        and target[len(prefix) :] in LINALG_CALLS
    )


def _leaf_dtypes(shape) -> list[np.dtype]:
    leaves = shape.tuple_shapes if shape.is_tuple else (shape,)
    return [np.dtype(leaf.numpy_dtype) for leaf in leaves]


def _run(target: str, routine: Callable, allowed: dict, operands, config: str, dtypes):
    options = _options(target, config, allowed)
    with np.errstate(all="ignore"):
        try:
            result = routine(*operands, options)
        except np.linalg.LinAlgError:
            # a singular or non-convergent input gives NaN, as XLA's LAPACK calls do
            result = _nan_like(dtypes, operands, routine, options)
    values = result if isinstance(result, tuple) else (result,)
    cast = tuple(np.array(v, dtype=d, order="C") for v, d in zip(values, dtypes))
    return cast if isinstance(result, tuple) else cast[0]


def _nan_like(dtypes, operands, routine, options):
    """Shapes of a routine's results for NaN-filled output (shapes come from a probe on an
    identity input of the same batch and matrix shape)."""
    probe = tuple(
        np.broadcast_to(np.eye(x.shape[-2], x.shape[-1], dtype=x.dtype), x.shape)
        if x.ndim >= 2
        else np.ones_like(x)
        for x in operands
    )
    result = routine(*probe, options)
    values = result if isinstance(result, tuple) else (result,)
    nans = tuple(np.full(np.shape(v), np.nan, dtype=d) for v, d in zip(values, dtypes))
    return nans if isinstance(result, tuple) else nans[0]


def _register(op: str, routine: Callable, allowed: dict) -> None:
    target = target_name(op)

    def interpreter(*operands, result_shape, backend_config):
        return _run(target, routine, allowed, operands, backend_config, _leaf_dtypes(result_shape))

    def cpu(out, *operands, backend_config):
        outs = out if isinstance(out, tuple) else (out,)
        return _run(target, routine, allowed, operands, backend_config, [o.dtype for o in outs])

    def cuda(out, *operands, backend_config):
        # a host round trip: the routines are LAPACK's; the backend copies the result back
        host = [x.copy_to_host() if hasattr(x, "copy_to_host") else np.asarray(x) for x in operands]
        outs = out if isinstance(out, tuple) else (out,)
        return _run(
            target, routine, allowed, host, backend_config, [np.dtype(o.dtype) for o in outs]
        )

    register_custom_call(target, "interpreter", interpreter)
    register_custom_call(target, "cpu", cpu)
    register_custom_call(target, "cuda", cuda)


for _op, (_routine, _allowed) in LINALG_CALLS.items():
    _register(_op, _routine, _allowed)
