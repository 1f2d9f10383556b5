/*
 * fuzz_stream_request — the one line a client of the update stream may
 * send (stream_request_parse), as the stream server hands it: without its
 * newline.  Checked: a refusal has a reason; an accepted line fills the
 * whole request.
 */
#include "fuzz.h"

#include "stream/stream_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct stream_request req;
        const char *why = NULL;
        int r;

        memset(&req, 0xa5, sizeof(req));
        r = stream_request_parse((const char *)data, size, &req, &why);
        if (r == 0) {
                FUZZ_ASSERT(why == NULL);
                /* Both flags were written (0xa5 is not a valid bool). */
                FUZZ_ASSERT(req.status == true || req.status == false);
                FUZZ_ASSERT(req.have_resume || req.resume_after == 0);
        } else {
                FUZZ_ASSERT(r == -EINVAL || r == -ENOMEM);
                FUZZ_ASSERT(r == -ENOMEM || (why && why[0]));
        }
        return 0;
}
