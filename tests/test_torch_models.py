"""Whole models through `torch.compile(model, backend="minixla")`: outputs, every parameter's
gradient, BatchNorm's running statistics and optimizer steps against eager torch."""

import copy
import os

import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402

import minixla.torch  # noqa: E402,F401  (registers the backend)
from minixla.torch import TorchLoweringError, TorchOptionsError  # noqa: E402

OPTIONS = {"backend": "interpreter"}


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.pool(torch.relu(self.norm(self.conv(x)))), 1))


def mlp():
    return nn.Sequential(
        nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4)
    )


def transformer():
    return nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)


class MaskedEncoder(nn.Module):
    """A transformer layer with a key padding mask (the second sequence has 2 pad tokens)."""

    def __init__(self):
        super().__init__()
        self.layer = transformer()
        self.register_buffer("mask", torch.tensor([[False] * 5, [False] * 3 + [True] * 2]))

    def forward(self, x):
        return self.layer(x, src_key_padding_mask=self.mask)


class PaddedConvs(nn.Module):
    def __init__(self):
        super().__init__()
        self.reflect = nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect")
        self.circular = nn.Conv2d(3, 2, 3, padding=1, padding_mode="circular")
        self.norm = nn.BatchNorm2d(2)

    def forward(self, x):
        return self.norm(self.circular(torch.tanh(self.reflect(x))))


MODELS = {
    "mlp": (mlp, (8, 16)),
    "masked_encoder": (MaskedEncoder, (2, 5, 16)),
    "padded_convs": (PaddedConvs, (2, 2, 5, 5)),
    "cnn": (SmallCNN, (4, 3, 8, 8)),
    "transformer": (transformer, (2, 5, 16)),
}


def make(name, seed=0):
    factory, dims = MODELS[name]
    torch.manual_seed(seed)
    model = factory()
    return model, torch.randn(*dims)


def compile_model(model):
    torch._dynamo.reset()
    return torch.compile(model, backend="minixla", options=OPTIONS)


def assert_close(a, b):
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_forward_and_backward_match_eager(name):
    model, x = make(name)
    eager = copy.deepcopy(model)
    out = compile_model(model)(x)
    want = eager(x)
    assert_close(out, want)
    weights = torch.randn(want.shape, generator=torch.Generator().manual_seed(1))
    (out * weights).sum().backward()
    (want * weights).sum().backward()
    for (pname, p), q in zip(model.named_parameters(), eager.parameters()):
        assert p.grad is not None, pname
        assert_close(p.grad, q.grad)
    for (bname, b), c in zip(model.named_buffers(), eager.buffers()):
        assert torch.equal(b, c) if not b.is_floating_point() else True, bname
        assert_close(b.float(), c.float())


