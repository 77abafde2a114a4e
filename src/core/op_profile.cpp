#include "op_profile.h"

#include "ggml.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <vector>

namespace transcribe {

namespace {

bool is_metadata_only(const ggml_tensor * t) {
    switch (t->op) {
        case GGML_OP_NONE: case GGML_OP_VIEW: case GGML_OP_RESHAPE: case GGML_OP_PERMUTE: case GGML_OP_TRANSPOSE:
            return true;
        default:
            return false;
    }
}

// Our GEMM and GEMV ops (ops/matmul.h): the name carries the weight type, src[0] is the activation.
bool is_our_gemm(const ggml_tensor * t) {
    return t->op == GGML_OP_CUSTOM && (std::strncmp(t->name, "avx512_gemm", 11) == 0 || std::strncmp(t->name, "avx512_gemv", 11) == 0);
}

// Matmuls are told apart by operand types and shapes: those pick the kernel (and its speed).
std::string op_key(const ggml_tensor * t) {
    std::string key = ggml_op_desc(t);
    if (t->op == GGML_OP_MUL_MAT && t->src[0] && t->src[1]) {
        const ggml_tensor * a = t->src[0];
        const ggml_tensor * b = t->src[1];
        char shape[160];
        std::snprintf(shape, sizeof shape, " %s [%lld x %lld x %lld] x %s [%lld x %lld]%s%s", ggml_type_name(a->type),
                      (long long) a->ne[0], (long long) a->ne[1], (long long) a->ne[2], ggml_type_name(b->type),
                      (long long) b->ne[1], (long long) b->ne[2], ggml_is_contiguous(b) ? "" : " strided",
                      a->buffer && ggml_backend_buffer_get_usage(a->buffer) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS ? " weight" : "");
        key += shape;
    } else if (is_our_gemm(t)) {
        char shape[160];
        std::snprintf(shape, sizeof shape, " %s [%lld x %lld] x [%lld]", t->name, (long long) t->src[0]->ne[0],
                      (long long) t->ne[0], (long long) t->ne[1]);
        key += shape;
    } else if (t->op == GGML_OP_CUSTOM && t->name[0]) { // our other ops (kernels/) carry their names
        key += std::string(" ") + t->name;
    }
    return key;
}

double op_flops(const ggml_tensor * t) {
    if (t->op == GGML_OP_MUL_MAT || is_our_gemm(t)) {
        return 2.0 * double(t->src[0]->ne[0]) * double(ggml_nelements(t));
    }
    return 0;
}

} // namespace

std::unique_ptr<OpProfile> OpProfile::from_env() {
    const char * v = std::getenv("TRANSCRIBE_PROFILE");
    if (!v || !*v || std::string(v) == "0") {
        return nullptr;
    }
    return std::make_unique<OpProfile>(std::string(v) == "1" ? std::string() : std::string(v));
}

bool OpProfile::observe(ggml_tensor * t, bool ask, void * user) {
    auto * self = static_cast<OpProfile *>(user);
    if (ask) {
        // The scheduler runs everything up to the next node we ask for in one go, right after asking.
        if (!self->running_) {
            self->start_   = clock::now();
            self->running_ = true;
        }
        return !is_metadata_only(t);
    }
    Entry & e = self->stages_[self->stage_][op_key(t)];
    e.ms += std::chrono::duration<double, std::milli>(clock::now() - self->start_).count();
    e.flops += op_flops(t);
    e.calls += 1;
    self->running_ = false;
    return true;
}

std::string OpProfile::report() const {
    std::string out;
    char line[256];
    for (const auto & [stage, ops] : stages_) {
        double total = 0;
        for (const auto & kv : ops) {
            total += kv.second.ms;
        }
        std::snprintf(line, sizeof line, "profile: %s, %.1f ms in ops\n", stage.c_str(), total);
        out += line;
        std::vector<std::pair<std::string, Entry>> rows(ops.begin(), ops.end());
        std::sort(rows.begin(), rows.end(), [](const auto & a, const auto & b) { return a.second.ms > b.second.ms; });
        for (const auto & [op, e] : rows) {
            std::snprintf(line, sizeof line, "  %-58s %6ld calls %10.1f ms %5.1f %%", op.c_str(), e.calls, e.ms,
                          total > 0 ? 100.0 * e.ms / total : 0.0);
            out += line;
            if (e.flops > 0 && e.ms > 0) {
                std::snprintf(line, sizeof line, " %7.1f GFLOP/s", e.flops / e.ms / 1e6);
                out += line;
            }
            out += "\n";
        }
    }
    return out;
}

OpProfile::~OpProfile() {
    if (stages_.empty()) {
        return;
    }
    const std::string text = report();
    FILE * f = destination_.empty() ? stderr : std::fopen(destination_.c_str(), "a");
    if (f) {
        std::fputs(text.c_str(), f);
        if (f != stderr) {
            std::fclose(f);
        }
    }
}

} // namespace transcribe
