/*
 * test_mutex.c - the elidable lock decides per acquisition and leaves the
 * decision with its caller.
 *
 * Proves: while the process has one thread an elidable acquisition takes
 * nothing (the pthread mutex stays free) and says so; a thread started
 * while such an elided acquisition is outstanding locks the mutex for real,
 * and its unlock releases exactly its own lock, not the other caller's
 * decision: afterwards the mutex is free, and the elided caller's unlock
 * leaves it free. Once the process has threads, acquisitions are real and
 * exclude each other (a counter bumped under the lock by four threads ends
 * exact). Plain mutex_lock is always real.
 */
#include "mutex.h"
#include "unit.h"

#include <pthread.h>

static dpm_mutex_t m = DPM_MUTEX_INITIALIZER;

static bool pthread_mutex_is_free(void)
{
    if (pthread_mutex_trylock(&m.lock) != 0)
        return false;
    pthread_mutex_unlock(&m.lock);
    return true;
}

static void *lock_and_unlock_once(void *arg)
{
    lock_elided_t held = mutex_lock_elidable(&m);
    *(bool *)arg = held;
    mutex_unlock_elidable(&m, held);
    return NULL;
}

static uint64_t counter;

static void *bump(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100000; i++) {
        lock_elided_t held = mutex_lock_elidable(&m);
        counter++;
        mutex_unlock_elidable(&m, held);
    }
    return NULL;
}

int main(void)
{
#ifdef DPM_HAVE_SINGLE_THREADED
    EXPECT_TRUE(process_single_threaded(), "a fresh process has one thread");
    lock_elided_t held = mutex_lock_elidable(&m);
    EXPECT_TRUE(held, "one thread: the acquisition is elided");
    EXPECT_TRUE(pthread_mutex_is_free(), "an elided acquisition takes nothing");

    /* A thread started while the elided acquisition is outstanding. */
    bool its_held = true;
    pthread_t t;
    pthread_create(&t, NULL, lock_and_unlock_once, &its_held);
    pthread_join(t, NULL);
    EXPECT_TRUE(!its_held, "a second thread's acquisition is real");
    EXPECT_TRUE(pthread_mutex_is_free(), "its unlock released its own lock");
    mutex_unlock_elidable(&m, held);
    EXPECT_TRUE(pthread_mutex_is_free(), "the elided caller's unlock touches nothing");
#endif
    pthread_t first;
    bool first_held = true;
    pthread_create(&first, NULL, lock_and_unlock_once, &first_held);
    pthread_join(first, NULL);
    lock_elided_t now = mutex_lock_elidable(&m);
    EXPECT_TRUE(!now, "once the process has had threads, acquisitions are real");
    EXPECT_TRUE(!pthread_mutex_is_free(), "held for real");
    mutex_unlock_elidable(&m, now);
    EXPECT_TRUE(pthread_mutex_is_free(), "released");

    pthread_t ts[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&ts[i], NULL, bump, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(ts[i], NULL);
    EXPECT_EQ_U(counter, 400000);

    mutex_lock(&m);
    EXPECT_TRUE(!pthread_mutex_is_free(), "mutex_lock is always real");
    mutex_unlock(&m);
    EXPECT_TRUE(pthread_mutex_is_free(), "and released");
    return unit_finish("test_mutex");
}
