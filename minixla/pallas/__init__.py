"""`minixla.pallas`: custom kernels over blocks in the style of jax.experimental.pallas.

    import minixla.pallas as pl
    out = pl.pallas_call(kernel, out_shape=minixla.ShapeDtypeStruct(shape, dtype), grid=...,
                         in_specs=[pl.BlockSpec(block, index_map)], out_specs=...)(x, y)

See docs/pallas.md.
"""

from ..frontend.shape_struct import ShapeDtypeStruct
from .core import (
    BlockSpec,
    PallasCall,
    PallasError,
    Ref,
    Slice,
    VMEM,
    cdiv,
    ds,
    dslice,
    load,
    num_programs,
    pallas_call,
    program_id,
    store,
    when,
)

__all__ = [
    "BlockSpec",
    "PallasCall",
    "PallasError",
    "Ref",
    "ShapeDtypeStruct",
    "Slice",
    "VMEM",
    "cdiv",
    "ds",
    "dslice",
    "load",
    "num_programs",
    "pallas_call",
    "program_id",
    "store",
    "when",
]
