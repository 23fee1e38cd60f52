"""Which seeds a Table 1 cell resets its envs with: its final evaluation plays fresh episodes,
each of its own seed, none of them a seed its training (rollouts and per-update evaluations)
reset an env with; its per-update evaluations are clear of the rollouts' seeds too."""

from pathlib import Path

import pytest
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from tests.tiny_runs import tiny_cell_config
from xlvin.experiments import final_eval, table1
from xlvin.ppo import evaluation


def test_a_cells_evaluations_reset_with_seeds_its_training_never_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(table1.Cell, "config", tiny_cell_config(table1.Cell.config))
    phase = {"now": "training", "evaluating": False}
    seeds: dict[str, list[int]] = {"training": [], "per-update evaluation": [],
                                   "final evaluation": []}
    reset, evaluate, evaluate_run = (CartPoleEnv.reset, evaluation.Evaluator.__call__,
                                     final_eval.evaluate_run)

    def logged_reset(self, *, seed=None, options=None):
        if seed is not None:  # autoresets continue the env's generator
            if phase["now"] == "final":
                seeds["final evaluation"].append(seed)
            else:
                seeds["per-update evaluation" if phase["evaluating"] else "training"].append(seed)
        return reset(self, seed=seed, options=options)

    def logged_evaluate(self, *args, **kwargs):
        phase["evaluating"] = True
        try:
            return evaluate(self, *args, **kwargs)
        finally:
            phase["evaluating"] = False

    def logged_evaluate_run(*args, **kwargs):
        phase["now"] = "final"
        return evaluate_run(*args, **kwargs)

    monkeypatch.setattr(CartPoleEnv, "reset", logged_reset)
    monkeypatch.setattr(evaluation.Evaluator, "__call__", logged_evaluate)
    monkeypatch.setattr(final_eval, "evaluate_run", logged_evaluate_run)
    table1.run_cell(table1.Cell("paper", "CartPole-v0", "ppo", 0), tmp_path)

    training, per_update, final = (seeds[k] for k in seeds)
    assert training and per_update  # each phase was seen
    assert len(final) == len(set(final)) == table1.EVAL_EPISODES  # one fresh seed an episode
    assert not set(final) & (set(training) | set(per_update))
    assert not set(per_update) & set(training)
