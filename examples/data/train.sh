#!/bin/sh
# The README's data example's training program: it reads the channel
# "train" (staged from S3 into $SM_CHANNEL_TRAIN before it starts) and
# leaves its "model" in $SM_MODEL_DIR, which qshare uploads as
# model.tar.gz once it has exited.
set -e
rows=$(wc -l < "$SM_CHANNEL_TRAIN/train.csv")
echo "rows=$rows" > "$SM_MODEL_DIR/model.txt"
echo "trained on $rows rows"
