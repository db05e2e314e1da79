# brush_scaling (bench/brush_scaling.c): one cycle of the paper's electrolyte
# for N = 8192 ... 1048576, brush vs the conventional GPU scheme vs the CPU
# loop.  Included from bench/CMakeLists.txt.
add_executable(brush_scaling ${CMAKE_CURRENT_LIST_DIR}/brush_scaling.c)
target_link_libraries(brush_scaling PRIVATE metro CUDA::cudart ${CMAKE_DL_LIBS} m)
add_dependencies(brush_scaling brush coulomb_hs metropolis)
