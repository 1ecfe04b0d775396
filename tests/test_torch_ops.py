"""Per-op lowering tests for minixla.torch: each ATen rule against eager torch.

Each function is traced to an ATen graph above autograd (make_fx, pre-dispatch) and handed to
`DynamoGraph`, the object the "minixla" dynamo backend wraps every captured graph in: the same
AOTAutograd path (decompositions, functionalization, forward and backward graphs lowered)
without dynamo's own tracing, which keeps these tests fast. They run on the interpreter.
"""

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

from minixla.torch import TorchLoweringError, TorchOptions, compile_graph  # noqa: E402
from minixla.torch.aten import LOWERINGS  # noqa: E402
from minixla.torch.backend import DECOMPOSITIONS, DynamoGraph  # noqa: E402
from minixla.torch.lowering import lower_graph  # noqa: E402

OPTIONS = TorchOptions("interpreter")


def lowered(fn, *inputs):
    gm = make_fx(fn, decomposition_table=DECOMPOSITIONS)(*inputs)
    return gm, compile_graph(gm, list(inputs), OPTIONS)


def as_tuple(value):
    return tuple(torch.utils._pytree.tree_leaves(value))


def compiled(fn, *inputs):
    """`fn` as the minixla backend runs it: a tuple-returning graph through DynamoGraph."""
    traced = make_fx(lambda *args: as_tuple(fn(*args)), pre_dispatch=True)(
        *[x.clone() for x in inputs]
    )
    return DynamoGraph(traced, OPTIONS)


def check(fn, *inputs, rtol=1e-5, atol=1e-6):
    with torch.no_grad():
        got = compiled(fn, *inputs)(*inputs)
        want = as_tuple(fn(*inputs))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g, w, rtol=rtol, atol=atol, equal_nan=True)


def rand(*dims, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed + sum(dims))
    return torch.randn(*dims, generator=gen).to(dtype)


def ints(high, *dims, seed=0):
    return torch.randint(0, high, dims, generator=torch.Generator().manual_seed(seed))


