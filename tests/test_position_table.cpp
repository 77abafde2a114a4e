// The relative positions a FastConformer window reads (blocks/position_table.h): the sinusoids worked by
// hand, and the projections kept between runs giving the bits the graph's own would (a shorter window
// reads the middle rows of a table made for a longer one).
#include "blocks/position_table.h"
#include "model/family.h"
#include "support.h"

#include <gtest/gtest.h>

#include <vector>

using namespace transcribe;

namespace {

// The embeddings of a window of T frames through PositionTable::set_embeddings, ROWS rows of 4.
std::vector<float> embeddings(const PositionTable & table, int64_t T, int64_t rows) {
    test::CpuOperands o(1, 1);
    ggml_tensor * pos = o.add(4, rows);
    o.allocate();
    o.fill(pos, 1.0f); // overwritten: every row is set, zeros past 2T-1
    table.set_embeddings(pos, T);
    std::vector<float> out(size_t(4 * rows));
    ggml_backend_tensor_get(pos, out.data(), 0, out.size() * sizeof(float));
    return out;
}

} // namespace

// d_model 4: frequencies 1 and 10000^(-1/2) = 0.01; row r is position T-1-r as
// [sin(p), cos(p), sin(0.01 p), cos(0.01 p)].
TEST(PositionTable, Embeddings_are_the_sinusoids_of_positions_T_minus_1_down_to_1_minus_T) {
    const float s1 = 0.84147098f, c1 = 0.54030231f, s01 = 0.00999983f, c01 = 0.99995000f;
    const std::vector<float> want = {
        s1,  c1, s01,  c01, // position 1
        0,   1,  0,    1,   // position 0
        -s1, c1, -s01, c01, // position -1
        0,   0,  0,    0,   // padding rows
        0,   0,  0,    0,
    };
    PositionTable fresh(4, 1), grown(4, 1);
    embeddings(grown, 5, 16); // a longer window first: T = 2 then reads its middle rows
    for (const PositionTable * table : {&fresh, &grown}) {
        const std::vector<float> got = embeddings(*table, 2, 5);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) {
            EXPECT_NEAR(got[i], want[i], 1e-7f) << "element " << i;
        }
    }
}

TEST(PositionTable, A_window_reads_its_2T_minus_1_rows_padded_to_16) {
    EXPECT_EQ(PositionTable::rows(1), 16);
    EXPECT_EQ(PositionTable::rows(8), 16);
    EXPECT_EQ(PositionTable::rows(9), 32);
    EXPECT_EQ(PositionTable::rows(138), 288);
}

// A model's table is made for the first window asked and made again, with frames to spare, when a longer
// one comes: jfk_div8 (25 frames), then jfk (138: a table of 192), then jfk_div8 again (the middle rows of
// that table) give the bits of fresh models whose tables were made for each clip alone: every joint
// evaluation equal. (Where the CPU has no AVX-512 the graphs project the positions themselves.)
class PositionTableRuns : public ::testing::TestWithParam<const char *> {};

void expect_same_evaluations(const test::ClipRun & got, const test::ClipRun & want, const char * what) {
    ASSERT_EQ(got.step_logits.size(), want.step_logits.size()) << what;
    ASSERT_FALSE(want.step_logits.empty()) << what;
    for (size_t s = 0; s < want.step_logits.size(); ++s) {
        EXPECT_EQ(got.step_logits[s], want.step_logits[s]) << what << ", joint evaluation " << s;
    }
}

TEST_P(PositionTableRuns, Windows_read_from_a_grown_table_give_the_bits_of_their_own) {
    const test::Fixture & fx = test::parakeet_fixture();
    const std::unique_ptr<Model> warmed = test::load(GetParam());
    test::run_clip(*warmed, fx, "jfk_div8");
    const test::ClipRun long_after_short = test::run_clip(*warmed, fx, "jfk");
    const test::ClipRun short_after_long = test::run_clip(*warmed, fx, "jfk_div8");
    expect_same_evaluations(long_after_short, test::run_clip(*test::load(GetParam()), fx, "jfk"), "jfk after jfk_div8");
    expect_same_evaluations(short_after_long, test::run_clip(*test::load(GetParam()), fx, "jfk_div8"), "jfk_div8 after jfk");
}

// F32 positions (F32 scores) and BF16 ones (the quantized and BF16 models' scores).
INSTANTIATE_TEST_SUITE_P(Models, PositionTableRuns,
                         ::testing::Values("parakeet-tdt-tiny-f32.gguf", "parakeet-tdt-tiny-bf16.gguf",
                                           "parakeet-tdt-tiny-Q8_0.gguf"),
                         [](const ::testing::TestParamInfo<const char *> & i) {
                             std::string name = i.param;
                             return name.substr(name.rfind('-') + 1, name.find('.') - name.rfind('-') - 1);
                         });
