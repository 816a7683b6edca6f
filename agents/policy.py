"""Moved to :mod:`agents.policies.policy`: this alias keeps old imports and pickles working."""

import sys

from agents.policies import policy as _moved

sys.modules[__name__] = _moved
