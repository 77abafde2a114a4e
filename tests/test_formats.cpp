// Output formats checked exactly on a known input.
#include "common/formats.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace transcribe_tools;

namespace {
Output sample() {
    Output o;
    o.text     = " Hello <world> & friends second part";
    o.segments = {{0, 1500, " Hello <world> & friends", {9707}, false},
                  {3723400, 3725000, "second\n\npart ", {1879}, true},
                  {3725000, 3726000, "  ", {}, false}};
    o.tokens   = {9707, 1879};
    return o;
}
} // namespace

TEST(Formats, Timestamps) {
    EXPECT_EQ(format_timestamp(0, ','), "00:00:00,000");
    EXPECT_EQ(format_timestamp(3723456, ','), "01:02:03,456");
    EXPECT_EQ(format_timestamp(3723456, '.'), "01:02:03.456");
    EXPECT_EQ(format_timestamp(-5, '.'), "00:00:00.000");
    EXPECT_EQ(format_timestamp(100LL * 3600000, ','), "100:00:00,000");
}

TEST(Formats, Txt) { EXPECT_EQ(render(sample(), Format::Txt, nullptr, "m"), "Hello <world> & friends second part\n"); }

TEST(Formats, Srt) {
    EXPECT_EQ(render(sample(), Format::Srt, nullptr, "m"),
              "1\n00:00:00,000 --> 00:00:01,500\nHello <world> & friends\n\n"
              "2\n01:02:03,400 --> 01:02:05,000\nsecond\npart\n\n");
}

TEST(Formats, Vtt) {
    EXPECT_EQ(render(sample(), Format::Vtt, nullptr, "m"),
              "WEBVTT\n\n00:00:00.000 --> 00:00:01.500\nHello &lt;world&gt; &amp; friends\n\n"
              "01:02:03.400 --> 01:02:05.000\nsecond\npart\n\n");
}

TEST(Formats, Json) {
    transcribe_timings t {};
    t.load_ms = 1.5;
    t.n_decode_tokens = 2;
    const auto j = nlohmann::json::parse(render(sample(), Format::Json, &t, "tiny"));
    EXPECT_EQ(j["text"], " Hello <world> & friends second part");
    ASSERT_EQ(j["segments"].size(), 3u);
    EXPECT_EQ(j["segments"][1]["t0_ms"], 3723400);
    EXPECT_EQ(j["segments"][1]["t1_ms"], 3725000);
    EXPECT_EQ(j["segments"][0]["text"], " Hello <world> & friends");
    EXPECT_EQ(j["segments"][0]["tokens"], nlohmann::json::parse("[9707]"));
    EXPECT_EQ(j["segments"][0]["truncated"], false);
    EXPECT_EQ(j["segments"][1]["truncated"], true);
    EXPECT_EQ(j["tokens"], nlohmann::json::parse("[9707, 1879]"));
    EXPECT_EQ(j["truncated"], false);
    EXPECT_EQ(j["timings"]["load_ms"], 1.5);
    EXPECT_EQ(j["timings"]["n_decode_tokens"], 2);
    EXPECT_EQ(j["model"], "tiny");
    EXPECT_EQ(j["version"], transcribe_version());
}

TEST(Formats, Parse) {
    Format f;
    EXPECT_TRUE(parse_format("vtt", &f));
    EXPECT_EQ(f, Format::Vtt);
    EXPECT_FALSE(parse_format("docx", &f));
}
