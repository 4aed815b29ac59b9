/*
 * dpmalloc_stat.c - dpmalloc-stat PID: the statistics of a running
 * process that uses dpmalloc, read from outside (docs/stats.md, "From
 * outside: dpmalloc-stat"). The process does nothing for it: the tool
 * finds the library's anchor (src/anchor.h) through the ELF symbol tables
 * of the files the process maps, then reads the counters with
 * process_vm_readv (/proc/PID/mem where that is missing), the same
 * access a debugger has.
 *
 * Everything is read while the process runs, without its locks: every
 * pointer followed comes from a read that may be stale or torn, so each is
 * checked (alignment, a field that must point back, counts in range)
 * before it is used, every walk is bounded, and a failed read skips the
 * record rather than stopping the report. Counters so read are each a
 * value the counter had; figures merged from several are not one
 * instant's (as the in-process report of a busy program).
 *
 * Built from the same tree as the library, it includes its internal
 * headers for the layouts, and refuses a process whose library has other
 * layouts (DPM_ANCHOR_ABI). It links only libc.
 */
#include "anchor.h"

#include <dpmalloc.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Exit statuses (docs/stats.md) */
enum { EXIT_USAGE = 2, EXIT_NOPROC = 3, EXIT_PERM = 4, EXIT_NOTDPM = 5, EXIT_MISMATCH = 6 };

/* Bounds of the walks (a list being changed while it is read must not
 * make the tool loop). */
#define MAX_TCACHES 65536
#define MAX_SPECIAL_SLOTS 65536
#define SPECIAL_ROWS 128

static const char *prog = "dpmalloc-stat";
static pid_t pid;

static void die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(status);
}

static void die_errno(int err)
{
    if (err == ESRCH || err == ENOENT)
        die(EXIT_NOPROC, "no process with pid %d", (int)pid);
    if (err == EPERM || err == EACCES)
        die(EXIT_PERM,
            "pid %d: permission denied (same user or CAP_SYS_PTRACE; see /proc/sys/kernel/yama/ptrace_scope)",
            (int)pid);
    die(1, "pid %d: %s", (int)pid, strerror(err));
}

/* ---- remote reads ------------------------------------------------------- */

static int mem_fd = -1;   /* /proc/PID/mem, where process_vm_readv is missing or refused */
static bool use_proc_mem; /* --proc-mem */

static int open_proc_mem(void)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
    mem_fd = open(path, O_RDONLY | O_CLOEXEC);
    return mem_fd < 0 ? errno : 0;
}

/* 0, or an errno: EFAULT for an address the process does not map. */
static int rread(uintptr_t addr, void *buf, size_t len)
{
    if (addr == 0 || addr + len < addr)
        return EFAULT;
    if (mem_fd < 0 && !use_proc_mem) {
        struct iovec local = {buf, len}, remote = {(void *)addr, len};
        ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (n == (ssize_t)len)
            return 0;
        if (n >= 0)
            return EFAULT;
        int err = errno;
        /* missing (old kernels), or refused by a seccomp filter (a
         * container's default profile) where /proc/PID/mem may be allowed */
        if (err != ENOSYS && err != EPERM)
            return err;
        if (open_proc_mem() != 0)
            return err == ENOSYS ? errno : err;
    }
    if (mem_fd < 0) {
        int err = open_proc_mem();
        if (err != 0)
            return err;
    }
    ssize_t n = pread(mem_fd, buf, len, (off_t)addr);
    return n == (ssize_t)len ? 0 : n < 0 && errno != EIO ? errno : EFAULT;
}

/* A pointer-sized read; 0 when it fails. */
static uintptr_t rptr(uintptr_t addr)
{
    uintptr_t v = 0;
    return rread(addr, &v, sizeof(v)) == 0 ? v : 0;
}

static bool aligned(uintptr_t p, size_t a) { return p != 0 && p % a == 0; }

/* A NUL-terminated string of at most cap - 1 bytes at addr, read a page
 * at a time (a string may end just before an unmapped page); false if it
 * cannot be read or does not end within cap. */
static bool rstring(uintptr_t addr, char *buf, size_t cap)
{
    size_t got = 0;
    while (got < cap) {
        uintptr_t at = addr + got;
        size_t n = PAGE - at % PAGE;
        if (n > cap - got)
            n = cap - got;
        if (rread(at, buf + got, n) != 0)
            return false;
        if (memchr(buf + got, '\0', n) != NULL)
            return true;
        got += n;
    }
    return false;
}

/* A bool of the copied memory, read as its byte: the copy may hold any
 * value there (a torn or foreign read), which is not a valid bool. */
#define RBOOL(lv) (*(const unsigned char *)&(lv) != 0)

/* ---- finding the anchor ------------------------------------------------- */

typedef struct elf_file {
    const unsigned char *data;
    size_t size;
} elf_file_t;

static bool in_file(const elf_file_t *f, uint64_t off, uint64_t len)
{
    return off <= f->size && len <= f->size - off;
}

/* The value of symbol name in the table of section type `type`, 0 if none. */
static uint64_t elf_lookup(const elf_file_t *f, uint32_t type, const char *name)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f->data;
    if (eh->e_shentsize != sizeof(Elf64_Shdr) || !in_file(f, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)))
        return 0;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(f->data + eh->e_shoff);
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != type || sh[i].sh_entsize != sizeof(Elf64_Sym) || sh[i].sh_link >= eh->e_shnum)
            continue;
        const Elf64_Shdr *strs = &sh[sh[i].sh_link];
        if (!in_file(f, sh[i].sh_offset, sh[i].sh_size) || !in_file(f, strs->sh_offset, strs->sh_size))
            continue;
        const Elf64_Sym *sym = (const Elf64_Sym *)(f->data + sh[i].sh_offset);
        const char *str = (const char *)f->data + strs->sh_offset;
        size_t nsyms = sh[i].sh_size / sizeof(Elf64_Sym), len = strlen(name);
        for (size_t k = 0; k < nsyms; k++)
            if (sym[k].st_name < strs->sh_size && strs->sh_size - sym[k].st_name > len &&
                memcmp(str + sym[k].st_name, name, len + 1) == 0 && sym[k].st_shndx != SHN_UNDEF)
                return sym[k].st_value;
    }
    return 0;
}

/* The run-time address of the anchor in the file mapped from map_start
 * (its mapping at file offset 0), or 0. */
static uintptr_t anchor_in_file(int fd, uintptr_t map_start)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr))
        return 0;
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED)
        return 0;
    elf_file_t f = {m, (size_t)st.st_size};
    const Elf64_Ehdr *eh = m;
    uintptr_t at = 0;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
        (eh->e_type == ET_DYN || eh->e_type == ET_EXEC) && eh->e_phentsize == sizeof(Elf64_Phdr) &&
        in_file(&f, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr))) {
        uint64_t v = elf_lookup(&f, SHT_DYNSYM, DPM_ANCHOR_SYMBOL);
        if (v == 0)
            v = elf_lookup(&f, SHT_SYMTAB, DPM_ANCHOR_SYMBOL);
        if (v != 0) {
            /* the load bias: where the first loadable segment (the one at
             * file offset 0) was mapped, less its page's address in the file */
            uintptr_t bias = 0;
            if (eh->e_type == ET_DYN) {
                const Elf64_Phdr *ph = (const Elf64_Phdr *)(f.data + eh->e_phoff);
                for (unsigned i = 0; i < eh->e_phnum; i++)
                    if (ph[i].p_type == PT_LOAD) {
                        uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
                        bias = map_start - (uintptr_t)((ph[i].p_vaddr - ph[i].p_offset) & ~(page - 1));
                        break;
                    }
            }
            at = bias + (uintptr_t)v;
        }
    }
    munmap(m, (size_t)st.st_size);
    return at;
}

/* Opens path only if it is a regular file: a mapped device is never
 * opened (an open may have effects on a device). */
static int open_regular(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    return open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
}

static char source_path[4096];

/* The anchor's address in pid: the first mapped ELF file that has one. */
static uintptr_t find_anchor(void)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    FILE *maps = fopen(path, "re");
    if (maps == NULL)
        die_errno(errno);
    char line[4096 + 256];
    uintptr_t found = 0;
    bool any = false;
    while (found == 0 && fgets(line, sizeof(line), maps) != NULL) {
        any = true;
        unsigned long start, end, off;
        int name_at = -1;
        if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %n", &start, &end, &off, &name_at) < 3 || name_at < 0)
            continue;
        char *name = line + name_at;
        name[strcspn(name, "\n")] = '\0';
        if (off != 0 || name[0] != '/')
            continue;
        char *deleted = strstr(name, " (deleted)");
        if (deleted != NULL)
            *deleted = '\0';
        /* the mapped file itself, even if replaced on disk since; else
         * by its path in the process's root, else in ours */
        char alt[4096 + 64];
        snprintf(alt, sizeof(alt), "/proc/%d/map_files/%lx-%lx", (int)pid, start, end);
        int fd = open_regular(alt);
        if (fd < 0) {
            snprintf(alt, sizeof(alt), "/proc/%d/root%s", (int)pid, name);
            fd = open_regular(alt);
        }
        if (fd < 0)
            fd = open_regular(name);
        if (fd < 0)
            continue;
        found = anchor_in_file(fd, start);
        close(fd);
        if (found != 0)
            snprintf(source_path, sizeof(source_path), "%s", name);
    }
    int read_err = ferror(maps) ? errno : 0;
    fclose(maps);
    if (read_err != 0)   /* some kernels check access at the first read */
        die_errno(read_err);
    if (!any)   /* a zombie or a kernel thread maps nothing */
        die(EXIT_NOTDPM, "pid %d is not a dpmalloc process (it maps no files)", (int)pid);
    return found;
}

/* ---- the snapshot --------------------------------------------------------- */

typedef struct bin_row {
    size_t size;
    uint32_t phase;
    bool typed;
    uint64_t nmalloc, nfree, nfills, nflushes, nslabs;
    uint64_t curslabs, curregs, slab_objs;
    uint64_t nrequests, tc_misses;
    mutex_stats_t lock;
} bin_row_t;

typedef struct large_row {
    uint64_t nmalloc, nfree, live_bytes;
} large_row_t;

typedef struct arena_row {
    unsigned index;
    uintptr_t remote;        /* its address in the process */
    char name[ARENA_NAME_MAX];
    bool manual;
    uint32_t nthreads;
    int node;
    int64_t dirty_decay_ms, muzzy_decay_ms;
    uint64_t mapped, reserved, nsegments, pactive, pdirty, pmuzzy, pclean;
    uint64_t runs[RUN_NSTATES], run_pages[RUN_NSTATES], longest_list[RUN_NSTATES];
    slow_samples_t samples;
    uint64_t small_allocated, large_allocated, thread_cache_bytes;
    uint64_t nmalloc_small, nfree_small, nrequests_small, nmalloc_large, nfree_large;
    uint64_t npurge_passes, npurged_lazy, npurged_now, nsearches, nsearch_hits;
    mutex_stats_t arena_lock, bins_locks;
    unsigned nbins, nspecial_unlisted;
    bin_row_t bins[NSMALL + SPECIAL_ROWS];
    large_row_t large[NLARGE_STATS];
} arena_row_t;

#define MAX_OPTIONS 256
#define OPT_TEXT 256

