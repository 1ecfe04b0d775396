"""Function transformations over traced HLO (see tracing.py): differentiation in api.py and
regions.py, batching in batching.py."""

from .api import grad, hessian, jacfwd, jacrev, jvp, linearize, value_and_grad, vjp
from .autodiff import DifferentiationError
from .batching import vmap
from .regions import checkpoint, checkpoint_policies, custom_jvp, custom_vjp, remat, stop_gradient

__all__ = [
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
    "vmap",
]
