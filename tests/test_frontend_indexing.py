"""Indexing and `.at[]` updates of traced arrays against NumPy (fancy indexing -> gather,
updates -> scatter), on every available backend."""

import numpy as np
import pytest

import minixla
import minixla.backends
import minixla.numpy as mnp

BACKENDS = ["interpreter"] + (["cpu"] if minixla.backends.available().get("cpu") is True else [])


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


A = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
IDX = np.array([2, 0, 2], np.int32)

STATIC_INDICES = [
    1,
    -1,
    (0, 2),
    (-1, -2, -3),
    slice(1, 3),
    slice(None, None, 2),
    slice(None, None, -1),
    (slice(None), slice(3, 0, -2)),
    (Ellipsis, 1),
    (1, Ellipsis),
    (None, 0),
    (slice(None), None),
    (0, None, slice(1, None), None),
    (Ellipsis, slice(-2, None), None),
    (),
    slice(5, 1),
    (slice(None), slice(None), slice(4, None, -3)),
    # advanced
    np.array([2, 0]),
    [0, 0, 1],
    (IDX, 1),
    (slice(None), IDX),
    (IDX, np.array([1, 3, 0])),
    (IDX, slice(None), np.array([4, 0, 1])),
    (slice(None), IDX, np.array([[0], [4]])),
    (0, slice(None), IDX),
    (np.array([[1, 0], [2, 2]]),),
    (Ellipsis, np.array([-1, 0])),
    (None, IDX),
    (IDX, None, slice(1, 3)),
    A[:, :, 0] > 20,
    (slice(None), A[0] > 10),
]


@pytest.mark.parametrize("index", STATIC_INDICES, ids=repr)
def test_static_getitem_matches_numpy(index, backend):
    got = minixla.jit(lambda a: a[index], backend=backend)(A)
    np.testing.assert_array_equal(got, A[index])


def test_traced_integer_indices(backend):
    def f(a, i, j, idx):
        return a[i], a[1, j], a[:, i, 1:], a[idx], a[idx, i], a[i, idx]

    i, j = np.int32(2), np.int32(-1)
    got = minixla.jit(f, backend=backend)(A, i, j, IDX)
    want = (A[2], A[1, -1], A[:, 2, 1:], A[IDX], A[IDX, 2], A[2, IDX])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_traced_index_inside_a_loop(backend):
    def f(a):
        return minixla.lax.fori_loop(0, 3, lambda i, acc: acc + a[i], mnp.zeros((4, 5)))

    np.testing.assert_array_equal(minixla.jit(f, backend=backend)(A), A.sum(0))


def test_getitem_lowers_to_gather_only_for_array_indices():
    basic = minixla.jit(lambda a: a[1:, ::-2]).lower(A).as_text()
    assert "gather" not in basic and "slice" in basic and "reverse" in basic
    fancy = minixla.jit(lambda a: a[IDX]).lower(A).as_text()
    assert "gather(" in fancy


UPDATES = [
    ("set_int", lambda a: a.at[1].set(0.0), lambda a: _np_set(a, 1, 0.0)),
    (
        "set_slice",
        lambda a: a.at[:, 1:3].set(-1),
        lambda a: _np_set(a, (slice(None), slice(1, 3)), -1),
    ),
    (
        "set_broadcast",
        lambda a: a.at[0, :, 2].set(np.arange(4, dtype=np.float32)),
        lambda a: _np_set(a, (0, slice(None), 2), np.arange(4)),
    ),
    (
        "add_dup",
        lambda a: a.at[np.array([0, 0, 2])].add(1.0),
        lambda a: _np_at(np.add, a, np.array([0, 0, 2]), 1.0),
    ),
    (
        "mul",
        lambda a: a.at[..., ::2].mul(2.0),
        lambda a: _np_at(np.multiply, a, (Ellipsis, slice(None, None, 2)), 2.0),
    ),
    ("min", lambda a: a.at[1, 2].min(5.0), lambda a: _np_at(np.minimum, a, (1, 2), 5.0)),
    ("max", lambda a: a.at[IDX, 0].max(30.0), lambda a: _np_at(np.maximum, a, (IDX, 0), 30.0)),
    ("get", lambda a: a.at[IDX].get(), lambda a: a[IDX]),
]


def _np_set(a, index, value):
    out = a.copy()
    out[index] = value
    return out


def _np_at(ufunc, a, index, value):
    out = a.copy()
    ufunc.at(out, index, value)
    return out


@pytest.mark.parametrize("name,fn,ref", UPDATES, ids=[u[0] for u in UPDATES])
def test_at_updates_match_numpy(name, fn, ref, backend):
    np.testing.assert_array_equal(minixla.jit(fn, backend=backend)(A), ref(A))


def test_at_update_with_traced_index(backend):
    def f(a, i, v):
        return a.at[i, 1].set(v), a.at[i].add(v)

    got = minixla.jit(f, backend=backend)(A, np.int32(-1), np.float32(7))
    np.testing.assert_array_equal(got[0], _np_set(A, (-1, 1), 7))
    np.testing.assert_array_equal(got[1], _np_at(np.add, A, -1, 7))
    assert "scatter(" in minixla.jit(f).lower(A, np.int32(0), np.float32(1)).as_text()


@pytest.mark.parametrize(
    "index,match",
    [
        (5, "index 5 is out of bounds for axis 0 with size 3"),
        ((0, 0, 0, 0), "too many indices"),
        ((Ellipsis, Ellipsis), "single ellipsis"),
        (np.array([0.5]), "integer type"),
        (np.array([0, 3]), "index 3 is out of bounds"),
    ],
)
def test_bad_static_indices_raise(index, match):
    with pytest.raises(minixla.FrontendIndexError, match=match) as info:
        minixla.jit(lambda a: a[index]).lower(A)
    assert "test_frontend_indexing.py:" in str(info.value)


def test_traced_boolean_mask_is_rejected():
    with pytest.raises(minixla.FrontendIndexError, match="data-dependent"):
        minixla.jit(lambda a: a[a > 3]).lower(A)
