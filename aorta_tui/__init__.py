"""aorta-tui: a terminal control room for triaging GPU workloads on ROCm and CUDA machines."""

__version__ = "0.1.0"
