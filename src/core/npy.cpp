#include "npy.h"

#include "error.h"

#include <cstdlib>
#include <cstring>
#include <fstream>

namespace transcribe {

void npy_write_f32(const std::string & path, const float * data, const std::vector<int64_t> & shape) {
    std::string dims;
    size_t count = 1;
    for (int64_t d : shape) {
        dims += std::to_string(d) + ",";
        count *= size_t(d);
    }
    if (shape.size() > 1) {
        dims.pop_back();
    }
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
    const size_t total = 10 + header.size() + 1;
    header += std::string((64 - total % 64) % 64, ' ') + "\n";
    std::ofstream f(path, std::ios::binary);
    if (!f) {
        fail(TRANSCRIBE_ERR_FILE_READ, "cannot write %s", path.c_str());
    }
    const uint16_t hlen = uint16_t(header.size());
    f.write("\x93NUMPY\x01\x00", 8);
    f.write(reinterpret_cast<const char *>(&hlen), 2);
    f.write(header.data(), std::streamsize(header.size()));
    f.write(reinterpret_cast<const char *>(data), std::streamsize(count * sizeof(float)));
}

NpyArray npy_read(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        fail(TRANSCRIBE_ERR_FILE_NOT_FOUND, "cannot open %s", path.c_str());
    }
    char magic[8];
    uint16_t hlen = 0;
    f.read(magic, 8);
    f.read(reinterpret_cast<char *>(&hlen), 2);
    if (!f || std::memcmp(magic, "\x93NUMPY", 6) != 0 || magic[6] != 1) {
        fail(TRANSCRIBE_ERR_FILE_READ, "%s: not a version-1 .npy file", path.c_str());
    }
    std::string header(hlen, '\0');
    f.read(header.data(), hlen);
    NpyArray a;
    const size_t lp = header.find('('), rp = header.find(')');
    std::string dims = header.substr(lp + 1, rp - lp - 1);
    size_t count = 1;
    for (size_t p = 0; p < dims.size();) {
        const size_t c = dims.find(',', p);
        std::string tok = dims.substr(p, c == std::string::npos ? std::string::npos : c - p);
        if (tok.find_first_of("0123456789") != std::string::npos) {
            a.shape.push_back(std::stoll(tok));
            count *= size_t(a.shape.back());
        }
        if (c == std::string::npos) {
            break;
        }
        p = c + 1;
    }
    if (header.find("fortran_order': True") != std::string::npos) {
        fail(TRANSCRIBE_ERR_FILE_READ, "%s: Fortran order not supported", path.c_str());
    }
    if (header.find("'<f4'") != std::string::npos) {
        a.f32.resize(count);
        f.read(reinterpret_cast<char *>(a.f32.data()), std::streamsize(count * 4));
    } else if (header.find("'<i4'") != std::string::npos) {
        a.i32.resize(count);
        f.read(reinterpret_cast<char *>(a.i32.data()), std::streamsize(count * 4));
    } else if (header.find("'<i8'") != std::string::npos) {
        std::vector<int64_t> tmp(count);
        f.read(reinterpret_cast<char *>(tmp.data()), std::streamsize(count * 8));
        a.i32.assign(tmp.begin(), tmp.end());
    } else {
        fail(TRANSCRIBE_ERR_FILE_READ, "%s: unsupported dtype in header %s", path.c_str(), header.c_str());
    }
    if (!f) {
        fail(TRANSCRIBE_ERR_FILE_READ, "%s: truncated", path.c_str());
    }
    return a;
}

bool dump_enabled() {
    const char * dir = std::getenv("TRANSCRIBE_DUMP_DIR");
    return dir && *dir;
}

void dump_f32(const char * name, const std::vector<float> & data, const std::vector<int64_t> & shape) {
    if (!dump_enabled()) {
        return;
    }
    npy_write_f32(std::string(std::getenv("TRANSCRIBE_DUMP_DIR")) + "/" + name + ".npy", data.data(), shape);
}

void dump_ids(const char * name, const std::vector<int32_t> & ids) {
    if (!dump_enabled()) {
        return;
    }
    const std::string path = std::string(std::getenv("TRANSCRIBE_DUMP_DIR")) + "/" + name + ".json";
    std::ofstream f(path);
    f << '[';
    for (size_t i = 0; i < ids.size(); ++i) {
        f << (i ? ", " : "") << ids[i];
    }
    f << "]\n";
    if (!f) {
        fail(TRANSCRIBE_ERR_FILE_READ, "cannot write %s", path.c_str());
    }
}

} // namespace transcribe
