"""Runtime: what backends return (executables, argument checks, metrics, devices, limits)."""

from .executable import Executable

__all__ = ["Executable"]
