"""What real torch.nn.DataParallel does to each real-model example (needs 2+ GPUs).

    python tests/real_models/ground_truth.py [--devices 2] [MODEL_FILE ...]

For each example and batch size (2N, 2N-1, N-1): one single-GPU run and one
nn.DataParallel run from the same weights, in eval() mode (values compared) and in
training mode (shapes, structure and errors compared; dropout makes values random).
Prints one line per run. This is the evidence the expected verdicts in
tests/test_real_models.py were written from; it does not use dpcheck.
"""

import argparse
import copy
import importlib.util
import sys
import warnings
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def examples(files):
    for path in files:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name, fn in sorted(vars(module).items()):
            if name.startswith("dpcheck_example") and callable(fn):
                yield f"{path.stem}:{name}", fn


def to(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(to(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: to(v, device) for k, v in obj.items()}
    return obj


def leaves(obj, path="out"):
    if isinstance(obj, torch.Tensor) or obj is None:
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(v, f"{path}[{k!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from leaves(v, f"{path}[{i}]")
    else:
        yield path, type(obj).__name__


def compare(ref, dp, values):
    ref_l, dp_l = dict(leaves(ref)), dict(leaves(dp))
    if set(ref_l) != set(dp_l):
        return f"structure differs: {sorted(ref_l)} vs {sorted(dp_l)}"
    notes = []
    for key, r in ref_l.items():
        d = dp_l[key]
        if isinstance(r, torch.Tensor) and isinstance(d, torch.Tensor):
            if r.shape != d.shape:
                notes.append(f"{key} shape {tuple(r.shape)} -> {tuple(d.shape)}")
            elif values and r.is_floating_point():
                diff = float((r.float().cpu() - d.float().cpu()).abs().max()) if r.numel() else 0.0
                if diff > 1e-4:
                    notes.append(f"{key} differs by {diff:.3g}")
        elif type(r) is not type(d):
            notes.append(f"{key} {r!r} -> {d!r}")
    return "; ".join(notes) or "matches"


def loss_of(out):
    parts = [t.float().mean() if t.dim() <= 1 and t.numel() <= 8 else t.float().sum()
             for _, t in leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad]
    return sum(parts) if parts else None


def run(fn, batch, devices, train):
    torch.manual_seed(0)
    model, args, *rest = fn(batch)
    kwargs = rest[0] if rest else {}
    model = model.cuda(0).train(train)
    dp_model = copy.deepcopy(model)
    args, kwargs = to(tuple(args), "cuda:0"), to(kwargs, "cuda:0")
    ref = model(*args, **kwargs)
    loss = loss_of(ref)
    if loss is not None:
        loss.backward()
    dp = torch.nn.DataParallel(dp_model, device_ids=list(range(devices)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = dp(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - what DataParallel raised is the result
            first = [line for line in str(exc).splitlines() if line.strip() and not line.startswith(" ")]
            return f"DataParallel raised {type(exc).__name__}: {first[0][:160]} ... {first[-1][:200]}"
    text = compare(ref, out, values=not train)
    loss = loss_of(out)
    if loss is not None:
        loss.backward()
        if not train:
            worst = max((float((p.grad - q.grad).abs().max()) for p, q in zip(model.parameters(), dp_model.parameters())
                         if p.grad is not None and q.grad is not None), default=0.0)
            text += f"; grads max diff {worst:.3g}"
    warned = sorted({str(w.message)[:60] for w in caught})
    return text + (f"; warnings {warned}" if warned else "")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--devices", type=int, default=2)
    args = parser.parse_args()
    files = args.files or sorted(p for p in HERE.glob("*.py") if p.name != Path(__file__).name)
    files = [p for p in files if "dpcheck_example" in p.read_text()]
    torch.backends.cudnn.enabled = False
    n = args.devices
    for label, fn in examples(files):
        for train in (False, True):
            for batch in dict.fromkeys([2 * n, 2 * n - 1, max(1, n - 1)]):
                try:
                    text = run(fn, batch, n, train)
                except Exception as exc:  # noqa: BLE001 - a single-device failure is a result too
                    text = f"single device raised {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                print(f"{label} {'train' if train else 'eval'} batch {batch}: {text}", flush=True)


if __name__ == "__main__":
    main()
