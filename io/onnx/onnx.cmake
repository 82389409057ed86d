# protobuf-c's C for onnx.proto, generated at build time into the build folder (never committed).
# The .proto is copied first so the generated names do not carry Debian's include path.
set(TIDE_ONNX_GEN_DIR ${CMAKE_BINARY_DIR}/generated/onnx)
add_custom_command(
  OUTPUT ${TIDE_ONNX_GEN_DIR}/onnx.pb-c.c ${TIDE_ONNX_GEN_DIR}/onnx.pb-c.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${TIDE_ONNX_GEN_DIR}
  COMMAND ${CMAKE_COMMAND} -E copy ${ONNX_PROTO} ${TIDE_ONNX_GEN_DIR}/onnx.proto
  COMMAND ${PROTOC_C} --proto_path=${TIDE_ONNX_GEN_DIR} --c_out=${TIDE_ONNX_GEN_DIR}
          ${TIDE_ONNX_GEN_DIR}/onnx.proto
  DEPENDS ${ONNX_PROTO}
  COMMENT "protoc-c: onnx.proto")
list(APPEND TIDE_SOURCES ${TIDE_ONNX_GEN_DIR}/onnx.pb-c.c)
# Generated code: not ours to keep warning-clean.
set_source_files_properties(${TIDE_ONNX_GEN_DIR}/onnx.pb-c.c PROPERTIES COMPILE_OPTIONS "-w")
