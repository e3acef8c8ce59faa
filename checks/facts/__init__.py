"""What is true of a host: the facts model, probes and their parsers, captures, NVML."""
