# The CMake package: find_package(metro CONFIG) for plugin authors.
#
# Two trees carry it, from one template (cmake/metroConfig.cmake.in):
#   <prefix>/lib/cmake/metro   after `cmake --install build --prefix <prefix>`
#   <build>                    this build tree, as it is (-Dmetro_DIR=<build>)
# Both give the imported targets metro::metro (libmetro and its headers),
# metro::headers (the headers alone: what a plugin takes from the core) and
# metro::program (the `metro` program), and the function metro_add_plugin().
include(CMakePackageConfigHelpers)

set(METRO_CONFIG_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/metro)
# A plugin is only usable when its LTO-IR is readable by libmetro's
# nvJitLink, so the config names the toolkit metro was built with.
set(METRO_CUDA_VERSION ${CUDAToolkit_VERSION})

# The installed tree.  MetroPlugin.cmake and embed.cmake sit beside the
# config file that includes them; every path is relative to the prefix, so
# the install can be moved.
set(METRO_CONFIG_INCLUDE_DIR ${CMAKE_INSTALL_INCLUDEDIR})
set(METRO_CONFIG_SDK_DIR ${METRO_CONFIG_INSTALL_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/metroConfig.cmake.in
  ${CMAKE_BINARY_DIR}/install-config/metroConfig.cmake
  INSTALL_DESTINATION ${METRO_CONFIG_INSTALL_DIR}
  PATH_VARS METRO_CONFIG_INCLUDE_DIR METRO_CONFIG_SDK_DIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/metroConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(EXPORT metroTargets NAMESPACE metro:: DESTINATION ${METRO_CONFIG_INSTALL_DIR})
install(FILES
  ${CMAKE_BINARY_DIR}/install-config/metroConfig.cmake
  ${CMAKE_BINARY_DIR}/metroConfigVersion.cmake
  ${METRO_SOURCE_DIR}/plugins/MetroPlugin.cmake
  ${METRO_SOURCE_DIR}/plugins/embed.cmake
  DESTINATION ${METRO_CONFIG_INSTALL_DIR})

# The build tree: the same targets, pointing into the build and source
# trees, so a plugin can be built against a metro that was never installed
# (tests/test_template.c does both).  The SDK files are used from source.
set(METRO_CONFIG_INCLUDE_DIR ${METRO_SOURCE_DIR}/core/include)
set(METRO_CONFIG_SDK_DIR ${METRO_SOURCE_DIR}/plugins)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/metroConfig.cmake.in
  ${CMAKE_BINARY_DIR}/metroConfig.cmake
  INSTALL_DESTINATION ${CMAKE_BINARY_DIR}
  INSTALL_PREFIX ${CMAKE_BINARY_DIR}
  PATH_VARS METRO_CONFIG_INCLUDE_DIR METRO_CONFIG_SDK_DIR)
export(EXPORT metroTargets NAMESPACE metro:: FILE ${CMAKE_BINARY_DIR}/metroTargets.cmake)
