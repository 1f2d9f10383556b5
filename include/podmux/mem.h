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

#endif
