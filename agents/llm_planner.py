"""Moved to :mod:`agents.policies.llm_planner`: this alias keeps old imports and pickles working."""

import sys

from agents.policies import llm_planner as _moved

sys.modules[__name__] = _moved
