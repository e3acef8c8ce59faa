"""What is true of a host and what is known to break: probes, parsers, the matrix and its engine."""
