# Flags every turboquant target gets. -ffp-contract=off is part of the
# arithmetic contract (docs/ARITHMETIC.md): a*b+c must never be fused unless
# the code says fma.
add_library(turboquant_flags INTERFACE)
target_compile_options(turboquant_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off -fno-fast-math -Wall -Wextra -Wpedantic>)
install(TARGETS turboquant_flags EXPORT turboquantTargets)

# Test executables and the tq tool compile at -O1 in Release builds: their run
# time is the library's (which keeps -O3), and at -O3 their code generation was
# half of a 2-core CI build (tests 710 s, the tool 330 s of 1990 s; gtest's and
# CLI11's inline code, docs/RELIABILITY.md §3).
function(turboquant_compile_quickly target)
  target_compile_options(${target} PRIVATE $<$<AND:$<CONFIG:Release>,$<COMPILE_LANGUAGE:CXX>>:-O1>)
endfunction()
