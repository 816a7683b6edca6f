"""Moved to :mod:`agents.training.data_parallel`: this alias keeps old imports and pickles working."""

import sys

from agents.training import data_parallel as _moved

sys.modules[__name__] = _moved
