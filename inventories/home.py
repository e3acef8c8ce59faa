"""The one-box default: this machine (@local) serving one llama.cpp model.

Settings use the roles' variable names (roles/*/defaults/main.yml); anything left out takes the
default there. Edit the model path, then: gpuprov plan inventories/home.py
"""

local = [
    (
        "@local",
        {
            "llama_server_profiles": [
                {
                    "name": "main",
                    "model": "/srv/models/model.gguf",
                    "alias": "local",
                    "port": 8080,
                    "ctx_size": 8192,
                    "flash_attn": "auto",
                },
            ],
        },
    ),
]
