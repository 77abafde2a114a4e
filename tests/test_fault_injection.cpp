// No C++ exception crosses the C API, even when memory runs out: this binary replaces operator new
// so that, once armed, the N-th allocation fails; every entry point is driven through a sweep of N
// and must come back with a status (OK, or OOM / another error), never an exception or a crash.
#include "transcribe.h"

#include "support.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<long> g_countdown {-1}; // < 0: disarmed
std::atomic<long> g_failures {0};
} // namespace

void * operator new(size_t size) {
    if (g_countdown.load(std::memory_order_relaxed) >= 0 && g_countdown.fetch_sub(1) == 0) {
        ++g_failures;
        throw std::bad_alloc();
    }
    if (void * p = std::malloc(size ? size : 1)) {
        return p;
    }
    throw std::bad_alloc();
}
void operator delete(void * p) noexcept { std::free(p); }
void operator delete(void * p, size_t) noexcept { std::free(p); }

namespace {

void quiet(transcribe_log_level, const char *, void *) {}

// Runs call() with the n-th allocation failing, for n over a growing sweep until the call succeeds
// without any injected failure; returns how many failures were injected.
template <typename F> long sweep(const char * what, F && call) {
    long injected = 0;
    for (long n = 0;; n = n < 64 ? n + 1 : n * 5 / 4) {
        const long before = g_failures;
        g_countdown = n;
        transcribe_status st = TRANSCRIBE_OK;
        try {
            st = call();
        } catch (...) {
            g_countdown = -1;
            ADD_FAILURE() << what << ": an exception escaped with allocation " << n << " failing";
            return injected;
        }
        g_countdown = -1;
        const bool failed_here = g_failures != before;
        injected += failed_here;
        if (!failed_here) {
            EXPECT_TRUE(st == TRANSCRIBE_OK || st == TRANSCRIBE_ERR_OUTPUT_TRUNCATED) << what << ": " << transcribe_status_string(st);
            return injected;
        }
        EXPECT_NE(st, TRANSCRIBE_OK) << what << ": allocation " << n << " failed but the call reported success";
    }
}

} // namespace

TEST(FaultInjection, Every_entry_point_reports_oom_as_a_status) {
    transcribe_log_set(quiet, nullptr);
    const std::string path = test::model("canary-qwen-tiny-bf16.gguf");
    transcribe_model * model = nullptr;
    EXPECT_GT(sweep("transcribe_model_load", [&] {
        transcribe_model_free(model);
        model = nullptr;
        return transcribe_model_load(path.c_str(), nullptr, &model);
    }), 10);
    ASSERT_NE(model, nullptr);

    transcribe_session * session = nullptr;
    transcribe_session_params sp = transcribe_session_params_init();
    sp.n_threads = 2;
    EXPECT_GT(sweep("transcribe_session_create", [&] {
        transcribe_session_free(session);
        session = nullptr;
        return transcribe_session_create(model, &sp, &session);
    }), 0);
    ASSERT_NE(session, nullptr);

    const std::vector<float> pcm = test::read_wav_16k("jfk_0p7s");
    transcribe_run_params rp = transcribe_run_params_init();
    rp.max_new_tokens = 4;
    EXPECT_GT(sweep("transcribe_run", [&] {
        transcribe_result * r = nullptr;
        const transcribe_status st = transcribe_run(session, pcm.data(), pcm.size(), &rp, &r);
        transcribe_result_free(r);
        return st;
    }), 10);

    int32_t ids[64];
    int n = 0;
    EXPECT_GT(sweep("transcribe_tokenize", [&] { return transcribe_tokenize(model, "Hello, world!", ids, 64, &n); }), 0);
    char buf[128];
    size_t len = 0;
    EXPECT_GT(sweep("transcribe_detokenize", [&] { return transcribe_detokenize(model, ids, n, buf, sizeof buf, &len); }), 0);
    const std::string wav = test::fixture("audio/jfk_0p7s.wav");
    EXPECT_GT(sweep("transcribe_audio_load", [&] {
        transcribe_audio a {};
        const transcribe_status st = transcribe_audio_load(wav.c_str(), 22050, &a);
        transcribe_audio_free(&a);
        return st;
    }), 0);
    transcribe_session_free(session);
    transcribe_model_free(model);
}
