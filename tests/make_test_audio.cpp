// Re-encodes a wav into the other containers the tests upload: make_test_audio IN.wav OUT_DIR
// writes OUT_DIR/{name}.flac, .mp3, .ogg (libsndfile's own encoders, no extra tools).
#include <sndfile.h>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char ** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: make_test_audio IN.wav OUT_DIR\n");
        return 2;
    }
    SF_INFO in_info {};
    SNDFILE * in = sf_open(argv[1], SFM_READ, &in_info);
    if (!in) {
        std::fprintf(stderr, "make_test_audio: %s: %s\n", argv[1], sf_strerror(nullptr));
        return 1;
    }
    std::vector<float> pcm(size_t(in_info.frames) * size_t(in_info.channels));
    sf_readf_float(in, pcm.data(), in_info.frames);
    sf_close(in);
    std::string stem = argv[1];
    stem = stem.substr(stem.find_last_of('/') + 1);
    stem = stem.substr(0, stem.find_last_of('.'));
    const struct {
        const char * ext;
        int format;
    } outs[] = {{"flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_16},
                {"mp3", SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III},
                {"ogg", SF_FORMAT_OGG | SF_FORMAT_VORBIS}};
    for (const auto & o : outs) {
        SF_INFO info = in_info;
        info.format = o.format;
        const std::string path = std::string(argv[2]) + "/" + stem + "." + o.ext;
        SNDFILE * out = sf_open(path.c_str(), SFM_WRITE, &info);
        if (!out) {
            std::fprintf(stderr, "make_test_audio: %s: %s\n", path.c_str(), sf_strerror(nullptr));
            return 1;
        }
        sf_writef_float(out, pcm.data(), in_info.frames);
        sf_close(out);
    }
    return 0;
}
