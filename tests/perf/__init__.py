"""Tests of the perf scripts: their smoke modes still produce what the documented speed figures read."""
