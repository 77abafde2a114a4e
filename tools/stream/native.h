// transcribe-stream with a model that transcribes as it hears (NeMo's cache-aware streaming models) and no
// VAD: the whole input streamed through the model as NeMo's cache-aware streaming script does, a delta per
// encoder step; an end-of-utterance model's <EOU> ends a turn (its id the turn's last), otherwise the end
// of the audio ends the one turn.
#pragma once

#include "packets.h"

namespace transcribe_tools {

// Returns the tool's exit status (errors printed).
int stream_natively(transcribe_model * model, transcribe_session * session, const transcribe_run_params & rp,
                    PacketSource & packets, bool json);

} // namespace transcribe_tools
