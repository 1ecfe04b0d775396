"""What generated CPU kernels call as `h.<name>`: the CPU's primitives, and the shared scalar
helpers (codegen/helpers.py: XLA's exact integer and float corner cases) compiled over them.

The primitives are LLVM intrinsics, each one vectorizable instruction: rounding, copysign,
popcount, count-leading-zeros, bitcast, signbit, and XLA's maximum/minimum as
llvm.maximum/minimum.

LLVM inlines the helpers into the kernel loop. They are compiled with 'contract' only, so the
NaN and signed-zero selects survive whatever flags the calling kernel uses.
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ..codegen.helpers import scalar_helpers

_JIT = dict(fastmath={"contract"}, error_model="numpy", cache=False, nogil=True)
_FLOATS = (types.float32, types.float64)


# ---- LLVM intrinsics: each lowers to one vectorizable instruction ------------------------------


def _float_intrinsic(name: str):
    """`name(x)` for a float x, as the LLVM intrinsic `llvm.<name>.f32/f64`."""

    def typer(typingctx, x):
        if x not in _FLOATS:
            return None

        def codegen(context, builder, sig, args):
            fty = args[0].type
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(fty, [fty]), f"llvm.{name}.{fty.intrinsic_name}"
            )
            return builder.call(fn, args)

        return x(x), codegen

    return intrinsic(typer)


floor = _float_intrinsic("floor")
ceil = _float_intrinsic("ceil")
rint = _float_intrinsic("rint")  # ties to even (default rounding mode)
round_afz = _float_intrinsic("round")  # ties away from zero
trunc = _float_intrinsic("trunc")


@intrinsic
def copysign(typingctx, magnitude, sign):
    if magnitude not in _FLOATS or sign != magnitude:
        return None

    def codegen(context, builder, sig, args):
        fty = args[0].type
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(fty, [fty, fty]), f"llvm.copysign.{fty.intrinsic_name}"
        )
        return builder.call(fn, args)

    return magnitude(magnitude, sign), codegen


def _int_intrinsic(name: str, poison_flag: bool):
    def typer(typingctx, x):
        if not isinstance(x, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            ity = args[0].type
            params = [ity] + ([ir.IntType(1)] if poison_flag else [])
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ity, params), f"llvm.{name}.i{ity.width}"
            )
            extra = [ir.Constant(ir.IntType(1), 0)] if poison_flag else []
            return builder.call(fn, [args[0]] + extra)

        return x(x), codegen

    return intrinsic(typer)


def _shift_intrinsic(kind: str):
    """XLA's shift of integer x by amount s (an unsigned of x's width), in x's own width:
    an amount of the width or more gives 0, or the sign fill for an arithmetic right shift."""

    def typer(typingctx, x, s):
        if not isinstance(x, types.Integer) or not isinstance(s, types.Integer):
            return None
        if x.bitwidth != s.bitwidth:
            return None

        def codegen(context, builder, sig, args):
            value, amount = args
            width = ir.Constant(value.type, value.type.width)
            in_range = builder.icmp_unsigned("<", amount, width)
            if kind == "shl":
                shifted, outside = builder.shl(value, amount), ir.Constant(value.type, 0)
            elif kind == "lshr":
                shifted, outside = builder.lshr(value, amount), ir.Constant(value.type, 0)
            else:
                top = ir.Constant(value.type, value.type.width - 1)
                shifted, outside = builder.ashr(value, amount), builder.ashr(value, top)
            return builder.select(in_range, shifted, outside)

        return x(x, s), codegen

    return intrinsic(typer)


shift_left = _shift_intrinsic("shl")
shift_right_logical = _shift_intrinsic("lshr")
shift_right_arithmetic = _shift_intrinsic("ashr")
popcount = _int_intrinsic("ctpop", False)
count_leading_zeros = _int_intrinsic("ctlz", True)  # defined (= width) for a zero input


@intrinsic
def bitcast(typingctx, x, ty):
    """Reinterprets the bits of scalar `x` as the same-width type `ty` (e.g. np.int32)."""
    target = getattr(ty, "instance_type", None)
    if not isinstance(target, (types.Integer, types.Float)) or target.bitwidth != x.bitwidth:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(target))

    return target(x, ty), codegen


@intrinsic
def signbit(typingctx, x):
    """True when the sign bit of float x is set (also for -0 and negative NaNs)."""
    if x not in _FLOATS:
        return None

    def codegen(context, builder, sig, args):
        ity = ir.IntType(x.bitwidth)
        return builder.icmp_signed("<", builder.bitcast(args[0], ity), ir.Constant(ity, 0))

    return types.boolean(x), codegen


# ---- scratch arrays -----------------------------------------------------------------------------


def _scratch_element(count, dtype):
    """The element type of a scratch array of `count` (a literal) `dtype`s (np.int64,
    np.bool_, ...), or None where those are not such arguments."""
    element = getattr(dtype, "instance_type", None)
    if not isinstance(count, types.IntegerLiteral):
        return None
    return element if isinstance(element, (types.Number, types.Boolean)) else None


@intrinsic(prefer_literal=True)
def stack_array(typingctx, count, dtype):
    """A 1-d array of `count` (a literal) elements of `dtype` (np.int64, ...) in the calling
    kernel's stack frame: no allocation, so the kernel needs nothing of Numba's runtime and
    can be linked into a program's library (native_library.py). Valid until the kernel
    returns; kept small (kernel_source.STACK_SCRATCH_BYTES), bigger scratch is np.empty."""
    element = _scratch_element(count, dtype)
    if element is None:
        return None
    array_type = types.Array(element, 1, "C")

    def codegen(context, builder, sig, args):

        n = count.literal_value
        data = cgutils.alloca_once(builder, context.get_data_type(element), size=n)
        data.align = 64  # as Numba aligns what it allocates: loops over it vectorize alike
        return _scratch(context, builder, array_type, data, n)

    return array_type(count, dtype), codegen


def _scratch(context, builder, array_type, data, n: int):
    """A 1-d array of `n` elements at `data` that no meminfo owns."""
    from numba.np.arrayobj import make_array, populate_array

    itemsize = context.get_constant(types.intp, context.get_abi_sizeof(data.type.pointee))
    array = make_array(array_type)(context, builder)
    populate_array(
        array,
        data=data,
        shape=[context.get_constant(types.intp, n)],
        strides=[itemsize],
        itemsize=itemsize,
        meminfo=_opaque_null(builder),
    )
    return array._getvalue()


def _opaque_null(builder):
    """A null meminfo LLVM cannot see is null. With a constant null the reference counting
    around the array folds away, and LLVM shapes the loops over it differently: a merge
    sort over 1,024 elements ran 10% slower than over np.empty's scratch (5.9 against
    5.35 ms for 64 rows); with this, within 1-2% of it."""
    null = ir.Constant(cgutils.voidptr_t, None)
    return builder.asm(ir.FunctionType(null.type, [null.type]), "", "=r,0", [null], False)


@intrinsic(prefer_literal=True)
def heap_array(typingctx, count, dtype):
    """A 1-d array of `count` (a literal) elements of `dtype` from the C library's malloc, for
    scratch too big for the stack: like stack_array it needs nothing of Numba's runtime. The
    kernel frees it with free_array before it returns."""
    element = _scratch_element(count, dtype)
    if element is None:
        return None
    array_type = types.Array(element, 1, "C")

    def codegen(context, builder, sig, args):

        n = count.literal_value
        pointer = context.get_data_type(element).as_pointer()
        itemsize = context.get_abi_sizeof(pointer.pointee)
        malloc = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(cgutils.voidptr_t, [cgutils.intp_t]), "malloc"
        )
        data = builder.call(malloc, [ir.Constant(cgutils.intp_t, n * itemsize)])
        return _scratch(context, builder, array_type, builder.bitcast(data, pointer), n)

    return array_type(count, dtype), codegen


@intrinsic
def free_array(typingctx, array):
    """Frees the data of an array heap_array made."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, sig, args):
        from numba.np.arrayobj import make_array

        free = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [cgutils.voidptr_t]), "free"
        )
        data = make_array(array)(context, builder, value=args[0]).data
        builder.call(free, [builder.bitcast(data, cgutils.voidptr_t)])
        return context.get_dummy_value()

    return types.none(array), codegen


