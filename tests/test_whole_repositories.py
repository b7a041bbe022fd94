"""Rule-side false findings seen on whole repositories (issue 11, session 36): each mechanism's
look-alike is not reported (or is advice), and the hazard beside it keeps its severity."""

from conftest import run_json


def found(path, select):
    """(code, severity, file name, row) of every finding of ``path`` for the ``select``ed codes."""
    findings, _ = run_json(path, "--select", select)
    return sorted((f["code"], f["severity"], f["filename"].rsplit("/", 1)[-1], f["location"]["row"])
                  for f in findings)


def test_dp601_partial_sums_of_a_replica_aware_class_are_not_reported():
    # Synchronized-BatchNorm-PyTorch's `_sum_ft`: the class defines `__data_parallel_replicate__` and
    # hands its chunk's sums to a master replica, which reduces them across all replicas.
    assert found("fixtures/dp601/safe_replica_synchronised_batchnorm.py", "DP601") == []
    assert found("fixtures/dp601/flagged_batch_sums_without_replica_exchange.py", "DP601") == [
        ("DP601", "error", "flagged_batch_sums_without_replica_exchange.py", 8)]


def test_dp401_loss_behind_an_argument_no_wrapped_call_passes_is_advice():
    # nanoGPT's `GPT.forward(idx, targets=None)` driven for its logits only (Understanding-Jailbreaks'
    # evals), against the training script that passes targets through the wrapper.
    assert found("fixtures/dp401/targetsnotpassedpkg", "DP401") == [("DP401", "info", "model.py", 18)]
    assert found("fixtures/dp401/targetspassedpkg", "DP401") == [("DP401", "error", "flagged_model.py", 18)]


def test_wrap_of_a_module_list_wraps_nothing_that_runs():
    # RCAN's `nn.DataParallel(self.loss_module)` of an nn.ModuleList, never called: what the project
    # wraps is still known (the script's Net), so the criterion in the list is advice only.
    assert found("fixtures/dp204/lossmodulelistpkg", "DP204") == [("DP204", "info", "loss.py", 11)]
    assert found("fixtures/dp204/losswrappedpkg", "DP204") == [("DP204", "error", "flagged_loss.py", 11)]


def test_dp404_input_swapped_back_to_batch_first_is_not_reported():
    # OpenNRE's LSTM layer: transposed into the sequence-first LSTM, transposed back on the way out.
    assert found("fixtures/dp404/safe_input_transposed_back.py", "DP404") == []
    assert found("fixtures/dp404/flagged_input_transposed_once.py", "DP404") == [
        ("DP404", "error", "flagged_input_transposed_once.py", 18)]


def test_dp303_factory_returned_by_a_layer_built_in_another_file_is_not_reported():
    # votenet's QueryAndGroup returns a CPU count, but the model of another file builds it as a layer:
    # its output never reaches DataParallel's gather. Wrapped itself, the same return is an error.
    assert found("fixtures/dp303/grouplayerpkg", "DP303") == []
    assert found("fixtures/dp303/groupwrappedpkg", "DP303") == [("DP303", "error", "flagged_grouping.py", 11)]


def test_dp401_wrapper_handed_to_a_function_of_the_script_that_never_passes_targets_is_advice():
    # Understanding-Jailbreaks' evals (session 39): the wrapper is built on one arm of an `if` and the
    # bare model on the other, both handed to the script's own `evaluate(model, ...)`, which calls it
    # for its logits; a second wrapper is only loaded and put in eval mode, the config comes from a
    # getter of the model class, and the model file's `from_pretrained` returns an instance it builds.
    assert found("fixtures/dp401/targetshandedpkg", "DP401") == [("DP401", "info", "model.py", 29)]
    assert found("fixtures/dp401/targetshandedpassedpkg", "DP401") == [("DP401", "error", "flagged_model.py", 29)]


def test_dp601_sum_over_layers_concatenated_on_a_new_leading_axis_is_not_reported():
    # vert-papers' span encoder (session 39): `torch.cat([h.unsqueeze(0) for h in hidden_states[-4:]], 0)`
    # stacks the last layers on a new dim 0, so the sum over dim 0 adds layers, per sample.
    assert found("fixtures/dp601/safe_layers_concatenated_on_new_axis.py", "DP601") == []
    assert found("fixtures/dp601/flagged_samples_concatenated_on_new_axis.py", "DP601") == [
        ("DP601", "error", "flagged_samples_concatenated_on_new_axis.py", 15)]


def test_dp106_bound_method_reading_only_plain_attributes_is_advice():
    # nnsvs's transformer FFN (session 39): `self.padding = self._same_padding`, which reads of the
    # module only `self.kernel_size`, an int replicas share with the original; its look-alike also
    # reads a Parameter, which every replica would take from the original.
    assert found("fixtures/dp106/flagged_bound_method_reading_attributes.py", "DP106") == [
        ("DP106", "error", "flagged_bound_method_reading_attributes.py", 34),
        ("DP106", "info", "flagged_bound_method_reading_attributes.py", 15)]


def test_dp104_hook_that_resets_state_to_a_constant_is_not_reported():
    # nnsvs's wavenet Conv1d (session 39): a backward hook that clears an inference cache to None
    # writes the same value from every replica; the look-alike keeps the replica's gradient.
    assert found("fixtures/dp104/safe_hook_resets_cache.py", "DP104") == []
    assert found("fixtures/dp104/flagged_hook_keeps_gradient.py", "DP104") == [
        ("DP104", "error", "flagged_hook_keeps_gradient.py", 14)]


def test_dp601_sum_over_one_bags_rows_in_a_loop_over_the_bags_is_not_reported():
    # OpenNRE's BagAttention (session 39): `rep[scope[i][0]:scope[i][1]]` in `for i in range(len(scope))`
    # is one bag's sentences, and the weights the same loop binds are that bag's too (though the
    # name holds every bag's on another path); the look-alike's slice spans every bag of the chunk.
    assert found("fixtures/dp601/safe_bag_rows_summed_per_bag.py", "DP601") == []
    assert found("fixtures/dp601/flagged_rows_summed_across_bags.py", "DP601") == [
        ("DP601", "error", "flagged_rows_summed_across_bags.py", 20)]
