// The web page's files (tools/server/web/), built into the server by web/embed.cmake.
#pragma once

#include <cstddef>

namespace transcribe_server {

struct WebAsset {
    const char * name; // path under web/, e.g. "app.js"
    const char * data;
    size_t       size;
};

extern const WebAsset k_web_assets[];
extern const size_t   k_n_web_assets;

} // namespace transcribe_server
