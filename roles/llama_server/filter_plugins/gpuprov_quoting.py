"""Ansible filters for gpuprov's templates: the same quoting pyinfra renders with."""

from provision.quoting import FILTERS


class FilterModule:
    def filters(self):  # type: ignore[no-untyped-def]
        return dict(FILTERS)
