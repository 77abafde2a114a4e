// Speculative decoding: the draft follower's rules worked by hand, and on the fixture the ids of
// greedy decoding with any draft (right, partly wrong, shifted, random, empty) equal the goldens,
// alone, batched beside runs without a draft, on the F32 and the BF16 file.
#include "model/family.h"
#include "decoding/draft_follower.h"
#include "support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

using namespace transcribe;

// ---- The follower, by hand ----

TEST(DraftFollower, Proposals_worth_checking_maximise_tokens_per_step_time) {
    EXPECT_EQ(proposals_worth_checking(0.0f, 0.08f, 16), 0);   // nothing to gain
    EXPECT_EQ(proposals_worth_checking(1.0f, 0.08f, 16), 16);  // (k + 1) / (1 + 0.08 k) grows with k
    EXPECT_EQ(proposals_worth_checking(1.0f, 0.08f, 5), 5);    // the cap
    EXPECT_EQ(proposals_worth_checking(0.5f, 0.25f, 16), 1);   // k=1: 1.5 / 1.25 = 1.2; k=2: 1.75 / 1.5 = 1.17
    EXPECT_EQ(proposals_worth_checking(0.5f, 0.08f, 16), 3);   // 1.509 (k=2) < 1.512 (k=3) > 1.468 (k=4)
    EXPECT_EQ(proposals_worth_checking(0.1f, 0.08f, 16), 1);   // 1.1 / 1.08 > 1
    EXPECT_EQ(proposals_worth_checking(0.05f, 0.08f, 16), 0);  // 1.05 / 1.08 < 1
}

TEST(DraftFollower, Follows_a_right_draft_and_learns_its_agreement) {
    DraftFollower f({10, 11, 12, 13, 14});
    // Agreement 0.5 with a column at 0.12 of a step: two are worth it (1.75 / 1.24 against 1.5 / 1.12
    // for one and 1.875 / 1.36 for three).
    EXPECT_EQ(f.propose(16), (std::vector<int32_t> {10, 11}));
    EXPECT_EQ(f.propose(2), (std::vector<int32_t> {10, 11}));      // never past the limit
    f.observe({10});
    EXPECT_EQ(f.cursor(), 1u);
    EXPECT_FLOAT_EQ(f.agreement(), 2.0f / 3.0f); // (1 hit + 1) / (1 seen + 2)
    f.observe({10, 11});
    f.observe({10, 11, 12});
    f.observe({10, 11, 12, 13});
    f.observe({10, 11, 12, 13, 14});
    EXPECT_EQ(f.cursor(), 5u);
    EXPECT_TRUE(f.propose(16).empty()); // the draft is used up
}

