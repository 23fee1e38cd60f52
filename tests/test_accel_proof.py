"""The code you read is the code that runs: each accelerator proves itself against the readable
code it replaces the first time it meets it (`xlvin.accel.proof`), so an edit of the executor's
message function or of the PPO loss runs, with one warning naming the accelerator, and an
unedited run keeps its accelerators (and its numbers)."""

import warnings

import pytest
import torch

import xlvin.ppo.update as update
from xlvin import XLVIN
from xlvin.accel import proof
from xlvin.accel.flat_adam import FlatAdam
from xlvin.accel.proof import AcceleratorFallback
from xlvin.nn.executor import MessagePassing

TINY = dict(num_envs=2, num_steps=16, hidden=16, update_epochs=1, num_minibatches=2, depth=1,
            transe_epochs=1)
STEPS = 64  # two rollouts, two updates of two minibatches


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setattr(proof, "_verdicts", {})  # as in a new process
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path_factory.mktemp("cache")))


def count_calls(monkeypatch: pytest.MonkeyPatch, owner, name: str, edit=None) -> list[int]:
    """Count the calls of `owner.name` (replaced by `edit` of the original, if given)."""
    calls = [0]
    original = getattr(owner, name)
    replacement = edit(original) if edit else original

    def counted(*args, **kwargs):
        calls[0] += 1
        return replacement(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def train() -> tuple[XLVIN, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        model = XLVIN("CartPole-v1", seed=0, **TINY)
        model.learn(STEPS, progress=False)
    return model, [w for w in seen if issubclass(w.category, AcceleratorFallback)]


def test_an_unedited_run_keeps_its_accelerators(monkeypatch: pytest.MonkeyPatch) -> None:
    loss_calls = count_calls(monkeypatch, update, "ppo_loss")
    message_calls = count_calls(monkeypatch, MessagePassing, "message")
    _, fallbacks = train()
    assert fallbacks == []
    assert loss_calls[0] == 1  # the proof's, on the first minibatch; the fused loss did the rest
    assert message_calls[0] == 1 + 2 * 2  # the proof's forward, then the 4 minibatches' only


def test_an_edited_message_function_runs_while_acting(monkeypatch: pytest.MonkeyPatch) -> None:
    def edit(message):
        return lambda self, *args: 2 * message(self, *args)

    calls = count_calls(monkeypatch, MessagePassing, "message", edit)
    _, fallbacks = train()
    assert len(fallbacks) == 1 and "xlvin.accel.numpy_actor differs from the policy's forward in xlvin.nn" in (
        str(fallbacks[0].message))
    assert calls[0] >= STEPS // 2 + 2 * 2  # every step of 2 envs acted through it, and updates


def test_an_edited_ppo_loss_runs_on_every_minibatch(monkeypatch: pytest.MonkeyPatch) -> None:
    def edit(loss):
        def doubled(*args, **kwargs):
            value, terms = loss(*args, **kwargs)
            return 2 * value, terms
        return doubled

    calls = count_calls(monkeypatch, update, "ppo_loss", edit)
    _, fallbacks = train()
    assert [str(w.message).split(" (")[0] for w in fallbacks] == [
        "xlvin.accel.fused_ppo_loss differs from xlvin.nn.ppo_loss"]
    assert calls[0] == 1 + 2 * 2  # the proof's, then all 4 minibatches of the 2 updates


def test_a_flat_adam_that_differs_gives_way_to_torch_adam(monkeypatch: pytest.MonkeyPatch) -> None:
    step = FlatAdam.step

    def off(self, *args, **kwargs):
        step(self, *args, **kwargs)
        with torch.no_grad():
            self.flat.add_(1e-3)

    monkeypatch.setattr(FlatAdam, "step", off)
    model, fallbacks = train()
    assert {str(w.message).split(" (")[0] for w in fallbacks} == {
        "xlvin.accel.flat_adam differs from Adam with clip_grad_norm_"}
    assert model.summary["ppo"]["updates"] == 2


@pytest.mark.parametrize("layer_norm", [False, True], ids=["numpy-step", "dense-forward"])
def test_an_edited_message_function_is_what_the_executor_pre_trains(
    monkeypatch: pytest.MonkeyPatch, layer_norm: bool
) -> None:
    """The executor's accelerated pre-training (a NumPy step written by hand without LayerNorm,
    the dense forward with it) is proved against the executor's forward: unedited, it stays;
    with the message function edited, the readable forward trains, said once."""
    from xlvin.pretrain.executor import pretrain_executor
    from xlvin.pretrain.executor_config import ExecutorConfig

    cfg = ExecutorConfig(states=5, actions=2, train_graphs=4, hidden=8, epochs=1,
                         layer_norm=layer_norm)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _, stats = pretrain_executor(cfg, progress=False)
    assert stats["accelerated"] and not [w for w in seen if w.category is AcceleratorFallback]

    def edit(message):
        return lambda self, sender, receiver, edge: message(self, sender - receiver, receiver,
                                                            edge)

    calls = count_calls(monkeypatch, MessagePassing, "message", edit)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _, stats = pretrain_executor(cfg, progress=False)
    fast = "numpy_executor" if not layer_norm else "dense_executor"
    assert [str(w.message).split(" (")[0] for w in seen if w.category is AcceleratorFallback] == [
        f"xlvin.accel.{fast} differs from the executor's forward in xlvin.nn.executor"]
    assert not stats["accelerated"] and calls[0] > stats["optimiser_steps"]
