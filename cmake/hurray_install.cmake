# What `cmake --install` puts where (and so what the .deb holds, cmake/hurray_cpack.cmake):
#   bin/            hurrayd, hurrayctl
#   lib/            libhurray.so (the format's C ABI), libhurray-client.so (the C client) and
#                   libhurray-client++.so (the C++ client), each with its SONAME link
#                   (libhurray.so.0) and version file
#   include/        hurray.h, hurray_client.h: the C API; hurray/: the C++ client's headers
#                   (client.h, file_transfer.h, health.h, inspection.h, inspection_json.h)
#                   and the format headers they include, no others (the list is
#                   HURRAY_CXX_HEADERS below)
#   lib/cmake/hurray/       hurray-config.cmake: find_package(hurray) gives hurray::hurray,
#                           hurray::client and hurray::client++
#   lib/pkgconfig/          hurray.pc, hurray-client.pc, hurray-client++.pc
#   lib/systemd/system/     hurrayd.service (names hurrayd where this install puts it)
#   lib/sysusers.d/         hurray.conf: the system user and group hurray
#   lib/tmpfiles.d/         hurray.conf, when systemd/hurray.tmpfiles.conf exists
#   /etc/hurray/            hurrayd.toml, the example configuration (the unit reads it)
#   share/doc/hurray/       the docs
#   the Python package, when built: python/CMakeLists.txt installs it.
# The example configuration's directory is absolute (GNUInstallDirs: /etc for the prefix /usr):
# an install to a staging tree uses DESTDIR.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(HURRAY_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/hurray)
set(HURRAY_PKGCONFIG_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(TARGETS hurray EXPORT hurray-targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES core/include/hurray.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(HURRAY_PKGCONFIG_FILES hurray)
if(HURRAY_BUILD_SERVICES)
  install(TARGETS hurrayd hurrayctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  # hurray::client, the C client (hurray_client.h).
  set_target_properties(hurray-client PROPERTIES EXPORT_NAME client)
  install(TARGETS hurray-client EXPORT hurray-targets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(FILES client/include/hurray_client.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  list(APPEND HURRAY_PKGCONFIG_FILES hurray-client)

  # hurray::client++, the C++ client (hurray/client.h), named as gRPC names its C++ library
  # (gRPC::grpc++, libgrpc++.so, grpc++.pc). Its headers and every header of ours they
  # include: the package_consumer test compiles each of them alone against the install.
  set_target_properties(hurray-client++ PROPERTIES EXPORT_NAME client++)
  install(TARGETS hurray-client++ EXPORT hurray-targets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  set(HURRAY_CXX_HEADERS
      client/include/hurray/client.h client/include/hurray/file_transfer.h
      client/include/hurray/health.h client/include/hurray/inspection.h
      client/include/hurray/inspection_json.h core/include/hurray/buffer_handle.h
      core/include/hurray/buffer_parts.h core/include/hurray/element_type.h
      core/include/hurray/error.h core/include/hurray/export.h core/include/hurray/file_reader.h
      core/include/hurray/file_reads.h core/include/hurray/file_writer.h
      core/include/hurray/layout.h core/include/hurray/pool_name.h
      core/include/hurray/quantization.h core/include/hurray/tensor_descriptor.h)
  install(FILES ${HURRAY_CXX_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hurray)
  list(APPEND HURRAY_PKGCONFIG_FILES hurray-client++)

  # The unit names hurrayd where this install puts it.
  configure_file(systemd/hurrayd.service.in ${PROJECT_BINARY_DIR}/hurrayd.service @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/hurrayd.service DESTINATION lib/systemd/system)
  install(FILES systemd/hurray.sysusers.conf DESTINATION lib/sysusers.d RENAME hurray.conf)
  if(EXISTS ${PROJECT_SOURCE_DIR}/systemd/hurray.tmpfiles.conf)
    install(FILES systemd/hurray.tmpfiles.conf DESTINATION lib/tmpfiles.d RENAME hurray.conf)
  endif()
  install(FILES deploy/hurrayd.toml DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/hurray)
endif()
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})

# find_package(hurray): the exported targets, relocatable (found from the config's own place).
install(EXPORT hurray-targets NAMESPACE hurray:: FILE hurray-targets.cmake
        DESTINATION ${HURRAY_CMAKE_INSTALL_DIR})
configure_package_config_file(cmake/hurray-config.cmake.in
                              ${PROJECT_BINARY_DIR}/cmake/hurray-config.cmake
                              INSTALL_DESTINATION ${HURRAY_CMAKE_INSTALL_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/hurray-config-version.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/hurray-config.cmake
              ${PROJECT_BINARY_DIR}/cmake/hurray-config-version.cmake
        DESTINATION ${HURRAY_CMAKE_INSTALL_DIR})

# pkg-config: a staged install (DESTDIR) is read with PKG_CONFIG_SYSROOT_DIR.
foreach(pc IN LISTS HURRAY_PKGCONFIG_FILES)
  configure_file(cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/${pc}.pc
          DESTINATION ${HURRAY_PKGCONFIG_INSTALL_DIR})
endforeach()
