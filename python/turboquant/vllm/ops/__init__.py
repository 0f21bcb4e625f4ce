"""Mirrors vllm.v1.attention.ops (the TurboQuant launchers only)."""
