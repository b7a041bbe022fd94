"""Inputs for a model that has no `dpcheck_example`: built from its first layer.

Only for modules whose constructor takes no required arguments and whose forward takes
one required input. `nn.Linear` -> `(B, in_features)`, `nn.ConvNd` -> `(B, C, 8, ...)`,
`nn.Embedding` -> integer ids `(B, 6)`, RNNs and Transformer layers in their declared
layout (batch-first or sequence-first), `nn.MultiheadAttention` -> one `(L, B, E)` input.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn

_SEQ = 5


def synthesizer(cls):
    """(build(batch_size) or None, a description of the inputs or of why there are none)."""
    try:
        signature = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return None, "the constructor's signature cannot be read"
    required = [p for name, p in list(signature.parameters.items())[1:]
                if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if required:
        return None, (f"{cls.__name__}() needs arguments ({', '.join(p.name for p in required)}); add "
                      "`def dpcheck_example(batch_size): return model, args` to the file")
    forward_params = [p for name, p in list(inspect.signature(cls.forward).parameters.items())[1:]
                      if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(forward_params) != 1:
        return None, (f"{cls.__name__}.forward takes {len(forward_params)} required inputs; add "
                      "`def dpcheck_example(batch_size): return model, args` to the file")
    try:
        probe = cls()
    except Exception as exc:
        return None, f"{cls.__name__}() raised {type(exc).__name__}: {exc}"
    maker, how = _first_layer_input(probe)
    if maker is None:
        return None, how

    def build(batch_size: int):
        return cls(), (maker(batch_size),)

    return build, f"synthesized from {how}"


def _first_layer_input(model: nn.Module):
    for layer in model.modules():
        if layer is model and len(list(model.children())) > 0:
            continue
        if isinstance(layer, nn.Linear):
            return (lambda b, f=layer.in_features: torch.randn(b, f)), f"its first nn.Linear: (B, {layer.in_features})"
        if isinstance(layer, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
            dims = {nn.Conv1d: 1, nn.Conv2d: 2, nn.Conv3d: 3}[type(layer)]
            shape = (layer.in_channels,) + (8,) * dims
            return (lambda b, s=shape: torch.randn(b, *s)), f"its first {type(layer).__name__}: (B, {', '.join(map(str, shape))})"
        if isinstance(layer, nn.Embedding):
            return (lambda b, n=layer.num_embeddings: torch.randint(0, n, (b, 6))), \
                f"its first nn.Embedding: integer ids (B, 6) below {layer.num_embeddings}"
        if isinstance(layer, nn.RNNBase):
            f = layer.input_size
            if layer.batch_first:
                return (lambda b, f=f: torch.randn(b, _SEQ, f)), f"its first {type(layer).__name__} (batch_first): (B, {_SEQ}, {f})"
            return (lambda b, f=f: torch.randn(_SEQ, b, f)), f"its first {type(layer).__name__} (sequence first): ({_SEQ}, B, {f})"
        if isinstance(layer, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
            d = layer.self_attn.embed_dim
            first = getattr(layer.self_attn, "batch_first", False)
            if first:
                return (lambda b, d=d: torch.randn(b, _SEQ, d)), f"its first {type(layer).__name__} (batch_first): (B, {_SEQ}, {d})"
            return (lambda b, d=d: torch.randn(_SEQ, b, d)), f"its first {type(layer).__name__} (sequence first): ({_SEQ}, B, {d})"
    return None, ("no nn.Linear, Conv, Embedding, RNN or Transformer layer to infer inputs from; add "
                  "`def dpcheck_example(batch_size): return model, args` to the file")
