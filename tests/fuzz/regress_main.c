/*
 * regress_main.c - replay every file in the given directories through the
 * fuzz entry point (no libFuzzer needed).  Registered as a ctest so that
 * every crash the fuzzer ever found stays fixed in every build.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapbuild.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
	unsigned n = 0;

	for (int i = 1; i < argc; i++) {
		DIR *dir = opendir(argv[i]);
		struct dirent *e;

		if (!dir) {
			perror(argv[i]);
			return 1;
		}
		while ((e = readdir(dir))) {
			char path[4096];
			uint8_t *buf;
			size_t len;

			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
			buf = snapbuild_read_file(path, &len);
			if (!buf) {
				perror(path);
				closedir(dir);
				return 1;
			}
			/* Also every prefix length of small inputs: truncation paths. */
			LLVMFuzzerTestOneInput(buf, len);
			if (len <= 4096)
				for (size_t k = 0; k < len; k += len / 48 > 7 ? len / 48 : 7) {
					uint8_t *cut = malloc(k ? k : 1);

					if (!cut)
						return 1;
					memcpy(cut, buf, k); /* exact size: ASan sees over-reads */
					LLVMFuzzerTestOneInput(cut, k);
					free(cut);
				}
			free(buf);
			n++;
		}
		closedir(dir);
	}
	printf("replayed %u inputs\n", n);
	return n ? 0 : 1;
}
