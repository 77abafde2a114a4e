#include "model_file.h"

#include "error.h"
#include "gguf_check.h"
#include "log.h"
#include "parallel.h"

#include "ggml-alloc.h"

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace transcribe {

class MappedFile {
public:
    MappedFile(int fd, size_t size) : size_(size) {
        addr_ = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (addr_ == MAP_FAILED) {
            addr_ = nullptr;
        }
    }
    ~MappedFile() {
        if (addr_) {
            munmap(addr_, size_);
        }
    }
    uint8_t * data() const { return static_cast<uint8_t *>(addr_); }

private:
    void * addr_ = nullptr;
    size_t size_;
};

namespace {

std::string shape_string(const int64_t * ne, int n) {
    std::string s = "[";
    for (int i = 0; i < n; ++i) {
        s += (i ? ", " : "") + std::to_string(ne[i]);
    }
    return s + "]";
}

} // namespace

ModelFile::ModelFile(const std::string & path, bool use_mmap) : path_(path), use_mmap_(use_mmap) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) {
        fail(errno == ENOENT ? TRANSCRIBE_ERR_FILE_NOT_FOUND : TRANSCRIBE_ERR_FILE_READ,
             "model file %s: %s", path.c_str(), std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
        fail(TRANSCRIBE_ERR_FILE_READ, "model file %s: not a regular file", path.c_str());
    }
    file_size_ = size_t(st.st_size);
    if (file_size_ == 0) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: empty file", path.c_str());
    }
    {
        FILE * f = std::fopen(path.c_str(), "rb");
        if (!f) {
            fail(TRANSCRIBE_ERR_FILE_READ, "model file %s: %s", path.c_str(), std::strerror(errno));
        }
        char magic[4] = {};
        const size_t n = std::fread(magic, 1, 4, f);
        std::fclose(f);
        if (n != 4 || std::memcmp(magic, "GGUF", 4) != 0) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: not a GGUF file (bad magic)", path.c_str());
        }
    }
    gguf_check_header(path, file_size_);
    gguf_init_params params = {/*no_alloc =*/true, /*ctx =*/&meta_};
    gguf_ = gguf_init_from_file(path.c_str(), params);
    if (!gguf_) {
        release();
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: corrupt or truncated GGUF header", path.c_str());
    }
    // Every tensor's bytes must lie inside the file: a truncated download fails here, not at compute.
    const size_t data_offset = gguf_get_data_offset(gguf_);
    const int64_t n_tensors  = gguf_get_n_tensors(gguf_);
    for (int64_t i = 0; i < n_tensors; ++i) {
        const size_t off  = gguf_get_tensor_offset(gguf_, i);
        const size_t size = gguf_get_tensor_size(gguf_, i);
        if (data_offset > file_size_ || off > file_size_ - data_offset || size > file_size_ - data_offset - off) {
            const std::string name = gguf_get_tensor_name(gguf_, i);
            release(); // a throwing constructor runs no destructor
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: truncated (tensor %s ends past the end of the file)",
                 path.c_str(), name.c_str());
        }
    }
}

void ModelFile::release() {
    if (buffer_) {
        ggml_backend_buffer_free(buffer_);
        buffer_ = nullptr;
    }
    if (meta_) {
        ggml_free(meta_);
        meta_ = nullptr;
    }
    if (gguf_) {
        gguf_free(gguf_);
        gguf_ = nullptr;
    }
}

ModelFile::~ModelFile() { release(); }

bool ModelFile::has_key(const std::string & key) const { return gguf_find_key(gguf_, key.c_str()) >= 0; }

int64_t ModelFile::key_id(const std::string & key, gguf_type type) const {
    const int64_t id = gguf_find_key(gguf_, key.c_str());
    if (id < 0) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: missing metadata key %s", path_.c_str(), key.c_str());
    }
    if (gguf_get_kv_type(gguf_, id) != type) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: metadata key %s has type %s, expected %s", path_.c_str(),
             key.c_str(), gguf_type_name(gguf_get_kv_type(gguf_, id)), gguf_type_name(type));
    }
    return id;
}

uint32_t ModelFile::get_u32(const std::string & key) const { return gguf_get_val_u32(gguf_, key_id(key, GGUF_TYPE_UINT32)); }

uint32_t ModelFile::get_u32(const std::string & key, uint32_t fallback) const {
    return has_key(key) ? get_u32(key) : fallback;
}

float ModelFile::get_f32(const std::string & key) const { return gguf_get_val_f32(gguf_, key_id(key, GGUF_TYPE_FLOAT32)); }

std::string ModelFile::get_str(const std::string & key) const {
    return gguf_get_val_str(gguf_, key_id(key, GGUF_TYPE_STRING));
}

std::string ModelFile::get_str(const std::string & key, const std::string & fallback) const {
    return has_key(key) ? get_str(key) : fallback;
}

