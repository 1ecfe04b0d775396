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
from torch._functorch.partitioners import min_cut_rematerialization_partition
from torch.nn.attention import SDPBackend, sdpa_kernel

from ..errors import MinixlaError
from .convert import from_numpy, memory_owner, owned_tensors, to_numpy
from .lowering import TorchLoweringError, lower_graph
from .replacements import replace_calls

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
    that graph with torch instead; any other key is a compile option of that backend
    (`minixla.compile(..., **compile_options)`, e.g. the cpu's `parallel_threshold`)."""

    backend: str
    fallback: str = "error"
    compile_options: tuple = ()  # (name, value) pairs

    @staticmethod
    def parse(options: dict | None) -> "TorchOptions":
        options = dict(options or {})
        backend = options.pop("backend", None) or _default_backend()
        if backend not in BACKENDS:
            raise TorchOptionsError(f"backend={backend!r}: expected one of {BACKENDS}")
        fallback = options.pop("fallback", "error")
        if fallback not in FALLBACKS:
            raise TorchOptionsError(f"fallback={fallback!r}: expected one of {FALLBACKS}")
        _check_compile_options(backend, options)
        return TorchOptions(backend, fallback, tuple(sorted(options.items())))


def _check_compile_options(backend: str, options: dict) -> None:
    from .. import backends
    from ..backends.compile import check_options

    if not options:
        return
    target = backends.get(backend)  # an unavailable backend says so
    try:
        check_options(options, target)
    except MinixlaError as exc:
        raise TorchOptionsError(
            f"unknown minixla torch.compile option(s) {sorted(options)}: besides backend and "
            f"fallback, options are compile options of the backend ({exc})"
        ) from None


def _default_backend() -> str:
    from ..frontend.eager import default_backend

    return default_backend()


def minixla_backend(gm: torch.fx.GraphModule, example_inputs, options: dict | None = None):
    """The TorchDynamo compiler function registered as "minixla"."""
    return DynamoGraph(gm, TorchOptions.parse(options), static=_static(example_inputs))


def _static(example_inputs) -> bool:
    """No symbolic sizes: dynamo's guards (shapes, dtypes, requires_grad, grad mode) then
    send this graph only inputs of the one signature it was captured with, and a change
    recompiles into a new graph."""
    for value in example_inputs:
        if isinstance(value, torch.SymInt):
            return False
        if isinstance(value, torch.Tensor) and not all(type(d) is int for d in value.shape):
            return False
    return True


class DynamoGraph:
    """One graph dynamo captured, compiled through AOTAutograd per input signature (shapes,
    dtypes, requires_grad, Python int values, grad mode)."""

    def __init__(self, gm: torch.fx.GraphModule, options: TorchOptions, *, static=False):
        replace_calls(gm)  # torch functions whose traced decomposition is wrong
        self.gm = gm
        self.options = options
        self.compiled: dict = {}
        self.id = next(_graph_ids)
        self.only = None  # a static graph's one compiled function: calls skip the key
        self.static = static

    def __call__(self, *args):
        if self.only is not None:
            return self.only(*args)
        key = (torch.is_grad_enabled(), tuple(_signature(a) for a in args))
        compiled = self.compiled.get(key)
        if compiled is None:
            compiled = self.compiled[key] = self._trace(args)
            if self.static:
                self.only = compiled
        return compiled(*args)

    def _trace(self, args):
        name = f"torch_graph_{self.id}_{len(self.compiled)}"
        with warnings.catch_warnings(), sdpa_kernel([SDPBackend.MATH]):
            warnings.filterwarnings("ignore", "TF32 acceleration on top of oneDNN")
            with torch.backends.mkldnn.flags(enabled=False):
                return aot_module_simplified(
                    self.gm,
                    list(args),
                    fw_compiler=self._compiler(f"{name}_forward"),
                    bw_compiler=self._compiler(f"{name}_backward"),
                    inference_compiler=self._compiler(f"{name}_inference"),
                    decompositions=DECOMPOSITIONS,
                    partition_fn=min_cut_rematerialization_partition,
                )

    def _compiler(self, name: str):
        def compile_fx(gm: torch.fx.GraphModule, example_inputs):
            return compile_graph(gm, example_inputs, self.options, name)

        return compile_fx


def _signature(arg):
    if isinstance(arg, torch.Tensor):  # torch.Size hashes as the tuple of its dims
        return (arg.shape, arg.dtype, arg.requires_grad, arg.device)
    return (type(arg), arg)


def compile_graph(
    gm: torch.fx.GraphModule, example_inputs, options: TorchOptions, name: str = "torch_graph"
):
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

    executable = compile(module, backend=options.backend, **dict(options.compile_options))
    return make_boxed_func(GraphRunner(executable, signature))


class GraphRunner:
    """Calls a compiled graph with torch tensors: inputs go in as NumPy views of their
    memory, outputs come back as tensors over the result arrays.

    Parameters come back as the same tensors every call, so their views are kept, each with
    the data pointer it was made for (`param.data = ...` changes it and makes a new view).
    A graph input the graph returns unchanged comes back as the caller's tensor itself; the
    other results never share memory with the arguments (the Executable copies any that
    would), so only results with a common memory owner are compared with each other."""

    def __init__(self, executable, signature):
        self.executable = executable
        self.signature = signature
        self.parameter_views: dict[int, tuple[torch.Tensor, int, np.ndarray]] = {}

    def __call__(self, *args):
        arrays = [self._array(i, args[i]) for i in self.signature.tensor_inputs]
        if self.signature.needs_rng:  # drawn from torch's generator: torch.manual_seed holds
            seed = torch.randint(0, 2**62, (2,), dtype=torch.int64)
            arrays.append(seed.numpy().astype(np.uint64))
        results = self.executable(*arrays)
        tensors = owned_tensors(results)  # None: some result needs the checks below
        if tensors is not None:
            return [
                tensors[slot] if isinstance(slot, int) else _passed_on(slot, args)
                for slot in self.signature.outputs
            ]
        outputs, by_owner = [], {}
        for slot in self.signature.outputs:
            if not isinstance(slot, int):
                outputs.append(_passed_on(slot, args))
                continue
            array = results[slot]
            earlier = by_owner.setdefault(memory_owner(array), [])
            tensor = from_numpy(array, earlier)  # never aliases another output
            earlier.append(
                tensor.numpy()
                if tensor.dtype != torch.bfloat16
                else tensor.view(torch.int16).numpy()
            )
            outputs.append(tensor)
        return outputs

    def _array(self, position: int, tensor: torch.Tensor) -> np.ndarray:
        if type(tensor) is not torch.nn.Parameter:  # isinstance costs a Python-level check
            return to_numpy(tensor)
        kept = self.parameter_views.get(position)
        pointer = tensor.data_ptr()
        if (
            kept is not None and kept[0] is tensor and kept[1] == pointer and tensor.is_contiguous()
        ):  # shape and dtype are the signature's
            return kept[2]
        array = to_numpy(tensor)
        if array.ctypes.data == pointer:  # a view, not a copy: valid while the pointer holds
            self.parameter_views[position] = (tensor, pointer, array)
        return array


def _passed_on(slot: tuple, args) -> object:
    """An output the module does not compute: ("input", i) is graph input i as it came,
    ("const", value) the value."""
    kind, value = slot
    return args[value] if kind == "input" else value


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
