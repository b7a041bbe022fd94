"""The child process that imports one model file and runs it through the harness.

    python -m dpcheck.harness.child FILE --backend emulated --devices 2 [--examples F]

Prints one JSON object on its last stdout line: per model, the harness report, what
was synthesized, and the model-file lines that executed. Anything the model prints goes
to stderr. The parent (``dpcheck.confirm``) enforces the time limit.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import inspect
import json
import os
import sys
import traceback
from pathlib import Path

from dpcheck.constants import CHILD_RESULT_MARKER
from dpcheck.record import replace

MAX_MODELS = 8


def load_module(path: Path):
    """Import the file under its package name, so relative imports work."""
    from dpcheck.analysis.names import module_name_for

    if not path.stem.isidentifier():
        # `model.v2.py`, `train-net.py`: no import name reaches it, so load it by location
        # under a name it can have (its folder on the path for its own imports).
        sys.path.insert(0, str(Path(os.path.abspath(path)).parent))
        name = "".join(c if c.isalnum() else "_" for c in path.stem)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    dotted = module_name_for(path)
    # A package's `__init__.py` is named by its folder: the root is one level further up.
    root = Path(os.path.abspath(path)).parents[dotted.count(".") + (path.stem == "__init__")]
    sys.path.insert(0, str(root))
    return importlib.import_module(dotted)


def examples_for(module, examples_file: str | None) -> list[tuple[str, object, str]]:
    """(label, build(batch_size), how the inputs were obtained) for each model to run."""
    found = []
    example = getattr(module, "dpcheck_example", None)
    if callable(example):
        found.append(("dpcheck_example", _with_batch(example), "dpcheck_example() in the model file"))
        return found
    if examples_file:
        spec = importlib.util.spec_from_file_location("dpcheck_examples", examples_file)
        extra = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(extra)
        for name, cls in _module_classes(module):
            fn = getattr(extra, f"dpcheck_example_{name}", None)
            if callable(fn):
                found.append((name, _with_batch(fn), f"dpcheck_example_{name}() in {examples_file}"))
        if found:
            return found
    from dpcheck.harness.synthesize import synthesizer

    for name, cls in _module_classes(module)[:MAX_MODELS]:
        build, how = synthesizer(cls)
        found.append((name, build, how))
    return found


def _with_batch(fn):
    try:
        takes = len(inspect.signature(fn).parameters) > 0
    except (TypeError, ValueError):
        takes = True
    return (lambda b: fn(b)) if takes else (lambda b: fn())


def _module_classes(module):
    """The file's own nn.Module classes that can run: less DataParallel's and
    DistributedDataParallel's subclasses (those wrap a model, and the harness wraps each model
    itself) and base classes that define no forward anywhere below nn.Module (calling one raises
    NotImplementedError on any device: their subclasses are the models)."""
    import torch
    wrappers = (torch.nn.DataParallel, torch.nn.parallel.DistributedDataParallel)
    return [(name, obj) for name, obj in vars(module).items()
            if inspect.isclass(obj) and issubclass(obj, torch.nn.Module) and not issubclass(obj, wrappers)
            and obj.forward is not torch.nn.Module.forward and obj.__module__ == module.__name__]


def run_file(file: str, backend_name: str, devices: int | None, examples: str | None) -> dict:
    """Import ``file``, run each of its models through the harness, and say what happened
    (the result the parent reads). Anything the model prints goes to stderr."""
    result: dict = {"file": file, "models": [], "error": None}
    with contextlib.redirect_stdout(sys.stderr):
        try:
            from dpcheck.harness.runner import (
                default_batch_sizes,
                install_tracer,
                make_backend,
                run_model,
                trace_lines,
                tracing,
                untraced_imports,
            )
            backend = make_backend(backend_name, devices)
            result["backend"], result["devices"] = backend.name, backend.n
            tracer, executed, under_dp, in_reference = trace_lines(file)
            install_tracer(tracer)
            with backend.context(), untraced_imports(tracer):  # the import sees N GPUs too
                module = load_module(Path(file))
            # From here on the harness traces only where the model's code runs (runner.tracing).
            sys.settrace(None)
            # Lines per model as well as for the file: an observation of one model is evidence
            # only for findings whose lines ran in that model's runs.
            lines = {"executed_lines": set(executed), "dataparallel_lines": set(), "reference_lines": set()}
            with tracing():  # the synthesizer constructs each class to look at its first layer
                found = examples_for(module, examples)
            for label, build, how in found:
                if build is None:
                    result["models"].append({"label": label, "not_run": how})
                    continue
                for seen in (executed, under_dp, in_reference):
                    seen.clear()
                report = run_model(build, backend, default_batch_sizes(backend.n), file)
                report.observations = [replace(o, model=label) for o in report.observations]
                report.reference_failures = [replace(o, model=label) for o in report.reference_failures]
                ran = {"executed_lines": set(executed), "dataparallel_lines": set(under_dp),
                       "reference_lines": set(in_reference)}
                result["models"].append({"label": label, "inputs": how, "report": report.as_dict(),
                                         **{key: sorted(value) for key, value in ran.items()}})
                for key, value in ran.items():
                    lines[key] |= value
            sys.settrace(None)
            lines["executed_lines"] |= executed
            result.update({key: sorted(value) for key, value in lines.items()})
        except BaseException as exc:  # SystemExit from the model too: report it, don't die silently
            sys.settrace(None)
            kind = "called sys.exit" if isinstance(exc, SystemExit) else f"raised {type(exc).__name__}: {exc}"
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == os.path.abspath(file)
                      or f.filename == file]
            where = f" at line {frames[-1].lineno}" if frames else ""
            result["error"] = f"importing or running the model {kind}{where}"[:500]
    return result


def die_with_parent() -> None:
    """Ask Linux to kill this child when the process that forked it exits, so that killing
    dpcheck never leaves a model running (elsewhere the time limit still applies)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--devices", type=int, default=None)
    parser.add_argument("--examples", default=None)
    args = parser.parse_args(argv)

    die_with_parent()
    out = sys.stdout
    result = run_file(args.file, args.backend, args.devices, args.examples)
    out.write(CHILD_RESULT_MARKER + json.dumps(result, default=str) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
