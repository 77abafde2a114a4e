// One shared GGUF loader for every model family: header parsing with named errors, metadata getters,
// tensor lookup with shape and type checks, and placement of the weights on a backend (on CPU: used in
// place from a host copy of the file, or converted into one of the CPU's faster matmul layouts).
#pragma once

#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h"

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace transcribe {

class MappedFile;

struct WeightOptions {
    // CPU: use the weights straight from the mapped file instead of a private huge-page copy.
    bool use_mmap = false;
    // CPU: put matmul weights that one of ggml's CPU extra buffer types supports there (the "repack"
    // type re-lays Q4_0 / Q4_K / IQ4_NL rows interleaved for its GEMM/GEMV kernels, as llama.cpp does).
    bool cpu_repack = true;
};

class ModelFile {
public:
    // Parses the header; FILE_NOT_FOUND / FILE_READ / BAD_GGUF on failure. No tensor data is read yet.
    ModelFile(const std::string & path, const WeightOptions & options);
    ~ModelFile();
    ModelFile(const ModelFile &) = delete;
    ModelFile & operator=(const ModelFile &) = delete;

    const std::string & path() const { return path_; }
    std::string architecture() const { return get_str("general.architecture"); }

    bool        has_key(const std::string & key) const;
    uint32_t    get_u32(const std::string & key) const;
    uint32_t    get_u32(const std::string & key, uint32_t fallback) const;
    int32_t     get_i32(const std::string & key, int32_t fallback) const;
    float       get_f32(const std::string & key) const;
    float       get_f32(const std::string & key, float fallback) const;
    bool        get_bool(const std::string & key, bool fallback) const;
    std::string get_str(const std::string & key) const;
    std::string get_str(const std::string & key, const std::string & fallback) const;
    std::vector<int32_t>     get_i32_array(const std::string & key) const;
    std::vector<std::string> get_str_array(const std::string & key) const;

    // The tensor `name` with exactly these ggml dimensions (ne[0] first) and one of `types`
    // (empty: any type). MISSING_TENSOR / BAD_SHAPE naming the tensor otherwise.
    ggml_tensor * tensor(const std::string & name, std::initializer_list<int64_t> ne,
                         std::initializer_list<ggml_type> types = {}) const;
    ggml_tensor * find(const std::string & name) const;
    // tensor(), or nullptr when the file has no tensor of that name (optional biases).
    ggml_tensor * optional_tensor(const std::string & name, std::initializer_list<int64_t> ne,
                                  std::initializer_list<ggml_type> types = {}) const;
    // tensor(), for a weight the family uses only as the first operand of ggml_mul_mat with F32
    // activations: such weights may be stored in a layout that only matmul kernels read.
    ggml_tensor * matmul_weight(const std::string & name, std::initializer_list<int64_t> ne,
                                std::initializer_list<ggml_type> types = {}) const;
    // tensor(), for a token embedding the family reads only through ops::matmul (a tied output head)
    // and ops::embed: it may be stored in our kernels' panel layout (not in ggml's repack buffers).
    ggml_tensor * embedding_weight(const std::string & name, std::initializer_list<int64_t> ne,
                                   std::initializer_list<ggml_type> types = {}) const;

    // What the op layer wants of host weights (its kernels' own layouts): which weights its kernels
    // read in the file layout for every column count (they gain nothing from ggml's CPU repack
    // buffers), which it re-lays once read and how (on N threads). Core only calls it; the family
    // registry sets the op layer's before a family loads.
    struct WeightRelayout {
        std::function<bool(const ggml_tensor *)> reads_file_layout;
        std::function<bool(const ggml_tensor *)> takes;
        std::function<void(ggml_tensor *, int)>  apply;
    };
    void set_weight_relayout(WeightRelayout r) { relayout_ = std::move(r); }
    // Puts every tensor's data on `device`, after the family has looked them all up.
    void load_weights(ggml_backend_dev_t device);
    // Bytes of weights placed in CPU extra buffer types (0 when none or not on CPU).
    size_t repacked_bytes() const { return repacked_bytes_; }

    // Host copy of one tensor as F32 (for small tensors a family transforms at load time).
    std::vector<float> read_f32(const ggml_tensor * t) const;

    size_t file_size() const { return file_size_; }
    gguf_context * gguf() const { return gguf_; }
    ggml_context * meta() const { return meta_; }

private:
    struct ExtraPlacement {
        ggml_tensor *              tensor;
        ggml_backend_buffer_type_t buft;
    };
    struct HostPlacement {
        ggml_tensor * tensor;
        size_t        at; // byte offset in the host copy
    };
    int64_t key_id(const std::string & key, gguf_type type) const;
    size_t  tensor_file_offset(const ggml_tensor * t) const;
    void    load_on_cpu(ggml_backend_dev_t device);
    void    load_on_device(ggml_backend_dev_t device);
    void    map_if_asked(int fd);
    std::vector<ExtraPlacement> plan_extra_buffers(ggml_backend_dev_t device) const;
    void    allocate_extra_buffers(const std::vector<ExtraPlacement> & plan);
    uint8_t * allocate_private_memory(size_t size);
    void    place_on_host(uint8_t * base, size_t size, const std::vector<HostPlacement> & host);
    void    release();

    std::string             path_;
    WeightOptions           options_;
    WeightRelayout          relayout_;
    size_t                  file_size_ = 0;
    gguf_context *          gguf_      = nullptr;
    ggml_context *          meta_      = nullptr;
    std::unique_ptr<MappedFile> map_;
    std::unique_ptr<void, std::function<void(void *)>> private_; // weights read into anonymous memory
    ggml_backend_buffer_t   buffer_ = nullptr;
    std::vector<ggml_backend_buffer_t> extra_buffers_;
    size_t                  repacked_bytes_ = 0;
    // Declared through matmul_weight(); lookups are const, this only records how the family uses them.
    mutable std::set<const ggml_tensor *> matmul_only_;
    mutable std::set<const ggml_tensor *> embeddings_; // declared through embedding_weight()
};

} // namespace transcribe
