/*
 * stats_svg.c - the SVG chart of `ulpfs stats --svg FILE`, written by
 * hand: SVG is text, and a chart of bars needs no library.  The figures
 * per checkpoint come from the executor (src/ctl/ctl_ckpt.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "stats_svg.h"

#define LABEL_MAX 40 /* code points of a checkpoint's name on the axis */

/* Write s as XML character data or attribute text: markup characters as
 * entities, and what XML 1.0 cannot hold at all (bytes that are not
 * UTF-8, control characters, U+FFFE/U+FFFF) as U+FFFD.  At most max code
 * points, the last one an ellipsis when s is longer (max 0: no limit). */
static void xml_text(FILE *f, const char *str, size_t max)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = strlen(str), cps = 0;
	for (size_t i = 0; i < n; cps++) {
		uint32_t c = 0;
		size_t len = cli_utf8_char(s + i, n - i, &c);
		if (max && cps + 1 == max && i + (len ? len : 1) < n) {
			fputs("\xe2\x80\xa6", f); /* U+2026 */
			return;
		}
		if (!len || (c < 0x20 && c != '\t' && c != '\n' && c != '\r') ||
		    c == 0xfffe || c == 0xffff)
			fputs("\xef\xbf\xbd", f);
		else if (c == '&')
			fputs("&amp;", f);
		else if (c == '<')
			fputs("&lt;", f);
		else if (c == '>')
			fputs("&gt;", f);
		else if (c == '"')
			fputs("&quot;", f);
		else if (c == '\'')
			fputs("&apos;", f);
		else
			fwrite(s + i, 1, len, f);
		i += len ? len : 1;
	}
}

typedef struct series {
	const char *key, *label, *colour;
} series;

static const series all_series[3] = {
	{ "logical", "raw files", "#9e9e9e" },
	{ "stored", "stored by ulpfs", "#1f77b4" },
	{ "zstd19", "zstd -19 of each file", "#ff7f0e" },
};

static uint64_t field(json_t *o, const char *key)
{
	json_int_t v = json_integer_value(json_object_get(o, key));
	return v > 0 ? (uint64_t)v : 0;
}

/* A round step (1, 2 or 5 times a power of ten) near max/5. */
static double nice_step(double max)
{
	double raw = max / 5, p = pow(10, floor(log10(raw)));
	return raw <= p       ? p
	       : raw <= 2 * p ? 2 * p
	       : raw <= 5 * p ? 5 * p
	                      : 10 * p;
}

/* Everything but the bars: frame, title, legend, axes, ticks. */
static void svg_frame(FILE *f, double w, double h, double x0, double y0,
                      double pw, double ph, size_t nck, int nser,
                      const char *unit, double top, double step,
                      const uint64_t tot[3])
{
	char s[3][32];
	for (int i = 0; i < 3; i++)
		cli_human(tot[i], s[i]);
	fprintf(f,
	        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
	        "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
	        "font-family=\"sans-serif\" font-size=\"12\">\n"
	        "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n"
	        "<text x=\"%.0f\" y=\"24\" font-size=\"16\" "
	        "font-weight=\"bold\">ulpfs: bytes per checkpoint</text>\n"
	        "<text x=\"%.0f\" y=\"42\">%zu checkpoints: %s raw, %s stored "
	        "(%.2fx smaller)",
	        w, h, w, h, x0, x0, nck, s[0], s[1],
	        tot[1] ? (double)tot[0] / (double)tot[1] : 0.0);
	if (nser == 3)
		fprintf(f, ", %s with zstd -19", s[2]);
	fputs("</text>\n", f);
	for (int i = 0; i < nser; i++) {
		double lx = x0 + 170 * i, ly = 54; /* a row under the title */
		fprintf(f,
		        "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" "
		        "height=\"12\" "
		        "fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
		        lx, ly, all_series[i].colour, lx + 18, ly + 10,
		        all_series[i].label);
	}
	for (double v = 0; v <= top * (1 + 1e-9); v += step) {
		double y = y0 + ph - ph * v / top;
		fprintf(f,
		        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
		        "stroke=\"#e0e0e0\"/>\n<text x=\"%.1f\" y=\"%.1f\" "
		        "text-anchor=\"end\">%g</text>\n",
		        x0, y, x0 + pw, y, x0 - 6, y + 4, v);
	}
	fprintf(f,
	        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
	        "stroke=\"#000000\"/>\n<line x1=\"%.1f\" y1=\"%.1f\" "
	        "x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000000\"/>\n"
	        "<text transform=\"translate(%.1f %.1f) rotate(-90)\" "
	        "text-anchor=\"middle\">bytes per checkpoint (%s)</text>\n"
	        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">"
	        "checkpoint, in the order written</text>\n",
	        x0, y0, x0, y0 + ph, x0, y0 + ph, x0 + pw, y0 + ph, x0 - 56,
	        y0 + ph / 2, unit, x0 + pw / 2, h - 12);
	if (!nck)
		fprintf(f,
		        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">"
		        "no versions in the store</text>\n",
		        x0 + pw / 2, y0 + ph / 2);
}

