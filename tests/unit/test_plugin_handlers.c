/*
 * Unit tests: the built-in plugin handlers (doc/plugin-manager.md section
 * 8) — what the kubelet's CSI, device-plugin and DRA handlers check when a
 * plugin registers — and the generic version parser the CSI check uses.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/plugin_handlers.h"
#include "unit.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

struct fixture {
        struct plugin_handlers *h;
        struct buf err;
};

static void setup(struct fixture *fx)
{
        memset(fx, 0, sizeof(*fx));
        ck_assert_int_eq(plugin_handlers_new(&fx->h), 0);
        buf_init(&fx->err);
}

static void teardown(struct fixture *fx)
{
        plugin_handlers_free(fx->h);
        buf_free(&fx->err);
}

static const char *errtext(const struct fixture *fx)
{
        return fx->err.data;
}

/* validate (and, if it passes and reg is set, register) with a fresh error
 * buffer; returns validate's result. */
static int validate(struct fixture *fx, const char *type, const char *name, const char *endpoint,
                    char *const *versions, size_t n)
{
        buf_reset(&fx->err);
        return plugin_handlers_validate(fx->h, type, name, endpoint, versions, n, &fx->err);
}

static int reg(struct fixture *fx, const char *type, const char *name, const char *endpoint,
               char *const *versions, size_t n)
{
        buf_reset(&fx->err);
        return plugin_handlers_register(fx->h, type, name, endpoint, versions, n, &fx->err);
}

/* The kubelet's flow for one plugin: validate, then register. */
static void validate_and_register(struct fixture *fx, const char *type, const char *name,
                                  const char *endpoint, char *const *versions, size_t n)
{
        int r = validate(fx, type, name, endpoint, versions, n);

        ck_assert_msg(r == 0, "validate %s \"%s\": %d (%s)", type, name, r, errtext(fx));
        r = reg(fx, type, name, endpoint, versions, n);
        ck_assert_msg(r == 0, "register %s \"%s\": %d (%s)", type, name, r, errtext(fx));
}

static void expect_invalid(struct fixture *fx, const char *type, const char *name, char *const *versions,
                           size_t n)
{
        int r = validate(fx, type, name, "/ep.sock", versions, n);

        ck_assert_msg(r == -EINVAL, "validate %s \"%s\": want -EINVAL, got %d", type, name, r);
        ck_assert_msg(errtext(fx)[0] != '\0', "validate %s \"%s\" failed without a reason", type, name);
}

/* ---- plugin_parse_version -------------------------------------------------- */

START_TEST(test_parse_version_accepts)
{
        static const struct {
                const char *in;
                unsigned long want[3];
        } cases[] = {
                {"1.0", {1, 0, 0}},
                {"v1.0", {1, 0, 0}},
                {"1.2.3", {1, 2, 3}},
                {"v1.2.3", {1, 2, 3}},
                {"0.3.0", {0, 3, 0}},
                {"1.2.3.4", {1, 2, 3}},      /* more parts: the first three count */
                {"10.20.30", {10, 20, 30}},
                {"1.2.3-rc.1", {1, 2, 3}},   /* a pre-release suffix ends the numbers */
                {"1.2+build7", {1, 2, 0}},
                {"2.0.0", {2, 0, 0}},
                /* The kubelet's ParseGeneric ignores what follows the
                 * numbers (tests/unit/test_version.c has the rest). */
                {"1.0x", {1, 0, 0}},
                {"1.0.", {1, 0, 0}},
                {" v1.2.3x ", {1, 2, 3}},
                {"1.02", {1, 2, 0}},
        };

        for (size_t i = 0; i < N(cases); i++) {
                unsigned long v[3] = {99, 99, 99};
                int r = plugin_parse_version(cases[i].in, v);

                ck_assert_msg(r == 0, "parse \"%s\": %d", cases[i].in, r);
                ck_assert_msg(v[0] == cases[i].want[0] && v[1] == cases[i].want[1] && v[2] == cases[i].want[2],
                              "parse \"%s\": got %lu.%lu.%lu, want %lu.%lu.%lu", cases[i].in, v[0], v[1], v[2],
                              cases[i].want[0], cases[i].want[1], cases[i].want[2]);
        }
}
END_TEST

