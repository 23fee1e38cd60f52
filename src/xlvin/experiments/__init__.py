"""Experiments: one preset per table or figure of the paper."""
