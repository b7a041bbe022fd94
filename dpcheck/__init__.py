"""dpcheck: find torch.nn.DataParallel hazards in PyTorch model source."""

__version__ = "0.1.0"
