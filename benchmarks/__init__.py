"""Benchmarks and studies, not part of the tests:

- `suite`: the benchmark suite (`python -m benchmarks.suite.run --help`, rendered into
  results/bench.md) and the throughput measurements behind the docs' speed figures.
- `studies`: one-off studies behind committed results and docs (sampled tree expansion on
  Alien, why an agent can score 0 on Freeway).
- `parity`: our PPO beside Stable-Baselines3's, on Box actions and on Freeway.
- `authors_code`: the authors' code (dransyhe/CNAP) run side by side with ours.

benchmarks/notes.md: the hand-written measurements, before / after per change.
"""
