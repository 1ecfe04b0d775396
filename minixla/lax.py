"""`minixla.lax`: structured control flow (lowered to HLO while/conditional) and a few
direct HLO ops, in the style of jax.lax; see docs/frontend.md."""
from .frontend.lax_api import (cond, dynamic_slice, dynamic_update_slice, fori_loop, scan,
                               select, switch, while_loop)
from .frontend.numpy_api import erf
from .frontend.numpy_linalg import dot_general
from .frontend.shard_map import (all_gather, all_to_all, axis_index, pmax, pmean, pmin,
                                 ppermute, psum, psum_scatter)
from .frontend.sharding import with_sharding_constraint

__all__ = ["cond", "dot_general", "dynamic_slice", "dynamic_update_slice", "erf", "fori_loop",
           "scan", "select", "switch", "while_loop", "all_gather", "all_to_all", "axis_index",
           "pmax", "pmean", "pmin", "ppermute", "psum", "psum_scatter",
           "with_sharding_constraint"]
