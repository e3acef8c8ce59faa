"""Each role's settings, read from a host's variables and validated (one module per role).

provision.stack puts them together into a host's Stack; read holds the checks they share.
"""
