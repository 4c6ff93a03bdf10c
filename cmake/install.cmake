# Installation (cmake --install <build> --prefix <dir>): what a C++ project needs to use the library
# without this source tree.
#   <prefix>/include/pasa/<layer>/*.hpp       the headers, included as "pasa/<layer>/<name>.hpp"
#   <prefix>/lib/libpasa_<layer>.a            one static library per layer
#   <prefix>/lib/cmake/pasa/                  find_package(pasa): pasa::pasa (everything), pasa::<layer>
#   <prefix>/lib/pkgconfig/pasa.pc            pkg-config --cflags --libs pasa
#   <prefix>/bin/pasa-*                       the programs (installed where they are defined)
# tests/packaging/install_consumer.sh installs into a temporary prefix and builds a consumer both ways.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(PASA_LAYERS numeric inputs exact attention analysis io study)  # bottom to top, as they are linked
set_target_properties(pasa_core PROPERTIES EXPORT_NAME core)
foreach(layer ${PASA_LAYERS})
  set_target_properties(pasa_${layer} PROPERTIES EXPORT_NAME ${layer})
endforeach()
set_target_properties(pasa PROPERTIES EXPORT_NAME pasa)
list(TRANSFORM PASA_LAYERS PREPEND pasa_ OUTPUT_VARIABLE pasa_layer_targets)
install(TARGETS pasa_core ${pasa_layer_targets} pasa EXPORT pasaTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/src/pasa DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")

set(pasa_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/pasa)
install(EXPORT pasaTargets NAMESPACE pasa:: DESTINATION ${pasa_cmake_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/pasaConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/pasaConfig.cmake INSTALL_DESTINATION ${pasa_cmake_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/pasaConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)  # 0.x: a minor version may break the API
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pasaConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/pasaConfigVersion.cmake
        DESTINATION ${pasa_cmake_dir})

# pkg-config: the static layer libraries top to bottom (each uses the ones after it), then what they use.
set(pasa_pc_libs "")
foreach(layer study io analysis attention exact inputs numeric)
  string(APPEND pasa_pc_libs " -lpasa_${layer}")
endforeach()
# The prefix is found from the file's own place (${pcfiledir}), so that --prefix at install time holds.
file(RELATIVE_PATH pasa_pc_up /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
configure_file(${CMAKE_CURRENT_LIST_DIR}/pasa.pc.in ${CMAKE_CURRENT_BINARY_DIR}/pasa.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pasa.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
