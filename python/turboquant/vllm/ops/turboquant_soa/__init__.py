"""Mirrors vllm.v1.attention.ops.turboquant_soa (the SoA TurboQuant launchers)."""
