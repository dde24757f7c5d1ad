# iqf_test(NAME [SOURCES file.c ...] [COMMAND program args ...] [LIBS lib ...] [LABELS label ...]
#          [TIMEOUT seconds])
# Registers one ctest in one line. With SOURCES: builds the program NAME from them, linked with
# iqf_testcommon (tests/common: testutil, qgen, codec_suite; which brings the oracle library
# iqf_oracle, libiqforge and src/ on the include path) and LIBS, and runs it; COMMAND runs
# something else instead (a program with arguments, a script). Every test skips with exit status
# 77, has TIMEOUT seconds (default 1500) and sees IQF_SOURCE_DIR and IQF_CLI (the built iqforge).
# LABELS default to the folder of the first source under tests/ (util, codec, ..., cli).
function(iqf_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;COMMAND;LIBS;LABELS" ${ARGN})
  if(T_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "iqf_test(${name}): unexpected arguments ${T_UNPARSED_ARGUMENTS}")
  endif()
  set(cmd ${name})
  if(T_SOURCES)
    list(TRANSFORM T_SOURCES PREPEND ${CMAKE_SOURCE_DIR}/tests/)
    add_executable(${name} ${T_SOURCES})
    target_link_libraries(${name} PRIVATE iqf_testcommon ${T_LIBS})
    if(NOT T_LABELS)
      list(GET T_SOURCES 0 first)
      get_filename_component(dir ${first} DIRECTORY)
      get_filename_component(T_LABELS ${dir} NAME)
    endif()
  endif()
  if(T_COMMAND)
    set(cmd ${T_COMMAND})
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 1500)
  endif()
  add_test(NAME ${name} COMMAND ${cmd})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "IQF_SOURCE_DIR=${CMAKE_SOURCE_DIR};IQF_CLI=$<TARGET_FILE:iqforge-cli>")
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
