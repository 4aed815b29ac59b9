# Sourced by the tools' measurement scripts: fills the associative array
# `lib` (declared by the caller, with dpmalloc and glibc already in it)
# with the Debian peers' preloadable libraries that are installed.
# (if, not &&: the scripts run under set -e, and a sourced file's status
# is its last command's)
for d in /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib; do
    if [ -e "$d/libjemalloc.so.2" ]; then lib[jemalloc]=$d/libjemalloc.so.2; fi
    if [ -e "$d/libtcmalloc_minimal.so.4" ]; then lib[tcmalloc]=$d/libtcmalloc_minimal.so.4; fi
    if [ -e "$d/libmimalloc.so.2" ]; then lib[mimalloc]=$d/libmimalloc.so.2; fi
done
