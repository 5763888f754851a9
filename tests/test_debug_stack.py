"""common.debug.stack: one model through torch.compile at each depth, seeded alike, and its fp64 truth."""
from __future__ import annotations

import pytest
import torch

from common.debug.stack import STACK, backend_label, fp64_reference, stack_run


class Drop(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):  # (N, 8) -> ((N, 8), (N,))
        y = torch.nn.functional.dropout(self.lin(x), 0.5, training=True)
        return y, y.sum(-1)


def _through_dynamo(gm, example_inputs):
    return gm.forward


def test_each_run_is_seeded_so_random_ops_agree_across_eager_and_aot_eager():
    torch.manual_seed(0)
    model, x = Drop(), torch.randn(16, 8)
    eager = stack_run(model, (x,), None, seed=5)
    assert eager.shape == (16, 8) and (eager == 0).any()  # the first tensor of the tuple, with a mask
    for backend in ("eager", "aot_eager", _through_dynamo):
        assert torch.equal(stack_run(model, (x,), backend, seed=5), eager), backend_label(backend)
    assert not torch.equal(stack_run(model, (x,), None, seed=6), eager)


def test_the_fp64_truth_is_a_float64_copy_with_the_same_mask_and_leaves_the_model_alone():
    torch.manual_seed(0)
    model, x = Drop(), torch.randn(16, 8)
    truth = fp64_reference(model, (x,), seed=3)
    eager = stack_run(model, (x,), None, seed=3)
    assert truth.dtype == torch.float64 and next(model.parameters()).dtype == torch.float32
    assert torch.equal(truth == 0, eager == 0)
    assert (truth - eager.double()).abs().max() < 1e-5


def test_labels_and_the_stack():
    assert STACK == ("eager", "aot_eager", "inductor")
    assert backend_label("aot_eager") == "aot_eager" and backend_label(_through_dynamo) == "_through_dynamo"


def test_a_model_without_a_tensor_output_is_a_clear_error():
    class Nothing(torch.nn.Module):
        def forward(self, x):
            return None

    with pytest.raises(TypeError, match="expected a tensor"):
        stack_run(Nothing(), (torch.ones(1),))
