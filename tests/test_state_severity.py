"""Severity of state and device findings on real-code mechanisms (issue 10): an error only
where a later call reads what forward wrote, or where the path runs by default."""

from pathlib import Path

from conftest import run_json


def severities(*paths, select="DP101,DP103,DP106"):
    findings, _ = run_json(*paths, "--select", select)
    out = {}
    for f in findings:
        with open(f["filename"]) as handle:
            line = handle.read().splitlines()[f["location"]["row"] - 1].strip()
        out[(f["code"], line.split("  # expect")[0])] = f["severity"]
    return out


def test_dp101_state_read_back_is_an_error_latent_or_cost_only_a_warning_a_stash_info():
    got = severities("fixtures/dp101/flagged_state_read_back.py")
    assert got[("DP101", "self.prev = y.detach().abs().max()")] == "error"  # read before written
    assert got[("DP101", "self.count = n + 1")] == "error"  # accumulates through a local
    assert got[("DP101", "self.rescaled = not self.training")] == "error"  # guards a non-idempotent update
    assert got[("DP101", "self.state = h.detach()")] == "warning"  # forward clears it when not caching
    assert got[("DP101", "self.last_attn = attn.detach()")] == "info"  # never read by the model
    assert got[("DP101", "self._frozen = True")] == "warning"  # a re-checked condition: cost-only
    assert got[("DP101", "self.capacity = guess if self.capacity is None else self.capacity")] == "warning"  # lazy
    assert ("DP101", "self.capacity = 2 * x.shape[0]") not in got  # written before it is read, in eval


def test_dp101_table_rebuilt_when_its_key_changes_is_a_cost_warning():
    # pytorch_ssim's window, kept with the channel count it was built for: lost with the replica,
    # it is rebuilt on every call (a cost), and no call reads a value another call computed.
    got = severities("fixtures/dp101/flagged_table_rebuilt_on_key_change.py")
    assert got[("DP101", "self.window = window")] == "warning"
    assert ("DP101", "self.channel = channel") not in got
    # The arm that keeps the value updates it, or the key the test reads is not stored with it: state.
    assert got[("DP101", "self.avg = 0.9 * self.avg + 0.1 * y.detach()")] == "error"
    assert got[("DP101", "self.avg = y.detach()")] == "error"
    assert got[("DP101", "self.table = table")] == "error"
    assert severities("fixtures/dp101/safe_table_built_per_call.py") == {}


def test_dp101_feedback_state_its_owner_restarts_each_call_is_not_reported():
    # SRFBN: the owner's forward sets the block's restart flag (`self.block.reset_state()`, through a
    # helper), so each call starts the carried state afresh. Set only from outside forward: state.
    assert severities("fixtures/dp101/safe_feedback_state_restarted_by_owner.py") == {}
    got = severities("fixtures/dp101/flagged_feedback_state_restarted_outside_forward.py")
    assert got[("DP101", "self.last_hidden = output")] == "error"
    assert got[("DP101", "self.last_hidden = torch.zeros(x.size()).to(x.device)")] == "error"


def test_dp101_values_written_before_every_use_are_not_reported():
    assert severities("fixtures/dp101/safe_per_call_values.py") == {}


def test_dp101_writes_only_under_torchscript_are_not_reported():
    assert severities("fixtures/dp101/safe_scripting_only_flag.py") == {}


def test_dp101_state_behind_a_required_flag_every_construction_leaves_off_is_latent(tmp_path):
    # Off as the file builds it (handed on from the builder's False default): a warning. The same
    # class built with the flag on is an error; so is one another scanned file builds or imports,
    # or only imports its module (`import pkg.layers as layers`): its constructions are not read.
    line = "self.hidden = h.detach()"
    assert severities("fixtures/dp101/flagged_required_flag_off_in_every_construction.py")[("DP101", line)] == "warning"
    assert severities("fixtures/dp101/flagged_required_flag_on_in_a_construction.py")[("DP101", line)] == "error"
    assert severities("fixtures/dp101/flagpkg")[("DP101", line)] == "error"
    source = "fixtures/dp101/flagged_required_flag_off_in_every_construction.py"
    for n, importer in enumerate(("from pkg.layers import KeptStateRecurrent\n", "import pkg.layers as layers\n", "")):
        pkg = tmp_path / str(n)
        (pkg / "pkg").mkdir(parents=True)
        (pkg / "pkg" / "__init__.py").write_text("")
        (pkg / "pkg" / "layers.py").write_text(Path(source).read_text())
        (pkg / "pkg" / "other.py").write_text(importer + "x = 1\n")
        expected = "error" if importer else "warning"
        assert severities(str(pkg / "pkg"))[("DP101", line)] == expected, importer


