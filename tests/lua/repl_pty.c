/*
 * repl_pty.c — tests the tide prompt as a user meets it: the program runs in a pseudo-terminal
 * and this driver types keys (Tab, arrows, Ctrl-C, Ctrl-D) and reads the screen output.
 *
 * usage: repl_pty /path/to/tide
 * Prints "repl_pty: N passed, N failed" and exits non-zero on a failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *tide_path;
static char home[256];
static int master = -1;
static pid_t child = -1;
static char out[1 << 16]; /* output since the last mark */
static size_t out_len;
static int passed, failed;
static double timeout_s = 20;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void check(bool ok, const char *what)
{
    if (ok) {
        passed++;
        return;
    }
    failed++;
    printf("FAIL %s\n--- output since the last step (escaped) ---\n", what);
    for (size_t i = 0; i < out_len; i++) {
        unsigned char c = (unsigned char)out[i];
        if (c == '\n' || (c >= 32 && c < 127))
            putchar(c);
        else
            printf("\\x%02x", c);
    }
    printf("\n---\n");
    fflush(stdout);
}

/* Reads what the program wrote for up to ms milliseconds; false at end of output. */
static bool pump(int ms)
{
    struct pollfd p = {.fd = master, .events = POLLIN};
    int r = poll(&p, 1, ms);
    if (r <= 0)
        return r == 0;
    char buf[4096];
    ssize_t n = read(master, buf, sizeof buf);
    if (n <= 0)
        return false;
    if (out_len + (size_t)n >= sizeof out) { /* keep the tail */
        size_t drop = out_len + (size_t)n - sizeof out / 2;
        memmove(out, out + drop, out_len - drop);
        out_len -= drop;
    }
    memcpy(out + out_len, buf, (size_t)n);
    out_len += (size_t)n;
    return true;
}

/* The output as the screen shows it: without bells, carriage returns and escape sequences
 * (bracketed paste mode, cursor movement). */
static size_t screen_text(char *dst)
{
    size_t n = 0;
    for (size_t i = 0; i < out_len; i++) {
        char c = out[i];
        if (c == '\x1b') {
            if (i + 1 < out_len && out[i + 1] == '[') {
                i += 2;
                while (i < out_len && !(out[i] >= '@' && out[i] <= '~'))
                    i++;
            } else {
                i++;
            }
            continue;
        }
        if (c == '\a' || c == '\r')
            continue;
        dst[n++] = c;
    }
    return n;
}

static bool seen(const char *needle)
{
    static char screen[sizeof out];
    size_t n = screen_text(screen);
    return memmem(screen, n, needle, strlen(needle)) != NULL;
}

/* Waits until the output since the last mark holds needle. */
static bool expect(const char *needle)
{
    double end = now() + timeout_s;
    while (!seen(needle)) {
        if (now() > end || !pump(50))
            return seen(needle);
    }
    return true;
}

static void mark(void)
{
    out_len = 0;
}

/* Waits as a user would until the program has been quiet for a moment (it shows a prompt,
 * or it is busy computing). */
static void wait_quiet(void)
{
    double end = now() + timeout_s;
    size_t before;
    do {
        before = out_len;
        pump(150);
    } while (out_len != before && now() < end);
}