CASES = {
    "add_alpha": (lambda x, y: torch.add(x, y, alpha=2.5), rand(3, 4), rand(4)),
    "sub_scalar_mul": (lambda x: (x - 1.5) * 3, rand(2, 3)),
    "rsub_div": (lambda x, y: (1 - x) / y, rand(5), rand(5).abs() + 1),
    "int_float_promotion": (lambda i, x: i + x, ints(5, 3), rand(3)),
    "int_true_divide": (lambda i: i / 2, ints(9, 4)),
    "floor_divide": (
        lambda i, j: torch.div(i, j, rounding_mode="floor"),
        ints(9, 4) - 4,
        ints(3, 4) + 1,
    ),
    "trunc_divide": (lambda x, y: torch.div(x, y, rounding_mode="trunc"), rand(6), rand(6)),
    "remainder": (lambda x, y: torch.remainder(x, y), rand(6) * 4, rand(6, seed=1)),
    "unary_math": (
        lambda x: (
            torch.exp(x)
            + torch.log(x.abs() + 1)
            + torch.rsqrt(x.abs() + 1)
            + torch.tanh(x)
            + torch.sigmoid(x)
            + torch.erf(x)
            + x.sin() * x.cos()
        ),
        rand(3, 5),
    ),
    "pow_sqrt_recip": (lambda x: x**2 + x.abs() ** 1.5 + torch.reciprocal(x.abs() + 1), rand(4)),
    "relu_gelu": (lambda x: F.relu(x) + F.gelu(x) + F.gelu(x, approximate="tanh"), rand(7)),
    "silu_softplus_hardswish": (
        lambda x: F.silu(x) + F.softplus(x) + F.hardswish(x) + F.leaky_relu(x, 0.1) + F.elu(x),
        rand(9),
    ),
    "clamp": (lambda x: x.clamp(-0.5, 0.5) + x.clamp(min=0.1), rand(8)),
    "compare_where": (
        lambda x, y: torch.where(x > y, x, y * 2) + (x <= 0.1).float(),
        rand(3, 4),
        rand(4),
    ),
    "logical": (lambda x: (x > 0) & ~(x > 1) | (x < -1), rand(10)),
    "masked_fill": (lambda x: x.masked_fill(x < 0, -1e9), rand(2, 6)),
    "to_dtype": (lambda x: x.to(torch.float64) * 2 + x.to(torch.int32), rand(5) * 10),
    "bf16": (lambda x: (x.to(torch.bfloat16) * 3).float(), rand(6)),
    "view_permute_expand": (
        lambda x: x.view(2, 3, 4).permute(2, 0, 1).reshape(4, 6) + x.new_ones(1, 6),
        rand(6, 4),
    ),
    "expand_unsqueeze": (lambda x: x.unsqueeze(1).expand(3, 4, 2) * 1, rand(3, 2)),
    "slice_select": (lambda x: x[1:, ::2] + x[0, 1:4:2].sum() + x[:2, -1:], rand(3, 6)),
    "cat_stack_flip": (
        lambda x, y: torch.cat([x, y.flip(0)], 0) + torch.stack([x, y]).sum(0).repeat(2, 1),
        rand(2, 3),
        rand(2, 3),
    ),
    "pad": (lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), rand(2, 3)),
    "full_arange": (lambda x: x + torch.arange(3, 15, 3) + torch.full((4,), 2.0), rand(4)),
    "sum_mean": (lambda x: x.sum() + x.sum(1).mean() + x.mean((0, 2), keepdim=True), rand(2, 3, 4)),
    "var_std": (lambda x: x.var(0) + x.std(1, keepdim=True) + x.var(unbiased=False), rand(4, 5)),
    "amax_amin": (lambda x: x.amax(1).sum() - x.amin(0) + x.max(), rand(3, 4)),
    "argmax_argmin": (
        lambda x: x.argmax(1) + x.argmin() + x.argmax(0, keepdim=True).sum(),
        torch.tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 0.0]]),
    ),
    "max_dim": (lambda x: x.max(1), rand(3, 5)),
    "any_all": (lambda x: (x > 0).any(1) | (x > -5).all(), rand(3, 4)),
    "cumsum": (lambda x: x.cumsum(1), rand(2, 5)),
    "softmax": (lambda x: x.softmax(-1) + x.log_softmax(0), rand(3, 7)),
    "mm_addmm_bmm": (
        lambda a, b, c: a @ b + torch.addmm(c, a, b, beta=0.5, alpha=2),
        rand(3, 4),
        rand(4, 5),
        rand(5),
    ),
    "bmm_baddbmm": (
        lambda a, b: torch.bmm(a, b) + torch.baddbmm(torch.ones(1, 3, 2), a, b),
        rand(2, 3, 4),
        rand(2, 4, 2),
    ),
    "matmul_batched": (lambda a, b: a @ b, rand(2, 3, 4), rand(4, 6)),
    "linear": (lambda x, w, b: F.linear(x, w, b), rand(2, 5, 4), rand(3, 4), rand(3)),
    "conv2d": (
        lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
        rand(2, 3, 7, 7),
        rand(4, 3, 3, 3),
        rand(4),
    ),
    "conv2d_groups_dilation": (
        lambda x, w: F.conv2d(x, w, padding=2, dilation=2, groups=2),
        rand(1, 4, 6, 6),
        rand(6, 2, 3, 3),
    ),
    "conv1d": (lambda x, w: F.conv1d(x, w, padding=1), rand(2, 3, 9), rand(5, 3, 3)),
    "conv3d": (lambda x, w: F.conv3d(x, w), rand(1, 2, 4, 4, 4), rand(3, 2, 2, 2, 2)),
    "conv_transpose2d": (
        lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
        rand(1, 3, 4, 4),
        rand(3, 2, 3, 3),
    ),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2), rand(2, 3, 6, 6)),
    "max_pool2d_pad_ceil": (
        lambda x: F.max_pool2d(x, 3, 2, padding=1, ceil_mode=True),
        rand(1, 2, 7, 7),
    ),
    "avg_pool2d": (
        lambda x: (
            F.avg_pool2d(x, 3, 2, padding=1)
            + F.avg_pool2d(x, 3, 2, padding=1, count_include_pad=False)
        ),
        rand(1, 2, 7, 7),
    ),
    "adaptive_avg_pool": (lambda x: F.adaptive_avg_pool2d(x, 1), rand(2, 3, 4, 4)),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (4,), w, b), rand(2, 3, 4), rand(4), rand(4)),
    "batch_norm_eval": (
        lambda x, m, v: F.batch_norm(x, m, v, training=False),
        rand(4, 3, 2),
        rand(3),
        rand(3).abs() + 0.5,
    ),
    "group_norm": (lambda x: F.group_norm(x, 2), rand(2, 4, 3)),
    "gather": (lambda x, i: x.gather(1, i), rand(3, 5), ints(5, 3, 2)),
    "scatter_add": (lambda x, i, s: x.scatter_add(0, i, s), rand(4, 3), ints(4, 2, 3), rand(2, 3)),
    "scatter": (
        lambda x, i, s: x.scatter(1, i, s),
        rand(2, 4),
        torch.tensor([[0, 2], [3, 1]]),
        rand(2, 2),
    ),
    "index_tensor": (
        lambda x, i, j: x[i] + x[:, j].sum() + x[i, j].sum(),
        rand(5, 4),
        torch.tensor([4, 0, -1]),
        torch.tensor([1, 3, 0]),
    ),
    "index_put": (
        lambda x, i, v: x.index_put((i,), v, accumulate=True),
        rand(5, 2),
        torch.tensor([0, 3, 0]),
        rand(3, 2),
    ),
    "index_select": (lambda x, i: x.index_select(1, i), rand(3, 4), torch.tensor([3, 1])),
    "embedding": (lambda w, i: F.embedding(i, w), rand(10, 4), ints(10, 2, 3)),
    "sdpa_causal": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        rand(1, 2, 4, 8),
        rand(1, 2, 4, 8, seed=1),
        rand(1, 2, 4, 8, seed=2),
    ),
    "sort_topk": (
        lambda x: (torch.sort(x, 0, descending=True), torch.topk(x, 2), x.argsort(-1)),
        torch.tensor([[1.0, 2.0, 5.0], [1.0, float("nan"), -1.0], [3.0, 0.0, 2.0]]),
    ),
    "split_unbind": (
        lambda x: [p * (i + 1) for i, p in enumerate(x.split([1, 3], 1))] + list(x.unbind(0)),
        rand(2, 4),
    ),
    "interpolate": (
        lambda x: (
            F.interpolate(x, scale_factor=2, mode="nearest"),
            F.interpolate(x, size=(5, 7), mode="bilinear"),
        ),
        rand(1, 2, 3, 4),
    ),
    "losses": (
        lambda x, t, y: (
            F.cross_entropy(x, t)
            + F.mse_loss(x, y)
            + F.l1_loss(x, y)
            + F.binary_cross_entropy_with_logits(x, y.sigmoid())
        ),
        rand(4, 5),
        ints(5, 4),
        rand(4, 5),
    ),
    "complex_views": (
        lambda x: (
            torch.view_as_real(torch.complex(x, x.flip(-1)).conj() * 2),
            torch.view_as_complex(x.reshape(3, 2, 2)).abs(),
        ),
        rand(3, 4),
    ),
    "shifts": (
        lambda i, u: (i << 3, i >> 2, i << 64, i >> 70, u >> 3, torch.bitwise_left_shift(i, i % 5)),
        torch.tensor([1, -7, 100, -(2**40)], dtype=torch.int64),
        torch.tensor([200, 7, 255, 1], dtype=torch.uint8),
    ),
    "vector_norms": (
        lambda x: (
            [
                torch.linalg.vector_norm(x, ord, dim=d)
                for ord, d in (
                    (2, None),
                    (1, 1),
                    (float("inf"), 0),
                    (-float("inf"), 1),
                    (0, 1),
                    (3.5, 1),
                )
            ]
            + [F.normalize(x, dim=0)]
        ),
        torch.tensor([[1.0, -2.0, 0.0], [0.5, 0.0, -3.0]]),
    ),
    "cummax_cummin": (
        lambda x: (x.cummax(1), x.cummin(1), x.cummax(0)),
        torch.tensor(
            [[1.0, 3.0, 3.0, 2.0, float("nan"), 5.0, float("nan")], [2, 1, 2, 2, 0, 0, 7]]
        ),
    ),
    "tensor_constants": (  # the graph holds the constant (an FX get_attr node)
        lambda x: x * torch.tensor([1.0, -2.0, 3.0]) + torch.tensor([[True], [False]]),
        rand(2, 3),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_eager(name):
    fn, *inputs = CASES[name]
    check(fn, *inputs)


def test_every_graph_op_has_a_rule_and_every_rule_key_is_an_aten_overload():
    assert all(isinstance(op, torch._ops.OpOverload) for op in LOWERINGS)
    gm, run = lowered(lambda x: F.gelu(x).sum(), rand(3))
    torch.testing.assert_close(run([rand(3)])[0], F.gelu(rand(3)).sum())
    assert all(n.target in LOWERINGS for n in gm.graph.nodes if n.op == "call_function")


def test_unsupported_op_names_it_and_the_fallback():
    fn = lambda x: torch.linalg.det(x)  # noqa: E731
    gm = make_fx(fn, decomposition_table=DECOMPOSITIONS)(rand(3, 3))
    with pytest.raises(TorchLoweringError, match=r"aten\..*det.*fallback"):
        compile_graph(gm, [rand(3, 3)], OPTIONS)


def test_eager_fallback_warns_and_still_computes():
    fn = lambda x: (torch.linalg.det(x) + 1,)  # noqa: E731
    x = rand(3, 3)
    gm = make_fx(fn, decomposition_table=DECOMPOSITIONS)(x)
    with pytest.warns(UserWarning, match="eagerly"):
        run = compile_graph(gm, [x], TorchOptions("interpreter", "eager"))
    torch.testing.assert_close(run([x])[0], fn(x)[0])


GRAD_CASES = {
    "conv2d_stride_groups": (
        lambda x, w: F.conv2d(x, w, stride=2, padding=1, groups=2),
        rand(2, 4, 7, 7),
        rand(6, 2, 3, 3),
    ),
    "conv1d_dilation": (lambda x, w: F.conv1d(x, w, dilation=2), rand(2, 3, 9), rand(4, 3, 3)),
    "max_pool2d": (lambda x: F.max_pool2d(x, 3, 2, padding=1), rand(1, 2, 7, 7)),
    "layer_norm_softmax": (lambda x, w: F.layer_norm(x, (4,), w).softmax(-1), rand(3, 4), rand(4)),
    "embedding": (
        lambda w: F.embedding(torch.tensor([[1, 2], [1, 0]]), w, padding_idx=0),
        rand(4, 3),
    ),
    "sdpa_mask": (
        lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, attn_mask=torch.tril(torch.ones(4, 4, dtype=torch.bool))
        ),
        rand(1, 2, 4, 8),
        rand(1, 2, 4, 8, seed=1),
        rand(1, 2, 4, 8, seed=2),
    ),
    "conv_transpose_groups": (
        lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1, groups=3),
        rand(2, 3, 4, 4),
        rand(3, 2, 3, 3),
    ),
    "conv1d_stride_overhang": (
        lambda x, w: F.conv1d(x, w, stride=3, padding=2),
        rand(2, 3, 10),
        rand(4, 3, 4),
    ),
    "avg_pool2d_ceil": (
        lambda x: F.avg_pool2d(x, 3, 2, padding=1, ceil_mode=True, count_include_pad=False),
        rand(1, 2, 7, 7),
    ),
    "adaptive_avg_pool": (lambda x: F.adaptive_avg_pool2d(x, (3, 2)), rand(1, 2, 7, 5)),
    "instance_group_norm": (lambda x: F.instance_norm(x) + F.group_norm(x, 2), rand(2, 4, 5)),
    "lstm_cell": (
        lambda x, h, w1, w2: torch.lstm_cell(x, (h, h), w1, w2)[0],
        rand(2, 4),
        rand(2, 3),
        rand(12, 4),
        rand(12, 3),
    ),
    "bilinear": (lambda x: F.interpolate(x, size=(5, 7), mode="bilinear"), rand(1, 2, 3, 4)),
    "cdist": (
        lambda a, b: torch.stack([torch.cdist(a, b, p) for p in (2.0, 1.0, 3.0, float("inf"))]),
        rand(2, 4, 3),
        rand(2, 5, 3, seed=1),
    ),
    "adaptive_max_pool": (lambda x: F.adaptive_max_pool2d(x, (3, 2)), rand(2, 2, 7, 5)),
    "embedding_bag_sum_mean": (
        lambda w, s: (
            F.embedding_bag(torch.tensor([1, 2, 4, 5, 4, 3, 0]), w, torch.tensor([0, 2, 2, 5]))
            + F.embedding_bag(
                torch.tensor([1, 0, 4, 5, 4, 3]),
                w,
                torch.tensor([0, 2, 6]),
                mode="mean",
                padding_idx=0,
                include_last_offset=True,
            ).sum()
            + F.embedding_bag(
                torch.tensor([[1, 2], [3, 3]]), w, per_sample_weights=s, mode="sum"
            ).sum()
        ),
        rand(6, 3),
        rand(2, 2),
    ),
    "gather_index": (
        lambda x: x.gather(1, torch.tensor([[0, 0], [2, 1]])).sum() + x[torch.tensor([1, 1])].sum(),
        rand(2, 3),
    ),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradients_match_eager(name):
    fn, *inputs = GRAD_CASES[name]
    run = compiled(fn, *inputs)
    ours = [x.clone().requires_grad_() for x in inputs]
    theirs = [x.clone().requires_grad_() for x in inputs]
    out, want = run(*ours)[0], fn(*theirs)
    seed = torch.randn(want.shape, generator=torch.Generator().manual_seed(3))
    (out * seed).sum().backward()
    (want * seed).sum().backward()
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-5)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5)


