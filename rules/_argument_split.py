"""What the dynamic rules about an argument DataParallel splits the wrong way (DP803-DP806) share:
under `--confirm` such a root cause explains the outputs, state and gradients that differ after it
in its model's run, so the rules that report those differences are not reported beside it."""

from __future__ import annotations

from dpcheck.rules.dp801_output_differs_from_single_device import OutputDiffersFromSingleDevice
from dpcheck.rules.dp802_output_batch_dim_mismatch import OutputBatchDimMismatch

# ``Rule.supersedes`` of each of them.
DIFFERENCES_A_BAD_SPLIT_EXPLAINS = frozenset({OutputDiffersFromSingleDevice.code, OutputBatchDimMismatch.code})
