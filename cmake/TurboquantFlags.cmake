# Flags every turboquant target gets. -ffp-contract=off is part of the
# arithmetic contract (docs/ARITHMETIC.md): a*b+c must never be fused unless
# the code says fma.
add_library(turboquant_flags INTERFACE)
target_compile_options(turboquant_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off -fno-fast-math -Wall -Wextra -Wpedantic>)
install(TARGETS turboquant_flags EXPORT turboquantTargets)