START_TEST(test_parse_version_rejects)
{
        static const char *cases[] = {
                "", "v", "1", "v1", "1.", "1..2", ".1", "a.b", "1.x", "x1.0",
                "-1.0", "1,0", "v1beta1", "v1.DRAPlugin", "V1.0", "01.0", "1.0\n",
        };

        for (size_t i = 0; i < N(cases); i++) {
                unsigned long v[3] = {7, 7, 7};
                int r = plugin_parse_version(cases[i], v);

                ck_assert_msg(r == -EINVAL, "parse \"%s\": want -EINVAL, got %d", cases[i], r);
                /* ret is written only on success. */
                ck_assert_msg(v[0] == 7 && v[1] == 7 && v[2] == 7, "parse \"%s\" wrote %lu.%lu.%lu on failure",
                              cases[i], v[0], v[1], v[2]);
        }
}
END_TEST

/* ---- handler table ------------------------------------------------------------ */

START_TEST(test_has_exact_case_sensitive_types)
{
        struct fixture fx;

        setup(&fx);
        ck_assert_int_eq(plugin_handlers_has(fx.h, PLUGIN_TYPE_CSI), 1);
        ck_assert_int_eq(plugin_handlers_has(fx.h, PLUGIN_TYPE_DEVICE), 1);
        ck_assert_int_eq(plugin_handlers_has(fx.h, PLUGIN_TYPE_DRA), 1);
        ck_assert_int_eq(plugin_handlers_has(fx.h, "CSIPlugin"), 1);
        ck_assert_int_eq(plugin_handlers_has(fx.h, "csiplugin"), 0);
        ck_assert_int_eq(plugin_handlers_has(fx.h, "DevicePlugin "), 0);
        ck_assert_int_eq(plugin_handlers_has(fx.h, "FooPlugin"), 0);
        ck_assert_int_eq(plugin_handlers_has(fx.h, ""), 0);
        ck_assert_int_eq(plugin_handlers_has(fx.h, NULL), 0);
        teardown(&fx);
}
END_TEST

START_TEST(test_unknown_type_is_refused)
{
        struct fixture fx;
        char *v[] = {"v1beta1"};

        setup(&fx);
        ck_assert_int_eq(validate(&fx, "FooPlugin", "vendor.example/foo", "/ep.sock", v, 1), -EINVAL);
        ck_assert_msg(strstr(errtext(&fx), "FooPlugin"), "error does not name the type: \"%s\"", errtext(&fx));
        ck_assert_int_eq(reg(&fx, "FooPlugin", "vendor.example/foo", "/ep.sock", v, 1), -EINVAL);
        ck_assert_msg(strstr(errtext(&fx), "FooPlugin"), "error does not name the type: \"%s\"", errtext(&fx));
        /* Deregistering an unknown type is harmless. */
        plugin_handlers_deregister(fx.h, "FooPlugin", "vendor.example/foo", "/ep.sock");
        teardown(&fx);
}
END_TEST

START_TEST(test_empty_name_is_refused)
{
        struct fixture fx;
        char *csi[] = {"1.0.0"}, *dev[] = {"v1beta1"}, *dra[] = {"v1.DRAPlugin"};

        setup(&fx);
        expect_invalid(&fx, PLUGIN_TYPE_CSI, "", csi, 1);
        expect_invalid(&fx, PLUGIN_TYPE_DEVICE, "", dev, 1);
        expect_invalid(&fx, PLUGIN_TYPE_DRA, "", dra, 1);
        teardown(&fx);
}
END_TEST

/* ---- CSIPlugin --------------------------------------------------------------- */

