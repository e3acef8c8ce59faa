"""The roles, in Ansible's layout; shipped inside the package as provision.roles."""
