"""The agents XLVIN is compared with, each an `xlvin.nn.policy.ActorCritic` trained by the same
PPO: the model-free PPO baseline (`ppo`), ATreeC (`atreec`: TreeQN's transition and a TD(lambda)
backup), and on mazes VIN with its readouts (`vin`) and GVIN (`gvin`), which plan on the maze
itself."""
