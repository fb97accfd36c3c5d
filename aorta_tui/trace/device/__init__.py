"""The device half of a trace: the in-process CUPTI / rocprofiler-sdk collectors, their records
and the join with the eBPF launch events. (A regular package, so that import-linter checks it.)"""
