#!/bin/sh
# A training loop in plain shell that shows the contract of qshare's process
# executor: checkpoint on SIGTERM, resume from SM_CHECKPOINT_DIR.
#
# Each "step" sleeps SM_HP_STEP_SECONDS (default 0.1); the job runs
# SM_HP_STEPS steps (default 50), saves its step every 10 steps and when it
# is asked to stop, and on its next attempt starts from the saved step.
set -eu
: "${SM_CHECKPOINT_DIR:?run me under qshare: SM_CHECKPOINT_DIR is not set}"
ckpt="$SM_CHECKPOINT_DIR/step"
steps="${SM_HP_STEPS:-50}"
pause="${SM_HP_STEP_SECONDS:-0.1}"

step=0
if [ -f "$ckpt" ]; then
  step=$(cat "$ckpt")
  echo "attempt ${QSHARE_ATTEMPT:-?}: resuming from step $step"
else
  echo "attempt ${QSHARE_ATTEMPT:-?}: starting from scratch"
fi

# Write to a temporary file and rename: a checkpoint is whole or absent.
save() { echo "$step" > "$ckpt.tmp" && mv "$ckpt.tmp" "$ckpt"; }

# qshare sends SIGTERM to the job's process group, then SIGKILL after the
# grace period (QSHARE_STOP_GRACE, default 120 s). Save and exit in time.
trap 'echo "SIGTERM at step $step: checkpoint saved"; save; exit 0' TERM

while [ "$step" -lt "$steps" ]; do
  sleep "$pause" & wait $!   # a step of work; wait returns at once on a signal
  step=$((step + 1))
  if [ $((step % 10)) -eq 0 ]; then
    save
    echo "step $step"
  fi
done
save
echo "trained $steps steps" > "$SM_MODEL_DIR/model.txt"
echo "done: $steps steps"
