/*
 * json_get — reading members of json-c objects without the checks at
 * every call: a missing member, a JSON null and a parent that is not an
 * object all read as absent; and the name of a value's type.
 *
 * Owns: nothing; what it returns belongs to the tree.
 */
#ifndef PODMUX_JSON_GET_H
#define PODMUX_JSON_GET_H

#include <json-c/json.h>

/* Member key of o, or NULL (o NULL or not an object, key absent, or null). */
json_object *json_get(json_object *o, const char *key);
/* The same, when the member has type t; else NULL. */
json_object *json_get_type(json_object *o, const char *key, json_type t);
/* The string member key of o, or def when absent or not a string. */
const char *json_get_str(json_object *o, const char *key, const char *def);

/* What a value is, in a message: "null", "boolean", "integer", "number",
 * "string", "object" or "array". */
const char *json_type_word(json_object *v);

#endif
