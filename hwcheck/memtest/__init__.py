"""The memory test on the cards: PTX kernels (``memtest.ptx``), their patterns, the procedure, a child per card."""