def test_dp103_only_accumulation_is_an_error():
    got = severities("fixtures/dp103/flagged_recomputed_buffers.py")
    assert got[("DP103", "self.lo = torch.min(self.lo, x.min())")] == "error"
    assert got[("DP103", "self.scale = x.abs().max() / 127")] == "info"  # recomputed every call anyway
    assert got[("DP103", "self.lo = x.min().reshape(1)")] == "info"
    assert got[("DP103", "self.lo = self.lo * self.momentum + x.min() * (1 - self.momentum)")] == "error"
    assert got[("DP103", "self.pe = self.extend_pe(x, self.pe)")] == "warning"  # extension lost: cost-only
    assert got[("DP103", "self.index = self.index.to(x.device)")] == "warning"


def test_dp106_opt_in_paths_are_warnings():
    got = severities("fixtures/dp106/flagged_bound_methods.py")
    assert got[("DP106", "self.run = self._fused if fused else self._plain")] == "error"
    assert got[("DP106", "self.forward = self._plain")] == "warning"  # exact=False by default
    assert got[("DP106", "self.body.compile()")] == "info"  # only after model.compile(), then DP706
    assert got[("DP106", "self.block.compile()")] == "error"  # in __init__


def test_dp106_a_builders_default_decides_which_branch_is_the_default():
    got = severities("fixtures/dp106/flagged_builder_option.py")
    assert got[("DP106", "self.forward = self.forward_split_cat")] == "error"  # Block passes "split_cat"
    assert got[("DP106", "self.forward = self.forward_slicing")] == "warning"


def test_dp102_device_cache_is_an_error_opt_in_container_a_warning():
    findings, _ = run_json("fixtures/dp102/flagged_device_cache.py", "--select", "DP102")
    by_row = {f["location"]["row"]: f for f in findings}
    assert by_row[20]["severity"] == "error" and "device" in by_row[20]["message"]
    assert by_row[22]["severity"] == "warning" and "enable_context()" in by_row[22]["message"]


def test_dp203_frozen_table_is_a_cost_only_warning_and_register_parameter_names_the_attribute():
    findings, _ = run_json("fixtures/dp203/flagged_frozen_table.py", "--select", "DP203")
    assert sorted((f["location"]["row"], f["severity"]) for f in findings) == [(17, "warning"), (20, "error")]
    findings, _ = run_json("fixtures/dp203/flagged_lazy_modules.py", "--select", "DP203")
    message = next(f["message"] for f in findings if f["location"]["row"] == 18)
    assert "`self.gain`" in message and "register_parameter" not in message


def test_dp104_hook_counter_is_not_last_writer_wins():
    findings, _ = run_json("fixtures/dp104/flagged_hook_counter.py", "--select", "DP104")
    assert len(findings) == 1
    assert "once per GPU" in findings[0]["message"] and "last writer" not in findings[0]["message"]


def test_dp303_602_202_latent_cases_are_warnings():
    got = severities("fixtures/dp303/flagged_unexported_utility.py", select="DP303")
    assert got == {("DP303", "means = torch.zeros([2, 4])"): "info", ("DP303", "counts = torch.zeros(3)"): "error"}
    findings, _ = run_json("fixtures/dp602/flagged_syncbn_behind_flag.py", "fixtures/dp602/flagged_syncbn_under_dp.py",
                           "--select", "DP602")
    by_file = {(f["filename"].rsplit("/", 1)[-1], f["location"]["row"]): f["severity"] for f in findings}
    assert by_file[("flagged_syncbn_behind_flag.py", 25)] == "warning"
    assert by_file[("flagged_syncbn_under_dp.py", 28)] == "error"
    findings, _ = run_json("fixtures/dp202/flagged_conditional_projection.py", "--select", "DP202")
    assert [f["severity"] for f in findings] == ["warning"]


