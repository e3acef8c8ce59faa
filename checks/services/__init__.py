"""What a planned service will do, read for the gate: vLLM images and flags, model configs, GGUF."""
