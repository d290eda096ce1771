"""Ctrl-C during a long run stops it with KeyboardInterrupt and leaves no output directory."""

import os
import signal
import subprocess
import sys
import time

JOB = """
import sys, qforge
print("started", flush=True)
try:
    qforge.quantize(sys.argv[1], backend="TensorRT", calib="random:normal,count=100000",
                    calib_batches=1000, calib_batch=100, out=sys.argv[2], quiet=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(7)
"""


def test_sigint_raises_keyboard_interrupt(tmp_path, resnet):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", JOB, resnet, str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=os.environ)
    assert proc.stdout.readline().strip() == "started"
    time.sleep(3)  # into calibration: 100,000 samples take far longer
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 7, stderr
    assert "interrupted" in stdout
    assert not out.exists()