def test_dp106_bound_method_that_reads_nothing_of_the_module_is_info():
    got = severities("fixtures/dp106/flagged_bound_methods.py")
    assert got[("DP106", "self.clamp = self._clamp")] == "info"
    assert got[("DP106", "self.act = functools.partial(self._scaled, scale=2.0)")] == "error"
    assert severities("fixtures/dp106/safe_stateless_callables.py") == {}


UNEXPORTED = """import functools
import torch
import torch.nn as nn

__all__ = ["Model"]


class Positions(nn.Module):
    def __init__(self):
        super().__init__()
        self.rows = nn.Embedding(50, 4)

    @functools.lru_cache(maxsize=1)
    def forward(self, n, device):
        return self.rows(torch.arange(n, device=device))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x)
"""


def test_findings_in_a_class_outside_all_that_nothing_uses_are_advice_only():
    got, _ = run_json("fixtures/dp107/flagged_unused_unexported_layer.py", "--select", "DP107")
    assert [f["severity"] for f in got] == ["info"]
    assert "advice only: `LearnedPositions` is left out of its file's `__all__`" in got[0]["message"]
    got, _ = run_json("fixtures/dp107/flagged_unexported_layer_in_use.py", "--select", "DP107")
    assert [(f["severity"], "advice only" in f["message"]) for f in got] == [("warning", False)]


def _dp107_severity(project, files):
    pkg = project / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "layers.py").write_text(UNEXPORTED)
    for name, text in files.items():
        (pkg / name).write_text(text)
    got, _ = run_json(str(project), "--select", "DP107", "--isolated")
    return [f["severity"] for f in got if f["filename"].endswith("layers.py")]


def test_a_class_outside_all_alone_in_its_project_is_advice(project):
    assert _dp107_severity(project, {}) == ["info"]


def test_a_class_outside_all_built_by_another_file_is_not_advice(project):
    built = "import torch.nn as nn\nfrom .layers import Positions\n\n\nclass Net(nn.Module):\n" \
            "    def __init__(self):\n        super().__init__()\n        self.pos = Positions()\n"
    assert _dp107_severity(project, {"net.py": built}) == ["warning"]


def test_a_class_outside_all_imported_by_another_file_is_not_advice(project):
    factory = "from .layers import Positions\n\n\ndef positions():\n    return Positions()\n"
    assert _dp107_severity(project, {"factory.py": factory}) == ["warning"]


def test_a_class_outside_all_subclassed_elsewhere_is_not_advice(project):
    sub = "import pkg.layers\n\n\nclass Longer(pkg.layers.Positions):\n    pass\n"
    assert _dp107_severity(project, {"sub.py": sub}) == ["warning"]


def test_a_class_outside_all_named_in_a_string_or_decorated_is_not_advice(project):
    (project / "pkg").mkdir()
    (project / "pkg" / "layers.py").write_text(UNEXPORTED + '\nLAYERS = {"rope": "Positions"}\n')
    got, _ = run_json(str(project), "--select", "DP107", "--isolated")
    assert [f["severity"] for f in got] == ["warning"]
    decorated = UNEXPORTED.replace("class Positions", "@register\nclass Positions").replace(
        "__all__", "register = lambda cls: cls\n__all__")
    (project / "pkg" / "layers.py").write_text(decorated)
    got, _ = run_json(str(project), "--select", "DP107", "--isolated")
    assert [f["severity"] for f in got] == ["warning"]


def test_dp101_state_read_back_only_behind_a_non_default_option_is_latent():
    # KD_Pipeline's BasicBlock: counted every call, read only under `if self.drop_rate > 0:` with
    # `drop_rate=0.0`: a warning. Read on the default path (another method, a test true at the
    # default): an error.
    got = severities("fixtures/dp101/flagged_counter_read_behind_option.py")
    assert got[("DP101", "self.num_batches_tracked += 1")] == "warning"
    assert got[("DP101", "self.steps = self.steps + 1")] == "error"
    assert got[("DP101", "self.calls += 1")] == "error"