std::vector<int32_t> ModelFile::get_i32_array(const std::string & key) const {
    const int64_t id = key_id(key, GGUF_TYPE_ARRAY);
    const gguf_type t = gguf_get_arr_type(gguf_, id);
    const size_t n = gguf_get_arr_n(gguf_, id);
    std::vector<int32_t> out(n);
    if (t == GGUF_TYPE_INT32 || t == GGUF_TYPE_UINT32) {
        std::memcpy(out.data(), gguf_get_arr_data(gguf_, id), n * sizeof(int32_t));
    } else if (t == GGUF_TYPE_INT64 || t == GGUF_TYPE_UINT64) {
        const int64_t * src = static_cast<const int64_t *>(gguf_get_arr_data(gguf_, id));
        for (size_t i = 0; i < n; ++i) {
            out[i] = int32_t(src[i]);
        }
    } else {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: metadata key %s is not an integer array", path_.c_str(), key.c_str());
    }
    return out;
}

std::vector<std::string> ModelFile::get_str_array(const std::string & key) const {
    const int64_t id = key_id(key, GGUF_TYPE_ARRAY);
    if (gguf_get_arr_type(gguf_, id) != GGUF_TYPE_STRING) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: metadata key %s is not a string array", path_.c_str(), key.c_str());
    }
    const size_t n = gguf_get_arr_n(gguf_, id);
    std::vector<std::string> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        out.emplace_back(gguf_get_arr_str(gguf_, id, i));
    }
    return out;
}

ggml_tensor * ModelFile::find(const std::string & name) const { return ggml_get_tensor(meta_, name.c_str()); }

ggml_tensor * ModelFile::tensor(const std::string & name, std::initializer_list<int64_t> ne,
                                std::initializer_list<ggml_type> types) const {
    ggml_tensor * t = find(name);
    if (!t) {
        fail(TRANSCRIBE_ERR_MISSING_TENSOR, "model file %s: missing tensor %s", path_.c_str(), name.c_str());
    }
    int64_t want[GGML_MAX_DIMS] = {1, 1, 1, 1};
    int n = 0;
    for (int64_t v : ne) {
        want[n++] = v;
    }
    bool ok = ggml_n_dims(t) <= n || n == 0;
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        ok = ok && t->ne[i] == want[i];
    }
    if (!ok) {
        fail(TRANSCRIBE_ERR_BAD_SHAPE, "model file %s: tensor %s has shape %s, expected %s", path_.c_str(),
             name.c_str(), shape_string(t->ne, std::max(ggml_n_dims(t), n)).c_str(), shape_string(want, n).c_str());
    }
    if (types.size() != 0) {
        bool type_ok = false;
        for (ggml_type ty : types) {
            type_ok = type_ok || t->type == ty;
        }
        if (!type_ok) {
            fail(TRANSCRIBE_ERR_BAD_SHAPE, "model file %s: tensor %s has unsupported type %s", path_.c_str(),
                 name.c_str(), ggml_type_name(t->type));
        }
    }
    return t;
}

