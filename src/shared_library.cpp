// libtranscribe.so: every object of the static library (linked whole) behind the C API of
// include/transcribe.h. This file only gives the target a source of its own.
#include "transcribe.h"
