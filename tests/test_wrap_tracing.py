"""What a wrap site runs (its use-set, ClassIndex._uses): sites traced to their classes let a class
no running site builds be advice only; a site that stays unknown keeps every class it reaches at its
severity. Each case is a fixture project under `fixtures/`, run as the engine runs a folder."""
from pathlib import Path

from dpcheck.engine import analyze_files, settle
from dpcheck.registry import rules_by_code

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _severities(folder: str, code: str = "DP401") -> dict[str, str]:
    """{file name: severity} of ``code``'s findings over one fixture project."""
    paths = sorted((FIXTURES / folder).rglob("*.py"))
    results, _ = analyze_files(paths, sorted(rules_by_code()), jobs=1)
    return {Path(f.filename).name: f.severity for f in settle(results).findings if f.code == code}


def test_an_apex_distributed_wrapper_of_the_model_is_the_model_not_a_class_of_its_own():
    # `model = DDP(model)` in one arm, `model = nn.DataParallel(model)` in the other: the wrap is
    # traced to `Net`, and the head called on the gathered output is advice only.
    assert _severities("dp401/ddppkg") == {"net.py": "error", "heads.py": "info"}


def test_a_library_class_built_around_the_model_leaves_the_wrap_unknown():
    assert _severities("dp401/emapkg") == {"net.py": "error", "heads.py": "error"}


def test_a_file_that_does_not_parse_reaches_only_what_its_text_imports():
    # A Python 2 demo wraps a model of its own: what it wraps is not known, but its imports, read off
    # its text, do not reach the head beside the traced script; the look-alike's demo imports the head.
    assert _severities("dp401/py2pkg") == {"net.py": "error", "heads.py": "info"}
    assert _severities("dp401/py2headpkg") == {"net.py": "error", "heads.py": "error"}


def test_the_imports_of_a_file_that_does_not_parse_are_read_statement_by_statement():
    from dpcheck.analysis.file import _text_imports

    text = ("import torch.nn as nn\nfrom models import (Net,\n    Head)  # the heads\nfrom .loss import a, \\\n"
            "    b\ntry: import apex\nexcept ImportError: pass\n# import nothing\nx = 1; import utils.io as io\n"
            'print "Python 2"\n')
    assert _text_imports(text, "pkg.train", False) == [
        ".pkg.loss", ".pkg.loss:a", ".pkg.loss:b", "apex", "models", "models:Head", "models:Net", "utils.io"]
    # The word outside an import statement (a docstring's): what the file imports is not known.
    assert _text_imports('"""Run it, or import it."""\nprint "x"\n', "m", False) is None


def test_a_getter_of_a_registry_class_of_another_file_is_traced_to_every_entry():
    # `get_backbone_class(args.model)()`: the registry holds a class and a builder whose returns are
    # traced; the look-alike's registry also holds a library's builder (`timm.create_model`).
    assert _severities("dp401/getterpkg") == {"methods.py": "info"}
    assert _severities("dp401/getterhubpkg") == {"methods.py": "error"}


def test_a_partial_handed_to_a_constructor_builds_what_its_callable_builds():
    from conftest import file_context

    from dpcheck.analysis.wrapping import function_returns

    ctx = file_context("""
        from functools import partial
        import torch.nn as nn
        from blocks import Block

        def vit_tiny(**kwargs):
            return VisionTransformer(norm_layer=partial(nn.LayerNorm, eps=1e-6), **kwargs)

        def vit_block(**kwargs):
            return VisionTransformer(block=partial(Block, mlp_ratio=4), **kwargs)

        def vit_hub(**kwargs):
            return VisionTransformer(block=partial(make_block(), mlp_ratio=4), **kwargs)

        class VisionTransformer(nn.Module):
            pass
    """, module="vit")
    returns = function_returns(ctx)
    assert returns["vit.vit_tiny"] == ["vit.VisionTransformer"]  # (torch's layer: no part of the project)
    assert returns["vit.vit_block"] == ["part:blocks.Block", "vit.VisionTransformer"]
    assert "vit.vit_hub" not in returns  # (what `make_block()` returns is not known)


def test_a_wrap_in_a_comprehension_over_a_literal_list_of_models_is_traced_to_each():
    # `a, b = [x.to(device) for x in [a, b]]` keeps the instances; `[nn.DataParallel(x) for x in [a, b]]`
    # wraps each. The look-alike replaces each by a library's `apply_adapter(x)` first.
    assert _severities("dp401/listwrappkg") == {"losses.py": "info"}
    assert _severities("dp401/listwraphubpkg") == {"losses.py": "error"}


def test_a_trainer_wraps_what_every_scanned_construction_hands_its_constructor():
    # R2Gen: `BaseTrainer.__init__(self, model, ...)` wraps `model`; `Trainer` hands it on through
    # `super().__init__(model, ...)`, and the script builds `Trainer(Net(...), ...)`: the wrap runs `Net`,
    # and the criterion called on the gathered output is advice only. The look-alike's second script
    # hands the trainer a model from a hub: not known, the criterion keeps its error.
    assert _severities("dp401/trainerpkg") == {"loss.py": "info"}
    assert _severities("dp401/trainerhubpkg") == {"loss.py": "error"}


