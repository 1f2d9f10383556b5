/*
 * v1_schema — the facts of the core/v1 API types that decide how the
 * kubelet's decoder and Go's deep equality see a pod: for every struct a
 * Pod or a PodList reaches, its JSON members, what each holds (a scalar,
 * a struct, a quantity, ...), whether it is a plain value, a pointer, a
 * slice or a map, and whether its tag says omitempty.
 *
 * Owns: the table, generated once by scripts/gen-v1-schema into
 * src/kube/v1_schema_table.c (checked in; the Kubernetes version and
 * commit are in that file), and member lookup.
 * Never: allocates, reads or changes JSON (v1_normalize does that).
 *
 * Cost: v1_schema_field() is a binary search over the struct's members
 * (at most 64 in v1), a handful of strcmp calls.
 */
#ifndef PODMUX_V1_SCHEMA_H
#define PODMUX_V1_SCHEMA_H

#include <stdbool.h>
#include <stdint.h>

/* What a member holds: the value itself, or each element of a slice or
 * each value of a map. */
enum v1_kind {
        V1_STRING,
        V1_BOOL,
        V1_INT32,
        V1_INT64,
        V1_FLOAT64,
        V1_BYTES,         /* []byte: a base64 string; nil != empty */
        V1_QUANTITY,      /* resource.Quantity: a string or a JSON number */
        V1_INT_OR_STRING, /* intstr.IntOrString: int32 or string, kept apart */
        V1_TIME,          /* metav1.Time / MicroTime: an RFC 3339 string */
        V1_RAW,           /* any JSON, kept as written (metav1.FieldsV1) */
        V1_STRUCT,        /* a struct of this table: see v1_field.type */
};

/* How the Go field holds it. */
enum v1_shape {
        V1_PLAIN,   /* a value: its zero value is the same as absent */
        V1_POINTER, /* nil (absent) differs from a pointer to the zero value */
        V1_SLICE,   /* nil (absent) differs from an empty slice */
        V1_MAP,     /* string keys; nil (absent) differs from an empty map */
};

struct v1_field {
        const char *name; /* JSON name */
        uint8_t kind;     /* enum v1_kind */
        uint8_t shape;    /* enum v1_shape */
        bool omitempty;
        uint16_t type; /* V1_STRUCT: index in v1_types */
};

struct v1_type {
        const char *name;              /* Go name, "metav1." for meta/v1 */
        const struct v1_field *fields; /* sorted bytewise by name */
        unsigned n_fields;
};

/* Path frames (members, slice indexes, map keys) a walk into a Pod may
 * need: at least the table's deepest path, which the generated file
 * checks at compile time (v1 has no recursive type, so it is finite). */
#define V1_SCHEMA_MAX_FRAMES 32

/* The roots' places in v1_types (the generator puts them first). */
#define V1_TYPE_POD 0u
#define V1_TYPE_POD_LIST 1u

extern const struct v1_type v1_types[];
/* The table's sizes (tests only). */
extern const unsigned v1_n_types;
extern const unsigned v1_n_fields;
/* The Kubernetes minor version ("1.37") and the k8s.io/api commit the
 * table was generated from. */
extern const char v1_schema_kubernetes[];
extern const char v1_schema_commit[];

/* The member called name of struct type, or NULL if v1 has none. */
const struct v1_field *v1_schema_field(const struct v1_type *type, const char *name);

#endif
