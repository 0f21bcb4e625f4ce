# ctest driver: the core and the CPU backend (golden model, SIMD kernels,
# dispatch) must compile with clang as well as with g++ (docs/RELIABILITY.md,
# finding F8: two GCC-only constructs in cpu/simd once broke the clang build
# of the fuzzers). Runs `clang++ -fsyntax-only` over every .cpp of src
# and cpu/, each ISA translation unit with its ISA's flags (as in
# cpu/CMakeLists.txt), with -Werror. Skips (prints "SKIPPED") when no
# clang++ is installed.
# Inputs: SOURCE_DIR, CLANGXX (empty or *-NOTFOUND: skip).
if(NOT CLANGXX OR CLANGXX MATCHES "NOTFOUND$")
  message("SKIPPED: no clang++ on this machine (apt-get install clang)")
  return()
endif()
set(isa_avx2 -mavx2 -mfma -mf16c)
set(isa_avx512 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512cd -mavx2 -mfma -mf16c)
file(GLOB_RECURSE sources ${SOURCE_DIR}/src/*.cpp ${SOURCE_DIR}/cpu/*.cpp)
list(SORT sources)
set(failed "")
foreach(src IN LISTS sources)
  get_filename_component(name ${src} NAME_WE)
  set(flags "")
  if(DEFINED ${name})  # isa_avx2, isa_avx512
    set(flags ${${name}})
  endif()
  execute_process(
    COMMAND ${CLANGXX} -std=c++20 -fsyntax-only -Wall -Wextra -Werror ${flags}
            -DTQ_HAVE_AVX2_KERNELS=1 -DTQ_HAVE_AVX512_KERNELS=1
            -I${SOURCE_DIR}/cpu -I${SOURCE_DIR}/core/include -I${SOURCE_DIR}/include ${src}
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(rc)
    message("${err}")
    list(APPEND failed ${src})
  endif()
endforeach()
list(LENGTH sources n)
if(failed)
  message(FATAL_ERROR "clang (${CLANGXX}) rejects: ${failed}")
endif()
message("${n} translation units of src/ and cpu/ compile with ${CLANGXX}")
