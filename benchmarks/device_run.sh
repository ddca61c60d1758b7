#!/usr/bin/env bash
# The GPU measurements worth keeping in data/measured/, as one command for a lent device machine (about 9
# minutes: GPT steps, DeepBench's GEMMs in four precisions, RNNs and convolutions in two, calibrate compute).
# Each part has its own time limit, so one that hangs leaves the others their time. Files land under $OUT
# (8 at most come back: 3 kernel CSVs, the steps CSV, the compute profile's 3 files, the log). Afterwards
# copy them to data/measured/kernels-DEVICE-DATE/, steps-DEVICE-DATE/ and compute-DEVICE-DATE/, and the
# GPU's fitted profile (compute/profile-cuda.json) into the kernels and steps folders as profile.json: their
# rows are then predicted on it (calibrated) besides the preset (datasheet).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
O=${OUT:?set OUT to the output folder}
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,power.limit --format=csv
  python3 -c "import torch, numpy, pandas, sympy; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), numpy.__version__, pandas.__version__, sympy.__version__)"
  date; timeout 130 python3 -m concurrency_model calibrate steps --budget-s 95 --out "$O/steps" --json
  date; timeout 85 python3 -m concurrency_model calibrate kernels --ops gemm --dtypes fp32,tf32,fp16,bf16 --budget-s 60 --out "$O/kernels" --json
  date; timeout 80 python3 -m concurrency_model calibrate kernels --ops rnn --dtypes fp32,fp16 --budget-s 55 --out "$O/kernels" --json
  date; timeout 140 python3 -m concurrency_model calibrate kernels --ops conv --dtypes fp32,fp16 --budget-s 110 --out "$O/kernels" --json
  date; timeout 90 python3 -m concurrency_model calibrate compute --quick --out "$O/compute" --json
  date; nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
} 2>&1 | tee "$O/log.txt"
