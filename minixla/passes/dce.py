"""Dead code elimination: instructions whose values nobody uses, and unreachable computations.

Live means reachable from the root through operands and control edges, or side-effecting
(directly, or through a computation it calls). Parameters always stay: they are the
computation's signature.
"""

from __future__ import annotations

from ..ir.module import HloModule
from .base import Pass, register_pass


@register_pass
class DeadCodeElimination(Pass):
    name = "dce"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computations:
            changed |= comp.remove_dead()
        # after the instructions: a removed call can leave its callee unreachable
        return module.remove_unreachable_computations() or changed
