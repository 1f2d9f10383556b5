/*
 * test_v1_normalize — the normalization that makes podmux's digests
 * follow Go's decoding (src/kube/v1_normalize.h), tested directly on
 * json-c trees.  The manifest-level consequences (UIDs, UPDATE or not) are
 * in test_manifest.c; the table itself in test_v1_schema.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/json_canon.h"
#include "util/json_parse.h"
#include "kube/v1_normalize.h"
#include "unit.h"

/* ---- helpers ------------------------------------------------------------ */

static json_object *parse(const char *text)
{
        struct buf err = BUF_INIT;
        json_object *o = NULL;
        int r = json_parse_text(text, strlen(text), &o, &err);

        ck_assert_msg(r == 0, "json_parse_text(%s): %s", text, err.data);
        buf_free(&err);
        return o;
}

static char *canon(json_object *o)
{
        struct buf b = BUF_INIT;

        ck_assert_int_eq(json_canon_append(&b, o), 0);
        return buf_steal(&b, NULL);
}

/* Normalizes a Pod written as JSON; expects success; returns its
 * canonical text and the unknown fields joined (unknown may be NULL). */
static char *norm(const char *pod_json, char **ret_unknown)
{
        struct v1_unknown u = {NULL, 0, 0};
        struct buf err = BUF_INIT, joined = BUF_INIT;
        json_object *o = parse(pod_json);
        char *c;
        int r = v1_normalize(o, &v1_types[V1_TYPE_POD], "", &u, &err);

        ck_assert_msg(r == 0, "v1_normalize(%s) = %d: %s", pod_json, r, err.data);
        c = canon(o);
        ck_assert_int_eq(v1_unknown_join(&u, &joined), 0);
        ck_assert_int_eq(buf_puts(&joined, ""), 0);
        if (ret_unknown)
                *ret_unknown = buf_steal(&joined, NULL);
        buf_free(&joined);
        v1_unknown_clear(&u);
        buf_free(&err);
        json_object_put(o);
        return c;
}

#define EXPECT_NORM(in, want)                                          \
        do {                                                           \
                char *c_ = norm(in, NULL);                             \
                ck_assert_str_eq(c_, want);                            \
                free(c_);                                              \
        } while (0)

/* Normalizes; expects -EINVAL and returns the message. */
static char *norm_err(const char *pod_json)
{
        struct buf err = BUF_INIT;
        json_object *o = parse(pod_json);
        int r = v1_normalize(o, &v1_types[V1_TYPE_POD], "", NULL, &err);

        ck_assert_msg(r == -EINVAL, "v1_normalize(%s) = %d, want -EINVAL", pod_json, r);
        ck_assert_uint_gt(err.len, 0);
        json_object_put(o);
        return buf_steal(&err, NULL);
}

#define EXPECT_ERR(in, want)                                           \
        do {                                                           \
                char *e_ = norm_err(in);                               \
                ck_assert_str_eq(e_, want);                            \
                free(e_);                                              \
        } while (0)

/* ---- normalization ----------------------------------------------------------- */

START_TEST(test_zero_values_and_absence)
{
        /* Plain scalars at zero and emptied plain structs go; pointers,
         * slices and maps stay, empty or zero. */
        EXPECT_NORM("{\"spec\":{\"hostNetwork\":false,\"hostname\":\"\",\"priority\":0,"
                    "\"automountServiceAccountToken\":false,\"terminationGracePeriodSeconds\":0,"
                    "\"volumes\":[],\"nodeSelector\":{},\"securityContext\":{\"runAsUser\":0},"
                    "\"containers\":[{\"name\":\"\",\"tty\":false,\"stdin\":true,"
                    "\"resources\":{\"limits\":null},\"securityContext\":{},"
                    "\"ports\":[{\"containerPort\":0,\"hostPort\":0}],"
                    "\"livenessProbe\":{\"tcpSocket\":{\"port\":0},\"httpGet\":{\"port\":\"\"}}}]}}",
                    "{\"spec\":{\"automountServiceAccountToken\":false,\"containers\":[{"
                    "\"livenessProbe\":{\"httpGet\":{\"port\":\"\"},\"tcpSocket\":{}},"
                    "\"ports\":[{}],\"securityContext\":{},\"stdin\":true}],\"nodeSelector\":{},"
                    "\"priority\":0,\"securityContext\":{\"runAsUser\":0},"
                    "\"terminationGracePeriodSeconds\":0,\"volumes\":[]}}");
        /* A plain struct emptied all the way up goes too. */
        EXPECT_NORM("{\"metadata\":{\"creationTimestamp\":null,\"name\":\"\"},\"spec\":{},"
                    "\"status\":{\"phase\":\"\"}}",
                    "{}");
        /* Times are kept as written. */
        EXPECT_NORM("{\"metadata\":{\"deletionTimestamp\":\"2030-01-01T01:00:00+01:00\"}}",
                    "{\"metadata\":{\"deletionTimestamp\":\"2030-01-01T01:00:00+01:00\"}}");
}
END_TEST

