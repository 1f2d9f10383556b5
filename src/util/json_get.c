/*
 * json_get — member access (see src/util/json_get.h).
 */
#include "util/json_get.h"

json_object *json_get(json_object *o, const char *key)
{
        json_object *v = NULL;

        if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
                return NULL;
        return v; /* json-c holds a null as NULL */
}

json_object *json_get_type(json_object *o, const char *key, json_type t)
{
        json_object *v = json_get(o, key);

        return v && json_object_is_type(v, t) ? v : NULL;
}

const char *json_get_str(json_object *o, const char *key, const char *def)
{
        json_object *v = json_get_type(o, key, json_type_string);

        return v ? json_object_get_string(v) : def;
}

const char *json_type_word(json_object *v)
{
        switch (json_object_get_type(v)) {
        case json_type_null:
                return "null";
        case json_type_boolean:
                return "boolean";
        case json_type_int:
                return "integer";
        case json_type_double:
                return "number";
        case json_type_string:
                return "string";
        case json_type_object:
                return "object";
        case json_type_array:
                return "array";
        }
        return "value";
}
