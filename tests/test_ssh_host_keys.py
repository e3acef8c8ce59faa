"""SSH host keys: checking stays on, and an absent known_hosts file is not reported as a fault."""

from __future__ import annotations

import configparser
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyinfra.connectors.sshuserclient.client import get_host_keys

from provision import converge_cli

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def pyinfra_logger() -> Iterator[None]:
    logger = logging.getLogger("pyinfra")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


def test_an_absent_known_hosts_file_is_quiet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pyinfra_logger: None
) -> None:
    converge_cli.pyinfra_logging(verbose=False)
    get_host_keys((str(tmp_path / "no-such-file"),))  # pyinfra's own loader
    get_host_keys((str(tmp_path),))  # a folder where the file should be: a real fault
    err = capsys.readouterr().err
    assert "no-such-file" not in err
    assert f"Failed to load host keys from {tmp_path}" in err


def test_shipped_ansible_config_keeps_host_key_checking() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "ansible" / "ansible.cfg")
    assert config.getboolean("defaults", "host_key_checking", fallback=True)
