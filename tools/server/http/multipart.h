// multipart/form-data bodies (RFC 7578 over RFC 2046's framing): the boundary from the Content-Type,
// then each part's name (and file name) from its Content-Disposition and its bytes as sent.
#pragma once

#include <map>
#include <string>

namespace transcribe_server {

struct FormPart {
    std::string filename; // "" for a plain field
    std::string content;
};

// Field name to parts, in the order sent (a repeated field gives several).
using Form = std::multimap<std::string, FormPart>;

// The boundary a Content-Type of multipart/form-data names; "" when it is not one or names none.
std::string form_boundary(const std::string & content_type);

// BODY's parts; false (OUT unspecified) when the body is not framed by BOUNDARY or a part has no name.
bool parse_form(const std::string & body, const std::string & boundary, Form * out);

} // namespace transcribe_server
