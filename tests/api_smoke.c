/* The public API from C: load, inspect, transcribe, tokenize, free. */
#include "transcribe.h"

#include <stdio.h>
#include <string.h>

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "api_smoke: check failed: %s (line %d): %s\n", #cond, \
                    __LINE__, transcribe_last_error());                          \
            return 1;                                                            \
        }                                                                        \
    } while (0)

int main(int argc, char ** argv) {
    CHECK(argc == 3);
    printf("transcribe %s\n", transcribe_version());

    transcribe_model * model = NULL;
    transcribe_load_params lp = transcribe_load_params_init();
    lp.backend = TRANSCRIBE_BACKEND_CPU;
    CHECK(transcribe_model_load(argv[1], &lp, &model) == TRANSCRIBE_OK);

    transcribe_model_info info;
    CHECK(transcribe_model_get_info(model, &info) == TRANSCRIBE_OK);
    CHECK(strcmp(info.architecture, "canary_qwen") == 0);
    CHECK(info.sample_rate == 16000);

    transcribe_audio audio;
    CHECK(transcribe_audio_load(argv[2], info.sample_rate, &audio) == TRANSCRIBE_OK);
    CHECK(audio.n_samples == 176000);

    transcribe_session_params sp = transcribe_session_params_init();
    sp.n_threads = 2;
    sp.kv_type = TRANSCRIBE_KV_F32;
    transcribe_session * session = NULL;
    CHECK(transcribe_session_create(model, &sp, &session) == TRANSCRIBE_OK);

    transcribe_run_params rp = transcribe_run_params_init();
    rp.max_new_tokens = 16;
    transcribe_result * result = NULL;
    transcribe_status st = transcribe_run(session, audio.samples, audio.n_samples, &rp, &result);
    CHECK(st == TRANSCRIBE_ERR_OUTPUT_TRUNCATED); /* random weights never say <|im_end|> in 16 steps */
    CHECK(result != NULL && transcribe_result_n_tokens(result) == 16);
    CHECK(transcribe_result_tokens(result)[0] == 69468); /* golden greedy id 0 of jfk */
    printf("text: %s\n", transcribe_result_text(result));

    int32_t ids[16];
    int n = 0;
    CHECK(transcribe_tokenize(model, "Hello world", ids, 16, &n) == TRANSCRIBE_OK && n == 2);
    char buf[64];
    size_t len = 0;
    CHECK(transcribe_detokenize(model, ids, n, buf, sizeof buf, &len) == TRANSCRIBE_OK);
    CHECK(strcmp(buf, "Hello world") == 0);

    CHECK(transcribe_model_load("/nonexistent.gguf", &lp, &(transcribe_model *) {NULL}) == TRANSCRIBE_ERR_FILE_NOT_FOUND);
    CHECK(strstr(transcribe_last_error(), "/nonexistent.gguf") != NULL);

    transcribe_result_free(result);
    transcribe_audio_free(&audio);
    transcribe_session_free(session);
    transcribe_model_free(model);
    printf("api_smoke: ok\n");
    return 0;
}
