/*
 * list.h - the intrusive doubly linked list that every room uses: an
 * element holds a list_node_t, a list is a list_t of one pointer.
 *
 * Forward links end in NULL, so a walk is a plain loop; the first node's
 * prev points at the last one, so that appending and finding the last
 * node are O(1) while a list head stays one pointer (a page heap keeps
 * hundreds of run-index lists). A node that is on no list has NULL links.
 *
 * Owns: nothing. Touches: only the nodes it is given. Below every room.
 */
#ifndef DPM_LIST_H
#define DPM_LIST_H

#include "util.h"

typedef struct list_node {
    struct list_node *next;   /* NULL at the last node */
    struct list_node *prev;   /* the last node, at the first node */
} list_node_t;

typedef struct list {
    list_node_t *first;
} list_t;

DPM_INLINE void *list_item_at(const list_node_t *n, size_t offset)
{
    return n == NULL ? NULL : (void *)((uintptr_t)n - offset);
}
/* The element that holds node in its member `field`, or NULL for NULL. */
#define list_item(node, type, field) ((type *)list_item_at((node), offsetof(type, field)))

/* Every element of l, first to last; the body must not unlink var. */
#define list_for_each(type, var, l, field)                                      \
    for (type *var = list_item((l)->first, type, field); var != NULL;          \
         var = list_item(var->field.next, type, field))

DPM_INLINE bool list_empty(const list_t *l) { return l->first == NULL; }
DPM_INLINE list_node_t *list_first(const list_t *l) { return l->first; }
DPM_INLINE list_node_t *list_last(const list_t *l) { return l->first != NULL ? l->first->prev : NULL; }

DPM_INLINE void list_push_front(list_t *l, list_node_t *n)
{
    list_node_t *first = l->first;
    n->next = first;
    if (first != NULL) {
        n->prev = first->prev;
        first->prev = n;
    } else {
        n->prev = n;
    }
    l->first = n;
}

DPM_INLINE void list_push_back(list_t *l, list_node_t *n)
{
    list_node_t *first = l->first;
    n->next = NULL;
    if (first == NULL) {
        n->prev = n;
        l->first = n;
        return;
    }
    list_node_t *last = first->prev;
    last->next = n;
    n->prev = last;
    first->prev = n;
}

/* Links n right after pos, a node of l. */
DPM_INLINE void list_insert_after(list_t *l, list_node_t *pos, list_node_t *n)
{
    n->next = pos->next;
    n->prev = pos;
    if (pos->next != NULL)
        pos->next->prev = n;
    else
        l->first->prev = n;   /* n is the new last */
    pos->next = n;
}

DPM_INLINE void list_remove(list_t *l, list_node_t *n)
{
    list_node_t *first = l->first;
    if (n == first) {
        l->first = n->next;
        if (n->next != NULL)
            n->next->prev = n->prev;
    } else {
        n->prev->next = n->next;
        if (n->next != NULL)
            n->next->prev = n->prev;
        else
            first->prev = n->prev;   /* n was the last */
    }
    n->next = n->prev = NULL;
}

/* Unlinks and returns the first node, or NULL. */
DPM_INLINE list_node_t *list_pop_front(list_t *l)
{
    list_node_t *n = l->first;
    if (n != NULL)
        list_remove(l, n);
    return n;
}

/* Checks the links of l: every node's prev is its predecessor, the
 * first's prev is the last. Returns the number of nodes, or -1 if a link
 * is broken. Walks the whole list: for checkers. */
DPM_INLINE long list_check(const list_t *l)
{
    long n = 0;
    const list_node_t *prev = NULL;
    for (const list_node_t *x = l->first; x != NULL; prev = x, x = x->next, n++)
        if (x != l->first && x->prev != prev)
            return -1;
    if (l->first != NULL && l->first->prev != prev)
        return -1;
    return n;
}

#endif