def test_hooks_and_shared_containers_behind_an_early_exit_true_at_the_default_are_latent():
    # BYOL's NetWrapper: the hook registration (in a helper forward calls) and the shared dict's
    # clears come after `if self.layer == -1: return self.net(x)` with `layer=-1`: warnings. The same
    # code where the default makes the exit false (a subclass's own `layer=-2`), or where nothing
    # decides it (a required `layer` built from a variable): errors.
    got = severities("fixtures/dp105/flagged_hook_behind_option.py", select="DP105")
    assert got[("DP105", "layer.register_forward_hook(self._hook)")] == "warning"
    assert got[("DP105", "self.net[self.layer].register_forward_hook(self._hook)")] == "error"
    assert got[("DP105", "handle = self.net[self.layer].register_forward_hook(self._hook)")] == "error"
    assert got[("DP105", "handle.remove()")] == "error"
    got = severities("fixtures/dp102/flagged_container_behind_option.py", select="DP102")
    assert got[("DP102", "self.seen.append(x.shape[0])")] == "warning"  # inside `if self.keep_hidden:`
    lines = open("fixtures/dp102/flagged_container_behind_option.py").read().splitlines()
    rows = {f["location"]["row"]: f["severity"] for f in run_json(
        "fixtures/dp102/flagged_container_behind_option.py", "--select", "DP102")[0]}
    clears = [i + 1 for i, line in enumerate(lines) if "self.hidden.clear()" in line]
    assert [rows[r] for r in clears] == ["warning", "warning", "error"]


def test_option_kept_off_by_every_construction_is_advice():
    # BYOL's NetWrapper (openssl-simcore): the hook path after `if self.layer == -1: return` with
    # `layer=-1`, and every construction in the file keeps -1 (`layer=hidden_layer` after
    # `hidden_layer = -1`, or no `layer`): the program never takes it, advice. A construction that
    # passes another constant (`layer=-2`) takes it: an error. Built by another file too: the
    # latent option warning.
    fixture = "fixtures/dp105/flagged_option_kept_by_every_construction.py"
    rows = {f["location"]["row"]: (f["code"], f["severity"]) for f in run_json(fixture, "--select", "DP101,DP105")[0]}
    lines = Path(fixture).read_text().splitlines()
    assert [rows[i + 1] for i, line in enumerate(lines) if "register_forward_hook" in line] == [
        ("DP105", "info"), ("DP105", "error")]
    assert [rows[i + 1] for i, line in enumerate(lines) if "self.hook_registered = True" in line] == [
        ("DP101", "info"), ("DP101", "warning")]
    got = severities("fixtures/dp105/keptbuiltelsewherepkg", select="DP105")
    assert got[("DP105", "[*self.net.children()][self.layer].register_forward_hook(self._hook)")] == "warning"
    got = severities("fixtures/dp102/flagged_container_behind_option.py", select="DP102")
    assert got[("DP102", "self.seen.append(x.shape[0])")] == "warning"  # a class built nowhere: a knob


def test_module_level_wrapper_never_called_is_reported_only_where_imported():
    # Understanding-Jailbreaks' `model2`: wrapped at a script's top level, loaded, set to eval and
    # never called: nothing scatters. The same wrapper imported and called by another file: DP704.
    assert not run_json("fixtures/dp704/safe_script_wrapper_never_called.py", "--select", "DP704")[0]
    found = run_json("fixtures/dp704/keptwrapperpkg", "--select", "DP704")[0]
    assert [(f["code"], f["severity"], f["location"]["row"]) for f in found] == [("DP704", "warning", 16)]


def test_dp701_read_behind_a_constructor_option_off_by_default_is_latent():
    # multimodal-meta-learn's MetaLearner: `self.gpt.resize_token_embeddings(...)` after the wrap in
    # `__init__`, only under `if new_words:` (default False): a warning; under an option on by default,
    # an error.
    fixture = "fixtures/dp701/flagged_read_behind_constructor_option.py"
    rows = {f["location"]["row"]: f["severity"] for f in run_json(fixture, "--select", "DP701")[0]}
    assert rows == {29: "warning", 31: "error"}