void ModelFile::load_weights(ggml_backend_dev_t device) {
    const size_t data_offset = gguf_get_data_offset(gguf_);
    const bool   on_cpu      = ggml_backend_dev_type(device) == GGML_BACKEND_DEVICE_TYPE_CPU;
    const int fd = open(path_.c_str(), O_RDONLY);
    if (fd < 0) {
        fail(TRANSCRIBE_ERR_FILE_READ, "model file %s: %s", path_.c_str(), std::strerror(errno));
    }
    if (use_mmap_) {
        map_ = std::make_unique<MappedFile>(fd, file_size_);
        if (!map_->data()) {
            TLOG_WARN("mmap of %s failed, reading it instead", path_.c_str());
            map_.reset();
        }
    }
    if (on_cpu && map_) {
        close(fd);
        // Zero-copy: the tensors point into the mapped file (the page cache holds the only copy).
        place_on_host(map_->data() + data_offset, file_size_ - data_offset);
        return;
    }
    if (on_cpu) {
        close(fd);
        read_into_private_memory();
        return;
    }
    // A buffer of the device's own type, filled tensor by tensor from the map or from plain reads.
    buffer_ = ggml_backend_alloc_ctx_tensors_from_buft(meta_, ggml_backend_dev_buffer_type(device));
    if (!buffer_) {
        close(fd);
        fail(TRANSCRIBE_ERR_OOM, "model file %s: cannot allocate %zu bytes of weights on %s", path_.c_str(),
             file_size_ - data_offset, ggml_backend_dev_name(device));
    }
    ggml_backend_buffer_set_usage(buffer_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    std::vector<uint8_t> staging;
    for (ggml_tensor * t = ggml_get_first_tensor(meta_); t; t = ggml_get_next_tensor(meta_, t)) {
        const int64_t id  = gguf_find_tensor(gguf_, ggml_get_name(t));
        const size_t  off = data_offset + gguf_get_tensor_offset(gguf_, id), n = ggml_nbytes(t);
        const uint8_t * src = nullptr;
        if (map_) {
            src = map_->data() + off;
        } else {
            staging.resize(n);
            for (size_t done = 0; done < n;) {
                const ssize_t got = pread(fd, staging.data() + done, n - done, off_t(off + done));
                if (got <= 0) {
                    close(fd);
                    fail(TRANSCRIBE_ERR_FILE_READ, "model file %s: read failed in tensor %s", path_.c_str(), ggml_get_name(t));
                }
                done += size_t(got);
            }
            src = staging.data();
        }
        ggml_backend_tensor_set(t, src, 0, n);
    }
    close(fd);
    map_.reset(); // the device holds its own copy now
}

// The whole data section read into anonymous memory advised to use huge pages: streaming the weights
// for every token then walks ~512x fewer page-table entries than over 4 KiB page-cache pages, which
// is markedly faster on virtual machines; plain reads keep the page cache out of this process's RSS.
void ModelFile::read_into_private_memory() {
    const size_t data_offset = gguf_get_data_offset(gguf_);
    const size_t size = file_size_ - data_offset, huge = size_t(2) << 20;
    const size_t reserved = (size + huge - 1) / huge * huge;
    void * mem = mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        fail(TRANSCRIBE_ERR_OOM, "model file %s: cannot allocate %zu bytes for the weights", path_.c_str(), size);
    }
    private_ = std::unique_ptr<void, std::function<void(void *)>>(mem, [reserved](void * p) { munmap(p, reserved); });
    madvise(mem, reserved, MADV_HUGEPAGE);
    const int fd = open(path_.c_str(), O_RDONLY);
    if (fd < 0) {
        fail(TRANSCRIBE_ERR_FILE_READ, "model file %s: %s", path_.c_str(), std::strerror(errno));
    }
    uint8_t * base = static_cast<uint8_t *>(mem);
    // Several readers: from a warm page cache the copy and the page faults, not the disk, set the pace.
    const size_t n_readers = std::max<size_t>(1, std::min<size_t>(4, std::thread::hardware_concurrency()));
    const size_t slice = (size / n_readers + huge - 1) / huge * huge;
    std::atomic<size_t> failed_at {SIZE_MAX};
    try {
        parallel_for(int(n_readers), [&](int r) {
            const size_t end = std::min(size, (size_t(r) + 1) * slice);
            for (size_t done = std::min(size, size_t(r) * slice); done < end;) {
                const ssize_t got = pread(fd, base + done, std::min(end - done, size_t(64) << 20), off_t(data_offset + done));
                if (got <= 0) {
                    failed_at = data_offset + done;
                    return;
                }
                done += size_t(got);
            }
        });
    } catch (...) {
        close(fd);
        throw;
    }
    close(fd);
    if (failed_at != SIZE_MAX) {
        fail(TRANSCRIBE_ERR_FILE_READ, "model file %s: read failed at byte %zu", path_.c_str(), failed_at.load());
    }
    place_on_host(base, size);
}

// Points every tensor into `base`, a host copy of the file's data section, through one CPU buffer.
void ModelFile::place_on_host(uint8_t * base, size_t size) {
    buffer_ = ggml_backend_cpu_buffer_from_ptr(base, size);
    if (!buffer_) {
        fail(TRANSCRIBE_ERR_OOM, "model file %s: cannot wrap the weights in a CPU buffer", path_.c_str());
    }
    ggml_backend_buffer_set_usage(buffer_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    for (ggml_tensor * t = ggml_get_first_tensor(meta_); t; t = ggml_get_next_tensor(meta_, t)) {
        const int64_t id = gguf_find_tensor(gguf_, ggml_get_name(t));
        if (ggml_backend_tensor_alloc(buffer_, t, base + gguf_get_tensor_offset(gguf_, id)) != GGML_STATUS_SUCCESS) {
            fail(TRANSCRIBE_ERR_BACKEND, "model file %s: cannot place tensor %s", path_.c_str(), ggml_get_name(t));
        }
    }
}

std::vector<float> ModelFile::read_f32(const ggml_tensor * t) const {
    std::vector<float> out(size_t(ggml_nelements(t)));
    if (t->buffer) {
        if (t->type != GGML_TYPE_F32) {
            fail(TRANSCRIBE_ERR_BAD_SHAPE, "tensor %s must be F32, is %s", ggml_get_name(t), ggml_type_name(t->type));
        }
        ggml_backend_tensor_get(t, out.data(), 0, ggml_nbytes(t));
        return out;
    }
    fail(TRANSCRIBE_ERR_INTERNAL, "tensor %s read before the weights were loaded", ggml_get_name(t));
}

} // namespace transcribe
