/*
 * curl_loop — libcurl's multi interface driven by the event loop.
 *
 * Owns: one CURLM handle, the loop watches of the sockets libcurl opens and
 * the one timer libcurl asks for.
 * Never: configures or frees an easy handle (the caller does both; only
 * curl_loop_cancel() frees one, for the caller), blocks, or logs.  Every HTTP user of the daemon (the HTTP source, the API server
 * client, gRPC calls to plugins) shares it, so all transfers make progress
 * in the one loop with no thread of their own.
 *
 * curl_global_init() must have been called by main before curl_loop_new().
 */
#ifndef PODMUX_CURL_LOOP_H
#define PODMUX_CURL_LOOP_H

#include <curl/curl.h>

#include "util/loop.h"

struct curl_loop;

/* Called once when a transfer ends (result is CURLE_OK or the failure;
 * CURLE_OUT_OF_MEMORY also when one of its sockets could not be watched);
 * the easy handle is already out of the multi handle and belongs to the
 * caller again (who may free it inside the callback). */
typedef void (*curl_loop_done_fn)(void *data, CURL *easy, CURLcode result);

int curl_loop_new(struct loop *loop, struct curl_loop **ret_cl);
/* Removes (without callbacks) every transfer still running.  NULL-safe. */
void curl_loop_free(struct curl_loop *cl);

/* Starts a transfer.  0, -ENOMEM (ours or libcurl's) or -EIO (libcurl
 * refused the handle). */
int curl_loop_add(struct curl_loop *cl, CURL *easy, curl_loop_done_fn fn, void *data);
/* Cancels a running transfer: no callback.  Safe with a handle that is not
 * running.  NULL-safe. */
void curl_loop_remove(struct curl_loop *cl, CURL *easy);
/* The owner's teardown of its transfer: curl_loop_remove(), then the easy
 * handle freed and *easy set to NULL.  Nothing when *easy is NULL. */
void curl_loop_cancel(struct curl_loop *cl, CURL **easy);

/*
 * libcurl (7.88, and the versions around it) ignores a failure to copy
 * the query of the URL when it sets a request up, and sends the request
 * without it: a list of one node's pods becomes a list of every pod of
 * the cluster.  A guard, armed on an easy handle, reads each request line
 * libcurl sends (through its debug callback, so verbose output goes to
 * the guard, never to stderr) and records one whose URL has a query but
 * whose request line has none.  The owner then treats the transfer as
 * failed for want of memory, before using a byte of its response.
 * The guard must outlive the transfer.
 */
struct curl_guard {
        bool mangled;
};
void curl_guard_arm(CURL *easy, struct curl_guard *g);

#endif
