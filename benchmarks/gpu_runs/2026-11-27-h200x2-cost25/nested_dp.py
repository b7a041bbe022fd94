# What real DataParallel does with a nested wrap on 2+ GPUs (evidence for DP705's severity).
import torch, torch.nn as nn
print("torch", torch.__version__, "gpus", torch.cuda.device_count())
def attempt(label, build):
    try:
        m = build()
        out = m(torch.randn(8, 4).cuda())
        print(label, "OK", tuple(out.shape))
    except Exception as e:
        print(label, "RAISED", type(e).__name__, str(e).splitlines()[0][:200])
attempt("DP(DP(linear)) both all GPUs", lambda: nn.DataParallel(nn.DataParallel(nn.Linear(4, 2).cuda())))
class Holder(nn.Module):
    def __init__(self, inner):
        super().__init__(); self.inner = inner
    def forward(self, x): return self.inner(x)
attempt("DP(Holder(DP(linear)))", lambda: nn.DataParallel(Holder(nn.DataParallel(nn.Linear(4, 2).cuda()))))
attempt("DP(DP(linear, device_ids=[0]))", lambda: nn.DataParallel(nn.DataParallel(nn.Linear(4, 2).cuda(), device_ids=[0])))
