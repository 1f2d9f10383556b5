/*
 * test_v1_schema — the generated core/v1 table (include/podmux/
 * v1_schema.h, src/kube/v1_schema_table.c): well formed for the binary
 * search, and saying what the Go types say about the fields the merge
 * rules hinge on.  That the table is what scripts/gen-v1-schema writes is
 * tests/schema-check.sh's job.
 */
#include <string.h>

#include "kube/v1_schema.h"
#include "unit.h"

static const struct v1_type *type_named(const char *name)
{
        for (unsigned i = 0; i < v1_n_types; i++)
                if (strcmp(v1_types[i].name, name) == 0)
                        return &v1_types[i];
        ck_abort_msg("no type %s in the table", name);
        return NULL;
}

static void expect_field(const char *type, const char *name, enum v1_kind kind,
                         enum v1_shape shape, bool omitempty)
{
        const struct v1_field *f = v1_schema_field(type_named(type), name);

        ck_assert_msg(f != NULL, "%s has no member %s", type, name);
        ck_assert_msg(f->kind == kind && f->shape == shape && f->omitempty == omitempty,
                      "%s.%s: kind %u shape %u omitempty %d", type, name, f->kind, f->shape,
                      f->omitempty);
}

/* ---- the table ------------------------------------------------------------ */

START_TEST(test_table_well_formed)
{
        unsigned fields = 0;

        ck_assert_str_eq(v1_types[V1_TYPE_POD].name, "Pod");
        ck_assert_str_eq(v1_types[V1_TYPE_POD_LIST].name, "PodList");
        ck_assert_str_eq(v1_schema_kubernetes, "1.37");
        ck_assert_uint_eq(strlen(v1_schema_commit), 40);
        for (unsigned i = 0; i < v1_n_types; i++) {
                const struct v1_type *t = &v1_types[i];

                for (unsigned j = 0; j < t->n_fields; j++) {
                        const struct v1_field *f = &t->fields[j];

                        /* Sorted as strcmp orders, for the binary search. */
                        if (j)
                                ck_assert_msg(strcmp(t->fields[j - 1].name, f->name) < 0,
                                              "%s: %s before %s", t->name, t->fields[j - 1].name,
                                              f->name);
                        ck_assert_uint_le(f->kind, V1_STRUCT);
                        ck_assert_uint_le(f->shape, V1_MAP);
                        if (f->kind == V1_STRUCT)
                                ck_assert_uint_lt(f->type, v1_n_types);
                        ck_assert_ptr_eq(v1_schema_field(t, f->name), f);
                }
                fields += t->n_fields;
        }
        ck_assert_uint_eq(fields, v1_n_fields);
}
END_TEST

START_TEST(test_table_facts)
{
        /* What the cases hinge on, as the Go types say. */
        expect_field("PodSpec", "hostNetwork", V1_BOOL, V1_PLAIN, true);
        expect_field("PodSpec", "hostname", V1_STRING, V1_PLAIN, true);
        expect_field("PodSpec", "automountServiceAccountToken", V1_BOOL, V1_POINTER, true);
        expect_field("PodSpec", "terminationGracePeriodSeconds", V1_INT64, V1_POINTER, true);
        expect_field("PodSpec", "volumes", V1_STRUCT, V1_SLICE, true);
        expect_field("PodSpec", "containers", V1_STRUCT, V1_SLICE, false);
        expect_field("PodSpec", "nodeSelector", V1_STRING, V1_MAP, true);
        expect_field("PodSpec", "overhead", V1_QUANTITY, V1_MAP, true);
        expect_field("PodSpec", "securityContext", V1_STRUCT, V1_POINTER, true);
        expect_field("PodSecurityContext", "runAsUser", V1_INT64, V1_POINTER, true);
        expect_field("Container", "tty", V1_BOOL, V1_PLAIN, true);
        expect_field("Container", "name", V1_STRING, V1_PLAIN, false);
        expect_field("Container", "resources", V1_STRUCT, V1_PLAIN, true);
        expect_field("ResourceRequirements", "limits", V1_QUANTITY, V1_MAP, true);
        expect_field("ContainerPort", "containerPort", V1_INT32, V1_PLAIN, false);
        expect_field("HTTPGetAction", "port", V1_INT_OR_STRING, V1_PLAIN, false);
        expect_field("EmptyDirVolumeSource", "sizeLimit", V1_QUANTITY, V1_POINTER, true);
        expect_field("metav1.ObjectMeta", "deletionTimestamp", V1_TIME, V1_POINTER, true);
        expect_field("metav1.ObjectMeta", "creationTimestamp", V1_TIME, V1_PLAIN, true);
        expect_field("metav1.ObjectMeta", "uid", V1_STRING, V1_PLAIN, true);
        expect_field("metav1.ManagedFieldsEntry", "fieldsV1", V1_RAW, V1_POINTER, true);
        expect_field("Pod", "kind", V1_STRING, V1_PLAIN, true);
        /* Embedded structs are merged into their holder. */
        expect_field("Probe", "httpGet", V1_STRUCT, V1_POINTER, true);
        expect_field("Probe", "periodSeconds", V1_INT32, V1_PLAIN, true);
        expect_field("Volume", "hostPath", V1_STRUCT, V1_POINTER, true);
        expect_field("Volume", "name", V1_STRING, V1_PLAIN, false);
        expect_field("EphemeralContainer", "targetContainerName", V1_STRING, V1_PLAIN, true);
        expect_field("EphemeralContainer", "image", V1_STRING, V1_PLAIN, true);
        expect_field("SecretVolumeSource", "defaultMode", V1_INT32, V1_POINTER, true);
        /* Case matters; absent names are absent. */
        ck_assert_ptr_null(v1_schema_field(type_named("PodSpec"), "HostNetwork"));
        ck_assert_ptr_null(v1_schema_field(type_named("PodSpec"), ""));
        ck_assert_ptr_null(v1_schema_field(type_named("PodSpec"), "zzz"));
        ck_assert_ptr_null(v1_schema_field(type_named("PodSpec"), "AAA"));
}
END_TEST

UNIT_MAIN(test_table_well_formed, test_table_facts)
