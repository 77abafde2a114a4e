#include "model_file.h"

#include "error.h"
#include "gguf_check.h"
#include "log.h"
#include "parallel.h"
#include "system_memory.h"

#include "ggml-alloc.h"

#include <algorithm>
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

ModelFile::ModelFile(const std::string & path, const WeightOptions & options) : path_(path), options_(options) {
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
    for (ggml_backend_buffer_t b : extra_buffers_) {
        ggml_backend_buffer_free(b);
    }
    extra_buffers_.clear();
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

int32_t ModelFile::get_i32(const std::string & key, int32_t fallback) const {
    return has_key(key) ? gguf_get_val_i32(gguf_, key_id(key, GGUF_TYPE_INT32)) : fallback;
}

bool ModelFile::get_bool(const std::string & key, bool fallback) const {
    return has_key(key) ? gguf_get_val_bool(gguf_, key_id(key, GGUF_TYPE_BOOL)) : fallback;
}

float ModelFile::get_f32(const std::string & key) const { return gguf_get_val_f32(gguf_, key_id(key, GGUF_TYPE_FLOAT32)); }

float ModelFile::get_f32(const std::string & key, float fallback) const { return has_key(key) ? get_f32(key) : fallback; }

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

ggml_tensor * ModelFile::optional_tensor(const std::string & name, std::initializer_list<int64_t> ne,
                                        std::initializer_list<ggml_type> types) const {
    return find(name) ? tensor(name, ne, types) : nullptr;
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

ggml_tensor * ModelFile::matmul_weight(const std::string & name, std::initializer_list<int64_t> ne,
                                       std::initializer_list<ggml_type> types) const {
    ggml_tensor * t = tensor(name, ne, types);
    matmul_only_.insert(t);
    return t;
}

ggml_tensor * ModelFile::embedding_weight(const std::string & name, std::initializer_list<int64_t> ne,
                                          std::initializer_list<ggml_type> types) const {
    ggml_tensor * t = tensor(name, ne, types);
    embeddings_.insert(t);
    return t;
}

size_t ModelFile::tensor_file_offset(const ggml_tensor * t) const {
    return gguf_get_data_offset(gguf_) + gguf_get_tensor_offset(gguf_, gguf_find_tensor(gguf_, ggml_get_name(t)));
}

void ModelFile::load_weights(ggml_backend_dev_t device) {
    if (ggml_backend_dev_type(device) == GGML_BACKEND_DEVICE_TYPE_CPU) {
        load_on_cpu(device);
    } else {
        load_on_device(device);
    }
}

namespace {

// Reads [off, off + n) of the file into dst; false on a short read.
bool read_exact(int fd, uint8_t * dst, size_t n, size_t off) {
    for (size_t done = 0; done < n;) {
        const ssize_t got = pread(fd, dst + done, n - done, off_t(off + done));
        if (got <= 0) {
            return false;
        }
        done += size_t(got);
    }
    return true;
}

// The model file open for reading, closed on every way out.
struct OpenFile {
    explicit OpenFile(const std::string & path) : fd(open(path.c_str(), O_RDONLY)) {
        if (fd < 0) {
            fail(TRANSCRIBE_ERR_FILE_READ, "model file %s: %s", path.c_str(), std::strerror(errno));
        }
    }
    ~OpenFile() { close(fd); }
    OpenFile(const OpenFile &) = delete;
    OpenFile & operator=(const OpenFile &) = delete;
    const int fd;
};

} // namespace

// Which matmul weights go to which CPU extra buffer type: asked of the device with a stand-in matmul
// whose weight sits in a (zero-sized) buffer of that type, as the scheduler will ask at compute time.
std::vector<ModelFile::ExtraPlacement> ModelFile::plan_extra_buffers(ggml_backend_dev_t device) const {
    std::vector<ExtraPlacement> plan;
    auto get_extra = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
        ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(device), "ggml_backend_dev_get_extra_bufts"));
    if (!options_.cpu_repack || !get_extra || matmul_only_.empty()) {
        return plan;
    }
    std::vector<ggml_backend_buffer_type_t> bufts;
    for (ggml_backend_buffer_type_t * p = get_extra(device); p && *p; ++p) {
        bufts.push_back(*p);
    }
    ggml_init_params params = {ggml_tensor_overhead() * 4, nullptr, true};
    std::unique_ptr<ggml_context, void (*)(ggml_context *)> ctx(ggml_init(params), ggml_free);
    if (!ctx) {
        fail(TRANSCRIBE_ERR_OOM, "cannot allocate a context for weight placement");
    }
    for (ggml_tensor * t = ggml_get_first_tensor(meta_); t; t = ggml_get_next_tensor(meta_, t)) {
        if (!matmul_only_.count(t) || (relayout_.reads_file_layout && relayout_.reads_file_layout(t))) {
            continue;
        }
        for (ggml_backend_buffer_type_t buft : bufts) {
            ggml_reset(ctx.get());
            ggml_tensor * w  = ggml_new_tensor(ctx.get(), t->type, GGML_MAX_DIMS, t->ne);
            ggml_tensor * op = ggml_mul_mat(ctx.get(), w, ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, t->ne[0], 64));
            w->buffer = ggml_backend_buft_alloc_buffer(buft, 0);
            const bool supported = w->buffer && ggml_backend_dev_supports_op(device, op);
            if (w->buffer) {
                ggml_backend_buffer_free(w->buffer);
            }
            if (supported) {
                plan.push_back({t, buft});
                break;
            }
        }
    }
    return plan;
}

