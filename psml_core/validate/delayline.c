/*
 * psml delay line: forwards IPv4 packets between TUN devices after a fixed one-way delay.
 *
 * Used by `psml validate` where the kernel has no netem. Each --port names a network
 * namespace, a TUN device to create in it and the IPv4 address behind it; a packet read
 * from any port is written to the port that owns its destination address `delay` after it
 * was read. The delay is constant, so one FIFO holds every packet in delivery order.
 *
 * It stops by itself: after --max-seconds, on SIGTERM or SIGINT, when its standard input
 * closes (the parent died), or when the parent dies (PR_SET_PDEATHSIG). Its TUN devices are
 * not persistent: they vanish with the process. On exit it prints one line of counts and of
 * lateness (delivery time minus due time) to standard error.
 *
 * Jitter: with --rt PRIO it runs under SCHED_FIFO (kernel RT throttling still applies), so
 * that a busy machine does not delay its wake-ups by a scheduler tick; timer slack is 1 ns.
 *
 * Build: cc -O2 -o psml-delayline delayline.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#define MAX_PORTS 32
#define SLOT 2048           /* bytes per queued packet; the ports' MTU must be below */
#define RING (1u << 14)     /* queued packets at most; beyond, packets are dropped */
#define BATCH 256           /* packets read per port per wake-up */
#define HIST 20001          /* lateness histogram: 1 us bins up to 20 ms */

struct port {
    int fd;
    uint32_t addr; /* network order */
    char ifname[IFNAMSIZ];
};

struct entry {
    int64_t due;
    uint16_t len;
    uint8_t port;
};

static struct port ports[MAX_PORTS];
static int nports;
static struct entry ring[RING];
static unsigned char data[RING][SLOT];
static unsigned head, count;
static uint64_t hist[HIST];
static uint64_t late_over, forwarded, dropped_full, dropped_unknown, dropped_other, write_errors;
static int64_t late_max;
static volatile sig_atomic_t stop;

static void on_signal(int sig) { (void)sig; stop = 1; }

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what, const char *detail) {
    fprintf(stderr, "psml-delayline: %s: %s\n", what, detail);
    exit(2);
}

/* Create TUN device `ifname` inside the namespace at `nspath`; return its descriptor. */
static int open_tun(const char *nspath, const char *ifname, int home) {
    int ns = open(nspath, O_RDONLY | O_CLOEXEC);
    if (ns < 0) die(nspath, strerror(errno));
    if (setns(ns, CLONE_NEWNET) < 0) die("setns", strerror(errno));
    close(ns);
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) die("/dev/net/tun", strerror(errno));
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) die("TUNSETIFF", strerror(errno));
    if (setns(home, CLONE_NEWNET) < 0) die("setns back", strerror(errno));
    return fd;
}

static int find_port(uint32_t addr) {
    for (int i = 0; i < nports; i++)
        if (ports[i].addr == addr) return i;
    return -1;
}

static void deliver_due(int64_t now) {
    while (count && ring[head].due <= now) {
        struct entry *e = &ring[head];
        if (write(ports[e->port].fd, data[head], e->len) != (ssize_t)e->len) write_errors++;
        else forwarded++;
        int64_t late = (now_ns() - e->due) / 1000;
        if (late < 0) late = 0;
        if (late < HIST) hist[late]++;
        else late_over++;
        if (late > late_max) late_max = late;
        head = (head + 1) & (RING - 1);
        count--;
    }
}

static void read_port(int i, int64_t delay) {
    static unsigned char scratch[SLOT];
    for (int k = 0; k < BATCH; k++) {
        unsigned tail = (head + count) & (RING - 1);
        unsigned char *buf = count < RING ? data[tail] : scratch;
        ssize_t n = read(ports[i].fd, buf, SLOT);
        if (n < 0) return; /* EAGAIN: drained */
        int64_t t = now_ns();
        if (buf == scratch) { dropped_full++; continue; }
        if (n < 20 || (buf[0] >> 4) != 4) { dropped_other++; continue; } /* not IPv4 */
        uint32_t dst;
        memcpy(&dst, buf + 16, 4);
        int to = find_port(dst);
        if (to < 0) { dropped_unknown++; continue; }
        ring[tail].due = t + delay;
        ring[tail].len = (uint16_t)n;
        ring[tail].port = (uint8_t)to;
        count++;
    }
}

