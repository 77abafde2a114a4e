// Shared helpers for the tests that go through the C API: a model on the CPU, a result's ids, two
// results compared.
#pragma once

#include "support.h"
#include "transcribe.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace test {

// A converted test model loaded through the C API on the CPU backend (null, and a test failure, if not).
inline transcribe_model * load_cpu(const std::string & name) {
    transcribe_load_params lp = transcribe_load_params_init();
    lp.backend = TRANSCRIBE_BACKEND_CPU;
    transcribe_model * m = nullptr;
    EXPECT_EQ(transcribe_model_load(model(name).c_str(), &lp, &m), TRANSCRIBE_OK);
    return m;
}

inline std::vector<int32_t> tokens(const transcribe_result * r) {
    const int32_t * t = transcribe_result_tokens(r);
    return std::vector<int32_t>(t, t + transcribe_result_n_tokens(r));
}

// GOT has WANT's ids, text, and segments with their times and texts.
inline void expect_same_transcript(const transcribe_result * got, const transcribe_result * want) {
    EXPECT_EQ(tokens(got), tokens(want));
    EXPECT_STREQ(transcribe_result_text(got), transcribe_result_text(want));
    ASSERT_EQ(transcribe_result_n_segments(got), transcribe_result_n_segments(want));
    for (int i = 0; i < transcribe_result_n_segments(want); ++i) {
        EXPECT_EQ(transcribe_result_segment_t0_ms(got, i), transcribe_result_segment_t0_ms(want, i)) << i;
        EXPECT_EQ(transcribe_result_segment_t1_ms(got, i), transcribe_result_segment_t1_ms(want, i)) << i;
        EXPECT_STREQ(transcribe_result_segment_text(got, i), transcribe_result_segment_text(want, i)) << i;
    }
}

} // namespace test
