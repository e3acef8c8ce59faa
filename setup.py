"""Packages: checks and provision, with the top-level roles/ and ansible/ shipped inside provision.

The roles keep Ansible's layout at the repository's top level; in the wheel they are package data
of ``provision.roles`` (and the playbook of ``provision.ansible``), found through
importlib.resources like every other file gpuprov reads. Metadata lives in pyproject.toml.
"""

from setuptools import find_packages, setup

SHIPPED = {"provision.roles": "roles", "provision.ansible": "ansible"}

setup(
    packages=[*find_packages(include=["checks", "checks.*", "provision", "provision.*"]), *SHIPPED],
    package_dir=SHIPPED,
)
