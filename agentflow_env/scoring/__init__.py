"""Scorers: (prediction, task) -> [0, 1]."""