def test_dropout_uses_a_fresh_seeded_mask_and_its_gradient_matches_it():
    x = rand(200, 50)
    run = compiled(lambda t: F.dropout(t, 0.25, training=True) * 2, x)
    leaf = x.clone().requires_grad_()
    torch.manual_seed(3)
    out = run(leaf)[0]
    out.sum().backward()
    kept = out != 0
    assert abs(kept.float().mean().item() - 0.75) < 0.02  # 10,000 draws: 0.75 +- 0.004
    torch.testing.assert_close(out[kept], x[kept] * 2 / 0.75)
    torch.testing.assert_close(leaf.grad, kept.float() * 2 / 0.75)
    with torch.no_grad():
        assert not torch.equal(run(x)[0], out.detach())  # a new mask per call
        torch.manual_seed(3)
        assert torch.equal(run(x)[0], out.detach())  # torch's seed decides the mask


def test_outputs_never_share_memory_with_each_other():
    def fn(t):
        doubled = t * 2
        return doubled, doubled  # one HLO value in two result slots

    x = rand(3)
    gm = make_fx(fn, decomposition_table=DECOMPOSITIONS)(x)
    first, second = compile_graph(gm, [x], OPTIONS)([x])
    first.add_(1)  # autograd and optimizers update outputs in place
    torch.testing.assert_close(second, x * 2)


