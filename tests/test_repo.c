/* test_repo.c — checks on the repository itself: every C source is formatted
 * by the repository's .clang-format (`make format` fixes it). Runs from the
 * repository root, as `make test` does. */
#include <stdlib.h>
#include <string.h>

#include "test.h"

static void repo_is_formatted(void) {
    char out[8192];
    if (t_run("command -v clang-format", out, sizeof out) != 0) {
        t_skip("repo_is_formatted needs clang-format (apt-get install clang-format)");
        return;
    }
    const int rc = t_run(
        "out=$(find include src tests bench tools -name '*.[ch]' -not -path 'tests/fixtures/*' "
        "-not -path '*/node_modules/*' "
        "| xargs clang-format --dry-run -Werror 2>&1); rc=$?; "
        "printf '%s\\n' \"$out\" | awk '/error:/ && n++ < 5'; exit $rc",
        out, sizeof out);
    CHECKF(rc == 0, "files differ from .clang-format (run `make format`):\n%s", out);
}

T_SUITE(repo) {
    T_ADD(repo_is_formatted);
}
