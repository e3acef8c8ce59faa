"""How hosts converge: the command line, the deploys and the gate."""