static uint64_t percentile(uint64_t total, double q) {
    uint64_t want = (uint64_t)(q * (double)total), seen = 0;
    for (int i = 0; i < HIST; i++) {
        seen += hist[i];
        if (seen > want) return (uint64_t)i;
    }
    return HIST;
}

int main(int argc, char **argv) {
    int64_t delay = -1;
    double max_s = 600;
    int rt = 0;
    int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (home < 0) die("/proc/self/ns/net", strerror(errno));
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--delay-us") && i + 1 < argc) {
            delay = (int64_t)(atof(argv[++i]) * 1000.0);
        } else if (!strcmp(argv[i], "--max-seconds") && i + 1 < argc) {
            max_s = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--rt") && i + 1 < argc) {
            rt = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--port") && i + 1 < argc) {
            /* NSPATH,IFNAME,A.B.C.D */
            char *spec = argv[++i], *ifname = strchr(spec, ','), *addr;
            if (!ifname || !(addr = strchr(ifname + 1, ','))) die("--port", "expected NSPATH,IFNAME,IPV4");
            if (nports == MAX_PORTS) die("--port", "too many ports");
            *ifname++ = 0;
            *addr++ = 0;
            struct in_addr a;
            if (inet_pton(AF_INET, addr, &a) != 1) die("--port address", addr);
            ports[nports].addr = a.s_addr;
            strncpy(ports[nports].ifname, ifname, IFNAMSIZ - 1);
            ports[nports].fd = open_tun(spec, ifname, home);
            nports++;
        } else {
            die("usage", "--delay-us US --port NSPATH,IFNAME,IPV4 [--port ...] [--max-seconds S] [--rt PRIO]");
        }
    }
    if (delay < 0 || nports < 2) die("usage", "need --delay-us and at least two --port");
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    prctl(PR_SET_TIMERSLACK, 1UL);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGPIPE, SIG_IGN);
    const char *sched = "normal";
    if (rt > 0) {
        struct sched_param sp = {.sched_priority = rt};
        sched = sched_setscheduler(0, SCHED_FIFO, &sp) == 0 ? "fifo" : "normal (SCHED_FIFO refused)";
    }
    printf("ready ports=%d delay_us=%.1f sched=%s\n", nports, delay / 1000.0, sched);
    fflush(stdout);

    struct pollfd pfd[MAX_PORTS + 1];
    for (int i = 0; i < nports; i++) pfd[i] = (struct pollfd){.fd = ports[i].fd, .events = POLLIN};
    pfd[nports] = (struct pollfd){.fd = 0, .events = POLLIN};
    int64_t deadline = now_ns() + (int64_t)(max_s * 1e9);
    while (!stop) {
        int64_t now = now_ns();
        if (now >= deadline) break;
        deliver_due(now);
        int64_t wait = deadline - now;
        if (count && ring[head].due - now < wait) wait = ring[head].due - now;
        if (wait > 100000000) wait = 100000000; /* look at `stop` at least every 100 ms */
        if (wait < 0) wait = 0;
        struct timespec ts = {.tv_sec = wait / 1000000000, .tv_nsec = wait % 1000000000};
        int n = ppoll(pfd, nports + 1, &ts, NULL);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("ppoll", strerror(errno));
        }
        if (pfd[nports].revents) {
            char c[64];
            if (read(0, c, sizeof c) <= 0) break; /* the parent closed our stdin */
        }
        for (int i = 0; i < nports; i++)
            if (pfd[i].revents & POLLIN) read_port(i, delay);
    }
    uint64_t total = 0;
    for (int i = 0; i < HIST; i++) total += hist[i];
    total += late_over;
    fprintf(stderr,
            "psml-delayline: forwarded %llu, dropped %llu (queue full %llu, no such address %llu), "
            "not IPv4 %llu, write errors %llu; lateness us p50 %llu p99 %llu p99.9 %llu max %lld\n",
            (unsigned long long)forwarded, (unsigned long long)(dropped_full + dropped_unknown),
            (unsigned long long)dropped_full, (unsigned long long)dropped_unknown,
            (unsigned long long)dropped_other, (unsigned long long)write_errors,
            (unsigned long long)percentile(total, 0.5), (unsigned long long)percentile(total, 0.99),
            (unsigned long long)percentile(total, 0.999), (long long)late_max);
    return 0;
}