typedef struct opt_row {
    char name[64];
    opt_type_t type;
    bool readable;
    int64_t i;              /* bool, unsigned, size_t, ssize */
    char text[OPT_TEXT];    /* string */
} opt_row_t;

/* The memory limit's figures, as memlimit_stats_t and named as in the
 * process's "memory" section (stats.memory.*). */
typedef struct mem_figures {
    uint64_t charged, peak, limit, soft_limit;
    uint64_t limit_refusals, limit_reclaims, limit_failures, soft_limit_passes;
    uint64_t soft_limit_above_ns;   /* the ongoing spell above the soft limit included */
    bool above_soft_limit;
} mem_figures_t;

typedef struct prof_figures {
    bool active;                    /* prof.active: prof:true and sampling on */
    uint64_t samples_total, samples_live, samples_dropped;
} prof_figures_t;

typedef struct snap {
    double t;                /* CLOCK_MONOTONIC seconds */
    char version[16];
    unsigned ncpus;
    bool initialized;
    bool cpu_front_end;      /* stats.front_end: "cpu" or "thread" */
    uint64_t allocated, active, resident, mapped, retained, metadata, reserved;
    uint64_t cache_bytes, thread_cache_bytes, cpu_cache_bytes, transfer_bytes, large_cache_bytes, typed_cache_bytes;
    uint64_t guarded_total, guarded_live;
    uint64_t nmalloc, nfree, nrequests, npurged;   /* sums over the arenas (rates) */
    unsigned narenas, nexisting, nthread_caches;
    bool tcache_walk_cut;    /* the walk of the live caches hit its bound */
    arena_row_t *arenas;     /* nexisting rows */
    unsigned noptions;
    opt_row_t *options;      /* noptions rows (the options in effect) */
    unsigned ntypes;
    type_stats_t *types;     /* ntypes rows: ids 1.. */
    unsigned nnodes;         /* NUMA nodes (0: unreadable) */
    uint16_t node_ncpus[NUMA_MAX_NODES];
    mem_figures_t mem;       /* stats.memory.* */
    prof_figures_t prof;     /* prof.active, stats.prof.* */
} snap_t;

static dpm_anchor_t anchor;
static sc_info_t sc[NCLASSES];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void lock_add(const dpm_mutex_t *m, mutex_stats_t *o)
{
    o->n_acquired += m->n_acquired;
    o->n_contended += m->n_contended;
    o->wait_ns_total += m->wait_ns_total;
    if (m->wait_ns_max > o->wait_ns_max)
        o->wait_ns_max = m->wait_ns_max;
}

static void lock_merge(const mutex_stats_t *in, mutex_stats_t *o)
{
    o->n_acquired += in->n_acquired;
    o->n_contended += in->n_contended;
    o->wait_ns_total += in->wait_ns_total;
    if (in->wait_ns_max > o->wait_ns_max)
        o->wait_ns_max = in->wait_ns_max;
}

static void bin_row(bin_row_t *r, const bin_t *b)
{
    memset(r, 0, sizeof(*r));
    r->size = b->objsize;
    r->phase = b->phase;
    r->typed = RBOOL(b->typed);
    r->nmalloc = b->stats.nmalloc;
    r->nfree = b->stats.nfree;
    r->nfills = b->stats.nfills;
    r->nflushes = b->stats.nflushes;
    r->nslabs = b->stats.nslabs_made;
    r->curslabs = b->stats.curslabs;
    r->slab_objs = b->slab_objs;
    /* read racily, a free may show before its allocation's count */
    r->curregs = r->nmalloc >= r->nfree ? r->nmalloc - r->nfree : 0;
    lock_add(&b->lock, &r->lock);
}

static void add_bin_totals(arena_row_t *o, const bin_row_t *r)
{
    o->small_allocated += r->curregs * r->size;
    o->nmalloc_small += r->nmalloc;
    o->nfree_small += r->nfree;
    lock_merge(&r->lock, &o->bins_locks);
}

/* The special bins of the arena at `remote`, from its hash table. */
static void read_special(arena_row_t *o, uintptr_t table, uintptr_t remote)
{
    special_table_t head;
    if (!aligned(table, sizeof(void *)) || rread(table, &head, sizeof(head)) != 0)
        return;
    size_t nslots = (size_t)head.mask + 1;
    if (nslots > MAX_SPECIAL_SLOTS || (nslots & (nslots - 1)) != 0)
        return;
    special_slot_t *slots = malloc(nslots * sizeof(*slots));
    if (slots == NULL || rread(table + offsetof(special_table_t, slots), slots, nslots * sizeof(*slots)) != 0) {
        free(slots);
        return;
    }
    bin_t *b = malloc(sizeof(*b));
    for (size_t i = 0; b != NULL && i < nslots; i++) {
        uintptr_t at = (uintptr_t)slots[i].bin;
        if (!aligned(at, CACHELINE) || rread(at, b, sizeof(*b)) != 0 || (uintptr_t)b->arena != remote ||
            b->size_class >= NSMALL + NLARGE_STATS)
            continue;
        bin_row_t extra;
        bin_row_t *r = o->nbins < NSMALL + SPECIAL_ROWS ? &o->bins[o->nbins++] : &extra;
        if (r == &extra)
            o->nspecial_unlisted++;
        bin_row(r, b);
        add_bin_totals(o, r);
    }
    free(b);
    free(slots);
}

/* The longest size-class list of a free-run index, walked in the
 * process: one word per run; each walk stops after as many nodes as the
 * index says it holds (plus a margin for runs added meanwhile). */
static uint64_t longest_list(const run_index_t *ix)
{
    uint64_t longest = 0, bound = ix->nruns + 64;
    if (bound > (1u << 20))
        bound = 1u << 20;
    for (unsigned fl = 0; fl < RUNS_NFL; fl++)
        for (unsigned sl = 0; sl < RUNS_NSL; sl++) {
            uintptr_t node = (uintptr_t)ix->heads[fl][sl].first;
            uint64_t n = 0;
            while (aligned(node, sizeof(void *)) && n < bound) {
                n++;
                node = rptr(node + offsetof(list_node_t, next));
            }
            if (n > longest)
                longest = n;
        }
    return longest;
}

static void add_samples(slow_samples_t *o, const slow_samples_t *in)
{
    o->alloc_n += in->alloc_n;
    o->alloc_cycles += in->alloc_cycles;
    o->free_n += in->free_n;
    o->free_cycles += in->free_cycles;
}

/* Arena i at `remote`; false if it is gone or the read is not an arena. */
static bool read_arena(arena_row_t *o, unsigned i, uintptr_t remote, arena_t *a)
{
    if (!aligned(remote, CACHELINE) || rread(remote, a, sizeof(*a)) != 0 || a->index != i ||
        RBOOL(a->destroyed))
        return false;
    memset(o, 0, sizeof(*o));
    o->index = i;
    o->remote = remote;
    memcpy(o->name, a->name, sizeof(o->name));
    o->name[ARENA_NAME_MAX - 1] = '\0';
    o->manual = RBOOL(a->manual);
    o->nthreads = a->nthreads;
    o->node = a->node;
    o->dirty_decay_ms = a->dirty_decay_ms;
    o->muzzy_decay_ms = a->muzzy_decay_ms;
    const page_heap_t *ph = &a->ph;
    o->mapped = ph->mapped_bytes;
    o->reserved = ph->reserved_bytes;
    o->nsegments = ph->nsegments;
    o->pactive = ph->active_pages;
    o->pdirty = ph->free_runs[RUN_DIRTY].npages + ph->free_runs[RUN_RETAINED].npages + ph->busy_pages;
    o->pmuzzy = ph->free_runs[RUN_MUZZY].npages;
    o->pclean = ph->free_runs[RUN_CLEAN].npages;
    for (int st = 0; st < RUN_NSTATES; st++) {
        o->runs[st] = ph->free_runs[st].nruns;
        o->run_pages[st] = ph->free_runs[st].npages;
        o->longest_list[st] = longest_list(&ph->free_runs[st]);
    }
    o->npurge_passes = ph->npurge_passes;
    o->npurged_lazy = ph->npurged_lazy;
    o->npurged_now = ph->npurged_now;
    o->nsearches = ph->nsearches;
    o->nsearch_hits = ph->nsearch_hits;
    for (unsigned c = 0; c < NSMALL; c++) {
        bin_row(&o->bins[c], &a->bins[c]);
        add_bin_totals(o, &o->bins[c]);
    }
    o->nbins = NSMALL;
    read_special(o, (uintptr_t)a->special, remote);
    for (unsigned c = 0; c < NLARGE_STATS; c++) {
        large_row_t *l = &o->large[c];
        l->nmalloc = a->large[c].nmalloc;
        l->nfree = a->large[c].nfree;
        l->live_bytes = a->large[c].live_bytes;
        o->large_allocated += l->live_bytes;
        o->nmalloc_large += l->nmalloc;
        o->nfree_large += l->nfree;
    }
    lock_add(&a->lock, &o->arena_lock);
    return true;
}

static arena_row_t *row_of(snap_t *s, uintptr_t remote)
{
    for (unsigned i = 0; i < s->nexisting; i++)
        if (s->arenas[i].remote == remote)
            return &s->arenas[i];
    return NULL;
}

static void add_tc_counts(arena_row_t *o, unsigned c, uint64_t req, uint64_t miss)
{
    if (c < NSMALL) {
        o->bins[c].nrequests += req;
        o->bins[c].tc_misses += miss;
        o->nrequests_small += req;
    }
}

/* The live thread caches: their counters and the bytes they hold. The
 * list is walked without its lock: a thread that exits meanwhile moves
 * its cache to the exited list, so the walk is bounded, and a cache
 * whose arena is not one of the arenas read is skipped. */
static void read_tcaches(snap_t *s, unsigned nclasses)
{
    uintptr_t list = rptr((uintptr_t)anchor.tcaches_live);
    uintptr_t node = list != 0 ? rptr(list) : 0;
    tcache_t *tc = malloc(sizeof(*tc));
    if (tc == NULL)
        return;
    unsigned n = 0;
    for (; node != 0 && n < MAX_TCACHES; n++) {
        uintptr_t at = node - offsetof(tcache_t, link);
        if (!aligned(at, CACHELINE) || rread(at, tc, sizeof(*tc)) != 0)
            break;
        node = (uintptr_t)tc->link.next;
        arena_row_t *o = row_of(s, (uintptr_t)tc->arena);
        if (o == NULL)
            continue;
        s->nthread_caches++;
        uint64_t bytes = 0;
        for (unsigned c = 0; c < nclasses; c++) {
            const tc_bin_t *b = &tc->bins[c];
            add_tc_counts(o, c, b->nrequests, tc->stats[c].nmisses);
            size_t cached = (uint16_t)(b->top_lo - (uint16_t)(uintptr_t)b->head) / sizeof(void *);
            if (cached <= b->ncached_max)
                bytes += cached * sc[c].size;
        }
        for (unsigned k = 0; k < TC_PHASED_STASHES; k++)
            if (tc->stashes[k].bytes <= TC_STASH_BYTES)
                bytes += tc->stashes[k].bytes;
        o->thread_cache_bytes += bytes;
        s->thread_cache_bytes += bytes;
        add_samples(&o->samples, &tc->samples);
    }
    s->tcache_walk_cut = n == MAX_TCACHES;
    free(tc);
}

