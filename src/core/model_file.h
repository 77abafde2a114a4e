// One shared GGUF loader for every model family: header parsing with named errors, metadata getters,
// tensor lookup with shape and type checks, and placement of the weights on a backend (zero-copy
// from the memory-mapped file on CPU).
#pragma once

#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h"

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace transcribe {

class MappedFile;

class ModelFile {
public:
    // Parses the header; FILE_NOT_FOUND / FILE_READ / BAD_GGUF on failure. No tensor data is read yet.
    ModelFile(const std::string & path, bool use_mmap);
    ~ModelFile();
    ModelFile(const ModelFile &) = delete;
    ModelFile & operator=(const ModelFile &) = delete;

    const std::string & path() const { return path_; }
    std::string architecture() const { return get_str("general.architecture"); }

    bool        has_key(const std::string & key) const;
    uint32_t    get_u32(const std::string & key) const;
    uint32_t    get_u32(const std::string & key, uint32_t fallback) const;
    float       get_f32(const std::string & key) const;
    std::string get_str(const std::string & key) const;
    std::string get_str(const std::string & key, const std::string & fallback) const;
    std::vector<int32_t>     get_i32_array(const std::string & key) const;
    std::vector<std::string> get_str_array(const std::string & key) const;

    // The tensor `name` with exactly these ggml dimensions (ne[0] first) and one of `types`
    // (empty: any type). MISSING_TENSOR / BAD_SHAPE naming the tensor otherwise.
    ggml_tensor * tensor(const std::string & name, std::initializer_list<int64_t> ne,
                         std::initializer_list<ggml_type> types = {}) const;
    ggml_tensor * find(const std::string & name) const;

    // Puts every tensor's data on `device` (zero-copy on CPU), after the family has looked them all up.
    void load_weights(ggml_backend_dev_t device);

    // Host copy of one tensor as F32 (for small tensors a family transforms at load time).
    std::vector<float> read_f32(const ggml_tensor * t) const;

    size_t file_size() const { return file_size_; }
    gguf_context * gguf() const { return gguf_; }
    ggml_context * meta() const { return meta_; }

private:
    int64_t key_id(const std::string & key, gguf_type type) const;
    void    read_into_private_memory();
    void    place_on_host(uint8_t * base, size_t size);
    void    release();

    std::string             path_;
    bool                    use_mmap_;
    size_t                  file_size_ = 0;
    gguf_context *          gguf_      = nullptr;
    ggml_context *          meta_      = nullptr;
    std::unique_ptr<MappedFile> map_;
    std::unique_ptr<void, std::function<void(void *)>> private_; // weights read into anonymous memory
    ggml_backend_buffer_t   buffer_ = nullptr;
};

} // namespace transcribe
