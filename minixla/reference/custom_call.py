"""The custom-call registry: the only way a `custom-call` target resolves to code.

Text in an HLO file never makes minixla import a module or look up a Python object by name; a
target must be registered for the backend that runs it.

Calling convention (interpreter): `fn(*operands, result_shape=Shape, backend_config=str)`, where
operands are NumPy arrays in logical order (tuples for tuple-shaped operands) and the return
value is an array (or a tuple of arrays) matching `result_shape`. Other backends document their
own convention beside their registrations. XLA:CPU's own targets (TopK, `lapack_*_ffi`) need no
registration: minixla.reference.xla_custom_calls implements them.
"""

from __future__ import annotations

from typing import Callable

from ..errors import MinixlaError

_REGISTRY: dict[tuple[str, str], Callable] = {}
_changes = [0]  # bumped on every (un)registration: compiled programs depend on the registry


class CustomCallError(MinixlaError):
    """A custom-call target that is not registered for the backend, or a bad result."""


def register_custom_call(target: str, backend: str, fn: Callable) -> None:
    if not isinstance(target, str) or not target:
        raise TypeError("custom-call target must be a non-empty string")
    if not callable(fn):
        raise TypeError(f"custom-call {target!r}: implementation must be callable")
    _REGISTRY[(target, backend)] = fn
    _changes[0] += 1


def unregister_custom_call(target: str, backend: str) -> None:
    _REGISTRY.pop((target, backend), None)
    _changes[0] += 1


def registry_generation() -> int:
    """A number that changes whenever a custom-call target is registered or removed."""
    return _changes[0]


def lookup_custom_call(target: str, backend: str) -> Callable:
    """The registered implementation, else XLA:CPU's own target (TopK, LAPACK) if it is one."""
    fn = _REGISTRY.get((target, backend))
    if fn is None:
        from .xla_custom_calls import adapt, builtin_target

        builtin = builtin_target(target)
        if builtin is not None:
            return adapt(builtin, backend)
        others = sorted(b for t, b in _REGISTRY if t == target)
        hint = f" (registered only for: {', '.join(others)})" if others else ""
        raise CustomCallError(
            f"custom-call target {target!r} is not registered for backend "
            f"{backend!r}{hint}; register it with "
            f"minixla.register_custom_call"
        )
    return fn


def registered_targets(backend: str) -> list[str]:
    return sorted(t for t, b in _REGISTRY if b == backend)


def registered_for_any_backend(target: str) -> bool:
    return any(t == target for t, _ in _REGISTRY)


# Sharding annotations (with_sharding_constraint's `Sharding`, Shardy's result shardings) only
# say how values are laid out over devices: on one device, or when a module is run
# unpartitioned, they are the identity. (shard_map's xla.sdy.GlobalToLocalShape is not: its
# body is a per-device program, which needs the partitioner.)
def _identity(*operands, **_):
    return operands[0] if len(operands) == 1 else tuple(operands)


# Memory-space annotations (host offloading: `jax.device_put` to a host memory kind inside jit,
# remat policies that offload to the host) move a value between memories: minixla has one, so
# they are the identity too (the algebraic simplifier drops them before backends see them).
MEMORY_SPACE_ANNOTATIONS = frozenset({"MoveToHost", "MoveToDevice", "annotate_device_placement"})

for _target in ("Sharding", "xla.sdy.FuncResultSharding", *sorted(MEMORY_SPACE_ANNOTATIONS)):
    register_custom_call(_target, "interpreter", _identity)
    register_custom_call(_target, "cpu", lambda out, *operands, **_: _identity(*operands))
