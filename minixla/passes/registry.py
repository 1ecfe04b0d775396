"""Imports every built-in pass module so that each registers its passes by name."""

import importlib as _importlib

# Each pass module calls register_pass at import; list new modules here.
PASS_MODULES: list[str] = [
    "dce",
    "cse",
    "tuple_simplifier",
    "call_inliner",
    "scan_expander",
    "constant_folding",
    "algsimp",
    "float_normalization",
    "fusion",
    "row_fusion",
    "layout_assignment",
    "copy_insertion",
    "scheduling",
    "while_simplifier",
    "conditional_simplifier",
    "movers",
    "dot_sums",
    "dot_strength",
    "winograd",
    "window_taps",
    "rematerialization",
    "spmd_partitioner",
    "auto_sharding",
]

for _name in PASS_MODULES:
    _importlib.import_module(f"{__package__}.{_name}")
