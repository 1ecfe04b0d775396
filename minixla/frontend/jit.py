"""`minixla.jit`: trace a Python function over abstract arrays into an HloModule, compile it,
and cache the executable per input signature.

The signature is the argument pytree structure, each leaf's (shape, dtype, weak type), the
values of static arguments, the x64 switch and the backend. Donated arguments become
`input_output_alias` entries (may-alias) for outputs of the same shape and dtype; donations no
output can use are reported with a warning, as JAX does. On cpu the output then reuses the
donated array's memory and the array is made read-only (runtime/donation.py).
"""

from __future__ import annotations

import functools
import inspect
import re
import warnings

import numpy as np

from ..ir import AliasEntry, Shape
from . import dtypes as dt
from .builder import Builder
from .eager import default_backend
from .errors import FrontendTypeError
from .numpy_api import asarray
from .pytree import LEAF, flatten, unflatten
from .recompiles import RecompileLog
from .tracer import Tracer, current_builder, tracing

_SCALARS = (bool, int, float, complex)


def _spec(leaf, where: str) -> tuple[tuple[int, ...], np.dtype, bool]:
    """(shape, canonical dtype, weak) of one argument leaf."""
    if isinstance(leaf, Tracer):
        raise FrontendTypeError(f"{where} is a traced value outside its trace")
    if isinstance(leaf, _SCALARS) and not isinstance(leaf, np.generic):
        dtype, weak = dt.python_scalar_type(leaf)
        return (), dtype, weak
    if isinstance(leaf, (np.ndarray, np.generic)):
        return tuple(leaf.shape), dt.canonicalize(leaf.dtype), False
    raise FrontendTypeError(
        f"{where} of type {type(leaf).__name__} is not an array; pass "
        f"NumPy arrays or scalars (or mark the argument static)"
    )


def _host(leaf):
    """Array-likes from other libraries (JAX, PyTorch, anything with __dlpack__ or __array__)
    as NumPy arrays; everything else unchanged."""
    if isinstance(leaf, (np.ndarray, np.generic, Tracer) + _SCALARS):
        return leaf
    if hasattr(leaf, "__dlpack__"):
        try:
            return np.from_dlpack(leaf)
        except (TypeError, RuntimeError, BufferError, ValueError):
            pass  # e.g. a tensor that requires grad, or a dtype DLPack lacks: try __array__
    if hasattr(leaf, "__array__"):
        detach = getattr(leaf, "detach", None)  # torch refuses __array__ on grad tensors
        return np.asarray(detach() if callable(detach) else leaf)
    return leaf


def _hashable(value, argnum):
    try:
        hash(value)
    except TypeError:
        raise FrontendTypeError(
            f"static argument {argnum} must be hashable, got {type(value).__name__}"
        ) from None
    return value


class Lowered:
    """A traced function: the HloModule plus what is needed to call it."""

    def __init__(self, module, in_tree, out_tree, backend: str, options: dict | None = None):
        self.module = module
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.backend = backend
        self.options = dict(options or {})  # compile options (memory_limit_bytes)

    def as_text(self) -> str:
        return self.module.to_text()

    def compile(self):
        from ..backends.compile import compile

        return compile(self.module, backend=self.backend, **self.options)

    def __repr__(self) -> str:
        return f"<Lowered {self.module.name} for {self.backend}>"


