#!/usr/bin/env bash
# The GPU measurements worth keeping in data/measured/, as one command for a lent device machine (about 9
# minutes: GPT steps, DeepBench's GEMMs in four precisions, RNNs and convolutions in two, calibrate compute).
# Each part has its own time limit, so one that hangs leaves the others their time. The files are packed into
# $OUT/results.tgz after every part (the device tool returns 8 files at most; calibrate compute alone writes 4
# on a GPU), beside $OUT/log.txt. Afterwards unpack and copy them to data/measured/kernels-DEVICE-DATE/,
# steps-DEVICE-DATE/ and compute-DEVICE-DATE/, and the GPU's fitted profile (compute/profile-cuda.json) into the
# kernels and steps folders as profile.json: their rows are then predicted on it (calibrated) besides the
# preset (datasheet). Try it anywhere: OUT=/tmp/out bash benchmarks/device_run.sh (a CPU runs smaller sets).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
O=${OUT:?set OUT to the output folder}
W=$(mktemp -d)
pack() { tar czf "$O/results.tgz.tmp" -C "$W" . && mv "$O/results.tgz.tmp" "$O/results.tgz"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,power.limit --format=csv
  python3 -c "import torch, numpy, pandas, sympy; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), numpy.__version__, pandas.__version__, sympy.__version__)"
  date; timeout 130 python3 -m concurrency_model calibrate steps --budget-s 95 --out "$W/steps" --json; pack
  date; timeout 85 python3 -m concurrency_model calibrate kernels --ops gemm --dtypes fp32,tf32,fp16,bf16 --budget-s 60 --out "$W/kernels" --json; pack
  date; timeout 80 python3 -m concurrency_model calibrate kernels --ops rnn --dtypes fp32,fp16 --budget-s 55 --out "$W/kernels" --json; pack
  date; timeout 140 python3 -m concurrency_model calibrate kernels --ops conv --dtypes fp32,fp16 --budget-s 110 --out "$W/kernels" --json; pack
  date; timeout 90 python3 -m concurrency_model calibrate compute --quick --out "$W/compute" --json; pack
  date; nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
  tar tzf "$O/results.tgz"
} 2>&1 | tee "$O/log.txt"
