"""``aorta-tui agent``: a closed loop over the sweep engine that searches for the mitigation
(docs/agent.md). Engine code: imports neither textual nor rich."""
