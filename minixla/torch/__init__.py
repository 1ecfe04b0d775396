"""`minixla.torch`: PyTorch's `torch.compile` on minixla.

    import minixla.torch
    compiled = torch.compile(model, backend="minixla", options={"backend": "interpreter"})

Importing this package registers the "minixla" TorchDynamo backend (the package's
`torch_dynamo_backends` entry point registers it without the import). See docs/torch.md.
"""

from __future__ import annotations

from .backend import BACKENDS, TorchOptions, TorchOptionsError, compile_graph, minixla_backend
from .lowering import TorchLoweringError, lower_graph

BACKEND_NAME = "minixla"


def register() -> None:
    """Registers `minixla_backend` with TorchDynamo as "minixla" (once)."""
    from torch._dynamo.backends import registry

    if registry._BACKENDS.get(BACKEND_NAME) is not None:
        return  # found through the entry point: dynamo registers it when first looked up
    if BACKEND_NAME not in registry._COMPILER_FNS:
        registry.register_backend(minixla_backend, name=BACKEND_NAME)


register()

__all__ = [
    "BACKENDS",
    "BACKEND_NAME",
    "TorchLoweringError",
    "TorchOptions",
    "TorchOptionsError",
    "compile_graph",
    "lower_graph",
    "minixla_backend",
    "register",
]
