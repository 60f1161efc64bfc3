#!/usr/bin/env bash
# The second device run: real failures and more framework output (see README.md here).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-$PWD/gpu-check-out}
W=$(mktemp -d)
export PYTHONUNBUFFERED=1
cd "$W" || exit 1
for what in oom assert nan; do
  timeout 120 python3 "$HERE/failures.py" $what > "fail-$what.log" 2>&1
  echo "$what rc=$?" | tee -a summary.txt
  tail -n 2 "fail-$what.log" | cut -c1-200 | tee -a summary.txt
done
NCCL_DEBUG=INFO timeout 120 torchrun --standalone --nproc_per_node=1 "$ROOT/examples/ddp_train.py" \
  --steps 20 --checkpoint-every 0 --checkpoint-dir ckpt > ddp-nccl-info.log 2>&1
echo "nccl-info rc=$? lines=$(wc -l < ddp-nccl-info.log)" | tee -a summary.txt
timeout 120 python3 "$HERE/frameworks.py" lightning-tqdm > lightning-tqdm.log 2>&1
echo "lightning-tqdm rc=$?" | tee -a summary.txt
timeout 120 python3 "$HERE/frameworks.py" hf-plain > hf-plain.log 2>&1
echo "hf-plain rc=$?" | tee -a summary.txt
rm -rf ckpt lightning_logs hf-out
mkdir -p "$OUT"
cp summary.txt "$OUT/"
tar czf "$OUT/gpu-check-2.tar.gz" .
