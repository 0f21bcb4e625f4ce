include(CMakePackageConfigHelpers)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/turboquant ${PROJECT_SOURCE_DIR}/core/include/turboquant
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# turboquant::core, ::cpu and (when built) ::cuda install from their own
# directories; the registry of backends is installed here.
install(TARGETS turboquant_backends EXPORT turboquantTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT turboquantTargets NAMESPACE turboquant::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/turboquant)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/turboquantConfig.cmake.in
  ${PROJECT_BINARY_DIR}/turboquantConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/turboquant)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/turboquantConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/turboquantConfig.cmake ${PROJECT_BINARY_DIR}/turboquantConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/turboquant)
