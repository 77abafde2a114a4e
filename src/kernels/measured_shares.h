// How the threads of a GEMV split its rows, when a thread of them is slower than the others call after
// call.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace transcribe {

// Ints a node keeps for MeasuredShares: a share and a time for each of up to 4 threads, and a count.
constexpr int MEASURED_SHARES_WORDS = 9;

// Each thread's share of the rows (or of any unit of work). Without shared words: even. With them they
// follow the threads' measured speeds: a thread the machine slows for good (on a virtual machine one
// vCPU can stream memory slower than another, call after call: bench/RESULTS.md) otherwise holds the
// others at the op's end. Each thread times its rows; the last one done sets the next call's shares
// from those times, half old and half new so that one noisy call moves them little. The words change
// only then, after every thread of the call has read them, so a call's threads always agree on them.
// (Cutting the rows into chunks that threads claim as they go balanced them too, but restarting the
// prefetch at each chunk cost more than it won.)
class MeasuredShares {
public:
    // WORDS: MEASURED_SHARES_WORDS ints, 0 when the op is made, that live as long as it and that only
    // its calls use (or none: even shares).
    MeasuredShares(int32_t * words, int nth) : words_(nth <= MAX_THREADS ? words : nullptr), nth_(nth) {}

    // Thread ITH's rows [m0, m1) of M (contiguous, in thread order, together all of them).
    void rows(int ith, int64_t M, int64_t & m0, int64_t & m1) const {
        int64_t end = 0, begin = 0;
        for (int t = 0; t <= ith; ++t) {
            begin = end;
            end   = t == nth_ - 1 ? M : std::min(M, end + M * share(t) / ONE);
        }
        m0 = begin, m1 = end;
    }

    // Thread ITH's share of M rows: WORK(m0, m1) on its rows [m0, m1), timed and reported.
    template <typename Work> void run(int ith, int64_t M, Work && work) {
        int64_t m0, m1;
        rows(ith, M, m0, m1);
        const auto start = std::chrono::steady_clock::now();
        work(m0, m1);
        report(ith, std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count());
    }

    // Thread ITH took NS nanoseconds for its rows.
    void report(int ith, double ns) {
        if (!words_) {
            return;
        }
        __atomic_store_n(&words_[TIMES + ith], int32_t(std::clamp(ns, 1.0, 2e9)), __ATOMIC_RELAXED);
        if (__atomic_add_fetch(&words_[DONE], 1, __ATOMIC_ACQ_REL) != nth_) {
            return;
        }
        double speed[MAX_THREADS], total = 0;
        for (int t = 0; t < nth_; ++t) {
            speed[t] = double(share(t)) / __atomic_load_n(&words_[TIMES + t], __ATOMIC_RELAXED);
            total += speed[t];
        }
        int32_t next[MAX_THREADS];
        for (int t = 0; t < nth_ - 1; ++t) {
            const double measured = ONE * speed[t] / total;
            next[t] = int32_t(std::clamp(0.5 * double(share(t)) + 0.5 * measured, 0.5 * ONE / nth_, 1.5 * ONE / nth_));
        }
        for (int t = 0; t < nth_ - 1; ++t) {
            __atomic_store_n(&words_[SHARES + t], next[t], __ATOMIC_RELAXED);
        }
        __atomic_store_n(&words_[DONE], 0, __ATOMIC_RELEASE);
    }

private:
    static constexpr int     MAX_THREADS = (MEASURED_SHARES_WORDS - 1) / 2; // a share and a time each, and DONE
    static constexpr int     SHARES = 0, TIMES = MAX_THREADS, DONE = 2 * MAX_THREADS;
    static constexpr int32_t ONE = 1 << 20; // all the rows

    // Thread T's share in force (0 in the words: none measured yet, an even share); the last thread's
    // is what the others leave.
    int64_t share(int t) const {
        if (t == nth_ - 1) {
            int64_t rest = ONE;
            for (int u = 0; u < nth_ - 1; ++u) {
                rest -= share(u);
            }
            return std::max<int64_t>(rest, 0);
        }
        const int32_t w = words_ ? __atomic_load_n(&words_[SHARES + t], __ATOMIC_RELAXED) : 0;
        return w ? w : ONE / nth_;
    }

    int32_t * words_;
    int       nth_;
};

} // namespace transcribe