def test_a_returned_input_is_the_callers_tensor_and_a_clone_is_not():
    def fn(t, w):
        return t, w.clone(), t * w  # a forward graph handing its inputs to the backward graph

    x, w = rand(3), rand(3, seed=1)
    gm = make_fx(fn, decomposition_table=DECOMPOSITIONS)(x, w)
    module, signature = lower_graph(gm, [x, w])
    assert signature.outputs == [("input", 0), 0, 1]  # no copy of the input in the module
    assert len(module.entry.root.operands) == 2
    same, cloned, product = compile_graph(gm, [x, w], OPTIONS)([x, w])
    assert same is x
    cloned.add_(1)  # a clone is the caller's to change
    torch.testing.assert_close(w, rand(3, seed=1))
    torch.testing.assert_close(product, x * w)


def test_a_linear_layers_forward_saves_its_input_and_weight_without_copies():
    layer = torch.nn.Linear(4, 3)
    compiled_layer = torch.compile(layer, backend="minixla", options={"backend": "interpreter"})
    x = rand(2, 4, seed=2).requires_grad_()
    want = layer(x)
    want.sum().backward()
    grads = [t.grad.clone() for t in (x, *layer.parameters())]
    x.grad = None
    layer.zero_grad()
    got = compiled_layer(x)
    saved = {s.data_ptr() for s in got.grad_fn.saved_tensors}
    assert {x.data_ptr(), layer.weight.data_ptr()} <= saved
    got.sum().backward()
    torch.testing.assert_close(got, want)
    for t, g in zip((x, *layer.parameters()), grads):
        torch.testing.assert_close(t.grad, g)


