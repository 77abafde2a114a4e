// transcribe-quantize IN.gguf OUT.gguf TYPE: requantize a transcribe model with ggml's quantizers.
// Tensors are converted one at a time and streamed to the output, so memory stays at about one tensor.
#include "policy.h"

#include "ggml-cpu.h"
#include "ggml.h"
#include "gguf.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

using namespace transcribe_quantize;

namespace {

int usage() {
    std::fprintf(stderr, "usage: transcribe-quantize IN.gguf OUT.gguf TYPE\n  TYPE: F16, Q8_0, Q6_K, Q5_K_M, Q4_K_M\n");
    return 2;
}

int die(const std::string & msg) {
    std::fprintf(stderr, "transcribe-quantize: error: %s\n", msg.c_str());
    return 1;
}

// Converts n values of `type` to F32.
bool to_f32(ggml_type type, const void * src, float * dst, int64_t n) {
    if (type == GGML_TYPE_F32) {
        std::memcpy(dst, src, size_t(n) * sizeof(float));
        return true;
    }
    const auto * traits = ggml_get_type_traits(type);
    if (!traits->to_float) {
        return false;
    }
    traits->to_float(src, dst, n);
    return true;
}

} // namespace

int main(int argc, char ** argv) {
    if (argc != 4) {
        return usage();
    }
    const std::string in_path = argv[1], out_path = argv[2];
    const Preset * preset = find_preset(argv[3]);
    if (!preset) {
        std::fprintf(stderr, "transcribe-quantize: error: unknown type '%s'\n", argv[3]);
        return usage();
    }
    ggml_cpu_init();
    ggml_context * meta = nullptr;
    gguf_init_params params = {true, &meta};
    gguf_context * in = gguf_init_from_file(in_path.c_str(), params);
    if (!in) {
        return die(in_path + ": not a readable GGUF file");
    }
    FILE * fin = std::fopen(in_path.c_str(), "rb");
    if (!fin) {
        return die(in_path + ": cannot open");
    }
    const int64_t llm_layers_key = gguf_find_key(in, "llm.n_layers");
    const int n_llm_layers = llm_layers_key >= 0 ? int(gguf_get_val_u32(in, llm_layers_key)) : 0;

    gguf_context * out = gguf_init_empty();
    gguf_set_kv(out, in);
    gguf_set_val_str(out, "general.quantized_by", "transcribe-quantize");
    gguf_set_val_str(out, "transcribe.quantization", preset->name);
    const int64_t n = gguf_get_n_tensors(in);
    ggml_init_params op = {ggml_tensor_overhead() * size_t(n + 1), nullptr, true};
    ggml_context * out_meta = ggml_init(op);
    std::vector<ggml_tensor *> out_tensors;
    std::map<std::string, int> counts;
    for (int64_t i = 0; i < n; ++i) {
        ggml_tensor * t = ggml_get_tensor(meta, gguf_get_tensor_name(in, i));
        const ggml_type type = choose_type(*preset, ggml_get_name(t), t->ne, ggml_n_dims(t), t->type, n_llm_layers);
        ggml_tensor * o = ggml_new_tensor(out_meta, type, GGML_MAX_DIMS, t->ne);
        ggml_set_name(o, ggml_get_name(t));
        gguf_add_tensor(out, o);
        out_tensors.push_back(o);
        ++counts[ggml_type_name(type)];
    }
    FILE * fout = std::fopen(out_path.c_str(), "wb");
    if (!fout) {
        return die(out_path + ": cannot create");
    }
    if (!gguf_write_to_file_ptr(out, fout, true)) {
        return die(out_path + ": cannot write the header");
    }
    const size_t data_offset = gguf_get_data_offset(in), align = gguf_get_alignment(out);
    const int n_threads = int(std::max(1u, std::thread::hardware_concurrency()));
    std::vector<uint8_t> raw, packed;
    std::vector<float> f32;
    size_t total_in = 0, total_out = 0;
    for (int64_t i = 0; i < n; ++i) {
        ggml_tensor * src = ggml_get_tensor(meta, gguf_get_tensor_name(in, i));
        ggml_tensor * dst = out_tensors[size_t(i)];
        raw.resize(ggml_nbytes(src));
        if (fseeko(fin, off_t(data_offset + gguf_get_tensor_offset(in, i)), SEEK_SET) != 0 ||
            std::fread(raw.data(), 1, raw.size(), fin) != raw.size()) {
            return die(in_path + ": truncated at tensor " + ggml_get_name(src));
        }
        const uint8_t * data = raw.data();
        if (dst->type != src->type) {
            const int64_t nrows = ggml_nrows(src), per_row = src->ne[0];
            f32.resize(size_t(ggml_nelements(src)));
            if (!to_f32(src->type, raw.data(), f32.data(), ggml_nelements(src))) {
                return die(std::string("cannot convert tensor ") + ggml_get_name(src) + " from " + ggml_type_name(src->type));
            }
            packed.resize(ggml_nbytes(dst));
            // Rows split across threads: ggml's quantizers are the slow part of a 5 GB model.
            std::vector<std::thread> pool;
            const int64_t step = (nrows + n_threads - 1) / n_threads;
            for (int64_t r0 = 0; r0 < nrows; r0 += step) {
                const int64_t nr = std::min(step, nrows - r0);
                pool.emplace_back([&, r0, nr] {
                    ggml_quantize_chunk(dst->type, f32.data() + r0 * per_row,
                                        packed.data() + size_t(r0) * ggml_row_size(dst->type, per_row), 0, nr, per_row, nullptr);
                });
            }
            for (auto & th : pool) {
                th.join();
            }
            data = packed.data();
        }
        const size_t bytes = ggml_nbytes(dst);
        static const char zeros[64] = {};
        if (std::fwrite(data, 1, bytes, fout) != bytes ||
            std::fwrite(zeros, 1, GGML_PAD(bytes, align) - bytes, fout) != GGML_PAD(bytes, align) - bytes) {
            return die(out_path + ": write failed");
        }
        total_in += ggml_nbytes(src);
        total_out += bytes;
    }
    std::fclose(fout);
    std::fclose(fin);
    std::printf("transcribe-quantize: %s -> %s (%s): %.1f MB -> %.1f MB;", in_path.c_str(), out_path.c_str(),
                preset->name, total_in / 1e6, total_out / 1e6);
    for (const auto & [type, count] : counts) {
        std::printf(" %s x%d", type.c_str(), count);
    }
    std::printf("\n");
    gguf_free(out);
    gguf_free(in);
    ggml_free(out_meta);
    ggml_free(meta);
    return 0;
}
