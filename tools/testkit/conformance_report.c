// SPDX-License-Identifier: MIT
/* The conformance results as text: the tables on stdout, and the Markdown, JUnit XML and JSON
 * files. */
#include "tk_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *outcome_word(tk_outcome o)
{
    return o == TK_PASS ? "pass" : o == TK_FAIL ? "FAIL" : "skip";
}

static void ratio_text(const tk_result *r, char *buf, size_t size)
{
    if (r->outcome == TK_SKIP || (r->ratio == 0 && r->outcome == TK_FAIL))
        snprintf(buf, size, "-");
    else
        snprintf(buf, size, "%.3f%s", r->ratio, r->sampled ? "*" : "");
}

void tk_print_tables(const tk_run *run, FILE *f)
{
    for (int b = 0; b < run->n_backends; b++) {
        const tk_backend_run *br = &run->backends[b];
        if (!br->available) {
            fprintf(f, "== %s: skipped, %s ==\n", br->name, br->reason);
            fprintf(f, "%s: 0 passed, 0 failed, %lld skipped\n\n", br->name,
                    (long long)br->skipped);
            continue;
        }
        fprintf(f, "== %s: %s ==\n", br->name, br->device);
        bool header = false;
        for (int64_t c = 0; c < run->n_cases; c++) {
            const tk_result *r = &br->results[c];
            if (!run->opt->verbose && r->outcome == TK_PASS)
                continue;
            if (!header) {
                fprintf(f, "%-62s %-6s %-9s %s\n", "case", "result", "err/tol", "detail");
                header = true;
            }
            char ratio[32];
            ratio_text(r, ratio, sizeof ratio);
            fprintf(f, "%-62s %-6s %-9s %s\n", run->cases[c].name, outcome_word(r->outcome), ratio,
                    r->detail);
        }
        if (header)
            fprintf(f,
                    "(err/tol: worst error over tolerance, 1 = at the limit; * = sampled rows)\n");
        fprintf(f, "%s: %lld passed, %lld failed, %lld skipped\n\n", br->name,
                (long long)br->passed, (long long)br->failed, (long long)br->skipped);
    }
}

/* ---- Markdown ---- */

static void md_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", f);
        else if (*s == '\n')
            fputc(' ', f);
        else
            fputc(*s, f);
    }
}

static void md_num(FILE *f, double x, bool present)
{
    if (present)
        fprintf(f, " %.3g |", x);
    else
        fputs(" |", f);
}

bool tk_write_markdown(const tk_run *run, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    const fa_conformance_options *o = run->opt;
    fprintf(f, "# flashattn conformance\n\n");
    fprintf(f, "flashattn %s, %s run, seed %llu, %lld cases, %.1f s.", fa_version_string(),
            o->full ? "full" : "quick", (unsigned long long)o->seed, (long long)run->n_cases,
            run->seconds);
    if (o->shard_count > 1)
        fprintf(f, " Shard %d of %d (program groups %d, %d + %d, ...).", o->shard_index,
                o->shard_count, o->shard_index, o->shard_index, o->shard_count);
    if (o->filter)
        fprintf(f, " Filter: `%s`.", o->filter);
    fprintf(f, "\n\n");
    fprintf(f, "Each output is compared with a float64 reference computed from the inputs as "
               "rounded to their dtype. Tolerance: max abs error <= k x (max abs error of a "
               "same-precision naive implementation) + 1e-5, k = 2 for O, 3 for dQ, dK, dV; LSE "
               "within 1e-3 relative. Rows marked * were checked on sampled rows (large cases). "
               "Buffers carry NaN-poisoned guards: unwritten outputs, overwritten guards and "
               "modified inputs fail.\n\n");
    fprintf(f, "| backend | device | passed | failed | skipped |\n|---|---|---|---|---|\n");
    for (int b = 0; b < run->n_backends; b++) {
        const tk_backend_run *br = &run->backends[b];
        fprintf(f, "| %s | ", br->name);
        md_text(f, br->available ? br->device : br->reason);
        fprintf(f, " | %lld | %lld | %lld |\n", (long long)br->passed, (long long)br->failed,
                (long long)br->skipped);
    }
    for (int b = 0; b < run->n_backends; b++) {
        const tk_backend_run *br = &run->backends[b];
        fprintf(f, "\n## %s\n\n", br->name);
        if (!br->available) {
            fprintf(f, "Skipped, all %lld cases: ", (long long)br->skipped);
            md_text(f, br->reason);
            fprintf(f, "\n");
            continue;
        }
        fprintf(f, "| case | result | err/tol | O err | LSE rel err | dQ err | dK err | dV err "
                   "| time (s) | detail |\n|---|---|---|---|---|---|---|---|---|---|\n");
        for (int64_t c = 0; c < run->n_cases; c++) {
            const tk_result *r = &br->results[c];
            const tk_case *tc = &run->cases[c];
            bool cmp = r->outcome != TK_SKIP && r->tol_o > 0;
            bool bwd = cmp && tc->backward;
            char ratio[32];
            ratio_text(r, ratio, sizeof ratio);
            fprintf(f, "| %s | %s | %s |", tc->name, outcome_word(r->outcome), ratio);
            md_num(f, r->err_o, cmp);
            md_num(f, r->err_lse, cmp);
            md_num(f, r->err_dq, bwd);
            md_num(f, r->err_dk, bwd);
            md_num(f, r->err_dv, bwd);
            fprintf(f, " %.3f | ", r->seconds);
            md_text(f, r->detail);
            fprintf(f, " |\n");
        }
    }
    int64_t passed = 0, failed = 0, skipped = 0;
    for (int b = 0; b < run->n_backends; b++) {
        passed += run->backends[b].passed;
        failed += run->backends[b].failed;
        skipped += run->backends[b].skipped;
    }
    fprintf(f, "\n%lld passed, %lld failed, %lld skipped\n", (long long)passed, (long long)failed,
            (long long)skipped);
    return fclose(f) == 0;
}

