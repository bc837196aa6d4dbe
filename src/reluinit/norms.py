"""Activation and gradient norm ratios of OP (norm preservation at initialization).

For a net with hidden layers ``h_l = ReLU(a_l)``, ``a_l = W_l h_{l-1} + b_l`` and a linear
readout trained with a loss ``ℓ``, OP's two quantities per sample and layer are

* the activation ratio ``‖h_l‖ / ‖x‖`` (Eq. 6), and
* the gradient ratio ``‖∂ℓ/∂W_l‖_F / (‖δ‖ ‖x‖)`` (Eq. 17).

``δ`` is the error at the output, ``∂ℓ/∂(readout output)``. OP's Eq. 5 writes it at the last
ReLU layer's pre-activation; with the readout under the paper's He scheme (variance 2/n_L,
Lemma 4) both have the same norm in expectation, and the output error keeps the
one-hidden-layer case of OP-F2 meaningful. ``∂ℓ/∂W_l = (∂ℓ/∂a_l) h_{l-1}^T`` is rank one per
sample, so its Frobenius norm is exactly ``‖∂ℓ/∂a_l‖ ‖h_{l-1}‖`` (Eq. 19): per-sample
gradients never need to be materialised.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .nets import ACTIVATIONS, MLP


def norm_ratios(net: MLP, x: torch.Tensor, y: torch.Tensor, batch_size: int = 1024) -> dict[str, torch.Tensor]:
    """Per-sample, per-hidden-layer activation and gradient ratios under cross-entropy.

    Returns ``{"act_ratio": [N, L], "grad_ratio": [N, L]}`` on the CPU, column ``l-1`` for
    layer ``l``. Samples are processed in batches so memory stays bounded at any N.
    """
    if not net.readout:
        raise ValueError("norm ratios need a net with a readout (the loss acts on it)")
    device = net.weights[0].device
    activation = ACTIVATIONS[net.activation]
    act, grad = [], []
    for start in range(0, len(x), batch_size):
        xb = x[start:start + batch_size].to(device=device, dtype=net.weights[0].dtype)
        yb = y[start:start + batch_size].to(device)
        with torch.enable_grad():
            preacts, logits = _forward_with_grad(net, xb)
            # Summed loss: row i of each gradient is then sample i's own gradient.
            loss = F.cross_entropy(logits, yb, reduction="sum")
            grads = torch.autograd.grad(loss, preacts + [logits])
        x_norm = xb.norm(dim=1, keepdim=True)
        delta_norm = grads[-1].norm(dim=1, keepdim=True)
        h_norms = torch.stack([activation(a).norm(dim=1) for a in preacts], dim=1).detach()
        inputs_norm = torch.cat([x_norm, h_norms[:, :-1]], dim=1)  # ‖h_{l-1}‖ for l = 1..L
        g_norms = torch.stack([g.norm(dim=1) for g in grads[:-1]], dim=1)
        act.append((h_norms / x_norm).cpu())
        grad.append((g_norms * inputs_norm / (delta_norm * x_norm)).cpu())
    return {"act_ratio": torch.cat(act), "grad_ratio": torch.cat(grad)}


def _forward_with_grad(net: MLP, x: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    # The weights are leaves without grad; make the pre-activations the differentiation
    # targets by letting x carry a graph through them.
    x = x.detach().requires_grad_(True)
    return net.preactivations(x)


def distortion(ratio: torch.Tensor) -> torch.Tensor:
    """OP's distortion epsilon of a norm ratio: ``|ratio^2 - 1|`` (the lemmas bound squared norms)."""
    return (ratio.square() - 1.0).abs()
