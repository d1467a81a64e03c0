# Turns gateway/dashboard/dashboard.html into a C++ header at build time, so the
# page stays a real .html file in the repository (editable, lintable) and is
# still served from the binary with no file to install (GET /dashboard).
#
#   cmake -DIN=dashboard.html -DOUT=dashboard_html.hpp -P embed_html.cmake
#
# The header holds one raw string literal; the page must not contain its
# closing delimiter. The header is rewritten only when its text changes.
file(READ "${IN}" html)
set(delimiter "lmcc_dash")
string(FIND "${html}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw string delimiter )${delimiter}\"")
endif()
set(text "// Generated from gateway/dashboard/dashboard.html by embed_html.cmake: edit that file.
#pragma once
#include <string_view>
namespace lmcc::gateway {
inline constexpr std::string_view dashboard_html = R\"${delimiter}(${html})${delimiter}\";
} // namespace lmcc::gateway
")
file(WRITE "${OUT}.tmp" "${text}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
