/*
 * secure_env.c - helper of run_secure_env.sh: prints whether the kernel
 * marked this process secure (AT_SECURE: setuid, setgid or file
 * capabilities), its real and effective ids, and opt.narenas as dpmalloc
 * read it, so the script can tell whether DPMALLOC_CONF was applied.
 * Linked with dpmalloc_static, as a program linking dpmalloc would be.
 */
#include <dpmalloc.h>
#include <stdio.h>
#include <sys/auxv.h>
#include <unistd.h>

int main(void)
{
    unsigned narenas;
    size_t len = sizeof narenas;
    if (dpm_ctl("opt.narenas", &narenas, &len, NULL, 0) != 0) {
        fprintf(stderr, "secure_env: dpm_ctl(\"opt.narenas\") failed\n");
        return 2;
    }
    printf("at_secure=%lu uid=%u euid=%u gid=%u egid=%u narenas=%u\n", getauxval(AT_SECURE),
           (unsigned)getuid(), (unsigned)geteuid(), (unsigned)getgid(), (unsigned)getegid(),
           narenas);
    return 0;
}
