#!/usr/bin/env python3
"""Train a small PyTorch model under qshare's process executor.

It shows the contract a preemptible job keeps:
- it uses the GPUs qshare gives it (CUDA_VISIBLE_DEVICES holds exactly those);
- on SIGTERM it saves a checkpoint to SM_CHECKPOINT_DIR and exits before the
  grace period ends (QSHARE_STOP_GRACE, default 120 s);
- on its next attempt it resumes from that checkpoint;
- on an error it writes the reason to SM_OUTPUT_DIR/failure, which becomes
  the job's status reason.

Hyperparameters (SM_HPS): steps (default 3000), lr (0.01), step_seconds (0).
"""
import json
import os
import signal
import sys
import time

import torch
from torch import nn

ckpt_dir = os.environ["SM_CHECKPOINT_DIR"]
model_dir = os.environ["SM_MODEL_DIR"]
output_dir = os.environ["SM_OUTPUT_DIR"]
hps = json.loads(os.environ.get("SM_HPS", "{}"))
steps = int(hps.get("steps", 3000))
lr = float(hps.get("lr", 0.01))
step_seconds = float(hps.get("step_seconds", 0))
ckpt = os.path.join(ckpt_dir, "checkpoint.pt")

stopping = False


def on_sigterm(signum, frame):
    # Only note it: the loop saves a consistent checkpoint between steps.
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, on_sigterm)

device = "cuda" if torch.cuda.is_available() else "cpu"
info = {
    "attempt": os.environ.get("QSHARE_ATTEMPT"),
    "device": device,
    "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
    "SM_NUM_GPUS": os.environ.get("SM_NUM_GPUS"),
    "cuda_device_count": torch.cuda.device_count(),
}
if device == "cuda":
    props = torch.cuda.get_device_properties(0)
    info["gpu_name"] = props.name
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        info["gpu_uuid"] = "GPU-" + str(uuid)
print("qshare-job " + json.dumps(info), flush=True)

torch.manual_seed(int(os.environ.get("QSHARE_ATTEMPT", "1")))
model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 1)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=lr)
w_true = torch.randn(32, 1, generator=torch.Generator().manual_seed(1)).to(device)

step = 0
if os.path.exists(ckpt):
    state = torch.load(ckpt, map_location=device)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    step = state["step"]
    print(f"resumed from step {step}", flush=True)


def save():
    tmp = ckpt + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, tmp)
    os.replace(tmp, ckpt)  # whole or absent, never half written


try:
    while step < steps:
        x = torch.randn(512, 32, device=device)
        loss = nn.functional.mse_loss(model(x), x @ w_true)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 100 == 0:
            save()
            print(f"step {step} loss {loss.item():.5f}", flush=True)
        if stopping:
            save()
            print(f"SIGTERM at step {step}: checkpoint saved", flush=True)
            sys.exit(0)
        if step_seconds:
            time.sleep(step_seconds)
    save()
    torch.save(model.state_dict(), os.path.join(model_dir, "model.pt"))
    print(f"done at step {step} loss {loss.item():.5f}", flush=True)
except Exception as e:  # the first line becomes the job's status reason
    with open(os.path.join(output_dir, "failure"), "w") as f:
        f.write(f"{type(e).__name__}: {e}\n")
    raise
