/*
 * r11_reserve_errors.c - dpm_reserve's failure modes differ from its
 * header (include/dpmalloc.h: "0, EINVAL, ENOMEM, or mlock's errno (EPERM,
 * ENOMEM) with nothing reserved").
 *
 * mode "mlock": DPM_RESERVE_MLOCK beyond RLIMIT_MEMLOCK. mlock(2) fails
 *   with ENOMEM for an unprivileged caller with a non-zero limit, but
 *   numa_reserve() (src/numa.c) turns any os_prefault() failure into EPERM:
 *   os_prefault() returns a bool and the errno of mlock is dropped.
 *   Expected: 12 (ENOMEM). Actual (70fb239): 1 (EPERM).
 *   Run as root: the program drops to uid 65534 itself (root has
 *   CAP_IPC_LOCK, which ignores the limit).
 *
 * mode "big" (opt-in: it drives the machine out of memory for a few
 *   seconds): a reserve larger than RAM. map_reserve() maps normal pages
 *   with os_map_aligned(), i.e. MAP_NORESERVE, so the kernel's overcommit
 *   check never refuses it, and os_prefault() then writes every page: the
 *   process grows until the OOM killer kills it (the first run of this
 *   review took the whole 23 GiB machine: "Out of memory: Killed process
 *   ... total-vm:34359891052kB"). Nothing short of 64 TiB (the 1 << 46
 *   cap) is refused. Expected: ENOMEM, process alive. Actual: the child
 *   (oom_score_adj 1000, so it is the one chosen) dies of SIGKILL.
 *   A mapping without MAP_NORESERVE (or MADV_POPULATE_WRITE, whose
 *   failure returns) plus a check against the size would give ENOMEM.
 *
 * Build and run (from the worktree, after building build/):
 *   cc -O1 -Iinclude tests/review/r11_reserve_errors.c build/libdpmalloc_plain.a \
 *      -lpthread -o /tmp/r11re && /tmp/r11re mlock     # exit 1 = defect shown
 *   /tmp/r11re big                                     # exit 1 = defect shown
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dpmalloc.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static int mlock_mode(void)
{
    struct rlimit rl = {8 << 20, 8 << 20};
    setrlimit(RLIMIT_MEMLOCK, &rl);
    if (getuid() == 0 && setuid(65534) != 0) {
        perror("setuid");
        return 2;
    }
    int r = dpm_reserve(64 << 20, DPM_SOCKET_ID_ANY, DPM_RESERVE_MLOCK | DPM_RESERVE_NO_HUGEPAGES);
    printf("dpm_reserve(64 MiB, MLOCK) under an 8 MiB RLIMIT_MEMLOCK: %d (%s); expected %d (ENOMEM, mlock's errno)\n", r,
           strerror(r), ENOMEM);
    return r == ENOMEM ? 0 : 1;
}

static int big_mode(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    size_t bytes = (size_t)pages * (size_t)psz + ((size_t)2 << 30);
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = fopen("/proc/self/oom_score_adj", "w");
        if (f != NULL) {
            fputs("1000", f);
            fclose(f);
        }
        int r = dpm_reserve(bytes, DPM_SOCKET_ID_ANY, DPM_RESERVE_NO_HUGEPAGES);
        printf("dpm_reserve(RAM + 2 GiB = %zu MiB): %d (%s)\n", bytes >> 20, r, strerror(r));
        fflush(stdout);
        _exit(r == ENOMEM ? 0 : 1);
    }
    int st;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st)) {
        printf("child killed by signal %d (OOM killer) instead of getting ENOMEM\n", WTERMSIG(st));
        return 1;
    }
    return WEXITSTATUS(st);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "big") == 0)
        return big_mode();
    return mlock_mode();
}
