"""The shared base every package stands on (docs/architecture.md, "Layers"): errors and exit
codes, bounded inputs, the typed events with the trial contract and the cell statistics they
carry, atomic writes, the spawn gate, the one percentile and suggestion, secrets,
tools, and the services a sweep is handed from above. It imports nothing else of aorta_tui."""
