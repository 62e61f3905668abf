"""The NVML backend: one gateway (the only ``pynvml`` user), the calls, each card's reading."""
