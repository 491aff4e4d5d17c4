/*
 * A weft step as a WASI command (preview 1), in plain C with no JSON library.
 *
 * Input  (stdin):  {"text": "...", "report": true?}   other members are ignored
 * Output (stdout): {"reversed": "...", "length": N, "words": N,
 *                   "context": {"run_id": ..., "step": ..., "attempt": N,
 *                               "idempotency_key": ..., "deadline_ms": N}}
 *                  With "report": true, the same output in weft's `$weft`
 *                  envelope, with the reversed text as an artifact
 *                  (reversed.txt) and a status update with data:
 *                  {"$weft": {"output": ..., "artifacts": [...], "progress": [...]}}
 * Logs   (stderr): one line per log message.
 * Errors:          a message on stderr and an exit status: 65 for bad input
 *                  (a permanent failure: weft's retry policies do not retry
 *                  it), 1 for anything else (retried when a policy says so).
 *
 * The text is reversed by Unicode code point (not by byte), so UTF-8 stays
 * valid. The step's context comes from the WEFT_* environment variables.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INPUT (16u << 20)

/* Exit statuses: bad input is permanent (65, EX_DATAERR), the rest may pass. */
#define EXIT_BAD_INPUT 65
#define EXIT_FAILURE_MAY_PASS 1

static _Noreturn void vdie(int status, const char *fmt, va_list ap) {
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    exit(status);
}

/* The input is wrong: no retry helps. */
static _Noreturn void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vdie(EXIT_BAD_INPUT, fmt, ap);
}

/* The host or the machine failed us (memory, I/O): a retry may help. */
static _Noreturn void fail_io(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vdie(EXIT_FAILURE_MAY_PASS, fmt, ap);
}

/* ---- a growable byte buffer ---- */
typedef struct { char *p; size_t len, cap; } buf;

static void put(buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        if (!(b->p = realloc(b->p, cap))) fail_io("out of memory");
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}
static void putc_(buf *b, char c) { put(b, &c, 1); }

static void put_utf8(buf *b, unsigned long c) {
    char s[4];
    if (c < 0x80) { s[0] = (char)c; put(b, s, 1); }
    else if (c < 0x800) { s[0] = (char)(0xC0 | c >> 6); s[1] = (char)(0x80 | (c & 0x3F)); put(b, s, 2); }
    else if (c < 0x10000) {
        s[0] = (char)(0xE0 | c >> 12); s[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        s[2] = (char)(0x80 | (c & 0x3F)); put(b, s, 3);
    } else {
        s[0] = (char)(0xF0 | c >> 18); s[1] = (char)(0x80 | ((c >> 12) & 0x3F));
        s[2] = (char)(0x80 | ((c >> 6) & 0x3F)); s[3] = (char)(0x80 | (c & 0x3F)); put(b, s, 4);
    }
}

/* Appends s as a JSON string literal (quotes included). */
static void put_json_string(buf *b, const char *s, size_t n) {
    putc_(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': put(b, "\\\"", 2); break;
        case '\\': put(b, "\\\\", 2); break;
        case '\n': put(b, "\\n", 2); break;
        case '\r': put(b, "\\r", 2); break;
        case '\t': put(b, "\\t", 2); break;
        default:
            if (c < 0x20 || c == 0x7F) {
                char esc[8];
                snprintf(esc, sizeof esc, "\\u%04x", c);
                put(b, esc, 6);
            } else {
                putc_(b, (char)c);
            }
        }
    }
    putc_(b, '"');
}

/* ---- a tiny JSON reader: just enough to find one string member ---- */
static const char *begin, *p, *end;

static void ws(void) { while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++; }

static void expect(char c) {
    ws();
    if (p >= end || *p != c) fail("input is not valid JSON: expected '%c' at byte %ld", c, (long)(p - begin));
    p++;
}

static long hex4(void) {
    if (end - p < 4) fail("input is not valid JSON: short \\u escape");
    long v = 0;
    for (int i = 0; i < 4; i++, p++) {
        int c = (unsigned char)*p;
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else fail("input is not valid JSON: bad \\u escape");
    }
    return v;
}

/* Reads a string literal at p; decodes it into out when out is not NULL. */
static void string(buf *out) {
    expect('"');
    for (;;) {
        if (p >= end) fail("input is not valid JSON: unterminated string");
        unsigned char c = (unsigned char)*p++;
        if (c == '"') return;
        if (c < 0x20) fail("input is not valid JSON: control character in string");
        if (c != '\\') { if (out) putc_(out, (char)c); continue; }
        if (p >= end) fail("input is not valid JSON: unterminated string");
        char e = *p++, lit = 0;
        switch (e) {
        case '"': case '\\': case '/': lit = e; break;
        case 'b': lit = '\b'; break;
        case 'f': lit = '\f'; break;
        case 'n': lit = '\n'; break;
        case 'r': lit = '\r'; break;
        case 't': lit = '\t'; break;
        case 'u': {
            long cp = hex4();
            if (cp >= 0xD800 && cp < 0xDC00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                const char *save = p;
                p += 2;
                long lo = hex4();
                if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else p = save; /* not a pair: the high half is lone */
            }
            if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD; /* lone surrogate */
            if (out) put_utf8(out, (unsigned long)cp);
            continue;
        }
        default: fail("input is not valid JSON: bad escape '\\%c'", e);
        }
        if (out) putc_(out, lit);
    }
}

