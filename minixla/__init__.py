"""minixla: a small HLO compiler in Python."""

from .errors import (
    ExecutionError,
    HloParseError,
    MinixlaError,
    ResourceExhaustedError,
    ShapeError,
    UnsupportedError,
    VerificationError,
)
from .ir import HloComputation, HloInstruction, HloModule, Layout, Shape
from .ir.verifier import verify
from .backends.compile import compile
from .reference.custom_call import register_custom_call
from .runtime import Executable
from .runtime.metrics import metrics
from .runtime.devices import devices
from .text import parse_hlo_module, parse_module, parse_shape
from . import testing  # noqa: E402  (helpers for pass tests: run_pass, m, check_hlo, ...)
from .frontend import (
    Builder,
    ConcretizationError,
    EscapedTracerError,
    FrontendError,
    FrontendIndexError,
    FrontendShapeError,
    FrontendTypeError,
    TracerBoolConversionError,
    XlaOp,
    config,
    jit,
)
from .frontend import ops
from .frontend.shape_struct import ShapeDtypeStruct
from . import lax, nn, numpy  # noqa: E402  (NumPy-style API: `import minixla.numpy as mnp`)
from .transforms.batching import vmap  # noqa: E402
from . import random, tree_util  # noqa: E402
from .transforms import (
    DifferentiationError,
    checkpoint,
    checkpoint_policies,
    custom_jvp,
    custom_vjp,
    grad,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    remat,
    stop_gradient,
    value_and_grad,
    vjp,
)
from . import sharding  # noqa: E402  (Mesh, NamedSharding, PartitionSpec)
from .frontend.shard_map import shard_map  # noqa: E402

from .version import __version__  # noqa: E402

__all__ = [
    "ExecutionError",
    "HloComputation",
    "HloInstruction",
    "HloModule",
    "HloParseError",
    "Layout",
    "MinixlaError",
    "ResourceExhaustedError",
    "Shape",
    "ShapeError",
    "UnsupportedError",
    "VerificationError",
    "parse_hlo_module",
    "parse_module",
    "parse_shape",
    "Executable",
    "compile",
    "metrics",
    "register_custom_call",
    "ShapeDtypeStruct",
    "testing",
    "verify",
    "devices",
    "Builder",
    "ConcretizationError",
    "EscapedTracerError",
    "FrontendError",
    "FrontendIndexError",
    "FrontendShapeError",
    "FrontendTypeError",
    "TracerBoolConversionError",
    "XlaOp",
    "config",
    "jit",
    "lax",
    "nn",
    "numpy",
    "ops",
    "random",
    "tree_util",
    "vmap",
    "DifferentiationError",
    "checkpoint",
    "checkpoint_policies",
    "custom_jvp",
    "custom_vjp",
    "grad",
    "hessian",
    "jacfwd",
    "jacrev",
    "jvp",
    "linearize",
    "remat",
    "stop_gradient",
    "value_and_grad",
    "vjp",
    "sharding",
    "shard_map",
]
