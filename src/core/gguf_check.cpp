#include "gguf_check.h"

#include "error.h"

#include "ggml.h"
#include "gguf.h"

#include <cstdint>
#include <cstdio>
#include <memory>

namespace transcribe {

namespace {

constexpr uint64_t kMaxTensors = 1u << 20;
constexpr uint64_t kMaxKv      = 1u << 20;
constexpr uint64_t kMaxKeyLen  = 1u << 16;

class HeaderReader {
public:
    HeaderReader(FILE * f, const std::string & path, size_t size) : f_(f), path_(path), size_(size) {}

    template <typename T> T read(const char * what) {
        T v {};
        if (pos_ + sizeof(T) > size_ || std::fread(&v, sizeof(T), 1, f_) != 1) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: truncated header (reading %s)", path_.c_str(), what);
        }
        pos_ += sizeof(T);
        return v;
    }
    void skip(uint64_t n, const char * what) {
        if (n > size_ - pos_ || std::fseek(f_, long(n), SEEK_CUR) != 0) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: %s of %llu bytes runs past the end of the file", path_.c_str(), what,
                 (unsigned long long) n);
        }
        pos_ += n;
    }
    void string(uint64_t max_len, const char * what) {
        const uint64_t n = read<uint64_t>(what);
        if (n > max_len) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: %s of length %llu exceeds the limit", path_.c_str(), what,
                 (unsigned long long) n);
        }
        skip(n, what);
    }
    size_t remaining() const { return size_ - pos_; }
    const std::string & path() const { return path_; }

private:
    FILE *      f_;
    std::string path_;
    size_t      size_;
    size_t      pos_ = 0;
};

size_t scalar_size(int type) {
    switch (type) {
        case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
        case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
        case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
        case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
        default: return 0;
    }
}

} // namespace

void gguf_check_header(const std::string & path, size_t file_size) {
    std::unique_ptr<FILE, int (*)(FILE *)> f(std::fopen(path.c_str(), "rb"), std::fclose);
    if (!f) {
        fail(TRANSCRIBE_ERR_FILE_READ, "model file %s: cannot open", path.c_str());
    }
    HeaderReader r(f.get(), path, file_size);
    if (r.read<uint32_t>("magic") != 0x46554747u) { // "GGUF"
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: not a GGUF file (bad magic)", path.c_str());
    }
    const uint32_t version = r.read<uint32_t>("version");
    if (version < 2 || version > 3) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: unsupported GGUF version %u", path.c_str(), version);
    }
    const uint64_t n_tensors = r.read<uint64_t>("tensor count"), n_kv = r.read<uint64_t>("metadata count");
    if (n_tensors > kMaxTensors || n_kv > kMaxKv) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: %llu tensors / %llu metadata entries exceed the limits", path.c_str(),
             (unsigned long long) n_tensors, (unsigned long long) n_kv);
    }
    for (uint64_t i = 0; i < n_kv; ++i) {
        r.string(kMaxKeyLen, "metadata key");
        const int32_t type = r.read<int32_t>("metadata type");
        if (type == GGUF_TYPE_STRING) {
            r.string(r.remaining(), "metadata string");
        } else if (type == GGUF_TYPE_ARRAY) {
            const int32_t elem = r.read<int32_t>("array type");
            const uint64_t n   = r.read<uint64_t>("array length");
            if (elem == GGUF_TYPE_STRING) {
                if (n > r.remaining() / 8) {
                    fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: string array of %llu entries cannot fit the file",
                         path.c_str(), (unsigned long long) n);
                }
                for (uint64_t j = 0; j < n; ++j) {
                    r.string(r.remaining(), "array string");
                }
            } else if (scalar_size(elem) == 0) {
                fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: metadata array of unknown type %d", path.c_str(), elem);
            } else {
                if (n > r.remaining() / scalar_size(elem)) {
                    fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: array of %llu entries runs past the end of the file",
                         path.c_str(), (unsigned long long) n);
                }
                r.skip(n * scalar_size(elem), "metadata array");
            }
        } else if (scalar_size(type) == 0) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: metadata value of unknown type %d", path.c_str(), type);
        } else {
            r.skip(scalar_size(type), "metadata value");
        }
    }
    for (uint64_t i = 0; i < n_tensors; ++i) {
        r.string(GGML_MAX_NAME, "tensor name");
        const uint32_t n_dims = r.read<uint32_t>("tensor dimension count");
        if (n_dims > GGML_MAX_DIMS) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: tensor %llu has %u dimensions", path.c_str(), (unsigned long long) i,
                 n_dims);
        }
        uint64_t elements = 1;
        for (uint32_t d = 0; d < n_dims; ++d) {
            const int64_t ne = r.read<int64_t>("tensor dimension");
            // No tensor can hold more elements than the file has bits: that bounds every product.
            if (ne < 0 || (ne > 0 && elements > uint64_t(file_size) * 8 / uint64_t(ne))) {
                fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: tensor %llu has an impossible dimension %lld", path.c_str(),
                     (unsigned long long) i, (long long) ne);
            }
            elements *= uint64_t(ne);
        }
        const int32_t type = r.read<int32_t>("tensor type");
        if (type < 0 || type >= GGML_TYPE_COUNT || ggml_type_size(ggml_type(type)) == 0) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: tensor %llu has unknown type %d", path.c_str(), (unsigned long long) i,
                 type);
        }
        r.read<uint64_t>("tensor offset");
    }
}

} // namespace transcribe
