# The session socket of hurrayd: SessionServer (Boost.Asio) and the SessionHost interface.
find_package(Boost 1.81 REQUIRED)  # Asio is header-only.
find_package(spdlog REQUIRED)

add_library(hurrayd_session STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/src/session_server.cc)
target_include_directories(hurrayd_session PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(hurrayd_session
  PUBLIC hurray_core hurray_service_proto Boost::headers spdlog::spdlog Threads::Threads
  PRIVATE hurray_warnings)
