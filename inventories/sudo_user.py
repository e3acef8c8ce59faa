"""A box reached as an ordinary user with sudo (ubuntu, vagrant, your own name), not as root.

gpuprov runs every command on the host through sudo: probes, the apply lock, image checks,
installs and units alike. The user needs sudo without a terminal: passwordless
(`echo 'ubuntu ALL=(ALL) NOPASSWD:ALL' | sudo tee /etc/sudoers.d/gpuprov`), or a password given
through pyinfra's `_sudo_password` (read it from the environment, never write it here). Add the
box's host key once before the first plan: `ssh ubuntu@gpu1.lan true` (answer yes), or
`ssh-keyscan gpu1.lan >> ~/.ssh/known_hosts` after checking the fingerprint.

    gpuprov plan inventories/sudo_user.py
"""

boxes = [
    (
        "gpu1.lan",
        {
            "ssh_user": "ubuntu",
            "_sudo": True,
            "llama_server_profiles": [
                {
                    "name": "main",
                    "model": "/srv/models/qwen3-8b-q4_k_m.gguf",
                    "port": 8080,
                    "ctx_size": 32768,
                    "flash_attn": "on",
                },
            ],
        },
    ),
]
