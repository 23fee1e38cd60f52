"""XLVIN: eXecuted Latent Value Iteration Networks (Deac et al., 2020) and its baselines.

    from xlvin import XLVIN, PPO, ATreeC       # the Python API (xlvin.api)
    from xlvin import learn_seeds              # many seeds in one process (xlvin.api_population)
    from xlvin import EvalCallback             # learn(callback=...) (xlvin.callbacks)
    from xlvin import evaluate_policy          # Stable-Baselines3's (xlvin.api_evaluation)
    from xlvin import register_agent           # your own agent (xlvin.run.agents)
    from xlvin import register_protocol        # your own protocol (xlvin.run.protocols)

The names below are imported on first use, so `import xlvin` stays light (no torch).
"""

import importlib
from typing import Any

__version__ = "0.1.0"

#: public name -> the module that defines it
_EXPORTS = {
    **dict.fromkeys(("XLVIN", "PPO", "ATreeC", "Model", "EVAL_SEED"), "xlvin.api"),
    **dict.fromkeys(
        ("register_agent", "register_encoder", "build_encoder", "build_agent", "Architecture"),
        "xlvin.run.agents",
    ),
    **dict.fromkeys(
        ("Callback", "BaseCallback", "CallbackList", "EvalCallback", "CheckpointCallback",
         "StopOnReward", "StopTrainingOnRewardThreshold"),
        "xlvin.callbacks",
    ),
    **dict.fromkeys(("register_protocol", "Protocol", "DataContext"), "xlvin.run.protocols"),
    "evaluate_policy": "xlvin.api_evaluation",
    "learn_seeds": "xlvin.api_population",
    "Spaces": "xlvin.envs.spaces",
    "RunConfig": "xlvin.run.config",
    "UserError": "xlvin.errors",
}
__all__ = [
    "EVAL_SEED",
    "PPO",
    "XLVIN",
    "ATreeC",
    "Architecture",
    "BaseCallback",
    "Callback",
    "CallbackList",
    "CheckpointCallback",
    "DataContext",
    "EvalCallback",
    "Model",
    "Protocol",
    "RunConfig",
    "Spaces",
    "StopOnReward",
    "StopTrainingOnRewardThreshold",
    "UserError",
    "__version__",
    "build_agent",
    "build_encoder",
    "evaluate_policy",
    "learn_seeds",
    "register_agent",
    "register_encoder",
    "register_protocol",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'xlvin' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