/* Counters of exited threads' caches, for the arena's current life. */
static void read_exited(snap_t *s)
{
    uintptr_t table = rptr((uintptr_t)anchor.tcaches_exited);
    if (!aligned(table, sizeof(void *)))
        return;
    tc_exited_t e;
    for (unsigned i = 0; i < s->nexisting; i++) {
        arena_row_t *o = &s->arenas[i];
        uintptr_t at = rptr(table + o->index * sizeof(void *));
        if (!aligned(at, sizeof(void *)) || rread(at, &e, sizeof(e)) != 0)
            continue;
        uint32_t inc = 0;
        if (rread(o->remote + offsetof(arena_t, incarnation), &inc, sizeof(inc)) != 0 || inc != e.incarnation)
            continue;
        for (unsigned c = 0; c < TC_MAX_CLASSES; c++)
            add_tc_counts(o, c, e.totals[c].nrequests, e.totals[c].nmisses);
        add_samples(&o->samples, &e.samples);
    }
}

/* Blocks in the CPUs' caches (cpu_caches_bytes), if they run. */
static uint64_t read_cpu_caches(snap_t *s)
{
    unsigned char on = 0;
    if (rread((uintptr_t)anchor.cpu_caches_on, &on, sizeof(on)) != 0 || on == 0)
        return 0;
    s->cpu_front_end = true;
    uintptr_t table = rptr((uintptr_t)anchor.cpu_caches);
    uintptr_t sizes = rptr((uintptr_t)anchor.cpu_tag_objsize);
    static uintptr_t caches[CPU_SLOTS_MAX];
    static uint32_t objsize[CPU_NTAGS];
    if (rread(table, caches, sizeof(caches)) != 0 || rread(sizes, objsize, sizeof(objsize)) != 0)
        return 0;
    cpu_cache_t *cc = malloc(sizeof(*cc));
    uint64_t bytes = 0;
    for (unsigned cpu = 0; cc != NULL && cpu < CPU_SLOTS_MAX; cpu++) {
        if (!aligned(caches[cpu], CACHELINE) || rread(caches[cpu], cc, sizeof(*cc)) != 0)
            continue;
        for (unsigned t = 1; t < CPU_NTAGS; t++) {
            /* addresses of the process: compared as integers */
            uintptr_t head = (uintptr_t)cc->tags[t].head, top = (uintptr_t)cc->tags[t].top;
            size_t n = (top - head) / sizeof(void *);
            if (head == 0 || head > top || n > cc->tags[t].cap)
                continue;
            bytes += (uint64_t)n * objsize[t];
        }
    }
    free(cc);
    return bytes;
}

static uint64_t read_transfer(void)
{
    anchor_array_t arr;
    if (rread((uintptr_t)anchor.transfer, &arr, sizeof(arr)) != 0 || arr.count != TRANSFER_NSTACKS ||
        arr.field + sizeof(unsigned) > arr.stride)
        return 0;
    uint64_t bytes = 0;
    for (unsigned j = 0; j < arr.count; j++) {
        unsigned n = 0;
        if (rread((uintptr_t)arr.base + (uintptr_t)j * arr.stride + arr.field, &n, sizeof(n)) == 0)
            bytes += (uint64_t)n * sc[transfer_stack_class(j)].size;
    }
    return bytes;
}

/* Typed blocks in the per-CPU stashes (typed_caches_bytes). */
static uint64_t read_typed_stashes(void)
{
    anchor_ptr_table_t t;
    if (rread((uintptr_t)anchor.typed_stashes, &t, sizeof(t)) != 0 || t.count != TYPED_STASH_CPUS)
        return 0;
    static uintptr_t stashes[TYPED_STASH_CPUS];
    if (rread((uintptr_t)t.table, stashes, sizeof(stashes)) != 0)
        return 0;
    uint64_t bytes = 0;
    for (unsigned cpu = 0; cpu < TYPED_STASH_CPUS; cpu++) {
        uint8_t n[NSMALL];
        if (!aligned(stashes[cpu], CACHELINE) || rread(stashes[cpu] + t.field, n, sizeof(n)) != 0)
            continue;
        for (unsigned c = 0; c < NSMALL; c++)
            if (n[c] <= TYPED_STASH_SLOTS)
                bytes += (uint64_t)n[c] * sc[c].size;
    }
    return bytes;
}

static uint64_t read_large_caches(void)
{
    uintptr_t table = rptr((uintptr_t)anchor.large_caches);
    unsigned n = 0;
    if (table == 0 || rread(rptr((uintptr_t)anchor.large_ncpus), &n, sizeof(n)) != 0 || n > LARGE_CPUS_MAX)
        return 0;
    uint64_t bytes = 0;
    for (unsigned cpu = 0; cpu < n; cpu++) {
        uintptr_t lc = rptr(table + cpu * sizeof(void *));
        size_t b = 0;
        if (aligned(lc, CACHELINE) && rread(lc + offsetof(large_cache_t, bytes), &b, sizeof(b)) == 0)
            bytes += b;
    }
    return bytes;
}

static size_t read_size(const size_t *const *ref)
{
    size_t v = 0;
    uintptr_t at = rptr((uintptr_t)ref);
    return at != 0 && rread(at, &v, sizeof(v)) == 0 ? v : 0;
}

/* The options in effect, from the library's option table. */
static void read_options(snap_t *s)
{
    unsigned n = 0;
    if (rread((uintptr_t)anchor.opt_table_len, &n, sizeof(n)) != 0 || n > MAX_OPTIONS)
        return;
    opt_desc_t *d = calloc(n + 1, sizeof(*d));
    s->options = calloc(n + 1, sizeof(*s->options));
    if (d == NULL || s->options == NULL || rread((uintptr_t)anchor.opt_table, d, n * sizeof(*d)) != 0) {
        free(d);
        return;
    }
    for (unsigned k = 0; k < n; k++) {
        opt_row_t *o = &s->options[s->noptions];
        unsigned type = 0;
        memcpy(&type, &d[k].type, sizeof(type) < sizeof(d[k].type) ? sizeof(type) : sizeof(d[k].type));
        if (!rstring((uintptr_t)d[k].name, o->name, sizeof(o->name)) || o->name[0] == '\0' || type > OPT_STRING)
            continue;
        bool name_ok = true;
        for (const char *c = o->name; *c; c++)
            name_ok &= (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_';
        if (!name_ok)
            continue;
        o->type = (opt_type_t)type;
        uintptr_t v = (uintptr_t)d[k].value;
        unsigned char b = 0;
        unsigned u = 0;
        uint64_t w = 0;
        switch (o->type) {
        case OPT_BOOL: o->readable = rread(v, &b, 1) == 0, o->i = b != 0; break;
        case OPT_UNSIGNED: o->readable = rread(v, &u, sizeof(u)) == 0, o->i = u; break;
        case OPT_SIZE:
        case OPT_SSIZE: o->readable = rread(v, &w, sizeof(w)) == 0, o->i = (int64_t)w; break;
        case OPT_STRING: o->readable = rstring(v, o->text, sizeof(o->text)); break;
        }
        s->noptions++;
    }
    free(d);
}

/* Sums one count of type id over the rows (and the spill row). */
static uint64_t type_sum(const anchor_types_t *t, const uintptr_t *rows, unsigned nrows, uintptr_t spill, unsigned id,
                         uint32_t field)
{
    uint64_t sum = 0, v = 0;
    uintptr_t off = (uintptr_t)id * t->counts_stride + field;
    if (rread(spill + off, &v, sizeof(v)) == 0)
        sum += v;
    for (unsigned r = 0; r < nrows; r++)
        if (aligned(rows[r], CACHELINE) && rread(rows[r] + off, &v, sizeof(v)) == 0)
            sum += v;
    return sum;
}

/* The type-tag table: like type_snapshot, every row's frees before every
 * row's allocations, so that a block freed in the sums was allocated in
 * them (nfree <= nalloc). */
static void read_types(snap_t *s)
{
    anchor_types_t t;
    unsigned n = 0, end = 0;
    if (rread((uintptr_t)anchor.types, &t, sizeof(t)) != 0 || t.max_types != MAX_TYPES ||
        t.row_slots != TYPE_CPU_SLOTS || t.name_stride < TYPE_NAME_MAX || t.counts_stride < 4 * sizeof(uint64_t) ||
        rread((uintptr_t)t.ntypes, &n, sizeof(n)) != 0 || rread((uintptr_t)t.rows_end, &end, sizeof(end)) != 0)
        return;
    if (n > MAX_TYPES)
        n = MAX_TYPES;
    if (end > TYPE_CPU_SLOTS)
        end = TYPE_CPU_SLOTS;
    static uintptr_t rows[TYPE_CPU_SLOTS];
    if (n <= 1 || (end > 0 && rread((uintptr_t)t.rows, rows, end * sizeof(rows[0])) != 0))
        return;
    s->types = calloc(n, sizeof(*s->types));
    if (s->types == NULL)
        return;
    for (unsigned id = 1; id < n; id++) {
        type_stats_t *o = &s->types[s->ntypes];
        if (!rstring((uintptr_t)t.names + (uintptr_t)id * t.name_stride, o->name, TYPE_NAME_MAX))
            continue;
        uint64_t nfree = type_sum(&t, rows, end, (uintptr_t)t.spill_row, id, t.nfree);
        uint64_t freed = type_sum(&t, rows, end, (uintptr_t)t.spill_row, id, t.bytes_freed);
        uint64_t nalloc = type_sum(&t, rows, end, (uintptr_t)t.spill_row, id, t.nalloc);
        uint64_t bytes = type_sum(&t, rows, end, (uintptr_t)t.spill_row, id, t.bytes_alloc);
        o->nalloc = nalloc;
        o->nfree = nfree <= nalloc ? nfree : nalloc;
        o->live_blocks = o->nalloc - o->nfree;
        o->live_bytes = bytes >= freed ? bytes - freed : 0;
        s->ntypes++;
    }
}

static void read_nodes(snap_t *s)
{
    unsigned n = 0;
    uintptr_t at = rptr((uintptr_t)anchor.numa_nnodes);
    if (at == 0 || rread(at, &n, sizeof(n)) != 0 || n == 0 || n > NUMA_MAX_NODES ||
        rread(rptr((uintptr_t)anchor.numa_node_ncpus), s->node_ncpus, sizeof(s->node_ncpus)) != 0)
        return;
    s->nnodes = n;
}

/* Per NUMA node: its CPUs and the figures of its node arena (-1 and
 * zeros for a node whose arena was never made), as in print_nodes. */
typedef struct node_row {
    int64_t arena;
    uint64_t mapped, active, resident, reserved;
} node_row_t;

static node_row_t node_of(const snap_t *s, unsigned n)
{
    node_row_t r = {-1, 0, 0, 0, 0};
    for (unsigned i = 0; i < s->nexisting; i++) {
        const arena_row_t *o = &s->arenas[i];
        if (o->node != (int)n)
            continue;
        r.arena = o->index;
        r.mapped += o->mapped;
        r.reserved += o->reserved;
        r.active += o->pactive * anchor.page;
        r.resident += (o->pactive + o->pdirty + o->pmuzzy) * anchor.page;
    }
    return r;
}

/* 0 where unreadable, as the other counters. */
static uint64_t read_u64(const void *at)
{
    uint64_t v = 0;
    return rread((uintptr_t)at, &v, sizeof(v)) == 0 ? v : 0;
}

static bool read_flag(const void *at)
{
    unsigned char b = 0;
    return rread((uintptr_t)at, &b, 1) == 0 && b != 0;
}

/* CLOCK_MONOTONIC of the process less ours, in ns: non-zero only where it
 * runs in another time namespace (/proc/PID/timens_offsets, Linux 5.6),
 * whose offsets are fixed once a process has entered it. */
static int64_t monotonic_offset(const char *path)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    char name[32];
    long long sec, nsec;
    int64_t off = 0;
    while (fscanf(f, "%31s %lld %lld", name, &sec, &nsec) == 3)
        if (strcmp(name, "monotonic") == 0 || strcmp(name, "1") == 0)
            off = (int64_t)sec * 1000000000 + nsec;
    fclose(f);
    return off;
}

