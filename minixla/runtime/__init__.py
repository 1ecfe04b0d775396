"""Runtime: executables, argument checking, the custom-call registry and metrics."""
from .compile import compile
from .custom_call import register_custom_call
from .executable import Executable

__all__ = ["Executable", "compile", "register_custom_call"]
from . import linalg_calls  # registers the minixla_linalg_* targets  # noqa: E402,F401
