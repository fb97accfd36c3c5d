"""Mitigations, environments and workload plugins (the registries), the workload contract and the in-process switches mitigations name."""
