"""`minixla.sharding`: meshes and named shardings, as in jax.sharding (docs/sharding.md)."""

from .frontend.sharding import Mesh, NamedSharding, PartitionSpec
from .ir.sharding import HloSharding

__all__ = ["HloSharding", "Mesh", "NamedSharding", "PartitionSpec"]