// One buffer per extra type, tensors laid out in it; their data arrives later through tensor_set,
// which converts it into the type's layout.
void ModelFile::allocate_extra_buffers(const std::vector<ExtraPlacement> & plan) {
    std::vector<ggml_backend_buffer_type_t> bufts;
    for (const ExtraPlacement & e : plan) {
        if (std::find(bufts.begin(), bufts.end(), e.buft) == bufts.end()) {
            bufts.push_back(e.buft);
        }
    }
    for (ggml_backend_buffer_type_t buft : bufts) {
        const size_t align = ggml_backend_buft_get_alignment(buft);
        size_t bytes = align;
        for (const ExtraPlacement & e : plan) {
            bytes += e.buft == buft ? GGML_PAD(ggml_backend_buft_get_alloc_size(buft, e.tensor), align) : 0;
        }
        ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(buft, bytes);
        if (!buf) {
            fail(TRANSCRIBE_ERR_OOM, "model file %s: cannot allocate %zu bytes of %s weights", path_.c_str(), bytes,
                 ggml_backend_buft_name(buft));
        }
        extra_buffers_.push_back(buf);
        ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        advise_huge_pages(ggml_backend_buffer_get_base(buf), bytes);
        ggml_tallocr alloc = ggml_tallocr_new(buf);
        for (const ExtraPlacement & e : plan) {
            if (e.buft == buft && ggml_tallocr_alloc(&alloc, e.tensor) != GGML_STATUS_SUCCESS) {
                fail(TRANSCRIBE_ERR_BACKEND, "model file %s: cannot place tensor %s in %s", path_.c_str(),
                     ggml_get_name(e.tensor), ggml_backend_buft_name(buft));
            }
        }
        repacked_bytes_ += bytes;
    }
}

