#include "audio.h"

#include "error.h"
#include "system_memory.h"

#include <sndfile.h>
#include <soxr.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sys/stat.h>

namespace transcribe {

namespace {

// sf_open_virtual over a caller's buffer.
struct MemoryStream {
    const uint8_t * data;
    sf_count_t      size;
    sf_count_t      pos;
};

sf_count_t mem_size(void * u) { return static_cast<MemoryStream *>(u)->size; }
sf_count_t mem_seek(sf_count_t offset, int whence, void * u) {
    auto * m = static_cast<MemoryStream *>(u);
    sf_count_t p = whence == SEEK_SET ? offset : whence == SEEK_CUR ? m->pos + offset : m->size + offset;
    if (p < 0 || p > m->size) {
        return -1;
    }
    m->pos = p;
    return p;
}
sf_count_t mem_read(void * dst, sf_count_t n, void * u) {
    auto * m = static_cast<MemoryStream *>(u);
    n = std::min(n, m->size - m->pos);
    std::memcpy(dst, m->data + m->pos, size_t(n));
    m->pos += n;
    return n;
}
sf_count_t mem_write(const void *, sf_count_t, void *) { return 0; }
sf_count_t mem_tell(void * u) { return static_cast<MemoryStream *>(u)->pos; }


// Each frame's channels averaged (in double) into MONO.
void downmix(const float * interleaved, size_t n_frames, int n_channels, float * mono) {
    for (size_t i = 0; i < n_frames; ++i) {
        double sum = 0.0;
        for (int c = 0; c < n_channels; ++c) {
            sum += interleaved[i * size_t(n_channels) + size_t(c)];
        }
        mono[i] = float(sum / n_channels);
    }
}

std::vector<float> read_all(SNDFILE * sf, const SF_INFO & info, const std::string & what, int target_rate,
                            size_t encoded_bytes, const AudioLimits & limits) {
    struct Closer {
        SNDFILE * sf;
        ~Closer() { sf_close(sf); }
    } closer {sf};
    if (info.channels <= 0 || info.samplerate <= 0) {
        fail(TRANSCRIBE_ERR_AUDIO_DECODE, "%s: invalid audio header (%d channels, %d Hz)", what.c_str(), info.channels,
             info.samplerate);
    }
    if (info.samplerate < kMinSampleRate || info.samplerate > kMaxSampleRate) {
        fail(TRANSCRIBE_ERR_AUDIO_DECODE, "%s: sample rate %d Hz is outside %d..%d Hz", what.c_str(), info.samplerate,
             kMinSampleRate, kMaxSampleRate);
    }
    const double max_frames = limits.max_seconds > 0 ? limits.max_seconds * info.samplerate : 0;
    auto too_long = [&](double seconds, const char * how) {
        fail(TRANSCRIBE_ERR_INPUT_TOO_LONG, "%s: audio of %s%.1f s exceeds the limit of %.1f s", what.c_str(), how, seconds,
             limits.max_seconds);
    };
    if (max_frames > 0 && info.frames > 0 && double(info.frames) > max_frames) {
        too_long(double(info.frames) / info.samplerate, ""); // the header says so: nothing is decoded
    }
    // The output is reserved from the header when it is plausible: the header's frame count is only
    // believed up to what the encoded bytes could hold at a generous compression ratio (a few bytes
    // claiming a billion frames, which fuzz_audio found, get no 4 GB reservation).
    std::vector<float> out;
    const sf_count_t plausible = std::max<sf_count_t>(sf_count_t(1) << 20, sf_count_t(encoded_bytes) * 64);
    if (info.frames > 0 && info.frames < sf_count_t(6) * 3600 * info.samplerate) {
        reserve_huge(out, size_t(double(std::min(info.frames, plausible)) * target_rate / info.samplerate) + 16);
    }
    StreamResampler resample(info.samplerate, target_rate, out);
    std::vector<float> chunk(size_t(4096) * size_t(info.channels)), mono(4096);
    size_t frames = 0;
    for (;;) {
        const sf_count_t got = sf_readf_float(sf, chunk.data(), 4096);
        if (got <= 0) {
            break;
        }
        audio_check_finite(chunk.data(), size_t(got) * size_t(info.channels), what.c_str());
        downmix(chunk.data(), size_t(got), info.channels, mono.data());
        resample.push(mono.data(), size_t(got));
        frames += size_t(got);
        if (max_frames > 0 && double(frames) > max_frames) {
            too_long(limits.max_seconds, "over "); // decoding stops here
        }
        if (limits.abort && limits.abort()) {
            fail(TRANSCRIBE_ERR_ABORTED, "%s: decoding aborted by the caller", what.c_str());
        }
    }
    const int err = sf_error(sf);
    if (err) {
        fail(TRANSCRIBE_ERR_AUDIO_DECODE, "%s: decode error: %s", what.c_str(), sf_strerror(sf));
    }
    if (frames == 0) {
        fail(TRANSCRIBE_ERR_AUDIO_DECODE, "%s: no audio samples", what.c_str());
    }
    resample.finish();
    if (out.empty()) {
        fail(TRANSCRIBE_ERR_AUDIO_DECODE, "%s: %zu samples at %d Hz are less than one sample at %d Hz", what.c_str(), frames,
             info.samplerate, target_rate);
    }
    return out;
}

} // namespace

// soxr's streaming resampler (the same engine and quality as the one-shot call).
StreamResampler::StreamResampler(int in_rate, int out_rate, std::vector<float> & out)
    : out_(out), in_rate_(in_rate), out_rate_(out_rate) {
    if (in_rate == out_rate) {
        return;
    }
    soxr_error_t        err     = nullptr;
    soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
    soxr_io_spec_t      io      = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_ = soxr_create(in_rate, out_rate, 1, &err, &io, &quality, nullptr);
    if (err || !soxr_) {
        fail(TRANSCRIBE_ERR_AUDIO_DECODE, "audio: cannot resample %d -> %d Hz: %s", in_rate, out_rate,
             err ? err : "soxr_create failed");
    }
}

StreamResampler::~StreamResampler() {
    if (soxr_) {
        soxr_delete(soxr_);
    }
}

void StreamResampler::push(const float * x, size_t n) {
    in_ += n;
    if (!soxr_) {
        out_.insert(out_.end(), x, x + n);
        return;
    }
    run(x, n);
}

void StreamResampler::finish() {
    if (!soxr_) {
        return;
    }
    run(nullptr, 0);
    const size_t want = size_t(std::llround(double(in_) * double(out_rate_) / double(in_rate_)));
    if (out_.size() > want) {
        out_.resize(want);
    }
}

void StreamResampler::run(const float * x, size_t n) {
    float buf[4096];
    size_t used = 0;
    do {
        size_t consumed = 0, produced = 0;
        soxr_error_t err = soxr_process(soxr_, x ? x + used : nullptr, x ? n - used : 0, &consumed, buf,
                                        sizeof buf / sizeof buf[0], &produced);
        if (err) {
            fail(TRANSCRIBE_ERR_AUDIO_DECODE, "audio: resampling %d -> %d Hz failed: %s", in_rate_, out_rate_, err);
        }
        out_.insert(out_.end(), buf, buf + produced);
        used += consumed;
        if (!x && produced == 0) {
            break; // flushed
        }
        if (x && used >= n && produced < sizeof buf / sizeof buf[0]) {
            break;
        }
    } while (true);
}

void audio_check_finite(const float * samples, size_t n, const char * what) {
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(samples[i])) {
            fail(TRANSCRIBE_ERR_AUDIO_DECODE, "%s: sample %zu is not a finite number", what, i);
        }
    }
}

