# Sourced by the tools' measurement scripts: fills the associative array
# `lib` (declared by the caller, with dpmalloc and glibc already in it)
# with the Debian peers' preloadable libraries that are installed.
for d in /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib; do
    [ -e "$d/libjemalloc.so.2" ] && lib[jemalloc]=$d/libjemalloc.so.2
    [ -e "$d/libtcmalloc_minimal.so.4" ] && lib[tcmalloc]=$d/libtcmalloc_minimal.so.4
    [ -e "$d/libmimalloc.so.2" ] && lib[mimalloc]=$d/libmimalloc.so.2
done
