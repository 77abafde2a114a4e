#include "placement.h"

#include "ggml-backend.h"

namespace transcribe {

bool in_host_memory(const ggml_tensor * t) {
    const ggml_tensor * base = t->view_src ? t->view_src : t;
    return base->buffer && ggml_backend_buffer_is_host(base->buffer);
}

bool is_host_f32_vector(const ggml_tensor * t, int64_t n) {
    return t && t->type == GGML_TYPE_F32 && ggml_is_contiguous(t) && ggml_nelements(t) == n && in_host_memory(t);
}

} // namespace transcribe
