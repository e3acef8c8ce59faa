"""gpuprov testhost: real systemd hosts in podman, reachable over SSH, for end-to-end tests."""
