"""Front ends for a person at a terminal (``agentflow-env play``)."""
