# `cpack -G DEB` (the Makefile's `make package`): the Debian package `hurray`, holding what
# cmake/hurray_install.cmake installs. Its Depends are what dpkg-shlibdeps finds the binaries
# and libraries need, plus systemd-sysusers for the user. The maintainer scripts
# (packaging/deb/) create the user and group hurray and never enable or start the service:
# an operator sizes the pool and the group first (docs/operations.md).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME hurray)
set(CPACK_PACKAGE_VENDOR hurray)
set(CPACK_PACKAGE_CONTACT "hurray maintainers <hurray@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "zero-copy tensor exchange daemon, its client libraries and tools")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
       "hurrayd owns shared-memory (and CUDA) pools. Producers allocate tensors in them and "
       "publish them by name, consumers map the same memory read-only. The package holds "
       "hurrayd, hurrayctl, libhurray, libhurray-client and libhurray-client++ (the C++ "
       "client) with their headers, CMake and pkg-config files, the systemd unit, and the "
       "Python module.")
# The unit and the .pc files name paths under the configured prefix: package that same prefix.
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# DEBIAN/shlibs: a package built against libhurray.so.0, libhurray-client.so.0 or
# libhurray-client++.so.0 gets `Depends: hurray (= VERSION)` from its own dpkg-shlibdeps (the
# SONAMEs are not yet a stable ABI across versions).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "systemd | systemd-standalone-sysusers")
# The Python module imports numpy.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3, python3-numpy")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(HURRAY_DEB_DIR ${PROJECT_SOURCE_DIR}/packaging/deb)
configure_file(${HURRAY_DEB_DIR}/conffiles.in ${PROJECT_BINARY_DIR}/deb/conffiles @ONLY)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${HURRAY_DEB_DIR}/postinst ${HURRAY_DEB_DIR}/prerm ${HURRAY_DEB_DIR}/postrm
    ${PROJECT_BINARY_DIR}/deb/conffiles)
include(CPack)
