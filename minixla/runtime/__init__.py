"""Runtime: executables, argument checking, the custom-call registry and metrics."""
from .compile import compile
from .custom_call import register_custom_call
from .executable import Executable
from .metrics import metrics

__all__ = ["Executable", "compile", "metrics", "register_custom_call"]