def test_a_training_function_wraps_what_every_scanned_call_passes_it():
    # `do_train(model=net, ...)` from the one script: traced by keyword. The look-alike's helper module
    # records no calls (no script, no trainer) and calls `do_train`: what it passes is not known.
    assert _severities("dp401/trainfnpkg") == {"losses.py": "info"}
    assert _severities("dp401/trainfnhubpkg") == {"losses.py": "error"}


def test_a_constructors_attribute_wrapped_there_is_what_it_was_assigned():
    # OpenNRE: `self.model = model` then `nn.DataParallel(self.model)`, built through the package
    # (`nre.framework.SentenceRE(model=model, ...)`). The look-alike's subclass, in a module that records
    # no calls, hands its own parameter on through `super().__init__`: not known.
    assert _severities("dp401/frameworkpkg") == {"loss.py": "info"}
    assert _severities("dp401/frameworkhubpkg") == {"loss.py": "error"}


def test_handed_calls_record_each_argument_super_calls_and_other_uses():
    from conftest import file_context

    from dpcheck.analysis.handed import handed_calls

    ctx = file_context("""
        import torch
        from models import Net
        from trainer import BaseTrainer, train

        class Trainer(BaseTrainer):
            def __init__(self, model, opt):
                super().__init__(model, opt)

        def main(args, kwargs):
            net = Net()
            train(net, args.lr, *args)
            train(model=net, **kwargs)
            hooks = [train]
            Trainer(Net() if args.big else None, None).fit()
            later = lambda m: train(m, 0)  # (a lambda's parameter: its callers are not followed)

        if __name__ == "__main__":
            main(None, {})
    """, module="run")
    assert handed_calls(ctx) == [
        "models.Net", "run.Trainer|0=models.Net|1=", "run.Trainer|init", "run.main|0=|1=?",
        "trainer.BaseTrainer|0=handed:run.Trainer@model#0|1=handed:run.Trainer@opt#1",
        "trainer.train|!", "trainer.train|0=?|1=?", "trainer.train|0=models.Net|1=?|*",
        "trainer.train|model=models.Net|*"]


def test_a_module_loaded_by_a_computed_name_in_a_package_runs_what_its_modules_build():
    # RCAN: `module = import_module('model.' + args.model.lower())`, then `module.make_model(args)`: the
    # wrap runs what the `make_model` of any module of `model` builds (`common.py` defines none). The
    # look-alike's package holds a module whose `make_model` loads from a hub: not known.
    assert _severities("dp401/loadbynamepkg") == {"adversarial.py": "info"}
    assert _severities("dp401/loadbynamehubpkg") == {"adversarial.py": "error"}


def test_a_module_loaded_by_a_formatted_name_is_a_package_leaf():
    from conftest import file_context

    from dpcheck.analysis.wrapping import function_returns

    ctx = file_context("""
        import importlib
        from importlib import import_module

        def build_format(args):
            module = importlib.import_module("model.{}".format(args.model))
            return module.Net(**vars(args))

        def build_percent(args):
            nets = import_module("nets.%s" % args.model)
            return nets.make_model(args)

        def build_fstring(args):
            module = import_module(f"model.{args.model}")
            return module.Net(args)

        def build_relative(args):
            return import_module("." + args.model, package="model").Net()
    """, module="train")
    returns = function_returns(ctx)
    assert returns["train.build_format"] == ["modules:model.Net"]  # (`**vars(args)`: the builtin hands no part)
    assert returns["train.build_percent"] == ["modules:nets.make_model"]
    assert returns["train.build_fstring"] == ["modules:model.Net"]
    assert "train.build_relative" not in returns


def test_a_vendored_librarys_trainer_runs_only_where_a_project_file_builds_it_or_a_subclass():
    # The library's modules import each other (`import lib` to look classes up by name), which makes
    # every class of it a way to its trainer when names are followed one by one; only a class the
    # project's script builds counts: `BigModel` alone is advice, a `Seq2SeqTrainer` around it an error.
    assert _severities("dp401/vendoredlib_dense") == {"modeling.py": "info", "net.py": "error"}
    assert _severities("dp401/vendoredlib_subclass") == {"modeling.py": "error", "net.py": "error"}


def test_a_wrap_of_a_modules_alias_of_a_class_is_that_class():
    # yolov5's `Model = DetectionModel`: the wrap of `Model()` runs `DetectionModel` and its layers;
    # a head handed on beside it is advice only, one built into it an error.
    assert _severities("dp401/classaliaspkg") == {"detect_heads.py": "info"}
    assert _severities("dp401/classaliasusedpkg") == {"detector.py": "error"}


def test_a_wrapped_class_whose_module_looks_classes_up_by_a_computed_name_leaves_the_wrap_unknown():
    # `eval(name)` of the names a configuration gives builds layers no name in the code shows.
    assert _severities("dp401/bynamelayerspkg") == {"common.py": "error", "loss.py": "error"}