static int64_t clock_skew;   /* the process's CLOCK_MONOTONIC less ours (ns) */

/* The memory limit's figures (memlimit.c), as memlimit_stats_read makes
 * them: the time above the soft limit includes the ongoing spell, timed
 * with the process's clock. */
static void read_memory(mem_figures_t *m)
{
    anchor_memlimit_t d;
    if (rread((uintptr_t)anchor.memlimit, &d, sizeof(d)) != 0)
        return;
    m->charged = read_u64(d.charged);
    m->peak = read_u64(d.peak);
    m->limit = read_u64(d.limit);
    m->soft_limit = read_u64(d.soft_limit);
    m->limit_refusals = read_u64(d.refusals);
    m->limit_reclaims = read_u64(d.reclaims);
    m->limit_failures = read_u64(d.failures);
    m->soft_limit_passes = read_u64(d.soft_passes);
    m->above_soft_limit = read_flag(d.above_soft);
    m->soft_limit_above_ns = read_u64(d.soft_above_ns);
    if (m->above_soft_limit) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t t = (uint64_t)((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + clock_skew);
        uint64_t since = read_u64(d.above_since_ns);
        m->soft_limit_above_ns += t > since ? t - since : 0;
    }
}

static void read_prof(prof_figures_t *p)
{
    anchor_prof_t d;
    if (rread((uintptr_t)anchor.prof, &d, sizeof(d)) != 0)
        return;
    p->active = read_flag(d.on) && read_flag(d.active);
    p->samples_total = read_u64(d.samples_total);
    p->samples_live = read_u64(d.samples_live);
    p->samples_dropped = read_u64(d.samples_dropped);
}

static void snap_free(snap_t *s)
{
    free(s->types);
    free(s->options);
    free(s->arenas);
    memset(s, 0, sizeof(*s));
}

/* The anchor unreadable or changed: the process ended (exit 3), or it
 * runs another program since an exec (exit 5). */
static void anchor_gone(int err)
{
    if (err == EFAULT && kill(pid, 0) == 0)
        die(EXIT_NOTDPM, "pid %d no longer runs dpmalloc (its anchor is gone: exec?)", (int)pid);
    die_errno(err == EFAULT ? ESRCH : err);
}

/* After a snapshot: the anchor still reads the same, so no read of it
 * fell on a process that had ended (a failed read counts as 0) or on
 * another program's memory. */
static void confirm_same_process(uintptr_t anchor_at)
{
    dpm_anchor_t again;
    int err = rread(anchor_at, &again, sizeof(again));
    if (err != 0)
        anchor_gone(err);
    if (memcmp(&again, &anchor, sizeof(again)) != 0)
        die(EXIT_NOTDPM, "pid %d no longer runs dpmalloc (its anchor changed: exec?)", (int)pid);
}

/* One snapshot; exits if the process is gone. */
static void take(snap_t *s, uintptr_t anchor_at)
{
    memset(s, 0, sizeof(*s));
    s->t = now();
    int err = rread(anchor_at, &anchor, sizeof(anchor));
    if (err != 0)
        anchor_gone(err);
    /* an exec since the first read leaves other data there */
    if (anchor.magic != DPM_ANCHOR_MAGIC || anchor.abi != DPM_ANCHOR_ABI)
        die(EXIT_NOTDPM, "pid %d no longer runs dpmalloc (its anchor is gone: exec?)", (int)pid);
    memcpy(s->version, anchor.version, sizeof(s->version));
    s->version[sizeof(s->version) - 1] = '\0';
    global_t gl;
    if (rread((uintptr_t)anchor.g, &gl, sizeof(gl)) != 0 ||
        rread((uintptr_t)anchor.sc_table, sc, sizeof(sc)) != 0) {
        confirm_same_process(anchor_at);   /* exits 3 or 5 if that is why */
        die(1, "pid %d: the library's globals cannot be read", (int)pid);
    }
    s->initialized = RBOOL(gl.initialized);
    s->ncpus = gl.ncpus;
    unsigned n = 0;
    rread((uintptr_t)anchor.narenas_total, &n, sizeof(n));
    if (n > MAX_ARENAS)
        n = MAX_ARENAS;
    s->narenas = n;
    uintptr_t *ptrs = calloc(n + 1, sizeof(*ptrs));
    s->arenas = calloc(n + 1, sizeof(arena_row_t));
    arena_t *a = malloc(sizeof(*a));
    if (ptrs == NULL || s->arenas == NULL || a == NULL)
        die(1, "out of memory");
    if (n > 0 && rread((uintptr_t)anchor.arenas, ptrs, n * sizeof(*ptrs)) != 0)
        n = 0;
    for (unsigned i = 0; i < n; i++)
        if (ptrs[i] != 0 && read_arena(&s->arenas[s->nexisting], i, ptrs[i], a))
            s->nexisting++;
    free(a);
    free(ptrs);
    read_exited(s);
    read_tcaches(s, gl.tcache_nclasses <= TC_MAX_CLASSES ? gl.tcache_nclasses : TC_MAX_CLASSES);
    s->cpu_cache_bytes = read_cpu_caches(s);
    s->transfer_bytes = read_transfer();
    s->large_cache_bytes = read_large_caches();
    s->typed_cache_bytes = read_typed_stashes();
    read_options(s);
    read_types(s);
    read_nodes(s);
    read_memory(&s->mem);
    read_prof(&s->prof);
    s->metadata = read_size(anchor.metadata_bytes);
    s->guarded_total = read_size(anchor.guarded_total);
    s->guarded_live = read_size(anchor.guarded_live);
    uint64_t held = 0, active = 0, dirty = 0, clean = 0, mapped = 0, reserved = 0;
    for (unsigned i = 0; i < s->nexisting; i++) {
        const arena_row_t *o = &s->arenas[i];
        held += o->small_allocated + o->large_allocated;
        active += o->pactive * anchor.page;
        dirty += (o->pdirty + o->pmuzzy) * anchor.page;
        clean += o->pclean * anchor.page;
        mapped += o->mapped;
        reserved += o->reserved;
        s->nmalloc += o->nmalloc_small + o->nmalloc_large;
        s->nfree += o->nfree_small + o->nfree_large;
        s->nrequests += o->nrequests_small;
        s->npurged += o->npurged_lazy + o->npurged_now;
    }
    s->cache_bytes = s->thread_cache_bytes + s->cpu_cache_bytes + s->transfer_bytes + s->large_cache_bytes +
                     s->typed_cache_bytes;
    s->allocated = held > s->cache_bytes ? held - s->cache_bytes : 0;
    s->active = active;
    s->resident = active + dirty + s->metadata;
    s->mapped = mapped + s->metadata;
    s->retained = clean;
    s->reserved = reserved;
    confirm_same_process(anchor_at);
}

/* ---- output ------------------------------------------------------------- */

static double ratio(uint64_t a, uint64_t b) { return b == 0 ? 0.0 : (double)a / (double)b; }

/* Figures the in-process report has that are not read from outside. */
static const char *const unavailable[] = {
    "epoch",
    "arenas.<i>.tcache_bytes (only the thread caches' part: thread_cache_bytes)",
};
#define NUNAVAILABLE (sizeof(unavailable) / sizeof(unavailable[0]))

static const char *const state_names[RUN_NSTATES] = {"dirty", "muzzy", "clean", "retained"};

