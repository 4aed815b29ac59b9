/*
 * r25_lowest_fd.c - the automatic background thread's open of
 * /proc/self/stat takes a program's "lowest free descriptor".
 *
 * POSIX open() returns the lowest free descriptor, and programs rely on
 * it to redirect a standard stream: close(2); open(log) reopens stderr
 * on the log file (log rotation on SIGHUP), close(0); open("/dev/null")
 * detaches stdin. A program that opens no file in any other thread may
 * do this safely. On c9d0540 the background thread, which dpmalloc now
 * starts on its own once the process has a second thread, opens
 * /proc/self/stat at every wake (os_process_threads): when that lands
 * between the program's close and open, /proc/self/stat takes fd 2, the
 * log gets fd 3, and stderr is left closed (or later reused by an
 * unrelated file, so error messages go into it).
 *
 * The program: one idle helper thread; the main thread reopens stderr on
 * /dev/null in a loop for up to 20 s and checks that it got fd 2.
 *
 * build: cc -O2 -Iinclude tests/review/r25_lowest_fd.c \
 *           build/libdpmalloc.a -pthread -o /tmp/r25_fd
 * run:   /tmp/r25_fd           (exit 0: always fd 2)
 * expected: "always got fd 2"; actual on c9d0540: "reopen #N got fd 4,
 * not 2" within 20 s in 5 of 5 runs (fd 3 is the dup of stdout); never
 * with
 * DPMALLOC_CONF=background_thread:false, on 2e0f49e or with glibc.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *idle(void *arg)
{
    (void)arg;
    char *volatile p = malloc(100000);
    free(p);
    pause();
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t t;
    pthread_create(&t, NULL, idle, NULL);
    int out = dup(1);
    time_t end = time(NULL) + (argc > 1 ? atoi(argv[1]) : 20);
    long i = 0;
    while (time(NULL) < end) {
        close(2);
        int fd = open("/dev/null", O_WRONLY);
        if (fd != 2) {
            dprintf(out, "reopen #%ld got fd %d, not 2 (FAIL)\n", i, fd);
            return 1;
        }
        i++;
    }
    dprintf(out, "always got fd 2 (%ld reopens)\n", i);
    return 0;
}
