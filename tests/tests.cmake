# The tests (included by CMakeLists.txt, so programs and working directories stay in the build
# folder's root). tests/ mirrors src/: a folder per layer (util, codec, gguf, stats, convert,
# model, quantize), plus api/ (the public header and the shared library), cli/ (the iqforge
# command and tools/ladder) and layers/ (the shape of src/: includes, sizes, link edges).
# Helpers: tests/common (testutil, qgen input generators, codec_suite) and tests/oracle, the one
# oracle library of the differential tests (ggml's libggml-base, libllama's quantizer and
# inference, the oracle's known corrupt blocks). tests/gen: the fixture generators.
# Each test is one iqf_test(...) line (cmake/iqf_test.cmake).
include(${CMAKE_SOURCE_DIR}/cmake/iqf_test.cmake)
enable_testing()

add_library(iqf_testutil STATIC ${CMAKE_SOURCE_DIR}/tests/common/testutil.c)
target_include_directories(iqf_testutil PUBLIC ${CMAKE_SOURCE_DIR}/tests/common ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(iqf_testutil PUBLIC iqforge)
file(GLOB IQF_ORACLE_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/oracle/*.c)
add_library(iqf_oracle STATIC ${IQF_ORACLE_SOURCES})
target_include_directories(iqf_oracle PUBLIC ${CMAKE_SOURCE_DIR}/tests/oracle)
target_link_libraries(iqf_oracle PUBLIC iqf_testutil ${CMAKE_DL_LIBS})
add_library(iqf_testcommon STATIC ${CMAKE_SOURCE_DIR}/tests/common/qgen.c ${CMAKE_SOURCE_DIR}/tests/common/codec_suite.c)
target_link_libraries(iqf_testcommon PUBLIC iqf_oracle)

# Fixture generators (tests/gen): the synthetic Mistral-shaped model (a library for the quantize
# tests and benchmarks, and iqf-genmodel for make demo, make bench, tests/cli/quantize*.sh), a
# Hugging Face checkpoint (iqf-genhf), an importance matrix for any model (iqf-genimatrix,
# scripts/arch-matrix.sh), a random-weight model of any architecture from its skeleton
# (iqf-archmodel, tests/cli/archs.sh), and the value-by-value comparison of two importance
# matrices or Hessian files (iqf-statcmp, tests/cli/imatrix_combine.sh).
add_library(iqf_genmodel STATIC ${CMAKE_SOURCE_DIR}/tests/gen/genmodel.c)
target_include_directories(iqf_genmodel PUBLIC ${CMAKE_SOURCE_DIR}/tests/gen ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(iqf_genmodel PUBLIC iqforge)
add_executable(iqf-genmodel ${CMAKE_SOURCE_DIR}/tests/gen/gen_main.c)
target_link_libraries(iqf-genmodel PRIVATE iqf_genmodel)
add_executable(iqf-genhf ${CMAKE_SOURCE_DIR}/tests/gen/gen_hf.c)
target_link_libraries(iqf-genhf PRIVATE iqforge)
add_executable(iqf-genimatrix ${CMAKE_SOURCE_DIR}/tests/gen/gen_imatrix.c)
target_include_directories(iqf-genimatrix PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(iqf-genimatrix PRIVATE iqforge)
add_executable(iqf-statcmp ${CMAKE_SOURCE_DIR}/tests/gen/stat_cmp.c)
target_include_directories(iqf-statcmp PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(iqf-statcmp PRIVATE iqforge m)
add_executable(iqf-archmodel ${CMAKE_SOURCE_DIR}/tests/gen/arch_model.c)
target_link_libraries(iqf-archmodel PRIVATE iqforge m)

# util
iqf_test(test_types SOURCES util/test_types.c)
# codec
iqf_test(test_best_scale SOURCES codec/test_best_scale.c)
iqf_test(test_codec_api SOURCES codec/test_codec_api.c)
iqf_test(test_codec_fp4 SOURCES codec/test_codec_fp4.c)
iqf_test(test_codec_iq1 SOURCES codec/test_codec_iq1.c)
iqf_test(test_codec_iq2 SOURCES codec/test_codec_iq2.c)
iqf_test(test_codec_iq3 SOURCES codec/test_codec_iq3.c)
iqf_test(test_codec_iq4 SOURCES codec/test_codec_iq4.c)
iqf_test(test_codec_kq SOURCES codec/test_codec_kq.c)
iqf_test(test_codec_legacy SOURCES codec/test_codec_legacy.c)
iqf_test(test_codec_lowbit SOURCES codec/test_codec_lowbit.c)
iqf_test(test_codec_nomem SOURCES codec/test_codec_nomem.c)
# the codec table builds under memory exhaustion: the library's malloc/calloc can be made to fail
target_link_options(test_codec_nomem PRIVATE -Wl,--wrap=malloc -Wl,--wrap=calloc)
iqf_test(test_compat_platform SOURCES codec/test_compat_platform.c)
iqf_test(test_refvec SOURCES codec/test_refvec.c)
# gguf, stats, convert
iqf_test(test_gguf SOURCES gguf/test_gguf.c)
iqf_test(test_imatrix SOURCES stats/test_imatrix.c)
iqf_test(test_convert SOURCES convert/test_convert.c)
iqf_test(test_convert_spm SOURCES convert/test_convert_spm.c)
# model
iqf_test(test_hessian SOURCES model/test_hessian.c)
iqf_test(test_model SOURCES model/test_model.c)
iqf_test(test_model_act SOURCES model/test_model_act.c)
iqf_test(test_model_arch SOURCES model/test_model_arch.c LIBS iqf_genmodel)
iqf_test(test_model_arch_quant SOURCES model/test_model_arch_quant.c LIBS iqf_genmodel)
iqf_test(test_model_archfiles SOURCES model/test_model_archfiles.c)
iqf_test(test_model_dot_lowbit SOURCES model/test_model_dot_lowbit.c)
iqf_test(test_model_eval SOURCES model/test_model_eval.c)
iqf_test(test_model_fleet_imatrix SOURCES model/test_model_fleet_imatrix.c LIBS iqf_genmodel)
iqf_test(test_model_kernels SOURCES model/test_model_kernels.c)
iqf_test(test_model_kvf16 SOURCES model/test_model_kvf16.c)
iqf_test(test_model_loader SOURCES model/test_model_loader.c LIBS iqf_genmodel)
iqf_test(test_model_pool SOURCES model/test_model_pool.c)
iqf_test(test_model_sim SOURCES model/test_model_sim.c)
iqf_test(test_threads SOURCES model/test_threads.c)
iqf_test(test_tokenizer SOURCES model/test_tokenizer.c)
# quantize
iqf_test(test_best_files SOURCES quantize/test_best_files.c)
iqf_test(test_feedback SOURCES quantize/test_feedback.c)
iqf_test(test_hessian_experts SOURCES quantize/test_hessian_experts.c LIBS iqf_genmodel)
iqf_test(test_quantize_errors SOURCES quantize/test_quantize_errors.c LIBS iqf_genmodel)
iqf_test(test_quantize_oracle SOURCES quantize/test_quantize_oracle.c LIBS iqf_genmodel)
# more entries of the oracle differential (subsets by argument): IQ file types, the models of
# ../shared (CI-only), full Mistral shapes (CI or IQF_FULL_TESTS=1)
foreach(sub iq2 iq3 shared full new)
  iqf_test(test_quantize_oracle_${sub} COMMAND test_quantize_oracle ${sub} LABELS quantize)
endforeach()
iqf_test(test_recipe SOURCES quantize/test_recipe.c)
iqf_test(test_recipe_oracle SOURCES quantize/test_recipe_oracle.c)
iqf_test(test_target SOURCES quantize/test_target.c LIBS iqf_genmodel)
# api: the public header's file APIs; the shared library's exported symbols are the public API,
# and the header's example builds against the header alone and runs with the shared library
iqf_test(test_api_files SOURCES api/test_api_files.c)
iqf_test(api_exports COMMAND bash ${CMAKE_SOURCE_DIR}/tests/api/exports.sh ${CMAKE_SOURCE_DIR}
  $<TARGET_FILE:iqforge_shared> LABELS api)
iqf_test(api_example COMMAND bash ${CMAKE_SOURCE_DIR}/tests/api/example.sh ${CMAKE_SOURCE_DIR}
  $<TARGET_FILE:iqforge_shared> LABELS api)
# cli: tools/ladder's rules, and every tests/cli/NAME.sh as cli_NAME, run with the built binary
iqf_test(test_ladder SOURCES cli/test_ladder.c LIBS iqforge_ladder)
file(GLOB IQF_CLI_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/cli/*.sh)
foreach(t ${IQF_CLI_TESTS})
  get_filename_component(name ${t} NAME_WE)
  iqf_test(cli_${name} COMMAND bash ${t} LABELS cli)
endforeach()
# the CI-only quality guard: about 10 minutes alone on 2 cores, twice that beside another test
set_tests_properties(cli_quality_guard PROPERTIES TIMEOUT 3600)
# layers: includes point down the layers, no file over 900 lines, no function over 150; the
# linker rejects a call from the codec layer into the model layer
iqf_test(check_layers COMMAND bash ${CMAKE_SOURCE_DIR}/tests/layers/check_layers.sh ${CMAKE_SOURCE_DIR}
  LABELS layers TIMEOUT 300)
iqf_test(layers_link_reject COMMAND bash ${CMAKE_SOURCE_DIR}/tests/layers/link_reject.sh ${CMAKE_BINARY_DIR}
  LABELS layers TIMEOUT 300)
