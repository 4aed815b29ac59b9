// new_pair_loop.cpp - n x (operator new(size), operator delete), the C++
// counterpart of pair_loop.c for tools/new_pair_cost.sh. Prints the
// nanoseconds per pair of the timed loop.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <new>

int main(int argc, char **argv)
{
    long n = argc > 1 ? std::atol(argv[1]) : 10000000;
    size_t size = argc > 2 ? static_cast<size_t>(std::atol(argv[2])) : 64;
    void *volatile sink;
    for (int i = 0; i < 1000; i++) {
        sink = ::operator new(size);
        ::operator delete(sink);
    }
    timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        void *p = ::operator new(size);
        sink = p;
        ::operator delete(p);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    (void)sink;
    double ns = (static_cast<double>(b.tv_sec - a.tv_sec) * 1e9 + static_cast<double>(b.tv_nsec - a.tv_nsec)) /
                static_cast<double>(n);
    std::printf("%.2f\n", ns);
    return 0;
}
