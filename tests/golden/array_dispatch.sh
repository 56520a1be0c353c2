#!/usr/bin/env bash
# Job array of b2batch: element N runs the wrapper of the N-th task below.
index=${SLURM_ARRAY_TASK_ID}
case "$index" in
1) exec <BASE>/a/executable_wrapper.sh ;;
2) exec '<BASE>/b'"'"'c/executable_wrapper.sh' ;;
esac
echo "b2batch: no task for array index $index" >&2
exit 2