/* ---- JUnit XML ---- */

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&apos;", f);
            break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t')
                fputc(*s, f);
            else
                fputc(' ', f);
        }
    }
}

/* One <property> of a testsuite's <properties>. */
static void junit_property(FILE *f, const char *name, const char *value)
{
    fprintf(f, "      <property name=\"%s\" value=\"", name);
    xml_text(f, value);
    fprintf(f, "\"/>\n");
}

/* JUnit XML: one testsuite per backend with its library version, device and driver, run mode
 * and seed as properties; a wrong result is a <failure> (its text names the worst element), a
 * call that returned an error status an <error>, a case the backend cannot run <skipped>. */
bool tk_write_junit(const tk_run *run, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    int64_t passed = 0, failed = 0, skipped = 0, errors = 0;
    for (int b = 0; b < run->n_backends; b++) {
        passed += run->backends[b].passed;
        failed += run->backends[b].failed;
        skipped += run->backends[b].skipped;
        for (int64_t c = 0; c < run->n_cases; c++)
            errors +=
                run->backends[b].results[c].outcome == TK_FAIL && run->backends[b].results[c].error;
    }
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f,
            "<testsuites name=\"flashattn conformance\" tests=\"%lld\" failures=\"%lld\" "
            "errors=\"%lld\" skipped=\"%lld\" time=\"%.3f\">\n",
            (long long)(passed + failed + skipped), (long long)(failed - errors), (long long)errors,
            (long long)skipped, run->seconds);
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)run->opt->seed);
    for (int b = 0; b < run->n_backends; b++) {
        const tk_backend_run *br = &run->backends[b];
        double t = 0;
        int64_t suite_errors = 0;
        for (int64_t c = 0; c < run->n_cases; c++) {
            t += br->results[c].seconds;
            suite_errors += br->results[c].outcome == TK_FAIL && br->results[c].error;
        }
        fprintf(f,
                "  <testsuite name=\"conformance.%s\" tests=\"%lld\" failures=\"%lld\" "
                "errors=\"%lld\" skipped=\"%lld\" time=\"%.3f\">\n    <properties>\n",
                br->name, (long long)run->n_cases, (long long)(br->failed - suite_errors),
                (long long)suite_errors, (long long)br->skipped, t);
        junit_property(f, "library", fa_version_string());
        junit_property(f, "backend", br->name);
        junit_property(f, "device", br->available ? br->device : br->reason);
        junit_property(f, "matrix", run->opt->full ? "full" : "quick");
        junit_property(f, "seed", seed);
        fprintf(f, "    </properties>\n");
        for (int64_t c = 0; c < run->n_cases; c++) {
            const tk_result *r = &br->results[c];
            fprintf(f, "    <testcase classname=\"conformance.%s\" name=\"", br->name);
            xml_text(f, run->cases[c].name);
            fprintf(f, "\" time=\"%.3f\"", r->seconds);
            if (r->outcome == TK_PASS) {
                fprintf(f, "/>\n");
                continue;
            }
            const char *tag = r->outcome == TK_SKIP ? "skipped" : r->error ? "error" : "failure";
            fprintf(f, ">\n      <%s message=\"", tag);
            xml_text(f, r->detail);
            if (r->outcome == TK_SKIP) {
                fprintf(f, "\"/>\n    </testcase>\n");
                continue;
            }
            fprintf(f, "\">");
            xml_text(f, r->detail);
            fprintf(f, "</%s>\n    </testcase>\n", tag);
        }
        fprintf(f, "  </testsuite>\n");
    }
    fprintf(f, "</testsuites>\n");
    return fclose(f) == 0;
}