START_TEST(test_nulls)
{
        /* Null members are absent; null elements and map values are the
         * element's zero value; RAW is left as written. */
        EXPECT_NORM("{\"metadata\":{\"labels\":{\"a\":null},\"annotations\":null,"
                    "\"managedFields\":[{\"fieldsV1\":{\"f:x\":null}},null]},"
                    "\"spec\":{\"nodeSelector\":null,\"overhead\":{\"cpu\":null},"
                    "\"containers\":[{\"args\":[\"x\",null],\"env\":[null]}],"
                    "\"readinessGates\":null}}",
                    "{\"metadata\":{\"labels\":{\"a\":\"\"},\"managedFields\":[{\"fieldsV1\":"
                    "{\"f:x\":null}},{}]},\"spec\":{\"containers\":[{\"args\":[\"x\",\"\"],"
                    "\"env\":[{}]}],\"overhead\":{\"cpu\":\"0\"}}}");
}
END_TEST

START_TEST(test_quantities_as_go_spells_numbers)
{
        /* The kubelet turns YAML into Go values and those into JSON, so a
         * number reaches the quantity parser as encoding/json writes a
         * float64 (or an int). */
        EXPECT_NORM("{\"spec\":{\"overhead\":{\"a\":1,\"b\":1.0,\"c\":0.50,\"d\":1e21,\"e\":1e-7,"
                    "\"f\":123456789012,\"g\":1.5e-7,\"h\":-2.5,\"i\":0.000001,\"j\":1e20,"
                    "\"k\":12345678.9,\"l\":18446744073709551615,\"m\":-9223372036854775808,"
                    "\"n\":2.5e300,\"o\":0.1,\"p\":100,\"q\":-0.0}}}",
                    "{\"spec\":{\"overhead\":{\"a\":\"1\",\"b\":\"1\",\"c\":\"0.5\","
                    "\"d\":\"1e+21\",\"e\":\"1e-7\",\"f\":\"123456789012\",\"g\":\"1.5e-7\","
                    "\"h\":\"-2.5\",\"i\":\"0.000001\",\"j\":\"100000000000000000000\","
                    "\"k\":\"12345678.9\",\"l\":\"18446744073709551615\","
                    "\"m\":\"-9223372036854775808\",\"n\":\"2.5e+300\",\"o\":\"0.1\","
                    "\"p\":\"100\",\"q\":\"-0\"}}}");
        /* Strings keep their spelling, blanks around it aside. */
        EXPECT_NORM("{\"spec\":{\"containers\":[{\"resources\":{\"requests\":{"
                    "\"cpu\":\" 1000m\\t\",\"memory\":\"1.0Gi\"}}}]}}",
                    "{\"spec\":{\"containers\":[{\"resources\":{\"requests\":{"
                    "\"cpu\":\"1000m\",\"memory\":\"1.0Gi\"}}}]}}");
        EXPECT_NORM("{\"spec\":{\"volumes\":[{\"name\":\"v\",\"emptyDir\":{\"sizeLimit\":64}}]}}",
                    "{\"spec\":{\"volumes\":[{\"emptyDir\":{\"sizeLimit\":\"64\"},\"name\":\"v\"}]}}");
}
END_TEST

START_TEST(test_unknown_fields)
{
        char *u, *c;

        c = norm("{\"x\":1,\"metadata\":{\"we\\\"ird\":2},\"spec\":{\"containers\":["
                 "{\"name\":\"a\"},{\"name\":\"b\",\"imagePullPolicyy\":\"Never\","
                 "\"resources\":{\"limits\":{\"cpu\":\"1\"},\"claimz\":[]}}],"
                 "\"nodeSelector\":{\"any-key\":\"v\"}}}",
                 &u);
        ck_assert_str_eq(u, "\"x\", \"metadata.we\\\"ird\", \"spec.containers[1].imagePullPolicyy\", "
                            "\"spec.containers[1].resources.claimz\"");
        ck_assert_str_eq(c, "{\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\",\"resources\":"
                            "{\"limits\":{\"cpu\":\"1\"}}}],\"nodeSelector\":{\"any-key\":\"v\"}}}");
        free(u);
        free(c);
        /* RAW members are not looked into. */
        c = norm("{\"metadata\":{\"managedFields\":[{\"fieldsV1\":{\"anything\":{\"x\":1}}}]}}", &u);
        ck_assert_str_eq(u, "");
        free(u);
        free(c);
}
END_TEST

