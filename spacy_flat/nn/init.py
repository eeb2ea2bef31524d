"""FLAT's released code's initialization, as an option (`xavier_init`)."""

from __future__ import annotations

from torch import nn

# Parameters left as built: the embedding tables (pretrained or hashed), the position fusion,
# whose released counterpart keeps PyTorch's default too, and the CRF's transitions.
KEPT = ("embed", "position.", "crf.")


def xavier_weights(module: nn.Module) -> None:
    """Redraw every matrix of `module` but those in `KEPT` from a Xavier-uniform distribution,
    as FLAT's released code does after building its model: its projections, attention (u and v
    included, which start at zero otherwise), feed-forward and output layers. PyTorch's default
    draws a linear layer's weights from U(±1/sqrt(fan_in)), about 0.58 times Xavier's bound for a
    square layer, so under SGD's small steps the two start far apart."""
    for name, param in module.named_parameters():
        if param.dim() > 1 and not any(part in name for part in KEPT):
            nn.init.xavier_uniform_(param.data)
