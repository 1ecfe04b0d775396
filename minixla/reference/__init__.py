"""Reference semantics: what every opcode means, evaluated with NumPy.

The evaluator and its op handlers sit just above the IR, so constant folding, the while
simplifier and every backend's fallback share one definition of each op; the interpreter
backend is a thin wrapper around it. The custom-call registry and the rendezvous that
collectives exchange through live here too, because they are part of what those ops mean.
"""

from . import linalg_calls  # registers the minixla_linalg_* targets  # noqa: F401