START_TEST(test_csi_highest_1x_is_accepted)
{
        struct fixture fx;
        char *v[] = {"0.3.0", "1.0.0", "1.2.0", "1.1.5"};
        char *same[] = {"1.2.0"}, *lower[] = {"1.1.9"}, *higher[] = {"1.2.1"};

        setup(&fx);
        validate_and_register(&fx, PLUGIN_TYPE_CSI, "csi.example.com", "/csi.sock", v, N(v));
        /* 1.2.0 is what was recorded: equal and lower are refused ... */
        ck_assert_int_eq(validate(&fx, PLUGIN_TYPE_CSI, "csi.example.com", "/csi2.sock", same, 1), -EINVAL);
        ck_assert_msg(strstr(errtext(&fx), "csi.example.com"), "error does not name the driver: \"%s\"",
                      errtext(&fx));
        ck_assert_int_eq(validate(&fx, PLUGIN_TYPE_CSI, "csi.example.com", "/csi2.sock", lower, 1), -EINVAL);
        /* ... strictly higher is accepted. */
        ck_assert_int_eq(validate(&fx, PLUGIN_TYPE_CSI, "csi.example.com", "/csi2.sock", higher, 1), 0);
        teardown(&fx);
}
END_TEST

/* Versions are read and compared as the kubelet's ParseGeneric and
 * HighestSupportedVersion do: trailing text ignored, every number
 * compared, the greater kept and printed as Go prints it. */
START_TEST(test_csi_versions_as_the_kubelet_reads_them)
{
        struct fixture fx;
        char *first[] = {"1.0x", "1.2.3.4"}, *fifth[] = {"v1.2.3.5-rc"}, *padded[] = {"1.2.3.5.0"};

        setup(&fx);
        validate_and_register(&fx, PLUGIN_TYPE_CSI, "csi.example.com", "/csi.sock", first, N(first));
        /* 1.2.3.5 is above 1.2.3.4 (a fourth number counts) ... */
        ck_assert_msg(validate(&fx, PLUGIN_TYPE_CSI, "csi.example.com", "/csi2.sock", fifth, 1) == 0, "%s",
                      errtext(&fx));
        ck_assert_int_eq(reg(&fx, PLUGIN_TYPE_CSI, "csi.example.com", "/csi2.sock", fifth, 1), 0);
        /* ... and 1.2.3.5.0 equals it, so it is refused, named as Go
         * names both. */
        ck_assert_int_eq(validate(&fx, PLUGIN_TYPE_CSI, "csi.example.com", "/csi3.sock", padded, 1), -EINVAL);
        ck_assert_msg(strstr(errtext(&fx), "version 1.2.3.5, which is not lower than 1.2.3.5.0"), "%s",
                      errtext(&fx));
        teardown(&fx);
}
END_TEST

START_TEST(test_csi_only_0x_is_rejected)
{
        struct fixture fx;
        char *v0[] = {"0.3.0", "0.2.0"}, *one0[] = {"v0.1"};

        setup(&fx);
        expect_invalid(&fx, PLUGIN_TYPE_CSI, "csi.example.com", v0, N(v0));
        expect_invalid(&fx, PLUGIN_TYPE_CSI, "csi.example.com", one0, 1);
        /* register checks it too. */
        buf_reset(&fx.err);
        ck_assert_int_eq(reg(&fx, PLUGIN_TYPE_CSI, "csi.example.com", "/csi.sock", v0, N(v0)), -EINVAL);
        teardown(&fx);
}
END_TEST

START_TEST(test_csi_empty_versions_rejected)
{
        struct fixture fx;

        setup(&fx);
        expect_invalid(&fx, PLUGIN_TYPE_CSI, "csi.example.com", NULL, 0);
        teardown(&fx);
}
END_TEST

START_TEST(test_csi_unparsable_versions_skipped)
{
        struct fixture fx;
        char *mixed[] = {"bogus", "1.0.0", "1.x"}, *only_bad[] = {"bogus", "v1", ""};

        setup(&fx);
        ck_assert_msg(validate(&fx, PLUGIN_TYPE_CSI, "a.csi", "/a.sock", mixed, N(mixed)) == 0, "mixed: %s",
                      errtext(&fx));
        expect_invalid(&fx, PLUGIN_TYPE_CSI, "a.csi", only_bad, N(only_bad));
        teardown(&fx);
}
END_TEST

