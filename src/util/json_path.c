/*
 * json_path — a path in a message, byte for byte (see
 * src/util/json_path.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/json_get.h"
#include "util/json_path.h"

static bool valid_utf8(const char *s, size_t n)
{
        for (size_t i = 0; i < n;) {
                size_t len = (unsigned char)s[i] < 0x80 ? 1 : utf8_len((const unsigned char *)s + i, n - i);

                if (len == 0)
                        return false;
                i += len;
        }
        return true;
}

int json_path_put(struct buf *out, const char *path)
{
        static const char digits[] = "0123456789abcdef";
        size_t n = path ? strlen(path) : 0;

        if (!path)
                return buf_puts(out, "\"path\":null") < 0 ? -ENOMEM : 0;
        if (buf_puts(out, "\"path\":") < 0 || buf_json_string(out, path, n) < 0)
                return -ENOMEM;
        /* Only where "path" lost bytes: most paths cost nothing more. */
        if (valid_utf8(path, n))
                return 0;
        if (buf_puts(out, ",\"" JSON_PATH_HEX "\":\"") < 0 || buf_reserve(out, 2 * n + 1) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)path[i];
                char two[2] = {digits[c >> 4], digits[c & 15]};

                if (buf_append(out, two, 2) < 0)
                        return -ENOMEM;
        }
        return buf_putc(out, '"') < 0 ? -ENOMEM : 0;
}

static int hex_digit(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

int json_path_get(json_object *o, char **ret, size_t *ret_len)
{
        json_object *path = json_get(o, "path"), *hex = json_get(o, JSON_PATH_HEX);
        const char *s;
        size_t n, len;
        char *out;

        if (!path)
                return -ENOENT;
        if (!json_object_is_type(path, json_type_string) || (hex && !json_object_is_type(hex, json_type_string)))
                return -EINVAL;
        if (!hex) {
                s = json_object_get_string(path);
                len = (size_t)json_object_get_string_len(path);
                if (memchr(s, '\0', len))
                        return -EINVAL;
                out = malloc(len + 1);
                if (!out)
                        return -ENOMEM;
                memcpy(out, s, len + 1);
                *ret = out;
                *ret_len = len;
                return 0;
        }
        s = json_object_get_string(hex);
        n = (size_t)json_object_get_string_len(hex);
        if (n % 2)
                return -EINVAL;
        out = malloc(n / 2 + 1);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < n; i += 2) {
                int hi = hex_digit(s[i]), lo = hex_digit(s[i + 1]);

                if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                        free(out);
                        return -EINVAL;
                }
                out[i / 2] = (char)(hi << 4 | lo);
        }
        out[n / 2] = '\0';
        *ret = out;
        *ret_len = n / 2;
        return 0;
}

bool json_path_is(json_object *o, const char *path, size_t len)
{
        json_object *p = json_get_type(o, "path", json_type_string), *hex = json_get(o, JSON_PATH_HEX);
        const char *s;

        if (!p)
                return false;
        if (!hex) {
                s = json_object_get_string(p);
                return (size_t)json_object_get_string_len(p) == len && memcmp(s, path, len) == 0;
        }
        if (!json_object_is_type(hex, json_type_string) || (size_t)json_object_get_string_len(hex) != 2 * len)
                return false;
        s = json_object_get_string(hex);
        for (size_t i = 0; i < len; i++) {
                int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);

                if (hi < 0 || lo < 0 || (char)(hi << 4 | lo) != path[i])
                        return false;
        }
        return true;
}
