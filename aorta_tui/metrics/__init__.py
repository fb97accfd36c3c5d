"""OpenMetrics for live traces and running sweeps (``--metrics ADDR``), via prometheus_client.

``server`` binds and serves a registry from its own thread (loopback unless asked otherwise),
``trace_metrics`` turns a trace session's snapshots into histograms and counters,
``sweep_metrics`` turns a sweep's events into progress series, ``labels`` keeps every label
value free of secrets and the number of series bounded. docs/metrics.md describes the series.
"""