std::vector<float> audio_decode_file(const std::string & path, int target_rate, const AudioLimits & limits) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) {
        fail(errno == ENOENT ? TRANSCRIBE_ERR_FILE_NOT_FOUND : TRANSCRIBE_ERR_FILE_READ, "audio file %s: %s",
             path.c_str(), std::strerror(errno));
    }
    if (st.st_size == 0) {
        fail(TRANSCRIBE_ERR_AUDIO_DECODE, "audio file %s: empty file", path.c_str());
    }
    SF_INFO info {};
    SNDFILE * sf = sf_open(path.c_str(), SFM_READ, &info);
    if (!sf) {
        fail(TRANSCRIBE_ERR_AUDIO_DECODE, "audio file %s: cannot decode: %s", path.c_str(), sf_strerror(nullptr));
    }
    return read_all(sf, info, "audio file " + path, target_rate, size_t(st.st_size), limits);
}

std::vector<float> audio_decode_memory(const void * data, size_t size, int target_rate, const AudioLimits & limits) {
    if (!data || size == 0) {
        fail(TRANSCRIBE_ERR_AUDIO_DECODE, "audio buffer: empty");
    }
    MemoryStream stream {static_cast<const uint8_t *>(data), sf_count_t(size), 0};
    SF_VIRTUAL_IO io {mem_size, mem_seek, mem_read, mem_write, mem_tell};
    SF_INFO info {};
    SNDFILE * sf = sf_open_virtual(&io, SFM_READ, &info, &stream);
    if (!sf) {
        fail(TRANSCRIBE_ERR_AUDIO_DECODE, "audio buffer: cannot decode: %s", sf_strerror(nullptr));
    }
    return read_all(sf, info, "audio buffer", target_rate, size, limits);
}

std::vector<float> audio_to_mono(const float * interleaved, size_t n_frames, int sample_rate, int n_channels,
                                 int target_rate) {
    if (!interleaved || n_frames == 0 || sample_rate <= 0 || n_channels <= 0 || target_rate <= 0) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "audio: need samples, a positive rate and channel count");
    }
    if (sample_rate < kMinSampleRate || sample_rate > kMaxSampleRate || target_rate < kMinSampleRate ||
        target_rate > kMaxSampleRate) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "audio: sample rates must lie within %d..%d Hz (got %d -> %d)", kMinSampleRate,
             kMaxSampleRate, sample_rate, target_rate);
    }
    // Block by block through the resampler the decoders use (soxr's streaming engine, the output cut
    // to round(n * ratio) samples as its one-shot call gives).
    std::vector<float> out;
    reserve_huge(out, size_t(double(n_frames) * target_rate / sample_rate) + 16);
    StreamResampler resample(sample_rate, target_rate, out);
    std::vector<float> mono(std::min<size_t>(n_frames, 4096));
    for (size_t at = 0; at < n_frames; at += mono.size()) {
        const size_t n = std::min(mono.size(), n_frames - at);
        downmix(interleaved + at * size_t(n_channels), n, n_channels, mono.data());
        resample.push(mono.data(), n);
    }
    resample.finish();
    if (out.empty()) {
        fail(TRANSCRIBE_ERR_AUDIO_DECODE, "audio: %zu samples at %d Hz are less than one sample at %d Hz", n_frames,
             sample_rate, target_rate);
    }
    return out;
}

} // namespace transcribe