START_TEST(test_unknown_prefix_limit_and_join)
{
        struct v1_unknown u = {NULL, 0, 0};
        struct buf text = BUF_INIT, joined = BUF_INIT;
        json_object *o;

        ck_assert_int_eq(buf_puts(&text, "{\"spec\":{"), 0);
        for (int i = 0; i < V1_NORMALIZE_MAX_UNKNOWN + 3; i++)
                ck_assert_int_eq(buf_printf(&text, "%s\"u%02d\":%d", i ? "," : "", i, i), 0);
        ck_assert_int_eq(buf_puts(&text, "}}"), 0);
        o = parse(text.data);
        ck_assert_int_eq(v1_normalize(o, &v1_types[V1_TYPE_POD], "items[4]", &u, NULL), 0);
        ck_assert_uint_eq(u.n, V1_NORMALIZE_MAX_UNKNOWN);
        ck_assert_uint_eq(u.total, V1_NORMALIZE_MAX_UNKNOWN + 3);
        ck_assert_str_eq(u.paths[0], "items[4].spec.u00");
        ck_assert_int_eq(v1_unknown_join(&u, &joined), 0);
        ck_assert_ptr_nonnull(strstr(joined.data, "\"items[4].spec.u63\" (and 3 more)"));
        /* Lists accumulate over calls; clear empties them. */
        json_object_put(o);
        o = parse("{\"bogus\":1}");
        ck_assert_int_eq(v1_normalize(o, &v1_types[V1_TYPE_POD], NULL, &u, NULL), 0);
        ck_assert_uint_eq(u.total, V1_NORMALIZE_MAX_UNKNOWN + 4);
        v1_unknown_clear(&u);
        ck_assert_uint_eq(u.n, 0);
        ck_assert_uint_eq(u.total, 0);
        v1_unknown_clear(&u);
        v1_unknown_clear(NULL);
        buf_reset(&joined);
        ck_assert_int_eq(v1_unknown_join(&u, &joined), 0);
        ck_assert_uint_eq(joined.len, 0);
        json_object_put(o);
        buf_free(&text);
        buf_free(&joined);
}
END_TEST