START_TEST(test_csi_above_1x_skipped)
{
        struct fixture fx;
        char *v[] = {"2.0.0", "1.1.0", "3.1"}, *only2[] = {"2.0.0"}, *again11[] = {"1.1.0"},
             *again12[] = {"1.2.0"};

        setup(&fx);
        expect_invalid(&fx, PLUGIN_TYPE_CSI, "b.csi", only2, 1);
        validate_and_register(&fx, PLUGIN_TYPE_CSI, "b.csi", "/b.sock", v, N(v));
        /* What was recorded is 1.1.0, not 2.0.0 or 3.1. */
        ck_assert_int_eq(validate(&fx, PLUGIN_TYPE_CSI, "b.csi", "/b2.sock", again11, 1), -EINVAL);
        ck_assert_msg(validate(&fx, PLUGIN_TYPE_CSI, "b.csi", "/b2.sock", again12, 1) == 0, "1.2.0: %s",
                      errtext(&fx));
        teardown(&fx);
}
END_TEST

START_TEST(test_csi_reregistration_needs_strictly_higher)
{
        struct fixture fx;
        char *v10[] = {"1.0.0"}, *v11[] = {"v1.1"}, *v111[] = {"1.1.1"};

        setup(&fx);
        validate_and_register(&fx, PLUGIN_TYPE_CSI, "c.csi", "/c.sock", v10, 1);
        ck_assert_int_eq(validate(&fx, PLUGIN_TYPE_CSI, "c.csi", "/c.sock", v10, 1), -EINVAL);
        validate_and_register(&fx, PLUGIN_TYPE_CSI, "c.csi", "/c2.sock", v11, 1);
        /* 1.1 == 1.1.0: not strictly higher. */
        ck_assert_int_eq(validate(&fx, PLUGIN_TYPE_CSI, "c.csi", "/c3.sock", v11, 1), -EINVAL);
        validate_and_register(&fx, PLUGIN_TYPE_CSI, "c.csi", "/c3.sock", v111, 1);
        /* Another driver name is independent. */
        validate_and_register(&fx, PLUGIN_TYPE_CSI, "other.csi", "/o.sock", v10, 1);
        teardown(&fx);
}
END_TEST

START_TEST(test_csi_deregister_clears)
{
        struct fixture fx;
        char *v15[] = {"1.5.0"}, *v10[] = {"1.0.0"};

        setup(&fx);
        validate_and_register(&fx, PLUGIN_TYPE_CSI, "d.csi", "/d.sock", v15, 1);
        ck_assert_int_eq(validate(&fx, PLUGIN_TYPE_CSI, "d.csi", "/d.sock", v10, 1), -EINVAL);
        plugin_handlers_deregister(fx.h, PLUGIN_TYPE_CSI, "d.csi", "/d.sock");
        /* Gone: any 1.x is accepted again. */
        validate_and_register(&fx, PLUGIN_TYPE_CSI, "d.csi", "/d.sock", v10, 1);
        /* Deregistering an unknown driver is harmless. */
        plugin_handlers_deregister(fx.h, PLUGIN_TYPE_CSI, "nobody.csi", "/x.sock");
        teardown(&fx);
}
END_TEST

/* ---- DevicePlugin ---------------------------------------------------------- */

