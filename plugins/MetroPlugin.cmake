# The plugin SDK's build helper.  In this tree it is included by the top
# CMakeLists.txt; an out-of-tree plugin gets it from the package:
# find_package(metro CONFIG REQUIRED) includes it (cmake/metroConfig.cmake.in,
# installed in <prefix>/lib/cmake/metro), having set METRO_INCLUDE_DIR and
# METRO_PLUGIN_INSTALL_DIR.
#
#   metro_add_plugin(NAME
#       SOURCES host.c ...        host code (C11)
#       [DEVICE device.cu ...]    device code, compiled to LTO-IR and embedded
#       [LIBRARIES lib ...])
#
# NAME must equal the plugin's descriptor name: the loader checks that the
# file lj_fene.so says it is "lj_fene".

set(METRO_LTO_ARCH "90" CACHE STRING
  "Virtual architecture of the embedded LTO-IR (lto_XX); links for XX and newer")
set(METRO_NVCC_FLAGS "-O3;-ftz=true" CACHE STRING
  "Extra nvcc flags for plugin device code")
set(METRO__SDK_DIR ${CMAKE_CURRENT_LIST_DIR})
if(NOT METRO_INCLUDE_DIR)
  if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/../core/include/metro/plugin.h)
    set(METRO_INCLUDE_DIR ${CMAKE_CURRENT_LIST_DIR}/../core/include)   # source tree
  else()
    message(FATAL_ERROR "MetroPlugin.cmake: no metro headers known; "
      "use find_package(metro CONFIG REQUIRED) instead of including this file")
  endif()
endif()
# Out of tree the plugins land at the top of the build folder, so that
# METRO_PLUGIN_PATH=<that folder> finds them.
if(NOT METRO_PLUGIN_OUTPUT_DIR)
  set(METRO_PLUGIN_OUTPUT_DIR ${CMAKE_BINARY_DIR})
endif()

# Compile .cu files into one fatbin of LTO-IR and a C file embedding it as
# SYMBOL[] / SYMBOL_size.  Used for plugins and for the core's own kernels.
# METRO_TERM_NAME is the target's name: a potential's device functions are
# named after it (METRO_TERM in metro/device.h).
function(metro_device_ir target symbol)
  set(srcs ${ARGN})
  set(fatbin ${CMAKE_CURRENT_BINARY_DIR}/${target}.fatbin)
  set(cfile ${CMAKE_CURRENT_BINARY_DIR}/${target}_ir.c)
  set(abs)
  foreach(s ${srcs})
    get_filename_component(a ${s} ABSOLUTE)
    list(APPEND abs ${a})
  endforeach()
  add_custom_command(OUTPUT ${fatbin}
    COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} -arch=lto_${METRO_LTO_ARCH} -rdc=true -fatbin
            -std=c++17 ${METRO_NVCC_FLAGS} -DMETRO_TERM_NAME=${target} -I${METRO_INCLUDE_DIR} -I${CMAKE_CURRENT_SOURCE_DIR}
            # the host code's include folders too (target_include_directories)
            "$<$<BOOL:$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>>:-I$<JOIN:$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>,;-I>>"
            -MD -MF ${fatbin}.d -o ${fatbin} ${abs}
    # every header the device code includes, wherever it lies (nvcc's own
    # list, made as it compiles): a changed header rebuilds the LTO-IR
    DEPFILE ${fatbin}.d
    DEPENDS ${abs}
    COMMENT "LTO-IR for ${target}"
    VERBATIM COMMAND_EXPAND_LISTS)
  add_custom_command(OUTPUT ${cfile}
    COMMAND ${CMAKE_COMMAND} -DIN=${fatbin} -DOUT=${cfile} -DSYM=${symbol} -P ${METRO__SDK_DIR}/embed.cmake
    DEPENDS ${fatbin} ${METRO__SDK_DIR}/embed.cmake
    VERBATIM)
  target_sources(${target} PRIVATE ${cfile})
endfunction()

function(metro_add_plugin name)
  # the device code's names are built from it (NAME__pair_energy, ...): a
  # name that is not a C identifier would fail only in nvcc or at the link
  if(NOT name MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "metro_add_plugin(${name}): a plugin's name is a C identifier "
                        "(letters, digits and _, not starting with a digit)")
  endif()
  cmake_parse_arguments(P "" "" "SOURCES;DEVICE;LIBRARIES" ${ARGN})
  add_library(${name} MODULE ${P_SOURCES})
  set_target_properties(${name} PROPERTIES
    PREFIX "" OUTPUT_NAME ${name}
    LIBRARY_OUTPUT_DIRECTORY ${METRO_PLUGIN_OUTPUT_DIR}
    C_VISIBILITY_PRESET hidden
    # installed, it still finds libcudart where the toolkit is not in ld.so.conf
    INSTALL_RPATH_USE_LINK_PATH ON)
  target_include_directories(${name} PRIVATE ${METRO_INCLUDE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE CUDA::cudart m ${P_LIBRARIES})
  if(P_DEVICE)
    list(LENGTH P_DEVICE nd)
    if(nd GREATER 1)
      message(FATAL_ERROR "metro_add_plugin(${name}): give one DEVICE .cu file (include others from it)")
    endif()
    metro_device_ir(${name} metro_device_ir ${P_DEVICE})
  endif()
  if(METRO_PLUGIN_INSTALL_DIR)
    install(TARGETS ${name} LIBRARY DESTINATION ${METRO_PLUGIN_INSTALL_DIR})
  endif()
endfunction()