class Jitted:
    """The callable `jit` returns; `compile_count` counts cache misses."""

    def __init__(
        self,
        fn,
        backend,
        donate_argnums,
        static_argnums,
        static_argnames=(),
        donate_argnames=(),
        memory_limit_bytes=None,
        in_shardings=None,
        out_shardings=None,
        auto_sharding=None,
    ):
        functools.update_wrapper(self, fn)
        self.auto_sharding = auto_sharding
        self.in_shardings, self.out_shardings = in_shardings, out_shardings
        self.fn = fn
        self.backend = backend
        self.memory_limit_bytes = memory_limit_bytes
        try:
            parameters = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            parameters = {}
        self._names = list(parameters)
        positional = [
            n
            for n, p in parameters.items()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        open_kwargs = any(p.kind == p.VAR_KEYWORD for p in parameters.values())
        static_names = _argnames(static_argnames, parameters, open_kwargs)
        donate_names = _argnames(donate_argnames, parameters, open_kwargs)
        self.static_argnums = frozenset(_argnums(static_argnums)) | {
            positional.index(n) for n in static_names if n in positional
        }
        self.donate_argnums = frozenset(_argnums(donate_argnums)) | {
            positional.index(n) for n in donate_names if n in positional
        }
        # names by which static or donated arguments may also be passed as keywords
        self.static_argnames = frozenset(static_names) | {
            positional[i] for i in self.static_argnums if i < len(positional)
        }
        self.donate_argnames = frozenset(donate_names) | {
            positional[i] for i in self.donate_argnums if i < len(positional)
        }
        if self.static_argnums & self.donate_argnums or self.static_argnames & self.donate_argnames:
            raise FrontendTypeError("an argument cannot be both static and donated")
        self.compile_count = 0
        self._cache: dict = {}
        self.recompile_log = RecompileLog(getattr(fn, "__name__", "fn"))

    def __call__(self, *args, **kwargs):
        if current_builder() is not None:  # jit inside a trace just inlines
            return self.fn(*args, **kwargs)
        key, leaves = self._signature(args, kwargs)
        entry = self._cache.get(key)
        if entry is None:
            self.recompile_log.record(key, self._cache, self._leaf_names(args, kwargs))
            lowered = self._lower(key, args, kwargs)
            entry = (lowered.compile(), lowered.out_tree)
            self._cache[key] = entry
            self.compile_count += 1
        executable, out_tree = entry
        hosts = [
            dt.scalar_constant(leaf, spec[1]) if isinstance(leaf, _SCALARS) else dt.host_array(leaf)
            for leaf, spec in zip(leaves, key[1])
        ]
        result = executable(*hosts)
        outs = [result] if out_tree == LEAF else list(result)
        return unflatten(out_tree, outs)

    def lower(self, *args, **kwargs) -> Lowered:
        key, _ = self._signature(args, kwargs)
        return self._lower(key, args, kwargs)

    @property
    def cache_size(self) -> int:
        return len(self._cache)

    def clear_cache(self) -> None:
        self._cache.clear()

    def explain_recompiles(self) -> str:
        """Why each trace happened: "first call", then what differed from the closest
        earlier signature (shape, dtype, weak type, static value, pytree, backend)."""
        return str(self.recompile_log)

    # -- internals ---------------------------------------------------------------------------
    def _signature(self, args, kwargs):
        for i in self.static_argnums | self.donate_argnums:
            passed_by_name = i < len(self._names) and self._names[i] in kwargs
            if i >= len(args) and not passed_by_name:
                raise FrontendTypeError(
                    f"{self.__name__} got {len(args)} positional "
                    f"arguments, but argnum {i} is static or donated"
                )
        static = tuple(
            (i, _hashable(args[i], i)) for i in sorted(self.static_argnums) if i < len(args)
        )
        static += tuple(
            (k, _hashable(v, k)) for k, v in sorted(kwargs.items()) if k in self.static_argnames
        )
        dynamic = tuple(a for i, a in enumerate(args) if i not in self.static_argnums)
        dynamic_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        leaves, tree = flatten((dynamic, dynamic_kwargs))
        leaves = [_host(leaf) for leaf in leaves]
        specs = tuple(_spec(leaf, f"argument leaf {k}") for k, leaf in enumerate(leaves))
        backend = self.backend or default_backend()
        return (tree, specs, static, dt.config.enable_x64, backend), leaves

    def _lower(self, key, args, kwargs) -> Lowered:
        tree, specs, _, _, backend = key
        name = _identifier(getattr(self.fn, "__name__", "fn"))
        builder = Builder("main")
        names = self._leaf_names(
            args, {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        )
        params = [
            Tracer(builder.parameter(Shape.array(dt.hlo_name(dtype), shape), nm), weak)
            for (shape, dtype, weak), nm in zip(specs, names)
        ]
        dynamic, kw = unflatten(tree, params)
        kw.update((k, v) for k, v in kwargs.items() if k in self.static_argnames)
        it = iter(dynamic)
        call_args = [args[i] if i in self.static_argnums else next(it) for i in range(len(args))]
        with tracing(builder):
            out = self.fn(*call_args, **kw)
            out_leaves, out_tree = flatten(out)
            outs = [asarray(leaf) for leaf in out_leaves]
        root = outs[0].op if out_tree == LEAF else [o.op for o in outs]
        module = builder.module(root, name=f"jit_{name}")
        module.input_output_alias = self._aliases(module, args, kwargs, out_tree == LEAF)
        if self.in_shardings is not None or self.out_shardings is not None:
            from .sharding import annotate

            counts = [
                len(flatten(a)[0]) for i, a in enumerate(args) if i not in self.static_argnums
            ]
            annotate(
                module,
                self.in_shardings,
                self.out_shardings,
                counts + [len(flatten(kwargs[k])[0]) for k in sorted(kwargs)],
            )
        options = (
            {}
            if self.memory_limit_bytes is None
            else {"memory_limit_bytes": self.memory_limit_bytes}
        )
        if self.auto_sharding is not None:
            from .sharding import auto_sharding_options

            options.update(auto_sharding_options(self.auto_sharding))
        return Lowered(module, tree, out_tree, backend, options)

    def _leaf_names(self, args, kwargs) -> list[str]:
        """Parameter names from the Python signature: `x`, `params_w` for nested leaves."""
        names = []
        for i, arg in enumerate(args):
            if i in self.static_argnums:
                continue
            base = self._names[i] if i < len(self._names) else f"arg{i}"
            names += _named_leaves(arg, base)
        for k in sorted(kwargs):
            names += _named_leaves(kwargs[k], k)
        return [_identifier(n) for n in names]

    def _aliases(self, module, args, kwargs, single: bool) -> list[AliasEntry]:
        if not self.donate_argnums and not self.donate_argnames & set(kwargs):
            return []
        root = module.entry.root.shape
        outputs = [root] if single else list(root.tuple_shapes)
        used: set[int] = set()
        entries, unusable = [], []
        number = 0
        # parameters follow the dynamic positional arguments, then keywords in sorted order
        groups = [
            (i in self.donate_argnums, arg)
            for i, arg in enumerate(args)
            if i not in self.static_argnums
        ]
        groups += [
            (k in self.donate_argnames, kwargs[k])
            for k in sorted(kwargs)
            if k not in self.static_argnames
        ]
        for donated, arg in groups:
            count = len(flatten(arg)[0])
            for p in range(number, number + count):
                if not donated:
                    continue
                shape = module.entry.parameter(p).shape
                match = next(
                    (k for k, out in enumerate(outputs) if k not in used and out.compatible(shape)),
                    None,
                )
                if match is None:
                    unusable.append(str(shape.without_layout()))
                    continue
                used.add(match)
                entries.append(AliasEntry(() if single else (match,), p, ()))
            number += count
        if unusable:
            warnings.warn(
                f"Some donated buffers were not usable: {', '.join(unusable)}", stacklevel=4
            )
        return entries


def _named_leaves(tree, base: str) -> list[str]:
    leaves, treedef = flatten(tree)
    if treedef == LEAF:
        return [base]
    return [f"{base}_{k}" for k in range(len(leaves))]


def _identifier(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name) or "fn"


def _argnums(value) -> tuple[int, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, int) else tuple(value)


def _argnames(value, parameters, open_kwargs: bool) -> tuple[str, ...]:
    names = (value,) if isinstance(value, str) else tuple(value or ())
    for name in names:
        if name not in parameters and not open_kwargs:
            raise FrontendTypeError(
                f"{name!r} is not a parameter of the jitted function "
                f"(its parameters: {', '.join(parameters) or 'none'})"
            )
    return names


def jit(
    fn=None,
    *,
    backend: str | None = None,
    donate_argnums=(),
    static_argnums=(),
    static_argnames=(),
    donate_argnames=(),
    memory_limit_bytes: int | None = None,
    in_shardings=None,
    out_shardings=None,
    auto_sharding=None,
):
    """Compiles `fn` on first call per input signature; usable as `@jit` or
    `@jit(static_argnums=...)`. Static arguments (by position or name) are Python values
    baked into the trace; donated ones may share buffers with outputs. backend=None means
    "cpu" when available, else the interpreter. memory_limit_bytes bounds the peak temporary
    memory: values are recomputed instead of kept live until it holds (rematerialization).
    in_shardings/out_shardings (NamedSharding, one or one per positional argument / output)
    partition the program over their mesh (docs/sharding.md); auto_sharding=mesh chooses
    the shardings of the rest over the mesh's devices (docs/sharding.md#auto-sharding)."""
    if fn is None:
        return functools.partial(
            jit,
            backend=backend,
            donate_argnums=donate_argnums,
            static_argnums=static_argnums,
            static_argnames=static_argnames,
            donate_argnames=donate_argnames,
            memory_limit_bytes=memory_limit_bytes,
            in_shardings=in_shardings,
            out_shardings=out_shardings,
            auto_sharding=auto_sharding,
        )
    return Jitted(
        fn,
        backend,
        donate_argnums,
        static_argnums,
        static_argnames,
        donate_argnames,
        memory_limit_bytes,
        in_shardings,
        out_shardings,
        auto_sharding,
    )
