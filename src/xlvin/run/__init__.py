"""run: one run. Its config schema and checks, the agent registry, and training a run into its
run directory and loading it back."""