// CPU: the weights of extra buffer types are read and converted; every other tensor is used in place
// from a host copy: the mapped file, or private huge-page memory holding just those tensors, packed
// (at their file offsets, each small tensor between two converted ones would pin a whole huge page).
// Several readers: from a warm page cache the copies, page faults and conversions, not the disk, set
// the pace.
void ModelFile::load_on_cpu(ggml_backend_dev_t device) {
    const size_t data_offset = gguf_get_data_offset(gguf_);
    const OpenFile file(path_);
    const int fd = file.fd;
    map_if_asked(fd);
    const std::vector<ExtraPlacement> plan = plan_extra_buffers(device);
    allocate_extra_buffers(plan);
    std::set<const ggml_tensor *> in_extra;
    for (const ExtraPlacement & e : plan) {
        in_extra.insert(e.tensor);
    }
    std::vector<HostPlacement> host;
    size_t host_size = map_ ? file_size_ - data_offset : 0;
    for (ggml_tensor * t = ggml_get_first_tensor(meta_); t; t = ggml_get_next_tensor(meta_, t)) {
        if (!in_extra.count(t)) {
            host.push_back({t, map_ ? tensor_file_offset(t) - data_offset : host_size});
            host_size = map_ ? host_size : GGML_PAD(host_size + ggml_nbytes(t), 64);
        }
    }
    host_size = std::max<size_t>(host_size, 64); // a buffer of none would be no buffer
    uint8_t * base = map_ ? map_->data() + data_offset : allocate_private_memory(host_size);

    // Work items: an extra-buffer tensor whole (its conversion needs all of it), or up to 64 MiB of a
    // host tensor's bytes (nothing to do when they are used from the mapping).
    struct Item {
        ggml_tensor * extra;  // null: host bytes, read to dst
        uint8_t *     dst;
        size_t        offset; // in the file
        size_t        bytes;
    };
    std::vector<Item> items;
    for (const ExtraPlacement & e : plan) {
        items.push_back({e.tensor, nullptr, tensor_file_offset(e.tensor), ggml_nbytes(e.tensor)});
    }
    for (const HostPlacement & h : host) {
        const size_t off = tensor_file_offset(h.tensor), n = ggml_nbytes(h.tensor);
        for (size_t done = 0; !map_ && done < n; done += size_t(64) << 20) {
            items.push_back({nullptr, base + h.at + done, off + done, std::min(n - done, size_t(64) << 20)});
        }
    }
    std::atomic<size_t> next {0}, failed_at {SIZE_MAX};
    const size_t n_readers = std::max<size_t>(1, std::min<size_t>({4, std::thread::hardware_concurrency(), items.size()}));
    parallel_for(int(n_readers), [&](int) {
        std::vector<uint8_t> staging;
        for (size_t i; (i = next++) < items.size() && failed_at == SIZE_MAX;) {
            const Item & it = items[i];
            if (!it.extra) {
                if (!read_exact(fd, it.dst, it.bytes, it.offset)) {
                    failed_at = it.offset;
                }
                continue;
            }
            const uint8_t * src = nullptr;
            if (map_) {
                src = map_->data() + it.offset;
            } else {
                staging.resize(it.bytes);
                if (!read_exact(fd, staging.data(), it.bytes, it.offset)) {
                    failed_at = it.offset;
                    continue;
                }
                src = staging.data();
            }
            ggml_backend_tensor_set(it.extra, src, 0, it.bytes);
            if (map_) {
                // The converted copy is what is used: drop the mapped source pages from this process.
                const size_t page = size_t(sysconf(_SC_PAGESIZE));
                const uintptr_t lo = (uintptr_t(src) + page - 1) / page * page, hi = (uintptr_t(src) + it.bytes) / page * page;
                if (hi > lo) {
                    madvise(reinterpret_cast<void *>(lo), hi - lo, MADV_DONTNEED);
                }
            }
        }
    });
    if (failed_at != SIZE_MAX) {
        fail(TRANSCRIBE_ERR_FILE_READ, "model file %s: read failed at byte %zu", path_.c_str(), failed_at.load());
    }
    place_on_host(base, host_size, host);
    if (!map_ && options_.cpu_repack && relayout_.takes) {
        // Matmul weights into the op layer's layout, in place (a mapped file's pages stay as they are).
        size_t n = 0, bytes = 0;
        const int threads = int(std::max(1u, std::min(4u, std::thread::hardware_concurrency())));
        for (const HostPlacement & h : host) {
            if ((matmul_only_.count(h.tensor) || embeddings_.count(h.tensor)) && relayout_.takes(h.tensor)) {
                relayout_.apply(h.tensor, threads);
                ++n;
                bytes += ggml_nbytes(h.tensor);
            }
        }
        if (n) {
            TLOG_INFO("%zu matmul weights (%.1f MiB) in the op layer's layout", n, double(bytes) / (1 << 20));
        }
    }
    if (!plan.empty()) {
        TLOG_INFO("%zu matmul weights (%.1f MiB) in CPU extra buffer types", plan.size(), double(repacked_bytes_) / (1 << 20));
    }
}

