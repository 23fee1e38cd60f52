"""What XLVIN pre-trains before PPO, and where those files come from.

- `executor`: the VI executor, pre-trained on synthetic MDPs (paper appendix "Pre-training").
- `executor_config`: its config and checks, the default executors' configs, its file's key.
- `executor_data`: the MDPs it trains and is evaluated on, their seeds and VI solutions.
- `executor_eval`: its held-out evaluation and the greedy-on-immediate-reward baseline.
- `transe`: the encoder and transition model, pre-trained with TransE (paper section 3.3).
- `random_data`: the random-policy transitions TransE trains on (paper appendix B).
- `files`: a default executor's or a shared TransE pre-training's file: cached, shipped or made.
- `shipped`: the files shipped with xlvin (under data/) and their manifest.

Nothing here imports `xlvin.ppo` or `xlvin.run`: `xlvin.run` calls this package.
"""
