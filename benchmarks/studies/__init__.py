"""One-off studies that reproduce committed results: sampled tree expansion on Alien's 18
actions (`atari_expansion`, results/atari-expansion), why an agent can score 0 on Freeway
(`freeway_exploration`, docs/atari.md), and the Atari experiment's cells with settings changed
that they and benchmarks/parity train (`atari_cells`)."""