def test_dp601_behind_a_switch_off_by_default_in_another_files_parser_is_latent():
    # EnlightenGAN: `if self.opt.linear_add:` in the model file, `add_argument("--linear_add",
    # action="store_true")` in the options file; the project's option table settles the switch.
    package = "fixtures/dp601/optionspkg"

    def by_test(*paths):
        findings, _ = run_json(*paths, "--select", "DP601")
        lines = Path(f"{package}/flagged_option_switches.py").read_text().splitlines()
        out = {}
        for f in findings:
            row = f["location"]["row"]
            test = next(line.strip() for line in reversed(lines[:row - 1]) if line.strip().startswith(("if ", "elif ", "else")))
            out.setdefault(test, set()).add(f["severity"])
        return out

    got = by_test(package)
    assert got == {
        # store_true inside store_true, and the line after it under `if self.opt.linear_add:` alone
        "elif self.opt.latent_norm:": {"warning"},
        "else:": {"warning"},  # the else of a store_false switch
        "if self.opt.peak_norm:": {"error"},  # store_true with default=True
        "if self.opt.twice:": {"error"},  # set_defaults(twice=True) in another parser
        "if self.opt.unlisted:": {"error"},  # defined by no scanned file
    }
    # The options file left out of the run: nothing shows a switch off, every error stands.
    alone = by_test(f"{package}/flagged_option_switches.py", f"{package}/train.py")
    assert set().union(*alone.values()) == {"error"}


_OPTIONS = '''import argparse


def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reset_head", action="store_true")
    parser.add_argument("--use_prior", action="store_true")
    return parser.parse_args()
'''

_SWITCHED = '''import torch
import torch.nn as nn

from options import get_args


class Net(nn.Module):
    def __init__(self, opt):
        super().__init__()
        self.opt = opt
        self.fc = nn.Linear(4, 4)
        self.prior = torch.zeros(4)

    def reset(self):
        nn.init.zeros_(self.fc.bias)

    def forward(self, x):
        if self.opt.use_prior:
            x = x + self.prior
        return self.fc(x)


def main():
    args = get_args()
    model = nn.DataParallel(Net(args).cuda())
    if args.reset_head:
        model.reset()
    return model
'''


def test_dp701_and_dp201_reads_behind_another_files_switch_off_by_default_are_latent(project):
    # The shared answer (options.behind_switch_off_by_default): a script's `args` and a model's
    # `self.opt` come from a parser in another file; its store_true options are off by default.
    (project / "options.py").write_text(_OPTIONS)
    (project / "train.py").write_text(_SWITCHED)
    findings, _ = run_json(str(project), "--select", "DP201,DP701")
    assert {(f["code"], f["severity"]) for f in findings} == {("DP201", "warning"), ("DP701", "warning")}
    # Without the options file nothing shows the switches off: both stay errors.
    findings, _ = run_json(str(project / "train.py"), "--select", "DP201,DP701")
    assert {(f["code"], f["severity"]) for f in findings} == {("DP201", "error"), ("DP701", "error")}


def test_dp701_component_built_only_behind_a_switch_is_latent():
    # crystalsizer3d's Manager: `if not self.args.use_aux: self.aux = None; return` before the wrap, so
    # every read of `self.aux` needs `--use-aux` (a warning), unless a method turns the switch on and
    # then calls the reading method (an error, as `load_network` then `_init_optimiser`). A net kept
    # bare too, whose wrap alone is behind `--multi-gpu`, and a switch on by default stay errors; a
    # method parameter that every call leaves at its false default is latent, one a call passes True is not.
    fixture = "fixtures/dp701/flagged_component_behind_switch.py"
    rows = {f["location"]["row"]: f["severity"] for f in run_json(fixture, "--select", "DP701")[0]}
    assert rows == {66: "error", 75: "warning", 80: "error", 85: "error", 87: "warning", 89: "error"}


def test_dp701_read_under_hasattr_of_a_name_the_wrapper_lacks_is_not_reported():
    # crystalsizer3d's `if hasattr(self.predictor, 'img_mean'): ... self.predictor.img_std`: the body
    # never runs on the wrapper.
    assert not run_json("fixtures/dp701/safe_hasattr_of_buffer_guards_other_read.py", "--select", "DP701")[0]
