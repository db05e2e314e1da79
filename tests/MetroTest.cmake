# metro_add_test(NAME SOURCES a.c ... [LABELS gpu ...] [LIBRARIES ...])
#
# A Check suite run under CTest.  Every suite links libmetro and the test
# helpers (tests/testutil.h).  A suite that needs a GPU carries the label
# `gpu` and exits 77 after printing "skipped: no CUDA device" where there is
# none, which CTest reports as skipped.
function(metro_add_test name)
  if(NOT METRO_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LABELS;LIBRARIES" ${ARGN})
  add_executable(${name} ${T_SOURCES} ${METRO_SOURCE_DIR}/tests/testutil.c)
  target_include_directories(${name} PRIVATE ${METRO_SOURCE_DIR}/tests
    ${METRO_SOURCE_DIR}/core/src ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE metro PkgConfig::CHECK CUDA::cudart m ${T_LIBRARIES})
  target_compile_definitions(${name} PRIVATE
    METRO_TEST_SOURCE_DIR="${METRO_SOURCE_DIR}"
    METRO_TEST_BINARY_DIR="${CMAKE_BINARY_DIR}"
    METRO_TEST_DATA_DIR="${CMAKE_CURRENT_SOURCE_DIR}")
  add_test(NAME ${name} COMMAND ${name})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${name} PROPERTIES
    LABELS "${T_LABELS}" SKIP_RETURN_CODE 77 TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "CK_DEFAULT_TIMEOUT=${T_TIMEOUT};METRO_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")
endfunction()