static void print_text(const snap_t *s)
{
    printf("___ dpmalloc statistics of pid %d (from outside) ___\n", (int)pid);
    printf("  version: %s\n  library: %s\n  ncpus: %u\n  initialized: %s\n  front_end: %s\n", s->version,
           source_path, s->ncpus, s->initialized ? "true" : "false", s->cpu_front_end ? "cpu" : "thread");
    printf("  options:\n");
    for (unsigned k = 0; k < s->noptions; k++) {
        const opt_row_t *o = &s->options[k];
        if (!o->readable)
            printf("    %s: (unreadable)\n", o->name);
        else if (o->type == OPT_STRING)
            printf("    %s: %s\n", o->name, o->text);
        else if (o->type == OPT_BOOL)
            printf("    %s: %s\n", o->name, o->i ? "true" : "false");
        else if (o->type == OPT_SSIZE)
            printf("    %s: %" PRId64 "\n", o->name, o->i);
        else
            printf("    %s: %" PRIu64 "\n", o->name, (uint64_t)o->i);
    }
    printf("  types:\n  %-20s %12s %12s %12s %12s\n", "type", "live_bytes", "live_blocks", "nalloc", "nfree");
    for (unsigned k = 0; k < s->ntypes; k++) {
        const type_stats_t *t = &s->types[k];
        printf("  %-20s %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %12" PRIu64 "\n", t->name, t->live_bytes,
               t->live_blocks, t->nalloc, t->nfree);
    }
    printf("  totals:\n");
    printf("    allocated: %" PRIu64 "\n    active: %" PRIu64 "\n    resident: %" PRIu64 "\n", s->allocated,
           s->active, s->resident);
    printf("    mapped: %" PRIu64 "\n    retained: %" PRIu64 "\n    reserved: %" PRIu64 "\n    metadata: %" PRIu64
           "\n",
           s->mapped, s->retained, s->reserved, s->metadata);
    printf("    tcache_bytes: %" PRIu64 "\n    thread_cache_bytes: %" PRIu64 "\n    cpu_cache_bytes: %" PRIu64
           "\n    transfer_bytes: %" PRIu64 "\n    large_cache_bytes: %" PRIu64 "\n    typed_cache_bytes: %" PRIu64
           "\n",
           s->cache_bytes, s->thread_cache_bytes, s->cpu_cache_bytes, s->transfer_bytes, s->large_cache_bytes,
           s->typed_cache_bytes);
    printf("    guarded_total: %" PRIu64 "\n    guarded_live: %" PRIu64 "\n    narenas: %u\n    thread_caches: %u\n",
           s->guarded_total, s->guarded_live, s->narenas, s->nthread_caches);
    const mem_figures_t *m = &s->mem;
    printf("  memory:\n    charged: %" PRIu64 "\n    peak: %" PRIu64 "\n    limit: %" PRIu64 "\n    soft_limit: %" PRIu64
           "\n    limit_refusals: %" PRIu64 "\n    limit_reclaims: %" PRIu64 "\n    limit_failures: %" PRIu64
           "\n    soft_limit_passes: %" PRIu64 "\n    soft_limit_above_ms: %" PRIu64 "\n    above_soft_limit: %s\n",
           m->charged, m->peak, m->limit, m->soft_limit, m->limit_refusals, m->limit_reclaims, m->limit_failures,
           m->soft_limit_passes, m->soft_limit_above_ns / 1000000u, m->above_soft_limit ? "true" : "false");
    printf("  prof:\n    active: %s\n    samples_total: %" PRIu64 "\n    samples_live: %" PRIu64
           "\n    samples_dropped: %" PRIu64 "\n",
           s->prof.active ? "true" : "false", s->prof.samples_total, s->prof.samples_live, s->prof.samples_dropped);
    printf("  nodes:\n    nnodes: %u\n", s->nnodes);
    for (unsigned n = 0; n < s->nnodes; n++) {
        node_row_t r = node_of(s, n);
        printf("    node %u:\n      node_cpus: %u\n      arena: %" PRId64 "\n      mapped: %" PRIu64
               "\n      active: %" PRIu64 "\n      resident: %" PRIu64 "\n      reserved: %" PRIu64 "\n",
               n, s->node_ncpus[n], r.arena, r.mapped, r.active, r.resident, r.reserved);
    }
    printf("  arenas:\n");
    for (unsigned i = 0; i < s->nexisting; i++) {
        const arena_row_t *o = &s->arenas[i];
        printf("    arena %u:\n", o->index);
        printf("      name: %s\n      manual: %s\n      nthreads: %u\n      node: %d\n", o->name,
               o->manual ? "true" : "false", o->nthreads, o->node);
        printf("      dirty_decay_ms: %" PRId64 "\n      muzzy_decay_ms: %" PRId64 "\n", o->dirty_decay_ms,
               o->muzzy_decay_ms);
        printf("      mapped: %" PRIu64 "\n      reserved: %" PRIu64 "\n      segments: %" PRIu64 "\n", o->mapped,
               o->reserved, o->nsegments);
        printf("      pactive: %" PRIu64 "\n      pdirty: %" PRIu64 "\n      pmuzzy: %" PRIu64
               "\n      pclean: %" PRIu64 "\n",
               o->pactive, o->pdirty, o->pmuzzy, o->pclean);
        printf("      small_allocated: %" PRIu64 "\n      large_allocated: %" PRIu64
               "\n      thread_cache_bytes: %" PRIu64 "\n",
               o->small_allocated, o->large_allocated, o->thread_cache_bytes);
        printf("      nmalloc_small: %" PRIu64 "\n      ndalloc_small: %" PRIu64 "\n      nrequests_small: %" PRIu64
               "\n      nmalloc_large: %" PRIu64 "\n      ndalloc_large: %" PRIu64 "\n",
               o->nmalloc_small, o->nfree_small, o->nrequests_small, o->nmalloc_large, o->nfree_large);
        printf("      purge_passes: %" PRIu64 "\n      purged_lazy_pages: %" PRIu64 "\n      purged_pages: %" PRIu64
               "\n",
               o->npurge_passes, o->npurged_lazy, o->npurged_now);
        printf("      searches: %" PRIu64 "\n      search_hits: %" PRIu64 "\n", o->nsearches, o->nsearch_hits);
        printf("      arena_lock: num_ops %" PRIu64 " num_wait %" PRIu64 " total_wait_ns %" PRIu64 "\n",
               o->arena_lock.n_acquired, o->arena_lock.n_contended, o->arena_lock.wait_ns_total);
        printf("      bin_locks: num_ops %" PRIu64 " num_wait %" PRIu64 " total_wait_ns %" PRIu64 "\n",
               o->bins_locks.n_acquired, o->bins_locks.n_contended, o->bins_locks.wait_ns_total);
        printf("      slow_alloc_samples: %" PRIu64 "\n      slow_alloc_cycles_per_call: %.3f\n"
               "      slow_free_samples: %" PRIu64 "\n      slow_free_cycles_per_call: %.3f\n",
               o->samples.alloc_n, ratio(o->samples.alloc_cycles, o->samples.alloc_n), o->samples.free_n,
               ratio(o->samples.free_cycles, o->samples.free_n));
        printf("      free_runs:\n      %-10s %10s %10s %13s\n", "state", "runs", "pages", "longest_list");
        for (int st = 0; st < RUN_NSTATES; st++)
            printf("      %-10s %10" PRIu64 " %10" PRIu64 " %13" PRIu64 "\n", state_names[st], o->runs[st],
                   o->run_pages[st], o->longest_list[st]);
        printf("      bins:\n      %-10s %6s %6s %12s %12s %12s %10s %10s %10s %6s %10s %10s\n", "size", "phase",
               "typed", "nmalloc", "ndalloc", "nrequests", "curregs", "curslabs", "nslabs", "util", "nfills",
               "nflushes");
        for (unsigned b = 0; b < o->nbins; b++) {
            const bin_row_t *r = &o->bins[b];
            if (r->nmalloc == 0 && r->nrequests == 0)
                continue;
            printf("      %-10zu %6u %6d %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %10" PRIu64 " %10" PRIu64
                   " %10" PRIu64 " %6.3f %10" PRIu64 " %10" PRIu64 "\n",
                   r->size, r->phase, r->typed, r->nmalloc, r->nfree, r->nrequests, r->curregs, r->curslabs,
                   r->nslabs, ratio(r->curregs, r->curslabs * r->slab_objs), r->nfills, r->nflushes);
        }
        printf("      large:\n      %-10s %12s %12s %12s %14s\n", "size", "nmalloc", "ndalloc", "curlextents",
               "live_bytes");
        for (unsigned c = 0; c < NLARGE_STATS; c++) {
            const large_row_t *l = &o->large[c];
            if (l->nmalloc == 0)
                continue;
            printf("      %-10zu %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %14" PRIu64 "\n", sc[NSMALL + c].size,
                   l->nmalloc, l->nfree, l->nmalloc >= l->nfree ? l->nmalloc - l->nfree : 0, l->live_bytes);
        }
    }
    printf("  not readable from outside:\n");
    for (size_t i = 0; i < NUNAVAILABLE; i++)
        printf("    %s\n", unavailable[i]);
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f)
            printf("\\u%04x", ch);   /* bytes >= 0x80 pass through: names are UTF-8, as in-process */
        else
            putchar(ch);
    }
    putchar('"');
}

static void json_lock(const char *key, const mutex_stats_t *m)
{
    printf("\"%s\":{\"num_ops\":%" PRIu64 ",\"num_wait\":%" PRIu64 ",\"total_wait_ns\":%" PRIu64
           ",\"max_wait_ns\":%" PRIu64 "}",
           key, m->n_acquired, m->n_contended, m->wait_ns_total, m->wait_ns_max);
}

