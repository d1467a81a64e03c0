// GET /dashboard: the live dashboard (docs/dashboard.md), one self-contained
// HTML page (inline CSS and JS, no external resource) generated into a header
// from gateway/dashboard/dashboard.html at build time. The page polls this
// node's /cluster/status, /cluster/workers, /controller/key-stats and /metrics
// once a second; the node does nothing for it beyond serving those.
#include "gateway/dashboard_html.hpp"
#include "gateway/http_routes.hpp"

namespace lmcc::gateway {

void add_dashboard_route(route_table& routes) {
  routes.get("/dashboard", route_access::read, [](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    // The page may talk to this node only: no CDN, nothing fetched elsewhere.
    res.set_header("Content-Security-Policy",
                   "default-src 'none'; script-src 'unsafe-inline'; "
                   "style-src 'unsafe-inline'; img-src data:; connect-src 'self'");
    res.set_header("Cache-Control", "no-cache");
    res.set_content(dashboard_html.data(), dashboard_html.size(), "text/html; charset=utf-8");
  });
}

} // namespace lmcc::gateway
