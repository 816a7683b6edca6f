"""Moved to :mod:`agents.policies.scripted`: this alias keeps old imports and pickles working."""

import sys

from agents.policies import scripted as _moved

sys.modules[__name__] = _moved