void ModelFile::map_if_asked(int fd) {
    if (options_.use_mmap) {
        map_ = std::make_unique<MappedFile>(fd, file_size_);
        if (!map_->data()) {
            TLOG_WARN("mmap of %s failed, reading it instead", path_.c_str());
            map_.reset();
        }
    }
}

// Anonymous memory for the host copy of the weights, advised to use huge pages.
uint8_t * ModelFile::allocate_private_memory(size_t size) {
    const size_t reserved = (size + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    void * mem = mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        fail(TRANSCRIBE_ERR_OOM, "model file %s: cannot allocate %zu bytes for the weights", path_.c_str(), size);
    }
    private_ = std::unique_ptr<void, std::function<void(void *)>>(mem, [reserved](void * p) { munmap(p, reserved); });
    advise_huge_pages(mem, reserved);
    return static_cast<uint8_t *>(mem);
}

// A buffer of the device's own type, filled tensor by tensor from the map or from plain reads.
void ModelFile::load_on_device(ggml_backend_dev_t device) {
    const OpenFile file(path_);
    const int fd = file.fd;
    map_if_asked(fd);
    buffer_ = ggml_backend_alloc_ctx_tensors_from_buft(meta_, ggml_backend_dev_buffer_type(device));
    if (!buffer_) {
        fail(TRANSCRIBE_ERR_OOM, "model file %s: cannot allocate %zu bytes of weights on %s", path_.c_str(),
             file_size_ - gguf_get_data_offset(gguf_), ggml_backend_dev_name(device));
    }
    ggml_backend_buffer_set_usage(buffer_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    std::vector<uint8_t> staging;
    for (ggml_tensor * t = ggml_get_first_tensor(meta_); t; t = ggml_get_next_tensor(meta_, t)) {
        const size_t off = tensor_file_offset(t), n = ggml_nbytes(t);
        const uint8_t * src = nullptr;
        if (map_) {
            src = map_->data() + off;
        } else {
            staging.resize(n);
            if (!read_exact(fd, staging.data(), n, off)) {
                fail(TRANSCRIBE_ERR_FILE_READ, "model file %s: read failed in tensor %s", path_.c_str(), ggml_get_name(t));
            }
            src = staging.data();
        }
        ggml_backend_tensor_set(t, src, 0, n);
    }
    map_.reset(); // the device holds its own copy now
}

// Points each host tensor into `base` (a host copy of its bytes) through one CPU buffer.
void ModelFile::place_on_host(uint8_t * base, size_t size, const std::vector<HostPlacement> & host) {
    buffer_ = ggml_backend_cpu_buffer_from_ptr(base, size);
    if (!buffer_) {
        fail(TRANSCRIBE_ERR_OOM, "model file %s: cannot wrap the weights in a CPU buffer", path_.c_str());
    }
    ggml_backend_buffer_set_usage(buffer_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    for (const HostPlacement & h : host) {
        if (ggml_backend_tensor_alloc(buffer_, h.tensor, base + h.at) != GGML_STATUS_SUCCESS) {
            fail(TRANSCRIBE_ERR_BACKEND, "model file %s: cannot place tensor %s", path_.c_str(), ggml_get_name(h.tensor));
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
