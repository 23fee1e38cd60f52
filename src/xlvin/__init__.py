"""XLVIN: eXecuted Latent Value Iteration Networks (Deac et al., 2020) and its baselines."""

__version__ = "0.1.0"
