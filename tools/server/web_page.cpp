// The page at / (tools/server/web/): static files only. It reads nothing the API does not give any
// client, so its files are served without the API key (like /health) and the page asks for the key
// itself; everything it shows comes through the API routes, under their key, limits and CORS.
#include "server.h"

#include "web_assets.h"

#include <cstring>

namespace transcribe_server {

namespace {

const char * content_type_of(const std::string & name) {
    const auto ends = [&](const char * ext) {
        const size_t n = std::strlen(ext);
        return name.size() >= n && name.compare(name.size() - n, n, ext) == 0;
    };
    if (ends(".html")) {
        return "text/html; charset=utf-8";
    }
    if (ends(".js")) {
        return "text/javascript; charset=utf-8";
    }
    if (ends(".css")) {
        return "text/css; charset=utf-8";
    }
    return "application/octet-stream";
}

const WebAsset * find_asset(const std::string & name) {
    for (size_t i = 0; i < k_n_web_assets; ++i) {
        if (name == k_web_assets[i].name) {
            return &k_web_assets[i];
        }
    }
    return nullptr;
}

} // namespace

bool is_web_path(const std::string & path) { return path == "/" || path.rfind("/web/", 0) == 0; }

bool serve_web_page(const ServerState & st, const HttpRequest & req, HttpResponse & res) {
    if (!st.web || !is_web_path(req.path)) {
        return false;
    }
    const WebAsset * asset = find_asset(req.path == "/" ? "index.html" : req.path.substr(5));
    if (!asset) {
        return false;
    }
    // No inline script or style anywhere in the page: a transcript or file name that carries markup is
    // inert even if it ever reached the DOM as HTML. The page talks to its own origin only (ws: and
    // wss: included: CSP 3's 'self' covers them).
    res.set_header("Content-Security-Policy",
                   "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                   "media-src 'self' blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
                   "frame-ancestors 'none'");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("Cache-Control", "no-cache");
    res.set_content(std::string(asset->data, asset->size), content_type_of(asset->name));
    return true;
}

} // namespace transcribe_server
