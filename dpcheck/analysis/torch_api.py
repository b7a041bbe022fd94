"""What dpcheck knows about torch's own names: module bases, nn classes, tensor factories."""

from __future__ import annotations

import ast

MODULE_BASES = frozenset({
    "torch.nn.Module", "torch.nn.modules.module.Module", "torch.nn.modules.Module",
    # Third-party bases that are nn.Modules even when their package is not scanned.
    "transformers.PreTrainedModel", "transformers.modeling_utils.PreTrainedModel",
    "pytorch_lightning.LightningModule", "lightning.pytorch.LightningModule",
    "lightning.LightningModule", "timm.models.layers.Module",
})
# Base names that can never make a class a module: no need to wait for the index.
_NEVER_MODULE_ROOTS = ("builtins.", "typing.", "enum.", "abc.", "collections.", "dataclasses.",
                       "tensorflow.", "keras.", "flax.", "jax.", "numpy.", "tf.", "pydantic.",
                       "unittest.", "argparse.", "json.", "threading.")
_NEVER_MODULE = frozenset({"object", "Exception", "ValueError", "RuntimeError", "dict", "list",
                           "tuple", "str", "int", "float", "set", "NamedTuple", "Protocol",
                           "Generic", "ABC", "Enum", "TypedDict"})


def never_module(base: str) -> bool:
    """A base (resolved dotted name) that can never make a class an nn.Module: `object`, `abc.ABC`, a
    builtin, another framework's class, torch's classes outside torch.nn (`torch.autograd.Function`)."""
    if base in MODULE_BASES or is_torch_nn_class(base):
        return False
    return base.startswith(_NEVER_MODULE_ROOTS) or base.rsplit(".", 1)[-1] in _NEVER_MODULE or base.startswith("torch.")

PARAMETER_CTORS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter",
                             "torch.nn.UninitializedParameter", "torch.Parameter"})
# `torch.autograd.Variable(t)` returns the tensor `t` itself (since PyTorch 0.4).
# The methods that move a module or tensor to a device (`model.cuda()`, `x.to(device)`).
MOVE_METHODS = frozenset({"to", "cuda"})
# nn.Module methods that return the module they are called on: `build(cfg).cuda()` is what `build`
# returns, and `model = model.eval()` keeps the instance `model` named.
SELF_RETURNING_MODULE_METHODS = MOVE_METHODS | {"cpu", "train", "eval", "float", "half", "double", "bfloat16",
                                                "requires_grad_", "apply"}
# torch.nn's recurrent layers, by class name: their hidden state is (layers * directions, B, H), and they
# take `bidirectional` as their seventh constructor parameter.
RECURRENT_LAYERS = frozenset({"LSTM", "GRU", "RNN"})
BIDIRECTIONAL_POSITION = 6
VARIABLE_CTORS = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
TENSOR_FACTORIES = frozenset({
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "rand", "randn",
    "randint", "randperm", "arange", "range", "linspace", "logspace", "eye", "tril", "triu",
    "stack", "cat", "load", "tril_indices", "triu_indices", "meshgrid", "Tensor", "FloatTensor",
    "LongTensor", "BoolTensor", "ByteTensor", "IntTensor", "DoubleTensor", "HalfTensor",
    "polar", "complex", "bernoulli", "normal", "exp", "cos", "sin", "outer", "einsum",
})
TENSOR_METHODS = frozenset({"cuda", "to", "float", "double", "half", "long", "int", "bool",
                             "t", "T", "view", "reshape", "unsqueeze", "expand", "repeat",
                             "contiguous", "detach", "clone", "bfloat16", "transpose", "permute",
                             "flatten", "squeeze", "pin_memory", "type", "sqrt", "exp", "log"})
CONTAINER_CTORS = frozenset({"list", "dict", "set", "collections.OrderedDict",
                             "collections.defaultdict", "collections.deque",
                             "collections.Counter", "typing.OrderedDict"})
# torch.nn's BatchNorm layers (not SyncBatchNorm, whose DataParallel hazard is its own).
BATCHNORM_LAYERS = frozenset({"BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
                              "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d"})
MODULE_CONTAINERS = frozenset({"ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
                               "Sequential"})
# The containers among them that define no forward: a DataParallel wrapper of one raises when called
# (Module.forward is not implemented), so it never runs its modules on replicas.
FORWARDLESS_CONTAINERS = MODULE_CONTAINERS - {"Sequential"}

PARAMETER_FREE = ("Pad", "Loss", "Softmax", "LogSoftmax", "Softmin", "ReLU", "ReLU6", "GELU", "SiLU", "Sigmoid",
                   "Tanh", "Dropout", "Identity", "Flatten", "Unflatten", "Pool", "Softplus",
                   "LeakyReLU", "Mish", "ELU", "Hardswish", "Hardsigmoid", "Upsample", "Upsampling", "PixelShuffle",
                   "LogSigmoid", "CosineSimilarity", "PairwiseDistance")


def parameter_free(name: str) -> bool:
    """A torch.nn class that holds no weights (activations, padding, pooling, losses...)."""
    last = name.rsplit(".", 1)[-1]
    return any(p in last for p in PARAMETER_FREE)


FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
# Statements that define a function, and those that loop: what `ctx.enclosing` is asked for.
FUNCTION_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
LOOP_STATEMENTS = (ast.For, ast.AsyncFor, ast.While)


# Parts of torch.nn whose classes are no modules: autograd Functions (DataParallel's Scatter and
# Gather, which scatter_gather re-exports; CrossMapLRN2d's), tensor types, attention's options and masks.
_NO_MODULE_PARTS = ("torch.nn.functional.", "torch.nn.init.", "torch.nn.utils.", "torch.nn.parallel._functions.",
                    "torch.nn.parallel.scatter_gather.", "torch.nn.modules._functions.", "torch.nn.parameter.",
                    "torch.nn.attention.")


def is_torch_nn_class(name: str | None) -> bool:
    """``torch.nn.Linear``, ``torch.nn.modules.conv.Conv2d``… (a class, not a function), and the
    private bases torch.nn's layers share (``torch.nn.modules.conv._ConvNd``, ``batchnorm._BatchNorm``),
    which user layers subclass as well (a spectral-norm conv on ``conv._ConvNd``). Not a mixin
    (``LazyModuleMixin``: a layer is a module through its other base) nor a class of the parts of
    torch.nn that define none (``_NO_MODULE_PARTS``)."""
    if not name or not name.startswith("torch.nn."):
        return False
    last = name.rsplit(".", 1)[-1]
    if last.startswith("_") and name.startswith("torch.nn.modules."):
        last = last[1:]
    return (last[:1].isupper() and not name.startswith(_NO_MODULE_PARTS) and name not in PARAMETER_CTORS
            and last not in {"Buffer", "UninitializedBuffer"} and not last.endswith("Mixin"))



# Classmethods that build an instance of their class (transformers, diffusers, timm-style hubs;
# `PreTrainedModel._from_config`, which transformers' composite models build their parts with).
ALTERNATE_CONSTRUCTORS = frozenset({"from_pretrained", "from_config", "_from_config", "from_name"})
