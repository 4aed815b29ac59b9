# alloc_heavy.py - an allocation-heavy Python workload for the preload test:
# dicts, lists, strings, bytes, sets and big buffers, in 4 threads, with
# objects created in one thread and dropped in another, and 20 fork()s while
# those threads run (each child allocates and exits). Prints a
# deterministic summary (run_preload.sh compares it with a run without
# dpmalloc) and whether libdpmalloc.so is mapped into this process.
import hashlib
import os
import queue
import sys
import threading


def mapped_dpmalloc():
    with open("/proc/self/maps") as f:
        return any("libdpmalloc" in line for line in f)


def work(seed, out, handoff_in, handoff_out):
    h = hashlib.sha256()
    d = {}
    lst = []
    for i in range(60000):
        k = "k%d-%s" % ((i * 7919 + seed) % 9000, "x" * (i % 50))
        d[k] = [i, str(i) * (i % 13), {"a": i, "b": (i, seed)}]
        if i % 3 == 0:
            lst.append(("%d:%d" % (seed, i)).encode() * (1 + i % 9))
        if len(lst) > 500:
            del lst[: len(lst) // 2]
        if i % 5 == 0:
            d.pop("k%d-%s" % ((i * 31 + seed) % 9000, "x" * (i % 50)), None)
        if i % 1000 == 0:
            big = bytearray((i % 251,)) * (200000 + i * 10)
            h.update(bytes(big[-64:]))
            handoff_out.put([str(j) for j in range(i % 700)])
            try:
                got = handoff_in.get_nowait()
                del got  # freed in a thread other than its allocator's
            except queue.Empty:
                pass
    for k in sorted(d):
        h.update(k.encode())
        h.update(repr(d[k][:2]).encode())
    s = set(x[:8] for x in lst)
    h.update(repr(sorted(s)).encode())
    out[seed] = h.hexdigest()


def main():
    n = 4
    out = {}
    queues = [queue.Queue() for _ in range(n)]
    threads = [
        threading.Thread(target=work, args=(s, out, queues[s], queues[(s + 1) % n]))
        for s in range(n)
    ]
    for t in threads:
        t.start()
    forks_ok = 0
    for i in range(20):
        pid = os.fork()
        if pid == 0:
            d = {str(j): [j] * (j % 7) for j in range(20000)}
            os._exit(0 if len(d) == 20000 else 1)
        _, status = os.waitpid(pid, 0)
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            forks_ok += 1
    for t in threads:
        t.join()
    print("forks ok", forks_ok)
    for s in range(n):
        print("worker", s, out[s])
    text = " ".join(str(i) for i in range(200000))
    words = text.split()
    print("words", len(words), sum(len(w) for w in words))
    print("sorted", hashlib.sha256("".join(sorted(words, key=lambda w: w[::-1])).encode()).hexdigest())
    print("dpmalloc mapped:", "yes" if mapped_dpmalloc() else "no", file=sys.stderr)


main()
