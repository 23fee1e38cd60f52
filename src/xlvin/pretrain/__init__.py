"""What XLVIN pre-trains before PPO, and where those files come from.

- `executor`: the VI executor, pre-trained on synthetic MDPs (paper appendix "Pre-training"),
  its held-out evaluation and the default executors' configs.
- `transe`: the encoder and transition model, pre-trained with TransE (paper section 3.3).
- `random_data`: the random-policy transitions TransE trains on (paper appendix B).
- `files`: a default executor's or a shared TransE pre-training's file: cached, shipped or made.
- `shipped`: the files shipped with xlvin (under data/) and their manifest.

Nothing here imports `xlvin.ppo` or `xlvin.run`: `xlvin.run` calls this package.
"""