TEST(DraftFollower, Realigns_after_a_wrong_a_missing_and_an_extra_token) {
    {   // The decoder has its own word where the draft has 11: go on from 12.
        DraftFollower f({10, 11, 12, 13, 14});
        f.observe({10});
        f.observe({10, 99});
        EXPECT_EQ(f.cursor(), 2u);
        EXPECT_NEAR(f.agreement(), 0.496063, 1e-6); // (31/32 + 1) / (31/32 + 1 + 2): the hit weighs less now
        EXPECT_EQ(f.propose(1), (std::vector<int32_t> {12}));
    }
    {   // The decoder skips the draft's 11: its 12 is found one past where 11 was expected.
        DraftFollower f({10, 11, 12, 13, 14});
        f.observe({10});
        f.observe({10, 12});
        EXPECT_EQ(f.cursor(), 3u);
    }
    {   // The decoder says 99 before the draft's 11: first taken for a wrong token, then 11 puts it back.
        DraftFollower f({10, 11, 12, 13, 14});
        f.observe({10});
        f.observe({10, 99});
        EXPECT_EQ(f.cursor(), 2u);
        f.observe({10, 99, 11});
        EXPECT_EQ(f.cursor(), 2u);
        EXPECT_EQ(f.propose(1), (std::vector<int32_t> {12}));
    }
    {   // One miss is taken for a wrong token; lost after two, the follower resyncs on "8 9".
        DraftFollower f({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
        f.observe({1});
        f.observe({1, 8});
        EXPECT_EQ(f.cursor(), 2u);
        f.observe({1, 8, 9});
        EXPECT_EQ(f.cursor(), 9u);
        EXPECT_EQ(f.propose(1), (std::vector<int32_t> {10}));
    }
    {   // Lost, a single token resyncs only near the expected place.
        DraftFollower f({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
        f.observe({1});
        f.observe({1, 50});
        f.observe({1, 50, 9}); // 9 ends 6 past the expected 3
        EXPECT_EQ(f.cursor(), 3u);
        f.observe({1, 50, 9, 7}); // 7 ends 3 past the expected 4
        EXPECT_EQ(f.cursor(), 7u);
    }
    {   // A draft of one repeated token with a wrong one every few: past each wrong one the follower
        // goes on with the draft (no step back onto the wrong token).
        DraftFollower f({5, 5, 5, 6, 5, 5, 5, 6, 5, 5});
        std::vector<int32_t> decoded;
        for (int i = 0; i < 3; ++i) {
            decoded.push_back(5);
            f.observe(decoded);
        }
        decoded.push_back(5); // the draft says 6: a wrong token, not one too many (its next 5 is not skipped)
        f.observe(decoded);
        EXPECT_EQ(f.cursor(), 4u);
        decoded.push_back(5);
        f.observe(decoded);
        EXPECT_EQ(f.cursor(), 5u);
    }
    {   // Lost, of several places the nearest to the expected one.
        DraftFollower f({1, 9, 2, 3, 4, 5, 9, 6});
        f.observe({1});
        f.observe({1, 7});
        f.observe({1, 7, 8});
        EXPECT_EQ(f.cursor(), 3u);
        f.observe({1, 7, 8, 9}); // 9 ends at 2 (two before the expected 4) and at 7 (three after)
        EXPECT_EQ(f.cursor(), 2u);
    }
}

TEST(DraftFollower, A_useless_draft_is_soon_not_checked) {
    DraftFollower f({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
    std::vector<int32_t> decoded;
    for (int32_t t = 100; t < 106; ++t) {
        decoded.push_back(t);
        f.observe(decoded);
    }
    // 1 / (2 + the six misses' weights 1 + 31/32 + ... + (31/32)^5): one token still pays (1.132 / 1.12).
    EXPECT_NEAR(f.agreement(), 0.132445, 1e-6);
    EXPECT_EQ(f.propose(16).size(), 1u);
    decoded.push_back(106);
    f.observe(decoded);
    EXPECT_NEAR(f.agreement(), 0.119376, 1e-6); // a seventh miss: none does (1.119 / 1.12)
    EXPECT_TRUE(f.propose(16).empty());
}

// ---- On the fixture ----

namespace {

using Draft = std::vector<int32_t>;

struct DraftedRun {
    std::vector<int32_t> ids;
    Timings              timings;
};

RunOptions sixteen_free_tokens() {
    RunOptions o;
    o.max_new_tokens = 16;
    o.ignore_eos     = true;
    return o;
}

DraftedRun drafted_greedy(Model & m, const std::string & clip, const Draft & draft, ggml_type kv = GGML_TYPE_F32) {
    SessionOptions so;
    so.n_threads = 2;
    so.kv_type   = kv;
    auto session = m.new_session(so);
    RunOptions o = sixteen_free_tokens();
    o.draft      = [draft](const float *, size_t) { return draft; };
    const auto pcm = test::read_wav_16k(clip);
    DraftedRun r;
    r.ids     = session->run(pcm.data(), pcm.size(), o).tokens;
    r.timings = session->timings();
    return r;
}

// The drafts every clip is decoded with, from its golden ids: name and ids.
std::vector<std::pair<std::string, Draft>> drafts_of(const std::vector<int32_t> & ids) {
    std::vector<std::pair<std::string, Draft>> d;
    d.emplace_back("right", ids);
    Draft every_third = ids;
    for (size_t i = 2; i < every_third.size(); i += 3) {
        every_third[i] = (every_third[i] + 1) % 151936;
    }
    d.emplace_back("every third token wrong", every_third);
    Draft missing = ids;
    missing.erase(missing.begin() + 5);
    d.emplace_back("a token missing", missing);
    Draft extra = ids;
    extra.insert(extra.begin() + 5, 42);
    d.emplace_back("a token too many", extra);
    Draft longer = ids;
    longer.insert(longer.end(), ids.begin(), ids.end());
    d.emplace_back("longer than the output", longer);
    std::mt19937 rng(7);
    Draft random(24);
    for (int32_t & t : random) {
        t = int32_t(rng() % 151936);
    }
    d.emplace_back("random", random);
    d.emplace_back("empty", Draft {});
    return d;
}

} // namespace

TEST(Speculative, Ids_equal_plain_greedy_for_every_draft) {
    auto model = test::load("canary-qwen-tiny-f32.gguf");
    for (const char * clip : test::kClips) {
        const auto ids = test::golden_ids(clip);
        for (const auto & [name, draft] : drafts_of(ids)) {
            const DraftedRun r = drafted_greedy(*model, clip, draft);
            EXPECT_EQ(r.ids, ids) << clip << ", draft " << name;
            EXPECT_LE(r.timings.n_accepted, r.timings.n_drafted) << clip << ", draft " << name;
            EXPECT_EQ(r.timings.n_decode_tokens, 15) << clip << ", draft " << name; // the first came from the prefill
            if (name == "right") {
                // Every proposal is the decoder's own choice, so every one is kept, and 15 tokens take
                // far fewer than 15 steps.
                EXPECT_GT(r.timings.n_drafted, 0) << clip;
                EXPECT_EQ(r.timings.n_accepted, r.timings.n_drafted) << clip;
                EXPECT_LE(r.timings.n_decode_steps, 5) << clip;
            }
            if (name == "every third token wrong") {
                EXPECT_LT(r.timings.n_accepted, r.timings.n_drafted) << clip;
                EXPECT_GT(r.timings.n_accepted, 0) << clip;
            }
            if (name == "empty") {
                EXPECT_EQ(r.timings.n_drafted, 0) << clip;
                EXPECT_EQ(r.timings.n_decode_steps, 15) << clip;
            }
        }
    }
}

// The logits behind each kept token are those of a plain run up to F32 rounding of the products over
// more columns (bound as for batched decoding, under the MANIFEST tolerance).
TEST(Speculative, Step_logits_equal_a_plain_runs) {
    auto model = test::load("canary-qwen-tiny-f32.gguf");
    SessionOptions so;
    so.n_threads = 2;
    so.kv_type   = GGML_TYPE_F32;
    auto session = model->new_session(so);
    const auto pcm = test::read_wav_16k("jfk");
    const auto ids = test::golden_ids("jfk");
    std::vector<std::vector<float>> plain, drafted;
    RunOptions o = sixteen_free_tokens();
    o.step_logits = &plain;
    session->run(pcm.data(), pcm.size(), o);
    o.step_logits = &drafted;
    o.draft       = [&](const float *, size_t) { return ids; };
    EXPECT_EQ(session->run(pcm.data(), pcm.size(), o).tokens, ids);
    EXPECT_GT(session->timings().n_accepted, 0);
    ASSERT_EQ(drafted.size(), plain.size());
    float worst = 0;
    for (size_t s = 0; s < plain.size(); ++s) {
        worst = std::max(worst, test::max_abs_diff(drafted[s], plain[s]));
    }
    std::printf("jfk: drafted step logits within %.3g of the plain run's\n", worst);
    EXPECT_LE(worst, 2e-3f);
}

// The BF16 file with the default F16 cache: its greedy ids (which on jfk_div8 part from the F32
// goldens after 14 tokens) are what every draft must give.
TEST(Speculative, Bf16_file_and_f16_cache_keep_their_own_ids) {
    auto model = test::load("canary-qwen-tiny-bf16.gguf");
    for (const char * clip : test::kClips) {
        const auto plain = test::greedy(*model, clip, GGML_TYPE_F16);
        for (const auto & [name, draft] : drafts_of(plain)) {
            EXPECT_EQ(drafted_greedy(*model, clip, draft, GGML_TYPE_F16).ids, plain) << clip << ", draft " << name;
        }
        for (const auto & [name, draft] : drafts_of(test::golden_ids(clip))) {
            EXPECT_EQ(drafted_greedy(*model, clip, draft, GGML_TYPE_F16).ids, plain) << clip << ", golden draft " << name;
        }
    }
}

// Continuous batching: three sequences for four recordings, two with drafts (one right, one with every
// third token wrong) and two without, joining and leaving between steps; each keeps its own ids.
TEST(Speculative, Batched_beside_runs_without_a_draft) {
    auto model = test::load("canary-qwen-tiny-f32.gguf");
    SessionOptions so;
    so.n_threads = 2;
    so.n_batch   = 3;
    auto session = model->new_session(so);
    const int budgets[] = {16, 5, 16, 12};
    std::vector<std::vector<float>> pcm;
    for (const char * c : test::kClips) {
        pcm.push_back(test::read_wav_16k(c));
    }
    std::vector<std::vector<int32_t>> got(pcm.size());
    size_t given = 0;
    session->run_batch(
        [&](BatchJob & job) {
            if (given == pcm.size()) {
                return false;
            }
            job.pcm       = pcm[given].data();
            job.n_samples = pcm[given].size();
            job.options   = sixteen_free_tokens();
            job.options.max_new_tokens = budgets[given];
            if (given % 2 == 0) {
                const Draft d = drafts_of(test::golden_ids(test::kClips[given]))[given == 0 ? 0 : 1].second;
                job.options.draft = [d](const float *, size_t) { return d; };
            }
            ++given;
            return true;
        },
        [&](size_t id, Transcript * t, std::exception_ptr error) {
            ASSERT_FALSE(error);
            got[id] = t->tokens;
        });
    for (size_t i = 0; i < pcm.size(); ++i) {
        const auto golden = test::golden_ids(test::kClips[i]);
        EXPECT_EQ(got[i], std::vector<int32_t>(golden.begin(), golden.begin() + budgets[i])) << test::kClips[i];
    }
    EXPECT_GT(session->timings().n_accepted, 0);
}

// The draft's budget: proposals never take a run past max_new_tokens, and a run that would go on is
// flagged truncated exactly as without a draft.
TEST(Speculative, Budget_and_truncation_as_without_a_draft) {
    auto model = test::load("canary-qwen-tiny-f32.gguf");
    SessionOptions so;
    so.n_threads = 2;
    auto session = model->new_session(so);
    const auto pcm = test::read_wav_16k("jfk");
    const auto ids = test::golden_ids("jfk");
    for (int budget : {1, 2, 7}) {
        RunOptions o;
        o.max_new_tokens = budget;
        const Transcript plain = session->run(pcm.data(), pcm.size(), o);
        o.draft = [&](const float *, size_t) { return ids; };
        const Transcript drafted = session->run(pcm.data(), pcm.size(), o);
        EXPECT_EQ(drafted.tokens, plain.tokens) << budget;
        EXPECT_EQ(drafted.truncated, plain.truncated) << budget;
        EXPECT_EQ(drafted.tokens, std::vector<int32_t>(ids.begin(), ids.begin() + budget)) << budget;
    }
}
