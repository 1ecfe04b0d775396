"""minixla.tree_util: registered nodes through flatten/unflatten, jit, vmap and lax loops."""

import collections
import dataclasses

import numpy as np
import pytest

import minixla
from minixla import lax, tree_util, vmap


@tree_util.register_dataclass
@dataclasses.dataclass
class Linear:
    w: np.ndarray
    b: np.ndarray
    name: str = dataclasses.field(default="linear", metadata={"static": True})


@tree_util.register_pytree_node_class
class Pair:
    def __init__(self, first, second):
        self.first, self.second = first, second

    def tree_flatten(self):
        return (self.first, self.second), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


Point = collections.namedtuple("Point", "x y")


def test_flatten_unflatten_round_trips_every_kind_of_node():
    tree = {
        "layer": Linear(np.ones(2), np.zeros(1)),
        "pair": Pair(1, (2, None)),
        "pt": Point(3, [4, 5]),
    }
    leaves, treedef = tree_util.tree_flatten(tree)
    assert [np.asarray(x).tolist() for x in leaves] == [[1.0, 1.0], [0.0], 1, 2, 3, 4, 5]
    rebuilt = tree_util.tree_unflatten(treedef, leaves)
    assert isinstance(rebuilt["layer"], Linear) and rebuilt["layer"].name == "linear"
    assert isinstance(rebuilt["pair"], Pair) and rebuilt["pair"].second == (2, None)
    assert rebuilt["pt"] == Point(3, [4, 5])
    assert treedef.num_leaves == 7 and hash(treedef) == hash(tree_util.tree_structure(tree))
    assert "Linear" in str(treedef) and treedef.unflatten(range(7))["pt"].x == 4


def test_static_dataclass_fields_are_part_of_the_structure():
    a = tree_util.tree_structure(Linear(1.0, 2.0, "a"))
    b = tree_util.tree_structure(Linear(1.0, 2.0, "b"))
    assert a != b and a == tree_util.tree_structure(Linear(5.0, 6.0, "a"))


def test_map_reduce_and_is_leaf():
    tree = {"a": (1, 2), "b": [3]}
    assert tree_util.tree_map(lambda x, y: x * 10 + y, tree, tree) == {"a": (11, 22), "b": [33]}
    assert tree_util.tree_reduce(lambda a, b: a + b, tree) == 6
    assert tree_util.tree_reduce(lambda a, b: a + b, [], 7) == 7
    assert tree_util.tree_leaves(tree, is_leaf=lambda n: isinstance(n, tuple)) == [(1, 2), 3]
    assert tree_util.tree_all([True, (1, True)])
    with pytest.raises(minixla.FrontendError, match="trees differ"):
        tree_util.tree_map(lambda x, y: x, tree, {"a": (1, 2), "b": 3})


def test_paths():
    tree = {"layer": Linear(1.0, 2.0), "pt": Point(3, [4])}
    paths = [tree_util.keystr(p) for p, _ in tree_util.tree_flatten_with_path(tree)[0]]
    assert paths == ["['layer'].w", "['layer'].b", "['pt'].x", "['pt'].y[0]"]
    out = tree_util.tree_map_with_path(lambda p, v: len(p) * v, tree)
    assert out["pt"].y == [12] and out["layer"].w == 2.0


def test_registered_nodes_through_jit_vmap_and_loops():
    layer = Linear(np.float32([[1, 2], [3, 4]]), np.float32([0.5, -1]))

    @minixla.jit(backend="interpreter")
    def apply(p, xs):
        ys = vmap(lambda x: x @ p.w + p.b)(xs)
        grown = lax.fori_loop(0, 2, lambda i, q: Linear(q.w * 2, q.b + 1, q.name), p)
        return ys, grown

    xs = np.float32([[1, 0], [0, 1], [1, 1]])
    ys, grown = apply(layer, xs)
    np.testing.assert_allclose(ys, xs @ layer.w + layer.b)
    assert isinstance(grown, Linear)
    np.testing.assert_allclose(grown.w, layer.w * 4)
    stacked = Linear(np.stack([layer.w] * 3), layer.b)
    ys = minixla.jit(
        vmap(lambda p, x: x @ p.w + p.b, in_axes=(Linear(0, None), 0)), backend="interpreter"
    )(stacked, xs)
    np.testing.assert_allclose(ys, xs @ layer.w + layer.b)


def test_registering_twice_is_an_error():
    with pytest.raises(minixla.FrontendError, match="already"):
        tree_util.register_pytree_node(Pair, lambda p: ((), None), lambda a, c: Pair(0, 0))
    with pytest.raises(minixla.FrontendError, match="not a dataclass"):
        tree_util.register_dataclass(Point)