static void print_json(const snap_t *s)
{
    printf("{\"dpmalloc\":{\"pid\":%d,\"version\":", (int)pid);
    json_str(s->version);
    printf(",\"library\":");
    json_str(source_path);
    printf(",\"ncpus\":%u,\"initialized\":%s,\"front_end\":\"%s\",\"page\":%u,", s->ncpus,
           s->initialized ? "true" : "false", s->cpu_front_end ? "cpu" : "thread", anchor.page);
    printf("\"options\":{");
    for (unsigned k = 0; k < s->noptions; k++) {
        const opt_row_t *o = &s->options[k];
        printf("%s\"%s\":", k ? "," : "", o->name);
        if (!o->readable)
            printf("null");
        else if (o->type == OPT_STRING)
            json_str(o->text);
        else if (o->type == OPT_BOOL)
            printf("%s", o->i ? "true" : "false");
        else if (o->type == OPT_SSIZE)
            printf("%" PRId64, o->i);
        else
            printf("%" PRIu64, (uint64_t)o->i);
    }
    printf("},\"types\":[");
    for (unsigned k = 0; k < s->ntypes; k++) {
        const type_stats_t *t = &s->types[k];
        printf("%s{\"type\":", k ? "," : "");
        json_str(t->name);
        printf(",\"live_bytes\":%" PRIu64 ",\"live_blocks\":%" PRIu64 ",\"nalloc\":%" PRIu64 ",\"nfree\":%" PRIu64 "}",
               t->live_bytes, t->live_blocks, t->nalloc, t->nfree);
    }
    printf("],");
    printf("\"totals\":{\"allocated\":%" PRIu64 ",\"active\":%" PRIu64 ",\"resident\":%" PRIu64
           ",\"mapped\":%" PRIu64 ",\"retained\":%" PRIu64 ",\"reserved\":%" PRIu64 ",\"metadata\":%" PRIu64
           ",\"tcache_bytes\":%" PRIu64 ",\"thread_cache_bytes\":%" PRIu64 ",\"cpu_cache_bytes\":%" PRIu64
           ",\"transfer_bytes\":%" PRIu64 ",\"large_cache_bytes\":%" PRIu64 ",\"typed_cache_bytes\":%" PRIu64
           ",\"guarded_total\":%" PRIu64
           ",\"guarded_live\":%" PRIu64 ",\"narenas\":%u,\"thread_caches\":%u},",
           s->allocated, s->active, s->resident, s->mapped, s->retained, s->reserved, s->metadata, s->cache_bytes,
           s->thread_cache_bytes, s->cpu_cache_bytes, s->transfer_bytes, s->large_cache_bytes, s->typed_cache_bytes,
           s->guarded_total,
           s->guarded_live, s->narenas, s->nthread_caches);
    const mem_figures_t *m = &s->mem;
    printf("\"memory\":{\"charged\":%" PRIu64 ",\"peak\":%" PRIu64 ",\"limit\":%" PRIu64 ",\"soft_limit\":%" PRIu64
           ",\"limit_refusals\":%" PRIu64 ",\"limit_reclaims\":%" PRIu64 ",\"limit_failures\":%" PRIu64
           ",\"soft_limit_passes\":%" PRIu64 ",\"soft_limit_above_ms\":%" PRIu64 ",\"above_soft_limit\":%s},",
           m->charged, m->peak, m->limit, m->soft_limit, m->limit_refusals, m->limit_reclaims, m->limit_failures,
           m->soft_limit_passes, m->soft_limit_above_ns / 1000000u, m->above_soft_limit ? "true" : "false");
    printf("\"prof\":{\"active\":%s,\"samples_total\":%" PRIu64 ",\"samples_live\":%" PRIu64
           ",\"samples_dropped\":%" PRIu64 "},",
           s->prof.active ? "true" : "false", s->prof.samples_total, s->prof.samples_live, s->prof.samples_dropped);
    printf("\"nodes\":{\"nnodes\":%u", s->nnodes);
    for (unsigned n = 0; n < s->nnodes; n++) {
        node_row_t r = node_of(s, n);
        printf(",\"%u\":{\"node_cpus\":%u,\"arena\":%" PRId64 ",\"mapped\":%" PRIu64 ",\"active\":%" PRIu64
               ",\"resident\":%" PRIu64 ",\"reserved\":%" PRIu64 "}",
               n, s->node_ncpus[n], r.arena, r.mapped, r.active, r.resident, r.reserved);
    }
    printf("},");
    printf("\"arenas\":{");
    for (unsigned i = 0; i < s->nexisting; i++) {
        const arena_row_t *o = &s->arenas[i];
        printf("%s\"%u\":{\"name\":", i ? "," : "", o->index);
        json_str(o->name);
        printf(",\"manual\":%s,\"nthreads\":%u,\"node\":%d,\"dirty_decay_ms\":%" PRId64 ",\"muzzy_decay_ms\":%" PRId64,
               o->manual ? "true" : "false", o->nthreads, o->node, o->dirty_decay_ms, o->muzzy_decay_ms);
        printf(",\"mapped\":%" PRIu64 ",\"reserved\":%" PRIu64 ",\"segments\":%" PRIu64 ",\"pactive\":%" PRIu64
               ",\"pdirty\":%" PRIu64 ",\"pmuzzy\":%" PRIu64 ",\"pclean\":%" PRIu64,
               o->mapped, o->reserved, o->nsegments, o->pactive, o->pdirty, o->pmuzzy, o->pclean);
        printf(",\"small_allocated\":%" PRIu64 ",\"large_allocated\":%" PRIu64 ",\"thread_cache_bytes\":%" PRIu64
               ",\"nmalloc_small\":%" PRIu64 ",\"ndalloc_small\":%" PRIu64 ",\"nrequests_small\":%" PRIu64
               ",\"nmalloc_large\":%" PRIu64 ",\"ndalloc_large\":%" PRIu64,
               o->small_allocated, o->large_allocated, o->thread_cache_bytes, o->nmalloc_small, o->nfree_small,
               o->nrequests_small, o->nmalloc_large, o->nfree_large);
        printf(",\"slow_alloc_samples\":%" PRIu64 ",\"slow_alloc_cycles_per_call\":%.3f,\"slow_free_samples\":%" PRIu64
               ",\"slow_free_cycles_per_call\":%.3f",
               o->samples.alloc_n, ratio(o->samples.alloc_cycles, o->samples.alloc_n), o->samples.free_n,
               ratio(o->samples.free_cycles, o->samples.free_n));
        printf(",\"purge_passes\":%" PRIu64 ",\"purged_lazy_pages\":%" PRIu64 ",\"purged_pages\":%" PRIu64
               ",\"page_runs\":{\"searches\":%" PRIu64 ",\"hits\":%" PRIu64 ",\"free_runs\":[",
               o->npurge_passes, o->npurged_lazy, o->npurged_now, o->nsearches, o->nsearch_hits);
        for (int st = 0; st < RUN_NSTATES; st++)
            printf("%s{\"state\":\"%s\",\"runs\":%" PRIu64 ",\"pages\":%" PRIu64 ",\"longest_list\":%" PRIu64 "}",
                   st ? "," : "", state_names[st], o->runs[st], o->run_pages[st], o->longest_list[st]);
        printf("]},");
        json_lock("arena_lock", &o->arena_lock);
        putchar(',');
        json_lock("bin_locks", &o->bins_locks);
        printf(",\"special_bins_unlisted\":%u,\"bins\":[", o->nspecial_unlisted);
        bool first = true;
        for (unsigned b = 0; b < o->nbins; b++) {
            const bin_row_t *r = &o->bins[b];
            if (r->nmalloc == 0 && r->nrequests == 0)
                continue;
            printf("%s{\"size\":%zu,\"phase\":%u,\"typed\":%d,\"nmalloc\":%" PRIu64 ",\"ndalloc\":%" PRIu64
                   ",\"nrequests\":%" PRIu64 ",\"curregs\":%" PRIu64 ",\"curslabs\":%" PRIu64 ",\"nslabs\":%" PRIu64
                   ",\"util\":%.3f,\"nfills\":%" PRIu64 ",\"nflushes\":%" PRIu64 ",\"tc_hit_rate\":%.3f,"
                   "\"lock_ops\":%" PRIu64 ",\"lock_waits\":%" PRIu64 ",\"lock_wait_ns\":%" PRIu64 "}",
                   first ? "" : ",", r->size, r->phase, r->typed, r->nmalloc, r->nfree, r->nrequests, r->curregs,
                   r->curslabs, r->nslabs, ratio(r->curregs, r->curslabs * r->slab_objs), r->nfills, r->nflushes,
                   r->nrequests && r->tc_misses <= r->nrequests ? 1.0 - ratio(r->tc_misses, r->nrequests) : 0.0,
                   r->lock.n_acquired, r->lock.n_contended, r->lock.wait_ns_total);
            first = false;
        }
        printf("],\"large\":[");
        first = true;
        for (unsigned c = 0; c < NLARGE_STATS; c++) {
            const large_row_t *l = &o->large[c];
            if (l->nmalloc == 0)
                continue;
            printf("%s{\"size\":%zu,\"nmalloc\":%" PRIu64 ",\"ndalloc\":%" PRIu64 ",\"curlextents\":%" PRIu64
                   ",\"live_bytes\":%" PRIu64 "}",
                   first ? "" : ",", sc[NSMALL + c].size, l->nmalloc, l->nfree,
                   l->nmalloc >= l->nfree ? l->nmalloc - l->nfree : 0, l->live_bytes);
            first = false;
        }
        printf("]}");
    }
    printf("},\"unavailable\":[");
    for (size_t i = 0; i < NUNAVAILABLE; i++) {
        printf("%s", i ? "," : "");
        json_str(unavailable[i]);
    }
    printf("]}}\n");
}

/* ---- OpenMetrics -------------------------------------------------------- */

/* One metric family: its header, then the caller's samples. A counter's
 * samples get the _total suffix; a unit is the name's last word. */
static void om_family(const char *name, const char *type, const char *unit, const char *help)
{
    printf("# TYPE dpmalloc_%s %s\n", name, type);
    if (unit != NULL)
        printf("# UNIT dpmalloc_%s %s\n", name, unit);
    printf("# HELP dpmalloc_%s %s\n", name, help);
}

static void om_sample(const char *name, const char *suffix, const char *labels, uint64_t v)
{
    printf("dpmalloc_%s%s%s%s%s %" PRIu64 "\n", name, suffix, labels[0] ? "{" : "", labels, labels[0] ? "}" : "",
           v);
}

static void om_seconds(const char *name, const char *labels, uint64_t ns)
{
    printf("dpmalloc_%s_total{%s} %.9f\n", name, labels, (double)ns / 1e9);
}

typedef uint64_t (*arena_field_fn)(const arena_row_t *);
#define ARENA_FIELD(f)                                                                                         \
    static uint64_t arena_##f(const arena_row_t *o) { return o->f; }
ARENA_FIELD(mapped)
ARENA_FIELD(reserved)
ARENA_FIELD(nsegments)
ARENA_FIELD(nthreads)
ARENA_FIELD(thread_cache_bytes)
ARENA_FIELD(npurge_passes)
ARENA_FIELD(nsearches)
ARENA_FIELD(nsearch_hits)

static void om_per_arena(const snap_t *s, const char *name, const char *type, const char *unit, const char *help,
                         arena_field_fn fn)
{
    om_family(name, type, unit, help);
    bool counter = strcmp(type, "counter") == 0;
    for (unsigned i = 0; i < s->nexisting; i++) {
        char labels[64];
        snprintf(labels, sizeof(labels), "arena=\"%u\"", s->arenas[i].index);
        om_sample(name, counter ? "_total" : "", labels, fn(&s->arenas[i]));
    }
}

typedef uint64_t (*bin_field_fn)(const bin_row_t *);
#define BIN_FIELD(f)                                                                                           \
    static uint64_t bin_##f(const bin_row_t *r) { return r->f; }
BIN_FIELD(nmalloc)
BIN_FIELD(nfree)
BIN_FIELD(nrequests)
BIN_FIELD(curregs)
BIN_FIELD(curslabs)
BIN_FIELD(nslabs)
BIN_FIELD(nfills)
BIN_FIELD(nflushes)

static void om_per_bin(const snap_t *s, const char *name, const char *type, const char *help, bin_field_fn fn)
{
    om_family(name, type, NULL, help);
    bool counter = strcmp(type, "counter") == 0;
    for (unsigned i = 0; i < s->nexisting; i++)
        for (unsigned b = 0; b < s->arenas[i].nbins; b++) {
            const bin_row_t *r = &s->arenas[i].bins[b];
            if (r->nmalloc == 0 && r->nrequests == 0)
                continue;
            char labels[128];
            snprintf(labels, sizeof(labels), "arena=\"%u\",size=\"%zu\",phase=\"%u\",typed=\"%d\"",
                     s->arenas[i].index, r->size, r->phase, r->typed);
            om_sample(name, counter ? "_total" : "", labels, fn(r));
        }
}

static void om_per_large(const snap_t *s, const char *name, const char *type, const char *unit, const char *help,
                         int which)
{
    om_family(name, type, unit, help);
    bool counter = strcmp(type, "counter") == 0;
    for (unsigned i = 0; i < s->nexisting; i++)
        for (unsigned c = 0; c < NLARGE_STATS; c++) {
            const large_row_t *l = &s->arenas[i].large[c];
            if (l->nmalloc == 0)
                continue;
            char labels[96];
            snprintf(labels, sizeof(labels), "arena=\"%u\",size=\"%zu\"", s->arenas[i].index, sc[NSMALL + c].size);
            uint64_t v = which == 0   ? l->nmalloc
                         : which == 1 ? l->nfree
                         : which == 2 ? (l->nmalloc >= l->nfree ? l->nmalloc - l->nfree : 0)
                                      : l->live_bytes;
            om_sample(name, counter ? "_total" : "", labels, v);
        }
}

/* Per arena, small and large: allocated bytes (0), mallocs (1), frees (2). */
static void om_kinds(const snap_t *s, const char *name, const char *suffix, int which)
{
    for (unsigned i = 0; i < s->nexisting; i++) {
        const arena_row_t *o = &s->arenas[i];
        char small[64], large[64];
        snprintf(small, sizeof(small), "arena=\"%u\",kind=\"small\"", o->index);
        snprintf(large, sizeof(large), "arena=\"%u\",kind=\"large\"", o->index);
        uint64_t vs = which == 0 ? o->small_allocated : which == 1 ? o->nmalloc_small : o->nfree_small;
        uint64_t vl = which == 0 ? o->large_allocated : which == 1 ? o->nmalloc_large : o->nfree_large;
        om_sample(name, suffix, small, vs);
        om_sample(name, suffix, large, vl);
    }
}

/* Per arena, its lock and its bins' locks: acquisitions (0), waits (1),
 * seconds waited (2). */
static void om_locks(const snap_t *s, const char *name, int which)
{
    for (unsigned i = 0; i < s->nexisting; i++) {
        const arena_row_t *o = &s->arenas[i];
        const mutex_stats_t *m[2] = {&o->arena_lock, &o->bins_locks};
        const char *lock[2] = {"arena", "bins"};
        for (int k = 0; k < 2; k++) {
            char labels[64];
            snprintf(labels, sizeof(labels), "arena=\"%u\",lock=\"%s\"", o->index, lock[k]);
            if (which == 2)
                om_seconds(name, labels, m[k]->wait_ns_total);
            else
                om_sample(name, "_total", labels, which == 0 ? m[k]->n_acquired : m[k]->n_contended);
        }
    }
}

/* A label value as OpenMetrics writes it: backslash, double quote and
 * newline escaped. */
static void om_escape(char *out, size_t cap, const char *in)
{
    size_t o = 0;
    for (; *in != '\0' && o + 3 < cap; in++) {
        if (*in == '\\' || *in == '"')
            out[o++] = '\\', out[o++] = *in;
        else if (*in == '\n')
            out[o++] = '\\', out[o++] = 'n';
        else
            out[o++] = *in;
    }
    out[o] = '\0';
}

