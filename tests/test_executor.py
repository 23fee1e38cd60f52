"""The message-passing executor: semantics, pre-training, executor files and the CLI."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from xlvin.accel.numpy_executor import NumpyExecutorTrainer
from xlvin.cli import main
from xlvin.errors import UserError
from xlvin.io.executor_file import load_executor, read_executor_meta, save_executor
from xlvin.mdp.executor_graph import MDPGraph
from xlvin.nn.executor import MessagePassing, VIExecutor
from xlvin.pretrain.executor import pretrain_executor
from xlvin.pretrain.executor_config import ExecutorConfig, default_executor_config
from xlvin.pretrain.executor_data import make_mdps
from xlvin.pretrain.executor_eval import evaluate_executor

SMALL = ExecutorConfig(family="random_deterministic", states=8, actions=3, train_graphs=16,
                       hidden=16, epochs=4, batch_graphs=4, batch_steps=16, seed=0)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny graphs: one torch thread avoids thread wake-up latency on a busy 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def trained() -> tuple[VIExecutor, dict]:
    return pretrain_executor(SMALL, progress=False)


@pytest.mark.parametrize("aggregation", ["max", "sum"])
def test_forward_matches_per_edge_messages(aggregation: str) -> None:
    torch.manual_seed(0)
    mp = MessagePassing(6, aggregation, layer_norm=True)
    x, edge = torch.randn(5, 6, requires_grad=True), torch.randn(5, 6)
    senders, receivers = torch.tensor([0, 1, 2, 3, 0]), torch.tensor([1, 1, 3, 3, 0])
    expected = torch.zeros(5, 6)  # node 2 and 4 receive nothing: aggregate 0
    msgs = mp.message(x[senders], x[receivers], edge)
    for i in range(5):
        incoming = msgs[receivers == i]
        if len(incoming):
            expected[i] = incoming.sum(0) if aggregation == "sum" else incoming.amax(0)
    reference = mp.update(x, expected)
    out = mp(x, senders, receivers, edge)
    torch.testing.assert_close(out, reference)
    weights = torch.randn(5, 6)
    (grad,) = torch.autograd.grad((out * weights).sum(), x)
    (grad_reference,) = torch.autograd.grad((reference * weights).sum(), x)
    torch.testing.assert_close(grad, grad_reference)
    # a batch of feature sets on the same graph is processed row by row
    xs = torch.randn(3, 5, 6)
    batched = mp(xs, senders, receivers, edge)
    torch.testing.assert_close(batched[1], mp(xs[1], senders, receivers, edge))


def test_graph_has_one_node_per_state_action_and_edges_from_successors() -> None:
    mdps = make_mdps("erdos_renyi", 6, 2, 2, seed=0, stream=0, gamma=0.9)
    graph = MDPGraph.from_mdps(mdps)
    assert graph.rewards.shape == (2 * 6 * 2,)
    assert len(graph.senders) == sum(int(np.count_nonzero(m.P)) for m in mdps)
    s, a = divmod(int(graph.receivers[0]), 2)
    s2, a2 = divmod(int(graph.senders[0]), 2)
    assert a == a2 and mdps[0].P[s, a, s2] == pytest.approx(float(graph.edge_features[0, 0]))


def test_pretraining_lowers_held_out_error(trained: tuple[VIExecutor, dict]) -> None:
    executor, stats = trained
    torch.manual_seed(SMALL.seed)
    untrained = VIExecutor(SMALL.hidden, "max")
    args = ("random_deterministic", SMALL.states, SMALL.actions, 10, 0)
    before = evaluate_executor(untrained, *args)
    after = evaluate_executor(executor, *args)
    assert after["value_mse"] < 0.5 * before["value_mse"]
    assert stats["train_mse_per_epoch"][-1] < stats["train_mse_per_epoch"][0]


def test_diverging_rollouts_are_counted_not_averaged() -> None:
    exploding = VIExecutor(4, "max")
    with torch.no_grad():
        for p in exploding.parameters():
            p.zero_()
        exploding.node_encoder.weight[:, 0] = 1.0  # every feature is V_t(s)
        exploding.decoder.weight.fill_(10.0)
        exploding.decoder.bias.fill_(1.0)  # V_{t+1} = 41 V_t + 1: overflows within 30 steps
    result = evaluate_executor(exploding, "random_deterministic", 5, 2, 3, 0)
    assert result["diverged"] == 3 and result["value_mse"] is None
    assert result["policy_accuracy"] == 0.0


def test_pretraining_is_reproducible_from_the_seed(trained: tuple[VIExecutor, dict]) -> None:
    again, _ = pretrain_executor(SMALL, progress=False)
    for name, tensor in trained[0].state_dict().items():
        torch.testing.assert_close(again.state_dict()[name], tensor, rtol=0, atol=0)


def test_zero_epochs_is_the_untrained_initialisation(trained: tuple[VIExecutor, dict]) -> None:
    """epochs = 0 (the 'untrained' ablation executor): the seed's initial weights, unlike the
    trained executor of the same seed; a negative count is one UserError."""
    untrained, stats = pretrain_executor(dataclasses.replace(SMALL, epochs=0), progress=False)
    torch.manual_seed(SMALL.seed)
    fresh = VIExecutor(SMALL.hidden, SMALL.aggregation, SMALL.layer_norm, SMALL.messages)
    for name, tensor in untrained.state_dict().items():
        torch.testing.assert_close(tensor, fresh.state_dict()[name], rtol=0, atol=0)
    assert not torch.equal(untrained.processor.message_fn.weight,
                           trained[0].processor.message_fn.weight)
    assert stats["optimiser_steps"] == 0
    with pytest.raises(UserError, match="epochs must be >= 0"):
        pretrain_executor(dataclasses.replace(SMALL, epochs=-1), progress=False)


def test_default_executor_rejects_unknown_kind(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cartpole"):
        default_executor_config("nope")


def test_save_load_round_trip(tmp_path: Path, trained: tuple[VIExecutor, dict]) -> None:
    executor, _ = trained
    path = tmp_path / "ex.safetensors"
    save_executor(path, executor, {"family": "random_deterministic", "seed": 0})
    loaded = load_executor(path)
    graph = MDPGraph.from_mdps(make_mdps("random_deterministic", 8, 3, 2, 0, 1, 0.9))
    v = torch.randn(4, graph.num_states)
    with torch.no_grad():
        torch.testing.assert_close(loaded(graph, v), executor(graph, v), rtol=0, atol=0)
    meta = read_executor_meta(path)
    assert meta["hidden"] == SMALL.hidden and meta["family"] == "random_deterministic"


def test_missing_or_corrupt_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        load_executor(tmp_path / "missing.safetensors")
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    with pytest.raises(UserError, match="corrupt"):
        load_executor(bad)
    other = tmp_path / "other.safetensors"
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(2)}, str(other))
    with pytest.raises(UserError, match="corrupt"):
        load_executor(other)


def test_cli_eval_executor_prints_json(
    tmp_path: Path, trained: tuple[VIExecutor, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ex.safetensors"
    save_executor(path, trained[0], {**dataclasses.asdict(SMALL), "aggregation": "max"})
    argv = ["eval-executor", str(path), "--graphs", "erdos_renyi", "--states", "6",
            "--actions", "2", "--count", "3", "--seed", "1", "--threads", "1", "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert 0.0 <= result["policy_accuracy"] <= 1.0 and result["value_mse"] >= 0.0
    assert result["graphs"] == 3 and result["states"] == 6 and result["actions"] == 2


def test_cli_pretrain_refuses_to_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ex.safetensors"
    out.write_bytes(b"keep me")
    assert main(["pretrain-executor", "--graphs", "grid", "--out", str(out), "--quiet",
                 "--threads", "1"]) == 2
    assert "--force" in capsys.readouterr().err
    assert out.read_bytes() == b"keep me"


def _learning_rates(cfg: ExecutorConfig, accelerate: bool, monkeypatch: pytest.MonkeyPatch
                    ) -> list[float]:
    """The learning rate of every Adam step of `pretrain_executor(cfg)` on one path (SMALL's
    accelerated path: the NumPy trainer's, whose Adam is given its learning rate)."""
    adam = NumpyExecutorTrainer if accelerate else torch.optim.Adam
    seen_name = "adam_step" if accelerate else "step"
    seen, step = [], getattr(adam, seen_name)

    def spy(self, *args, **kwargs):
        seen.append(args[0] if accelerate else self.param_groups[0]["lr"])
        return step(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(adam, seen_name, spy)
        pretrain_executor(cfg, progress=False, accelerate=accelerate)
    return seen


@pytest.mark.parametrize("accelerate", [False, True])
def test_constant_learning_rate_stays_at_lr(
    accelerate: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lr_schedule 'constant' (the authors' executor training) never anneals."""
    cfg = dataclasses.replace(SMALL, lr_schedule="constant", epochs=1)
    seen = _learning_rates(cfg, accelerate, monkeypatch)
    assert seen and all(lr == cfg.lr for lr in seen)


def test_both_paths_anneal_the_learning_rate_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """The accelerated path's closed-form cosine gives the readable path's CosineAnnealingLR
    learning rates (up to float rounding), from lr down to near 0."""
    cfg = dataclasses.replace(SMALL, epochs=2)
    readable = _learning_rates(cfg, False, monkeypatch)
    fast = _learning_rates(cfg, True, monkeypatch)
    assert len(fast) == len(readable) > 2
    np.testing.assert_allclose(fast, readable, rtol=1e-9, atol=1e-12)
    assert fast[0] == cfg.lr and fast[-1] < 0.01 * cfg.lr


def test_pretraining_never_overwrites_a_file_written_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two `pretrain-executor --out E` at once: the second to finish finds E made by the first
    and leaves it (one line, exit 2) instead of replacing it; no temporary file is left."""
    import xlvin.pretrain.executor as pretrain

    out = tmp_path / "ex.safetensors"
    real = pretrain.pretrain_executor

    def the_other_process_finishes_first(cfg, progress=True, position=0, accelerate=True):
        out.write_bytes(b"the first process's executor")
        return real(dataclasses.replace(cfg, train_graphs=2, epochs=1), progress, position,
                    accelerate)

    monkeypatch.setattr(pretrain, "pretrain_executor", the_other_process_finishes_first)
    code = main(["pretrain-executor", "--graphs", "random_deterministic", "--states", "4",
                 "--actions", "2", "--out", str(out), "--quiet", "--eval-count", "2"])
    assert code == 2 and "written by another process meanwhile" in capsys.readouterr().err
    assert out.read_bytes() == b"the first process's executor"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ex.safetensors"]


def test_an_empty_cache_variable_is_the_default_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """XLVIN_CACHE="" (issue: it made ./executors in the current folder) means unset."""
    from xlvin.pretrain.files import cache_dir

    monkeypatch.setenv("XLVIN_CACHE", "")
    assert cache_dir() == Path.home() / ".cache" / "xlvin"
    monkeypatch.setenv("XLVIN_CACHE", "/somewhere")
    assert cache_dir() == Path("/somewhere")
