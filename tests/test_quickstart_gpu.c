/* test_quickstart_gpu — `metro run configs/quickstart.ini --device cuda`
 * runs on the GPU and says so. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

START_TEST(quickstart_on_cuda)
{
    char out[] = "/tmp/metro-qs-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(out));
    char args[1024];
    snprintf(args, sizeof args, "run %s/configs/quickstart.ini --device cuda --output %s/run",
             METRO_TEST_SOURCE_DIR, out);
    char *o, *e;
    int rc = metro_test_cli(args, &o, &e);
    printf("%s", e);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, e);
    ck_assert_msg(strstr(e, "backend cuda") != NULL, "%s", e);
    free(o); free(e);
}
END_TEST

int main(void)
{
    METRO_TEST_REQUIRE_GPU();
    Suite *s = suite_create("quickstart_gpu");
    TCase *tc = tcase_create("run");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, quickstart_on_cuda);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
