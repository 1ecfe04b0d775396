"""`minixla.numpy` (import as mnp): NumPy's API for traced arrays; see docs/frontend.md.

Inside `minixla.jit` these functions record HLO; outside any trace they run eagerly and
return NumPy arrays.
"""
from ml_dtypes import bfloat16
from numpy import (bool_, complex64, complex128, dtype, e, float16, float32, float64, inf, int8,
                   int16, int32, int64, nan, newaxis, pi, uint8, uint16, uint32, uint64)

from .frontend.indexing import take
from .frontend.numpy_api import (abs, absolute, add, arccos, arccosh, arcsin, arcsinh, arctan,
                                 arctan2, arctanh, array, asarray, astype, bitwise_and, bitwise_not,
                                 bitwise_or, bitwise_xor, broadcast_arrays, broadcast_shapes,
                                 broadcast_to, cbrt, ceil, clip, cos, cosh, divide, equal, exp,
                                 exp2, expm1, floor, floor_divide, greater, greater_equal, invert,
                                 isfinite, isinf, isnan, left_shift, less, less_equal, log, log1p,
                                 log2, log10, logical_and, logical_not, logical_or, logical_xor,
                                 maximum, minimum, mod, multiply, negative, not_equal, positive,
                                 power, reciprocal, remainder, right_shift, rint, round, sign, sin,
                                 sinh, sqrt, square, subtract, tan, tanh, true_divide, trunc, where)
from .frontend.numpy_creation import (arange, eye, full, full_like, identity, linspace, ones,
                                      ones_like, zeros, zeros_like)
from .frontend.numpy_linalg import dot, einsum, inner, matmul, outer, tensordot, vdot
from .frontend.numpy_reduce import (all, amax, amin, any, argmax, argmin, argsort,
                                    count_nonzero, cummax, cummin, cumprod, cumsum, max, mean,
                                    min, prod, sort, std, sum, var)
from .frontend.numpy_shape import (atleast_1d, concatenate, expand_dims, flip, fliplr, flipud,
                                   hstack, moveaxis, ndim, pad, ravel, repeat, reshape, roll,
                                   shape, size, split, squeeze, stack, swapaxes, tile,
                                   transpose, vstack)
from .frontend.numpy_more import (isclose, logaddexp, nanmax, nanmean, nanmin, nanprod, nanstd,
                                  nansum, nanvar, take_along_axis, tril, triu)
from .frontend.tracer import Tracer as ndarray  # the array type inside a trace
from .frontend import fft_api as fft  # mnp.fft.fft, ...  # noqa: E402
from .frontend import linalg_api as linalg  # mnp.linalg.solve, ...  # noqa: E402
