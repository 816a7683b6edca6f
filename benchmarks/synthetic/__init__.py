"""Offline generated task families: deterministic by seed, split by content, no download."""
