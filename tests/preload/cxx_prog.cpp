// cxx_prog.cpp - a C++ program for the preload test: std::map, std::string,
// std::vector, new/delete (scalar, array, aligned) and threads handing
// objects to each other. It prints a deterministic summary; run_preload.sh
// compares it with the same program run without dpmalloc. With
// DPM_EXPECT_PRELOAD=1 it also proves dpmalloc is loaded
// (dlsym(RTLD_DEFAULT, "dpm_malloc") != NULL) or exits 3.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

struct alignas(256) Aligned {
    unsigned char bytes[300];
};

std::uint64_t mix(std::uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

// Each worker builds a map of strings, vectors and heap nodes; returns a
// checksum that depends only on the data, not on addresses.
std::uint64_t worker(int id, std::vector<std::string *> &handoff, std::mutex &mu,
                     std::uint64_t &handoff_bytes)
{
    std::map<std::string, std::vector<int>> m;
    std::unordered_map<int, std::string> um;
    std::uint64_t sum = 0;
    for (int i = 0; i < 40000; i++) {
        std::uint64_t r = mix(static_cast<std::uint64_t>(id) * 1000003 + i);
        std::string key = "key-" + std::to_string(r % 5000) + std::string(r % 40, 'x');
        auto &v = m[key];
        v.push_back(static_cast<int>(r & 0xffff));
        if (v.size() > 20)
            v.erase(v.begin(), v.begin() + 10);
        um[static_cast<int>(r % 3000)] = key;
        if (i % 7 == 0) {
            auto *s = new std::string(key + "/" + std::to_string(i));
            std::lock_guard<std::mutex> g(mu);
            handoff.push_back(s);
            if (handoff.size() > 64) {
                // free a string another thread allocated
                std::string *old = handoff.front();
                handoff.erase(handoff.begin());
                handoff_bytes += old->size();
                delete old;
            }
        }
        if (i % 101 == 0) {
            auto *arr = new std::uint64_t[1 + r % 5000];
            arr[0] = r;
            sum += arr[0] & 0xff;
            delete[] arr;
            auto *a = new Aligned;
            if (reinterpret_cast<std::uintptr_t>(a) % alignof(Aligned) != 0) {
                std::fprintf(stderr, "misaligned new Aligned: %p\n", static_cast<void *>(a));
                std::exit(4);
            }
            std::memset(a->bytes, id, sizeof a->bytes);
            sum += a->bytes[299];
            delete a;
        }
        if (i % 997 == 0) {
            std::vector<char> big(100000 + r % 3000000, static_cast<char>(r));
            sum += static_cast<unsigned char>(big[big.size() / 2]);
        }
    }
    for (auto &kv : m) {
        sum += kv.first.size();
        for (int x : kv.second)
            sum = mix(sum + static_cast<std::uint64_t>(x));
    }
    for (auto &kv : um)
        sum += kv.second.size() * static_cast<std::uint64_t>(kv.first);
    return sum;
}

}  // namespace

int main()
{
    const char *expect = std::getenv("DPM_EXPECT_PRELOAD");
    if (expect && std::strcmp(expect, "1") == 0 && !dlsym(RTLD_DEFAULT, "dpm_malloc")) {
        std::fprintf(stderr, "dpm_malloc not found: libdpmalloc.so is not preloaded\n");
        return 3;
    }
    const int nthreads = 6;
    std::vector<std::string *> handoff;
    std::mutex mu;
    std::uint64_t handoff_bytes = 0;  // under mu
    std::vector<std::uint64_t> sums(nthreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < nthreads; t++)
        threads.emplace_back([&, t] { sums[t] = worker(t, handoff, mu, handoff_bytes); });
    for (auto &th : threads)
        th.join();
    for (auto *s : handoff) {
        handoff_bytes += s->size();
        delete s;
    }
    // Per-thread sums depend only on each thread's data; the bytes of all
    // strings handed between threads do not depend on who freed them.
    for (int t = 0; t < nthreads; t++)
        std::printf("thread %d checksum %016llx\n", t, static_cast<unsigned long long>(sums[t]));
    std::printf("handed-off string bytes %llu\n", static_cast<unsigned long long>(handoff_bytes));
    return 0;
}
