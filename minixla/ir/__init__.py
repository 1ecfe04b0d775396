"""The HLO IR: element types, shapes, layouts, instructions, computations, modules, opcodes."""

from .attrs import ATTR_KINDS, ConvDims, Raw, Window, WindowDim, parse_dim_labels
from .computation import HloComputation
from .dtypes import ELEMENT_TYPES, ElementType, element_type, from_numpy, numpy_dtype
from .instruction import HloInstruction
from .module import AliasEntry, HloModule, ProgramShape
from .opcodes import OPCODES, OpDef, opdef
from .shape_inference import infer_shape
from .shapes import Layout, Shape, default_layout, scalar

__all__ = [
    "ATTR_KINDS",
    "AliasEntry",
    "ConvDims",
    "ELEMENT_TYPES",
    "ElementType",
    "HloComputation",
    "HloInstruction",
    "HloModule",
    "Layout",
    "OPCODES",
    "OpDef",
    "ProgramShape",
    "Raw",
    "Shape",
    "Window",
    "WindowDim",
    "default_layout",
    "element_type",
    "infer_shape",
    "from_numpy",
    "numpy_dtype",
    "opdef",
    "parse_dim_labels",
    "scalar",
]