def _pool_input(dims, seed=0):
    """Random values with ties (a row copied from its neighbour) and a NaN, which decide
    torch's indices: the first maximum of a window wins, a NaN wins over anything."""
    x = rand(*dims, seed=seed)
    x[..., 1, :2] = x[..., 1, 2:4]
    x.view(-1)[5] = float("nan")
    return x


POOLS = {
    "2x2": (F.max_pool2d_with_indices, (2, 3, 6, 6), dict(kernel_size=2)),
    "2x2_floor_overhang": (F.max_pool2d_with_indices, (1, 2, 7, 5), dict(kernel_size=2)),
    "3x3_s2_pad_ceil": (
        F.max_pool2d_with_indices,
        (1, 2, 7, 7),
        dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    ),
    "3x3_s1_pad": (
        F.max_pool2d_with_indices,
        (2, 2, 6, 5),
        dict(kernel_size=3, stride=1, padding=1),
    ),
    "dilated_rect": (
        F.max_pool2d_with_indices,
        (2, 2, 9, 8),
        dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1), dilation=(2, 1)),
    ),
    "tiles_padded_ceil": (
        F.max_pool2d_with_indices,
        (1, 2, 7, 9),
        dict(kernel_size=3, stride=3, padding=1, ceil_mode=True),
    ),
    "unbatched": (F.max_pool2d_with_indices, (3, 6, 6), dict(kernel_size=2)),
    "large_window": (F.max_pool2d_with_indices, (1, 2, 9, 9), dict(kernel_size=6, stride=3)),
    "3d": (F.max_pool3d_with_indices, (1, 2, 5, 4, 6), dict(kernel_size=2, padding=1)),
    "1d": (F.max_pool1d_with_indices, (2, 3, 9), dict(kernel_size=3, stride=2)),
}


@pytest.mark.parametrize("name", sorted(POOLS))
def test_max_pool_values_indices_and_gradient_follow_torch(name):
    pool, dims, kwargs = POOLS[name]
    x = _pool_input(dims)
    fn = lambda t: pool(t, **kwargs)  # noqa: E731
    check(fn, x)  # values (NaN included) and indices exactly as torch's
    run = compiled(lambda t: pool(t, **kwargs)[0], x)
    ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    want = pool(theirs, **kwargs)[0]
    seed = torch.randn(want.shape, generator=torch.Generator().manual_seed(3))
    (run(ours)[0] * seed).sum().backward()
    (want * seed).sum().backward()
    torch.testing.assert_close(ours.grad, theirs.grad)


def test_max_pool_of_an_all_minus_infinity_window_names_its_first_element():
    x = torch.full((1, 1, 5, 5), float("-inf"))
    check(lambda t: F.max_pool2d_with_indices(t, 2, ceil_mode=True), x)
    check(lambda t: F.max_pool2d_with_indices(t, 3, 2, padding=1), x)
