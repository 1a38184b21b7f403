/* A progress bar on stderr for long commands (cp, read, write).
 *
 * Drawn only when stderr is a terminal, and only once the work has run for PROGRESS_DELAY seconds, so
 * short commands, pipes and logs never see it. Redrawn at most every PROGRESS_PERIOD seconds on one line
 * ("\r" + erase), and erased by cli_progress_end so the command's own output starts on a clean line.
 * Threading: one thread (the command's). Ownership: the label is borrowed for the bar's lifetime.
 */
#include <unistd.h>
#include "cli.h"

#define PROGRESS_DELAY 0.7
#define PROGRESS_PERIOD 0.1
#define PROGRESS_WIDTH 30

void cli_progress_begin(cli_progress *p, const char *label, uint64_t total) {
    p->enabled = isatty(STDERR_FILENO) == 1;
    p->drawn = false;
    p->label = label;
    p->total = total;
    p->start = cli_now();
    p->last_draw = 0;
}

void cli_progress_update(cli_progress *p, uint64_t done) {
    if (!p->enabled || p->total == 0)
        return;
    double now = cli_now();
    if (now - p->start < PROGRESS_DELAY || now - p->last_draw < PROGRESS_PERIOD)
        return;
    p->last_draw = now;
    double frac = done >= p->total ? 1.0 : (double)done / (double)p->total;
    int fill = (int)(frac * PROGRESS_WIDTH);
    char bar[PROGRESS_WIDTH + 1];
    for (int i = 0; i < PROGRESS_WIDTH; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[PROGRESS_WIDTH] = '\0';
    double rate = (double)done / (now - p->start) / 1e6;
    fprintf(stderr, "\r\033[K%s [%s] %5.1f%% %8.1f MB/s", p->label, bar, frac * 100.0, rate);
    fflush(stderr);
    p->drawn = true;
}

void cli_progress_end(cli_progress *p) {
    if (p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    p->drawn = false;
}
