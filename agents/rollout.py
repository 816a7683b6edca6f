"""Moved to :mod:`agents.training.rollout`: this alias keeps old imports and pickles working."""

import sys

from agents.training import rollout as _moved

sys.modules[__name__] = _moved
