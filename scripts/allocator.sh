# The C allocator of the processes a SmolLM2-sized XLA script starts, sourced by scripts/smollm2-experiment.sh and
# scripts/bench-smollm2-step.sh. XLA's CPU plugin allocates each call's temporary buffers with malloc, several GB a
# SmolLM2 step: glibc maps every buffer above its 32 MiB ceiling afresh and the kernel zeroes its pages each time.
#
#   MCPRL_ALLOCATOR=glibc     (default) glibc's malloc with transparent huge pages (GLIBC_TUNABLES=glibc.malloc.hugetlb=1);
#   MCPRL_ALLOCATOR=jemalloc  Debian's libjemalloc2 preloaded with its freed pages kept
#                             (MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1): the buffers are reused, not zeroed;
#   MCPRL_ALLOCATOR=auto      jemalloc where libjemalloc.so.2 is installed, else glibc.
#
# MCPRL_JEMALLOC=PATH names the library where it is not in one of Debian's or Fedora's folders.
#
# docs/benchmarks.md ("jemalloc for XLA's buffers") has the measurements. Both settings must be in a process's
# environment when it starts (mcprl cannot set them itself); a GLIBC_TUNABLES, LD_PRELOAD or MALLOC_CONF already set
# is kept. allocator_name says which one is in effect.
jemalloc_lib() {
  local p
  if [ -n "${MCPRL_JEMALLOC:-}" ]; then [ -e "$MCPRL_JEMALLOC" ] && echo "$MCPRL_JEMALLOC"; return; fi
  for p in /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /usr/lib/aarch64-linux-gnu/libjemalloc.so.2 /usr/lib64/libjemalloc.so.2 /usr/lib/libjemalloc.so.2; do
    [ -e "$p" ] && { echo "$p"; return 0; }
  done
  return 1
}
case "${MCPRL_ALLOCATOR:=glibc}" in
  auto) if lib=$(jemalloc_lib); then MCPRL_ALLOCATOR=jemalloc; else MCPRL_ALLOCATOR=glibc; fi ;;
  jemalloc) lib=$(jemalloc_lib) || { echo "MCPRL_ALLOCATOR=jemalloc: no libjemalloc.so.2 (apt-get install libjemalloc2, or MCPRL_JEMALLOC=PATH)" >&2; exit 2; } ;;
  glibc) ;;
  *) echo "MCPRL_ALLOCATOR=$MCPRL_ALLOCATOR: want auto, glibc or jemalloc" >&2; exit 2 ;;
esac
if [ "$MCPRL_ALLOCATOR" = jemalloc ]; then
  export LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}"
  export MALLOC_CONF="${MALLOC_CONF:-dirty_decay_ms:-1,muzzy_decay_ms:-1}"
else
  export GLIBC_TUNABLES="${GLIBC_TUNABLES:-glibc.malloc.hugetlb=1}"
fi
export MCPRL_ALLOCATOR
allocator_name() {
  if [ "$MCPRL_ALLOCATOR" = jemalloc ]; then echo "jemalloc ($lib, MALLOC_CONF=$MALLOC_CONF)"; else echo "glibc (GLIBC_TUNABLES=$GLIBC_TUNABLES)"; fi
}
