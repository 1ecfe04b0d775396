"""What a kernel is made of, on every target: the fused computation's outputs, its arguments
(parameters, array constants, outputs) and their ranks and types, whether one flat index
addresses every array (a lone op comes as a one-instruction computation:
passes/hlo_utils.single_op_computation).

A backend's kernel builder (cpu/kernels.py, cuda/kernels.py) starts from these and adds its own
loops and launch parameters.
"""

from __future__ import annotations

from .plan import is_view_op
from .scalar import NotEmittable, kernel_type


def leaf_shape(instr, k):
    """The shape of output leaf `k` of `instr` (None: the instruction's own array shape)."""
    return instr.shape if k is None else instr.shape.tuple_shapes[k]


def outputs_of(comp) -> list:
    """The fusion's results: root tuple elements, or the root (variadic reduce: its leaves)."""
    root = comp.root
    if root.opcode == "tuple":
        if any(op.shape.is_tuple for op in root.operands):
            raise NotEmittable("nested tuple outputs")
        return [(op, None) for op in root.operands]
    if root.shape.is_tuple:
        if root.opcode != "reduce":
            raise NotEmittable(f"tuple-shaped {root.opcode} root")
        return [(root, k) for k in range(len(root.shape.tuple_shapes))]
    return [(root, None)]


def is_flat(comp, outputs) -> bool:
    """Every array in the fusion has the output's dims (or is a scalar) and nothing moves data,
    so one flat index addresses all of them."""
    dims = leaf_shape(*outputs[0]).dims
    for instr, k in outputs:
        if leaf_shape(instr, k).dims != dims:
            return False
    for instr in comp.instructions:
        if instr.shape.is_tuple or instr.opcode == "tuple":
            if instr is not comp.root:
                return False
            continue
        if instr.shape.rank and instr.shape.dims != dims:
            return False
        if instr.opcode in ("broadcast",) and instr.operand(0).shape.rank != 0:
            return False
        if instr.opcode == "bitcast" and not is_view_op(instr):
            return False  # moves elements through layouts
        if instr.opcode in (
            "iota",
            "reduce",
            "transpose",
            "slice",
            "reverse",
            "pad",
            "concatenate",
            "dynamic-slice",
            "dynamic-update-slice",
            "gather",
        ):
            return False
    return True


def kernel_signature(comp, outputs, flat: bool):
    """The kernel's arguments: parameters (by number), array constants, then outputs.

    Returns (params, arrays, args, ndims, dtypes, arg_names): `arrays` maps id(instr) to the
    name the kernel body reads it by, `args` says what each argument is ("param"/"const"/"out").
    Raises NotEmittable when some argument's dtype has no kernel type."""
    params = sorted(comp.parameters, key=lambda p: p.parameter_number)
    constants = [i for i in comp.post_order() if i.opcode == "constant" and i.shape.rank]
    arrays, args, ndims, dtypes = {}, [], [], []
    for p in params:
        arrays[id(p)] = f"p{p.parameter_number}"
        args.append(("param", p.parameter_number))
        _add_arg(p.shape, flat, ndims, dtypes)
    for k, c in enumerate(constants):
        arrays[id(c)] = f"c{k}"
        args.append(("const", c))
        _add_arg(c.shape, flat, ndims, dtypes)
    for k, (instr, leaf) in enumerate(outputs):
        args.append(("out", k))
        _add_arg(leaf_shape(instr, leaf), flat, ndims, dtypes)
    for d in dtypes:
        kernel_type(d)
    arg_names = (
        [arrays[id(p)] for p in params]
        + [arrays[id(c)] for c in constants]
        + [f"o{k}" for k in range(len(outputs))]
    )
    return params, arrays, args, ndims, dtypes, arg_names


def _add_arg(shape, flat: bool, ndims: list, dtypes: list) -> None:
    ndims.append(1 if flat or shape.rank == 0 else shape.rank)  # scalars: 1-element arrays
    dtypes.append(shape.dtype)
