"""The benchmark suite (`run`, one process per measurement: `worker`; results/bench.md:
`report`), the before / after micro-benchmarks (`micro`) and the throughput measurements the
docs quote: the maze agents (`maze_sps`, `maze_minibatch`), Atari (`atari_agents`,
`atari_floor`) and a GPU machine's check (`device_check`)."""
