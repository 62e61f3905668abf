"""Kernel-log pipeline: record sources, the pure Xid parser and the Xid catalogue."""
