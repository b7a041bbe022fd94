"""--confirm you can trust (issue 12): the harness does not invent differences, in process."""

import torch

from dpcheck.findings import ObservationKind as K
from dpcheck.harness import check


class ScalarLoss(torch.nn.Module):
    """Returns the loss, as many training wrappers do."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 1)

    def forward(self, x, y):
        return ((self.fc(x).squeeze(-1) - y) ** 2).mean()


def kinds(report):
    return {o.kind for o in report.observations}


def test_a_scalar_loss_is_averaged_like_a_trainer_does_not_summed():
    torch.manual_seed(0)
    report = check(ScalarLoss(), (torch.randn(4, 4), torch.randn(4)), backend="emulated", devices=2)
    # What DataParallel really changes: one loss per replica ...
    assert K.SCALAR_OUTPUT_GATHERED in kinds(report)
    # ... but `loss.mean()` of the gathered vector gives the single-device gradient (equal chunks):
    # summing it used to double the gradient and "confirm" a difference that trainers never see.
    assert K.GRADS_DIFFER not in kinds(report), [o.evidence for o in report.observations]
