/*
 * main.c - the ulpfs helper: subcommand dispatch.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct cli_cmd {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
} cli_cmd;

static const cli_cmd cmds[] = {
	{ "pack", cmd_pack,
	  "encode a file (optionally against its previous "
	  "version) into an object" },
	{ "unpack", cmd_unpack, "decode an object back into the exact file" },
	{ "mount", cmd_mount, "mount a store as a filesystem (FUSE)" },
	{ "umount", cmd_umount,
	  "unmount, and wait until everything is "
	  "encoded" },
	{ "log", cmd_store, "list the versions of a file" },
	{ "snapshot", cmd_store, "create, list, show or delete snapshots" },
	{ "cat", cmd_data, "write one version of a file to stdout" },
	{ "export", cmd_data, "write a version or a snapshot as plain files" },
	{ "restore", cmd_store, "bring a snapshot back into the live tree" },
	{ "stats", cmd_store, "space, compression and health of a store" },
	{ "verify", cmd_store, "decode every version and check its hash" },
	{ "gc", cmd_store, "finish pending rebases now" },
	{ "prune", cmd_store, "drop old versions of files" },
	{ "sync", cmd_store, "wait until every closed file is committed" },
	{ "bench", cmd_bench,
	  "code a trajectory of files, verify, and compare "
	  "with zstd and byte grouping" },
};

static void usage(FILE *f)
{
	fputs("usage: ulpfs COMMAND [OPTIONS] [ARGS]\n\n"
	      "ulpfs stores ML checkpoint trajectories as lossless, "
	      "reference-\nconditioned deltas.  Commands:\n",
	      f);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].summary);
	fputs("\n'ulpfs COMMAND --help' describes a command; see ulpfs(1).\n",
	      f);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return CLI_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return CLI_OK;
	}
	if (strcmp(argv[1], "--version") == 0) {
		puts("ulpfs " PACKAGE_VERSION);
		return CLI_OK;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(argv[1], cmds[i].name) == 0)
			return cmds[i].run(argc - 1, argv + 1);
	fprintf(stderr, "ulpfs: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return CLI_USAGE;
}