static void type_keys(const char *keys)
{
    wait_quiet();
    mark();
    size_t n = strlen(keys);
    while (n > 0) {
        ssize_t w = write(master, keys, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        keys += w;
        n -= (size_t)w;
    }
}

/* Starts the program in a pseudo-terminal with HOME set to the test's folder. */
static void start(char *const argv[])
{
    struct winsize ws = {.ws_row = 40, .ws_col = 100};
    child = forkpty(&master, NULL, NULL, &ws);
    if (child < 0) {
        perror("forkpty");
        exit(2);
    }
    if (child == 0) {
        setenv("HOME", home, 1);
        setenv("TERM", "xterm", 1);
        unsetenv("INPUTRC");
        execv(tide_path, argv);
        _exit(127);
    }
    mark();
}

/* Waits for the program to exit; its exit status or -1. */
static int finish(void)
{
    double end = now() + timeout_s;
    int status;
    for (;;) {
        pump(20);
        pid_t r = waitpid(child, &status, WNOHANG);
        if (r == child)
            break;
        if (now() > end) {
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            close(master);
            return -1;
        }
    }
    while (pump(0))
        ;
    close(master);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void session_one(void)
{
    char *argv[] = {(char *)tide_path, NULL};
    start(argv);
    check(expect("Tab completes"), "the banner");
    check(expect("> "), "the prompt");

    type_keys("1 + 1\r");
    check(expect("\n2\n> "), "an expression's value is printed");

    type_keys("x = tide.ones(2, 3)\r");
    check(expect("> "), "an assignment prints nothing");
    check(!seen("tensor("), "an assignment prints nothing (no tensor)");

    type_keys("x\r");
    check(expect("tensor([[1., 1., 1.],\n        [1., 1., 1.]])"), "a tensor prints like PyTorch");

    type_keys("x * 2;\r");
    check(expect("> "), "a trailing ; suppresses the value");
    pump(200);
    check(!seen("tensor("), "a trailing ; suppresses the value (no tensor)");

    type_keys("x:size()\r");
    check(expect("{2, 3}"), "a small table prints as {2, 3}");

    type_keys("for i = 1, 2 do\r");
    check(expect(">> "), "an unfinished statement asks for more");
    type_keys("print(i * 10)\r");
    check(expect(">> "), "still unfinished");
    type_keys("end\r");
    check(expect("10\n20\n"), "the finished loop runs");

    type_keys("tide.tensor({\r");
    check(expect(">> "), "an unfinished expression asks for more");
    type_keys("7, 8})\r");
    check(expect("tensor([7, 8])"), "a multi-line expression is printed");

    type_keys("x + tide.ones(4)\r");
    check(expect("add: shapes [2, 3] and [4] cannot be broadcast"), "an error names op and shapes");
    check(expect("stack traceback"), "an error has a traceback");

    type_keys("x + 'a'\r");
    check(expect("must be a tensor or a number"), "a string operand is an error");
    type_keys("x[0]\r");
    check(expect("index 0 is out of range"), "a bad index is an error");
    type_keys("tide.zeros(1 << 40, 1 << 40)\r");
    check(expect("too large"), "a huge size is an error");

    type_keys("tide.zer\t");
    check(expect("tide.zeros"), "Tab completes a module field");
    type_keys("(3)\r");
    check(expect("tensor([0., 0., 0.])"), "the completed call runs");

    type_keys("x:resh\t");
    check(expect("x:reshape"), "Tab completes a tensor method");
    type_keys("(3, 2)\r");
    check(expect("tensor([[1., 1.],"), "the completed method runs");

    type_keys("x.sh\t");
    check(expect("x.shape"), "Tab completes a tensor attribute");
    type_keys("\r");
    check(expect("{2, 3}"), "the attribute prints");

    type_keys("tide.n\t\t");
    check(expect("tide.nn") && expect("tide.narrow"), "Tab Tab lists tide's lazy nn with the rest");
    type_keys("\x03");
    check(expect("> "), "Ctrl-C after the listing");
    type_keys("tide.op\t");
    check(expect("tide.optim"), "Tab completes a lazy module's name");
    type_keys("\x03");
    type_keys("tide.nn.Li\t");
    check(expect("tide.nn.Linear"), "Tab completes inside a lazy module (loading it)");
    type_keys("\r");
    check(expect("> "), "the completed class evaluates");

    type_keys("help(tide.matmul)\r");
    check(expect("tide.matmul(a, b)") && expect("matrix product"), "help(f) prints the entry");
    type_keys("help(x.reshape)\r");
    check(expect("tide.reshape(x, sizes...)"), "help(x.method) maps the method to its name");
    type_keys("help('matmul')\r");
    check(expect("tide.matmul(a, b)"), "help(name) finds the entry");
    type_keys("help(tide.nn.Linear)\r");
    check(expect("nn.Linear(in_features, out_features"), "help(class)");
    type_keys("help()\r");
    check(expect("optim ") && expect("data "), "help() lists the modules");
    type_keys("tide\r");
    check(expect("tide module (") && expect("help()"), "tide prints what it is");
    check(!seen("table: 0x"), "tide is not printed as an address");
    type_keys("tide.optim\r");
    check(expect("module tide.optim (") && expect("help(tide.optim)"),
          "a tide module prints a summary");
    type_keys("big = tide.arange(3000):totable()\r");
    type_keys("big\r");
    check(expect("{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ... (2987 more), 2997, 2998, 2999}"),
          "a 3000-element table prints its first and last entries");
    type_keys("tide.arange(3000):reshape(30, 100):totable()\r");
    check(expect("{{0, 1, 2,") && expect("... (17 more), {2700, 2701,"),
          "a nested 30 x 100 table prints shortened rows");
    check(!seen("table: 0x"), "long tables are not printed as addresses");

    type_keys("pri\t");
    check(expect("print"), "Tab completes a global");
    type_keys("('done')\r");
    check(expect("done\n"), "the completed global runs");

    type_keys("this is not lua\x03");
    check(expect("> "), "Ctrl-C clears the line");
    type_keys("6 * 7\r");
    check(expect("42"), "the prompt works after Ctrl-C");
    check(!seen("syntax error"), "the cleared line was not run");

    type_keys("for i = 1, 3 do\r");
    check(expect(">> "), "continuation before Ctrl-C");
    type_keys("\x03");
    check(expect("> "), "Ctrl-C drops an unfinished statement");
    type_keys("5 + 5\r");
    check(expect("10"), "the prompt works after dropping a statement");

    type_keys("while true do end\r");
    pump(300);
    type_keys("\x03");
    check(expect("interrupted!"), "Ctrl-C interrupts running code");
    type_keys("3 + 4\r");
    check(expect("7"), "the prompt works after an interruption");

    type_keys("local t = os.clock() while os.clock() - t < 0.2 do end\r");
    check(expect(" s)"), "a slow line reports its time");
    type_keys("1\r");
    check(expect("1\n"), "after timing");
    check(!seen(" s)"), "a fast line reports no time");

    type_keys("6 * 7\r");
    check(expect("42\n> "), "the last line before exit");
    type_keys("\x04");
    check(finish() == 0, "Ctrl-D exits with status 0");

    char path[512];
    snprintf(path, sizeof path, "%s/.tide_history", home);
    FILE *f = fopen(path, "r");
    check(f != NULL, "the history file exists");
    if (f) {
        char text[8192];
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = '\0';
        fclose(f);
        check(strstr(text, "x = tide.ones(2, 3)") != NULL, "the history holds the lines typed");
    }
}

static void session_two(void)
{
    char *argv[] = {(char *)tide_path, NULL};
    start(argv);
    check(expect("> "), "second session prompt");
    type_keys("\x1b[A");
    check(expect("6 * 7"), "the up arrow recalls the last session's line");
    type_keys("\r");
    check(expect("42\n> "), "the recalled line runs");
    type_keys("\x04");
    check(finish() == 0, "second session exits");
}

static void session_script(void)
{
    char script[512];
    snprintf(script, sizeof script, "%s/script.lua", home);
    FILE *f = fopen(script, "w");
    if (!f) {
        check(false, "writing the script");
        return;
    }
    fputs("y = tide.arange(3) * 2\nprint('args', ...)\nprint('arg0', arg[0] ~= nil, arg[1])\n", f);
    fclose(f);

    char *argv[] = {(char *)tide_path, "-i", script, NULL};
    start(argv);
    check(expect("> "), "tide -i runs the script, then prompts");
    check(seen("args"), "the script ran");
    type_keys("y\r");
    check(expect("tensor([0, 2, 4])"), "the script's globals are at the prompt");
    type_keys("\x04");
    check(finish() == 0, "tide -i exits");

    char *argv2[] = {(char *)tide_path, script, "a", "b", NULL};
    start(argv2);
    int rc = finish();
    check(rc == 0 && seen("args\ta\tb") && seen("arg0\ttrue\ta"),
          "tide script args sets ... and arg");

    char *argv3[] = {(char *)tide_path, "-e", "print(tide.eye(2):sum():item())", NULL};
    start(argv3);
    rc = finish();
    check(rc == 0 && seen("2.0"), "tide -e runs code");

    char *argv4[] = {(char *)tide_path, "-v", NULL};
    start(argv4);
    rc = finish();
    check(rc == 0 && seen("tide ") && seen("Lua 5.4"), "tide -v prints the version");

    char *argv5[] = {(char *)tide_path, "-e", "error('no')", NULL};
    start(argv5);
    rc = finish();
    check(rc == 1 && seen("no") && seen("stack traceback"), "an error exits 1 with a traceback");

    char *argv6[] = {(char *)tide_path, "-e", "local t = require 'tide'; print(t == tide)", NULL};
    start(argv6);
    rc = finish();
    check(rc == 0 && seen("true"), "require 'tide' returns the built-in module");

    char *argv7[] = {(char *)tide_path, "-x", NULL};
    start(argv7);
    rc = finish();
    check(rc == 1 && seen("usage"), "an unknown option prints the usage");

    const char *help_options[] = {"--help", "-h"};
    for (int i = 0; i < 2; i++) {
        char *argv8[] = {(char *)tide_path, (char *)help_options[i], NULL};
        start(argv8);
        rc = finish();
        check(rc == 0 && seen("usage: tide") && seen("--help") && !seen("unrecognized"),
              help_options[i]);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: repl_pty /path/to/tide\n");
        return 2;
    }
    tide_path = argv[1];
    snprintf(home, sizeof home, "/tmp/tide_repl_pty_%d", (int)getpid());
    mkdir(home, 0700);
    char path[512];
    snprintf(path, sizeof path, "%s/.tide_history", home);
    unlink(path);

    session_one();
    session_two();
    session_script();

    unlink(path);
    snprintf(path, sizeof path, "%s/script.lua", home);
    unlink(path);
    rmdir(home);
    printf("repl_pty: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
