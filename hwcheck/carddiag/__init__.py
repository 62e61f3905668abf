"""Card acceptance beyond memory: the PCIe link and the compute units, tested on the card."""
