# The client's end of the session socket: SessionConnection (plain POSIX).
add_library(hurray_client_session STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/src/session_connection.cc)
target_include_directories(hurray_client_session PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(hurray_client_session
  PUBLIC hurray_core hurray_service_proto
  PRIVATE hurray_warnings)
