"""`minixla.lax`: structured control flow (lowered to HLO while/conditional) and a few
direct HLO ops, in the style of jax.lax; see docs/frontend.md."""
from .frontend.lax_api import (cond, dynamic_slice, dynamic_update_slice, fori_loop, scan,
                               select, switch, while_loop)
from .frontend.numpy_api import erf
from .frontend.numpy_linalg import dot_general
from .frontend.lax_ops import (abs, add, atan2, cbrt, ceil, conv_general_dilated,
                               convert_element_type, cos, div, exp, expm1, floor, integer_pow,
                               log, log1p, logistic, max, min, mul, neg, padtype_to_pads, pow,
                               reciprocal, reduce_window, rem, round, rsqrt, sign, sin, sqrt,
                               square, sub, tan, tanh)
from .transforms.regions import stop_gradient
from .frontend.shard_map import (all_gather, all_to_all, axis_index, pmax, pmean, pmin,
                                 ppermute, psum, psum_scatter)
from .frontend.sharding import with_sharding_constraint

__all__ = ["cond", "dot_general", "dynamic_slice", "dynamic_update_slice", "erf", "fori_loop",
           "scan", "select", "switch", "while_loop",
           "abs", "add", "atan2", "cbrt", "ceil", "conv_general_dilated", "convert_element_type",
           "cos", "div", "exp", "expm1", "floor", "integer_pow", "log", "log1p", "logistic",
           "max", "min", "mul", "neg", "padtype_to_pads", "pow", "reciprocal", "reduce_window",
           "rem", "round", "rsqrt", "sign", "sin", "sqrt", "square", "stop_gradient", "sub",
           "tan", "tanh",
           "all_gather", "all_to_all", "axis_index", "pmax", "pmean", "pmin", "ppermute", "psum",
           "psum_scatter", "with_sharding_constraint"]
from .frontend import lax_linalg as linalg  # noqa: E402, F401 - lax.linalg.cholesky, triangular_solve
