/*
 * supervisor.c: the worker processes of rlgate --processes (supervisor.h).
 *
 * One thread, no handler: the signals it acts on are blocked and taken
 * with sigtimedwait, SIGCHLD among them, so a worker's end, a stop and a
 * restart that is due are handled in one loop, in order.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "supervisor.h"
#include "util.h"

#define BACKOFF_MIN_MS 100

struct worker {
	pid_t pid;                /* 0: none running */
	int64_t started_ms;
	int64_t backoff_ms;       /* the next wait after a short life */
	int64_t restart_at_ms;    /* pid 0: when to start one */
};

static struct {
	struct worker *w;
	int n;
	sigset_t blocked;         /* the signals taken, and the mask before */
	sigset_t old;
	int (*work)(void *ctx);
	void *ctx;
	pid_t self;
	unsigned long hups;       /* SIGHUPs taken (start) */
} sv;

static void start(int i, int64_t now_ms);
static void reaped(pid_t pid, int status, int64_t now_ms, bool stopping);
static int stop(void);
static void forward(int sig);
static int64_t mono_ms(void);

static int64_t
mono_ms(void)
{
	return rlg_mono_ns() / 1000000;
}

/* Worker i: a new process running work(ctx), with the signals as before. */
static void
start(int i, int64_t now_ms)
{
	pid_t pid = fork();

	if (pid < 0) {
		rlg_log("supervisor: cannot start worker %d: %s (again in"
		    " %lld ms)", i, strerror(errno),
		    (long long)sv.w[i].backoff_ms);
		sv.w[i].restart_at_ms = now_ms + sv.w[i].backoff_ms;
		return;
	}
	if (pid == 0) {
		sigset_t mask = sv.old;

		/* the supervisor's end is the worker's: stop gracefully */
		(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != sv.self)
			_exit(0);       /* it ended before the line above */
		/*
		 * The signals the supervisor passes on stay blocked until the
		 * worker takes them (server.c: its signal thread sigwaits for
		 * SIGHUP, SIGTERM and SIGINT, and it unblocks SIGUSR1 once
		 * its handler is in place): one that comes while the worker
		 * starts waits for it, where the default action would end it.
		 */
		sigaddset(&mask, SIGHUP);
		sigaddset(&mask, SIGTERM);
		sigaddset(&mask, SIGINT);
		sigaddset(&mask, SIGUSR1);
		sigprocmask(SIG_SETMASK, &mask, NULL);
		/*
		 * A worker started after a SIGHUP reloads once it takes
		 * signals: the file may have changed since the configuration
		 * it inherits was read, and a SIGHUP that came while its slot
		 * was empty (or its predecessor dying) reached no process.
		 * To the process, not this thread: its signal thread takes it.
		 */
		if (sv.hups > 0)
			(void)kill(getpid(), SIGHUP);
		exit(sv.work(sv.ctx));
	}
	sv.w[i].pid = pid;
	sv.w[i].started_ms = now_ms;
}