@intrinsic
def as_shape(typingctx, array, shape):
    """A C-order 1-d `array` seen with `shape` (a tuple of ints whose product is its size).
    Numba's reshape calls its runtime's numba_attempt_nocopy_reshape; this needs nothing of
    the runtime, so a native loop over reshaped buffers links into a program's library."""
    if not isinstance(array, types.Array) or array.ndim != 1 or array.layout != "C":
        return None
    if not isinstance(shape, types.UniTuple) or not isinstance(shape.dtype, types.Integer):
        return None
    result = types.Array(array.dtype, shape.count, "C")

    def codegen(context, builder, sig, args):
        from numba.np.arrayobj import make_array, populate_array

        source = make_array(array)(context, builder, value=args[0])
        dims = [
            context.cast(builder, d, shape.dtype, types.intp)
            for d in cgutils.unpack_tuple(builder, args[1], shape.count)
        ]
        strides, stride = [], source.itemsize
        for d in reversed(dims):
            strides.insert(0, stride)
            stride = builder.mul(stride, d)
        out = make_array(result)(context, builder)
        populate_array(
            out,
            data=source.data,
            shape=dims,
            strides=strides,
            itemsize=source.itemsize,
            meminfo=_opaque_null(builder),
        )
        return out._getvalue()

    return result(array, shape), codegen


