"""Moved to :mod:`agents.training.train_cli`: this alias keeps old imports and pickles working."""

import sys

from agents.training import train_cli as _moved

sys.modules[__name__] = _moved
