"""pytest plugin (entry point ``pytest11``): score-regression checks against stored references."""
