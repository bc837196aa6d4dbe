"""One description of a fully connected network, and random sampling of its weights.

A net is a list of weight matrices ``W_l`` of shape ``[n_l, n_{l-1}]`` with biases; every
layer but an optional linear readout is followed by the activation. The same object is
measured at initialization, pruned and trained, so every paper reads it the same way.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable

import torch
from torch import nn

from .inits import SCHEMES, weight_std

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": torch.relu,
    "tanh": torch.tanh,
    "hardtanh": torch.nn.functional.hardtanh,
    "elu": torch.nn.functional.elu,
    "leaky_relu": torch.nn.functional.leaky_relu,  # torch's slope 0.01 (an MLP may carry another)
    "linear": lambda z: z,
}


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` means CUDA when present, else the CPU."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


@contextlib.contextmanager
def tf32(enabled: bool):
    """Within, CUDA matmuls and cuDNN convolutions use TF32 (``enabled``) or true fp32; the flags
    are restored after. PyTorch's default lets convolutions, not matmuls, use TF32 on Ampere and
    later GPUs, so a run that says fp32 would train its convolutions at another precision than a
    CPU or the papers' GPUs. The legacy flags, set together, so no reader finds them mixed. Does
    nothing on a CPU."""
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = bool(enabled)
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


# Activations torch computes in place on a product's output (no second tensor per layer: the
# product's backward does not read its output, the activation's reads its own).
_IN_PLACE = {"relu": torch.relu_, "tanh": torch.tanh_}


class MLP(nn.Module):
    """A fully connected net: ``h_l = act(W_l h_{l-1} + b_l)``, the readout (if any) linear.

    The one description of a fully connected net: sampled here (``sample_mlp``), built by
    ``models.build("ffnn")`` for training, pruned through its ``nn.Linear`` layers (a mask
    parametrization shows in ``weights``), and measured through ``weights``, ``biases`` and
    ``preactivations`` whichever it is: a random net, a pruned net or a trained one.

    Weights given as tensors are held, not copied, and do not require grad (a measured net builds
    no graph); ``requires_grad_(True)`` makes them trainable. ``negative_slope`` is a leaky ReLU's
    slope below 0 (torch's 0.01 by default; read from the model by ``as_mlp``).
    """

    def __init__(self, weights: list[torch.Tensor], biases: list[torch.Tensor | None], activation: str = "relu",
                 readout: bool = False, negative_slope: float = 0.01):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; known: {sorted(ACTIVATIONS)}")
        self.activation, self.readout, self.negative_slope = activation, readout, float(negative_slope)
        self.layers = nn.ModuleList(_linear(w, b) for w, b in zip(weights, biases))

    def act(self, z: torch.Tensor, inplace: bool = False) -> torch.Tensor:
        """The net's activation (a leaky ReLU at its own slope). ``inplace``: overwrite ``z`` where
        torch can and its backward allows (a product's output that nothing else reads, as in a
        stack of nets, ``ensemble``); the values are the same either way."""
        if self.activation == "leaky_relu":
            return torch.nn.functional.leaky_relu(z, self.negative_slope, inplace=inplace and self.negative_slope > 0)
        if inplace and self.activation in _IN_PLACE:
            return _IN_PLACE[self.activation](z)
        return ACTIVATIONS[self.activation](z)

    @classmethod
    def fresh(cls, widths: list[int], activation: str = "relu", readout: bool = True, bias: bool = True) -> MLP:
        """Layers of torch's default initialization (to be re-initialized, ``models.initialize``):
        what ``models.build("ffnn")`` trains."""
        net = cls([], [], activation, readout)
        net.layers = nn.ModuleList(nn.Linear(a, b, bias=bias) for a, b in zip(widths[:-1], widths[1:]))
        return net

    @property
    def weights(self) -> list[torch.Tensor]:
        """``W_l`` of every layer, masked where a pruning mask is applied (``pruning.apply_masks``)."""
        return [layer.weight for layer in self.layers]

    @property
    def biases(self) -> list[torch.Tensor | None]:
        return [layer.bias for layer in self.layers]

    @property
    def widths(self) -> list[int]:
        """Input width followed by every layer's output width."""
        return [self.layers[0].in_features] + [layer.out_features for layer in self.layers]

    @property
    def n_hidden(self) -> int:
        return len(self.layers) - int(self.readout)

    def astype(self, dtype: torch.dtype) -> MLP:
        """A detached copy in another float type (a net drawn in float64 and measured in float32
        is the same net as its float64 original, up to rounding)."""
        cast = lambda t: None if t is None else t.detach().to(dtype).clone()  # noqa: E731
        return MLP([cast(w) for w in self.weights], [cast(b) for b in self.biases], self.activation, self.readout,
                   self.negative_slope)

    def preactivations(self, x: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Pre-activations of the hidden layers and the output, for a batch ``x [B, n_0]``.

        The output is the readout's value if there is one, else the last hidden activation.
        """
        act = self.act
        h = x
        preacts = []
        for l, (w, b) in enumerate(zip(self.weights, self.biases)):
            a = h @ w.T if b is None else torch.addmm(b, h, w.T)
            if self.readout and l == len(self.layers) - 1:
                return preacts, a
            preacts.append(a)
            h = act(a)
        return preacts, h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The output for a batch of inputs of any shape (flattened), as a model trains it."""
        return self.preactivations(x.flatten(1))[1]

    def sequence(self) -> list[nn.Module]:
        """The net as modules in order, each layer then its activation (none after a readout),
        sharing this net's parameters: what is measured stage by stage."""
        out: list[nn.Module] = []
        for l, layer in enumerate(self.layers):
            out.append(layer)
            if not (self.readout and l == len(self.layers) - 1):
                leaky = self.activation == "leaky_relu" and self.negative_slope != 0.01
                out.append(nn.LeakyReLU(self.negative_slope) if leaky else Activation(self.activation))
        return out


class Activation(nn.Module):
    """An activation of ``ACTIVATIONS`` by name, as a module: the stages of a net (``stages``) and
    the activations of every model of ``models``, so that one table names them all."""

    def __init__(self, name: str):
        super().__init__()
        if name not in ACTIVATIONS:
            raise ValueError(f"unknown activation {name!r}; known: {sorted(ACTIVATIONS)}")
        self.name = name

    def extra_repr(self) -> str:
        return self.name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ACTIVATIONS[self.name](x)


def _linear(w: torch.Tensor, b: torch.Tensor | None) -> nn.Linear:
    """An ``nn.Linear`` holding ``w`` and ``b`` themselves (no default draw, no copy)."""
    layer = nn.utils.skip_init(nn.Linear, w.shape[1], w.shape[0], bias=b is not None, device="meta")
    layer.weight = nn.Parameter(w, requires_grad=False)
    if b is not None:
        layer.bias = nn.Parameter(b, requires_grad=False)
    return layer


def parse_arch(arch: str) -> list[int]:
    """Hidden widths from a name like ``"d4w16"`` (depth 4, width 16)."""
    import re

    m = re.fullmatch(r"d(\d+)w(\d+)", arch)
    if not m:
        raise ValueError(f"architecture {arch!r} is not of the form d<depth>w<width>")
    return [int(m.group(2))] * int(m.group(1))


def sample_mlp(
    widths: list[int],
    init: str = "he",
    *,
    activation: str = "relu",
    readout: bool = False,
    bias_std: float = 0.0,
    sigma_w: float | None = None,
    seed: int,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> MLP:
    """Sample a net with layer widths ``widths = [n_0, n_1, ..., n_L]`` under ``init``.

    ``init="gaussian"`` is the random-net convention of EP and TG: weights N(0, sigma_w^2 / fan_in)
    (``sigma_w^2 = 2`` is He).

    Weights are drawn on the CPU from a generator seeded with ``seed`` (so a seed gives the
    same net on every device) and then moved to ``device``.
    """
    if init not in SCHEMES:
        raise ValueError(f"unknown init {init!r}; known: {', '.join(SCHEMES)}")
    if any(n < 1 for n in widths):
        raise ValueError(f"widths must be positive, got {widths}")
    gen = torch.Generator().manual_seed(seed)
    weights, biases = [], []
    n_layers = len(widths) - 1
    for l in range(n_layers):
        fan_in, fan_out = widths[l], widths[l + 1]
        std = weight_std(init, fan_in, fan_out, readout=readout and l == n_layers - 1, sigma_w=sigma_w)
        w = torch.randn(fan_out, fan_in, generator=gen, dtype=torch.float64) * std
        b = torch.randn(fan_out, generator=gen, dtype=torch.float64) * bias_std
        weights.append(w.to(device=device, dtype=dtype))
        biases.append(b.to(device=device, dtype=dtype))
    return MLP(weights, biases, activation=activation, readout=readout)


def random_widths(center: int, variation: int, depth: int, seed: int) -> list[int]:
    """Layer widths drawn independently and uniformly from the integers in [c - v, c + v]."""
    gen = torch.Generator().manual_seed(seed)
    return (torch.randint(center - variation, center + variation + 1, (depth,), generator=gen)).tolist()


# --- any torch model of linear layers -----------------------------------------------------------

# The torch modules ``as_mlp`` reads as an activation, and which of ``ACTIVATIONS`` each is.
_TORCH_ACTIVATIONS = {nn.ReLU: "relu", nn.Hardtanh: "hardtanh", nn.LeakyReLU: "leaky_relu", nn.Tanh: "tanh",
                      nn.ELU: "elu"}
_PASS_THROUGH = (nn.Identity, nn.Flatten, nn.Dropout)
SUPPORTED = ("nn.Sequential (nested too) of Linear (with or without bias), BatchNorm1d in eval mode after a Linear, "
             "ReLU, LeakyReLU (any slope), Hardtanh, Identity, Flatten and Dropout")


def _leaves(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The modules a ``Sequential``'s forward calls, in order, with their names: every entry of
    ``_modules`` (``named_children`` would skip a module used twice, as in ``Sequential(block, block)``,
    and measure a shorter net)."""
    if isinstance(model, nn.Sequential):
        return [(f"{name}.{sub}" if sub else name, leaf) for name, child in model._modules.items()
                if child is not None for sub, leaf in _leaves(child)]
    return [("", model)]


def _folded(linear: nn.Linear, bn: nn.BatchNorm1d, where: str) -> nn.Linear:
    """``bn`` (in eval mode, an affine map per feature) folded into the ``linear`` before it: a new
    layer computing ``bn(linear(x))`` exactly, up to rounding."""
    if bn.training or bn.running_mean is None:
        raise TypeError(f"{where}: batch norm normalises by the batch's own statistics in training mode (or without "
                        f"running statistics), so the net is not one function of its input; call model.eval() first")
    with torch.no_grad():
        scale = torch.rsqrt(bn.running_var + bn.eps)
        if bn.weight is not None:
            scale = scale * bn.weight
        shift = -bn.running_mean * scale + (bn.bias if bn.bias is not None else 0.0)
        w = linear.weight * scale[:, None]
        b = (linear.bias * scale if linear.bias is not None else 0.0) + shift
        return _linear(w.detach().clone(), b.detach().to(w.dtype).clone())


# Hooks that only recompute a weight from the module's own parameters before its forward (torch's
# pruning and its legacy weight norm): the weight the net reads is the weight the forward uses.
def _weight_hooks() -> tuple[type, ...]:
    from torch.nn.utils.prune import BasePruningMethod
    from torch.nn.utils.weight_norm import WeightNorm

    return BasePruningMethod, WeightNorm


def _plain(m: nn.Module, base: type, where: str, methods=("forward", "__call__", "_call_impl")) -> None:
    """A ``TypeError`` unless ``m`` computes what a ``base`` computes of its parameters: none of
    ``methods`` of its own (a subclass's, or one set on the object) and no forward hook, which
    could make it compute anything while its parameters say otherwise."""
    own = [n for n in methods if n in vars(m)]
    if own:
        raise TypeError(f"{where}: its {own[0]} was replaced on the object, so what it computes is not what a "
                        f"{base.__name__} computes of its parameters; measure a model of plain torch modules")
    cls = type(m)
    for n in methods:
        if getattr(cls, n) is not getattr(base, n):
            raise TypeError(f"{where}: {cls.__name__} has its own {n}, so what it computes is not what a "
                            f"{base.__name__} computes of its parameters; measure a model of plain torch modules")
    hooks = [h for d in (m._forward_pre_hooks, m._forward_hooks) for h in d.values()
             if not isinstance(h, _weight_hooks())]
    if hooks:
        raise TypeError(f"{where} has a forward hook ({getattr(hooks[0], '__name__', type(hooks[0]).__name__)}), "
                        "which can change what it computes; remove it (handle.remove()) before measuring")


def _refreshed(m: nn.Module) -> None:
    """Run ``m``'s weight hooks (torch's pruning, legacy weight norm) as its forward would: they keep
    the weight as a plain attribute, recomputed only before a forward, so after an optimizer step
    it is stale until one; the net reads it from here on."""
    for hook in list(m._forward_pre_hooks.values()):
        if isinstance(hook, _weight_hooks()):
            hook(m, ())


def _no_global_hooks() -> None:
    from torch.nn.modules import module

    if any(getattr(module, n, None) for n in ("_global_forward_hooks", "_global_forward_pre_hooks")):
        raise TypeError("a global forward hook is registered (torch.nn.modules.module.register_module_forward_hook or "
                        "_pre_hook), which can change what every module computes; remove it before measuring")


def _agrees(model: nn.Module, probes: torch.Tensor) -> None:
    """Run ``model`` on ``probes`` module by module and check that every module computes what its type
    and parameters say (the reading ``as_mlp`` trusts), and every ``Sequential`` the chain of its
    modules: a ``TypeError`` names the first that does not. The same torch operation on the same
    input is compared, so only a module that computes something else differs; anything the
    structural checks cannot see (a parametrization that changes between reads, say) shows here."""
    import torch.nn.functional as F

    def expected(m: nn.Module, h: torch.Tensor) -> torch.Tensor:
        if isinstance(m, nn.Linear):
            return F.linear(h, m.weight, m.bias)
        if isinstance(m, nn.BatchNorm1d):
            return F.batch_norm(h, m.running_mean, m.running_var, m.weight, m.bias, False, 0.0, m.eps)
        if isinstance(m, nn.LeakyReLU):
            return F.leaky_relu(h, m.negative_slope)
        if type(m) in _TORCH_ACTIVATIONS:
            return ACTIVATIONS[_TORCH_ACTIVATIONS[type(m)]](h)
        if isinstance(m, nn.Flatten):
            return h.flatten(m.start_dim, m.end_dim)
        return h  # Identity, Dropout in eval mode

    def check(got: torch.Tensor, want: torch.Tensor, name: str, m: nn.Module) -> None:
        eps = torch.finfo(want.dtype).eps
        same = got.shape == want.shape and bool(((got == want) | (got.isnan() & want.isnan()) |
                                                 ((got - want).abs() <= 16 * eps * (1 + want.abs()))).all())
        if not same:
            raise TypeError(f"layer {name} ({type(m).__name__}) computes something else than its type and parameters "
                            "say on test inputs, so the net read from its modules would not be the model; measure "
                            "a model of plain torch modules")

    # Layers in several precisions (read in float64, ``in_float64``) do not run as one model: each
    # module is then run in its own precision, and the chains are left to the structural checks.
    mixed = len({t.dtype for t in model.parameters()}) > 1

    def run(m: nn.Module, h: torch.Tensor, name: str) -> torch.Tensor:
        if isinstance(m, nn.Sequential):
            want = h
            for sub, child in m._modules.items():
                if child is not None:
                    want = run(child, want, f"{name}.{sub}" if name else sub)
            if mixed:
                return want
        else:
            own = next(m.parameters(), None)
            h = h if own is None or not mixed else h.to(own.dtype)
            got = m(h.clone())  # first: a clone (an in-place activation must not overwrite the input compared)
            want = expected(m, h)
            check(got, want, name or type(model).__name__, m)
            return got
        got = m(h.clone())
        check(got, want, name or type(model).__name__, m)
        return got

    with torch.no_grad():
        run(model, probes, "")


def check_finite(net: MLP, what: str) -> None:
    """A ``ValueError`` naming the first layer whose weights or biases hold NaN or inf: a measurement
    of ``what`` on such a net would return a clean-looking number that is not the net's."""
    for i, (w, b) in enumerate(zip(net.weights, net.biases), start=1):
        for kind, values in (("weights", w), ("biases", b)):
            if values is not None and values.is_meta:
                raise ValueError(f"{what}: layer {i}'s {kind} are on the meta device (shapes without values); "
                                 f"give the net its values first, e.g. model.to_empty(device='cpu') then an init")
            if values is not None and not bool(torch.isfinite(values).all()):
                raise ValueError(f"{what}: layer {i}'s {kind} hold NaN or inf; give the net finite {kind}")


def in_float64(net: MLP) -> MLP:
    """``net`` if every weight and bias is float64, else a float64 copy (a net in half precision, or
    one whose layers differ in precision, measured exactly)."""
    if all(t is None or t.dtype == torch.float64 for t in net.weights + net.biases):
        return net
    return net.astype(torch.float64)


def as_mlp(model: nn.Module) -> MLP:
    """A plain PyTorch model as the library's ``MLP``, sharing its weights (nothing copied), so
    that every measurement of the library reads it: ``nn.Sequential`` (nested too) of ``Linear``
    layers (with or without bias) with one activation between each pair (``ReLU``, ``LeakyReLU``
    of any slope, ``Hardtanh`` of [-1, 1], or ``Tanh`` and ``ELU`` where a measurement does not
    need linear pieces), and ``Identity``, ``Flatten`` and ``Dropout`` (a dropout in training mode
    refused: the function is random). A ``BatchNorm1d`` in eval mode right after a ``Linear`` is an
    affine map per feature: it is folded into a copy of that layer (the one thing copied). A last
    ``Linear`` with no activation after it is the readout. Anything else raises a ``TypeError``
    naming the layer, and so does a module that may compute something else than its type does of
    its parameters: its own ``forward`` or ``__call__`` (a subclass's, or one set on the object) or
    a forward hook (hooks that only recompute a weight, torch's pruning and weight norm, are read),
    or one whose output on eight test inputs differs from its type's (``_agrees``).

        >>> net = as_mlp(nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1)))
        >>> net.widths, net.readout
        ([2, 8, 1], True)
    """
    if isinstance(model, MLP):  # measured through its weights and act: a subclass must not compute otherwise
        _plain(model, MLP, f"{type(model).__name__}", ("forward", "__call__", "_call_impl", "preactivations", "act"))
        return model
    _no_global_hooks()
    _plain_containers(model, "")
    layers, acts, slopes = [], [], set()
    folded_last = False
    for name, m in _leaves(model):
        where = f"layer {name or type(model).__name__} ({type(m).__name__})"
        base = next((c for c in (nn.Linear, nn.BatchNorm1d, *_PASS_THROUGH) if isinstance(m, c)), type(m))
        _plain(m, base, where)
        _refreshed(m)
        if isinstance(m, nn.Linear):
            if 0 in (m.in_features, m.out_features):
                raise ValueError(f"{where} has {m.in_features} inputs and {m.out_features} outputs: every layer of a "
                                 "net needs at least one; remove the empty layer")
            if len(layers) > len(acts):
                acts.append("linear")  # two linear layers in a row: the identity between them
            layers.append(m)
            folded_last = False
        elif isinstance(m, nn.BatchNorm1d):
            if len(layers) != len(acts) + 1 or folded_last:
                raise TypeError(f"{where}: batch norm is read only right after a Linear layer, folded into it; "
                                f"supported: {SUPPORTED}")
            layers[-1], folded_last = _folded(layers[-1], m, where), True
        elif type(m) in _TORCH_ACTIVATIONS:
            act = _TORCH_ACTIVATIONS[type(m)]
            if (act == "hardtanh" and (m.min_val, m.max_val) != (-1.0, 1.0)) or (act == "elu" and m.alpha != 1.0):
                raise TypeError(f"{where}: only torch's default parameters are supported; supported: {SUPPORTED}")
            if len(layers) != len(acts) + 1:
                raise TypeError(f"{where}: an activation must follow a Linear layer; supported: {SUPPORTED}")
            if act == "leaky_relu":
                if not math.isfinite(m.negative_slope):
                    raise ValueError(f"{where}: negative_slope is {m.negative_slope}; a leaky ReLU's slope below 0 "
                                     "must be a finite number (torch's default is 0.01)")
                slopes.add(float(m.negative_slope))
            acts.append(act)
        elif isinstance(m, _PASS_THROUGH):
            if isinstance(m, nn.Dropout) and m.training and m.p > 0:
                raise TypeError(f"{where}: dropout in training mode is random; call model.eval() first")
        else:
            raise TypeError(f"{where} is not supported; supported: {SUPPORTED}")
    if not layers:
        raise TypeError(f"{type(model).__name__} has no Linear layer; supported: {SUPPORTED}")
    hidden = [a for a in acts if a != "linear"] or ["linear"]
    if len(set(hidden)) > 1:
        raise TypeError(f"activations {sorted(set(hidden))} mixed in one net; one kind between every pair of "
                        f"Linear layers is supported ({SUPPORTED})")
    if len(slopes) > 1:
        raise TypeError(f"LeakyReLU slopes {sorted(slopes)} mixed in one net; one slope for every layer is supported")
    if "linear" in acts[: len(layers) - 1] and hidden != ["linear"]:
        raise TypeError(f"two Linear layers in a row inside a net with {hidden[0]}: merge them, or put the "
                        f"activation between them ({SUPPORTED})")
    net = MLP([], [], hidden[0], readout=len(acts) < len(layers), negative_slope=slopes.pop() if slopes else 0.01)
    net.layers = nn.ModuleList(layers)  # the model's own layers (a batch norm's folded copy): no copy
    w = layers[0].weight
    if not w.is_meta:  # (a net on the meta device has no values to run: check_finite refuses it)
        probes = torch.randn(8, layers[0].in_features, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        try:
            _agrees(model, probes.to(device=w.device, dtype=w.dtype))
        except (RuntimeError, ValueError) as e:  # the model does not run on a batch of its input width
            raise TypeError(f"{type(model).__name__} fails on a batch of {layers[0].in_features} inputs each "
                            f"({type(e).__name__}: {str(e).splitlines()[0]}); measure a model that runs") from None
    return net


def _plain_containers(model: nn.Module, name: str) -> None:
    """``_plain`` for ``model`` and every ``Sequential`` in it (their leaves are checked as read)."""
    if isinstance(model, nn.Sequential):
        _plain(model, nn.Sequential, f"{name or type(model).__name__} ({type(model).__name__})")
        for sub, child in model._modules.items():
            if child is not None:
                _plain_containers(child, f"{name}.{sub}" if name else sub)
