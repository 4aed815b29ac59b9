/*
 * test_list.c - the intrusive list (list.h) driven by random pushes at
 * either end, removals anywhere and pops, against an array model: after
 * every step the walk yields the model's order, the last node is the
 * model's last, and list_check accepts the links. A corrupted back link
 * must be reported.
 */
#include "list.h"
#include "unit.h"

#define NITEMS 64

typedef struct item {
    int id;
    list_node_t node;
} item_t;

static item_t items[NITEMS];
static int model[NITEMS];   /* ids, first to last */
static int nmodel;
static bool linked[NITEMS];

static void check_matches(const list_t *l, int step)
{
    EXPECT_TRUE(list_check(l) == nmodel, "step %d: list_check %ld, model holds %d", step, list_check(l), nmodel);
    int i = 0;
    list_for_each(const item_t, it, l, node) {
        if (i >= nmodel || it->id != model[i]) {
            EXPECT_TRUE(false, "step %d: position %d holds %d, model %d", step, i, it->id, i < nmodel ? model[i] : -1);
            return;
        }
        i++;
    }
    EXPECT_TRUE(i == nmodel, "step %d: walked %d items, model holds %d", step, i, nmodel);
    const item_t *last = list_item(list_last(l), item_t, node);
    EXPECT_TRUE(nmodel == 0 ? last == NULL : last != NULL && last->id == model[nmodel - 1],
                "step %d: wrong last item", step);
    EXPECT_TRUE(list_empty(l) == (nmodel == 0), "step %d: list_empty wrong", step);
}

static void model_remove(int id)
{
    int i = 0;
    while (model[i] != id)
        i++;
    memmove(&model[i], &model[i + 1], (size_t)(nmodel - i - 1) * sizeof(int));
    nmodel--;
    linked[id] = false;
}

static void test_random_ops(void)
{
    list_t l = {0};
    uint64_t rng = 0x1234567;
    for (int i = 0; i < NITEMS; i++)
        items[i].id = i;
    for (int step = 0; step < 200000; step++) {
        int id = (int)(unit_rand(&rng) % NITEMS);
        unsigned op = (unsigned)(unit_rand(&rng) % 4);
        if (!linked[id] && op < 2) {
            if (op == 0) {
                list_push_front(&l, &items[id].node);
                memmove(&model[1], &model[0], (size_t)nmodel * sizeof(int));
                model[0] = id;
            } else {
                list_push_back(&l, &items[id].node);
                model[nmodel] = id;
            }
            nmodel++;
            linked[id] = true;
        } else if (linked[id] && op == 2) {
            list_remove(&l, &items[id].node);
            EXPECT_TRUE(items[id].node.next == NULL && items[id].node.prev == NULL, "removed node keeps links");
            model_remove(id);
        } else if (op == 3) {
            item_t *it = list_item(list_pop_front(&l), item_t, node);
            EXPECT_TRUE((it == NULL) == (nmodel == 0), "step %d: pop of %s list", step, nmodel ? "a" : "an empty");
            if (it != NULL) {
                EXPECT_TRUE(it->id == model[0], "step %d: popped %d, first was %d", step, it->id, model[0]);
                model_remove(it->id);
            }
        }
        check_matches(&l, step);
        if (unit_failed != 0)
            return;
    }
}

static void test_check_finds_broken_links(void)
{
    list_t l = {0};
    for (int i = 0; i < 4; i++)
        list_push_back(&l, &items[i].node);
    EXPECT_TRUE(list_check(&l) == 4, "four linked");
    items[2].node.prev = &items[0].node;   /* skips item 1 */
    EXPECT_TRUE(list_check(&l) == -1, "broken back link not found");
    items[2].node.prev = &items[1].node;
    items[0].node.prev = &items[2].node;   /* first's prev is not the last */
    EXPECT_TRUE(list_check(&l) == -1, "wrong last not found");
}

int main(void)
{
    test_random_ops();
    test_check_finds_broken_links();
    return unit_finish("test_list");
}