/* ---- JSON ---- */

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_number(FILE *f, const char *key, double x)
{
    fprintf(f, ", \"%s\": ", key);
    if (isfinite(x))
        fprintf(f, "%.6g", x);
    else
        fputs("null", f);
}

bool tk_write_json(const tk_run *run, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    const fa_conformance_options *o = run->opt;
    int64_t passed = 0, failed = 0, skipped = 0;
    for (int b = 0; b < run->n_backends; b++) {
        passed += run->backends[b].passed;
        failed += run->backends[b].failed;
        skipped += run->backends[b].skipped;
    }
    fprintf(f, "{\n  \"version\": \"%s\", \"mode\": \"%s\", \"seed\": %llu, \"seconds\": %.3f,\n",
            fa_version_string(), o->full ? "full" : "quick", (unsigned long long)o->seed,
            run->seconds);
    fprintf(f, "  \"passed\": %lld, \"failed\": %lld, \"skipped\": %lld,\n  \"backends\": [",
            (long long)passed, (long long)failed, (long long)skipped);
    for (int b = 0; b < run->n_backends; b++) {
        const tk_backend_run *br = &run->backends[b];
        fprintf(f, "%s\n    {\"name\": \"%s\", \"available\": %s, \"device\": ", b ? "," : "",
                br->name, br->available ? "true" : "false");
        json_string(f, br->device);
        fprintf(f, ", \"reason\": ");
        json_string(f, br->reason);
        fprintf(f, ", \"passed\": %lld, \"failed\": %lld, \"skipped\": %lld,\n     \"cases\": [",
                (long long)br->passed, (long long)br->failed, (long long)br->skipped);
        for (int64_t c = 0; c < run->n_cases; c++) {
            const tk_result *r = &br->results[c];
            const tk_case *tc = &run->cases[c];
            const fa_ref_problem *p = &tc->p;
            fprintf(f, "%s\n      {\"name\": ", c ? "," : "");
            json_string(f, tc->name);
            fprintf(f, ", \"status\": \"%s\"",
                    r->outcome == TK_PASS   ? "pass"
                    : r->outcome == TK_FAIL ? "fail"
                                            : "skip");
            fprintf(f,
                    ", \"direction\": \"%s\", \"dtype\": \"%s\", \"batch\": %lld, "
                    "\"seq_q\": %lld, \"seq_k\": %lld, \"heads_q\": %lld, \"heads_kv\": %lld, "
                    "\"head_dim\": %lld, \"heads\": \"%s\", \"causal\": %s, \"layout\": \"%s\"",
                    tc->backward ? "backward" : "forward", fa_dtype_name(p->dtype),
                    (long long)p->batch, (long long)p->seq_q, (long long)p->seq_k,
                    (long long)p->heads_q, (long long)p->heads_kv, (long long)p->head_dim,
                    tk_heads_name(tc->heads), p->causal ? "true" : "false",
                    tc->bhsd ? "bhsd" : "bshd");
            json_number(f, "scale", p->scale);
            json_number(f, "ratio", r->ratio);
            json_number(f, "err_o", r->err_o);
            json_number(f, "tol_o", r->tol_o);
            json_number(f, "err_lse", r->err_lse);
            if (tc->backward) {
                json_number(f, "err_dq", r->err_dq);
                json_number(f, "tol_dq", r->tol_dq);
                json_number(f, "err_dk", r->err_dk);
                json_number(f, "tol_dk", r->tol_dk);
                json_number(f, "err_dv", r->err_dv);
                json_number(f, "tol_dv", r->tol_dv);
            }
            fprintf(f, ", \"sampled\": %s", r->sampled ? "true" : "false");
            json_number(f, "seconds", r->seconds);
            fprintf(f, ", \"detail\": ");
            json_string(f, r->detail);
            fputc('}', f);
        }
        fprintf(f, "\n     ]}");
    }
    fprintf(f, "\n  ]\n}\n");
    return fclose(f) == 0;
}
