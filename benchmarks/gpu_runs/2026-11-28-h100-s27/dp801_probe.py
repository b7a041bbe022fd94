# Real DataParallel on N GPUs vs one device: per-parameter gradient differences for a fixture's dpcheck_example.
import copy, importlib.util, sys, torch
path, n = sys.argv[1], int(sys.argv[2])
spec = importlib.util.spec_from_file_location("fx", path); fx = importlib.util.module_from_spec(spec); spec.loader.exec_module(fx)
torch.manual_seed(0)
model, inputs = fx.dpcheck_example(8)
ref = copy.deepcopy(model).cuda(0); dp = torch.nn.DataParallel(copy.deepcopy(model).cuda(0), device_ids=list(range(n)))
x = tuple(t.cuda(0) for t in inputs)
def total(out):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return sum((o.float() * torch.linspace(0.5, 1.5, o.numel(), device=o.device).view_as(o)).sum() for o in outs)
total(ref(*x)).backward(); total(dp(*x)).backward()
for (name, a), (_, b) in zip(ref.named_parameters(), dp.module.named_parameters()):
    d = (a.grad - b.grad).abs().max().item() if a.grad is not None and b.grad is not None else None
    print(f"{path.split('/')[-1]} n={n} {name:28s} maxdiff={d} scale={a.grad.abs().max().item() if a.grad is not None else None}")