static void value(int depth);

static void members(char close, int depth, int keyed) {
    ws();
    if (p < end && *p == close) { p++; return; }
    for (;;) {
        if (keyed) { string(NULL); expect(':'); }
        value(depth + 1);
        ws();
        if (p < end && *p == ',') { p++; continue; }
        expect(close);
        return;
    }
}

/* Skips any JSON value. */
static void value(int depth) {
    if (depth > 64) fail("input is nested too deeply");
    ws();
    if (p >= end) fail("input is not valid JSON: unexpected end");
    if (*p == '"') string(NULL);
    else if (*p == '{') { p++; members('}', depth, 1); }
    else if (*p == '[') { p++; members(']', depth, 0); }
    else {
        const char *start = p;
        while (p < end && (isalnum((unsigned char)*p) || *p == '-' || *p == '+' || *p == '.')) p++;
        if (p == start) fail("input is not valid JSON: unexpected '%c'", *p);
    }
}

/* ---- the step ---- */
static const char *env(const char *name) {
    const char *v = getenv(name);
    return v ? v : "";
}

int main(void) {
    /* Read all of stdin. */
    buf in = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) {
        put(&in, chunk, n);
        if (in.len > MAX_INPUT) fail("input is larger than %u bytes", MAX_INPUT);
    }
    if (ferror(stdin)) fail_io("cannot read stdin");

    /* Find "text" in the top-level object. */
    begin = p = in.p ? in.p : "";
    end = p + in.len;
    buf text = {0};
    int found = 0, report = 0;
    expect('{');
    ws();
    if (p < end && *p == '}') p++;
    else for (;;) {
        buf key = {0};
        string(&key);
        expect(':');
        ws();
        if (key.p && strcmp(key.p, "text") == 0 && key.len == 4) {
            if (p >= end || *p != '"') fail("\"text\" must be a string");
            text.len = 0;
            string(&text);
            found = 1;
        } else if (key.p && strcmp(key.p, "report") == 0 && key.len == 6 && end - p >= 4 && strncmp(p, "true", 4) == 0) {
            p += 4;
            report = 1;
        } else {
            value(1);
        }
        free(key.p);
        ws();
        if (p < end && *p == ',') { p++; continue; }
        expect('}');
        break;
    }
    ws();
    if (p != end) fail("input is not valid JSON: trailing data");
    if (!found) fail("input must be an object with a string member \"text\"");

    /* Reverse by code point, counting code points and words. */
    buf rev = {0};
    put(&rev, "", 0);
    size_t length = 0, words = 0;
    int in_word = 0;
    for (size_t i = 0; i < text.len; i++) {
        unsigned char c = (unsigned char)text.p[i];
        if ((c & 0xC0) != 0x80) length++;
        int space = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
        if (!space && !in_word) words++;
        in_word = !space;
    }
    for (size_t j = text.len; j > 0;) {
        size_t k = j - 1;
        while (k > 0 && ((unsigned char)text.p[k] & 0xC0) == 0x80) k--;
        put(&rev, text.p + k, j - k);
        j = k;
    }
    fprintf(stderr, "reversing %zu code points (%zu words) for step %s\n", length, words, env("WEFT_STEP"));

    /* Write the output. */
    buf out = {0};
    put(&out, "{\"reversed\":", 12);
    put_json_string(&out, rev.p, rev.len);
    char num[96];
    snprintf(num, sizeof num, ",\"length\":%zu,\"words\":%zu,\"context\":{\"run_id\":", length, words);
    put(&out, num, strlen(num));
    put_json_string(&out, env("WEFT_RUN_ID"), strlen(env("WEFT_RUN_ID")));
    put(&out, ",\"step\":", 8);
    put_json_string(&out, env("WEFT_STEP"), strlen(env("WEFT_STEP")));
    snprintf(num, sizeof num, ",\"attempt\":%lu,\"idempotency_key\":", strtoul(env("WEFT_ATTEMPT"), NULL, 10));
    put(&out, num, strlen(num));
    put_json_string(&out, env("WEFT_IDEMPOTENCY_KEY"), strlen(env("WEFT_IDEMPOTENCY_KEY")));
    snprintf(num, sizeof num, ",\"deadline_ms\":%llu}}", strtoull(env("WEFT_DEADLINE_MS"), NULL, 10));
    put(&out, num, strlen(num));
    if (report) {
        /* The envelope: the output, the reversed text as an artifact, and
           a status update with data. */
        buf env_out = {0};
        put(&env_out, "{\"$weft\":{\"output\":", 19);
        put(&env_out, out.p, out.len);
        put(&env_out, ",\"artifacts\":[{\"name\":\"reversed.txt\",\"mime\":\"text/plain\",\"text\":", 64);
        put_json_string(&env_out, rev.p, rev.len);
        put(&env_out, "}],\"progress\":[{\"message\":\"reversed\",\"data\":", 44);
        snprintf(num, sizeof num, "{\"code_points\":%zu}", length);
        put(&env_out, num, strlen(num));
        put(&env_out, "}]}}", 4);
        out = env_out;
    }
    put(&out, "\n", 1);
    if (fwrite(out.p, 1, out.len, stdout) != out.len || fflush(stdout) != 0) fail_io("cannot write stdout");
    return 0;
}
