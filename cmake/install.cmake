# Install rules: `cmake --install build --prefix P` gives
#   P/bin/qforge                      the command-line tool             (component runtime)
#   P/lib/libqforge.a                 the library                       (component dev)
#   P/include/qforge/<layer>/*.h      its headers, as laid out in src/  (component dev)
#   P/lib/cmake/qforge/               the CMake package                 (component dev)
# so another project builds against it with
#   find_package(qforge REQUIRED)
#   target_link_libraries(app PRIVATE qforge::qforge)
# Components are the two Debian packages of cmake/package.cmake. The test is
# tests/packaging/find_package.sh (ctest -R package_find_package).
include(CMakePackageConfigHelpers)

set(QFORGE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/qforge)

install(TARGETS qforge RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)

# Consumers link `qforge::qforge`; in the tree the target stays qforge_lib. Its headers use C++17.
set_target_properties(qforge_lib PROPERTIES EXPORT_NAME qforge)
target_compile_features(qforge_lib PUBLIC cxx_std_17)
install(TARGETS qforge_lib EXPORT qforgeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)

# Every header of the library, keeping src/'s layout so `#include "ir/graph.h"` works with
# include/qforge on the include path. src/cli/ is the qforge binary's, not the library's.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/src/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/qforge
        COMPONENT dev FILES_MATCHING PATTERN "*.h" PATTERN "cli" EXCLUDE)

install(EXPORT qforgeTargets NAMESPACE qforge:: DESTINATION ${QFORGE_INSTALL_CMAKEDIR}
        COMPONENT dev)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/qforgeConfig.cmake.in
  ${CMAKE_BINARY_DIR}/qforgeConfig.cmake INSTALL_DESTINATION ${QFORGE_INSTALL_CMAKEDIR})
# 0.x: a new minor version may break the API, so only the same minor version satisfies a request.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/qforgeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/qforgeConfig.cmake ${CMAKE_BINARY_DIR}/qforgeConfigVersion.cmake
        DESTINATION ${QFORGE_INSTALL_CMAKEDIR} COMPONENT dev)
