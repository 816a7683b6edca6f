"""Moved to :mod:`agents.training.rollout_correction`: this alias keeps old imports and pickles working."""

import sys

from agents.training import rollout_correction as _moved

sys.modules[__name__] = _moved