@pytest.mark.parametrize("name,optimizer", [("mlp", "adam"), ("cnn", "sgd")])
def test_training_steps_give_eager_losses(name, optimizer):
    model, x = make(name)
    eager = copy.deepcopy(model)
    target = torch.randn(eager(x).shape, generator=torch.Generator().manual_seed(2))
    compiled = compile_model(model)
    make_opt = {
        "adam": lambda p: torch.optim.Adam(p, lr=1e-2),
        "sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    }[optimizer]
    losses = []
    for net, forward in ((model, compiled), (eager, eager)):
        opt = make_opt(net.parameters())
        run = []
        for _ in range(3):
            opt.zero_grad()
            loss = nn.functional.mse_loss(forward(x), target)
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses.append(run)
    assert losses[0][-1] < losses[0][0]  # it trains
    torch.testing.assert_close(
        torch.tensor(losses[0]), torch.tensor(losses[1]), rtol=1e-4, atol=1e-6
    )
    for p, q in zip(model.parameters(), eager.parameters()):
        assert_close(p, q)


@pytest.mark.parametrize("rnn", [nn.LSTM, nn.GRU], ids=["lstm", "gru"])
def test_recurrent_layers_with_allow_rnn(rnn):
    torch.manual_seed(0)
    model = rnn(4, 6, batch_first=True)
    eager = copy.deepcopy(model)
    x = torch.randn(2, 3, 4)
    with torch._dynamo.config.patch(allow_rnn=True):
        out = compile_model(model)(x)[0]
    want = eager(x)[0]
    assert_close(out, want)
    out.sum().backward()
    want.sum().backward()
    for p, q in zip(model.parameters(), eager.parameters()):
        assert_close(p.grad, q.grad)


def test_a_vae_with_sampled_noise_trains():
    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder, self.decoder = nn.Linear(8, 8), nn.Linear(4, 8)

        def forward(self, x):
            mu, log_var = self.encoder(x).chunk(2, -1)
            z = mu + torch.randn_like(mu) * torch.exp(0.5 * log_var)
            recon = torch.sigmoid(self.decoder(z))
            kl = -0.5 * torch.mean(1 + log_var - mu**2 - log_var.exp())
            return nn.functional.binary_cross_entropy(recon, torch.sigmoid(x)) + kl

    torch.manual_seed(0)
    model, x = VAE(), torch.randn(64, 8)
    compiled = compile_model(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss = compiled(x)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0]


def test_bfloat16_models_and_autocast_match_eager_to_bf16_precision():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
    model = model.to(torch.bfloat16)
    eager = copy.deepcopy(model)
    x = torch.randn(8, 16, dtype=torch.bfloat16)
    out, want = compile_model(model)(x), eager(x)
    assert out.dtype == torch.bfloat16
    bf16 = dict(rtol=1.6e-2, atol=3e-2)  # one or two bf16 roundings apart
    torch.testing.assert_close(out, want, **bf16)
    out.float().sum().backward()
    want.float().sum().backward()
    for p, q in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, **bf16)

    linear, x = nn.Linear(16, 4), torch.randn(8, 16)

    def autocast(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return linear(x)

    torch._dynamo.reset()
    out = torch.compile(autocast, backend="minixla", options=OPTIONS)(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, autocast(x), **bf16)


def test_eval_mode_batch_norm_uses_running_stats():
    model, x = make("cnn")
    model.train()(x)  # move the running stats off their initial values
    model.eval()
    with torch.no_grad():
        assert_close(compile_model(model)(x), model(x))


def test_a_second_batch_size_recompiles():
    model, x = make("mlp")
    compiled = compile_model(model)
    for batch in (8, 3, 5):
        x = torch.randn(batch, 16)
        assert_close(compiled(x), model(x))


def test_dynamic_shapes_from_the_start_trace_each_concrete_size():
    def fn(x):  # the symbolic batch size enters the computation, not only the shapes
        return x.view(x.shape[0] * 2, -1).sum(0) / x.shape[0]

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="minixla", options=OPTIONS, dynamic=True)
    for batch in (2, 6, 3):
        x = torch.randn(batch, 8)
        assert_close(compiled(x), fn(x))


def test_static_graphs_trace_once_and_dynamo_recompiles_on_other_signatures(monkeypatch):
    # a graph without symbolic sizes keeps one compiled function and skips its signature key;
    # grad mode, requires_grad and a new batch size reach it as new graphs from dynamo
    from minixla.torch import backend

    graphs = []

    class Counted(backend.DynamoGraph):
        def __init__(self, gm, options, **kwargs):
            super().__init__(gm, options, **kwargs)
            graphs.append(self)

    monkeypatch.setattr(backend, "DynamoGraph", Counted)
    torch._dynamo.reset()
    model, x = make("mlp")
    compiled = compile_model(model)
    for _ in range(2):
        assert_close(compiled(x), model(x))
        with torch.no_grad():
            assert_close(compiled(x), model(x))
        y = x.clone().requires_grad_()
        compiled(y).sum().backward()
        g = y.grad.clone()
        y.grad = None
        model(y).sum().backward()
        assert_close(g, y.grad)
    z = torch.randn(3, 16)
    assert_close(compiled(z), model(z))
    static = [g for g in graphs if g.static]
    assert len(static) >= 3 and all(len(g.compiled) == 1 and g.only is not None for g in static)


def test_replaced_parameter_data_is_read_again():
    """Parameter views are kept between calls; `param.data = ...` gives new memory (and a
    square weight transposed in place keeps the pointer but not the layout)."""
    model, x = make("mlp")
    compiled = compile_model(model)
    with torch.no_grad():
        assert_close(compiled(x), model(x))
        model[0].weight.data = torch.randn(32, 16)
        assert_close(compiled(x), model(x))
        model[2].weight.data = model[2].weight.data.t()  # 32 x 32: same pointer, new strides
        assert_close(compiled(x), model(x))
        model[2].weight.mul_(2)  # in place: the kept view sees it
        assert_close(compiled(x), model(x))