START_TEST(test_device_requires_v1beta1)
{
        struct fixture fx;
        char *ok1[] = {"v1beta1"}, *ok2[] = {"v1alpha1", "v1beta1", "v1beta2"}, *bad[] = {"v1beta2"},
             *bad2[] = {"V1BETA1", "1.0.0"};

        setup(&fx);
        validate_and_register(&fx, PLUGIN_TYPE_DEVICE, "vendor.example/gpu", "/gpu.sock", ok1, 1);
        validate_and_register(&fx, PLUGIN_TYPE_DEVICE, "vendor.example/nic", "/nic.sock", ok2, N(ok2));
        expect_invalid(&fx, PLUGIN_TYPE_DEVICE, "vendor.example/gpu", bad, 1);
        ck_assert_msg(strstr(errtext(&fx), "v1beta1"), "error does not name v1beta1: \"%s\"", errtext(&fx));
        expect_invalid(&fx, PLUGIN_TYPE_DEVICE, "vendor.example/gpu", bad2, N(bad2));
        expect_invalid(&fx, PLUGIN_TYPE_DEVICE, "vendor.example/gpu", NULL, 0);
        teardown(&fx);
}
END_TEST

START_TEST(test_device_extended_resource_names)
{
        static const char *good[] = {
                "vendor.example/gpu",
                "example.com/a_b.c-d",
                "nvidia.com/gpu",
                "a/b",
                "x-1.y-2/Z9",
                "vendor.example/GPU",
        };
        static const char *bad[] = {
                "gpu",                   /* not domain-qualified */
                "kubernetes.io/gpu",     /* the kubernetes.io namespace */
                "foo.kubernetes.io/gpu", /* ... and its sub-domains */
                "requests.x/y",          /* the quota prefix */
                "Upper.case/x",          /* domain must be lowercase */
                "/gpu",
                "vendor.example/",
                "vendor.example/-gpu",
                "vendor.example/gpu_",
                "vendor.example/g/pu",
                "vendor_x.example/gpu",
                "-vendor.example/gpu",
                "vendor.example-/gpu",
                "vendor.example/g pu",
        };
        struct fixture fx;
        char *v[] = {"v1beta1"};

        setup(&fx);
        for (size_t i = 0; i < N(good); i++) {
                int r = validate(&fx, PLUGIN_TYPE_DEVICE, good[i], "/dev.sock", v, 1);

                ck_assert_msg(r == 0, "\"%s\" should be a valid extended resource name: %d (%s)", good[i], r,
                              errtext(&fx));
        }
        for (size_t i = 0; i < N(bad); i++) {
                expect_invalid(&fx, PLUGIN_TYPE_DEVICE, bad[i], v, 1);
                ck_assert_msg(strstr(errtext(&fx), bad[i]), "error does not quote \"%s\": \"%s\"", bad[i],
                              errtext(&fx));
        }
        teardown(&fx);
}
END_TEST

/*
 * The kubelet's IsExtendedResourceName checks "requests." + name with
 * IsQualifiedName: the domain is a DNS-1123 subdomain (every dot-separated
 * label starts and ends alphanumeric, so no empty labels) of at most 253
 * characters *including* the "requests." prefix (244 for the vendor's
 * domain), and the name part is at most 63 characters.
 */
