/*
 * fault.c - the fault handler (fault.h). The explainers are called in
 * the order they were added; they read their own records with no lock
 * (the process is about to abort; a record another thread changes
 * meanwhile can only make the report less precise).
 */
#include "fault.h"

#include "error.h"
#include "util.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static fault_explainer_t explainers[FAULT_EXPLAINERS];
static unsigned nexplainers;
static struct sigaction previous_segv, previous_bus;

void fault_report(const char *what, uintptr_t addr, const char *source, size_t size, uintptr_t block)
{
    char hex[24], dec[24];
    dpm_write_stderr("dpmalloc: ");
    dpm_write_stderr(what);
    dpm_write_stderr(" at ");
    dpm_write_stderr(dpm_format_hex(hex, addr));
    dpm_write_stderr(" (");
    dpm_write_stderr(source);
    dpm_write_stderr("): the ");
    dpm_write_stderr(dpm_format_dec(dec, size));
    dpm_write_stderr("-byte block at ");
    dpm_write_stderr(dpm_format_hex(hex, block));
    dpm_write_stderr("\n");
}

static void on_fault(int sig, siginfo_t *info, void *ctx)
{
    uintptr_t addr = (uintptr_t)info->si_addr;
    /* si_code > 0: the kernel's own fault (a sent signal has none) */
    if (info->si_code > 0) {
        unsigned n = __atomic_load_n(&nexplainers, __ATOMIC_ACQUIRE);
        for (unsigned i = 0; i < n; i++)
            if (explainers[i](addr)) {
                signal(SIGABRT, SIG_DFL);
                abort();
            }
    }
    /* not ours: the previous disposition, as if dpmalloc had none */
    struct sigaction *prev = sig == SIGSEGV ? &previous_segv : &previous_bus;
    struct sigaction run = *prev;
    bool handler = (run.sa_flags & SA_SIGINFO) ? run.sa_sigaction != NULL
                                               : run.sa_handler != SIG_DFL && run.sa_handler != SIG_IGN;
    if (!handler && run.sa_handler == SIG_IGN && info->si_code <= 0)
        return;   /* a sent signal the program ignores, now and later (review r38) */
    if (!handler || (run.sa_flags & SA_RESETHAND)) {
        /* the default from now on (a one-shot handler runs this once) */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
        prev->sa_flags &= ~SA_SIGINFO;
        prev->sa_handler = SIG_DFL;
    }
    if (handler) {
        /* what the kernel would block around it: its mask, and the
         * signal itself unless it asked for SA_NODEFER (review r38: a
         * handler that faulted again re-entered itself and deadlocked
         * on its own lock) */
        sigset_t block = run.sa_mask, old;
        if (!(run.sa_flags & SA_NODEFER))
            sigaddset(&block, sig);
        pthread_sigmask(SIG_BLOCK, &block, &old);
        if (run.sa_flags & SA_SIGINFO)
            run.sa_sigaction(sig, info, ctx);
        else
            run.sa_handler(sig);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return;
    }
    if (info->si_code <= 0)
        raise(sig);   /* a sent signal: delivered again, to the default action */
    /* a fault: the access runs again and meets the default action */
}

void fault_explain_with(fault_explainer_t explain)
{
    unsigned n = nexplainers;
    dpm_assert(n < FAULT_EXPLAINERS);
    explainers[n] = explain;
    __atomic_store_n(&nexplainers, n + 1, __ATOMIC_RELEASE);
    if (n != 0)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous_segv);
    sigaction(SIGBUS, &sa, &previous_bus);
}