/* The bars and the axis labels of the checkpoints. */
static void svg_bars(FILE *f, json_t *cks, int nser, double x0, double y0,
                     double pw, double ph, double unit, double top)
{
	size_t n = json_array_size(cks), every = (n + 39) / 40;
	double gw = pw / (double)n, bw = gw * 0.8 / nser;
	size_t i;
	json_t *ck;

	json_array_foreach(cks, i, ck)
	{
		const char *name = json_string_value(json_object_get(ck, "nam"
		                                                         "e"));
		double gx = x0 + gw * (double)i + gw * 0.1;
		for (int k = 0; k < nser; k++) {
			uint64_t b = field(ck, all_series[k].key);
			char hb[32];
			double bh = ph * ((double)b / unit) / top;
			cli_human(b, hb);
			fprintf(f,
			        "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
			        "height=\"%.2f\" fill=\"%s\"><title>",
			        gx + bw * k, y0 + ph - bh, bw, bh,
			        all_series[k].colour);
			xml_text(f, name ? name : "?", 0);
			fprintf(f,
			        ": %s %s (%" PRIu64 " bytes)</title></rect>\n",
			        all_series[k].label, hb, b);
		}
		if (i % every)
			continue;
		double lx = x0 + gw * ((double)i + 0.5), ly = y0 + ph + 14;
		fprintf(f,
		        "<text transform=\"translate(%.1f %.1f) rotate(-40)\" "
		        "text-anchor=\"end\">",
		        lx, ly);
		xml_text(f, name ? name : "?", LABEL_MAX);
		fputs("</text>\n", f);
	}
}

static void svg_write(FILE *f, json_t *cks, int nser)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	size_t n = json_array_size(cks), i, longest = 1;
	uint64_t max = 0, tot[3] = { 0 };
	json_t *ck;

	json_array_foreach(cks, i, ck)
	{
		const char *name = json_string_value(json_object_get(ck, "nam"
		                                                         "e"));
		size_t len = name ? strlen(name) : 1;
		longest = len > longest ? len : longest;
		for (int k = 0; k < nser; k++) {
			uint64_t b = field(ck, all_series[k].key);
			tot[k] += b;
			max = b > max ? b : max;
		}
	}
	int u = 0;
	double unit = 1;
	while (u < 4 && (double)max / unit >= 1024) {
		unit *= 1024;
		u++;
	}
	double step = max ? nice_step((double)max / unit) : 0.25;
	double top = max ? ceil((double)max / unit / step) * step : 1;
	double pw = (double)n * (nser * 12 + 12);
	pw = pw < 560 ? 560 : pw > 1600 ? 1600 : pw;
	if (longest > LABEL_MAX)
		longest = LABEL_MAX;
	double x0 = 90, y0 = 90, ph = 360;
	double w = x0 + pw + 30, h = y0 + ph + 50 + 5.0 * (double)longest;
	svg_frame(f, w, h, x0, y0, pw, ph, n, nser, units[u], top, step, tot);
	if (n)
		svg_bars(f, cks, nser, x0, y0, pw, ph, unit, top);
	fputs("</svg>\n", f);
}

int cli_stats_svg_write(const char *path, json_t *stats)
{
	json_t *cks = json_object_get(stats, "by_checkpoint");
	json_t *first = json_array_get(cks, 0);
	/* the zstd -19 bars only when stats had the figures */
	int nser = json_object_get(stats, "zstd19") ? 3 : 2;
	char *tmp = NULL;
	FILE *f = NULL;
	int fd = -1, made = 0;

	if (!json_is_array(cks) || (first && !json_is_object(first))) {
		cli_err("stats --svg: the answer has no checkpoints");
		return -1;
	}
	if (asprintf(&tmp, "%s.XXXXXX", path) < 0) {
		cli_err("stats --svg: %s", strerror(ENOMEM));
		return -1;
	}
	/* a temporary name beside path, renamed over it once complete */
	made = (fd = mkstemp(tmp)) >= 0;
	if (fd < 0 || fchmod(fd, 0644) < 0 || !(f = fdopen(fd, "w"))) {
		cli_err("stats --svg: %s: %s", made ? tmp : path,
		        strerror(errno));
		goto fail;
	}
	fd = -1;
	svg_write(f, cks, nser);
	int bad = ferror(f);
	if (fclose(f) != 0 || bad) {
		f = NULL;
		cli_err("stats --svg: %s: %s", tmp,
		        strerror(errno ? errno : EIO));
		goto fail;
	}
	f = NULL;
	if (rename(tmp, path) < 0) {
		cli_err("stats --svg: %s: %s", path, strerror(errno));
		goto fail;
	}
	free(tmp);
	return 0;
fail:
	if (f)
		fclose(f);
	if (fd >= 0)
		close(fd);
	if (made)
		unlink(tmp);
	free(tmp);
	return -1;
}
