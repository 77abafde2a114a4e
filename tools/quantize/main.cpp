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
    std::fprintf(stderr, "usage: transcribe-quantize IN.gguf OUT.gguf TYPE\n  TYPE: F16, Q8_0, Q5_0, Q6_K, Q5_K_M, Q4_K_M\n");
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

// A LoRA adapter stored beside its base weight (see scripts/convert-canary-qwen.py): "X.weight" has
// "X.lora_a" = A [rank x in] and "X.lora_b" = scaled B [out x rank].
std::string lora_name(const std::string & weight, const char * part) {
    const std::string stem = weight.size() > 7 ? weight.substr(0, weight.size() - 7) : weight;
    return stem + "." + part;
}
bool is_lora(const std::string & name) {
    auto ends = [&](const char * t) { return name.size() > std::strlen(t) && name.compare(name.size() - std::strlen(t), std::string::npos, t) == 0; };
    return ends(".lora_a") || ends(".lora_b");
}

// W += B A in F32, rows of W split across threads (28 x 2 merges of 2048 x 128 x 2048 for the real model).
void merge_lora(float * w, const float * a, const float * b, int64_t n_out, int64_t n_in, int64_t rank, int n_threads) {
    std::vector<std::thread> pool;
    const int64_t step = (n_out + n_threads - 1) / n_threads;
    for (int64_t r0 = 0; r0 < n_out; r0 += step) {
        pool.emplace_back([=] {
            for (int64_t i = r0; i < std::min(n_out, r0 + step); ++i) {
                float * wi = w + i * n_in;
                for (int64_t k = 0; k < rank; ++k) {
                    const float bik = b[i * rank + k];
                    const float * ak = a + k * n_in;
                    for (int64_t j = 0; j < n_in; ++j) {
                        wi[j] += bik * ak[j];
                    }
                }
            }
        });
    }
    for (auto & th : pool) {
        th.join();
    }
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
    std::vector<ggml_tensor *> out_tensors(size_t(n), nullptr); // null: not written (a merged LoRA adapter)
    std::map<std::string, int> counts;
    // A base weight that gets a quantized type takes its LoRA adapter merged in (F32, before quantizing):
    // the adapter's extra matmuls would cost more than its precision gains at these bit widths.
    std::map<std::string, bool> merged; // base weight name -> adapter merged
    for (int64_t i = 0; i < n; ++i) {
        ggml_tensor * t = ggml_get_tensor(meta, gguf_get_tensor_name(in, i));
        const std::string name = ggml_get_name(t);
        const ggml_type type = choose_type(*preset, name, t->ne, ggml_n_dims(t), t->type, n_llm_layers);
        if (ggml_get_tensor(meta, lora_name(name, "lora_a").c_str()) && ggml_get_tensor(meta, lora_name(name, "lora_b").c_str())) {
            merged[name] = ggml_is_quantized(type);
        }
    }
    for (int64_t i = 0; i < n; ++i) {
        ggml_tensor * t = ggml_get_tensor(meta, gguf_get_tensor_name(in, i));
        const std::string name = ggml_get_name(t);
        if (is_lora(name)) {
            const std::string base = name.substr(0, name.size() - 7) + ".weight";
            auto it = merged.find(base);
            if (it == merged.end()) {
                return die(in_path + ": LoRA tensor " + name + " without its base weight and pair");
            }
            if (it->second) {
                continue;
            }
        }
        const ggml_type type = choose_type(*preset, name, t->ne, ggml_n_dims(t), t->type, n_llm_layers);
        ggml_tensor * o = ggml_new_tensor(out_meta, type, GGML_MAX_DIMS, t->ne);
        ggml_set_name(o, name.c_str());
        gguf_add_tensor(out, o);
        out_tensors[size_t(i)] = o;
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
        if (!dst) {
            continue;
        }
        auto read_tensor = [&](const ggml_tensor * t, std::vector<uint8_t> & buf) {
            const int64_t id = gguf_find_tensor(in, ggml_get_name(t));
            buf.resize(ggml_nbytes(t));
            return fseeko(fin, off_t(data_offset + gguf_get_tensor_offset(in, id)), SEEK_SET) == 0 &&
                   std::fread(buf.data(), 1, buf.size(), fin) == buf.size();
        };
        if (!read_tensor(src, raw)) {
            return die(in_path + ": truncated at tensor " + ggml_get_name(src));
        }
        const uint8_t * data = raw.data();
        const auto merge = merged.find(ggml_get_name(src));
        if (dst->type != src->type) {
            const int64_t nrows = ggml_nrows(src), per_row = src->ne[0];
            f32.resize(size_t(ggml_nelements(src)));
            if (!to_f32(src->type, raw.data(), f32.data(), ggml_nelements(src))) {
                return die(std::string("cannot convert tensor ") + ggml_get_name(src) + " from " + ggml_type_name(src->type));
            }
            if (merge != merged.end() && merge->second) {
                const ggml_tensor * a = ggml_get_tensor(meta, lora_name(merge->first, "lora_a").c_str());
                const ggml_tensor * b = ggml_get_tensor(meta, lora_name(merge->first, "lora_b").c_str());
                const int64_t rank = a->ne[1];
                if (a->type != GGML_TYPE_F32 || b->type != GGML_TYPE_F32 || a->ne[0] != per_row || b->ne[0] != rank ||
                    b->ne[1] != nrows) {
                    return die(in_path + ": LoRA adapter of " + merge->first + " has the wrong shape or type");
                }
                std::vector<uint8_t> a_raw, b_raw;
                if (!read_tensor(a, a_raw) || !read_tensor(b, b_raw)) {
                    return die(in_path + ": truncated at the LoRA adapter of " + merge->first);
                }
                merge_lora(f32.data(), reinterpret_cast<const float *>(a_raw.data()),
                           reinterpret_cast<const float *>(b_raw.data()), nrows, per_row, rank, n_threads);
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