/* A worker ended: logged, and its restart scheduled unless stopping. */
static void
reaped(pid_t pid, int status, int64_t now_ms, bool stopping)
{
	char how[64];
	int i;
	int64_t lived;

	for (i = 0; i < sv.n && sv.w[i].pid != pid; i++)
		;
	if (i == sv.n)
		return;
	sv.w[i].pid = 0;
	if (stopping)
		return;
	if (WIFSIGNALED(status))
		snprintf(how, sizeof how, "was killed by signal %d (%s)",
		    WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(how, sizeof how, "exited with status %d",
		    WEXITSTATUS(status));
	lived = now_ms - sv.w[i].started_ms;
	if (lived >= RLG_SUPERVISOR_STEADY_MS)
		sv.w[i].backoff_ms = BACKOFF_MIN_MS;
	sv.w[i].restart_at_ms = now_ms + sv.w[i].backoff_ms;
	rlg_log("supervisor: worker %ld %s after %lld ms: starting another in"
	    " %lld ms", (long)pid, how, (long long)lived,
	    (long long)sv.w[i].backoff_ms);
	sv.w[i].backoff_ms *= 2;
	if (sv.w[i].backoff_ms > RLG_SUPERVISOR_BACKOFF_MAX_MS)
		sv.w[i].backoff_ms = RLG_SUPERVISOR_BACKOFF_MAX_MS;
}

static void
forward(int sig)
{
	int i;

	for (i = 0; i < sv.n; i++)
		if (sv.w[i].pid > 0)
			(void)kill(sv.w[i].pid, sig);
}

/*
 * SIGTERM to every worker (each finishes what it is answering), then
 * waits for them; SIGKILL for those left after RLG_SUPERVISOR_STOP_MS.
 */
static int
stop(void)
{
	int64_t deadline = mono_ms() + RLG_SUPERVISOR_STOP_MS;
	struct timespec ts;
	siginfo_t info;
	int i, left, status;
	pid_t pid;

	forward(SIGTERM);
	for (;;) {
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
			reaped(pid, status, mono_ms(), true);
		for (left = 0, i = 0; i < sv.n; i++)
			left += sv.w[i].pid > 0;
		if (left == 0)
			break;
		if (mono_ms() >= deadline) {
			rlg_log("supervisor: %d worker%s still running after %d"
			    " ms: killed", left, left == 1 ? "" : "s",
			    RLG_SUPERVISOR_STOP_MS);
			forward(SIGKILL);
			deadline = INT64_MAX;
		}
		ts.tv_sec = 0;
		ts.tv_nsec = 50L * 1000000;
		(void)sigtimedwait(&sv.blocked, &info, &ts);
	}
	rlg_log("supervisor: stopped");
	return 0;
}

int
rlg_supervise(int nprocs, int (*work)(void *ctx), void *ctx)
{
	struct timespec ts;
	siginfo_t info;
	int64_t now, wait_ms;
	int i, sig, status;
	pid_t pid;

	sv.n = nprocs;
	sv.work = work;
	sv.ctx = ctx;
	sv.self = getpid();
	sv.w = rlg_xcalloc((size_t)nprocs, sizeof *sv.w);
	sigemptyset(&sv.blocked);
	sigaddset(&sv.blocked, SIGTERM);
	sigaddset(&sv.blocked, SIGINT);
	sigaddset(&sv.blocked, SIGHUP);
	sigaddset(&sv.blocked, SIGUSR1);
	sigaddset(&sv.blocked, SIGCHLD);
	sigprocmask(SIG_BLOCK, &sv.blocked, &sv.old);
	now = mono_ms();
	for (i = 0; i < nprocs; i++) {
		sv.w[i].backoff_ms = BACKOFF_MIN_MS;
		start(i, now);
	}
	rlg_log("supervisor: %d worker process%s started (SIGTERM stops"
	    " them, SIGHUP reloads them, SIGUSR1 reopens the logs)", nprocs,
	    nprocs == 1 ? "" : "es");
	for (;;) {
		now = mono_ms();
		wait_ms = 1000;
		for (i = 0; i < sv.n; i++) {
			if (sv.w[i].pid != 0)
				continue;
			if (sv.w[i].restart_at_ms <= now)
				start(i, now);
			else if (sv.w[i].restart_at_ms - now < wait_ms)
				wait_ms = sv.w[i].restart_at_ms - now;
		}
		ts.tv_sec = wait_ms / 1000;
		ts.tv_nsec = (wait_ms % 1000) * 1000000;
		sig = sigtimedwait(&sv.blocked, &info, &ts);
		switch (sig) {
		case SIGTERM:
		case SIGINT:
			return stop();
		case SIGHUP:
			sv.hups++;
			forward(SIGHUP);
			break;
		case SIGUSR1:
			rlg_log_reopen(SIGUSR1);
			forward(SIGUSR1);
			break;
		default:        /* SIGCHLD, or the wait's end */
			break;
		}
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
			reaped(pid, status, mono_ms(), false);
	}
}
