"""dpcheck: find torch.nn.DataParallel hazards in PyTorch model source."""

import os as _os

__version__ = "0.1.0"

# Installed, the rules are the subpackage dpcheck.rules. In a source checkout they live in
# ../rules; let `python -m dpcheck` find them there too, without an install.
_here = _os.path.dirname(__file__)
if not _os.path.isdir(_os.path.join(_here, "rules")) and _os.path.isfile(
        _os.path.join(_here, _os.pardir, "rules", "__init__.py")):
    __path__.append(_os.path.join(_here, _os.pardir))
