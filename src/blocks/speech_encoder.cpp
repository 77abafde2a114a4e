#include "speech_encoder.h"

#include <algorithm>

#include "core/npy.h"

namespace transcribe {

SpeechEncoder::SpeechEncoder(const ModelFile & f)
    : hp_(FastConformerHParams::from_file(f, int(f.get_u32("mel.n_mels")))),
      conformer_(f, hp_, "enc") {}

void SpeechEncoder::prepare(const ModelFile & f, ggml_backend_dev_t device) {
    conformer_.prepare(f, device);
    MelConfig mc = mel_config_from_file(f);
    if (mc.n_mels != hp_.n_mels) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: mel bins %d != encoder input %d", f.path().c_str(), mc.n_mels,
             hp_.n_mels);
    }
    mel_ = std::make_unique<MelFrontend>(std::move(mc));
}

int SpeechEncoder::frames(size_t n_samples) const {
    return conformer_.subsampled_length(int(n_samples / size_t(mel_->config().hop_length)));
}

int SpeechEncoder::output_frames(size_t n_samples) const {
    return conformer_.subsampled_length(int(n_samples / size_t(mel_->config().hop_length)) + 1);
}

int SpeechEncoder::frame_ms() const { return 8 * 1000 * mel_->config().hop_length / mel_->config().sample_rate; }

MelFeatures SpeechEncoder::mel(const float * pcm, size_t n, int n_threads, bool valid_only) const {
    MelFeatures mel = mel_->compute(pcm, n, n_threads);
    if (valid_only && mel.n_frames > mel.n_valid) {
        // Each channel's valid frames moved down in place (row m lands at or before where it was).
        for (int m = 0; m < mel.n_mels; ++m) {
            const auto row = mel.data.begin() + long(m) * mel.n_frames;
            std::copy(row, row + mel.n_valid, mel.data.begin() + long(m) * mel.n_valid);
        }
        mel.data.resize(size_t(mel.n_mels) * size_t(mel.n_valid));
        mel.n_frames = mel.n_valid;
    }
    return mel;
}

std::vector<float> SpeechEncoder::Run::operator()(Executor & exec, const float * pcm, size_t n, int n_threads,
                                                  Timings & timings) {
    StageTimer mel_timer;
    MelFeatures mel = enc_.mel(pcm, n, n_threads, valid_only_);
    timings.mel_ms = mel_timer.ms();
    dump_f32("mel", mel.data, {mel.n_mels, mel.n_frames});

    StageTimer enc_timer;
    Graph & g = graphs_.get(mel.n_frames, [&] {
        auto graph = std::make_unique<Graph>(16384, "encoder");
        FastConformer::Taps taps;
        ggml_tensor * enc = enc_.conformer_.build(*graph, mel.n_frames, mel.n_valid, n_threads, &taps);
        if (dump_enabled()) {
            graph->output(taps.pre_encode, "pre_encode");
            graph->output(taps.layer0, "enc_layer_0");
            graph->output(taps.last, "enc_layer_last");
        }
        graph->output(head_(graph->ctx(), enc), "head");
        return graph;
    });
    exec.compute(g, [&] { enc_.conformer_.set_inputs(g, mel.data, mel.n_frames, mel.n_valid, context_); });
    std::vector<float> out = tensor_get_f32(g.get("head"));
    timings.encode_ms = enc_timer.ms();
    if (dump_enabled()) {
        const int64_t d = enc_.hp_.d_model, T = enc_.conformer_.subsampled_length(mel.n_valid);
        dump_f32("pre_encode", tensor_get_f32(g.get("pre_encode")), {T, d});
        dump_f32("enc_layer_0", tensor_get_f32(g.get("enc_layer_0")), {T, d});
        const std::vector<float> last = tensor_get_f32(g.get("enc_layer_last"));
        dump_f32("enc_layer_last", last, {T, d});
        dump_f32("enc_out", last, {T, d});
    }
    return out;
}

} // namespace transcribe