/* Per type: live bytes (0), live blocks (1), allocations (2), frees (3). */
static void om_types(const snap_t *s, const char *name, const char *suffix, int which)
{
    for (unsigned k = 0; k < s->ntypes; k++) {
        const type_stats_t *t = &s->types[k];
        char esc[2 * TYPE_NAME_MAX + 4], labels[2 * TYPE_NAME_MAX + 16];
        om_escape(esc, sizeof(esc), t->name);
        snprintf(labels, sizeof(labels), "type=\"%s\"", esc);
        om_sample(name, suffix, labels,
                  which == 0 ? t->live_bytes : which == 1 ? t->live_blocks : which == 2 ? t->nalloc : t->nfree);
    }
}

/* The memory limit (stats.memory.*): bytes as gauges, the refusals,
 * reclaims, failures and passings as counters, the time above the soft
 * limit in seconds. */
static void om_memory(const mem_figures_t *m)
{
    static const struct {
        const char *name, *help;
        size_t off;
    } gauges[] = {
        {"memory_charged_bytes", "Bytes the memory limit counts: what dpmalloc holds that may be resident (stats.memory.charged).",
         offsetof(mem_figures_t, charged)},
        {"memory_peak_bytes", "Highest charge since start or memory.peak_reset (stats.memory.peak).",
         offsetof(mem_figures_t, peak)},
        {"memory_limit_bytes", "Hard limit of the charge, 0 for none (stats.memory.limit, memory_limit_mb).",
         offsetof(mem_figures_t, limit)},
        {"memory_soft_limit_bytes", "Soft limit, 0 for none (stats.memory.soft_limit, memory_soft_limit_mb).",
         offsetof(mem_figures_t, soft_limit)},
    };
    for (size_t i = 0; i < sizeof(gauges) / sizeof(gauges[0]); i++) {
        om_family(gauges[i].name, "gauge", "bytes", gauges[i].help);
        om_sample(gauges[i].name, "", "", *(const uint64_t *)((const char *)m + gauges[i].off));
    }
    static const struct {
        const char *name, *help;
        size_t off;
    } counters[] = {
        {"memory_limit_refusals", "Charges refused at the hard limit (stats.memory.limit_refusals).",
         offsetof(mem_figures_t, limit_refusals)},
        {"memory_limit_reclaims", "Reclaims (caches drained, arenas purged) run because of a refusal (stats.memory.limit_reclaims).",
         offsetof(mem_figures_t, limit_reclaims)},
        {"memory_limit_failures", "Allocations that failed at the hard limit after the reclaim (stats.memory.limit_failures).",
         offsetof(mem_figures_t, limit_failures)},
        {"memory_soft_limit_passes", "Times the charge went above the soft limit (stats.memory.soft_limit_passes).",
         offsetof(mem_figures_t, soft_limit_passes)},
    };
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        om_family(counters[i].name, "counter", NULL, counters[i].help);
        om_sample(counters[i].name, "_total", "", *(const uint64_t *)((const char *)m + counters[i].off));
    }
    om_family("memory_soft_limit_above_seconds", "counter", "seconds",
              "Time the charge spent above the soft limit, the ongoing spell included (stats.memory.soft_limit_above_ms).");
    printf("dpmalloc_memory_soft_limit_above_seconds_total %.9f\n", (double)m->soft_limit_above_ns / 1e9);
    om_family("memory_above_soft_limit", "gauge", NULL,
              "1 while the charge is above the soft limit (stats.memory.above_soft_limit).");
    om_sample("memory_above_soft_limit", "", "", m->above_soft_limit);
}

/* The heap profiler (prof.active, stats.prof.*): 0 without prof:true. */
static void om_prof(const prof_figures_t *p)
{
    om_family("prof_active", "gauge", NULL, "1 while the heap profiler samples (prof.active).");
    om_sample("prof_active", "", "", p->active);
    om_family("prof_samples", "counter", NULL, "Allocations the heap profiler sampled (stats.prof.samples_total).");
    om_sample("prof_samples", "_total", "", p->samples_total);
    om_family("prof_samples_live", "gauge", NULL, "Sampled blocks not freed yet (stats.prof.samples_live).");
    om_sample("prof_samples_live", "", "", p->samples_live);
    om_family("prof_samples_dropped", "counter", NULL,
              "Samples not recorded: the profile's tables were full (stats.prof.samples_dropped).");
    om_sample("prof_samples_dropped", "_total", "", p->samples_dropped);
}

static void print_openmetrics(const snap_t *s)
{
    om_family("build", "info", NULL, "Version of the dpmalloc library the process runs, and its front end (stats.front_end).");
    printf("dpmalloc_build_info{version=\"%s\",front_end=\"%s\"} 1\n", s->version,
           s->cpu_front_end ? "cpu" : "thread");
    static const struct {
        const char *name, *help;
        size_t off;
    } gauges[] = {
        {"allocated_bytes", "Bytes in blocks the application holds (stats.allocated).", offsetof(snap_t, allocated)},
        {"active_bytes", "Bytes of pages holding live blocks (stats.active).", offsetof(snap_t, active)},
        {"resident_bytes", "Active, dirty and muzzy pages and metadata: an upper bound of resident memory (stats.resident).",
         offsetof(snap_t, resident)},
        {"mapped_bytes", "Bytes of the arenas' segments and metadata (stats.mapped).", offsetof(snap_t, mapped)},
        {"retained_bytes", "Bytes of clean free pages, mapped but returned to the OS (stats.retained).",
         offsetof(snap_t, retained)},
        {"reserved_bytes", "Bytes of reserved segments, part of mapped (stats.reserved).", offsetof(snap_t, reserved)},
        {"metadata_bytes", "Bytes mapped for the allocator's own structures (stats.metadata).",
         offsetof(snap_t, metadata)},
    };
    for (size_t i = 0; i < sizeof(gauges) / sizeof(gauges[0]); i++) {
        om_family(gauges[i].name, "gauge", "bytes", gauges[i].help);
        om_sample(gauges[i].name, "", "", *(const uint64_t *)((const char *)s + gauges[i].off));
    }
    om_family("cache_bytes", "gauge", "bytes",
              "Bytes of free blocks held by each kind of cache (their sum is stats.tcache_bytes).");
    om_sample("cache_bytes", "", "cache=\"thread\"", s->thread_cache_bytes);
    om_sample("cache_bytes", "", "cache=\"cpu\"", s->cpu_cache_bytes);
    om_sample("cache_bytes", "", "cache=\"transfer\"", s->transfer_bytes);
    om_sample("cache_bytes", "", "cache=\"large\"", s->large_cache_bytes);
    om_sample("cache_bytes", "", "cache=\"typed\"", s->typed_cache_bytes);
    om_family("arenas", "gauge", NULL, "Arena slots in use (stats.narenas).");
    om_sample("arenas", "", "", s->narenas);
    om_family("thread_caches", "gauge", NULL, "Live threads' caches.");
    om_sample("thread_caches", "", "", s->nthread_caches);
    om_family("guarded_samples", "counter", NULL, "Blocks guard_sample has sampled so far (stats.guarded.total).");
    om_sample("guarded_samples", "_total", "", s->guarded_total);
    om_family("guarded_live", "gauge", NULL, "Sampled blocks live now (stats.guarded.live).");
    om_sample("guarded_live", "", "", s->guarded_live);
    om_memory(&s->mem);
    om_prof(&s->prof);

    om_family("type_live_bytes", "gauge", "bytes", "Bytes of live blocks of the type (typed allocation).");
    om_types(s, "type_live_bytes", "", 0);
    om_family("type_live_blocks", "gauge", NULL, "Live blocks of the type.");
    om_types(s, "type_live_blocks", "", 1);
    om_family("type_allocs", "counter", NULL, "Blocks allocated under the type's name.");
    om_types(s, "type_allocs", "_total", 2);
    om_family("type_frees", "counter", NULL, "Blocks of the type freed.");
    om_types(s, "type_frees", "_total", 3);

    om_per_arena(s, "arena_mapped_bytes", "gauge", "bytes", "Bytes of the arena's segments (stats.arenas.<i>.mapped).",
                 arena_mapped);
    om_per_arena(s, "arena_reserved_bytes", "gauge", "bytes", "Bytes of the arena's reserved segments.",
                 arena_reserved);
    om_per_arena(s, "arena_segments", "gauge", NULL, "Segments of the arena.", arena_nsegments);
    om_per_arena(s, "arena_threads", "gauge", NULL, "Threads bound to the arena (stats.arenas.<i>.nthreads).",
                 arena_nthreads);
    om_per_arena(s, "arena_thread_cache_bytes", "gauge", "bytes",
                 "Bytes in the caches of the live threads bound to the arena.", arena_thread_cache_bytes);
    om_family("arena_pages", "gauge", "pages",
              "Pages of the arena by state: active (live blocks), dirty, muzzy, clean (stats.arenas.<i>.p*).");
    for (unsigned i = 0; i < s->nexisting; i++) {
        const arena_row_t *o = &s->arenas[i];
        const char *names[] = {"active", "dirty", "muzzy", "clean"};
        uint64_t v[] = {o->pactive, o->pdirty, o->pmuzzy, o->pclean};
        for (int k = 0; k < 4; k++) {
            char labels[64];
            snprintf(labels, sizeof(labels), "arena=\"%u\",state=\"%s\"", o->index, names[k]);
            om_sample("arena_pages", "", labels, v[k]);
        }
    }
    om_family("arena_allocated_bytes", "gauge", "bytes",
              "Bytes of live blocks by kind, cached ones included (stats.arenas.<i>.small/large.allocated).");
    om_kinds(s, "arena_allocated_bytes", "", 0);
    om_family("arena_mallocs", "counter", NULL,
              "Blocks handed out by the arena: small ones by its bins (in batches to caches), large ones.");
    om_kinds(s, "arena_mallocs", "_total", 1);
    om_family("arena_frees", "counter", NULL, "Blocks returned to the arena's bins (small) or freed (large).");
    om_kinds(s, "arena_frees", "_total", 2);
    om_family("arena_requests", "counter", NULL, "Small allocations asked of the thread caches bound to the arena.");
    for (unsigned i = 0; i < s->nexisting; i++) {
        char small[64];
        snprintf(small, sizeof(small), "arena=\"%u\",kind=\"small\"", s->arenas[i].index);
        om_sample("arena_requests", "_total", small, s->arenas[i].nrequests_small);
    }
    om_per_arena(s, "arena_purge_passes", "counter", NULL, "Decay passes run on the arena.", arena_npurge_passes);
    om_family("arena_purged_pages", "counter", "pages",
              "Pages purged, lazily (MADV_FREE) or for good (stats.arenas.<i>.purged_lazy, purged).");
    for (unsigned i = 0; i < s->nexisting; i++) {
        char labels[64];
        snprintf(labels, sizeof(labels), "arena=\"%u\",mode=\"lazy\"", s->arenas[i].index);
        om_sample("arena_purged_pages", "_total", labels, s->arenas[i].npurged_lazy);
        snprintf(labels, sizeof(labels), "arena=\"%u\",mode=\"now\"", s->arenas[i].index);
        om_sample("arena_purged_pages", "_total", labels, s->arenas[i].npurged_now);
    }
    om_per_arena(s, "arena_page_searches", "counter", NULL, "Searches of the page heap for a free run.",
                 arena_nsearches);
    om_per_arena(s, "arena_page_search_hits", "counter", NULL, "Searches that found a free run.", arena_nsearch_hits);
    om_family("arena_lock_acquisitions", "counter", NULL, "Acquisitions of the arena's lock and of its bins' locks.");
    om_locks(s, "arena_lock_acquisitions", 0);
    om_family("arena_lock_waits", "counter", NULL, "Acquisitions that found the lock taken.");
    om_locks(s, "arena_lock_waits", 1);
    om_family("arena_lock_wait_seconds", "counter", "seconds", "Time spent waiting for the lock.");
    om_locks(s, "arena_lock_wait_seconds", 2);
    om_per_bin(s, "bin_mallocs", "counter", "Blocks handed out by the bin (stats.arenas.<i>.bins.<j>.nmalloc).",
               bin_nmalloc);
    om_per_bin(s, "bin_frees", "counter", "Blocks returned to the bin (stats.arenas.<i>.bins.<j>.ndalloc).",
               bin_nfree);
    om_per_bin(s, "bin_requests", "counter",
               "Allocations of the class asked of the arena's thread caches (stats.arenas.<i>.bins.<j>.nrequests).",
               bin_nrequests);
    om_per_bin(s, "bin_live_blocks", "gauge", "Live blocks of the bin, cached ones included (curregs).",
               bin_curregs);
    om_per_bin(s, "bin_slabs", "gauge", "Slabs the bin holds (curslabs).", bin_curslabs);
    om_per_bin(s, "bin_slabs_made", "counter", "Slabs the bin made (nslabs).", bin_nslabs);
    om_per_bin(s, "bin_fills", "counter", "Batched fills from the bin.", bin_nfills);
    om_per_bin(s, "bin_flushes", "counter", "Batched returns to the bin.", bin_nflushes);
    om_per_large(s, "large_mallocs", "counter", NULL,
                 "Large blocks of the class allocated (stats.arenas.<i>.lextents.<k>.nmalloc).", 0);
    om_per_large(s, "large_frees", "counter", NULL, "Large blocks of the class freed.", 1);
    om_per_large(s, "large_live_blocks", "gauge", NULL, "Live large blocks of the class (curlextents).", 2);
    om_per_large(s, "large_live_bytes", "gauge", "bytes", "Bytes of the live large blocks of the class.", 3);
    printf("# EOF\n");
}

