"""Drop-ins for vLLM's TurboQuant launchers (vLLM 0.33.0), in modules that
mirror vLLM's own paths: swap the import prefix ``vllm.v1.attention.ops`` for
``turboquant.vllm.ops`` and the same calls run on this library.

* ``turboquant.vllm.ops.triton_turboquant_store.triton_turboquant_store`` and
  ``turboquant.vllm.ops.triton_turboquant_decode.triton_turboquant_decode_attention``:
  the AoS layout vLLM writes and decodes on every NVIDIA GPU;
* ``turboquant.vllm.ops.turboquant_soa.triton_turboquant_store``,
  ``.triton_turboquant_decode`` (v1, with sinks), ``.triton_turboquant_decode_v2`` (the
  seed's v2 launcher) and ``.triton_turboquant_unified_attention`` (several query tokens
  per sequence through ``query_start_loc``, causal, with sinks): the SoA layout.

Same signatures, same return values (dtype, buffer reuse) as vLLM's, on torch
tensors. The decodes run the fast CUDA kernels (``TURBOQUANT_VLLM_BACKEND=cuda-strict``
for the bit-exact ones; CPU tensors run on the CPU backend). What the library cannot
honour (a preset vLLM does not have, norm_correction=False with Lloyd-Max keys,
midpoints that are not derived from the centroids) is a ValueError, never a
silent difference. docs/PYTHON.md has the details."""
