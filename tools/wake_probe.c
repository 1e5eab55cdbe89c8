/* Where Linux queues a sleeping helper thread that its caller wakes, and how long the
 * helper then waits before it runs: the situation of Yota's pool (backends/llvm/pool.py)
 * at the first parallel job after the process rested.
 *
 *   cc -O2 -pthread tools/wake_probe.c -o /tmp/wake_probe && /tmp/wake_probe 0.12
 *
 * Each round the caller rests (the argument, in seconds), wakes the helper through a
 * futex and works 300 us, as a caller runs its own tiles; the helper works 300 us too,
 * then watches for the next round for 1 ms before it sleeps (the pool's IDLE_SPIN_NS).
 * Two ways, 40 rounds each:
 *   plain  the helper sleeps with its affinity as it is;
 *   away   before it sleeps the helper takes its caller's CPU out of its affinity and
 *          gives the old affinity back once woken (pool_ir._sleep_away, _come_back).
 * Printed per way: how many wakes queued the helper on the caller's CPU, and the time
 * from the wake to the helper running (quartiles, microseconds).
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 40

static atomic_int job, done, woke_cpu, caller_cpu, away;
static _Atomic double woke_at;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void work(double s) {
    double t = now();
    while (now() - t < s) {
    }
}

static void *helper(void *arg) {
    (void)arg;
    for (;;) {
        double t = now();
        while (!atomic_load(&job) && now() - t < 1e-3) {
        }
        cpu_set_t old, less;
        int pinned = 0;
        if (!atomic_load(&job) && atomic_load(&away) &&
            sched_getaffinity(0, sizeof old, &old) == 0) {
            less = old;
            CPU_CLR(atomic_load(&caller_cpu), &less);
            pinned = CPU_COUNT(&less) > 0 && sched_setaffinity(0, sizeof less, &less) == 0;
        }
        while (!atomic_load(&job))
            syscall(SYS_futex, &job, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
        woke_cpu = sched_getcpu();
        woke_at = now();
        if (pinned)
            sched_setaffinity(0, sizeof old, &old);
        work(300e-6);
        atomic_store(&job, 0);
        atomic_store(&done, 1);
    }
    return NULL;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void run(const char *name, int use_away, double rest) {
    double lat[ROUNDS];
    int same = 0;
    atomic_store(&away, use_away);
    for (int r = 0; r < ROUNDS; r++) {
        usleep((useconds_t)(rest * 1e6));
        woke_at = 0;
        done = 0;
        int me = sched_getcpu();
        caller_cpu = me;
        double t0 = now();
        atomic_store(&job, 1);
        syscall(SYS_futex, &job, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        work(300e-6);
        while (!atomic_load(&done)) {
        }
        lat[r] = (woke_at - t0) * 1e6;
        same += woke_cpu == me;
    }
    qsort(lat, ROUNDS, sizeof lat[0], cmp);
    printf("%-6s on the caller's CPU %2d/%d; wake to run, us: min %.0f, q1 %.0f, median %.0f, "
           "q3 %.0f, max %.0f\n", name, same, ROUNDS, lat[0], lat[ROUNDS / 4], lat[ROUNDS / 2],
           lat[3 * ROUNDS / 4], lat[ROUNDS - 1]);
}

int main(int argc, char **argv) {
    double rest = argc > 1 ? atof(argv[1]) : 0.12;
    pthread_t t;
    if (pthread_create(&t, NULL, helper, NULL) != 0)
        return 1;
    usleep(100000);
    printf("rest %.3f s between rounds\n", rest);
    run("plain", 0, rest);
    run("away", 1, rest);
    run("plain", 0, rest);
    run("away", 1, rest);
    return 0;
}