/* ---- --watch ------------------------------------------------------------ */

static double rate(uint64_t now_v, uint64_t before, double dt)
{
    return now_v >= before ? (double)(now_v - before) / dt : 0.0;
}

static void print_rates(const snap_t *a, const snap_t *b, bool json)
{
    double dt = b->t - a->t;
    double mallocs = rate(b->nmalloc, a->nmalloc, dt), frees = rate(b->nfree, a->nfree, dt);
    double requests = rate(b->nrequests, a->nrequests, dt);
    double bytes = ((double)b->allocated - (double)a->allocated) / dt;
    double purged = rate(b->npurged, a->npurged, dt) * anchor.page;
    const mem_figures_t *ma = &a->mem, *mb = &b->mem;
    double refusals = rate(mb->limit_refusals, ma->limit_refusals, dt);
    double reclaims = rate(mb->limit_reclaims, ma->limit_reclaims, dt);
    double failures = rate(mb->limit_failures, ma->limit_failures, dt);
    double passes = rate(mb->soft_limit_passes, ma->soft_limit_passes, dt);
    double samples = rate(b->prof.samples_total, a->prof.samples_total, dt);
    double dropped = rate(b->prof.samples_dropped, a->prof.samples_dropped, dt);
    if (json) {
        printf("{\"interval_s\":%.3f,\"mallocs_per_s\":%.1f,\"frees_per_s\":%.1f,\"requests_per_s\":%.1f,"
               "\"allocated_bytes_per_s\":%.1f,\"purged_bytes_per_s\":%.1f,\"limit_refusals_per_s\":%.1f,"
               "\"limit_reclaims_per_s\":%.1f,\"limit_failures_per_s\":%.1f,\"soft_limit_passes_per_s\":%.1f,"
               "\"prof_samples_per_s\":%.1f,\"prof_samples_dropped_per_s\":%.1f,\"allocated\":%" PRIu64
               ",\"active\":%" PRIu64 ",\"resident\":%" PRIu64 ",\"mapped\":%" PRIu64 ",\"tcache_bytes\":%" PRIu64
               ",\"charged\":%" PRIu64 ",\"above_soft_limit\":%s,\"prof_samples_live\":%" PRIu64 "}\n",
               dt, mallocs, frees, requests, bytes, purged, refusals, reclaims, failures, passes, samples, dropped,
               b->allocated, b->active, b->resident, b->mapped, b->cache_bytes, mb->charged,
               mb->above_soft_limit ? "true" : "false", b->prof.samples_live);
    } else {
        printf("%10.1f %10.1f %11.1f %14.1f %12.1f %11.1f %11.1f %11.1f %11.1f %10.1f %12" PRIu64 " %12" PRIu64
               " %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %12" PRIu64 "\n",
               mallocs, frees, requests, bytes, purged, refusals, reclaims, failures, passes, samples, b->allocated,
               b->active, b->resident, b->mapped, b->cache_bytes, mb->charged);
    }
    fflush(stdout);
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- main --------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [--json | --openmetrics] [--watch SECONDS [--count N]] [--proc-mem] PID\n"
            "  prints the dpmalloc statistics of process PID, read from outside\n"
            "  (process_vm_readv: the same user or CAP_SYS_PTRACE, as for a debugger)\n"
            "  --json          JSON instead of text\n"
            "  --openmetrics   OpenMetrics text exposition (Prometheus)\n"
            "  --watch S       every S seconds, the rates of the counters and the gauges\n"
            "                  (text or, with --json, one JSON object per line)\n"
            "  --count N       with --watch: stop after N lines\n"
            "  --proc-mem      read through /proc/PID/mem, not process_vm_readv (which\n"
            "                  is tried first, then this, when it is missing or refused)\n",
            prog);
}

int main(int argc, char **argv)
{
    bool json = false, om = false;
    double watch = 0;
    long count = -1;
    const char *pid_arg = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        char *end;
        if (strcmp(a, "--json") == 0)
            json = true;
        else if (strcmp(a, "--openmetrics") == 0)
            om = true;
        else if (strcmp(a, "--proc-mem") == 0)
            use_proc_mem = true;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--watch") == 0 && i + 1 < argc) {
            watch = strtod(argv[++i], &end);
            if (*end != '\0' || !(watch >= 0.01 && watch <= 86400))
                die(EXIT_USAGE, "--watch wants seconds between 0.01 and 86400, not '%s'", argv[i]);
        } else if (strcmp(a, "--count") == 0 && i + 1 < argc) {
            count = strtol(argv[++i], &end, 10);
            if (*end != '\0' || count < 1)
                die(EXIT_USAGE, "--count wants a positive number, not '%s'", argv[i]);
        } else if (a[0] != '-' && pid_arg == NULL)
            pid_arg = a;
        else {
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (pid_arg == NULL) {
        usage(stderr);
        return EXIT_USAGE;
    }
    char *end;
    long p = strtol(pid_arg, &end, 10);
    if (*end != '\0' || p <= 0 || p > 0x3fffffff)
        die(EXIT_USAGE, "'%s' is not a process id", pid_arg);
    pid = (pid_t)p;
    if (json && om)
        die(EXIT_USAGE, "--json and --openmetrics exclude each other");
    if (om && watch > 0)
        die(EXIT_USAGE, "--watch prints rates as text or JSON; a scraper computes them from --openmetrics");
    if (count > 0 && watch == 0)
        die(EXIT_USAGE, "--count goes with --watch");
    signal(SIGPIPE, SIG_DFL);

    uintptr_t at = find_anchor();
    if (at == 0)
        die(EXIT_NOTDPM, "pid %d is not a dpmalloc process (no %s in the files it maps)", (int)pid,
            DPM_ANCHOR_SYMBOL);
    /* the head first (magic, layout, size: the same in every layout),
     * so that an anchor of another size is named a mismatch */
    struct {
        uint64_t magic;
        uint32_t layout, size;
    } head;
    _Static_assert(offsetof(dpm_anchor_t, size) + sizeof(uint32_t) == sizeof(head), "the anchor's head");
    int err = rread(at, &head, sizeof(head));
    if (err != 0)
        die_errno(err);
    if (head.magic != DPM_ANCHOR_MAGIC)
        die(EXIT_NOTDPM, "pid %d is not a dpmalloc process (%s in %s has no dpmalloc magic)", (int)pid,
            DPM_ANCHOR_SYMBOL, source_path);
    if (head.layout != DPM_ANCHOR_LAYOUT || head.size != sizeof(dpm_anchor_t))
        die(EXIT_MISMATCH,
            "pid %d: dpmalloc version mismatch: the process's library (%s) has anchor layout %u (%u bytes), "
            "this tool (dpmalloc %s) reads layout %u (%zu bytes); use the dpmalloc-stat built with its library",
            (int)pid, source_path, head.layout, head.size, DPMALLOC_VERSION, DPM_ANCHOR_LAYOUT,
            sizeof(dpm_anchor_t));
    err = rread(at, &anchor, sizeof(anchor));
    if (err != 0)
        die_errno(err);
    char theirs[sizeof(anchor.version) + 1];
    memcpy(theirs, anchor.version, sizeof(anchor.version));
    theirs[sizeof(anchor.version)] = '\0';
    if (anchor.abi != DPM_ANCHOR_ABI || anchor.page != PAGE || anchor.nlarge_stats != NLARGE_STATS)
        die(EXIT_MISMATCH,
            "pid %d: dpmalloc version mismatch: the process runs dpmalloc %s (%s, layout %u/%016" PRIx64
            "), this tool reads %s (layout %u/%016" PRIx64 "); use the dpmalloc-stat built with its library",
            (int)pid, theirs, source_path, anchor.layout, anchor.abi, DPMALLOC_VERSION, DPM_ANCHOR_LAYOUT,
            (uint64_t)DPM_ANCHOR_ABI);

    char offsets[64];
    snprintf(offsets, sizeof(offsets), "/proc/%d/timens_offsets", (int)pid);
    clock_skew = monotonic_offset(offsets) - monotonic_offset("/proc/self/timens_offsets");
    snap_t s;
    take(&s, at);
    if (watch == 0) {
        if (om)
            print_openmetrics(&s);
        else if (json)
            print_json(&s);
        else
            print_text(&s);
        snap_free(&s);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    if (!json)
        printf("%10s %10s %11s %14s %12s %11s %11s %11s %11s %10s %12s %12s %12s %12s %12s %12s\n", "mallocs/s",
               "frees/s", "requests/s", "alloc_bytes/s", "purged_B/s", "refusals/s", "reclaims/s", "failures/s",
               "soft_pass/s", "samples/s", "allocated", "active", "resident", "mapped", "cached", "charged");
    for (long n = 0; count < 0 || n < count; n++) {
        sleep_s(watch);
        snap_t next;
        take(&next, at);
        print_rates(&s, &next, json);
        snap_free(&s);
        s = next;
        if (ferror(stdout))   /* a full disk, a closed pipe: stop, as the one-shot modes do */
            return 1;
    }
    snap_free(&s);
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}