START_TEST(test_device_name_dns_subdomain_rules)
{
        static const char *bad[] = {
                "vendor..example/gpu",
                "vendor.-example/gpu",
                "vendor-.example/gpu",
                "vendor.example./gpu",
        };
        struct fixture fx;
        char *v[] = {"v1beta1"};
        char name[400], wrong[2048] = "";
        int r;

        /* Every case is checked and the wrong ones listed together, after
         * the fixture is freed (no leak when this fails without fork). */
        setup(&fx);
        for (size_t i = 0; i < N(bad); i++) {
                r = validate(&fx, PLUGIN_TYPE_DEVICE, bad[i], "/dev.sock", v, 1);
                if (r != -EINVAL)
                        snprintf(wrong + strlen(wrong), sizeof(wrong) - strlen(wrong),
                                 "\n  \"%s\" (not a DNS subdomain): want -EINVAL, got %d", bad[i], r);
        }
        /* Name part: 63 ok, 64 refused. */
        memset(name, 0, sizeof(name));
        memcpy(name, "vendor.example/", 15);
        memset(name + 15, 'n', 63);
        r = validate(&fx, PLUGIN_TYPE_DEVICE, name, "/dev.sock", v, 1);
        if (r != 0)
                snprintf(wrong + strlen(wrong), sizeof(wrong) - strlen(wrong),
                         "\n  63-char name part: want 0, got %d (%s)", r, errtext(&fx));
        name[15 + 63] = 'n';
        r = validate(&fx, PLUGIN_TYPE_DEVICE, name, "/dev.sock", v, 1);
        if (r != -EINVAL)
                snprintf(wrong + strlen(wrong), sizeof(wrong) - strlen(wrong),
                         "\n  64-char name part: want -EINVAL, got %d", r);
        /* Domain: 244 ok (253 with "requests."), 245 refused.  Labels of
         * 60 characters joined by dots. */
        for (size_t len = 244; len <= 245; len++) {
                memset(name, 0, sizeof(name));
                for (size_t i = 0; i < len; i++)
                        name[i] = (i % 61 == 60) ? '.' : 'd';
                name[len - 1] = 'd';
                memcpy(name + len, "/gpu", 4);
                r = validate(&fx, PLUGIN_TYPE_DEVICE, name, "/dev.sock", v, 1);
                if (len == 244 && r != 0)
                        snprintf(wrong + strlen(wrong), sizeof(wrong) - strlen(wrong),
                                 "\n  244-char domain: want 0, got %d (%s)", r, errtext(&fx));
                if (len == 245 && r != -EINVAL)
                        snprintf(wrong + strlen(wrong), sizeof(wrong) - strlen(wrong),
                                 "\n  245-char domain (254 with \"requests.\"): want -EINVAL, got %d", r);
        }
        teardown(&fx);
        ck_assert_msg(wrong[0] == '\0', "extended resource names checked unlike IsExtendedResourceName:%s", wrong);
}
END_TEST

/*
 * No label of the domain has a length limit of its own: the subdomain
 * check is a pattern and a total length (253 with "requests."), so labels
 * of 64, 100 and 244 characters are accepted, as the kubelet accepts them;
 * the total still counts.
 */
START_TEST(test_device_name_long_domain_labels)
{
        static const size_t lens[] = {63, 64, 100, 200};
        struct fixture fx;
        char *v[] = {"v1beta1"};
        char name[400], wrong[2048] = "";
        int r;

        setup(&fx);
        for (size_t i = 0; i < N(lens); i++) {
                memset(name, 0, sizeof(name));
                memset(name, 'l', lens[i]);
                memcpy(name + lens[i], ".example/gpu", 12);
                r = validate(&fx, PLUGIN_TYPE_DEVICE, name, "/dev.sock", v, 1);
                if (r != 0)
                        snprintf(wrong + strlen(wrong), sizeof(wrong) - strlen(wrong),
                                 "\n  a %zu-character label: want 0, got %d (%s)", lens[i], r, errtext(&fx));
        }
        /* One label of 244 characters is the whole domain: accepted; 245
         * is past the total. */
        for (size_t len = 244; len <= 245; len++) {
                memset(name, 0, sizeof(name));
                memset(name, 'd', len);
                memcpy(name + len, "/gpu", 4);
                r = validate(&fx, PLUGIN_TYPE_DEVICE, name, "/dev.sock", v, 1);
                if (len == 244 && r != 0)
                        snprintf(wrong + strlen(wrong), sizeof(wrong) - strlen(wrong),
                                 "\n  a 244-character one-label domain: want 0, got %d (%s)", r, errtext(&fx));
                if (len == 245 && r != -EINVAL)
                        snprintf(wrong + strlen(wrong), sizeof(wrong) - strlen(wrong),
                                 "\n  a 245-character one-label domain: want -EINVAL, got %d", r);
        }
        teardown(&fx);
        ck_assert_msg(wrong[0] == '\0', "extended resource names checked unlike IsExtendedResourceName:%s", wrong);
}
END_TEST

/* ---- DRAPlugin --------------------------------------------------------------- */

