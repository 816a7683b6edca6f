"""Leaderboards: evaluation protocols, the results store, rendering and the pytest plugin."""