def test_graph_breaks_are_each_compiled(monkeypatch):
    from minixla.torch import backend

    graphs = []

    class Counted(backend.DynamoGraph):
        def __init__(self, gm, options, **kwargs):
            super().__init__(gm, options, **kwargs)
            graphs.append(self)

    monkeypatch.setattr(backend, "DynamoGraph", Counted)

    def fn(x):
        y = torch.sin(x) * 2
        torch._dynamo.graph_break()
        return torch.cos(y) + 1

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="minixla", options=OPTIONS)
    x = torch.randn(5)
    assert_close(compiled(x), torch.cos(torch.sin(x) * 2) + 1)
    assert len(graphs) == 2 and all(g.compiled for g in graphs)


def test_unknown_options_are_errors():
    model, x = make("mlp")
    torch._dynamo.reset()
    with pytest.raises(Exception, match="unknown minixla torch.compile option"):
        torch.compile(model, backend="minixla", options={"bakend": "cpu"})(x)
    with pytest.raises(TorchOptionsError, match="expected one of"):
        minixla.torch.TorchOptions.parse({"backend": "tpu"})


def test_other_options_are_the_backends_compile_options(monkeypatch):
    from minixla.backends import compile as compile_module

    seen = []
    real = compile_module.compile

    def spy(module, backend=None, **options):
        seen.append(options)
        return real(module, backend=backend, **options)

    monkeypatch.setattr(compile_module, "compile", spy)
    model, x = make("mlp")
    torch._dynamo.reset()
    options = {**OPTIONS, "passes": [], "verify": True}
    assert_close(torch.compile(model, backend="minixla", options=options)(x), model(x))
    assert seen and all(s == {"passes": [], "verify": True} for s in seen)


def test_unsupported_op_error_names_op_and_user_line():
    def fn(x):
        return torch.linalg.det(x)  # the line the error must name

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="minixla", options=OPTIONS)
    with pytest.raises(Exception) as info:
        compiled(torch.randn(3, 3))
    error = info.value
    while not isinstance(error, TorchLoweringError) and error.__cause__ is not None:
        error = error.__cause__
    assert isinstance(error, TorchLoweringError)
    assert "det" in str(error) and "test_torch_models.py" in str(error)


def test_dump_to_writes_fx_and_hlo_side_by_side(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIXLA_FLAGS", f"--dump_to={tmp_path}")
    model, x = make("mlp")
    compile_model(model)(x).sum().backward()
    names = sorted(p.name for p in tmp_path.iterdir())
    for kind in ("forward", "backward"):
        fx = [n for n in names if n.endswith(f"_{kind}.fx.txt")]
        assert fx, names
        hlo = (tmp_path / fx[0].replace(".fx.txt", ".hlo.txt")).read_text()
        assert "ENTRY" in hlo and "dot(" in hlo


def test_entry_point_registration_resolves_the_backend(monkeypatch):
    from torch._dynamo.backends import registry

    text = open(os.path.join(os.path.dirname(__file__), "..", "pyproject.toml")).read()
    assert 'minixla = "minixla.torch:minixla_backend"' in text

    class EntryPoint:  # what importlib.metadata gives dynamo for the pyproject entry
        def load(self):
            return minixla.torch.minixla_backend

    monkeypatch.delitem(registry._COMPILER_FNS, "minixla")
    monkeypatch.setitem(registry._BACKENDS, "minixla", EntryPoint())
    minixla.torch.register()  # an import after discovery leaves registration to dynamo
    assert "minixla" not in registry._COMPILER_FNS
    assert registry.lookup_backend("minixla") is minixla.torch.minixla_backend


def test_example_trains_both_models_with_eager_losses():
    import importlib.util

    path = os.path.join(os.path.dirname(__file__), "..", "examples", "torch_train.py")
    spec = importlib.util.spec_from_file_location("example_torch_train", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    torch._dynamo.reset()
    for name, (ours, theirs) in example.main(steps=3, verbose=False).items():
        torch.testing.assert_close(torch.tensor(ours), torch.tensor(theirs), rtol=1e-4, atol=1e-6)
        assert ours[-1] < ours[0], name
