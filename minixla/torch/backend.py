"""The `minixla` TorchDynamo backend: `torch.compile(model, backend="minixla")`.

Dynamo hands over each captured graph; it is traced through AOTAutograd (functionalized, with
the core-ATen decompositions) once per concrete input signature, so a new batch size
recompiles rather than lowering symbolic dims. AOTAutograd's forward and backward graphs are
each lowered to HLO (lowering.py) and compiled by the chosen minixla backend; AOTAutograd's
own runtime wrappers then apply input mutations (BatchNorm running stats, in-place ops) and
hand gradients to autograd, so `loss.backward()` runs the compiled backward graph.

Scaled-dot-product attention is traced with its math kernel so that the forward and the
backward both come from the same decomposition (the fused CPU kernel's backward would not
match a decomposed forward), and with oneDNN off so that LSTMs trace as their cell ops
rather than as the fused `mkldnn_rnn_layer`.
"""
from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch._decomp import core_aten_decompositions
from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func
from torch.nn.attention import SDPBackend, sdpa_kernel

from ..errors import MinixlaError
from .convert import from_numpy, to_numpy
from .lowering import TorchLoweringError, lower_graph

BACKENDS = ("interpreter", "cpu", "cuda")
FALLBACKS = ("error", "eager")
DECOMPOSITIONS = core_aten_decompositions()
_graph_ids = itertools.count()


class TorchOptionsError(MinixlaError, ValueError):
    """An unknown option, or a bad value, in torch.compile(..., options={...})."""


@dataclass(frozen=True)
class TorchOptions:
    """`backend`: the minixla backend (interpreter, cpu, cuda; default: cpu when available);
    `fallback`: "error" (default) raises on an ATen op with no rule, "eager" warns and runs
    that graph with torch instead."""
    backend: str
    fallback: str = "error"

    @staticmethod
    def parse(options: dict | None) -> "TorchOptions":
        options = dict(options or {})
        unknown = sorted(set(options) - {"backend", "fallback"})
        if unknown:
            raise TorchOptionsError(f"unknown minixla torch.compile option(s) {unknown}; "
                                    f"known: backend, fallback")
        backend = options.get("backend") or _default_backend()
        if backend not in BACKENDS:
            raise TorchOptionsError(f"backend={backend!r}: expected one of {BACKENDS}")
        fallback = options.get("fallback", "error")
        if fallback not in FALLBACKS:
            raise TorchOptionsError(f"fallback={fallback!r}: expected one of {FALLBACKS}")
        return TorchOptions(backend, fallback)


def _default_backend() -> str:
    from ..frontend.eager import default_backend
    return default_backend()


def minixla_backend(gm: torch.fx.GraphModule, example_inputs, options: dict | None = None):
    """The TorchDynamo compiler function registered as "minixla"."""
    return DynamoGraph(gm, TorchOptions.parse(options))


class DynamoGraph:
    """One graph dynamo captured, compiled through AOTAutograd per input signature (shapes,
    dtypes, requires_grad, Python int values, grad mode)."""

    def __init__(self, gm: torch.fx.GraphModule, options: TorchOptions):
        self.gm = gm
        self.options = options
        self.compiled: dict = {}
        self.id = next(_graph_ids)

    def __call__(self, *args):
        key = (torch.is_grad_enabled(), tuple(_signature(a) for a in args))
        compiled = self.compiled.get(key)
        if compiled is None:
            compiled = self.compiled[key] = self._trace(args)
        return compiled(*args)

    def _trace(self, args):
        name = f"torch_graph_{self.id}_{len(self.compiled)}"
        with warnings.catch_warnings(), sdpa_kernel([SDPBackend.MATH]):
            warnings.filterwarnings("ignore", "TF32 acceleration on top of oneDNN")
            with torch.backends.mkldnn.flags(enabled=False):
                return aot_module_simplified(
                    self.gm, list(args), fw_compiler=self._compiler(f"{name}_forward"),
                    bw_compiler=self._compiler(f"{name}_backward"),
                    inference_compiler=self._compiler(f"{name}_inference"),
                    decompositions=DECOMPOSITIONS)

    def _compiler(self, name: str):
        def compile_fx(gm: torch.fx.GraphModule, example_inputs):
            return compile_graph(gm, example_inputs, self.options, name)
        return compile_fx


def _signature(arg):
    if isinstance(arg, torch.Tensor):
        return (tuple(arg.shape), arg.dtype, arg.requires_grad, arg.device.type)
    return (type(arg), arg)


def compile_graph(gm: torch.fx.GraphModule, example_inputs, options: TorchOptions,
                  name: str = "torch_graph"):
    """A boxed callable running an ATen-level FX graph through minixla (or, when lowering
    fails and options.fallback == "eager", through torch with a warning)."""
    try:
        module, signature = lower_graph(gm, example_inputs, name)
    except TorchLoweringError as exc:
        if options.fallback != "eager":
            raise
        warnings.warn(f"minixla runs graph {name} eagerly: {exc}", stacklevel=2)
        return make_boxed_func(gm.forward)
    _dump(gm, module, name)
    from ..backends.compile import compile
    executable = compile(module, backend=options.backend)
    return make_boxed_func(GraphRunner(executable, signature))


class GraphRunner:
    """Calls a compiled graph with torch tensors: inputs go in as NumPy views of their
    memory, outputs come back as tensors over the result arrays."""

    def __init__(self, executable, signature):
        self.executable = executable
        self.signature = signature

    def __call__(self, *args):
        arrays = [to_numpy(args[i]) for i in self.signature.tensor_inputs]
        if self.signature.needs_rng:  # drawn from torch's generator: torch.manual_seed holds
            seed = torch.randint(0, 2 ** 62, (2,), dtype=torch.int64)
            arrays.append(seed.numpy().astype(np.uint64))
        results = self.executable(*arrays)
        outputs, taken = [], list(arrays)
        for slot in self.signature.outputs:
            if not isinstance(slot, int):
                outputs.append(slot[1])
                continue
            tensor = from_numpy(results[slot], taken)  # never aliases an input or an output
            taken.append(tensor.numpy() if tensor.dtype != torch.bfloat16 else
                         tensor.view(torch.int16).numpy())
            outputs.append(tensor)
        return outputs


def _dump(gm: torch.fx.GraphModule, module, name: str) -> None:
    """With MINIXLA_FLAGS=--dump_to=DIR: the FX graph and the HLO lowered from it, side by
    side as DIR/<name>.fx.txt and DIR/<name>.hlo.txt (the backend's pass dumps follow)."""
    from ..passes.base import DumpOptions
    directory = DumpOptions.from_flags().dump_to
    if not directory:
        return
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    (path / f"{name}.fx.txt").write_text(gm.print_readable(print_output=False))
    (path / f"{name}.hlo.txt").write_text(module.to_text())
