"""docs/PYTHON.md's five lines, run by `make run`: decode a cache vLLM 0.33 wrote on an
H200 (AoS layout) and validate vLLM's own output and ours against the golden model."""
import sys

import turboquant as tq

case = tq.load_case(sys.argv[1] if len(sys.argv) > 1 else "tests/data/vllm-aos/a01_4bit_nc_d128_bs16_gqa4")
out = case.decode()
print(case.validate(case.expected_out))  # vLLM's output against the golden model
assert case.validate(out).ok
print("store check of vLLM's cache:", "PASS" if case.validate_cache().ok else "FAIL")
