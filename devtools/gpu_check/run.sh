#!/usr/bin/env bash
# The checks only a real GPU can make, in one run on a GPU machine (see README.md here).
# Writes everything under $OUT (default ./gpu-check-out) as one tarball and a summary.
# Needs python3 with torch, transformers and lightning; nothing of the portal itself.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-$PWD/gpu-check-out}
W=$(mktemp -d)
export PYTHONUNBUFFERED=1
cd "$W" || exit 1
# The sampler's own query, as jobs/rundir.py GPU_QUERY_FIELDS lists it.
Q=timestamp,index,uuid,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw

step() { echo "== $1 ($(date -u +%T))" | tee -a summary.txt; }

step "nvidia-smi as the sandbox's stand-in is asked"
nvidia-smi > nvidia-smi.txt 2>&1
nvidia-smi -L > nvidia-smi-L.txt 2>&1
nvidia-smi --query-gpu=$Q --format=csv > query-units.csv 2>&1
nvidia-smi --query-gpu=$Q,clocks.sm --format=csv,noheader > query-noheader.csv 2>&1
nvidia-smi --version > nvidia-smi-version.txt 2>&1

step "the sampler's command while a bf16 matmul load runs, then idle"
nvidia-smi --query-gpu=$Q --format=csv,noheader,nounits -l 1 > sampler.csv 2> sampler.err &
SAMPLER=$!
python3 "$HERE/load.py" 20 > load.txt 2>&1
sleep 4
kill $SAMPLER 2>/dev/null; wait $SAMPLER 2>/dev/null
tail -n 3 load.txt | tee -a summary.txt

step "examples/ddp_train.py under torchrun, NCCL, one GPU"
timeout 120 torchrun --standalone --nproc_per_node=1 "$ROOT/examples/ddp_train.py" \
  --steps 300 --batch-size 256 --checkpoint-every 100 --checkpoint-dir ckpt \
  --metrics-file ddp-metrics.jsonl > ddp.log 2>&1
echo "ddp rc=$?" | tee -a summary.txt
grep -m1 -i "nccl\|backend" ddp.log | tee -a summary.txt
tail -n 2 ddp.log | tee -a summary.txt

step "MFU of a GPT-2 124M training step, 6N rule against the FLOP counter"
timeout 150 python3 "$HERE/mfu.py" > mfu.log 2>&1
echo "mfu rc=$?" | tee -a summary.txt
tail -n 4 mfu.log | tee -a summary.txt

step "Hugging Face Trainer and Lightning, as a researcher runs them"
timeout 100 python3 "$HERE/frameworks.py" hf > hf_trainer.log 2>&1
echo "hf rc=$?" | tee -a summary.txt
timeout 100 python3 "$HERE/frameworks.py" lightning > lightning.log 2>&1
echo "lightning rc=$?" | tee -a summary.txt
python3 -c "import torch, transformers, lightning; print('torch', torch.__version__, 'transformers', transformers.__version__, 'lightning', lightning.__version__, 'nccl', torch.cuda.nccl.version())" | tee -a summary.txt

rm -rf ckpt
mkdir -p "$OUT"
cp summary.txt "$OUT/"
tar czf "$OUT/gpu-check.tar.gz" --exclude='*.pt' --exclude='lightning_logs' --exclude='hf-out' .
ls -la "$OUT"
