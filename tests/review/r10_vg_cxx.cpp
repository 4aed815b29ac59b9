// r10_vg_cxx.cpp - a bug-free C++ program (map/string/vector/new/delete) plus
// one planted use-after-free, for r10_valgrind_entry_points.sh: under the
// documented memcheck invocation with a -DDPM_VALGRIND=ON library it must
// report only the planted read (line "volatile long x = u->b").
#include <cstdio>
#include <cstring>
#include <vector>
#include <string>
#include <map>
struct Node { long a, b, c; };
int main() {
  // ordinary C++ program, no bugs: should be memcheck-clean
  std::map<int, std::string> m;
  for (int i = 0; i < 2000; i++) m[i] = std::string(40 + i % 50, 'x');
  for (int r = 0; r < 3; r++) {
    std::vector<Node *> v;
    for (int i = 0; i < 1000; i++) { Node *n = new Node; n->a = n->b = n->c = i; v.push_back(n); }
    long s = 0; for (auto *n : v) s += n->a + n->b + n->c;
    for (auto *n : v) delete n;
    printf("r %d s %ld\n", r, s);
  }
  // planted use-after-free through new/delete: memcheck should report it
  Node *u = new Node; u->a = 1; delete u;
  volatile long x = u->b; (void)x;
  printf("size %zu\n", m.size());
  return 0;
}
