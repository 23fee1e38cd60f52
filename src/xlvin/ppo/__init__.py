"""ppo: the algorithm. Rollout storage and advantages, collection, the update, evaluation and the
loop, with the protocols (online, low-data, curriculum) as its data sources."""