START_TEST(test_dra_services)
{
        struct fixture fx;
        char *v1[] = {"v1.DRAPlugin"}, *v1b1[] = {"v1beta1.DRAPlugin"},
             *mixed[] = {"v1alpha4.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAPlugin"},
             *old[] = {"v1alpha4.DRAPlugin"}, *semver[] = {"1.0.0"}, *lower[] = {"v1.draplugin"};

        setup(&fx);
        validate_and_register(&fx, PLUGIN_TYPE_DRA, "gpu.example.com", "/dra-1.sock", v1, 1);
        validate_and_register(&fx, PLUGIN_TYPE_DRA, "net.example.com", "/dra-2.sock", v1b1, 1);
        validate_and_register(&fx, PLUGIN_TYPE_DRA, "fpga.example.com", "/dra-3.sock", mixed, N(mixed));
        expect_invalid(&fx, PLUGIN_TYPE_DRA, "gpu.example.com", old, 1);
        expect_invalid(&fx, PLUGIN_TYPE_DRA, "gpu.example.com", semver, 1);
        expect_invalid(&fx, PLUGIN_TYPE_DRA, "gpu.example.com", lower, 1);
        expect_invalid(&fx, PLUGIN_TYPE_DRA, "gpu.example.com", NULL, 0);
        teardown(&fx);
}
END_TEST

START_TEST(test_dra_same_endpoint_refused_two_endpoints_allowed)
{
        struct fixture fx;
        char *v[] = {"v1.DRAPlugin"};
        int r;

        setup(&fx);
        validate_and_register(&fx, PLUGIN_TYPE_DRA, "gpu.example.com", "/run/dra/a.sock", v, 1);
        /* The same endpoint again for the same driver: validate passes (it
         * does not look at endpoints), register refuses. */
        ck_assert_int_eq(validate(&fx, PLUGIN_TYPE_DRA, "gpu.example.com", "/run/dra/a.sock", v, 1), 0);
        r = reg(&fx, PLUGIN_TYPE_DRA, "gpu.example.com", "/run/dra/a.sock", v, 1);
        ck_assert_msg(r < 0, "same endpoint registered twice: %d", r);
        ck_assert_msg(strstr(errtext(&fx), "/run/dra/a.sock"), "error does not name the endpoint: \"%s\"",
                      errtext(&fx));
        /* A second endpoint (rolling upgrade) is fine, and so is the same
         * endpoint for another driver. */
        validate_and_register(&fx, PLUGIN_TYPE_DRA, "gpu.example.com", "/run/dra/b.sock", v, 1);
        validate_and_register(&fx, PLUGIN_TYPE_DRA, "net.example.com", "/run/dra/a.sock", v, 1);
        /* Deregistered: the endpoint can come back. */
        plugin_handlers_deregister(fx.h, PLUGIN_TYPE_DRA, "gpu.example.com", "/run/dra/a.sock");
        validate_and_register(&fx, PLUGIN_TYPE_DRA, "gpu.example.com", "/run/dra/a.sock", v, 1);
        /* The other endpoint is still registered. */
        ck_assert_int_lt(reg(&fx, PLUGIN_TYPE_DRA, "gpu.example.com", "/run/dra/b.sock", v, 1), 0);
        teardown(&fx);
}
END_TEST

START_TEST(test_free_null)
{
        plugin_handlers_free(NULL);
}
END_TEST

UNIT_MAIN(test_parse_version_accepts, test_parse_version_rejects, test_has_exact_case_sensitive_types,
          test_unknown_type_is_refused, test_empty_name_is_refused, test_csi_highest_1x_is_accepted,
          test_csi_versions_as_the_kubelet_reads_them,
          test_csi_only_0x_is_rejected, test_csi_empty_versions_rejected, test_csi_unparsable_versions_skipped,
          test_csi_above_1x_skipped, test_csi_reregistration_needs_strictly_higher, test_csi_deregister_clears,
          test_device_requires_v1beta1, test_device_extended_resource_names, test_device_name_dns_subdomain_rules,
          test_device_name_long_domain_labels,
          test_dra_services, test_dra_same_endpoint_refused_two_endpoints_allowed, test_free_null)
