"""Compiler passes: the pass contract, pipelines, the registry and the built-in passes."""

from .base import (
    PASSES,
    DumpOptions,
    FixedPoint,
    Pass,
    PassError,
    PassReport,
    Pipeline,
    get_pass,
    make_pipeline,
    register_pass,
    run_pipeline,
)
from .rematerialization import RematerializationError

__all__ = [
    "PASSES",
    "DumpOptions",
    "FixedPoint",
    "Pass",
    "PassError",
    "PassReport",
    "Pipeline",
    "get_pass",
    "make_pipeline",
    "register_pass",
    "run_pipeline",
    "RematerializationError",
]
