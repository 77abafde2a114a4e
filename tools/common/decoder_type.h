// NeMo's decoder_type names, as the CLI's --decoder-type and the server's decoder_type field take them.
#pragma once

#include "transcribe.h"

#include <string>

namespace transcribe_tools {

// "" -> the model's default, "tdt" or "rnnt" -> the transducer, "ctc" -> the CTC head; false for anything else.
inline bool decoder_type_from_name(const std::string & name, transcribe_decoder_type * out) {
    if (name.empty()) {
        *out = TRANSCRIBE_DECODER_DEFAULT;
    } else if (name == "tdt" || name == "rnnt") {
        *out = TRANSCRIBE_DECODER_TRANSDUCER;
    } else if (name == "ctc") {
        *out = TRANSCRIBE_DECODER_CTC;
    } else {
        return false;
    }
    return true;
}

} // namespace transcribe_tools
