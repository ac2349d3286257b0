# The headers a C++ user of braze includes: the public API's entry headers and every braze header they
# include, found by following their #include "..." lines. The other headers (a scheduler's own, the
# emitter's, the simulator's) stay private: they are not installed.
function(braze_public_headers out_var source_dir)
  set(pending ${ARGN})
  set(found "")
  while(pending)
    list(POP_FRONT pending header)
    if(header IN_LIST found OR NOT EXISTS "${source_dir}/${header}")
      continue()
    endif()
    list(APPEND found "${header}")
    # An edit of its includes changes the list: the next build configures again.
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${source_dir}/${header}")
    file(STRINGS "${source_dir}/${header}" includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"[^\"]+\"")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([^\"]+)\".*" "\\1" included "${line}")
      list(APPEND pending "${included}")
    endforeach()
  endwhile()
  list(SORT found)
  set(${out_var} "${found}" PARENT_SCOPE)
endfunction()
