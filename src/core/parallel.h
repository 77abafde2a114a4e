// Runs work on a few threads and brings any exception back to the caller (a std::thread that throws,
// or a vector of joinable threads destroyed by an exception, would terminate the process).
#pragma once

#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace transcribe {

// Calls fn(i) for i in [0, n) on up to n threads (index 0 on the calling thread); rethrows the first
// exception any of them raised once all have finished.
inline void parallel_for(int n, const std::function<void(int)> & fn) {
    std::exception_ptr error;
    std::mutex         error_mutex;
    auto guarded = [&](int i) {
        try {
            fn(i);
        } catch (...) {
            std::lock_guard<std::mutex> lock(error_mutex);
            if (!error) {
                error = std::current_exception();
            }
        }
    };
    std::vector<std::thread> threads;
    try {
        for (int i = 1; i < n; ++i) {
            threads.emplace_back(guarded, i);
        }
    } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        error = std::current_exception(); // could not start them all: the rest runs nowhere
    }
    if (!error) {
        guarded(0);
    }
    for (auto & t : threads) {
        t.join();
    }
    if (error) {
        std::rethrow_exception(error);
    }
}

} // namespace transcribe
