/*
 * mem — giving freed memory back to the system after a large piece of
 * work (a big list, a relist, a burst of files).
 *
 * The allocator keeps freed memory for reuse, so the daemon's resident
 * size stays at the peak of the largest list it ever decoded.  Callers
 * that just freed much call mem_give_back() once.  Cost: a walk of the
 * allocator's free lists, O(heap); never call it per event.
 */
#ifndef PODMUX_MEM_H
#define PODMUX_MEM_H

void mem_give_back(void);

/*
 * Sets the allocator up for a long-running daemon, once, before the
 * first allocation that matters: blocks of MEM_MAP_THRESHOLD bytes or more
 * (a list body, a SET's text, the stream's arena segments) are mapped
 * apart from the heap and unmapped when freed, and free memory at the
 * heap's top beyond MEM_TRIM_THRESHOLD goes back at once.  glibc would
 * otherwise raise both thresholds after the first large block is freed,
 * and a big list would leave the heap at its peak.  No-op elsewhere.
 */
/* The trim threshold is above the 64 KiB of buffers libyaml allocates
 * for every manifest it parses, so a file drop does not give them back
 * and take them again (two brk() calls and their page work a drop, about
 * a tenth of its CPU: scripts/bench drop_c).  At most that much more
 * stays at the top, and little of it is ever touched. */
#define MEM_MAP_THRESHOLD (128u * 1024u)
#define MEM_TRIM_THRESHOLD (128u * 1024u)
#define MEM_TOP_PAD (16u * 1024u)
void mem_tune(void);

#endif