START_TEST(test_type_errors)
{
        EXPECT_ERR("{\"spec\":{\"hostNetwork\":\"true\"}}",
                   "spec.hostNetwork: Invalid type: expected boolean, got string");
        EXPECT_ERR("{\"spec\":{\"containers\":{}}}",
                   "spec.containers: Invalid type: expected array, got object");
        EXPECT_ERR("{\"spec\":{\"containers\":[{\"command\":\"sh\"}]}}",
                   "spec.containers[0].command: Invalid type: expected array of strings, got string");
        EXPECT_ERR("{\"metadata\":{\"labels\":[]}}",
                   "metadata.labels: Invalid type: expected map of strings, got array");
        EXPECT_ERR("{\"spec\":{\"overhead\":{\"cpu\":[1]}}}",
                   "spec.overhead.cpu: Invalid type: expected quantity (string or number), got array");
        EXPECT_ERR("{\"spec\":{\"priority\":2147483648}}",
                   "spec.priority: Invalid value: 2147483648: out of range for int32");
        EXPECT_ERR("{\"spec\":{\"priority\":-2147483649}}",
                   "spec.priority: Invalid value: -2147483649: out of range for int32");
        EXPECT_ERR("{\"spec\":{\"priority\":1.5}}",
                   "spec.priority: Invalid type: expected integer, got number");
        EXPECT_ERR("{\"spec\":{\"containers\":[{\"livenessProbe\":{\"httpGet\":{\"port\":true}}}]}}",
                   "spec.containers[0].livenessProbe.httpGet.port: Invalid type: expected integer or "
                   "string, got boolean");
        EXPECT_ERR("{\"metadata\":{\"deletionTimestamp\":5}}",
                   "metadata.deletionTimestamp: Invalid type: expected string, got integer");
        EXPECT_ERR("{\"spec\":\"x\"}", "spec: Invalid type: expected object, got string");
        EXPECT_ERR("{\"spec\":{\"overhead\":{\"cpu\":\"1K\"}}}",
                   "spec.overhead.cpu: Invalid value: \"1K\": unable to parse quantity's suffix");
        EXPECT_ERR("{\"spec\":{\"overhead\":{\"cpu\":\"1e+\"}}}",
                   "spec.overhead.cpu: Invalid value: \"1e+\": unable to parse quantity's suffix");
        EXPECT_ERR("{\"spec\":{\"overhead\":{\"cpu\":\"1\\u0000\"}}}",
                   "spec.overhead.cpu: Invalid value: \"1\\u0000\": quantities must match the regular "
                   "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
        /* Not an object at all. */
        {
                json_object *o = parse("[1]");

                ck_assert_int_eq(v1_normalize(o, &v1_types[V1_TYPE_POD], "", NULL, NULL), -EINVAL);
                json_object_put(o);
        }
}
END_TEST

START_TEST(test_errors_bounded)
{
        struct buf text = BUF_INIT;
        char *e;
        size_t n = 0;

        ck_assert_int_eq(buf_puts(&text, "{\"spec\":{\"containers\":["), 0);
        for (int i = 0; i < V1_NORMALIZE_MAX_ERRORS + 5; i++)
                ck_assert_int_eq(buf_printf(&text, "%s{\"tty\":1}", i ? "," : ""), 0);
        ck_assert_int_eq(buf_puts(&text, "]}}"), 0);
        e = norm_err(text.data);
        for (const char *p = e; (p = strstr(p, "Invalid type")); p++)
                n++;
        ck_assert_uint_eq(n, V1_NORMALIZE_MAX_ERRORS);
        ck_assert_ptr_nonnull(strstr(e, "; (more type errors not shown)"));
        ck_assert_ptr_null(strstr(e, "shown);"));
        free(e);
        {
                /* Without an error buffer the result is the same. */
                json_object *o = parse(text.data);

                ck_assert_int_eq(v1_normalize(o, &v1_types[V1_TYPE_POD], "", NULL, NULL), -EINVAL);
                json_object_put(o);
        }
        buf_free(&text);
}
END_TEST

START_TEST(test_idempotent)
{
        const char *in = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\","
                         "\"labels\":{\"x\":null},\"y\":1},\"spec\":{\"hostNetwork\":false,"
                         "\"overhead\":{\"cpu\":1.50},\"containers\":[{\"name\":\"c\","
                         "\"args\":[null],\"tty\":false,\"resources\":{}}]},\"status\":{}}";
        char *once = norm(in, NULL), *u = NULL, *twice = norm(once, &u);

        ck_assert_str_eq(once, twice);
        ck_assert_str_eq(u, "");
        ck_assert_str_eq(once, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"labels\":{"
                               "\"x\":\"\"},\"name\":\"a\"},\"spec\":{\"containers\":[{\"args\":[\"\"],"
                               "\"name\":\"c\"}],\"overhead\":{\"cpu\":\"1.5\"}}}");
        free(once);
        free(twice);
        free(u);
}
END_TEST

START_TEST(test_pod_list)
{
        struct v1_unknown u = {NULL, 0, 0};
        json_object *o = parse("{\"kind\":\"PodList\",\"metadata\":{\"continue\":\"\",\"x\":1},"
                               "\"items\":[{\"spec\":{\"hostIPC\":false,\"y\":2}}]}");
        char *c;

        ck_assert_int_eq(v1_normalize(o, &v1_types[V1_TYPE_POD_LIST], "", &u, NULL), 0);
        c = canon(o);
        ck_assert_str_eq(c, "{\"items\":[{}],\"kind\":\"PodList\"}");
        ck_assert_uint_eq(u.n, 2);
        ck_assert_str_eq(u.paths[0], "metadata.x");
        ck_assert_str_eq(u.paths[1], "items[0].spec.y");
        free(c);
        v1_unknown_clear(&u);
        json_object_put(o);
}
END_TEST

UNIT_MAIN(test_zero_values_and_absence, test_nulls,
          test_quantities_as_go_spells_numbers, test_unknown_fields, test_unknown_prefix_limit_and_join,
          test_type_errors, test_errors_bounded, test_idempotent, test_pod_list)