@intrinsic
def assume_nonnegative(typingctx, index):
    """Tells LLVM that `index` is not negative. A loop over part of a range (a split kernel's
    share, loops.py) starts at a bound LLVM cannot see is >= 0, so every subscript kept its
    negative-index fix-up and the loop stayed scalar: 5.3 ms against 0.8 ms for an add of 2^22
    floats."""
    if not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        assume = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [ir.IntType(1)]), "llvm.assume"
        )
        zero = ir.Constant(args[0].type, 0)
        builder.call(assume, [builder.icmp_signed(">=", args[0], zero)])
        return context.get_dummy_value()

    return types.none(index), codegen


# ---- floats --------------------------------------------------------------------------------------


def _float_binary_intrinsic(name: str):
    def typer(typingctx, a, b):
        if a not in _FLOATS or b != a:
            return None

        def codegen(context, builder, sig, args):
            fty = args[0].type
            fn = cgutils.get_or_insert_function(
                builder.module,
                ir.FunctionType(fty, [fty, fty]),
                f"llvm.{name}.{fty.intrinsic_name}",
            )
            return builder.call(fn, args)

        return a(a, b), codegen

    return intrinsic(typer)


# llvm.maximum/minimum are XLA's maximum/minimum exactly: NaN wins, -0 < +0. Unlike a chain of
# selects, LLVM vectorizes reductions over them (a row max runs at memory speed).
fmax = _float_binary_intrinsic("maximum")
fmin = _float_binary_intrinsic("minimum")


# ---- the shared helpers (codegen/helpers.py), compiled over the intrinsics above ---------------

_shared = scalar_helpers(njit(**_JIT), bitcast=bitcast, copysign=copysign, signbit=signbit)
ftz = _shared.ftz
complex_divide = _shared.complex_divide
fsign = _shared.fsign
total_order_key = _shared.total_order_key
float_to_int = _shared.float_to_int
sdiv = _shared.sdiv
srem = _shared.srem
udiv = _shared.udiv
urem = _shared.urem
ipow = _shared.ipow
mulhi64 = _shared.mulhi64
bf16_load = _shared.bf16_load
bf16_store = _shared.bf16_store
round_bf16 = _shared.round_bf16
reduce_precision_bits = _shared.reduce_precision_bits
philox4x32 = _shared.philox4x32
threefry2x32 = _shared.threefry2x32
